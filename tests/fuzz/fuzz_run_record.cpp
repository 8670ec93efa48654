// Fuzzes run records (tpstudio-cli report, the GUI's results) and their reporters on what parses.
#include "tp/profile/run_record.h"

#include <cstdint>
#include <sstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string text(reinterpret_cast<const char*>(data), size);
    auto rec = tp::parseRunRecord(text, "fuzz/run.json");
    if (!rec.ok())
        return 0;
    std::ostringstream sink;
    tp::writeChromeTrace(*rec, sink);
    tp::writeCsv(*rec, sink);
    tp::writeConsole(*rec, sink);
    // What the reporters write from a parsed record parses again.
    std::ostringstream json;
    tp::writeJson(*rec, json);
    if (!tp::parseRunRecord(json.str(), "fuzz/again.json").ok())
        __builtin_trap();
    return 0;
}
