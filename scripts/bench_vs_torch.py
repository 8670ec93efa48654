#!/usr/bin/env python3
"""TP Studio's CPU engine against Transformers + PyTorch on the same checkpoint and the same cores.

  python3 scripts/bench_vs_torch.py TPSTUDIO_CLI [--seq 128,512,2048] [--rounds 3] [--iters 3] [--logits both]
  python3 scripts/bench_vs_torch.py TPSTUDIO_CLI --decode 64 --seq 128 [--rounds 3] [--json OUT.json]

Writes the built-in example model (or any catalog/config.json model) as a random safetensors
checkpoint with Transformers, then (batch 1, fp32, attention "sdpa" for every Transformers run):

Prefill (default): for each S in --seq (default 128,512,2048), --rounds interleaved rounds of
  - TP Studio CPU engine at T=1 and T=2: one `tpstudio-cli run --model CKPT --tp 1,2 --seq S --tokens <ids>
    --warmup 1 --iters N --json-stream` (one BLAS thread per rank); the times are the per-iteration
    `progress` events of the timed iterations (not only the `result` event's median)
  - Transformers + PyTorch in this process, torch.set_num_threads(1) and (2): one untimed model(ids),
    then N timed ones (time.perf_counter)
  - Transformers' own TP: torchrun --nproc-per-node 2 (gloo, 1 thread per process) loading the same
    checkpoint with the tp_plan `tpstudio-cli plan export` writes; dist.barrier() before each forward,
    rank 0's times (this script's --torchrun-worker --worker-mode prefill; one launch per round)
All of them see the same B·S token ids (seeded per S). --logits all|last|both: `all` computes every
position's logits (Transformers' default forward), `last` only the last position's (model(ids,
logits_to_keep=1), as generate() does, and the engine's `run --logits last`); `both` (the default)
measures both, like for like. When the engine's `run --help` has no --logits, the engine computes every
position's logits, so only `all` is measured (a note says so). Prints one table per S (tokens/s: each
round's median over its iterations, then the median and min–max over rounds) and the issue's four
ratios with pass/fail: engine T=1 / Transformers 1 thread ≥ 1.8×, engine T=2 / Transformers 2 threads
≥ 1.8×, engine T=2 / Transformers' TP ≥ 3×, engine T=2 / T=1 ≥ 1.9× (the median of the rounds' paired
ratios: T=1 and T=2 run in one invocation; the others are ratios of the medians). --json writes every
raw time, the summary and the provenance: torch's version, BLAS and oneDNN lines of torch.__config__,
torch.backends.cpu.get_cpu_capability(), the CPU model (/proc/cpuinfo), OPENBLAS_CORETYPE,
OMP_NUM_THREADS (and the MKL/OpenBLAS thread variables), and the engine run record's provenance
(its oneDNN and OpenBLAS builds, compiler, CPU).

Decode (--decode N, --seq = prompt length): greedy generation of N steps after the prompt, per system
TTFT (prefill + first token) and the decode step (ITL: median over the N steps of each round, then the
median over rounds; p10/p90 over every step of every round):
  - TP Studio CPU engine at T=1 and T=2: tpstudio-cli run --tp 1,2 --decode N --tokens <the prompt>
  - Transformers + PyTorch in this process, torch.set_num_threads(1) and (2): an eager greedy loop
    with a DynamicCache, model(input_ids=next_token, past_key_values=cache, use_cache=True) then
    argmax, each step timed with time.perf_counter
  - Transformers' own TP under torchrun as above, dist.barrier() before each timed step, rank 0's times
    (--torchrun-worker, --worker-mode decode)
Rounds are interleaved (engine, torch 1 thread, torch 2 threads, torchrun TP, repeat) because the
machine is shared and noisy. Prints one table, the issue's three target ratios with pass/fail and
whether the generated tokens agree, and the cost model's decode step (plan preview on the local-cpu
profile at the steps' mean context) beside the engine's measured one; --json writes the same as a summary.
Needs `pip install torch transformers safetensors` (and accelerate for the TP load).
"""
import argparse
import importlib.util
import json
import os
import pathlib
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

ROOT = pathlib.Path(__file__).resolve().parent.parent
ATTN = "sdpa"  # attention implementation of every Transformers run


# --------------------------------------------------------------------------------------------- shared


def make_model(name, attn=ATTN):
    raw = json.loads((ROOT / "resources" / "catalog" / f"{name}.json").read_text())
    config = AutoConfig.for_model(**raw)
    config._attn_implementation = attn
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attn)
    return config, model.float().eval()


def write_checkpoint(model, work):
    """The model as a safetensors checkpoint in work/checkpoint (what every system loads)."""
    ckpt = os.path.join(work, "checkpoint")
    model.save_pretrained(ckpt, safe_serialization=True)
    return ckpt


