// report.cpp — `tpstudio-cli report RECORD`: re-render a saved run record (console table, Chrome
// trace, CSV) without running anything.
#include "commands.h"

#include "tp/core/file.h"
#include "tp/core/json.h"
#include "tp/core/units.h"
#include "tp/cost/compare.h"
#include "tp/model/loader.h"
#include "tp/plan/plan_io.h"
#include "tp/runtime/backend.h"

#include "tp/profile/run_record.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace tpcli {

namespace {

std::string pct(double e) { return fmt::format("{:+.1f}%", 100 * e); }

// The record's measured layers and phases next to the prediction on `hardware` for its own model,
// plan and settings (the model and a plan file reopened as the record names them).
int comparePrediction(const tp::RunRecord& rec, const std::string& hardware, bool json)
{
    auto fail = [](const std::string& m) {
        fmt::print(stderr, "tpstudio-cli report: {}\n", m);
        return int(kBadInput);
    };
    auto hw = tp::findHardware(hardware);
    if (!hw)
        return fail(hw.status().message());
    // The model and plan as the record names them: absolute paths (or ids) held to the record's
    // digests. A record from before them names its files as they were given, relative to wherever
    // it was run: reopened unchecked, and said so.
    const auto& s = rec.settings;
    const std::string model = s.modelPath.empty() ? s.model : s.modelPath;
    const std::string planFile = s.planPath.empty() ? s.plan : s.planPath;
    if (s.modelDigest.empty())
        fmt::print(stderr, "tpstudio-cli report: warning: the record has no digest of its model and plan (written before "
                           "they were recorded): '{}' is reopened as named, relative to this folder, unchecked\n",
                   tp::terminalSafe(model));
    auto om = tp::openModel(model);
    if (!om)
        return fail(fmt::format("the record's model: {}", om.status().message()));
    if (const std::string why = treeTooLarge(*om, model, false); !why.empty())
        return fail(why);
    tp::Plan plan = tp::defaultPlan(om->spec, 1);
    if (s.plan != "default plan") {
        auto p = tp::loadPlanFile(planFile, tp::VersionProfile::G3);
        if (!p)
            return fail(fmt::format("the record's plan: {}", p.status().message()));
        plan = tp::resolveOverrides(om->spec, *p);
    }
    const auto text = tp::configText(*om);
    auto cmp = tp::compareRecord(rec, om->spec, text ? std::string_view(*text) : std::string_view(), plan, *hw);
    if (!cmp)
        return fail(cmp.status().message());
    if (json) {
        auto runs = nlohmann::ordered_json::array();
        auto phaseJson = [](const tp::PhaseComparison& p) {
            auto layers = nlohmann::ordered_json::array();
            for (const auto& l : p.layers)
                layers.push_back({{"layer", l.layer}, {"measured_us", l.measuredUs}, {"predicted_us", l.predictedUs},
                                  {"predicted_compute_us", l.predictedComputeUs}, {"predicted_comm_us", l.predictedCommUs},
                                  {"error", l.error()}});
            return nlohmann::ordered_json{{"measured_us", p.measuredUs}, {"predicted_us", p.predictedUs}, {"error", p.error()},
                                          {"worst_layer_error", p.worstLayerError()}, {"layers", layers}};
        };
        for (const auto& c : *cmp) {
            nlohmann::ordered_json r{{"tp", c.tp}, {"prefill", phaseJson(c.prefill)}};
            if (c.decode) {
                r["decode"] = phaseJson(*c.decode);
                r["decode"]["context"] = c.decodeContext;
            }
            runs.push_back(r);
        }
        std::cout << nlohmann::ordered_json{{"hardware", hw->id}, {"model", model}, {"runs", runs}}.dump(2, ' ', false, tp::kReplaceInvalidUtf8)
                  << "\n";
        return int(kOk);
    }
    fmt::print("Measured vs predicted on {} ({}): {} · batch {} · prompt {} · logits {}\n", hw->id, hw->name,
               tp::terminalSafe(model), rec.settings.batch, rec.settings.seq, rec.settings.logits);
    for (const auto& c : *cmp) {
        fmt::print("\nT={}  per layer, slowest rank: compute + communication, median of the samples (µs)\n", c.tp);
        fmt::print("  {:<7} {:>11} {:>11} {:>8}", "layer", "prefill", "predicted", "error");
        if (c.decode)
            fmt::print(" {:>11} {:>11} {:>8}", "decode", "predicted", "error");
        fmt::print("\n");
        for (std::size_t i = 0; i < c.prefill.layers.size(); ++i) {
            const auto& l = c.prefill.layers[i];
            fmt::print("  {:<7} {:>11.1f} {:>11.1f} {:>8}", l.layer < 0 ? "other" : std::to_string(l.layer), l.measuredUs,
                       l.predictedUs, pct(l.error()));
            if (c.decode && i < c.decode->layers.size()) {
                const auto& d = c.decode->layers[i];
                fmt::print(" {:>11.1f} {:>11.1f} {:>8}", d.measuredUs, d.predictedUs, pct(d.error()));
            }
            fmt::print("\n");
        }
        fmt::print("  prefill (median forward) {} measured, {} predicted ({}); worst layer {}\n", tp::humanSeconds(c.prefill.measuredUs * 1e-6),
                   tp::humanSeconds(c.prefill.predictedUs * 1e-6), pct(c.prefill.error()), pct(c.prefill.worstLayerError()));
        if (c.decode)
            fmt::print("  decode (median step, context {}) {} measured, {} predicted ({}); worst layer {}\n", c.decodeContext,
                       tp::humanSeconds(c.decode->measuredUs * 1e-6), tp::humanSeconds(c.decode->predictedUs * 1e-6),
                       pct(c.decode->error()), pct(c.decode->worstLayerError()));
    }
    return int(kOk);
}

} // namespace

