// verify.cpp — `tpstudio-cli plan verify`: a plan checked against Hugging Face Transformers' own
// tensor parallelism. The work is tp_verify.py's (embedded in this binary, run by the Python the
// user names): Transformers runs the exported plan under torch.distributed.run (CPU, gloo), every
// collective it issues is counted with its bytes and compared with `plan preview`, and its logits
// with the engine's. This verb checks what it can first (the model, the plan at T, the output path,
// the Python and its packages), so that a mistake is named before anything slow starts.
#include "commands.h"
#include "../script_dir.h"
#include "interruption.h"

#include "tp/core/json.h"
#include "tp/model/catalog.h"
#include "tp/model/loader.h"
#include "tp/plan/plan_io.h"
#include "tp/shard/sharded_graph.h"

#include <fmt/format.h>

#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <spawn.h>
#include <string_view>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace tpcli {

namespace {

namespace fs = std::filesystem;

struct VerifyOpts
{
    std::string model;
    std::string planFile;
    std::string python;
    std::string reduce = "auto";
    std::string json;
    std::int64_t batch = 1;
    std::int64_t seq = 16;
    int tp = 2;
};

// Runs argv (argv[0] looked up in PATH), its standard output into `out` when given, else inherited.
// `group`: the child in a process group of its own, which an interrupt of this process is passed to
// while it runs (Python then stops torchrun and its ranks and removes its temporary folders). The
// exit status, or -1 when it could not start (errno's text in `why`).
int spawn(const std::vector<std::string>& args, std::string* out, std::string& why, Interruption* group = nullptr)
{
    std::vector<char*> argv;
    for (const auto& a : args)
        argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    int fds[2] = {-1, -1};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0); // nothing waits for input
    if (out) {
        if (::pipe(fds) != 0) {
            why = "cannot create a pipe";
            return -1;
        }
        posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
        posix_spawn_file_actions_addclose(&fa, fds[0]);
    }
    // The child starts with the default actions of the signals this process catches (a handler is
    // reset by exec anyway; an ignored signal would stay ignored, and Python would never stop).
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t defaults;
    sigemptyset(&defaults);
    for (int sig : Interruption::kSignals)
        sigaddset(&defaults, sig);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | (group ? POSIX_SPAWN_SETPGROUP : 0));
    posix_spawnattr_setpgroup(&attr, 0);
    pid_t pid = 0;
    const int rc = posix_spawnp(&pid, argv[0], &fa, &attr, argv.data(), environ);
    if (group && rc == 0)
        group->forwardTo(pid);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    if (out) {
        ::close(fds[1]);
        char buf[4096];
        if (rc == 0)
            for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) { // to the end: the child never blocks
                if (n < 0) {
                    if (errno == EINTR)
                        continue;
                    break;
                }
                if (out->size() < (1 << 20))
                    out->append(buf, static_cast<std::size_t>(n));
            }
        ::close(fds[0]);
    }
    if (rc != 0) {
        why = std::strerror(rc);
        return -1;
    }
    int status = 0, waited = 0;
    while ((waited = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
    }
    if (group)
        group->forwardTo(0);
    if (waited < 0) {
        why = std::strerror(errno);
        return -1;
    }
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int verify(const VerifyOpts& o)
{
    const auto fail = [](const std::string& msg) {
        fmt::print(stderr, "tpstudio-cli plan verify: {}\n", msg);
        return int(kBadInput);
    };
    // SIGINT, SIGTERM, SIGHUP and SIGQUIT (Ctrl-C, the GUI's Stop, a closed terminal) are seen
    // between the steps, and passed on to Python while it runs: this process then removes its own
    // folder and exits 128 + the signal. Should it die without a word (SIGKILL), the driver learns
    // it from its parent-death signal and does the same, removing this folder too (--owner-dir).
    Interruption interruption(true);
    const auto interrupted = [&] {
        fail(fmt::format("interrupted by {}; nothing was written", strsignal(interruption.signal())));
        return 128 + interruption.signal();
    };
    if (const std::string bad = checkOutputPaths({{"--json", o.json}}, {o.model, o.planFile}); !bad.empty())
        return fail(bad);

    // The model and the plan at T, as the planner sees them: an invalid plan is not handed to Transformers.
    auto om = tp::openModel(o.model);
    if (!om)
        return fail(om.status().message());
    tp::Plan plan = tp::defaultPlan(om->spec, o.tp, tp::VersionProfile::G3);
    if (!o.planFile.empty()) {
        auto p = tp::loadPlanFile(o.planFile, tp::VersionProfile::G3);
        if (!p)
            return fail(p.status().message());
        plan = tp::resolveOverrides(om->spec, *p);
        plan.tpSize = o.tp;
    }
    if (const std::string big = treeTooLarge(*om, o.model, false); !big.empty())
        return fail(big);
    tp::ShardOptions so;
    so.batch = o.batch;
    so.seq = o.seq;
    so.activationDtype = tp::DType::F32;
    const tp::ShardedGraph g = tp::shardModel(om->spec, plan, so);
    if (!g.valid()) {
        std::string errors;
        for (const auto& d : g.diagnostics)
            if (d.severity == tp::Severity::Error)
                errors += fmt::format("\n  {}: {}", d.where, d.message);
        return fail(fmt::format("the plan has errors at T={}, so Transformers is not asked to run it:{}", o.tp, errors));
    }
    if (g.kvHeadReplicas > 1)
        return fail(fmt::format("the plan replicates key/value heads (replicate_kv_heads: each KV head on {} ranks), which "
                                "the pinned Transformers cannot load (it splits k_proj and v_proj colwise and fails in the "
                                "first forward), so it is not asked to run it",
                                g.kvHeadReplicas));

    auto scripts = tpapp::ScriptDir::make("tpstudio-verify");
    if (!scripts.ok())
        return fail(scripts.status().message());
    const fs::path work = (*scripts)->dir(), script = (*scripts)->script();

    // What Transformers reads: the model's config.json (its folder's weights beside it), or the
    // catalog's config written out.
    std::string source = om->configPath;
    if (!source.empty() && fs::path(source).filename() != "config.json") {
        // Transformers reads a folder's config.json with the weights beside it: another file is copied
        // there alone, and verified on a reduced copy (its folder's weights belong to config.json).
        if (o.reduce == "no")
            return fail(fmt::format("{}: Transformers loads a folder's config.json with its weights, not this file; "
                                    "verify it on a reduced copy (--reduce auto or yes) or name the folder",
                                    tp::terminalSafe(source)));
        const std::string copy = (work / "config.json").string();
        std::error_code ec;
        if (!fs::copy_file(source, copy, ec))
            return fail(fmt::format("cannot copy {} to {}: {}", tp::terminalSafe(source), copy, ec.message()));
        source = copy;
    } else if (!source.empty()) {
        // Every weight file Transformers would list must be a file it can read (a dangling link, a
        // folder named *.safetensors), said here rather than as a Python error.
        std::error_code ec;
        for (fs::directory_iterator it(fs::path(source).parent_path(), ec), end; !ec && it != end; it.increment(ec))
            if (it->path().extension() == ".safetensors" && !fs::is_regular_file(it->path(), ec))
                return fail(fmt::format("{}: not a readable file (a link to nothing, or a folder); Transformers would "
                                        "read it as weights",
                                        tp::terminalSafe(it->path().string())));
    }
    if (source.empty()) {
        const tp::CatalogEntry* entry = tp::findCatalogEntry(o.model);
        if (!entry)
            return fail(o.model + ": has no config.json that Transformers could read");
        source = (work / "config.json").string();
        std::ofstream f(source, std::ios::binary);
        f << entry->configJson;
        if (!f.flush())
            return fail("cannot write " + source);
    }

    std::string python = o.python, where = " (--python)";
    if (const char* env = std::getenv("TPSTUDIO_PYTHON"); python.empty() && env && *env)
        python = env, where = " (TPSTUDIO_PYTHON)";
    if (python.empty())
        python = "python3", where = " (the default; --python or TPSTUDIO_PYTHON names another)";
    std::string probe, why;
    const int probed = spawn({python, script.string(), "probe"}, &probe, why);
    if (interruption.signal() != 0)
        return interrupted();
    if (probed < 0)
        return fail(fmt::format("cannot run the Python '{}'{}: {}", python, where, why));
    while (!probe.empty() && (probe.back() == '\n' || probe.back() == '\r'))
        probe.pop_back();
    if (probed != 0)
        return fail(fmt::format("Python '{}'{}: {}", python, where, probe.empty() ? "it cannot run tp_verify.py" : probe));
    fmt::print("Transformers side: {} ({})\n", probe, python);
    std::fflush(stdout);

    std::vector<std::string> args{python, script.string(), "verify", "--cli", fs::read_symlink("/proc/self/exe").string(),
                                  "--model", source, "--tp", std::to_string(o.tp), "--batch", std::to_string(o.batch),
                                  "--seq", std::to_string(o.seq), "--reduce", o.reduce, "--name",
                                  fmt::format("{} on {}", o.planFile.empty() ? "the default plan" : fs::path(o.planFile).filename().string(), o.model)};
    args.insert(args.end(), {"--owner-dir", work.string()});
    if (!o.planFile.empty())
        args.insert(args.end(), {"--plan", fs::absolute(o.planFile).string()});
    if (!o.json.empty())
        args.insert(args.end(), {"--json", fs::absolute(o.json).string()});
    if (interruption.signal() != 0)
        return interrupted();
    const int rc = spawn(args, nullptr, why, &interruption);
    if (interruption.signal() != 0)
        return interrupted();
    if (rc < 0)
        return fail(fmt::format("cannot run the Python '{}': {}", python, why));
    if (rc == 128 + SIGINT || rc == 128 + SIGTERM || rc == 130) {
        fail("interrupted; nothing was written");
        return 130;
    }
    return rc == 0 ? kOk : kBadInput;
}

} // namespace