def export_plan(cli, ckpt, work):
    """The plan as TP Studio exports it for Transformers (DistributedConfig JSON) → its file."""
    plan_file = os.path.join(work, "tp_plan.json")
    subprocess.run([cli, "plan", "export", ckpt, "--tp", "2", "-o", plan_file], check=True)
    return plan_file


def workdir(a):
    """(folder, cleanup context or None): --workdir kept, else a temporary folder."""
    if a.workdir:
        os.makedirs(a.workdir, exist_ok=True)
        return a.workdir, None
    ctx = tempfile.TemporaryDirectory()
    return ctx.name, ctx


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_torchrun(worker_args, out, what):
    """This script's --torchrun-worker under torchrun --nproc-per-node 2 (gloo, 1 thread per process);
    returns the JSON rank 0 wrote to `out`. A failed launch is tried once more (a new port: the free one
    picked can be taken by another process on a shared host before torchrun binds it)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    for attempt in (1, 2):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr",
               "127.0.0.1", "--master-port", str(free_port()), __file__, "--torchrun-worker", "--out", str(out)]
        run = subprocess.run(cmd + worker_args, capture_output=True, text=True, env=env, timeout=1800)
        if run.returncode == 0 and pathlib.Path(out).exists():
            return json.loads(pathlib.Path(out).read_text())
        tail = (run.stdout + run.stderr)[-3000:]
        if attempt == 1:
            print(f"torchrun TP {what} failed ({run.returncode}), trying once more:\n{tail}", file=sys.stderr)
    sys.exit(f"torchrun TP {what} failed twice ({run.returncode}):\n{tail}")


def engine_help(cli):
    return subprocess.run([cli, "run", "--help"], capture_output=True, text=True).stdout


def provenance():
    """Where the Transformers + PyTorch figures come from: torch's build, math libraries and the CPU."""
    show = torch.__config__.show()
    libs = [ln.strip(" -") for ln in show.splitlines()
            if any(k in ln for k in ("Math Kernel", "MKL-DNN", "oneDNN", "OpenBLAS", "OpenMP 2"))]
    blas = next((f.split("=", 1)[1] for ln in show.splitlines() for f in ln.replace(",", " ").split()
                 if f.startswith("BLAS_INFO=")), None)
    cpu = None
    try:
        cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")),
                   None)
    except OSError:
        pass
    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "python": sys.version.split()[0], "torch_blas": blas, "torch_math_libraries": libs,
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "torch_parallel_backend": next((ln.split(":", 1)[1].strip()
                                            for ln in torch.__config__.parallel_info().splitlines()
                                            if ln.startswith("ATen parallel backend")), None),
            "cpu_model": cpu, "logical_cores": os.cpu_count(), "machine": os.uname().machine,
            "env": {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                                   "OPENBLAS_NUM_THREADS", "MKL_ENABLE_INSTRUCTIONS",
                                                   "MKL_DEBUG_CPU_TYPE")}}