std::function<int()> addReport(CLI::App& app)
{
    struct Opts
    {
        std::string record, trace, csv, hardware;
        bool json = false;
    };
    auto o = std::make_shared<Opts>();
    auto* cmd = app.add_subcommand("report", "Show a saved run record (tpstudio-cli run --json) and convert it to a "
                                             "Chrome trace or CSV");
    cmd->add_option("RECORD", o->record, "Run record JSON (schema tpstudio.run/2 or /1)")->required();
    cmd->add_option("--trace", o->trace, "Write Chrome trace-event JSON");
    cmd->add_option("--csv", o->csv, "Write the spans as CSV");
    cmd->add_option("--hardware", o->hardware,
                    "Instead of the record's tables: its measured time per layer and phase next to what this hardware "
                    "profile predicts for the same model, plan and settings (built-in id, calibrated id or file)")
        ->check(kNonEmpty);
    cmd->add_flag("--json", o->json, "With --hardware: print the comparison as JSON");
    return [o] {
        if (const std::string bad = checkOutputPaths({{"--trace", o->trace}, {"--csv", o->csv}}, {o->record}); !bad.empty()) {
            fmt::print(stderr, "tpstudio-cli report: {}\n", bad);
            return int(kBadInput);
        }
        // Parsed, a record takes some 8× its size (measured: 36 MB of spans, 260 MB): one that would not
        // fit is refused before it is read.
        std::error_code ec;
        if (const auto size = std::filesystem::file_size(o->record, ec); !ec)
            if (const std::int64_t need = 10 * static_cast<std::int64_t>(size), have = tp::hostMemoryAvailable(); need > have) {
                fmt::print(stderr, "tpstudio-cli report: {}: a record of {} needs about {} of memory to read, and {} is available\n",
                           o->record, tp::humanBytes(static_cast<double>(size)), tp::humanBytes(static_cast<double>(need)),
                           tp::humanBytes(static_cast<double>(have)));
                return int(kBadInput);
            }
        const auto text = tp::readInputFile(o->record, std::int64_t(1) << 30, "a run record");
        if (!text) {
            fmt::print(stderr, "tpstudio-cli report: {}\n", text.status().message());
            return int(kBadInput);
        }
        auto rec = tp::parseRunRecord(*text, o->record);
        if (!rec) {
            fmt::print(stderr, "tpstudio-cli report: {}\n", rec.status().message());
            return int(kBadInput);
        }
        for (const auto& [path, write] : {std::pair<std::string, void (*)(const tp::RunRecord&, std::ostream&)>{o->trace, tp::writeChromeTrace},
                                          {o->csv, tp::writeCsv}}) {
            if (path.empty())
                continue;
            if (const std::string bad = writeOutput(path, [&](std::ostream& out) { write(*rec, out); }); !bad.empty()) {
                fmt::print(stderr, "tpstudio-cli report: {}\n", bad);
                return int(kBadInput);
            }
        }
        if (!o->hardware.empty())
            return comparePrediction(*rec, o->hardware, o->json);
        tp::writeConsole(*rec, std::cout);
        return int(kOk);
    };
}

} // namespace tpcli
