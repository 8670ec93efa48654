// tpstudio-cli — headless front end of the TP Studio engine.
#include "commands.h"

#include <cstdio>
#include <exception>
#include <iostream>
#include <map>

int main(int argc, char** argv)
{
    CLI::App app{"TP Studio command line: inspect models, plan and profile tensor parallelism", "tpstudio-cli"};
    app.set_version_flag("--version", std::string("tpstudio-cli ") + TP_VERSION);
    app.require_subcommand(1);
    app.footer("Exit codes: 0 ok, 1 bad input, 2 usage.\nRun 'tpstudio-cli VERB --help' for a verb's options.");

    std::map<CLI::App*, std::function<int()>> verbs;
    auto add = [&](auto registrar) {
        auto before = app.get_subcommands({});
        auto run = registrar(app);
        auto after = app.get_subcommands({});
        for (auto* s : after)
            if (std::find(before.begin(), before.end(), s) == before.end())
                verbs[s] = run;
    };
    add(tpcli::addInspect);
    add(tpcli::addCatalog);
    add(tpcli::addPlan);
    add(tpcli::addRun);
    add(tpcli::addReport);
    add(tpcli::addBench);
    add(tpcli::addDevices);

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        app.exit(e);
        return tpcli::kUsage;
    }
    for (auto& [sub, run] : verbs)
        if (sub->parsed()) {
            int code = tpcli::kUsage;
            try {
                code = run();
            } catch (const std::exception& e) { // nothing escapes as an abort
                std::fprintf(stderr, "tpstudio-cli %s: %s\n", sub->get_name().c_str(), e.what());
                code = tpcli::kBadInput;
            }
            // What went to standard output must have arrived (a full disk or a closed pipe is an error).
            std::cout.flush();
            if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout)) {
                std::fprintf(stderr, "tpstudio-cli %s: cannot write to standard output\n", sub->get_name().c_str());
                return code == tpcli::kOk ? tpcli::kBadInput : code;
            }
            return code;
        }
    return tpcli::kUsage;
}