def quantile(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    p = q * (len(xs) - 1)
    lo = int(p)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (p - lo)


# --------------------------------------------------------------------------------------------- prefill

PREFILL_NAMES = {"engine1": "TP Studio CPU engine, T=1", "engine2": "TP Studio CPU engine, T=2",
                 "torch1": "Transformers + PyTorch, 1 thread", "torch2": "Transformers + PyTorch, 2 threads",
                 "torchrun": "Transformers TP, torchrun 2×1 (gloo)"}
# The prefill targets: (key, numerator, denominator, at least, text).
PREFILL_TARGETS = [("engine_t1_over_torch1", "engine1", "torch1", 1.8, "engine T=1 / Transformers 1 thread"),
                   ("engine_t2_over_torch2", "engine2", "torch2", 1.8, "engine T=2 / Transformers 2 threads"),
                   ("engine_t2_over_torchrun", "engine2", "torchrun", 3.0, "engine T=2 / Transformers' TP"),
                   ("engine_t2_over_t1", "engine2", "engine1", 1.9, "engine T=2 / engine T=1")]


def forward_kwargs(logits):
    """Transformers' forward for a logits mode: `last` keeps only the last position (logits_to_keep=1,
    as generate() does), `all` every position (the forward's default)."""
    return {"logits_to_keep": 1} if logits == "last" else {}


def time_forwards(model, ids, logits, iters, sync=lambda: None):
    """One untimed forward, then `iters` timed ones (sync() before each, outside the timing)."""
    kw = forward_kwargs(logits)
    times = []
    with torch.no_grad():
        sync()
        out = model(ids, **kw)  # warm-up
        for _ in range(iters):
            sync()
            t0 = time.perf_counter()
            out = model(ids, **kw)
            times.append(time.perf_counter() - t0)
    return times, out.logits


def torch_prefill_round(model, ids, threads, logits, iters):
    torch.set_num_threads(threads)
    times, out = time_forwards(model, ids, logits, iters)
    return {"iteration_s": times, "last_argmax": int(out[0, -1].argmax())}


def torchrun_prefill_worker(a, model, rank):
    import torch.distributed as dist

    ids = torch.tensor([json.loads(pathlib.Path(a.prompt).read_text())], dtype=torch.long)
    res = {}
    for logits in a.worker_logits.split(","):
        times, out = time_forwards(model, ids, logits, a.iters, sync=dist.barrier)
        res[logits] = {"iteration_s": times, "last_argmax": int(out[0, -1].argmax()),
                       "logits_shape": list(out.shape)}
    return res


def torchrun_prefill_round(ckpt, plan, prompt_file, logits_modes, iters, work, tag):
    out = pathlib.Path(work) / f"torchrun-prefill-{tag}.json"
    return launch_torchrun(["--checkpoint", ckpt, "--plan", plan, "--prompt", prompt_file, "--worker-mode",
                            "prefill", "--worker-logits", ",".join(logits_modes), "--iters", str(iters)],
                           out, f"prefill {tag}")


def engine_prefill_round(cli, ckpt, tokens, logits, has_logits, iters, tag):
    """One `tpstudio-cli run --tp 1,2 --seq S --tokens … --json-stream`: {tp: {"iteration_s": [timed
    iterations]}}, and the run record's provenance."""
    cmd = [cli, "run", "--model", ckpt, "--tp", "1,2", "--batch", "1", "--seq", str(len(tokens)),
           "--tokens", ",".join(map(str, tokens)), "--warmup", "1", "--iters", str(iters), "--json-stream"]
    if has_logits:
        cmd += ["--logits", logits]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"engine {tag} failed ({run.returncode}): {' '.join(cmd[:10])} …\n{run.stderr[-3000:]}")
    res, prov, settings = {}, None, None
    for line in run.stdout.splitlines():
        e = json.loads(line)
        if e["event"] == "progress" and not e.get("warmup"):
            res.setdefault(e["tp"], {"iteration_s": []})["iteration_s"].append(e["seconds"])
        elif e["event"] == "result":
            res.setdefault(e["tp"], {"iteration_s": []})["engine_median_s"] = e["median_s"]
        elif e["event"] == "record":
            prov, settings = e["record"].get("provenance"), e["record"].get("settings")
    for tp, v in res.items():
        if len(v["iteration_s"]) != iters:
            sys.exit(f"engine {tag}: T={tp} streamed {len(v['iteration_s'])} timed iterations, not {iters}")
    return res, prov, settings


def prefill_stats(rounds, tokens):
    """Rounds of one system at one S → tokens/s: the median of each round's iterations, then the
    median (and min–max) over rounds."""
    per_round = [tokens / statistics.median(r["iteration_s"]) for r in rounds]
    every = [tokens / t for r in rounds for t in r["iteration_s"]]
    return {"rounds": len(rounds), "tokens_per_s": statistics.median(per_round), "min": min(per_round),
            "max": max(per_round), "round_tokens_per_s": per_round, "all_iterations_median": statistics.median(every),
            "median_ms": 1e3 * tokens / statistics.median(per_round)}


