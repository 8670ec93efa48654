#!/usr/bin/env python3
"""The MPI communicator under a real `mpirun -n 2`: logits of the llama fixture match Transformers'
reference, decode gives generate()'s tokens and step logits, and a failing rank ends the job with its rank and node named, without hanging.

  python3 tests/check_mpi_run.py TPSTUDIO_CLI FIXTURES_DIR
Exits 77 (skip) when mpirun is missing.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def main():
    cli, fixtures = sys.argv[1], sys.argv[2]
    mpirun = shutil.which("mpirun")
    if not mpirun:
        print("SKIP: mpirun not found")
        return 77
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self,vader",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    base = [mpirun, "-n", "2", "--oversubscribe", cli, "run", "--comm", "mpi", "--model", f"{fixtures}/models/llama"]
    ref = json.load(open(f"{fixtures}/models/llama/logits.json"))
    tokens = ref["tokens"]
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "logits.json")
        # The reference's token ids: batch 2 × seq 10, given through a one-line plan-free run.
        run = subprocess.run(base + ["--batch", str(ref["batch"]), "--seq", str(ref["seq"]), "--warmup", "0",
                                     "--iters", "1", "--tokens", ",".join(map(str, tokens)), "--dump-logits", out],
                             capture_output=True, text=True, env=env, timeout=120)
        if run.returncode != 0:
            print("FAIL mpirun run:", run.stdout[-500:], run.stderr[-1500:])
            return 1
        got = json.load(open(out))["logits"]
        want = ref["logits"]
        scale = max(abs(v) for v in want)
        err = max(abs(a - b) for a, b in zip(got, want)) / scale if len(got) == len(want) else float("inf")
        print(f"{'ok  ' if err < 1e-4 else 'FAIL'} mpirun -n 2: logits vs Transformers, relative error {err:.2e}")
        failures += err >= 1e-4
        # Decode under mpirun: Transformers' generate() tokens, each step's logits within 1e-4.
        gen = json.load(open(f"{fixtures}/models/llama/generate.json"))
        run = subprocess.run(base + ["--batch", str(gen["batch"]), "--seq", str(gen["prompt"]), "--decode",
                                     str(gen["steps"] - 1), "--warmup", "0", "--iters", "1", "--tokens",
                                     ",".join(map(str, gen["prompt_tokens"])), "--dump-logits", out],
                             capture_output=True, text=True, env=env, timeout=120)
        ok = run.returncode == 0
        if ok:
            dump = json.load(open(out))
            got = dump["logits"] + dump["step_logits"]  # prefill's logits at the last positions, then each step's
            want = gen["step_logits"]
            scale = max(abs(v) for v in want)
            err = max(abs(a - b) for a, b in zip(got, want)) / scale if len(got) == len(want) else float("inf")
            tokens = [t for seq in dump["generated"] for t in seq]
            ok = tokens == gen["tokens"] and err < 1e-4
            print(f"{'ok  ' if ok else 'FAIL'} mpirun -n 2: decode {gen['steps'] - 1} steps, tokens "
                  f"{'equal' if tokens == gen['tokens'] else 'differ from'} Transformers' generate(), step logits {err:.2e}")
        else:
            print("FAIL mpirun decode:", run.stdout[-500:], run.stderr[-1500:])
        failures += not ok
        t0 = time.time()
        bad = subprocess.run(base + ["--seq", "8", "--iters", "1", "--warmup", "0",
                                     "--inject-failure", "1:model.layers.1.mlp.down_proj"],
                             capture_output=True, text=True, env=env, timeout=120)
        took = time.time() - t0
        named = "process rank 1" in bad.stderr and "model.layers.1.mlp.down_proj: injected failure" in bad.stderr
        ok = bad.returncode != 0 and named and took < 60
        print(f"{'ok  ' if ok else 'FAIL'} injected failure on rank 1: exit {bad.returncode} after {took:.1f} s")
        if not ok:
            print(bad.stderr[-1500:])
        failures += not ok
        # A rank process killed mid-run: mpirun ends the job, nothing hangs.
        marker = os.path.join(d, "killed-rank")
        job = subprocess.Popen(base + ["--seq", "64", "--iters", "100000", "--warmup", "0", "--json", marker],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        victim = None
        for _ in range(200):
            time.sleep(0.05)
            ps = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
            ranks = [int(p) for p in ps if int(p) != job.pid]
            if len(ranks) >= 2:
                victim = max(ranks)
                break
        t0 = time.time()
        if victim:
            time.sleep(0.5)
            os.kill(victim, 9)
        try:
            _, err = job.communicate(timeout=60)
            ended = job.returncode != 0
        except subprocess.TimeoutExpired:
            job.kill()
            err, ended = "", False
        ok = victim is not None and ended
        print(f"{'ok  ' if ok else 'FAIL'} a rank process killed with SIGKILL: job ended (exit {job.returncode}) after {time.time() - t0:.1f} s")
        failures += not ok
        # nccl-tests table over MPI: every collective, data checked.
        bench = subprocess.run([mpirun, "-n", "2", "--oversubscribe", cli, "bench", "comm", "--comm", "mpi", "-e", "64K",
                                "-f", "8", "-n", "3", "-w", "1", "-o", "all", "--json"],
                               capture_output=True, text=True, env=env, timeout=120)
        try:
            rows = json.loads(bench.stdout)["rows"]
            wrong = sum(r[f]["wrong"] for r in rows for f in ("out_of_place", "in_place") if f in r)
            ok = bench.returncode == 0 and len(rows) == 25 and wrong == 0
        except (ValueError, KeyError):
            ok = False
        print(f"{'ok  ' if ok else 'FAIL'} mpirun -n 2 bench comm: all five collectives, data checked")
        if not ok:
            print(bench.stdout[-800:], bench.stderr[-800:])
        failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
