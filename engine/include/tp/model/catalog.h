// catalog.h — built-in model configs (values from each model's public config.json), embedded in
// the binary so that the planner works with no model files at all.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tp {

struct CatalogEntry
{
    std::string id;          // short id: "llama-3.1-8b"
    std::string repoId;      // Hugging Face repo id: "meta-llama/Llama-3.1-8B"
    std::string displayName;
    std::string_view configJson;
    bool runnable = false;   // small enough to execute on the CPU engine
    // The dtype the checkpoint ships in, for a config that names none (else empty): what Transformers'
    // dtype="auto" would take from the weights.
    std::string_view shippedDtype = {};
};

const std::vector<CatalogEntry>& catalog();
// By id or repo id, case-insensitive; nullptr when absent.
const CatalogEntry* findCatalogEntry(std::string_view idOrRepo);
inline constexpr std::string_view kExampleModelId = "example";

} // namespace tp