def prefill_main(a):
    cores = os.cpu_count() or 1
    seqs = a.seqs
    notes = []
    engine = not a.no_engine
    has_logits = engine and "--logits" in engine_help(a.cli)
    modes = ["all", "last"] if a.logits == "both" else [a.logits]
    if engine and not has_logits:
        if "last" in modes:
            notes.append(f"{a.cli} run has no --logits option: measured logits=all only (the engine computes "
                         "every position's logits)")
        modes = ["all"]
    torchrun = not a.no_torchrun
    if torchrun and importlib.util.find_spec("accelerate") is None:
        notes.append("accelerate is not installed: Transformers' TP was not measured")
        torchrun = False
    config, model = make_model(a.model)
    prov = provenance()
    engine_prov = engine_settings = None
    raw = {}  # str(S) → mode → system → [round]
    prompts = {}
    work, work_ctx = workdir(a)
    load_before = os.getloadavg()
    round_loads = {}  # str(S) → the 1-minute load average after each round
    t_start = time.time()
    try:
        ckpt = write_checkpoint(model, work)
        plan_file = export_plan(a.cli, ckpt, work) if torchrun else None
        for t in (1, 2):  # first-call costs of torch itself, before any round
            torch_prefill_round(model, torch.zeros((1, min(seqs)), dtype=torch.long), t, "all", 1)
        for s in seqs:
            g = torch.Generator().manual_seed(1000 + s)
            ids = torch.randint(0, config.vocab_size, (1, s), generator=g)
            tokens = ids[0].tolist()
            prompts[s] = tokens
            prompt_file = os.path.join(work, f"prompt-{s}.json")
            pathlib.Path(prompt_file).write_text(json.dumps(tokens))
            per = raw.setdefault(str(s), {m: {} for m in modes})
            for r in range(a.rounds):
                for m in modes:
                    if engine:
                        res, p, st = engine_prefill_round(a.cli, ckpt, tokens, m, has_logits, a.iters,
                                                          f"S={s} round {r + 1} logits={m}")
                        engine_prov = engine_prov or p
                        engine_settings = engine_settings or st
                        for tp, v in res.items():
                            per[m].setdefault(f"engine{tp}", []).append(v)
                    for t in (1, 2):
                        per[m].setdefault(f"torch{t}", []).append(torch_prefill_round(model, ids, t, m, a.iters))
                if torchrun:  # one launch per round, both logits modes in it (loading costs seconds)
                    res = torchrun_prefill_round(ckpt, plan_file, prompt_file, modes, a.iters, work, f"{s}-{r}")
                    for m in modes:
                        per[m].setdefault("torchrun", []).append(dict(res["modes"][m], ranks=res["world_size"],
                                                                      threads=res["threads"],
                                                                      ranks_agree=res["ranks_agree"]))
                round_loads.setdefault(str(s), []).append(os.getloadavg()[0])
                print(f"S={s}: round {r + 1}/{a.rounds} done ({time.time() - t_start:.0f} s)", file=sys.stderr,
                      flush=True)
        plan = json.loads(pathlib.Path(plan_file).read_text()) if torchrun else None
    finally:
        if work_ctx:
            work_ctx.cleanup()
    load_after = os.getloadavg()
    # This run keeps up to 2 cores busy itself; more than that beyond it means other work shared the cores.
    busiest = max([load_before[0]] + [x for v in round_loads.values() for x in v])
    if busiest > cores + 1:
        notes.append(f"the host was busy: 1-minute load average up to {busiest:.1f} on {cores} cores (this "
                     f"benchmark accounts for about 2): the figures are below the machine's limit, the 2-thread "
                     f"and T=2 ones most")

    summary = {}
    for s in seqs:
        summary[str(s)] = {}
        for m in modes:
            systems = raw[str(s)][m]
            stats = {k: prefill_stats(v, s) for k, v in systems.items()}
            targets = []
            for key, num, den, want, text in PREFILL_TARGETS:
                if num not in stats or den not in stats:
                    continue
                q = stats[num]["tokens_per_s"] / stats[den]["tokens_per_s"]
                # Per round: the two systems of one round ran back to back (T=1 and T=2 in one invocation).
                paired = [x / y for x, y in zip(stats[num]["round_tokens_per_s"], stats[den]["round_tokens_per_s"])]
                basis = "ratio of the medians"
                if key == "engine_t2_over_t1":  # paired is the figure: one invocation, T=1 then T=2
                    q, basis = statistics.median(paired), "median of the rounds' paired ratios"
                targets.append({"name": key, "ratio": q, "target": want, "pass": q >= want, "basis": basis,
                                "round_ratios": paired, "text": text})
            agree = {}
            if "torch1" in systems:
                ref = systems["torch1"][0]["last_argmax"]
                for k, v in systems.items():
                    if "last_argmax" in v[0] and k != "torch1":
                        agree[k] = all(x["last_argmax"] == ref for x in v)
            summary[str(s)][m] = {"systems": {k: dict(v, label=PREFILL_NAMES[k]) for k, v in stats.items()},
                                  "targets": targets, "last_token_argmax_agrees_with_torch1": agree}

    print(f"{a.model}: prefill, batch 1, fp32, {a.rounds} round(s) interleaved × {a.iters} timed iteration(s) "
          f"(+1 warm-up) per system, {cores} cores ({prov['cpu_model']}, {prov['machine']}); "
          f"Transformers {transformers.__version__} (attention {ATTN}), torch {torch.__version__} "
          f"(BLAS {prov['torch_blas']}, CPU capability {prov['torch_cpu_capability']}); engine "
          f"{(engine_prov or {}).get('openblas', '—')}; load average {load_before[0]:.2f} before, "
          f"{load_after[0]:.2f} after")
    for s in seqs:
        print()
        print(f"S = {s}: tokens/s, median over rounds of each round's median (min–max over rounds)")
        head = f"{'system':38}" + "".join(f" {'logits=' + m:>12} {'(min–max)':>15} {'ms':>8}" for m in modes)
        print(head)
        for k in PREFILL_NAMES:
            if not any(k in summary[str(s)][m]["systems"] for m in modes):
                continue
            row = f"{PREFILL_NAMES[k]:38}"
            for m in modes:
                st = summary[str(s)][m]["systems"].get(k)
                row += (f" {st['tokens_per_s']:12.1f} {st['min']:7.1f}–{st['max']:<7.1f} {st['median_ms']:8.1f}"
                        if st else f" {'—':>12} {'':15} {'':8}")
            print(row)
        for m in modes:
            for t in summary[str(s)][m]["targets"]:
                rr = t["round_ratios"]
                print(f"{'PASS' if t['pass'] else 'FAIL'}  [logits={m}] {t['text']} = {t['ratio']:.2f}× "
                      f"(≥ {t['target']:.2f}; {t['basis']}; rounds {min(rr):.2f}–{max(rr):.2f})")
            bad = [PREFILL_NAMES[k] for k, ok in summary[str(s)][m]["last_token_argmax_agrees_with_torch1"].items()
                   if not ok]
            if bad:
                print(f"note: [logits={m}] last position's argmax differs from Transformers 1 thread: "
                      f"{', '.join(bad)}")
    for n in notes:
        print(f"note: {n}")
    if a.json:
        out = {"schema": "tpstudio.bench_vs_torch.prefill/1",
               "settings": {"model": a.model, "batch": 1, "seqs": seqs, "rounds": a.rounds, "iters": a.iters,
                            "warmup": 1, "logits": modes, "engine_has_logits_option": has_logits,
                            "dtype": "float32", "cores": cores, "attn_implementation": ATTN,
                            "load_average_1min": [load_before[0], load_after[0]],
                            "load_average_1min_after_rounds": round_loads, "tp_plan": plan,
                            "wall_s": time.time() - t_start, "engine_settings": engine_settings},
               "provenance": {"torch_side": prov, "engine": engine_prov},
               "summary": summary, "raw": raw, "prompts": {str(k): v for k, v in prompts.items()}, "notes": notes}
        pathlib.Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


