// commands.h — the verbs of tpstudio-cli. Each registers its options on a CLI11 subcommand and
// returns the process exit code: 0 ok, 1 bad input, 2 usage.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace tpcli {

enum ExitCode { kOk = 0, kBadInput = 1, kUsage = 2 };

// Registers the verb; the returned callback runs it after parsing.
std::function<int()> addInspect(CLI::App& app);
std::function<int()> addCatalog(CLI::App& app);
std::function<int()> addBench(CLI::App& app);
std::function<int()> addPlan(CLI::App& app);
std::function<int()> addRun(CLI::App& app);
std::function<int()> addReport(CLI::App& app);
std::function<int()> addDevices(CLI::App& app);
// `bench comm`, registered under `bench`; returns -1 when another bench verb was chosen.
std::function<int()> addBenchComm(CLI::App* bench);

} // namespace tpcli
