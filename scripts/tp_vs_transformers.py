#!/usr/bin/env python3
"""The engine against Transformers' own tensor parallelism, plan by plan.

  python3 scripts/tp_vs_transformers.py TPSTUDIO_CLI REPO_ROOT [--tp 2,4] [--families llama,gpt_oss]

For every fixture family (tests/fixtures/models/<family>/logits.json, made by Transformers) and
every tp size T, and for each plan — the default plan as
`tpstudio-cli plan export` writes it, and every shipped plan of the family (plans/<family>/*.json,
its tp_size, and the ep_size of an ep_plan, set to T):

1. Transformers runs the plan: `torchrun --nproc-per-node T` (CPU, gloo), from_pretrained with
   DistributedConfig(**plan), one forward over the fixture's prompt; rank 0's logits, and the
   collectives gloo executed on rank 0 during that forward (torch.profiler's gloo:* events).
2. The engine runs it: `tpstudio-cli run --model DIR --plan P --tp T --tokens … --dump-logits`,
   its collectives from the record's communication spans of rank 0.
3. The engine's logits must be within 1e-4 relative (max |Δ| / max |logit|) of Transformers' TP
   logits, and both runs must issue the same collectives (count per kind).

A plan with `sequence_parallel` runs on the engine as Megatron's TP+SP (reduce-scatters and
all-gathers of token rows), while Transformers 5.24 runs it as plain TP (its SequenceParallel
takes each rank's whole input as its shard). For such a plan the logits must still agree, and
Transformers' collectives must be those of the engine's run of the plan without those keys: what
the planner's warning says.

A plan Transformers refuses or cannot run (heads or experts that do not split over T) is reported
and not compared; one Transformers runs must run on the engine too; every family needs at least one
plan that both ran. Exits 77 (ctest's skip code) without torch, transformers, accelerate and
torchrun, 1 on any mismatch.
"""
import argparse
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

try:
    import torch  # noqa: F401
    import accelerate  # noqa: F401
    from transformers.distributed import DistributedConfig  # noqa: F401
except Exception as e:
    print(f"SKIP: torch, accelerate and transformers with DistributedConfig are needed ({e})")
    sys.exit(77)
TORCHRUN = shutil.which("torchrun") or os.path.join(os.path.dirname(sys.executable), "torchrun")
if not os.access(TORCHRUN, os.X_OK):
    print("SKIP: torchrun is not installed")
    sys.exit(77)

WORKER = r'''
import json, sys, torch, torch.distributed as dist
from torch.profiler import ProfilerActivity, profile
from transformers import AutoModelForCausalLM
from transformers.distributed import DistributedConfig
folder, plan_path, out_path = sys.argv[1:4]
dist.init_process_group("gloo")
ref = json.load(open(f"{folder}/logits.json"))
ids = torch.tensor(ref["tokens"]).reshape(ref["batch"], ref["seq"])
try:
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                                 distributed_config=DistributedConfig(**json.load(open(plan_path)))).eval()
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
        logits = model(ids).logits.reshape(ref["batch"] * ref["seq"], -1).float()
    calls = {}
    for e in prof.events():
        if e.name.startswith("gloo:"):
            calls[e.name[5:]] = calls.get(e.name[5:], 0) + 1
    result = {"logits": logits.reshape(-1).tolist(), "calls": calls}
except Exception as e:  # Transformers refuses the plan, or fails running it
    result = {"error": f"{type(e).__name__}: {e}".splitlines()[0][:300]}
if dist.get_rank() == 0:
    json.dump(result, open(out_path, "w"))
dist.destroy_process_group()
'''


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rel(a, b):
    if len(a) != len(b):
        return float("inf")
    return max(abs(x - y) for x, y in zip(a, b)) / max(abs(y) for y in b)


def transformers_tp(folder, plan_path, tp, work):
    out = os.path.join(work, "transformers.json")
    worker = os.path.join(work, "worker.py")
    with open(worker, "w") as f:
        f.write(WORKER)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    run = subprocess.run([TORCHRUN, "--nproc-per-node", str(tp), "--master-addr", "127.0.0.1", "--master-port",
                          str(free_port()), worker, folder, plan_path, out],
                         capture_output=True, text=True, timeout=600, env=env, cwd=work)
    if not os.path.exists(out):
        errors = [l for l in run.stderr.splitlines() if "Error:" in l] or run.stderr.strip().splitlines() or ["no output"]
        tail = errors[0]
        return {"error": f"torchrun exited {run.returncode}: {tail[:300]}"}
    with open(out) as f:
        return json.load(f)