# ---------------------------------------------------------------------------------------------- decode


def cache_kwarg(model):
    """The forward's name for the KV cache: `cache` since Transformers 5.2x (`past_key_values` is its
    deprecated alias there), `past_key_values` before."""
    import inspect

    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def greedy(model, prompt, steps, sync=lambda: None):
    """Eager greedy generation with a KV cache: prefill + first token, then `steps` one-token steps.

    Returns (ttft_s, [step_s] * steps, generated ids (steps + 1 of them), top-1 minus top-2 logit per token).
    The prefill keeps only the last position's logits (logits_to_keep=1), as generate() does.
    """
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    kw = cache_kwarg(model)
    times, gen, margins = [], [], []
    with torch.no_grad():
        sync()
        t0 = time.perf_counter()
        out = model(input_ids=prompt, **{kw: cache}, use_cache=True, logits_to_keep=1)
        tok = out.logits[:, -1, :].argmax(-1, keepdim=True)
        ttft = time.perf_counter() - t0
        for i in range(steps + 1):
            top = out.logits[0, -1].float().topk(2).values
            gen.append(int(tok))
            margins.append(float(top[0] - top[1]))
            if i == steps:
                break
            sync()
            t0 = time.perf_counter()
            out = model(input_ids=tok, **{kw: cache}, use_cache=True)
            tok = out.logits[:, -1, :].argmax(-1, keepdim=True)
            times.append(time.perf_counter() - t0)
    return ttft, times, gen, margins


def torch_round(model, prompt, steps, threads):
    torch.set_num_threads(threads)
    greedy(model, prompt, min(steps, 4))  # the thread pool after a switch, and the cache's first allocations
    ttft, times, gen, margins = greedy(model, prompt, steps)
    return {"ttft_s": ttft, "step_s": times, "generated": gen, "margins": margins}


def torchrun_worker(a):
    """One process of Transformers' own TP (under torchrun): writes rank 0's times to a.out.

    --worker-mode decode (the default): greedy decode of --decode steps; prefill: --iters timed
    model(ids) forwards per logits mode in --worker-logits."""
    import torch.distributed as dist
    from transformers.distributed import DistributedConfig

    torch.set_num_threads(1)
    dist.init_process_group("gloo")  # explicitly gloo; Transformers sees it initialised and keeps it
    rank = dist.get_rank()
    plan = json.loads(pathlib.Path(a.plan).read_text())
    model = AutoModelForCausalLM.from_pretrained(a.checkpoint, dtype=torch.float32, attn_implementation=ATTN,
                                                 distributed_config=DistributedConfig(**plan)).eval()
    common = {"world_size": dist.get_world_size(), "threads": torch.get_num_threads(),
              "backend": dist.get_backend(), "attn_implementation": model.config._attn_implementation}
    if a.worker_mode == "prefill":
        res = torchrun_prefill_worker(a, model, rank)
        mine = {m: v["last_argmax"] for m, v in res.items()}
        every = [None] * dist.get_world_size()
        dist.all_gather_object(every, mine)
        if rank == 0:
            pathlib.Path(a.out).write_text(json.dumps(dict(common, modes=res,
                                                           ranks_agree=all(x == mine for x in every))))
    else:
        prompt = torch.tensor([json.loads(pathlib.Path(a.prompt).read_text())], dtype=torch.long)
        greedy(model, prompt, min(a.decode, 8), sync=dist.barrier)  # warm-up
        ttft, times, gen, margins = greedy(model, prompt, a.decode, sync=dist.barrier)
        gens = [None] * dist.get_world_size()
        dist.all_gather_object(gens, gen)
        if rank == 0:
            pathlib.Path(a.out).write_text(json.dumps(dict(
                common, ttft_s=ttft, step_s=times, generated=gen, margins=margins,
                ranks_agree=all(g == gen for g in gens))))
    # Tear the process group down before exit: a live gloo group at interpreter shutdown can abort.
    dist.barrier()
    dist.destroy_process_group()


