// commands.h — the verbs of tpstudio-cli. Each registers its options on a CLI11 subcommand and
// returns the process exit code: 0 ok, 1 bad input, 2 usage.
#pragma once

#include "tp/core/status.h"
#include "tp/plan/style.h"

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace tp {
struct OpenedModel;
struct ModelSpec;
}

namespace tpcli {

enum ExitCode { kOk = 0, kBadInput = 1, kUsage = 2 };

// Registers the verb; the returned callback runs it after parsing.
std::function<int()> addInspect(CLI::App& app);
std::function<int()> addCatalog(CLI::App& app);
std::function<int()> addFamilies(CLI::App& app);
std::function<int()> addBench(CLI::App& app);
std::function<int()> addPlan(CLI::App& app);
std::function<int()> addRun(CLI::App& app);
std::function<int()> addReport(CLI::App& app);
std::function<int()> addDevices(CLI::App& app);
// Why the (option, path) outputs cannot be written, checked before the verb works: a path that is
// one of the inputs (a file, or a file in an input folder) or another output, a directory, a
// missing or unwritable folder. Empty when they are fine; empty paths are skipped.
std::string checkOutputPaths(const std::vector<std::pair<std::string, std::string>>& outputs,
                             const std::vector<std::string>& inputs);

// Writes an output whole or not at all: into a temporary file beside it, closed and checked, then
// renamed over `path`. Empty on success, else why (the file is left as it was).
std::string writeOutput(const std::string& path, const std::function<void(std::ostream&)>& write);

// A byte-count option: a finite number with an optional K, M, G or T suffix (powers of 1024), from
// 1 byte to 1T; anything else is a usage error naming the option.
CLI::Option* addSizeOption(CLI::App* cmd, const char* flags, std::int64_t& target, const char* help);

// A comma-separated list of integers in lo..hi, every element present ("1,,2" and "1," are usage
// errors, not "1,2").
CLI::Option* addIntListOption(CLI::App* cmd, const char* flags, std::vector<int>& target, int lo, int hi,
                              const std::string& help);

// Every number option of `app` and its subcommands reads decimal. Integers (CLI11 type INT or UINT):
// leading zeros are dropped ("010" is 10, not octal 8) and 0x / 0b / 0o prefixes are refused; reals
// (FLOAT): digits with an optional point and exponent, no hex float, inf or nan. Each refusal names
// the option. Options that parse their own text (--seed) are left as they are. Called once every verb
// is registered.
void makeNumbersDecimal(CLI::App& app);
// Why `text` is not a decimal whole number (empty when it is); it loses its leading zeros.
std::string decimalInteger(std::string& text);
// Why `text` is not a decimal number such as 2, 0.5 or 1e3 (empty when it is).
std::string decimalNumber(const std::string& text);

// A path or id option that was given must not be empty ("--plan ''" is not "no plan").
inline const CLI::Validator kNonEmpty(
    [](std::string& v) { return v.empty() ? std::string("an empty value; name a file, folder or id") : std::string(); }, "",
    "non-empty");

// Why the module tree of `om` would not fit in host memory as a sharded graph (manyGraphs: a
// preview's or a search's, which build graphs of other sizes too), before it is built; empty when
// it fits. The graph takes about 1.3 KiB per module, 3 KiB with a preview's (a 20,000-layer Llama).
std::string treeTooLarge(const tp::OpenedModel& om, const std::string& model, bool manyGraphs);
std::string treeTooLarge(std::int64_t modules, const std::string& model, bool manyGraphs);

// `plan verify`, registered under `plan`; returns -1 when another plan verb was chosen.
std::function<int()> addPlanVerify(CLI::App* plan);

// `bench comm`, registered under `bench`; returns -1 when another bench verb was chosen.
std::function<int()> addBenchComm(CLI::App* bench);

// bench comm's out-of-place times (data checked) of all-reduce, all-gather, reduce-scatter and
// all-to-all from 8 bytes to maxBytes (× factor) on the local or NCCL communicator of `ranks` threads.
struct CollectiveTiming
{
    tp::CollectiveKind kind = tp::CollectiveKind::None;
    std::int64_t bytes = 0;
    double us = 0;
};
tp::Result<std::vector<CollectiveTiming>> timeCollectives(const std::string& comm, int ranks, const std::string& dtype,
                                                          std::int64_t maxBytes, int factor, int iters);

// The (out, in) shapes of rank 0's Linear weights for the model's default plan at tp size T.
std::vector<std::pair<std::int64_t, std::int64_t>> linearShapes(const tp::ModelSpec& spec, int tp);

// `calibrate`: measure this machine into a hardware profile.
std::function<int()> addCalibrate(CLI::App& app);

} // namespace tpcli