std::function<int()> addPlanVerify(CLI::App* plan)
{
    auto o = std::make_shared<VerifyOpts>();
    auto* cmd = plan->add_subcommand(
        "verify", "Run the plan in Hugging Face Transformers itself (torch.distributed.run, CPU, gloo; a depth-reduced "
                  "random-weight copy of the model when its weights are absent or over 1 GiB) and compare every "
                  "collective it issues, per kind with count and bytes, with plan preview's, and its logits with the "
                  "engine's (1e-4). Needs a Python with torch, transformers, safetensors and accelerate");
    cmd->add_option("MODEL", o->model, "Folder, config.json, .safetensors, HF cache repo id or catalog id")
        ->required()
        ->check(kNonEmpty);
    cmd->add_option("--plan", o->planFile, "Plan JSON (overrides of the model's default plan); default: the default plan")
        ->check(kNonEmpty);
    cmd->add_option("--tp", o->tp, "Tensor-parallel size: one CPU process per rank")->check(CLI::Range(1, 16))->capture_default_str();
    cmd->add_option("--batch", o->batch, "Batch size B of the compared forward")->check(CLI::Range(1, 64))->capture_default_str();
    cmd->add_option("--seq", o->seq, "Sequence length S of the compared forward")->check(CLI::Range(1, 4096))->capture_default_str();
    cmd->add_option("--python", o->python,
                    "The Python that has torch, transformers, safetensors and accelerate (default: TPSTUDIO_PYTHON, "
                    "else python3 on PATH)")
        ->check(kNonEmpty);
    cmd->add_option("--reduce", o->reduce,
                    "auto: a reduced copy when the weights are absent or over 1 GiB; yes: always; no: the model's own "
                    "weights")
        ->check(CLI::IsMember({"auto", "yes", "no"}))
        ->capture_default_str();
    cmd->add_option("--json", o->json, "Write the comparison as JSON (schema tpstudio.verify/1)")->check(kNonEmpty);
    return [o, cmd] { return cmd->parsed() ? verify(*o) : -1; };
}

} // namespace tpcli