def engine(cli, folder, plan_path, tp, ref, work):
    logits, record = os.path.join(work, "engine-logits.json"), os.path.join(work, "engine.json")
    run = subprocess.run([cli, "run", "--model", folder, "--plan", plan_path, "--tp", str(tp), "--batch",
                          str(ref["batch"]), "--seq", str(ref["seq"]), "--tokens", ",".join(map(str, ref["tokens"])),
                          "--warmup", "0", "--iters", "1", "--dump-logits", logits, "--json", record],
                         capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        return {"error": f"exit {run.returncode}: {run.stderr.strip()[:300]}"}
    with open(logits) as f:
        out = {"logits": json.load(f)["logits"]}
    with open(record) as f:
        spans = json.load(f)["runs"][-1]["spans"]
    calls = {}
    for s in spans:
        if s["kind"] == "comm" and s["rank"] == 0:
            calls[s["op"]] = calls.get(s["op"], 0) + 1
    out["calls"] = calls
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cli")
    ap.add_argument("repo")
    ap.add_argument("--tp", default="2,4")
    ap.add_argument("--families", default="")
    a = ap.parse_args()
    a.repo, a.cli = os.path.abspath(a.repo), os.path.abspath(a.cli)
    models = os.path.join(a.repo, "tests", "fixtures", "models")
    families = sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(models, "*", "logits.json")))
    if a.families:
        families = [f for f in families if f in a.families.split(",")]
    failures, rows = 0, []
    for fam in families:
        folder = os.path.join(models, fam)
        with open(os.path.join(folder, "logits.json")) as f:
            ref = json.load(f)
        compared = 0
        for tp in map(int, a.tp.split(",")):
            plans = []
            exported = subprocess.run([a.cli, "plan", "export", folder, "--tp", str(tp)], capture_output=True, text=True)
            if exported.returncode == 0:
                plans.append(("default (exported)", json.loads(exported.stdout)))
            else:  # the planner refuses the default plan at this T (heads that do not split)
                rows.append((fam, tp, "default", "plan export: " + exported.stderr.strip()[:200], "", ""))
            for path in sorted(glob.glob(os.path.join(a.repo, "plans", fam.removesuffix("_text"), "*.json"))):
                with open(path) as f:
                    plan = dict(json.load(f), tp_size=tp)
                if "ep_plan" in plan:  # expert parallelism on the same ranks
                    plan["ep_size"] = tp
                plans.append((os.path.relpath(path, a.repo), plan))
            for name, plan in plans:
                with tempfile.TemporaryDirectory() as work:
                    plan_path = os.path.join(work, "plan.json")
                    with open(plan_path, "w") as f:
                        json.dump(plan, f)
                    hf = transformers_tp(folder, plan_path, tp, work)
                    ours = engine(a.cli, folder, plan_path, tp, ref, work)
                    plain = {k: v for k, v in plan.get("tp_plan", {}).items() if v != "sequence_parallel"}
                    if "error" not in ours and plain != plan.get("tp_plan", {}):
                        with open(plan_path, "w") as f:
                            json.dump(dict(plan, tp_plan=plain), f)
                        as_tp = engine(a.cli, folder, plan_path, tp, ref, work)
                        ours["expected"] = as_tp.get("calls", as_tp.get("error"))
                if "error" in hf:  # not compared; the engine may refuse it too (heads or experts that do not split)
                    also = "; the engine refuses it too" if "error" in ours else "; the engine runs it"
                    rows.append((fam, tp, name, "Transformers: " + hf["error"] + also, "", ""))
                    continue
                if "error" in ours:
                    failures += 1
                    rows.append((fam, tp, name, "FAIL engine: " + ours["error"], "", ""))
                    continue
                err = rel(ours["logits"], hf["logits"])
                same = ours.get("expected", ours["calls"]) == hf["calls"]
                ok = err < 1e-4 and same
                failures += not ok
                compared += ok
                calls = ", ".join(f"{k} {v}" for k, v in sorted(hf["calls"].items())) or "none"
                mine = "same" if same and "expected" not in ours else ", ".join(f"{k} {v}" for k, v in sorted(ours["calls"].items())) or "none"
                if "expected" in ours:
                    mine += " (sequence parallel; without it: " + ("same as Transformers" if same else str(ours["expected"])) + ")"
                rows.append((fam, tp, name, ("ok" if ok else "FAIL") + f" {err:.1e}", calls, mine))
        if compared == 0:
            failures += 1
            rows.append((fam, "-", "-", "FAIL: no plan ran on both", "", ""))
    print(f"| family | T | plan | engine vs Transformers TP (rel) | Transformers' collectives (rank 0) | engine's |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")
    print(f"{failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
