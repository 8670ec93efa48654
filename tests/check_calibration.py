#!/usr/bin/env python3
"""Calibrated predictions against the engine's measurements (issue 18, outcome 1).

Calibrates this machine (`tpstudio-cli calibrate`, with the models' own Linear shapes), then for
each model runs the CPU engine at T = 1 and 2 (prefill of --seq tokens, --decode greedy steps) and
compares, with `tpstudio-cli report RECORD --hardware PROFILE --json`, the measured time of every
layer and of each phase (median forward, median decode step) with the prediction at the run's own
settings. Models: the built-in example (Llama, hidden 512, 8 layers) and two fixture families,
Qwen3 (q/k norms) and Mixtral (MoE), their fixture configs (tests/fixtures/models, written by
Transformers) widened to the example's size: hidden 512, intermediate 1536, 8 layers, vocab 32000,
random weights. The fixtures themselves are 32 wide: their layers take a few microseconds, where
the executor's per-op bookkeeping and thread wake-ups are all there is to time.

Rounds interleave calibration and runs (--rounds N): the machine is shared and noisy. Exit 1 when
some |error| exceeds --bound in every round (a phase, or a layer with --per-layer).

  tests/check_calibration.py build/dev/app/tpstudio-cli --bound 0.15 --per-layer --rounds 3
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def widened(family, folder):
    """The fixture's config.json at the example's size, in a folder of its own."""
    with open(os.path.join(HERE, "fixtures", "models", family, "config.json")) as f:
        c = json.load(f)
    c.update(hidden_size=512, intermediate_size=1536, num_hidden_layers=8, vocab_size=32000,
             num_attention_heads=8, num_key_value_heads=4, head_dim=64, max_position_embeddings=4096)
    if family == "qwen3":
        c.update(layer_types=["full_attention"] * 8, max_window_layers=8)
    path = os.path.join(folder, family + "-512")
    os.makedirs(path)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    return path


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cli")
    ap.add_argument("--bound", type=float, default=0.15, help="largest |predicted - measured| / measured")
    ap.add_argument("--per-layer", action="store_true", help="hold every layer to the bound too, not only the phases")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--decode", type=int, default=16)
    ap.add_argument("--quick", action="store_true", help="calibrate --quick")
    ap.add_argument("--json", help="write every round's comparison here")
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="tp-calibration-")
    try:
        return check(a, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check(a, tmp):
    models = ["example", widened("qwen3", tmp), widened("mixtral", tmp)]
    rounds, calibrated = [], []
    for rnd in range(a.rounds):
        profile = os.path.join(tmp, f"profile-{rnd}.json")
        cmd = [a.cli, "calibrate", "-o", profile, "--ranks", "2"]
        for m in models:
            cmd += ["--model", m]
        wrote = run(cmd + (["--quick"] if a.quick else [])).strip()
        # What the round's calibration measured, so that a failure shows whether the profile or the
        # runs were off: "peak … GFLOP/s per rank, memory … GB/s, … measurements".
        calibrated.append(wrote[wrote.find("peak"):])
        result = {}
        for m in models:
            record = os.path.join(tmp, f"run-{rnd}-{os.path.basename(m)}.json")
            run([a.cli, "run", "--model", m, "--random-weights", "--tp", "1,2", "--seq", str(a.seq),
                 "--decode", str(a.decode), "--warmup", "1", "--iters", "3", "--json", record])
            result[os.path.basename(m)] = json.loads(run([a.cli, "report", record, "--hardware", profile, "--json"]))
        rounds.append(result)

    # A check fails only when it fails in every round (noise passes in one of them).
    failures = {}
    for rnd, c in enumerate(calibrated):
        print(f"round {rnd + 1} calibration: {c}")
    print(f"{'model':<14} {'T':>2} {'phase':<8} {'measured':>12} {'predicted':>12} {'error':>8} {'worst layer':>12}   (round by round)")
    for name in rounds[0]:
        for i, r0 in enumerate(rounds[0][name]["runs"]):
            for ph in ("prefill", "decode"):
                if ph not in r0:
                    continue
                cells = [rd[name]["runs"][i][ph] for rd in rounds]
                for k, c in enumerate(cells):
                    print(f"{name if k == 0 else '':<14} {r0['tp'] if k == 0 else '':>2} {ph if k == 0 else '':<8} "
                          f"{c['measured_us']:>10.1f}us {c['predicted_us']:>10.1f}us {100 * c['error']:>+7.1f}% "
                          f"{100 * c['worst_layer_error']:>+11.1f}%")
                key = f"{name} T={r0['tp']} {ph}"
                if all(abs(c["error"]) > a.bound for c in cells):
                    failures[key] = "phase error " + ", ".join("%+.1f%%" % (100 * c["error"]) for c in cells)
                if a.per_layer and all(abs(c["worst_layer_error"]) > a.bound for c in cells):
                    failures[key + " layers"] = "worst layer " + ", ".join("%+.1f%%" % (100 * c["worst_layer_error"]) for c in cells)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rounds, f, indent=1)
    if failures:
        print(f"\nbeyond ±{100 * a.bound:.0f}% in every round:")
        for k, v in failures.items():
            print(f"  {k}: {v}")
        return 1
    print(f"\nevery {'layer and ' if a.per_layer else ''}phase within ±{100 * a.bound:.0f}% in at least one of {a.rounds} round(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
