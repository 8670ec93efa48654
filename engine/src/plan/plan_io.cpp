#include "tp/plan/plan_io.h"

#include "tp/core/json.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <functional>
#include <sstream>

namespace tp {

Result<Plan> parsePlanJson(std::string_view text, const std::string& source, VersionProfile profile)
{
    nlohmann::ordered_json j;
    try {
        j = nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        return invalidArgument(fmt::format("{}: plan is not valid JSON: {}", source, e.what()));
    }
    if (!j.is_object())
        return invalidArgument(fmt::format("{}: a plan must be a JSON object", source));
    Plan plan;
    plan.profile = profile;
    const nlohmann::ordered_json* map = &j;
    if (j.contains("tp_plan")) {
        map = &j["tp_plan"];
        if (j.contains("tp_size") && !j["tp_size"].is_null()) {
            if (!j["tp_size"].is_number_unsigned() || j["tp_size"].get<std::uint64_t>() < 1 || j["tp_size"].get<std::uint64_t>() > 4096)
                return invalidArgument(fmt::format("{}: key 'tp_size' must be a positive integer, found {}", source, j["tp_size"].dump()));
            plan.tpSize = static_cast<int>(j["tp_size"].get<std::uint64_t>());
        }
        if (map->is_string())
            return invalidArgument(fmt::format("{}: key 'tp_plan' is \"{}\"; TP Studio needs the explicit plan (use the "
                                               "model's default plan instead of \"auto\")",
                                               source, map->get<std::string>()));
        if (!map->is_object())
            return invalidArgument(fmt::format("{}: key 'tp_plan' must be an object of key → style", source));
    }
    for (auto it = map->begin(); it != map->end(); ++it) {
        if (!it.value().is_string())
            return invalidArgument(fmt::format("{}: key 'tp_plan.{}' must name a style, found {}", source, it.key(),
                                               it.value().dump()));
        if (it.key().empty())
            return invalidArgument(fmt::format("{}: an empty key in tp_plan", source));
        plan.entries.push_back({it.key(), it.value().get<std::string>()});
    }
    return plan;
}

Result<Plan> loadPlanFile(const std::string& path, VersionProfile profile)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return notFound(fmt::format("{}: cannot open", path));
    std::ostringstream ss;
    ss << in.rdbuf();
    if (ss.str().size() > 16u * 1024 * 1024)
        return invalidArgument(fmt::format("{}: larger than 16 MiB, not a plan", path));
    return parsePlanJson(ss.str(), path, profile);
}

std::vector<PlanEntry> exportOrder(const std::vector<PlanEntry>& entries)
{
    // A module key must follow every key below it ("…experts.gate_up_proj" before "…experts").
    std::vector<PlanEntry> out;
    std::vector<bool> placed(entries.size(), false);
    auto isBelow = [](const std::string& child, const std::string& parent) {
        return child.size() > parent.size() + 1 && child.starts_with(parent) && child[parent.size()] == '.';
    };
    std::function<void(std::size_t)> place = [&](std::size_t i) {
        if (placed[i])
            return;
        placed[i] = true;
        for (std::size_t k = 0; k < entries.size(); ++k)
            if (!placed[k] && isBelow(entries[k].key, entries[i].key))
                place(k);
        out.push_back(entries[i]);
    };
    for (std::size_t i = 0; i < entries.size(); ++i)
        place(i);
    return out;
}

std::string planToJson(const Plan& plan)
{
    nlohmann::ordered_json map = nlohmann::ordered_json::object();
    for (const auto& e : exportOrder(plan.entries))
        if (!map.contains(e.key))
            map[e.key] = e.style;
    nlohmann::ordered_json j;
    j["tp_size"] = plan.tpSize;
    j["tp_plan"] = std::move(map);
    return j.dump(2) + "\n";
}

} // namespace tp
