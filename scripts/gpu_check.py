#!/usr/bin/env python3
"""The GPU check's steps and its table (scripts/gpu-check.sh builds the bundle and calls this).

  python3 scripts/gpu_check.py --bundle build/gpu-bundle [--dry-run] [--python PY] [--out DIR]

On a GPU machine, in order, each step with its own time limit (8 minutes in all):
  libraries  every bundled binary resolves its libraries: the bundle's, the system's, the driver,
             cuBLAS (CUDA install or PyTorch's wheels) and NCCL (PyTorch's wheels)
  ops        tst_backend_ops cuda: every op and dtype against double references (NMSE)
  engine     tst_gpu: whole-model logits vs the CPU engine and Transformers, NCCL, emulation group
  gemm       tpstudio-cli bench gemm: Llama-3.1-8B's bf16 GEMMs at 512 tokens vs a measured 8192³ peak
  forward    a Llama-3.1-8B-shaped model with random bf16 weights, prefill B=1 S=512 and 32 greedy
             decode steps on the KV cache (ITL), on the engine and on PyTorch eager (Transformers,
             sdpa, DynamicCache), alternated
  emulation  the same model emulated at T = 2, 4, 8: per-rank compute against T=1's compute / T
With --dry-run (no GPU): the same binaries through the same library paths, the GPU tests must skip
with their reason, the engine and emulation steps run on the CPU backend with the example model, and
the PyTorch script runs a 2-layer copy on the CPU: everything but the GPU itself is proven.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Libraries the GPU machine provides (driver, CUDA, NCCL) and the C runtime every Linux has.
PROVIDED = re.compile(r"^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|libstdc\+\+\.so|"
                      r"libgcc_s\.so|libcuda\.so|libcublas\.so|libcublasLt\.so|libnccl\.so)")
BUDGET_S = 480


def compute_ms(run):
    """The slowest rank's compute (the sum of its compute spans) in a run of a record, ms."""
    per = {}
    for s in run["spans"]:
        if s["kind"] == "compute":
            per[s["rank"]] = per.get(s["rank"], 0.0) + (s["end_us"] - s["start_us"]) / 1e3
    return max(per.values())


