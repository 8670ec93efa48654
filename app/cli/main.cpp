// tpstudio-cli — headless front end of the TP Studio engine.
#include "commands.h"
#include "../class_plan_source.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/prctl.h>
#include <unistd.h>
#include <exception>
#include <iostream>
#include <map>
#include <string_view>

int main(int argc, char** argv)
{
    // A path is at most PATH_MAX (4096) bytes, and no option value needs more, but for token ids:
    // anything longer is refused before it can be echoed into a message.
    for (int i = 1; i < argc; ++i) {
        const std::string_view a(argv[i]), prev(argv[i - 1]);
        if (a.size() > 4096 && prev != "--tokens" && !a.starts_with("--tokens=")) {
            if (prev.starts_with("-"))
                std::fprintf(stderr, "tpstudio-cli: the value of %s is %zu bytes long; paths and values are at most 4096\n",
                             argv[i - 1], a.size());
            else
                std::fprintf(stderr, "tpstudio-cli: argument %d is %zu bytes long; paths and values are at most 4096\n", i,
                             a.size());
            return tpcli::kUsage;
        }
    }

    // Started by the GUI (which names itself in TPSTUDIO_PARENT_PID): SIGTERM when the GUI ends,
    // however it ends, so that no run, calibration or verification outlives it.
    if (const char* parent = std::getenv("TPSTUDIO_PARENT_PID"); parent && std::to_string(::getppid()) == parent)
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);

    tpapp::installClassPlanSource();
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
    add(tpcli::addFamilies);
    add(tpcli::addPlan);
    add(tpcli::addRun);
    add(tpcli::addReport);
    add(tpcli::addBench);
    add(tpcli::addDevices);
    add(tpcli::addCalibrate);
    tpcli::makeNumbersDecimal(app);

    // Help and the version go to standard output, which must take them (a full disk is an error).
    auto printed = [](int code) {
        std::cout.flush();
        if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout)) {
            std::fprintf(stderr, "tpstudio-cli: cannot write to standard output\n");
            return int(tpcli::kBadInput);
        }
        return code;
    };
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return printed(app.exit(e));
    } catch (const CLI::CallForAllHelp& e) {
        return printed(app.exit(e));
    } catch (const CLI::CallForVersion& e) {
        return printed(app.exit(e));
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
