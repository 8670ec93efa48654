#include "class_plan_source.h"

#include "tp/model/loader.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <csignal>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace tp {
const std::vector<std::pair<std::string_view, std::string_view>>& verifyFiles(); // verify_script.cpp, made by CMake
}

namespace tpapp {

namespace {

constexpr std::size_t kMaxOutput = 1 << 20; // a plan's JSON line is a few KiB
constexpr int kTimeoutMs = 120'000;

// Runs python on the embedded script's class-plan and returns its last stdout line (at most kMaxOutput bytes read).
tp::Result<std::string> runClassPlan(const std::string& python, const std::string& modelType)
{
    // The script goes as `-c` (nothing is written to disk, so an interrupt leaves nothing behind); an argument is at most
    // MAX_ARG_STRLEN (128 KiB) long.
    const std::string_view script = tp::verifyFiles().front().second;
    if (script.size() >= 128 * 1024)
        return tp::internalError(fmt::format("the embedded tp_verify.py ({} bytes) is too long to pass with -c", script.size()));
    std::vector<std::string> args = {python, "-c", std::string(script), "class-plan", modelType};
    std::vector<char*> argv;
    for (auto& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    if (::pipe(fds) != 0)
        return tp::internalError("cannot create a pipe");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0); // Transformers' warnings
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    pid_t pid = 0;
    const int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(fds[1]);
    if (rc != 0) {
        ::close(fds[0]);
        return tp::notFound(fmt::format("cannot run the Python '{}' (TPSTUDIO_PYTHON): {}", python, std::strerror(rc)));
    }
    // Importing Transformers takes seconds; a Python not done in kTimeoutMs is stopped.
    std::string out;
    char buf[4096];
    bool timedOut = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kTimeoutMs);
    for (;;) {
        if (std::chrono::steady_clock::now() >= deadline) {
            timedOut = true;
            ::kill(pid, SIGKILL);
            break;
        }
        pollfd p{fds[0], POLLIN, 0};
        const int ready = ::poll(&p, 1, 1000);
        if (ready == 0 || (ready < 0 && errno == EINTR))
            continue;
        const ssize_t n = ::read(fds[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (out.size() < kMaxOutput)
            out.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fds[0]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (timedOut)
        return tp::invalidArgument(fmt::format("the Python '{}' (TPSTUDIO_PYTHON) gave no class-plan answer in {} s; stopped",
                                               python, kTimeoutMs / 1000));
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r'))
        out.pop_back();
    if (const auto nl = out.rfind('\n'); nl != std::string::npos)
        out = out.substr(nl + 1);
    if (out.empty())
        return tp::invalidArgument(fmt::format("the Python '{}' (TPSTUDIO_PYTHON) printed nothing for class-plan (exit {})", python,
                                               WIFEXITED(status) ? WEXITSTATUS(status) : -1));
    return out;
}

tp::Result<tp::ExternalClassPlans> classPlans(const std::string& python, const std::string& modelType)
{
    // A model type is a Python identifier-like key of CONFIG_MAPPING; anything else is not asked about.
    const bool plain = !modelType.empty() && modelType.size() <= 100
        && modelType.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") == std::string::npos;
    if (!plain)
        return tp::invalidArgument("its model_type is not a name Transformers could map");
    TP_ASSIGN_OR_RETURN(std::string line, runClassPlan(python, modelType));
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object())
        return tp::invalidArgument(fmt::format("the Python '{}' (TPSTUDIO_PYTHON) answered class-plan with no JSON", python));
    if (j.contains("error") && j["error"].is_string())
        return tp::notFound(j["error"].get<std::string>() + " (TPSTUDIO_PYTHON)");
    tp::ExternalClassPlans out;
    out.origin = j.value("origin", python) + " (TPSTUDIO_PYTHON)";
    auto read = [&](const char* key, std::vector<std::pair<std::string, std::string>>& to) {
        if (auto it = j.find(key); it != j.end() && it->is_array())
            for (const auto& e : *it)
                if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string())
                    to.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    };
    read("base_model_tp_plan", out.plans.baseTp);
    read("base_model_ep_plan", out.plans.baseEp);
    read("head_tp_plan", out.plans.head);
    return out;
}

} // namespace

void installClassPlanSource()
{
    const char* env = std::getenv("TPSTUDIO_PYTHON");
    if (!env || !*env)
        return;
    tp::setClassPlanSource([python = std::string(env)](const std::string& modelType) { return classPlans(python, modelType); });
}

} // namespace tpapp