def torchrun_round(ckpt, plan, prompt_file, steps, work, r):
    out = pathlib.Path(work) / f"torchrun-{r}.json"
    return launch_torchrun(["--checkpoint", ckpt, "--plan", plan, "--prompt", prompt_file, "--decode", str(steps)],
                           out, f"round {r}")


def engine_supports_decode(cli):
    return "--decode" in engine_help(cli)


def engine_round(cli, ckpt, prompt, steps, work, r):
    """One `tpstudio-cli run --tp 1,2 --decode N` on the checkpoint and prompt; {tp: round} from its record."""
    rec = pathlib.Path(work) / f"engine-{r}.json"
    cmd = [cli, "run", "--model", ckpt, "--tp", "1,2", "--seq", str(len(prompt)), "--decode", str(steps),
           "--batch", "1", "--tokens", ",".join(map(str, prompt)), "--warmup", "1", "--iters", "1",
           "--json", str(rec)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"engine round {r} failed ({run.returncode}): {' '.join(cmd[:8])} …\n{run.stderr[-3000:]}")
    d = json.loads(rec.read_text())
    return parse_engine_record(d), d.get("provenance")


def parse_engine_record(d):
    """runs[].decode of a tpstudio.run/2 record → {tp: {"ttft_s", "step_s", "generated", ...}}."""
    res = {}
    for run in d["runs"]:
        dec = run["decode"]
        res[run["tp"]] = {"ttft_s": dec["ttft_s"], "step_s": dec["step_s"], "generated": dec["generated"][0],
                          "steps": dec["steps"]}
    return res


def summarise(rounds):
    """Rounds of one system → TTFT and ITL statistics in ms."""
    ttft = [r["ttft_s"] * 1e3 for r in rounds]
    med = [statistics.median(r["step_s"]) * 1e3 for r in rounds]
    every = [s * 1e3 for r in rounds for s in r["step_s"]]
    p10, p90 = quantile(every, 0.1), quantile(every, 0.9)
    itl = statistics.median(med)
    return {"rounds": len(rounds), "ttft_ms": statistics.median(ttft), "ttft_min_ms": min(ttft),
            "ttft_max_ms": max(ttft), "itl_median_ms": itl, "itl_min_ms": min(med), "itl_max_ms": max(med),
            "itl_p10_ms": p10, "itl_p90_ms": p90, "decode_tokens_per_s": 1e3 / itl,
            "itl_round_medians_ms": med, "ttft_rounds_ms": ttft}


def agreement(ref, other):
    """Compare two generated sequences over their common length; index of the first difference or None."""
    n = min(len(ref), len(other))
    first = next((i for i in range(n) if ref[i] != other[i]), None)
    return {"compared": n, "lengths": [len(ref), len(other)], "match": first is None and n > 0,
            "first_mismatch": first}


