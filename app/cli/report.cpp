// report.cpp — `tpstudio-cli report RECORD`: re-render a saved run record (console table, Chrome
// trace, CSV) without running anything.
#include "commands.h"

#include "tp/core/file.h"
#include "tp/core/units.h"
#include "tp/runtime/backend.h"

#include "tp/profile/run_record.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace tpcli {

std::function<int()> addReport(CLI::App& app)
{
    struct Opts
    {
        std::string record, trace, csv;
    };
    auto o = std::make_shared<Opts>();
    auto* cmd = app.add_subcommand("report", "Show a saved run record (tpstudio-cli run --json) and convert it to a "
                                             "Chrome trace or CSV");
    cmd->add_option("RECORD", o->record, "Run record JSON (schema tpstudio.run/2 or /1)")->required();
    cmd->add_option("--trace", o->trace, "Write Chrome trace-event JSON");
    cmd->add_option("--csv", o->csv, "Write the spans as CSV");
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
        tp::writeConsole(*rec, std::cout);
        return int(kOk);
    };
}

} // namespace tpcli
