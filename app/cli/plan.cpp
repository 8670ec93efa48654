// plan.cpp — `tpstudio-cli plan show|validate|export`: key matching, divisibility and export.
#include "commands.h"

#include "tp/model/loader.h"
#include "tp/plan/plan_io.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>

namespace tpcli {

namespace {

struct PlanOpts
{
    std::string model;
    std::string planFile;
    std::string profile = "G3";
    std::string output;
    int tp = 2;
    bool json = false;
};

enum class Mode { Show, Validate, Export };

void addCommon(CLI::App* cmd, PlanOpts& o)
{
    cmd->add_option("MODEL", o.model, "Folder, config.json, .safetensors, HF cache repo id or catalog id")->required();
    cmd->add_option("--plan", o.planFile, "Plan JSON ({\"tp_size\", \"tp_plan\"} or a bare key → style dict); "
                                          "default: the model's default tp_plan");
    cmd->add_option("--tp", o.tp, "Tensor-parallel size (overrides the file's tp_size)")->check(CLI::Range(1, 4096));
    cmd->add_option("--profile", o.profile, "Transformers generation: G1 (4.50-4.57), G2 (5.1-5.15), G3 (current)")
        ->check(CLI::IsMember({"G1", "G2", "G3"}))
        ->capture_default_str();
}

int run(Mode mode, const PlanOpts& o, bool tpGiven)
{
    const char* verb = mode == Mode::Show ? "plan show" : mode == Mode::Validate ? "plan validate" : "plan export";
    auto om = tp::openModel(o.model);
    if (!om) {
        fmt::print(stderr, "tpstudio-cli {}: {}\n", verb, om.status().message());
        return kBadInput;
    }
    const tp::VersionProfile profile = *tp::profileFromName(o.profile);
    tp::Plan plan = tp::defaultPlan(om->spec, o.tp, profile);
    if (!o.planFile.empty()) {
        auto p = tp::loadPlanFile(o.planFile, profile);
        if (!p) {
            fmt::print(stderr, "tpstudio-cli {}: {}\n", verb, p.status().message());
            return kBadInput;
        }
        plan = std::move(*p);
        if (tpGiven || plan.tpSize == 1)
            plan.tpSize = o.tp;
    }
    const tp::PlanMatch m = tp::matchPlan(om->spec, plan);
    const bool errors = tp::hasErrors(m.diagnostics);

    if (mode == Mode::Export) {
        if (errors) {
            for (const auto& d : m.diagnostics)
                if (d.severity == tp::Severity::Error)
                    fmt::print(stderr, "error   {}: {}\n", d.where, d.message);
            fmt::print(stderr, "tpstudio-cli plan export: the plan has errors; nothing written\n");
            return kBadInput;
        }
        const std::string text = tp::planToJson(plan);
        if (o.output.empty()) {
            std::cout << text;
        } else {
            std::ofstream out(o.output);
            out << text;
            if (!out) {
                fmt::print(stderr, "tpstudio-cli plan export: {}: cannot write\n", o.output);
                return kBadInput;
            }
        }
        return kOk;
    }

    if (o.json) {
        nlohmann::ordered_json j;
        j["model"] = om->spec.source;
        j["class"] = om->spec.className;
        j["tp_size"] = plan.tpSize;
        j["profile"] = tp::profileName(profile);
        auto entries = nlohmann::ordered_json::array();
        for (std::size_t i = 0; i < plan.entries.size(); ++i)
            entries.push_back({{"key", plan.entries[i].key}, {"style", plan.entries[i].style}, {"matches", m.entryMatches[i]}});
        j["entries"] = entries;
        auto diags = nlohmann::ordered_json::array();
        for (const auto& d : m.diagnostics)
            diags.push_back({{"severity", tp::severityName(d.severity)}, {"where", d.where}, {"message", d.message}, {"hint", d.hint}});
        j["diagnostics"] = diags;
        j["valid"] = !errors;
        std::cout << j.dump(2) << "\n";
        return errors ? kBadInput : kOk;
    }
    fmt::print("{} at tp_size {} (profile {})\n\n", om->spec.className, plan.tpSize, tp::profileName(profile));
    if (mode == Mode::Show) {
        fmt::print("{:<56} {:<30} {:>7}  {}\n", "key", "style", "matches", "forward collective");
        const auto& reg = tp::StyleRegistry::builtin();
        for (std::size_t i = 0; i < plan.entries.size(); ++i) {
            const tp::Style* s = reg.find(plan.entries[i].style, profile);
            fmt::print("{:<56} {:<30} {:>7}  {}\n", plan.entries[i].key, plan.entries[i].style, m.entryMatches[i],
                       s ? tp::collectiveName(s->forward) : "?");
        }
        fmt::print("\n");
    }
    std::size_t shown = 0;
    for (const auto& d : m.diagnostics) {
        if (mode == Mode::Validate && d.severity == tp::Severity::Info)
            continue;
        fmt::print("{:<7} {}: {}{}\n", tp::severityName(d.severity), d.where, d.message,
                   d.hint.empty() ? "" : "\n        hint: " + d.hint);
        ++shown;
    }
    fmt::print("{}{}\n", shown ? "\n" : "", errors ? "INVALID: the plan has errors" : "valid");
    return errors ? kBadInput : kOk;
}

} // namespace

std::function<int()> addPlan(CLI::App& app)
{
    auto* plan = app.add_subcommand("plan", "Check a tp_plan against a model and export it for Transformers");
    plan->require_subcommand(1);
    auto o = std::make_shared<PlanOpts>();
    auto* show = plan->add_subcommand("show", "List every key with its style, how many modules/parameters it matches, "
                                              "its forward collective, and the diagnostics");
    auto* validate = plan->add_subcommand("validate", "Report errors and warnings; exit 1 when the plan has errors");
    auto* exp = plan->add_subcommand("export", "Print {\"tp_size\", \"tp_plan\"} as DistributedConfig(**json.load(f)) "
                                               "loads it (parameter keys before module keys)");
    for (auto* c : {show, validate, exp})
        addCommon(c, *o);
    show->add_flag("--json", o->json, "Print JSON");
    validate->add_flag("--json", o->json, "Print JSON");
    exp->add_option("-o,--output", o->output, "Write to this file instead of standard output");
    return [o, show, validate, exp] {
        auto* sub = show->parsed() ? show : validate->parsed() ? validate : exp;
        const bool tpGiven = sub->count("--tp") > 0;
        return run(show->parsed() ? Mode::Show : validate->parsed() ? Mode::Validate : Mode::Export, *o, tpGiven);
    };
}

} // namespace tpcli