class Check:
    def __init__(self, a):
        self.a = a
        self.bundle = pathlib.Path(a.bundle).resolve()
        self.rows = []          # (check, measured, target, verdict)
        self.failed = False
        self.out = pathlib.Path(a.out) if a.out else None
        self.start = time.monotonic()
        self.real_compute = []  # the plain (not emulated) T=1 prefill's compute, ms, per forward round
        self.env = dict(os.environ, TP_SOURCE_DIR=str(ROOT), QT_QPA_PLATFORM="offscreen",
                        LD_LIBRARY_PATH=":".join([str(self.bundle / "lib")] + self.device_libs()))

    # --- plumbing ---------------------------------------------------------------------------------
    def device_libs(self):
        """Where cuBLAS and NCCL are on this machine: the CUDA install, else PyTorch's wheels."""
        dirs = []
        for d in ["/usr/local/cuda/lib64", "/usr/local/cuda/lib", "/usr/local/cuda/targets/x86_64-linux/lib"]:
            if pathlib.Path(d).is_dir():
                dirs.append(d)
        py = self.a.python or "python3"
        probe = ("import importlib, pathlib\n"
                 "for m in ('nvidia.nccl', 'nvidia.cublas', 'nvidia.cuda_runtime'):\n"
                 "    try:\n"
                 "        for p in importlib.import_module(m).__path__: print(pathlib.Path(p) / 'lib')\n"
                 "    except Exception: pass\n")
        try:
            out = subprocess.run([py, "-c", probe], capture_output=True, text=True, timeout=60).stdout.split()
            dirs += [d for d in out if pathlib.Path(d).is_dir()]
        except (OSError, subprocess.TimeoutExpired):
            pass
        return dirs

    def run(self, name, args, timeout, python=False):
        left = BUDGET_S - (time.monotonic() - self.start)
        if left < 10:
            return None, f"skipped: the {BUDGET_S} s budget is spent"
        cmd = ([self.a.python or "python3"] + args) if python else [str(self.bundle / "bin" / args[0])] + args[1:]
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=min(timeout, left), env=self.env, cwd=ROOT)
        except subprocess.TimeoutExpired as e:
            self.save(name, (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""))
            return None, f"timed out after {timeout:.0f} s"
        self.save(name, f"$ {' '.join(cmd)}\n[exit {p.returncode}, {time.monotonic() - t0:.1f} s]\n{p.stdout}\n{p.stderr}")
        return p, None

    def save(self, name, text):
        if self.out:
            (self.out / f"{name}.log").write_text(text)

    def row(self, check, measured, target, ok):
        verdict = "ok" if ok is True else "FAIL" if ok is False else ok
        if ok is False:
            self.failed = True
        self.rows.append((check, measured, target, verdict))

    # --- steps --------------------------------------------------------------------------------------
    def libraries(self):
        missing = {}
        for b in sorted((self.bundle / "bin").iterdir()):
            out = subprocess.run(["ldd", str(b)], capture_output=True, text=True, env=self.env).stdout
            for line in out.splitlines():
                lib = line.strip().split()[0] if line.strip() else ""
                if "not found" in line and not (self.a.dry_run and PROVIDED.match(lib)):
                    missing.setdefault(lib, []).append(b.name)
                elif "=>" in line and "not found" not in line:
                    path = line.split("=>")[1].split("(")[0].strip()
                    if path and not path.startswith(str(self.bundle)) and not PROVIDED.match(lib) and self.a.dry_run:
                        # Here every library but the provided ones must come from the bundle: the
                        # GPU machine has none of this project's packages.
                        missing.setdefault(f"{lib} (from {path}, not in the bundle)", []).append(b.name)
        size = sum(f.stat().st_size for f in self.bundle.rglob("*") if f.is_file())
        self.row("bundle libraries", f"{len(list((self.bundle / 'lib').iterdir()))} libraries, {size / 2**20:.1f} MiB unpacked",
                 "all resolve", not missing or ", ".join(f"{k}: {v}" for k, v in missing.items()))
        if missing:
            self.failed = True

    def skips(self, check, p, why):
        """Dry run: a GPU suite must exit 77 and say why (ctest reports it Skipped)."""
        ok = p is not None and p.returncode == 77 and "SKIP" in p.stdout
        self.row(f"{check} (no GPU)", (p.stdout.strip() if p else why)[:70], "exit 77, says why", ok)

    def ops(self):
        p, why = self.run("ops", ["tst_backend_ops", "cuda"], 180)
        if self.a.dry_run:
            return self.skips("tst_backend_ops cuda", p, why)
        if p is None:
            return self.row("op NMSE (tst_backend_ops cuda)", why, "every op within its threshold", False)
        worst = {}
        for m in re.finditer(r"TestBackendOps::(\w+)\((\w+)\) \w+: worst NMSE ([0-9.eE+-]+)", p.stdout):
            worst.setdefault(m.group(1), {})[m.group(2)] = float(m.group(3))
        fails = re.findall(r"FAIL!\s*: TestBackendOps::(\S+)", p.stdout)
        for op, by in sorted(worst.items()):
            self.row(f"op NMSE {op} f32 / bf16 / f16",
                     " / ".join(f"{by.get(d, float('nan')):.1e}" for d in ("F32", "BF16", "F16")),
                     "1e-9 / 1e-4 / 1e-5", not any(f.startswith(op + "(") for f in fails))
        totals = re.search(r"Totals: (\d+) passed, (\d+) failed, (\d+) skipped", p.stdout)
        self.row("tst_backend_ops cuda", totals.group(0) if totals else p.stdout[-200:], "0 failed",
                 p.returncode == 0)

    def engine(self):
        p, why = self.run("engine", ["tst_gpu"], 240)
        if self.a.dry_run:
            return self.skips("tst_gpu", p, why)
        if p is None:
            return self.row("tst_gpu", why, "0 failed", False)
        totals = re.search(r"Totals: (\d+) passed, (\d+) failed, (\d+) skipped", p.stdout)
        fails = re.findall(r"FAIL!\s*: TestGpu::(\S+\)?)", p.stdout)
        self.row("tst_gpu: logits vs CPU and Transformers, NCCL, emulation",
                 totals.group(0) if totals else (p.stdout + p.stderr)[-200:], "0 failed",
                 p.returncode == 0 or ("failed: " + ", ".join(fails[:4])))
        worst = {}
        for m in re.finditer(r"TestGpu::wholeModel\((\w+) T=(\d) (\w+)\) .*?: ([0-9.e+-]+) from the CPU engine, ([0-9.e+-]+) "
                             r"from Transformers", p.stdout):
            w = worst.setdefault(m.group(3), [0.0, 0.0])
            w[0], w[1] = max(w[0], float(m.group(4))), max(w[1], float(m.group(5)))
        for dt, (cpu, hf) in sorted(worst.items()):
            self.row(f"whole-model logits, worst over families and T ({dt})", f"{cpu:.1e} vs CPU engine, {hf:.1e} vs Transformers",
                     "1e-4" if dt == "F32" else "bf16 tolerance (tst_engine)", True)

    def gemm(self):
        if self.a.dry_run:
            p, why = self.run("gemm", ["tpstudio-cli", "bench", "gemm", "--model", "llama-3.1-8b"], 60)
            ok = p is not None and p.returncode == 1 and "bench gemm:" in p.stderr
            self.row("bench gemm (no GPU)", (p.stderr.strip() if p else why)[:70], "exit 1, says why", ok)
            return
        p, why = self.run("gemm", ["tpstudio-cli", "bench", "gemm", "--model", "llama-3.1-8b", "--tp", "1", "--tokens",
                                   "512", "--iters", "20", "--json"], 120)
        if p is None or p.returncode != 0:
            return self.row("bf16 GEMM vs cuBLAS peak", why or p.stderr[-200:], "≥ 70% on large GEMMs", False)
        j = json.loads(p.stdout)
        self.row("bf16 GEMM 8192³ (measured peak)", f"{j['peak_tflops']:.0f} TFLOP/s", "—", True)
        for s in j["shapes"]:
            large = 2 * s["m"] * s["n"] * s["k"] >= 2 * 512 * 4096 * 4096
            self.row(f"GEMM {s['m']}×{s['n']}×{s['k']}", f"{s['tflops']:.0f} TFLOP/s = {100 * s['fraction_of_peak']:.0f}%",
                     "≥ 70%" if large else "(small: reported)", s["fraction_of_peak"] >= 0.70 if large else True)

    def engine_run(self, name, model, seq, extra):
        with tempfile.TemporaryDirectory() as d:
            rec = pathlib.Path(d) / "run.json"
            p, why = self.run(name, ["tpstudio-cli", "run", "--model", model, "--seq", str(seq), "--random-weights",
                                     "--warmup", "2", "--iters", "10", "--json", str(rec)] + extra, 300)
            if p is None or p.returncode != 0:
                return None, why or (p.stderr.strip()[-300:])
            return json.loads(rec.read_text()), None

    def forward(self):
        model, extra = ("example", ["--backend", "cpu", "--tp", "1", "--dtype", "bf16"]) if self.a.dry_run else \
            ("llama-3.1-8b", ["--backend", "cuda", "--tp", "1", "--dtype", "bf16"])
        steps = 8 if self.a.dry_run else 32
        seq = 32 if self.a.dry_run else 512
        torch_args = ["scripts/gpu_vs_torch.py", "--model", "llama-3.1-8b", "--seq", "512", "--decode", str(steps),
                      "--json"] + (["--dry-run"] if self.a.dry_run else [])
        ours = {512: [], 1: []}     # prefill (TTFT) and the decode step (ITL), ms
        theirs = {512: [], 1: []}
        for rnd in range(2):  # engine, PyTorch, engine, PyTorch: interleaved rounds
            rec, why = self.engine_run(f"forward-engine-{rnd}", model, seq, extra + ["--decode", str(steps)])
            if rec is None:
                return self.row("engine prefill and decode", why, "runs", False)
            ours[512].append(rec["runs"][0]["median_s"] * 1e3)
            self.real_compute.append(compute_ms(rec["runs"][0]))
            ours[1].append(rec["runs"][0]["decode"]["itl_median_s"] * 1e3)
            p, why = self.run(f"forward-torch-{rnd}", torch_args, 240, python=True)
            if p is None or p.returncode != 0:
                self.row("PyTorch eager (Transformers, sdpa)", why or p.stderr.strip()[-200:], "runs",
                         "not measured" if self.a.dry_run else False)
                theirs = None
                break
            t = json.loads(p.stdout.strip().splitlines()[-1])
            theirs[512].append(t["prefill_ms"])
            theirs[1].append(t["decode_ms"])
        label = "example, CPU bf16 (dry run)" if self.a.dry_run else "Llama-3.1-8B shape, bf16"
        for key, what in ((512, f"prefill B=1 S={seq} (engine: with the first token)"),
                          (1, f"decode step B=1 after S={seq}, median of {steps} (ITL)")):
            mine = statistics.median(ours[key])
            if theirs and theirs[key]:
                other = statistics.median(theirs[key])
                if self.a.dry_run: # two different small models on the CPU: both ran, nothing to compare
                    self.row(f"{what} (dry run: engine on the example, PyTorch on a 2-layer copy)",
                             f"engine {mine:.2f} ms, PyTorch {other:.2f} ms", "both run", True)
                else:
                    self.row(f"{what} ({label})", f"engine {mine:.2f} ms, PyTorch {other:.2f} ms", "engine ≤ PyTorch",
                             mine <= other)
            else:
                self.row(f"{what} ({label})", f"engine {mine:.2f} ms", "engine ≤ PyTorch", "PyTorch not measured")

    def emulation(self):
        """Emulated ranks' compute: T=1 as the plain run's (the same work), T > 1 against T=1's / T."""
        model, extra = ("example", ["--backend", "cpu", "--dtype", "bf16", "--emulate-tp", "1,2,4"]) if self.a.dry_run else \
            ("llama-3.1-8b", ["--backend", "cuda", "--dtype", "bf16", "--emulate-tp", "1,2,4,8"])
        rec, why = self.engine_run("emulation", model, 512 if not self.a.dry_run else 64, extra)
        if rec is None:
            return self.row("emulated per-rank compute", why, "within 15% of T=1/T", False)

        base = compute_ms(rec["runs"][0])
        if self.real_compute and not self.a.dry_run:
            real = statistics.median(self.real_compute)
            self.row("emulated T=1 compute vs the plain T=1 run's", f"{base:.2f} ms vs {real:.2f} ms ({100 * (base / real - 1):+.0f}%)",
                     "within 10%", abs(base / real - 1) <= 0.10)
        for run in rec["runs"][1:]:
            t = run["tp"]
            c = compute_ms(run)
            off = c / (base / t) - 1
            if self.a.dry_run: # the example's small shapes on the CPU: the step runs, the figure is not the GPU's
                self.row(f"emulated T={t} per-rank compute (dry run, CPU)", f"{c:.2f} ms vs {base / t:.2f} ms ({100 * off:+.0f}%)",
                         "runs", True)
            else:
                self.row(f"emulated T={t} per-rank compute", f"{c:.2f} ms vs {base / t:.2f} ms ({100 * off:+.0f}%)",
                         "within 15%", abs(off) <= 0.15)

    # --- report -------------------------------------------------------------------------------------
    def table(self, header):
        w = [max(len(str(r[i])) for r in self.rows + [("check", "measured", "target", "result")]) for i in range(4)]
        lines = [header, "| " + " | ".join(h.ljust(w[i]) for i, h in enumerate(("check", "measured", "target", "result"))) + " |",
                 "|" + "|".join("-" * (x + 2) for x in w) + "|"]
        lines += ["| " + " | ".join(str(c).ljust(w[i]) for i, c in enumerate(r)) + " |" for r in self.rows]
        return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--python", help="the python3 with torch and transformers (default: python3)")
    ap.add_argument("--out", help="folder for the logs and gpu-check.json (default: $OUT when set)")
    a = ap.parse_args()
    a.out = a.out or os.environ.get("OUT")
    if a.out:
        pathlib.Path(a.out).mkdir(parents=True, exist_ok=True)
    c = Check(a)
    header = "gpu-check --dry-run (no GPU used)" if a.dry_run else "gpu-check"
    if not a.dry_run and shutil.which("nvidia-smi"):
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip()
        header += f": {smi}"
    for step in (c.libraries, c.ops, c.engine, c.gemm, c.forward, c.emulation):
        step()
        print(f"  [{time.monotonic() - c.start:5.0f} s] {step.__name__} done", file=sys.stderr, flush=True)
    header += f" — {time.monotonic() - c.start:.0f} s"
    text = c.table(header)
    print(text)
    if a.out:
        (pathlib.Path(a.out) / "gpu-check.md").write_text(text + "\n")
        (pathlib.Path(a.out) / "gpu-check.json").write_text(json.dumps(c.rows, indent=1))
    print("gpu-check: " + ("FAILED" if c.failed else "passed"))
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