def decode_main(a):
    cores = os.cpu_count() or 1
    config, model = make_model(a.model)
    torch.manual_seed(1)
    prompt = torch.randint(0, config.vocab_size, (1, a.seq))
    prompt_ids = prompt[0].tolist()
    systems = {}  # name → [round]
    names = {"engine1": "TP Studio CPU engine, T=1", "engine2": "TP Studio CPU engine, T=2",
             "torch1": "Transformers + PyTorch, 1 thread", "torch2": "Transformers + PyTorch, 2 threads",
             "torchrun": "Transformers TP, torchrun 2×1 (gloo)"}
    engine = not a.no_engine
    notes = []
    if engine and not engine_supports_decode(a.cli):
        notes.append(f"{a.cli} run has no --decode: the engine was not measured")
        engine = False
    torchrun = not a.no_torchrun
    if torchrun and importlib.util.find_spec("accelerate") is None:
        notes.append("accelerate is not installed: Transformers' TP was not measured")
        torchrun = False
    engine_prov = None
    work, work_ctx = workdir(a)
    try:
        ckpt = write_checkpoint(model, work)
        prompt_file = os.path.join(work, "prompt.json")
        pathlib.Path(prompt_file).write_text(json.dumps(prompt_ids))
        plan_file = export_plan(a.cli, ckpt, work) if torchrun else None
        # One untimed pass per thread count before the rounds start (first-call costs of torch itself).
        for t in (1, 2):
            torch_round(model, prompt, min(a.decode, 8), t)
        load_before = os.getloadavg()
        t_start = time.time()
        for r in range(a.rounds):
            if engine:
                res, engine_prov = engine_round(a.cli, ckpt, prompt_ids, a.decode, work, r)
                for tp, v in res.items():
                    systems.setdefault(f"engine{tp}", []).append(v)
            for t in (1, 2):
                systems.setdefault(f"torch{t}", []).append(torch_round(model, prompt, a.decode, t))
            if torchrun:
                systems.setdefault("torchrun", []).append(torchrun_round(ckpt, plan_file, prompt_file, a.decode,
                                                                         work, r))
            print(f"round {r + 1}/{a.rounds} done ({time.time() - t_start:.0f} s)", file=sys.stderr, flush=True)
        load_after = os.getloadavg()
        plan = json.loads(pathlib.Path(plan_file).read_text()) if torchrun else None
        # The cost model's decode step on the local-cpu profile at the steps' mean context.
        predicted = {}
        if engine:
            pv = subprocess.run([a.cli, "plan", "preview", ckpt, "--tp", "2", "--seq", str(a.seq), "--context",
                                 str(a.seq + a.decode // 2), "--dtype", "f32", "--hardware", "local-cpu", "--json"],
                                capture_output=True, text=True, check=True)
            predicted = {p["tp"]: p["decode_step_s"] * 1e3 for p in json.loads(pv.stdout)["scaling"]
                         if p["tp"] in (1, 2) and p["valid"]}
    finally:
        if work_ctx:
            work_ctx.cleanup()

    stats = {k: summarise(v) for k, v in systems.items()}
    ms = {k: s["itl_median_ms"] for k, s in stats.items()}

    def target(name, ok, ratio, text):
        return {"name": name, "ratio": ratio, "pass": ok, "text": text}

    targets = []
    if "engine1" in ms and "engine2" in ms:
        # Paired: T=1 and T=2 of one round ran back to back in one engine invocation, so their ratio is
        # less exposed to the machine's load than a ratio of medians taken over different rounds.
        paired = [statistics.median(b["step_s"]) / statistics.median(a["step_s"])
                  for a, b in zip(systems["engine1"], systems["engine2"])]
        q = statistics.median(paired)
        targets.append(target("engine_t2_over_t1", q <= 0.6, q,
                              f"engine T=2 step / T=1 step = {q:.2f}× (≤ 0.60): median of the rounds' ratios "
                              f"{min(paired):.2f}–{max(paired):.2f}; ratio of the medians "
                              f"{ms['engine2'] / ms['engine1']:.2f}×"))
    if "engine1" in ms and "torch1" in ms:
        q = ms["torch1"] / ms["engine1"]
        targets.append(target("engine_t1_vs_torch1", q > 1, q,
                              f"engine T=1 step {ms['engine1']:.2f} ms vs Transformers 1 thread "
                              f"{ms['torch1']:.2f} ms: {q:.2f}× faster (> 1.00)"))
    if "engine2" in ms and "torchrun" in ms:
        q = ms["torchrun"] / ms["engine2"]
        targets.append(target("torchrun_over_engine_t2", q >= 3, q,
                              f"Transformers TP step / engine T=2 step = {q:.2f}× (≥ 3.00)"))

    for tp, want in predicted.items():
        got = ms.get(f"engine{tp}")
        if got:
            q = want / got
            targets.append(target(f"predicted_over_measured_t{tp}", abs(q - 1) <= 0.25, q,
                                  f"predicted decode step (local-cpu, context {a.seq + a.decode // 2}) at T={tp} "
                                  f"{want:.2f} ms vs measured {got:.2f} ms: {q:.2f}× (within 25%)"))

    tokens = {}
    ref = systems["torch1"][0]["generated"]
    margins = systems["torch1"][0]["margins"]
    for k, v in systems.items():
        if k == "torch1" or v[0].get("generated") is None:
            continue
        g = agreement(ref, v[0]["generated"])
        if g["first_mismatch"] is not None:
            g["torch1_top2_margin_there"] = margins[g["first_mismatch"]]
        g["same_every_round"] = all(x.get("generated") == v[0]["generated"] for x in v)
        tokens[k] = g
    if "torchrun" in systems:
        tokens.setdefault("torchrun", {})["ranks_agree"] = all(x["ranks_agree"] for x in systems["torchrun"])
    for k in ("engine1", "engine2"):
        if k in systems and systems[k][0].get("generated") is None:
            notes.append(f"{names[k]}: the record has no decode.generated; tokens not compared")

    head = (f"{a.model}: greedy decode, batch 1, prompt {a.seq}, {a.decode} steps, fp32, {a.rounds} rounds "
            f"interleaved, {cores} cores ({os.uname().machine}); Transformers {transformers.__version__} "
            f"(attention {ATTN}, DynamicCache passed as `{cache_kwarg(model)}=`), torch {torch.__version__}; "
            f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after")
    print(head)
    print(f"{'system':38} {'TTFT ms':>8} {'(min–max)':>15} {'ITL ms':>8} {'(min–max)':>15} {'p10':>7} {'p90':>7}"
          f" {'tok/s':>7}")
    for k in ("engine1", "engine2", "torch1", "torch2", "torchrun"):
        if k not in stats:
            continue
        s = stats[k]
        print(f"{names[k]:38} {s['ttft_ms']:8.2f} {s['ttft_min_ms']:7.2f}–{s['ttft_max_ms']:<7.2f}"
              f" {s['itl_median_ms']:8.2f} {s['itl_min_ms']:7.2f}–{s['itl_max_ms']:<7.2f}"
              f" {s['itl_p10_ms']:7.2f} {s['itl_p90_ms']:7.2f} {s['decode_tokens_per_s']:7.1f}")
    print("ITL: median over each round's steps, then the median over rounds (min–max of the round medians); "
          "p10/p90 over every step of every round")
    for t in targets:
        print(f"{'PASS' if t['pass'] else 'FAIL'}  {t['text']}")
    for k, g in tokens.items():
        if "match" not in g:
            continue
        what = (f"agree on all {g['compared']}" if g["match"] else
                f"differ from token {g['first_mismatch']} of {g['compared']} (Transformers' top-2 logit margin "
                f"there {g['torch1_top2_margin_there']:.2e})")
        extra = "" if k != "torchrun" else f"; ranks agree: {g['ranks_agree']}"
        print(f"tokens: {names[k]} vs Transformers 1 thread: {what}{extra}")
    for n in notes:
        print(f"note: {n}")
    if a.json:
        summary = {"schema": "tpstudio.bench_vs_torch.decode/1",
                   "settings": {"model": a.model, "batch": 1, "prompt": a.seq, "decode_steps": a.decode,
                                "rounds": a.rounds, "dtype": "float32", "cores": cores,
                                "attn_implementation": ATTN, "torch": torch.__version__,
                                "transformers": transformers.__version__, "cache_kwarg": cache_kwarg(model),
                                "load_average_1min": [load_before[0], load_after[0]], "tp_plan": plan,
                                "prompt_ids": prompt_ids},
                   "systems": {k: dict(stats[k], label=names[k]) for k in stats},
                   "provenance": {"torch_side": provenance(), "engine": engine_prov},
                   "targets": targets, "tokens": tokens, "notes": notes, "predicted_step_ms": predicted,
                   "generated": {k: v[0].get("generated") for k, v in systems.items()}}
        pathlib.Path(a.json).write_text(json.dumps(summary, indent=1) + "\n")
    return 0


def seq_list(text):
    try:
        seqs = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of lengths: {text!r}")
    if not seqs or any(x < 1 for x in seqs) or len(set(seqs)) != len(seqs):
        raise argparse.ArgumentTypeError(f"lengths must be distinct and at least 1: {text!r}")
    return seqs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cli", nargs="?", help="tpstudio-cli (needed except for --torchrun-worker)")
    ap.add_argument("--model", default="example")
    ap.add_argument("--seq", type=seq_list, default=None, metavar="S[,S...]",
                    help="prefill lengths, comma-separated (default 128,512,2048), or the prompt with --decode "
                    "(one length, default 128)")
    ap.add_argument("--iters", type=int, default=3, help="prefill mode: timed iterations per system and round "
                    "(after one warm-up)")
    ap.add_argument("--logits", choices=("all", "last", "both"), default="both",
                    help="prefill mode: every position's logits (Transformers' default forward), only the last "
                    "(logits_to_keep=1; the engine's --logits last), or both (default; `last` only when the "
                    "engine's run has --logits)")
    ap.add_argument("--decode", type=int, default=0, metavar="N", help="decode mode: N greedy steps after the prompt")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    ap.add_argument("--json", help="write the raw times and the summary here")
    ap.add_argument("--workdir", help="keep the checkpoint, prompts, plan and records here")
    ap.add_argument("--no-engine", action="store_true", help="skip the engine")
    ap.add_argument("--no-torchrun", action="store_true", help="skip Transformers' TP")
    ap.add_argument("--torchrun-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--worker-mode", choices=("decode", "prefill"), default="decode", help=argparse.SUPPRESS)
    ap.add_argument("--worker-logits", default="all", help=argparse.SUPPRESS)
    ap.add_argument("--checkpoint", help=argparse.SUPPRESS)
    ap.add_argument("--plan", help=argparse.SUPPRESS)
    ap.add_argument("--prompt", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torchrun_worker:
        return torchrun_worker(a)
    if a.rounds < 1 or a.iters < 1:
        ap.error("--rounds and --iters must be at least 1")
    if not a.cli:
        ap.error("TPSTUDIO_CLI is needed (the engine, and the tp_plan export for Transformers' TP)")
    if a.decode:
        if a.seq and len(a.seq) != 1:
            ap.error("--decode takes one --seq (the prompt length)")
        a.seq = a.seq[0] if a.seq else 128
        if a.decode < 1:
            ap.error("--decode must be at least 1")
        return decode_main(a)
    a.seqs = a.seq or [128, 512, 2048]
    return prefill_main(a)


if __name__ == "__main__":
    sys.exit(main())
