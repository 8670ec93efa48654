#!/usr/bin/env python3
"""Prefill throughput of TP Studio's CPU engine against Transformers + PyTorch on the same checkpoint
and the same cores.

  python3 scripts/bench_vs_torch.py TPSTUDIO_CLI [--model example] [--seq 512] [--iters 5]

Writes the built-in example model (or any catalog/config.json model) as a random safetensors
checkpoint with Transformers, then times one prefill forward (batch 1, fp32):
  - Transformers + PyTorch with torch.set_num_threads(1) and (nproc)
  - tpstudio-cli run --tp 1,2 on that checkpoint (one BLAS thread per rank)
and prints tokens/s and the ratios. Needs `pip install torch transformers safetensors`.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import torch
from transformers import AutoConfig, AutoModelForCausalLM

ROOT = pathlib.Path(__file__).resolve().parent.parent


def torch_tokens_per_s(model, ids, threads, iters):
    torch.set_num_threads(threads)
    with torch.no_grad():
        model(ids)  # warm-up
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            model(ids)
            times.append(time.perf_counter() - t0)
    return ids.numel() / statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cli")
    ap.add_argument("--model", default="example")
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--iters", type=int, default=5)
    a = ap.parse_args()

    raw = json.loads((ROOT / "resources" / "catalog" / f"{a.model}.json").read_text())
    config = AutoConfig.for_model(**raw)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).float().eval()
    ids = torch.randint(0, config.vocab_size, (1, a.seq))
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d, safe_serialization=True)
        pt = {t: torch_tokens_per_s(model, ids, t, a.iters) for t in sorted({1, cores})}
        out = subprocess.run([a.cli, "run", "--model", d, "--tp", "1,2", "--seq", str(a.seq), "--warmup", "1",
                              "--iters", str(a.iters), "--json-stream"], capture_output=True, text=True, check=True)
    results = {}
    for line in out.stdout.splitlines():
        e = json.loads(line)
        if e["event"] == "result":
            results[e["tp"]] = e["tokens_per_s"]
    print(f"{a.model}: prefill batch 1, seq {a.seq}, fp32, {cores} cores ({os.uname().machine})")
    print(f"{'':36} {'tokens/s':>10}")
    for t, v in pt.items():
        print(f"{'Transformers + PyTorch, ' + str(t) + ' thread(s)':36} {v:>10.1f}")
    for t, v in results.items():
        print(f"{'TP Studio CPU engine, T=' + str(t):36} {v:>10.1f}")
    print(f"TP Studio T=2 / T=1:                       {results[2] / results[1]:.2f}x")
    print(f"TP Studio T=1 / PyTorch 1 thread:          {results[1] / pt[1]:.2f}x")
    print(f"TP Studio T=2 / PyTorch {cores} threads:         {results[2] / pt[cores]:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
