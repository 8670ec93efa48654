#!/usr/bin/env python3
"""Hostile-input generator for tpstudio-cli (issue 15, outcome 2).

Builds a seeded, deterministic corpus of at least 1,000 hostile command lines over the issue's classes
(overflowing sizes, code injection into the Python export, bench load into a foreign folder, deep nesting
and huge strings, non-UTF-8 paths and strings, MPI ranks that disagree, hangs, memory, lost work, write
errors, silently wrong numbers, bad option values, misleading messages, slowness, terminal escapes, one
path for two outputs) plus random mutations of the valid fixtures, runs each one under a timeout, a memory
cap and a file-size cap in its own temporary folder, and judges it:

  FAIL  a signal or a sanitizer report, a timeout, peak RSS over the cap (or an allocation failure),
        exit 0 with non-finite / null / negative / wrapped figures, exit 0 where the case must be refused,
        exit 1/2 without a message or with a message over 4 KB, any other exit code, and the class's own
        checks (injected code ran, an input or a foreign folder was modified, control characters on
        stdout, an output that is not valid UTF-8 JSON / Python).
  PASS  everything else (for hostile cases: exit 1 or 2 with a short message on stderr).

  scripts/hostile_inputs.py --cli build/dev/app/tpstudio-cli            # the whole corpus, ~3 min on 2 cores
  scripts/hostile_inputs.py --cli build/asan/app/tpstudio-cli --asan    # RSS caps, longer timeouts, sanitizer scan
  scripts/hostile_inputs.py --cli ... --filter 7 --list                 # show the hang cases' command lines

Prints a per-class table and ends with
  hostile: N cases, 0 signals, 0 timeouts, 0 over memory, 0 wrong figures, F failures
exit 0 only when every case passes. Python 3.11 standard library only.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import math
import os
import random
import re
import resource
import shlex
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

CLASSES = {
    0: "baseline",        # valid inputs: must exit 0 with sound figures (proves the checks do not misfire)
    1: "overflow",
    2: "injection",
    3: "bench-load-dir",
    4: "nesting",
    5: "non-utf8",
    6: "mpi",
    7: "hangs",
    8: "memory",
    9: "lost-work",
    10: "write-errors",
    11: "wrong-numbers",
    12: "parse-errors",
    13: "messages",
    14: "slowness",
    15: "escapes",
    16: "same-path",
    17: "fuzz",
    18: "newer-verbs",     # issue 40: plan verify, calibrate, plan search, report --hardware, hardware folders, GUI
    19: "signals",         # SIGHUP, SIGQUIT, SIGTERM, SIGKILL: no child process or temporary folder left behind
}

MARKER = "MARKER"
GiB = 1 << 30
MAX_MESSAGE = 4096
READ_LIMIT = 64 << 20  # bytes of an output the checks read

# ---------------------------------------------------------------------------------------------------
# JSON writer with hostile extensions


class Raw:
    """Bytes written verbatim into the JSON text (bad UTF-8, NaN literals, truncation...)."""

    def __init__(self, data: bytes):
        self.data = data

    def __repr__(self):
        return f"Raw({self.data[:24]!r}{'...' if len(self.data) > 24 else ''})"


class Dup:
    """An object whose keys may repeat: a list of (key, value) pairs."""

    def __init__(self, pairs):
        self.pairs = pairs


def dump(obj) -> bytes:
    out: list[bytes] = []

    def w(o):
        if isinstance(o, Raw):
            out.append(o.data)
        elif isinstance(o, Dup):
            out.append(b"{")
            for i, (k, v) in enumerate(o.pairs):
                if i:
                    out.append(b",")
                w(k)
                out.append(b":")
                w(v)
            out.append(b"}")
        elif isinstance(o, dict):
            w(Dup(list(o.items())))
        elif isinstance(o, (list, tuple)):
            out.append(b"[")
            for i, v in enumerate(o):
                if i:
                    out.append(b",")
                w(v)
            out.append(b"]")
        elif isinstance(o, float):
            if math.isnan(o):
                out.append(b"NaN")
            elif math.isinf(o):
                out.append(b"Infinity" if o > 0 else b"-Infinity")
            else:
                out.append(repr(o).encode())
        elif isinstance(o, bool) or o is None:
            out.append(json.dumps(o).encode())
        elif isinstance(o, int):
            out.append(str(o).encode())
        elif isinstance(o, bytes):
            out.append(b'"' + o + b'"')
        else:
            out.append(json.dumps(str(o)).encode())

    w(obj)
    return b"".join(out)


def deep_array(depth: int, inner: bytes = b"1") -> bytes:
    return b"[" * depth + inner + b"]" * depth


def deep_object(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


# ---------------------------------------------------------------------------------------------------
# Cases


@dataclass
class Case:
    cid: str
    cls: int
    argv: list  # str or bytes; "{D}" is the case folder, "{CLI}" the binary
    setup: list = field(default_factory=list)  # callables f(Path) run in the case folder before the command
    must_fail: bool = False  # exit 0 is a failure
    must_pass: bool = False  # anything but exit 0 is a failure (baseline)
    timeout: Optional[float] = None  # seconds; None: the default
    stdout_path: Optional[str] = None  # e.g. /dev/full
    stdout_json: bool = False  # stdout must be UTF-8 JSON with sound figures when exit 0
    json_outputs: list = field(default_factory=list)  # files (relative) that must be sound JSON when present
    text_outputs: list = field(default_factory=list)  # files (relative) that must be UTF-8 when present
    python_outputs: list = field(default_factory=list)  # exported scripts: ast.parse + run --check, no marker
    protect: list = field(default_factory=list)  # relative paths that must not change
    absent: list = field(default_factory=list)  # relative paths that must not exist afterwards
    stderr_re: Optional[str] = None  # when refused, the message must match this
    no_progress: bool = False  # refused before running: no "iteration" progress lines
    no_control: bool = False  # stdout free of control characters but \n \t
    mpi: bool = False  # any non-zero exit is a refusal
    heavy: bool = False  # start early
    env: dict = field(default_factory=dict)  # "{D}" in a value is the case folder
    note: str = ""
    program: str = "cli"  # "gui": the GUI binary (--gui), offscreen
    check: Optional[Callable] = None  # f(d, stdout, stderr, rc) -> why it fails, or None
    max_rss_mb: Optional[int] = None  # a tighter memory cap than the run's (refused before allocating)
    mem_mb: Optional[int] = None  # a looser address-space cap for this case
    fsize_mb: Optional[int] = None  # a larger file-size cap (sparse synthesized checkpoints)
    # (signal, trigger, seconds): the signal goes to the CLI once `trigger` is seen (a substring of
    # the command line of one of the case's processes, or "tmp:PREFIX", an entry of its TMPDIR) and
    # `seconds` have passed; None: after `seconds`.
    signal: Optional[tuple] = None
    allowed_rc: tuple = ()  # signal cases: the exit statuses that are right (-N: died of signal N)
    max_latency: Optional[float] = None  # signal cases: seconds from the signal to the exit
    leftover_folders: bool = False  # signal cases: folders of the killed process itself may stay (SIGKILL)


def _w(rel, data):
    def f(d: Path):
        p = d / os.fsdecode(rel) if isinstance(rel, bytes) else d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data() if callable(data) else data)
    return f


def _copy(src: Path, rel):
    def f(d: Path):
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, p)
    return f


def _fifo(rel):
    def f(d: Path):
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(p)
    return f


def _symlink(target, rel):
    def f(d: Path):
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, p)
    return f


def _hardlink(src_rel, rel):
    def f(d: Path):
        os.link(d / src_rel, d / rel)
    return f


def _mkdir(rel):
    def f(d: Path):
        (d / rel).mkdir(parents=True, exist_ok=True)
    return f


def _big_record(rel, base: bytes, target: int):
    """A valid-looking run record of about `target` bytes: the first run's layers repeated."""

    def f(d: Path):
        rec = json.loads(base)
        layer = b'{"layer":0,"compute_us":1.5,"comm_us":0.25},'
        head = dict(rec)
        runs = head.pop("runs")
        run0 = dict(runs[0])
        run0["layers"] = "@@LAYERS@@"
        head["runs"] = [run0]
        text = json.dumps(head).encode()
        a, b = text.split(b'"@@LAYERS@@"')
        chunk = layer * (1 << 14)
        with open(d / rel, "wb") as fh:
            fh.write(a + b"[")
            n = len(a)
            while n < target:
                fh.write(chunk)
                n += len(chunk)
            fh.write(b'{"layer":0,"compute_us":1.5,"comm_us":0.25}]' + b)
    return f


def _cli_run(argv, cwd_rel=""):
    """Setup step: run the CLI itself in the case folder (a record to report on later)."""
    def f(d: Path):
        subprocess.run([CLI_PATH[0], *argv], cwd=d / cwd_rel, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=120, check=True)
    return f


def _edit_json(rel, **changes):
    def f(d: Path):
        p = d / rel
        j = json.loads(p.read_text())
        j.update(changes)
        p.write_text(json.dumps(j))
    return f


CLI_PATH = [""]  # the binary under test, for setup steps that run it


def _json_check(path, test, what):
    """A check that the JSON at `path` (relative, or None: stdout) satisfies `test`."""
    def f(d, stdout, stderr, rc):
        if rc != 0:
            return f"exit {rc}: {stderr[-200:]!r}"
        try:
            j = json.loads(stdout if path is None else (d / path).read_bytes())
        except (OSError, ValueError) as e:
            return f"{path or 'stdout'}: {e}"
        return None if test(j) else f"{what}: {json.dumps(j)[:300]}"
    return f


def _text_check(pattern, where="stderr", absent=False):
    def f(d, stdout, stderr, rc):
        text = stderr if where == "stderr" else stdout
        found = re.search(pattern.encode(), text) is not None
        if found == absent:
            return f"{where} {'has' if absent else 'lacks'} /{pattern}/: {text[-300:]!r}"
        return None
    return f


class Corpus:
    def __init__(self, src: Path, seed: int, record: bytes, records: list, python: Optional[str] = None,
                 gui: Optional[str] = None):
        self.src = src
        self.rng = random.Random(seed)
        self.cases: list[Case] = []
        self.fx = src / "tests" / "fixtures" / "models"
        self.models = sorted(p.name for p in self.fx.iterdir() if (p / "config.json").exists()
                             and (p / "model.safetensors").exists())
        self.record = record  # a record produced by run --json (or the corpus's)
        self.records = records
        self.plans = sorted(p for p in (src / "plans").rglob("*.json")
                            if p.parent.name != "hardware" and p.name != "index.json")
        self.plans += sorted((src / "tests" / "fuzz" / "corpus" / "plan").glob("*.json"))
        self.hardware = sorted((src / "plans" / "hardware").glob("*.json"))
        self.hardware += sorted((src / "tests" / "fuzz" / "corpus" / "hardware").glob("*.json"))
        self.counter: dict[int, int] = {}
        self.python = python  # a Python with torch and transformers (plan verify, class plans), or None
        self.gui = gui

    # helpers
    def add(self, cls: int, argv, **kw) -> Case:
        n = self.counter.get(cls, 0) + 1
        self.counter[cls] = n
        c = Case(f"c{cls:02d}-{n:04d}", cls, list(argv), **kw)
        self.cases.append(c)
        return c

    def cfg(self, model="llama") -> dict:
        return json.loads((self.fx / model / "config.json").read_text())

    def st(self, model="llama") -> Path:
        return self.fx / model / "model.safetensors"

    def model_dir(self, rel, config, weights: Optional[object] = "llama"):
        """Setup steps for a model folder: config (dict or bytes) and optionally a checkpoint
        (a fixture name, bytes, or None)."""
        data = config if isinstance(config, (bytes, Raw)) else dump(config)
        if isinstance(data, Raw):
            data = data.data
        steps = [_w(f"{rel}/config.json", data)]
        if isinstance(weights, str):
            steps.append(_copy(self.st(weights), f"{rel}/model.safetensors"))
        elif isinstance(weights, bytes):
            steps.append(_w(f"{rel}/model.safetensors", weights))
        return steps

    RUN = ["--tp", "1,2", "--seq", "4", "--iters", "1", "--warmup", "0"]
    RUN1 = ["--tp", "1", "--seq", "4", "--iters", "1", "--warmup", "0"]

    def fixture_family(self, plan: Path) -> str:
        fam = plan.parent.name if plan.parent.name != "plan" else plan.stem.split("-")[0]
        fam = {"gemma3": "gemma3_text", "llama4": "llama4_text"}.get(fam, fam)
        return fam if fam in self.models else "llama"

    # --------------------------------------------------------------------------------------------
    def build(self, total: int):
        self.c00_baseline()
        self.c01_overflow()
        self.c02_injection()
        self.c03_bench_load()
        self.c04_nesting()
        self.c05_non_utf8()
        self.c06_mpi()
        self.c07_hangs()
        self.c08_memory()
        self.c09_lost_work()
        self.c10_write_errors()
        self.c11_wrong_numbers()
        self.c12_parse_errors()
        self.c13_messages()
        self.c14_slowness()
        self.c15_escapes()
        self.c16_same_path()
        self.c18_newer_verbs()
        self.c19_signals()
        self.c17_fuzz(max(100, total - len(self.cases)))
        return self.cases

    # 0 ---------------------------------------------------------------------------------------------
    def c00_baseline(self):
        F = str(self.fx)
        for m in self.models:
            self.add(0, ["inspect", f"{F}/{m}", "--json"], must_pass=True, stdout_json=True)
            self.add(0, ["plan", "preview", f"{F}/{m}", "--tp", "1", "--seq", "8", "--json"], must_pass=True,
                     stdout_json=True)
        self.add(0, ["inspect", f"{F}/llama", "--tree"], must_pass=True)
        self.add(0, ["plan", "show", f"{F}/llama", "--json"], must_pass=True, stdout_json=True)
        self.add(0, ["plan", "validate", f"{F}/llama"], must_pass=True)
        self.add(0, ["plan", "preview", "llama-3.1-70b", "--tp", "8"], must_pass=True)
        self.add(0, ["plan", "preview", "deepseek-v3", "--tp", "8", "--json"], must_pass=True, stdout_json=True)
        self.add(0, ["plan", "search", f"{F}/mixtral", "--hardware", "local-cpu", "--seq", "8", "--json"],
                 must_pass=True, stdout_json=True)
        self.add(0, ["plan", "search", "deepseek-v3", "--hardware", "h200-sxm-8", "--json"], must_pass=True,
                 stdout_json=True)
        self.add(0, ["plan", "export", f"{F}/llama", "--format", "python", "-o", "out.py"], must_pass=True,
                 python_outputs=["out.py"])
        self.add(0, ["plan", "export", f"{F}/llama", "-o", "out.json"], must_pass=True, json_outputs=["out.json"])
        self.add(0, ["run", "--model", f"{F}/llama", *self.RUN, "--json", "r.json", "--trace", "t.json",
                     "--csv", "c.csv", "--dump-logits", "l.json"], must_pass=True,
                 json_outputs=["r.json", "t.json", "l.json"], text_outputs=["c.csv"])
        self.add(0, ["run", "--model", f"{F}/llama", "--tp", "1,2", "--seq", "4", "--iters", "1", "--warmup", "0",
                     "--decode", "2", "--json", "r.json"], must_pass=True, json_outputs=["r.json"])
        self.add(0, ["run", "--model", f"{F}/llama", "--emulate-tp", "1,2", "--seq", "4", "--iters", "1",
                     "--warmup", "0", "--hardware", "h100-sxm-8", "--json", "r.json"], must_pass=True,
                 json_outputs=["r.json"])
        self.add(0, ["report", "rec.json", "--trace", "t.json", "--csv", "c.csv"],
                 setup=[_w("rec.json", self.record)], must_pass=True, json_outputs=["t.json"],
                 text_outputs=["c.csv"], no_control=True)
        self.add(0, ["catalog", "--json"], must_pass=True, stdout_json=True)
        self.add(0, ["devices", "--json"], must_pass=True, stdout_json=True)
        self.add(0, ["bench", "plan", "--model", f"{F}/llama", "--repeat", "1", "--json"], must_pass=True,
                 stdout_json=True)
        self.add(0, ["bench", "comm", "-t", "2", "-b", "8", "-e", "1K", "-n", "1", "-w", "0", "--json"],
                 must_pass=True, stdout_json=True)
        for hw in self.hardware[:5]:
            self.add(0, ["plan", "preview", f"{F}/llama", "--hardware", str(hw), "--json"], must_pass=True,
                     stdout_json=True)

    # 1 ---------------------------------------------------------------------------------------------
    def c01_overflow(self):
        huge = [
            ("llama", {"hidden_size": 2**24, "intermediate_size": 2**40}),
            ("llama", {"intermediate_size": 2**62}),
            ("llama", {"hidden_size": 2**32, "head_dim": 2**27}),
            ("llama", {"vocab_size": 2**40}),
            ("llama", {"vocab_size": 2**62}),
            ("llama", {"vocab_size": 2**63 - 1}),
            ("llama", {"num_hidden_layers": 2**31}),
            ("llama", {"num_hidden_layers": 2**40}),
            ("llama", {"num_attention_heads": 2**31, "num_key_value_heads": 2**31}),
            ("llama", {"head_dim": 2**40}),
            ("llama", {"hidden_size": 2**62, "head_dim": 2**59}),
            ("llama", {"max_position_embeddings": 2**63 - 1, "hidden_size": 2**30}),
            ("mixtral", {"num_local_experts": 2**40}),
            ("mixtral", {"num_local_experts": 2**31, "intermediate_size": 2**31}),
            ("qwen3_moe", {"num_experts": 2**40}),
            ("qwen3_moe", {"moe_intermediate_size": 2**50}),
            ("deepseek_v3", {"n_routed_experts": 2**40}),
            ("deepseek_v3", {"moe_intermediate_size": 2**44, "n_routed_experts": 2**20}),
            ("deepseek_v3", {"kv_lora_rank": 2**50}),
            ("gpt_oss", {"num_local_experts": 2**40}),
            ("llama4_text", {"num_local_experts": 2**40}),
        ]
        F = str(self.fx)
        for model, patch in huge:
            if model not in self.models:
                continue
            c = self.cfg(model)
            c.update(patch)
            for verb in (["inspect", "m", "--json"], ["plan", "preview", "m", "--json", "--tp", "1"],
                         ["run", "--model", "m", *self.RUN1]):
                self.add(1, verb, setup=self.model_dir("m", c, None), must_fail=True,
                         stdout_json="--json" in verb, note=f"{model} {patch}")
        for model in ("llama-3.1-405b", "deepseek-v3", "llama-4-scout", "gpt-oss-120b"):
            for extra in (["--batch", "1048576", "--seq", "16777216"],
                          ["--batch", "1048576", "--seq", "65536", "--context", "16777216"],
                          ["--batch", "65536", "--seq", "16777216", "--context", "16777216"]):
                self.add(1, ["plan", "preview", model, "--tp", "8", *extra, "--json"], must_fail=True,
                         stdout_json=True)
            # large but representable: must be right if accepted
            self.add(1, ["plan", "preview", model, "--tp", "8", "--batch", "4096", "--seq", "65536", "--json"],
                     stdout_json=True)
            self.add(1, ["plan", "preview", model, "--tp", "8", "--batch", "1", "--seq", "16777216"])
        self.add(1, ["plan", "search", f"{F}/llama", "--batch", "1048576", "--seq", "16777216"], must_fail=True)
        self.add(1, ["plan", "preview", f"{F}/llama", "--batch", "1048576", "--seq", "16777216",
                     "--context", "16777216"], must_fail=True)

    # 2 ---------------------------------------------------------------------------------------------
    PAYLOADS = [
        '"""\nimport pathlib; pathlib.Path("MARKER").touch()\n"""',
        "'''\nimport pathlib; pathlib.Path('MARKER').touch()\n'''",
        '"\nimport pathlib; pathlib.Path("MARKER").touch()\n#',
        "'\nimport pathlib; pathlib.Path('MARKER').touch()\n#",
        '\\"\nimport pathlib; pathlib.Path("MARKER").touch()\n#',
        '\n__import__("pathlib").Path("MARKER").touch()\n',
        '\r__import__("pathlib").Path("MARKER").touch()\r',
        '{__import__("pathlib").Path("MARKER").touch()}',
        '"+__import__("pathlib").Path("MARKER").touch()+"',
        '\\\n__import__("pathlib").Path("MARKER").touch()\n',
        '\x0c\n__import__("pathlib").Path("MARKER").touch()\n',
        '"""\x00\nimport pathlib; pathlib.Path("MARKER").touch()\n"""',
    ]

    def c02_injection(self):
        plan = str(self.src / "plans" / "llama" / "default.json")
        base = json.loads(Path(plan).read_text())
        for i, p in enumerate(self.PAYLOADS):
            # unknown model_type; the class name comes from architectures[0]
            c = self.cfg()
            c["model_type"] = "evil_type"
            c["architectures"] = ["X" + p]
            for fmt in ("python", "json") if i < 4 else ("python",):
                out = "out.py" if fmt == "python" else "out.json"
                self.add(2, ["plan", "export", "m", "--format", fmt, "-o", out, "--plan", plan, "--tp", "2"],
                         setup=self.model_dir("m", c), python_outputs=[out] if fmt == "python" else [],
                         json_outputs=[out] if fmt == "json" else [], note="architectures[0]")
            self.add(2, ["plan", "export", "m", "--format", "python", "--plan", plan, "--tp", "2"],
                     setup=self.model_dir("m", c), stdout_path="out.py", python_outputs=["out.py"],
                     note="architectures[0] to stdout")
            # model_type itself
            c2 = self.cfg()
            c2["model_type"] = "t" + p
            self.add(2, ["plan", "export", "m", "--format", "python", "-o", "out.py", "--plan", plan, "--tp", "2"],
                     setup=self.model_dir("m", c2), python_outputs=["out.py"], note="model_type")
            # the model path (a folder whose name is the payload; '/' is not in any payload)
            name = "m" + p.replace("\x00", "")
            self.add(2, ["plan", "export", name, "--format", "python", "-o", "out.py", "--tp", "2"],
                     setup=self.model_dir(name, self.cfg()), python_outputs=["out.py"], note="model path")
            # a plan key, a style name, custom style fields
            pk = dict(base)
            pk["tp_plan"] = dict(base["tp_plan"])
            pk["tp_plan"]["model.layers.*.mlp" + p] = "colwise"
            self.add(2, ["plan", "export", "{D}/m", "--format", "python", "-o", "out.py", "--plan", "p.json"],
                     setup=self.model_dir("m", self.cfg()) + [_w("p.json", dump(pk))],
                     python_outputs=["out.py"], note="plan key")
            ps = dict(base)
            ps["tp_plan"] = dict(base["tp_plan"])
            style = "s" + p
            ps["tp_plan"]["lm_head"] = style
            ps["custom_styles"] = {style: {"base": "colwise", "input": "Replicate", "output": "Replicate"}}
            self.add(2, ["plan", "export", "{D}/m", "--format", "python", "-o", "out.py", "--plan", "p.json"],
                     setup=self.model_dir("m", self.cfg()) + [_w("p.json", dump(ps))],
                     python_outputs=["out.py"], note="custom style name")
            for fld in (("base", "input", "output")[i % 3],):
                pf = dict(base)
                pf["tp_plan"] = dict(base["tp_plan"])
                pf["tp_plan"]["lm_head"] = "my_style"
                sty = {"base": "colwise", "input": "Replicate", "output": "Replicate"}
                sty[fld] = ("Replicate" if fld != "base" else "colwise") + p
                pf["custom_styles"] = {"my_style": sty}
                self.add(2, ["plan", "export", "{D}/m", "--format", "python", "-o", "out.py", "--plan", "p.json"],
                         setup=self.model_dir("m", self.cfg()) + [_w("p.json", dump(pf))],
                         python_outputs=["out.py"], note=f"custom style {fld}")
            # bare key -> style dict
            self.add(2, ["plan", "export", "{D}/m", "--format", "python", "-o", "out.py", "--plan", "p.json",
                         "--tp", "2"],
                     setup=self.model_dir("m", self.cfg()) + [_w("p.json", dump({"lm_head" + p: "colwise"}))],
                     python_outputs=["out.py"], note="bare plan key")

    # 3 ---------------------------------------------------------------------------------------------
    def c03_bench_load(self):
        contents = [
            [_w("D/notes.txt", b"my notes\n"), _w("D/data.bin", bytes(range(256)) * 16)],
            [_w("D/.hidden", b"x")],
            [_mkdir("D/sub/dir")],
            [_copy(self.st(), "D/model.safetensors")],
            [_w("D/config.json.bak", b"{}"), _w("D/README.md", b"# mine\n")],
            [_w("D/model-00001-of-00002.safetensors", b"not mine")],
        ]
        for steps in contents:
            for model in ("example", "llama-3.1-8b"):
                self.add(3, ["bench", "load", "--model", model, "--dir", "D", "--repeat", "1"], setup=list(steps),
                         must_fail=True, protect=["D"], heavy=True)
        self.add(3, ["bench", "load", "--dir", "D", "--repeat", "1"], setup=list(contents[0]), must_fail=True,
                 protect=["D"], heavy=True, note="default model (deepseek-v3)")
        self.add(3, ["bench", "load", "--model", "example", "--dir", "D", "--repeat", "1"],
                 setup=[_w("D", b"a file, not a folder")], must_fail=True, protect=["D"])
        self.add(3, ["bench", "load", "--model", "example", "--dir", "D/../D", "--repeat", "1"],
                 setup=list(contents[0]), must_fail=True, protect=["D"])
        self.add(3, ["bench", "load", "--model", "example", "--dir", "L", "--repeat", "1"],
                 setup=list(contents[0]) + [_symlink("D", "L")], must_fail=True, protect=["D"])

    # 4 ---------------------------------------------------------------------------------------------
    def c04_nesting(self):
        F = str(self.fx)
        D = 300_000
        deep_a = deep_array(D)
        deep_o = deep_object(D)
        S40 = 40 << 20

        def cfg_with(key, raw):
            c = self.cfg()
            c[key] = Raw(raw)
            return dump(c)

        for deep, kind in ((deep_a, "array"), (deep_o, "object")):
            for key in ("rope_parameters", "architectures", "hidden_size", "layer_types", "quantization_config"):
                for verb in (["inspect", "m", "--json"], ["plan", "preview", "m", "--json"]):
                    self.add(4, verb, setup=self.model_dir("m", cfg_with(key, deep)),
                             must_fail=key in ("architectures", "hidden_size", "rope_parameters", "layer_types"),
                             stdout_json=True, note=f"config {key} {kind} x{D}")
            self.add(4, ["inspect", "m"], setup=self.model_dir("m", deep), must_fail=True, note="config root")
            plan = {"tp_size": 2, "tp_plan": {"lm_head": Raw(deep)}}
            self.add(4, ["plan", "validate", f"{F}/llama", "--plan", "p.json"], setup=[_w("p.json", dump(plan))],
                     must_fail=True, note="plan style")
            self.add(4, ["plan", "validate", f"{F}/llama", "--plan", "p.json"], setup=[_w("p.json", deep)],
                     must_fail=True, note="plan root")
            plan = {"tp_size": 2, "tp_plan": {"lm_head": "s"}, "custom_styles": {"s": Raw(deep)}}
            self.add(4, ["plan", "export", f"{F}/llama", "--plan", "p.json"], setup=[_w("p.json", dump(plan))],
                     must_fail=True, note="custom style")
            plan = {"tp_size": Raw(deep), "tp_plan": {}}
            self.add(4, ["plan", "show", f"{F}/llama", "--plan", "p.json"], setup=[_w("p.json", dump(plan))],
                     must_fail=True, note="tp_size")
            hw = json.loads((self.src / "plans" / "hardware" / "h100-sxm-8.json").read_text())
            for key in ("devices", "collectives", "peak_tflops", "gemm_efficiency"):
                h = dict(hw)
                h[key] = Raw(deep)
                self.add(4, ["plan", "preview", f"{F}/llama", "--hardware", "h.json", "--json"],
                         setup=[_w("h.json", dump(h))], must_fail=True, stdout_json=True, note=f"hardware {key}")
            rec = json.loads(self.record)
            for where in ("settings", "runs", "provenance", "layers"):
                r = json.loads(self.record)
                if where == "layers":
                    r["runs"][0]["layers"] = Raw(deep)
                else:
                    r[where] = Raw(deep)
                self.add(4, ["report", "r.json", "--trace", "t.json"], setup=[_w("r.json", dump(r))],
                         must_fail=True, json_outputs=["t.json"], note=f"record {where}")
            del rec
        # 40 MB strings
        big = lambda: b'"' + b"A" * S40 + b'"'  # noqa: E731
        for key in ("architectures", "model_type", "rope_parameters", "hidden_act"):
            def mk(key=key):
                c = self.cfg()
                c[key] = Raw(b"[" + big() + b"]") if key == "architectures" else Raw(big())
                return dump(c)
            self.add(4, ["inspect", "m", "--json"], setup=[_w("m/config.json", mk)], stdout_json=True, heavy=True,
                     note=f"40 MB config {key}")
        self.add(4, ["plan", "validate", f"{F}/llama", "--plan", "p.json"], heavy=True,
                 setup=[_w("p.json", lambda: b'{"tp_size":2,"tp_plan":{' + big() + b':"colwise"}}')],
                 note="40 MB plan key")
        self.add(4, ["plan", "validate", f"{F}/llama", "--plan", "p.json"], heavy=True, must_fail=True,
                 setup=[_w("p.json", lambda: b'{"tp_size":2,"tp_plan":{"lm_head":' + big() + b'}}')],
                 note="40 MB style")
        self.add(4, ["plan", "preview", f"{F}/llama", "--hardware", "h.json", "--json"], heavy=True,
                 stdout_json=True,
                 setup=[_w("h.json", lambda: (self.src / "plans/hardware/h100-sxm-8.json").read_bytes().replace(
                     b'"name": "', b'"name": "' + b"N" * S40, 1))], note="40 MB hardware name")
        self.add(4, ["report", "r.json", "--trace", "t.json"], heavy=True, json_outputs=["t.json"],
                 setup=[_w("r.json", lambda: self.record.replace(b'"model": "', b'"model": "' + b"M" * S40, 1))],
                 note="40 MB record model")
        self.add(4, ["run", "--model", f"{F}/llama", *self.RUN1, "--tokens", ",".join(["1"] * 20000)],
                 must_fail=True, note="20,000 tokens")
        self.add(4, ["inspect", "A" * 100_000], must_fail=True, note="100 KB path argument")

    # 5 ---------------------------------------------------------------------------------------------
    def c05_non_utf8(self):
        F = str(self.fx)
        names = [b"m\xff\xfe", b"m\xed\xa0\x80", b"m\x80"]
        for nb in names:
            steps = [_copy(self.fx / "llama" / "config.json", os.fsdecode(nb) + "/config.json"),
                     _copy(self.st(), os.fsdecode(nb) + "/model.safetensors")]
            self.add(5, [b"inspect", nb, b"--json"], setup=steps, stdout_json=True)
            self.add(5, [b"plan", b"preview", nb, b"--json"], setup=steps, stdout_json=True)
            self.add(5, [b"plan", b"show", nb, b"--json"], setup=steps, stdout_json=True)
            self.add(5, [b"plan", b"export", nb, b"-o", b"out.json"], setup=steps, json_outputs=["out.json"])
            self.add(5, [b"plan", b"export", nb, b"--format", b"python", b"-o", b"out.py"], setup=steps,
                     python_outputs=["out.py"])
            self.add(5, [b"run", b"--model", nb, *[a.encode() for a in self.RUN], b"--json", b"r.json",
                         b"--trace", b"t.json", b"--csv", b"c.csv"], setup=steps,
                     json_outputs=["r.json", "t.json"], text_outputs=["c.csv"])
            self.add(5, [b"run", b"--model", F.encode() + b"/llama", *[a.encode() for a in self.RUN1],
                         b"--json", nb + b".json"], json_outputs=[])
            self.add(5, [b"plan", b"validate", F.encode() + b"/llama", b"--plan", nb + b".json"],
                     setup=[_copy(self.src / "plans/llama/default.json", os.fsdecode(nb) + ".json")])
            self.add(5, [b"report", nb + b".json"], setup=[_w(os.fsdecode(nb) + ".json", self.record)],
                     no_control=True)
            # plan verify: a model folder and a Python of such names (the Python is not there).
            self.add(5, [b"plan", b"verify", nb, b"--tp", b"2", b"--python", nb + b"-python"], setup=steps,
                     must_fail=True)
        bad = [b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"\xc0\xaf"]
        for bb in bad:
            c = self.cfg()
            c["_name_or_path"] = Raw(b'"name' + bb + b'"')
            c["architectures"] = [Raw(b'"LlamaForCausalLM' + bb + b'"')]
            self.add(5, ["inspect", "m", "--json"], setup=self.model_dir("m", c), stdout_json=True)
            c2 = self.cfg()
            c2["model_type"] = Raw(b'"llama' + bb + b'"')
            self.add(5, ["inspect", "m", "--json"], setup=self.model_dir("m", c2), stdout_json=True)
            c3 = self.cfg()
            c3["model_type"] = Raw(b'"u' + bb + b'"')
            c3["architectures"] = [Raw(b'"U' + bb + b'ForCausalLM"')]
            for fmt, out in (("json", "out.json"), ("python", "out.py")):
                self.add(5, ["plan", "export", "m", "--format", fmt, "-o", out, "--plan",
                             str(self.src / "plans/llama/default.json"), "--tp", "2"],
                         setup=self.model_dir("m", c3), json_outputs=[out] if fmt == "json" else [],
                         python_outputs=[out] if fmt == "python" else [])
            plan = {"tp_size": 2, "tp_plan": {Raw(b'"lm_head' + bb + b'"'): "colwise",
                                               "model.embed_tokens": Raw(b'"colwise' + bb + b'"')}}
            self.add(5, ["plan", "validate", f"{F}/llama", "--plan", "p.json"], setup=[_w("p.json", dump(plan))])
            self.add(5, ["plan", "show", f"{F}/llama", "--plan", "p.json", "--json"],
                     setup=[_w("p.json", dump(plan))], stdout_json=True)
            plan2 = {"tp_size": 2, "tp_plan": {"lm_head": "s" + "x"}, "custom_styles": {
                "sx": {"base": "colwise", "input": Raw(b'"Replicate' + bb + b'"'), "output": "Replicate"}}}
            self.add(5, ["plan", "export", f"{F}/llama", "--plan", "p.json", "--format", "python", "-o", "o.py"],
                     setup=[_w("p.json", dump(plan2))], python_outputs=["o.py"])
            hw = (self.src / "plans/hardware/h100-sxm-8.json").read_bytes().replace(b'"name": "',
                                                                                  b'"name": "' + bb, 1)
            self.add(5, ["plan", "preview", f"{F}/llama", "--hardware", "h.json", "--json"],
                     setup=[_w("h.json", hw)], stdout_json=True)
            self.add(5, ["run", "--model", f"{F}/llama", "--emulate-tp", "1,2", "--seq", "4", "--iters", "1",
                         "--warmup", "0", "--hardware", "h.json", "--json", "r.json"], setup=[_w("h.json", hw)],
                     json_outputs=["r.json"])
            r = self.record.replace(b'"model": "', b'"model": "' + bb, 1).replace(b'"hostname": "',
                                                                                 b'"hostname": "' + bb, 1)
            self.add(5, ["report", "r.json", "--trace", "t.json", "--csv", "c.csv"], setup=[_w("r.json", r)],
                     json_outputs=["t.json"], text_outputs=["c.csv"], no_control=True)
            self.add(5, ["inspect", "--json", "x" + os.fsdecode(bb)], stdout_json=True, must_fail=True)

    # 6 ---------------------------------------------------------------------------------------------
    def c06_mpi(self):
        mpirun = shutil.which("mpirun")
        if not mpirun:
            return
        F = str(self.fx)
        L = f"{F}/llama"
        common = ["--comm", "mpi", "--iters", "1", "--warmup", "0", "--timeout", "5"]
        diffs = [
            (["--seq", "8"], ["--seq", "16"]),
            (["--seq", "8", "--batch", "1"], ["--seq", "8", "--batch", "2"]),
            (["--seq", "8", "--iters", "1"], ["--seq", "8", "--iters", "2"]),
            (["--seq", "8", "--decode", "0"], ["--seq", "8", "--decode", "2"]),
            (["--seq", "8", "--tp", "2"], ["--seq", "8", "--tp", "1"]),
            (["--seq", "8", "--random-weights"], ["--seq", "8"]),
            (["--seq", "8", "--random-weights", "--seed", "1"], ["--seq", "8", "--random-weights", "--seed", "2"]),
            (["--seq", "8", "--dtype", "f32"], ["--seq", "8", "--dtype", "bf16"]),
            (["--seq", "4", "--tokens", "1,2,3,4"], ["--seq", "4", "--tokens", "4,3,2,1"]),
            (["--seq", "8", "--plan", str(self.src / "plans/llama/default.json")],
             ["--seq", "8", "--plan", str(self.src / "plans/llama/mlp-only.json")]),
            (["--seq", "8", "--model", L], ["--seq", "8", "--model", f"{F}/mistral"]),
            (["--seq", "8", "--warmup", "0"], ["--seq", "8", "--warmup", "1"]),
        ]
        env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_btl": "self,vader",
               "OMPI_MCA_rmaps_base_oversubscribe": "1"}
        for a, b in diffs:
            def side(x):
                args = ["{CLI}", "run"]
                if "--model" not in x:
                    args += ["--model", L]
                if "--tp" not in x:
                    args += ["--tp", "2"]
                return args + common + x
            self.add(6, [mpirun, "--allow-run-as-root", "--oversubscribe", "-n", "1", *side(a), ":", "-n", "1",
                         *side(b)], must_fail=True, mpi=True, env=env, timeout=40, heavy=True,
                     note=f"{' '.join(a)} vs {' '.join(b)}")

    # 7 ---------------------------------------------------------------------------------------------
    def c07_hangs(self):
        F = str(self.fx)
        L = f"{F}/llama"
        self.add(7, ["inspect", "m"], setup=[_fifo("m/config.json")], must_fail=True, timeout=10)
        self.add(7, ["inspect", "m/config.json"], setup=[_fifo("m/config.json")], must_fail=True, timeout=10)
        self.add(7, ["inspect", "m", "--json"], setup=[_copy(self.fx / "llama/config.json", "m/config.json"),
                                                       _fifo("m/model.safetensors")], must_fail=True, timeout=10)
        self.add(7, ["inspect", "x.safetensors"], setup=[_fifo("x.safetensors")], must_fail=True, timeout=10)
        self.add(7, ["run", "--model", "m", *self.RUN1], setup=[_copy(self.fx / "llama/config.json", "m/config.json"),
                                                             _fifo("m/model.safetensors")], must_fail=True, timeout=10)
        self.add(7, ["plan", "validate", L, "--plan", "p.json"], setup=[_fifo("p.json")], must_fail=True, timeout=10)
        self.add(7, ["run", "--model", L, *self.RUN1, "--plan", "p.json"], setup=[_fifo("p.json")], must_fail=True, timeout=10)
        self.add(7, ["plan", "preview", L, "--hardware", "h.json"], setup=[_fifo("h.json")], must_fail=True, timeout=10)
        self.add(7, ["run", "--model", L, "--emulate-tp", "2", "--seq", "4", "--iters", "1", "--warmup", "0",
                     "--hardware", "h.json"], setup=[_fifo("h.json")], must_fail=True, timeout=10)
        self.add(7, ["report", "r.json"], setup=[_fifo("r.json")], must_fail=True, timeout=10)
        self.add(7, ["bench", "plan", "--model", "m", "--repeat", "1"], setup=[_fifo("m/config.json")],
                     must_fail=True, timeout=10)
        self.add(7, ["bench", "load", "--dir", "m", "--repeat", "1"], setup=[_fifo("m/config.json")],
                     must_fail=True, protect=["m"], timeout=10)
        # FIFOs as outputs: must not block forever either
        self.add(7, ["run", "--model", L, *self.RUN1, "--json", "o.json"], setup=[_fifo("o.json")], timeout=10)
        self.add(7, ["plan", "export", L, "-o", "o.json"], setup=[_fifo("o.json")], timeout=10)
        self.add(7, ["report", "r.json", "--trace", "o.json"], setup=[_w("r.json", self.record), _fifo("o.json")], timeout=10)
        # injected hangs under the watchdog
        for tp, ranks in (("1", ("0",)), ("2", ("0", "1")), ("1,2", ("0",))):
            for r in ranks:
                for node in ("logits", "model.embed_tokens", "model.layers.0.self_attn.o_proj",
                             "model.layers.1.mlp.down_proj"):
                    self.add(7, ["run", "--model", L, "--tp", tp, "--seq", "4", "--iters", "1", "--warmup", "0",
                                 "--inject-failure", f"{r}:{node}:hang", "--timeout", "1"], must_fail=True,
                             timeout=10)
        self.add(7, ["run", "--model", L, "--tp", "1", "--seq", "4", "--iters", "1", "--warmup", "0",
                     "--decode", "3", "--inject-failure", "0:logits:hang", "--timeout", "1"], must_fail=True,
                 timeout=10)
        self.add(7, ["run", "--model", L, "--emulate-tp", "2", "--seq", "4", "--iters", "1", "--warmup", "0",
                     "--inject-failure", "1:logits:hang", "--timeout", "1"], must_fail=True, timeout=10)
        for args in (["-b", "nan"], ["-e", "nan"], ["-b", "0"], ["-e", "0"], ["-b", "64M", "-e", "8"],
                     ["-b", "inf"], ["-b", "-8"], ["-b", "1e400"], ["-e", "99999999999999999999"], ["-b", "8G"],
                     ["-b", "1", "-e", "1"], ["-b", "3", "-e", "7", "-o", "all"], ["-f", "1"]):
            self.add(7, ["bench", "comm", "-t", "2", "-n", "1", "-w", "0", *args], timeout=30,
                     must_fail=args[0:2] in (["-b", "nan"], ["-e", "nan"], ["-b", "inf"], ["-b", "-8"],
                                             ["-b", "1e400"], ["-e", "99999999999999999999"], ["-b", "64M"],
                                             ["-f", "1"], ["-b", "0"], ["-e", "0"]))
        if "llama4_text" in self.models:
            c = self.cfg("llama4_text")
            c["num_hidden_layers"] = 1_000_000
            c["moe_layers"] = list(range(0, 1_000_000, 2))
            c.pop("layer_types", None)
            c.pop("no_rope_layers", None)
            for verb in (["inspect", "m", "--json"], ["plan", "preview", "m", "--json"]):
                self.add(7, verb, setup=self.model_dir("m", c, None), stdout_json=True, heavy=True,
                         note="llama4 10^6 layers")
            c2 = self.cfg("llama4_text")
            c2["moe_layers"] = list(range(2_000_000))
            self.add(7, ["plan", "preview", "m", "--json"], setup=self.model_dir("m", c2, None), stdout_json=True,
                     heavy=True, must_fail=True, note="moe_layers longer than the layers")

    # 18 --------------------------------------------------------------------------------------------
    def c18_newer_verbs(self):
        F = str(self.fx)
        L = f"{F}/llama"
        # Integers are decimal in every verb: a leading zero is no octal, a 0x prefix is refused.
        hexes = [["plan", "preview", L, "--tp"], ["plan", "show", L, "--batch"], ["plan", "validate", L, "--seq"],
                 ["plan", "export", L, "--tp"], ["plan", "search", L, "--max-tp"], ["plan", "verify", L, "--seq"],
                 ["run", "--model", L, "--seq"], ["run", "--model", L, "--tokens"], ["bench", "load", "--repeat"],
                 ["bench", "plan", "--layers"], ["bench", "gemm", "--rounds"], ["bench", "comm", "-t"],
                 ["calibrate", "--ranks"]]
        for argv in hexes:
            for v in ("0x10", "0b11", "0o7", "1e1", "+-1", "010x"):
                self.add(18, [*argv, v], must_fail=True, stderr_re=f"'{re.escape(v)}' is not a decimal whole number",
                         timeout=10)
        self.add(18, ["run", "--model", L, "--tp", "01", "--seq", "010", "--iters", "01", "--warmup", "00", "--json", "o.json"],
                 check=_json_check("o.json", lambda j: j["settings"]["seq"] == 10 and j["settings"]["iterations"] == 1,
                                   "--seq 010 is not 10"))
        self.add(18, ["plan", "preview", L, "--tp", "02", "--seq", "0010", "--json"],
                 check=_json_check(None, lambda j: j["tp_size"] == 2 and j["seq"] == 10, "not tp 2, seq 10"))
        self.add(18, ["bench", "plan", "--model", "example", "--tp", "010", "--repeat", "02", "--json"],
                 check=_json_check(None, lambda j: j["tp_size"] == 10, "--tp 010 is not 10"))
        self.add(18, ["run", "--model", L, "--tp", "1", "--seq", "2", "--tokens", "09,007", "--iters", "1", "--warmup", "0"],
                 check=lambda d, o, e, rc: None if rc == 0 else f"--tokens 09,007 refused: {e[-200:]!r}")
        # plan verify: a config other than the folder's config.json, and weight files Python could
        # not read, are said before any Python runs.
        other = self.model_dir("m", self.cfg()) + [_w("m/mycfg.json", dump(dict(self.cfg(), num_hidden_layers=1)))]
        self.add(18, ["plan", "verify", "m/mycfg.json", "--reduce", "no", "--python", "/bin/false"], setup=other,
                 must_fail=True, stderr_re="not this file")
        for target in ("nowhere", "."):
            self.add(18, ["plan", "verify", "m", "--python", "/bin/false"],
                     setup=self.model_dir("m", self.cfg()) + [_symlink(target, "m/extra.safetensors")],
                     must_fail=True, stderr_re="extra.safetensors: not a readable file")
        self.add(18, ["plan", "verify", "m", "--python", "/bin/false"],
                 setup=self.model_dir("m", self.cfg()) + [_mkdir("m/dir.safetensors")], must_fail=True,
                 stderr_re="dir.safetensors: not a readable file")
        # report --hardware reopens what the record ran (absolute path, digests), not a same-named
        # model of the current folder; a changed model or plan is refused.
        rec = (self.model_dir("a/m", self.cfg()) + self.model_dir("m", self.cfg("mistral"), "mistral")
               + [_w("a/p.json", b'{"tp_plan": {"lm_head": "colwise_gather_output"}}'),
                  _cli_run(["run", "--model", "m", "--plan", "p.json", "--tp", "1", "--seq", "4", "--iters", "1",
                            "--warmup", "0", "--json", "r.json"], "a")])
        self.add(18, ["report", "a/r.json", "--hardware", "local-cpu"], setup=rec,
                 check=_text_check(r"/a/m \xc2\xb7", "stdout"))
        self.add(18, ["report", "a/r.json", "--hardware", "local-cpu"],
                 setup=rec + [_w("a/p.json", b'{"tp_plan": {"lm_head": "colwise"}}')], must_fail=True,
                 stderr_re="is not the one the record ran: it shards otherwise")
        self.add(18, ["report", "a/r.json", "--hardware", "local-cpu"],
                 setup=rec + [_edit_json("a/m/config.json", intermediate_size=96)], must_fail=True,
                 stderr_re="is not the one the record ran: its tensors differ")
        self.add(18, ["report", "a/r.json", "--hardware", "local-cpu"],
                 setup=rec + [_edit_json("a/m/config.json", sliding_window=2)], must_fail=True,
                 stderr_re="is not the one the record ran: its config differs")
        self.add(18, ["report", "a/r.json", "--hardware", "local-cpu", "--json"],
                 setup=rec + [_edit_json("a/r.json", settings={"model": "m", "class": "LlamaForCausalLM", "plan": "default plan",
                                                               "backend": "cpu", "communicator": "local", "batch": 1,
                                                               "seq": 4, "warmup": 0, "iterations": 1, "weights": "checkpoint"})],
                 check=_text_check("reopened as named, relative to this folder, unchecked"))
        # One feasibility rule: plan search offers no T that plan validate --hardware refuses.
        for hw, most in (("h200-sxm-8", 8), ("local-cpu", None)):
            self.add(18, ["plan", "search", L, "--hardware", hw, "--max-tp", "64", "--json"],
                     check=_json_check(None, lambda j, most=most: all(c["tp"] <= (most or os.cpu_count()) for c in j["candidates"])
                                       and j["beyond_devices"] == 64 - min(64, most or os.cpu_count()),
                                       "a candidate above the device count"))
        # The user's hardware folder: a profile is its file's id; listed ids are ones --hardware takes.
        h100 = json.loads((self.src / "plans" / "hardware" / "h100-sxm-8.json").read_text())
        hw = [_w("hw/foo.json", dump(h100)), _w("hw/a.b.json", dump(dict(h100, id="a.b"))),
              _w("hw/mine.json", dump(dict(h100, id="mine"))), _symlink("/dev/zero", "hw/zero.json")]
        env = {"TPSTUDIO_HARDWARE_DIR": "{D}/hw"}
        self.add(18, ["plan", "preview", L, "--hardware", "foo"], setup=hw, env=env, must_fail=True,
                 stderr_re="its id 'h100-sxm-8' is not its file name")
        self.add(18, ["plan", "preview", L, "--hardware", "no-such"], setup=hw, env=env, must_fail=True,
                 check=_text_check(r"a\.b|\bfoo\b|zero", absent=True))
        for hid in ("a.b", "zero"):
            self.add(18, ["plan", "preview", L, "--hardware", hid], setup=hw, env=env, must_fail=True)
        self.add(18, ["plan", "preview", L, "--hardware", "mine", "--json"], setup=hw, env=env, must_pass=True, stdout_json=True)
        # calibrate: the device's memory is the machine's (not the headroom under this run's
        # RLIMIT_AS); --install replaces only with --force and never writes through a link. A rank
        # needs 240 MiB + 4 x the last-level cache (a VM may report 480 MiB of L3: 2.1 GiB) beside the
        # ~1 GiB of libraries the binary maps, so these run under 8 GiB, not the default 2.
        phys = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30
        self.add(18, ["calibrate", "--quick", "--ranks", "1", "-o", "p.json"], timeout=60, mem_mb=8192,
                 check=_json_check("p.json", lambda j: abs(j["memory_gib"] - phys) < 0.01 * phys,
                                   f"memory_gib is not the machine's {phys:.2f} GiB"))
        mine = dump(dict(h100, id="mine"))
        self.add(18, ["calibrate", "--quick", "--ranks", "1", "--install", "--id", "mine"], setup=[_w("hw/mine.json", mine)],
                 env=env, must_fail=True, protect=["hw"], stderr_re="already installed")
        self.add(18, ["calibrate", "--quick", "--ranks", "1", "--install", "--id", "mine", "--force"],
                 setup=[_w("target.json", b"keep"), _symlink("../target.json", "hw/mine.json")], env=env,
                 must_fail=True, protect=["target.json"], stderr_re="symbolic link")
        # Synthetic benches refuse before they allocate.
        self.add(18, ["bench", "plan", "--keys", "1000000", "--repeat", "1"], must_fail=True, max_rss_mb=400, timeout=10)
        self.add(18, ["bench", "plan", "--model", "deepseek-v3", "--layers", "131072", "--repeat", "1"], must_fail=True,
                 max_rss_mb=400, timeout=10)
        # Records that cannot be true.
        base = json.loads(self.record)
        backwards = json.loads(self.record)
        sp = backwards["runs"][0]["spans"][0]
        sp["end_us"] = sp["start_us"] - 100
        twice = dict(base, runs=base["runs"] + base["runs"][:1])
        for bad in (backwards, twice):
            self.add(18, ["report", "r.json", "--csv", "o.csv"], setup=[_w("r.json", json.dumps(bad).encode())],
                     must_fail=True, absent=["o.csv"])
        # Positions past max_position_embeddings (128 in the fixture) are warned about.
        self.add(18, ["run", "--model", L, "--tp", "1", "--seq", "200", "--iters", "1", "--warmup", "0"],
                 check=_text_check("exceed the model's max_position_embeddings 128"))
        # The GUI's command line is validated as the CLI's.
        if self.gui:
            for argv, msg in ((["--tp", "0"], "not in range 1 to 256"), (["--tp", "-1"], "not in range"),
                              (["--tp", "010x"], "not a decimal"), (["--hardware", "/dev/zero"], "not a regular file"),
                              (["--hardware", "no-such"], "not a built-in"), (["--tab", "nonsense"], "not in"),
                              (["--run", "1", "--decode", "-5"], "not in range 0 to 4096"), (["--decode", "5"], "needs --run"),
                              (["--run", "0"], "whole numbers from 1 to 256"), (["--chart", "pie", "--run", "1"], "not in"),
                              (["--phase", "both", "--run", "1"], "not in"), (["--screenshot", "."], "is a folder"),
                              (["--screenshot", "no/such/x.png"], "does not exist"),
                              (["--screenshot-opening", "-1", "--screenshot", "x.png"], "not in range"),
                              (["--verify"], "needs --screenshot")):
                self.add(18, argv, program="gui", must_fail=True, stderr_re=re.escape(msg), timeout=20, mem_mb=8192)
            self.add(18, ["--screenshot", "/dev/full", "--tab", "summary"], program="gui", must_fail=True,
                     stderr_re="cannot write it", timeout=60, mem_mb=8192)

    # 19 --------------------------------------------------------------------------------------------
    def c19_signals(self):
        HUP, QUIT, TERM, KILL = signal.SIGHUP, signal.SIGQUIT, signal.SIGTERM, signal.SIGKILL
        for sig in (HUP, QUIT, TERM):
            # A long op (attention over 32,768 positions) stops within a second.
            self.add(19, ["run", "--model", "example", "--emulate-tp", "2", "--decode", "1", "--seq", "32768", "--iters",
                          "1", "--warmup", "0", "--json", "o.json"], signal=(sig, None, 4.0), allowed_rc=(128 + sig,),
                     max_latency=1.5, mem_mb=8192, timeout=60, heavy=True, absent=["o.json"])
            self.add(19, ["calibrate", "--ranks", "1", "-o", "p.json"], signal=(sig, None, 1.0), allowed_rc=(128 + sig,),
                     max_latency=3.0, timeout=60, absent=["p.json"], mem_mb=8192)
            self.add(19, ["bench", "load", "--model", "deepseek-v3", "--repeat", "20"], signal=(sig, "tmp:tpstudio-bench-", 0.5),
                     allowed_rc=(128 + sig,), max_latency=1.5, fsize_mb=1 << 20, timeout=120, heavy=True)
        # A child of bench gemm (its peak measurement) does not outlive it.
        self.add(19, ["bench", "gemm", "--backend", "cpu", "--tokens", "16", "--iters", "1", "--rounds", "50"],
                 signal=(HUP, "--peak-only", 0.2),
                 allowed_rc=(-HUP,), timeout=120, heavy=True, env={"ONEDNN_MAX_CPU_ISA": "SSE41"}, mem_mb=8192)
        # The runs the GUI starts end with it, however it ends; interrupted, it removes its folders too
        # (SIGKILL gives it no chance to remove its own).
        if self.gui:
            for sig in (HUP, TERM, KILL):
                self.add(19, ["--run", "1,2", "--decode", "4096", "--screenshot", "x.png"], program="gui",
                         signal=(sig, "tpstudio-cli run ", 0.5), allowed_rc=(-KILL,) if sig == KILL else (128 + sig,),
                         max_latency=None if sig == KILL else 5.0, timeout=120, heavy=True, mem_mb=1 << 16,
                         absent=["x.png"], leftover_folders=sig == KILL)
        if not self.python:
            return
        env = {"TPSTUDIO_PYTHON": self.python}
        # Python asked for an unknown model type's class plans (python -c): gone with the CLI.
        unknown = self.model_dir("m", dict(self.cfg(), model_type="tpstudio_unknown"))
        for sig in (HUP, KILL):
            self.add(19, ["inspect", "m"], setup=unknown, env=env, signal=(sig, "class-plan", 0.2), allowed_rc=(-sig,),
                     timeout=120, heavy=True, mem_mb=1 << 16)
        # plan verify: the driver, torchrun, its ranks and every temporary folder go, whether the
        # CLI is interrupted (HUP, QUIT, TERM) or killed outright (its driver sees it die).
        for sig in (HUP, KILL):  # QUIT and TERM take the same path as HUP (the run cases show all three)
            self.add(19, ["plan", "verify", f"{self.fx}/llama", "--python", self.python, "--json", "v.json"],
                     signal=(sig, "torch.distributed.run", 1.0), allowed_rc=(-KILL,) if sig == KILL else (128 + sig,),
                     timeout=300, heavy=True, absent=["v.json"], mem_mb=1 << 16)

    # 8 ---------------------------------------------------------------------------------------------
    def c08_memory(self):
        F = str(self.fx)
        L = f"{F}/llama"
        figure = r"\d(\.\d+)?\s*(GiB|GB|TiB|MiB)"
        for m in ("llama-3.1-70b", "llama-3.1-405b", "qwen3-30b-a3b", "qwen2.5-72b", "mixtral-8x7b", "llama-3.1-8b"):
            self.add(8, ["run", "--model", m, "--tp", "1", "--seq", "4", "--iters", "1", "--warmup", "0"],
                     must_fail=True, stderr_re=figure, heavy=True, timeout=40)
        self.add(8, ["run", "--model", "llama-3.1-70b", "--tp", "1,2,4,8", "--seq", "4", "--iters", "1",
                     "--warmup", "0"], must_fail=True, stderr_re=figure, heavy=True, timeout=40)
        self.add(8, ["run", "--model", "llama-3.1-70b", "--emulate-tp", "8", "--seq", "4", "--iters", "1",
                     "--warmup", "0"], must_fail=True, stderr_re=figure, heavy=True, timeout=40)
        for extra in (["--seq", "65536"], ["--batch", "4096"], ["--batch", "4096", "--seq", "65536"],
                      ["--seq", "65536", "--decode", "1048576"], ["--seq", "4", "--decode", "1048576"]):
            self.add(8, ["run", "--model", "example", "--tp", "1", "--iters", "1", "--warmup", "0", *extra],
                     heavy=True, timeout=40)
        self.add(8, ["run", "--model", L, "--tp", "1", "--iters", "100000", "--warmup", "1000", "--seq", "65536",
                     "--batch", "4096"], heavy=True, timeout=40)
        c = self.cfg()
        c["num_hidden_layers"] = 10_000_000
        for verb in (["inspect", "m", "--json"], ["plan", "preview", "m", "--json"],
                     ["run", "--model", "m", *self.RUN1]):
            self.add(8, verb, setup=self.model_dir("m", c, None), stdout_json="--json" in verb, heavy=True,
                     note="10^7 layers")
        zero = [
            (["inspect", "/dev/zero"], []),
            (["inspect", "m"], [_symlink("/dev/zero", "m/config.json")]),
            (["inspect", "m"], [_copy(self.fx / "llama/config.json", "m/config.json"),
                                _symlink("/dev/zero", "m/model.safetensors")]),
            (["inspect", "z.safetensors"], [_symlink("/dev/zero", "z.safetensors")]),
            (["plan", "validate", L, "--plan", "/dev/zero"], []),
            (["plan", "preview", L, "--hardware", "/dev/zero"], []),
            (["report", "/dev/zero"], []),
            (["report", "r.json"], [_symlink("/dev/zero", "r.json")]),
            (["run", "--model", L, *self.RUN1, "--plan", "/dev/zero"], []),
            (["run", "--model", "m", *self.RUN1], [_symlink("/dev/zero", "m/config.json")]),
            (["run", "--model", "m", *self.RUN1], [_copy(self.fx / "llama/config.json", "m/config.json"),
                                                    _symlink("/dev/zero", "m/model.safetensors")]),
            (["inspect", "/dev/urandom"], []),
        ]
        for argv, steps in zero:
            self.add(8, argv, setup=steps, must_fail=True, heavy=True, timeout=30)
        self.add(8, ["report", "big.json"], setup=[_big_record("big.json", self.record, 435 << 20)], heavy=True,
                 timeout=60, note="435 MB record")
        self.add(8, ["report", "big.json", "--trace", "t.json"],
                 setup=[_big_record("big.json", self.record, 120 << 20)], heavy=True, timeout=60,
                 json_outputs=["t.json"], note="120 MB record")
        # safetensors header claiming a huge length / huge shapes
        raw = self.st().read_bytes()
        n = struct.unpack("<Q", raw[:8])[0]
        for claimed in (2**40, 2**63, 2**64 - 1, n + 100 << 20):
            self.add(8, ["inspect", "m", "--json"],
                     setup=self.model_dir("m", self.cfg(), struct.pack("<Q", claimed) + raw[8:]), must_fail=True,
                     stdout_json=True)
        hdr = json.loads(raw[8:8 + n])
        name = next(k for k in hdr if k != "__metadata__")
        for shape in ([2**32, 2**32], [2**62, 4], [-1, 32], [2**31, 2**31, 2**31]):
            h = dict(hdr)
            h[name] = dict(hdr[name])
            h[name]["shape"] = shape
            hb = dump(h)
            self.add(8, ["run", "--model", "m", *self.RUN1],
                     setup=self.model_dir("m", self.cfg(), struct.pack("<Q", len(hb)) + hb + raw[8 + n:]),
                     must_fail=True, heavy=True)

    # 9 ---------------------------------------------------------------------------------------------
    def c09_lost_work(self):
        L = f"{self.fx}/llama"
        outs = {"--trace": "t.json", "--json": "a.json", "--csv": "a.csv", "--dump-logits": "l.json"}
        for bad in outs:
            argv = ["run", "--model", L, *self.RUN]
            for k, v in outs.items():
                argv += [k, "/nonexistent/d/x.json" if k == bad else v]
            self.add(9, argv, must_fail=True, absent=list(outs.values()), no_progress=True)
            if os.geteuid() != 0:  # root writes into a read-only folder anyway
                argv = ["run", "--model", L, *self.RUN]
                for k, v in outs.items():
                    argv += [k, "ro/x" if k == bad else v]
                self.add(9, argv, setup=[_mkdir("ro"), lambda d: os.chmod(d / "ro", 0o500)], must_fail=True,
                         absent=list(outs.values()), no_progress=True, note="read-only folder")
            argv = ["run", "--model", L, *self.RUN]
            for k, v in outs.items():
                argv += [k, "f/x.json" if k == bad else v]
            self.add(9, argv, setup=[_w("f", b"file")], must_fail=True, absent=list(outs.values()),
                     no_progress=True, note="parent is a file")
        self.add(9, ["run", "--model", L, *self.RUN, "--trace", "/nonexistent/d/x.json", "--json", "a.json",
                     "--csv", "a.csv"], must_fail=True, absent=["a.json", "a.csv"], no_progress=True)
        self.add(9, ["report", "r.json", "--trace", "/nonexistent/d/t.json", "--csv", "c.csv"],
                 setup=[_w("r.json", self.record)], must_fail=True, absent=["c.csv"])
        self.add(9, ["report", "r.json", "--csv", "/nonexistent/d/c.csv", "--trace", "t.json"],
                 setup=[_w("r.json", self.record)], must_fail=True, absent=["t.json"])
        self.add(9, ["plan", "export", L, "-o", "/nonexistent/d/o.json"], must_fail=True)

    # 10 --------------------------------------------------------------------------------------------
    def c10_write_errors(self):
        F = str(self.fx)
        L = f"{F}/llama"
        rec = [_w("r.json", self.record)]
        for flag in ("--csv", "--json", "--trace", "--dump-logits"):
            self.add(10, ["run", "--model", L, *self.RUN1, flag, "/dev/full"], must_fail=True)
        self.add(10, ["run", "--model", L, *self.RUN1], stdout_path="/dev/full", must_fail=True)
        self.add(10, ["run", "--model", L, *self.RUN1, "--json-stream"], stdout_path="/dev/full", must_fail=True)
        for fmt in ("json", "python"):
            self.add(10, ["plan", "export", L, "--format", fmt, "-o", "/dev/full"], must_fail=True)
            self.add(10, ["plan", "export", L, "--format", fmt], stdout_path="/dev/full", must_fail=True)
        for argv in (["inspect", L, "--json"], ["inspect", L], ["inspect", L, "--tree"], ["catalog"],
                     ["catalog", "--json"], ["devices", "--json"], ["devices"], ["plan", "show", L],
                     ["plan", "show", L, "--json"], ["plan", "validate", L], ["plan", "validate", L, "--json"],
                     ["plan", "preview", L], ["plan", "preview", L, "--json"], ["--help"], ["run", "--help"],
                     ["bench", "plan", "--model", L, "--repeat", "1"],
                     ["bench", "comm", "-t", "2", "-b", "8", "-e", "64", "-n", "1", "-w", "0"]):
            self.add(10, argv, stdout_path="/dev/full", must_fail=True)
        self.add(10, ["report", "r.json"], setup=rec, stdout_path="/dev/full", must_fail=True)
        # plan verify: refused before Python is asked (an output that cannot be written, no Python)
        self.add(10, ["plan", "verify", L, "--tp", "2", "--json", "/dev/full"], must_fail=True)
        self.add(10, ["plan", "verify", L, "--tp", "2", "--json", "out/v.json"], must_fail=True)
        self.add(10, ["plan", "verify", L, "--tp", "2", "--python", "/nonexistent/python3"], must_fail=True)
        self.add(10, ["report", "r.json", "--trace", "/dev/full"], setup=rec, must_fail=True)
        self.add(10, ["report", "r.json", "--csv", "/dev/full"], setup=rec, must_fail=True)
        # calibrate: the output checked before any measurement; ids, models and hardware named
        self.add(10, ["calibrate", "--quick", "-o", "/dev/full"], must_fail=True)
        self.add(10, ["calibrate", "--quick", "-o", "out/p.json"], must_fail=True)
        self.add(10, ["calibrate", "--quick", "--install", "--id", "a/b"], must_fail=True)
        self.add(10, ["calibrate", "--quick", "--install", "--id", "x\x01y"], must_fail=True)
        self.add(10, ["calibrate", "--quick", "--model", "/nonexistent", "-o", "p.json"], must_fail=True)
        self.add(10, ["calibrate", "--quick", "--ranks", "64", "-o", "p.json"], must_fail=True)
        self.add(10, ["report", "r.json", "--hardware", "/dev/zero"], setup=rec, must_fail=True)
        self.add(10, ["report", "r.json", "--hardware", "local-cpu", "--json"], setup=rec, stdout_path="/dev/full",
                 must_fail=True)
        self.add(10, ["plan", "validate", L, "--hardware", "/dev/zero"], must_fail=True)

    # 11 --------------------------------------------------------------------------------------------
    def c11_wrong_numbers(self):
        F = str(self.fx)
        L = f"{F}/llama"
        patches = [
            {"rope_parameters": {"rope_type": "linear", "factor": 0.0, "rope_theta": 10000.0}},
            {"rope_parameters": {"rope_type": "linear", "factor": -2.0, "rope_theta": 10000.0}},
            {"rope_parameters": {"rope_type": "dynamic", "factor": 0.0, "rope_theta": 10000.0}},
            {"rope_parameters": {"rope_type": "yarn", "factor": 0.0, "rope_theta": 10000.0,
                                 "original_max_position_embeddings": 64}},
            {"rope_parameters": {"rope_type": "llama3", "factor": 0.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 1.0, "original_max_position_embeddings": 64,
                                 "rope_theta": 10000.0}},
            {"rope_parameters": {"rope_type": "default", "rope_theta": 0.0}},
            {"rope_parameters": {"rope_type": "default", "rope_theta": -10000.0}},
            {"rope_parameters": {"rope_type": "default", "rope_theta": float("nan")}},
            {"rope_parameters": {"rope_type": "default", "rope_theta": float("inf")}},
            {"rope_parameters": {"rope_type": "default", "rope_theta": Raw(b"1e999")}},
            {"rope_parameters": None, "rope_theta": 0.0},
            {"rope_parameters": None, "rope_theta": -1.0},
            {"rms_norm_eps": -1e-6},
            {"rms_norm_eps": -1.0},
            {"rms_norm_eps": float("nan")},
            {"rms_norm_eps": Raw(b"1e999")},
            {"rms_norm_eps": 0.0},
            {"initializer_range": float("nan")},
            {"hidden_size": float("nan")},
            {"hidden_size": 32.5},
            {"vocab_size": float("inf")},
            {"num_hidden_layers": -2},
            {"num_attention_heads": 0},
            {"head_dim": 0},
            {"intermediate_size": 0},
            {"vocab_size": 0},
            {"max_position_embeddings": -1},
            {"attention_dropout": float("nan")},
        ]
        for pi, p in enumerate(patches):
            c = self.cfg()
            c.update(p)
            if c.get("rope_parameters") is None and "rope_parameters" in p:
                c.pop("rope_parameters")
            for verb, out in ((["inspect", "m", "--json"], []) if pi % 2 == 0 else (None, None),
                              (["plan", "preview", "m", "--json"], []),
                              (["run", "--model", "m", *self.RUN, "--json", "r.json", "--dump-logits", "l.json"],
                               ["r.json", "l.json"])):
                if verb is None:
                    continue
                self.add(11, verb, setup=self.model_dir("m", c, None), stdout_json=verb[0] != "run",
                         json_outputs=out, note=str(p)[:80])
        # NaN / Inf / huge weights in a safetensors file
        for value, what in ((float("nan"), "nan"), (float("inf"), "inf"), (-float("inf"), "-inf"),
                            (3.0e38, "3e38")):
            for scope in ("all", "one"):
                st = self.poison_weights(self.st(), value, scope)
                for extra in ([], ["--decode", "2"]) if scope == "all" else ([],):
                    self.add(11, ["run", "--model", "m", *self.RUN, *extra, "--json", "r.json",
                                  "--dump-logits", "l.json"],
                             setup=self.model_dir("m", self.cfg(), st), json_outputs=["r.json", "l.json"],
                             note=f"{what} weights ({scope})")
        # hardware profiles with zero / negative / non-finite figures
        hw = json.loads((self.src / "plans/hardware/h100-sxm-8.json").read_text())
        edits = [
            ("memory_bandwidth_gbps", 0), ("memory_bandwidth_gbps", -1), ("memory_bandwidth_gbps", float("nan")),
            ("memory_efficiency", 0), ("memory_gib", 0), ("memory_gib", -80), ("devices", 0), ("devices", -8),
            ("peak_tflops", {"bf16": 0, "f16": 0, "f32": 0}), ("peak_tflops", {"bf16": -1, "f16": -1, "f32": -1}),
            ("peak_tflops", {"bf16": Raw(b"1e999"), "f16": 1, "f32": 1}),
            ("gemm_efficiency", [[0.001, 0.0], [1000, 0.0]]), ("gemm_efficiency", [[0, 0]]),
            ("gemm_efficiency", []),
        ]
        for coll in ("all_reduce", "all_gather"):
            for k, v in (("bus_bandwidth_gbps", 0), ("bus_bandwidth_gbps", -4), ("base_latency_us", -5),
                         ("base_latency_us", float("nan")), ("hop_latency_us", Raw(b"1e999"))):
                edits.append((f"collectives.{coll}.{k}", v))
        for key, v in edits:
            h = json.loads(json.dumps(hw))
            obj = h
            parts = key.split(".")
            for pkey in parts[:-1]:
                obj = obj[pkey]
            obj[parts[-1]] = v
            self.add(11, ["plan", "preview", L, "--hardware", "h.json", "--json", "--dtype", "bf16"],
                     setup=[_w("h.json", dump(h))], stdout_json=True, note=f"hardware {key}={v}")
            if len(key) % 3 == 0:
                self.add(11, ["plan", "preview", L, "--hardware", "h.json", "--dtype", "bf16"],
                         setup=[_w("h.json", dump(h))], note=f"hardware {key}={v} (text)")
            self.add(11, ["run", "--model", L, "--emulate-tp", "1,2", "--seq", "4", "--iters", "1", "--warmup",
                          "0", "--hardware", "h.json", "--json", "r.json"], setup=[_w("h.json", dump(h))],
                     json_outputs=["r.json"], note=f"hardware {key}={v} (emulated)")

    @staticmethod
    def poison_weights(path: Path, value: float, scope: str) -> bytes:
        raw = bytearray(path.read_bytes())
        n = struct.unpack("<Q", raw[:8])[0]
        hdr = json.loads(raw[8:8 + n])
        base = 8 + n
        done = 0
        for k in sorted(hdr):
            if k == "__metadata__":
                continue
            t = hdr[k]
            a, b = t["data_offsets"]
            if t["dtype"] == "F32":
                word = struct.pack("<f", value)
                if scope == "one":
                    if "layers.0" not in k or "weight" not in k:
                        continue
                    raw[base + a:base + a + 4] = word
                else:
                    raw[base + a:base + b] = word * ((b - a) // 4)
                done += 1
                if scope == "one" and done:
                    break
            elif t["dtype"] in ("BF16", "F16"):
                word = struct.pack("<f", value)[2:] if t["dtype"] == "BF16" else struct.pack("<e", value if
                                                                                            abs(value) < 7e4 else
                                                                                            float("inf"))
                if scope == "all":
                    raw[base + a:base + b] = word * ((b - a) // 2)
        return bytes(raw)

    # 12 --------------------------------------------------------------------------------------------
    def c12_parse_errors(self):
        F = str(self.fx)
        L = f"{F}/llama"
        bad = ["abc", "nan", "inf", "-1", "1e309", "99999999999999999999", "", "1.5", "0x7fffffffffffffff",
               "18446744073709551617"]
        run_base = {"--model": L, "--tp": "1", "--seq": "4", "--iters": "1", "--warmup": "0"}
        verbs = []
        for v in ("show", "validate", "preview", "export"):
            verbs.append((["plan", v, L], {}, ["--tp"]))
        verbs.append((["plan", "preview", L], {"--seq": "8"}, ["--batch", "--seq", "--context", "--max-tp"]))
        verbs.append((["run"], run_base, ["--tp", "--batch", "--seq", "--decode", "--warmup", "--iters",
                                          "--seed", "--timeout", "--tokens"]))
        verbs.append((["run"], {k: v for k, v in run_base.items() if k != "--tp"}, ["--emulate-tp"]))
        verbs.append((["bench", "load"], {"--model": "example"}, ["--repeat"]))
        verbs.append((["bench", "plan"], {"--model": L, "--repeat": "1"}, ["--tp", "--repeat"]))
        verbs.append((["bench", "comm"], {"-t": "2", "-b": "8", "-e": "64", "-n": "1", "-w": "0"},
                      ["-t", "-b", "-e", "-f", "-n", "-w", "-c"]))
        verbs.append((["bench", "gemm"], {"--iters": "1"}, ["--tp", "--tokens", "--device", "--iters"]))
        verbs.append((["bench", "gemm"], {"--backend": "cpu", "--model": "example", "--tokens": "4", "--iters": "1"},
                      ["--tp", "--tokens", "--iters", "--rounds"]))
        j = 0
        for head, base, opts in verbs:
            for opt in opts:
                j += 1
                # four of the bad values per option, rotating so that every value meets every verb
                vals = [bad[(j * 3 + k) % len(bad)] for k in range(4)]
                vals += ["0"] if opt not in ("--decode", "--warmup", "-w", "-c", "--device", "--seed") else []
                if opt in ("--tp", "--emulate-tp", "--tokens"):
                    vals = vals + ["1,,2", "1,abc", ",", "1,-2"]
                for v in vals:
                    argv = list(head)
                    for k, bv in base.items():
                        if k != opt:
                            argv += [k, bv]
                    argv += [opt, v]
                    # a valid 64-bit seed is a seed
                    accept_ok = (opt == "-c" and v in ("0", "1")) or (opt == "--seed" and v == "0x7fffffffffffffff")
                    self.add(12, argv, must_fail=not accept_ok, timeout=20, heavy=head[0] == "bench" and
                             head[1] == "load")
        # enum options and stray arguments
        for argv in (["plan", "show", L, "--profile", "G4"], ["run", "--model", L, "--backend", "tpu"],
                     ["run", "--model", L, "--dtype", "f64"], ["plan", "preview", L, "--dtype", "int8"],
                     ["run", "--model", L, "--comm", "tcp"], ["plan", "export", L, "--format", "yaml"],
                     ["bench", "comm", "-o", "gather"], ["bench", "comm", "-d", "f64"],
                     ["bench", "comm", "--comm", "tcp"], ["bench", "gemm", "--backend", "tpu"],
                     ["bench", "gemm", "--backend", "cpu", "--dtype", "f64"],
                     ["bench", "gemm", "--backend", "cpu", "--peak-only", "1:2"],
                     ["bench", "gemm", "--backend", "cpu", "--peak-only", "1:2:3x"],
                     ["bench", "gemm", "--backend", "cpu", "--peak-only", "-1:2:3"], ["inspect"], ["run"], ["plan"], ["bench"],
                     ["frobnicate"], ["inspect", L, L], ["run", "--model", L, "--tp", "1", "--emulate-tp", "1"],
                     ["run", "--model", L, "--hardware", "h100-sxm-8"], ["plan", "preview", L, "--hardware", ""],
                     ["inspect", ""], ["report", ""], ["run", "--model", ""], ["plan", "validate", L, "--plan", ""]):
            self.add(12, argv, must_fail=True)

    # 13 --------------------------------------------------------------------------------------------
    def c13_messages(self):
        F = str(self.fx)
        L = f"{F}/llama"
        dirmsg = r"(?i)director|folder|not a regular file"
        d = [_mkdir("dd")]
        for argv in (["plan", "validate", L, "--plan", "dd"], ["plan", "preview", L, "--hardware", "dd"],
                     ["report", "dd"], ["run", "--model", L, *self.RUN1, "--plan", "dd"],
                     ["run", "--model", L, *self.RUN1, "--json", "dd"], ["run", "--model", L, *self.RUN1,
                                                                          "--trace", "dd"],
                     ["run", "--model", L, *self.RUN1, "--csv", "dd"],
                     ["run", "--model", L, *self.RUN1, "--dump-logits", "dd"],
                     ["plan", "export", L, "-o", "dd"], ["report", self.fx.as_posix() + "/llama"],
                     ["report", "r.json", "--trace", "dd"], ["report", "r.json", "--csv", "dd"],
                     ["inspect", "dd"], ["inspect", "dd/"], ["run", "--model", "dd", *self.RUN1],
                     ["bench", "plan", "--model", "dd", "--repeat", "1"],
                     ["run", "--model", L, "--emulate-tp", "2", "--seq", "4", "--iters", "1", "--warmup", "0",
                      "--hardware", "dd"]):
            self.add(13, argv, setup=d + [_w("r.json", self.record)], must_fail=True,
                     stderr_re=dirmsg if argv[0] != "inspect" and "--model" not in argv[:2] else None)
        for spec in ("x", "0", "0:", ":logits", "0:logits:bogus", "99:logits", "-1:logits", "0:zzz",
                     "0:logits:hang:extra", "1:logits", "0:logits:", "a:b:c", "0::hang", "00000000000000000000:logits",
                     "4294967296:logits", "0:logits:HANG", ":", "::", "0:logits\n:hang", "0:" + "n" * 10000):
            self.add(13, ["run", "--model", L, *self.RUN1, "--inject-failure", spec], must_fail=True,
                     stderr_re=r"inject-failure|rank|node")
        for toks in ("1,2,3", "1,2,3,4,5", "-1,2,3,4", "96,1,2,3", "999999999999,1,2,3", "1.5,2,3,4"):
            self.add(13, ["run", "--model", L, *self.RUN1, "--tokens", toks], must_fail=True,
                     stderr_re=r"(?i)token|vocab")
        for argv in (["inspect", "nonexistent-model-id"], ["inspect", "/nonexistent/path"],
                     ["plan", "preview", L, "--hardware", "no-such-hw"], ["report", "missing.json"],
                     ["plan", "validate", L, "--plan", "missing.json"], ["run", "--model", "no/such-repo"],
                     ["inspect", "m"], ["inspect", "m/config.json"]):
            self.add(13, argv, setup=[_w("m/config.json", b"{}")] if "m" in argv[-1] else [], must_fail=True)
        for payload in (b"", b"{", b"[]", b"null", b"\"str\"", b"{}", b"\xef\xbb\xbf{}", b"{\"schema\": 5}"):
            self.add(13, ["report", "r.json"], setup=[_w("r.json", payload)], must_fail=True)
            self.add(13, ["plan", "preview", L, "--hardware", "h.json"], setup=[_w("h.json", payload)],
                     must_fail=True)
            self.add(13, ["plan", "validate", L, "--plan", "p.json"], setup=[_w("p.json", payload)],
                     must_fail=payload not in (b"{}", b"\xef\xbb\xbf{}"))

    # 14 --------------------------------------------------------------------------------------------
    def c14_slowness(self):
        F = str(self.fx)
        keys = {f"model.layers.{i}.mlp.gate_proj": "colwise" for i in range(100_000)}
        self.add(14, ["plan", "validate", f"{F}/llama", "--plan", "p.json"],
                 setup=[_w("p.json", lambda: dump({"tp_size": 2, "tp_plan": keys}))], timeout=60, heavy=True,
                 note="100,000 plan keys")
        c = self.cfg()
        c["num_hidden_layers"] = 100_000
        self.add(14, ["plan", "preview", "m", "--json"], setup=self.model_dir("m", c, None), timeout=60,
                 heavy=True, stdout_json=True, note="100,000-layer preview")

    # 15 --------------------------------------------------------------------------------------------
    def c15_escapes(self):
        esc = ["\x1b[31mRED\x1b[0m", "\x1b]0;pwned\x07", "\x1b[2J\x1b[H", "a\rb", "\x9b31m", "\x07\x08\x7f",
               "\x1bP+q\x1b\\", "\x00nul", "tab\tok\nnl"]
        paths = [("settings", "model"), ("settings", "class"), ("settings", "plan"), ("settings", "backend"),
                 ("settings", "weights"), ("provenance", "cpu"), ("provenance", "hostname"), ("provenance", "os"),
                 ("provenance", "devices")]
        base = json.loads(self.record)
        for i, s in enumerate(esc):
            for a, b in [paths[(i + k * 3) % len(paths)] for k in range(3)]:
                r = json.loads(self.record)
                if a in r and isinstance(r[a], dict):
                    r[a][b] = "x" + s + "y"
                self.add(15, ["report", "r.json"], setup=[_w("r.json", json.dumps(r).encode())], no_control=True,
                         note=f"{a}.{b} {s!r}")
            r = json.loads(self.record)
            r["schema"] = "tpstudio.run/2" + s
            self.add(15, ["report", "r.json"], setup=[_w("r.json", json.dumps(r).encode())], no_control=True)
            c = self.cfg()
            c["architectures"] = ["LlamaForCausalLM" + s]
            self.add(15, ["inspect", "m"], setup=self.model_dir("m", c), no_control=True, note="architectures")
            c = self.cfg()
            c["model_type"] = "llama" + s
            self.add(15, ["inspect", "m"], setup=self.model_dir("m", c), no_control=True, note="model_type")
        del base

    # 16 --------------------------------------------------------------------------------------------
    def c16_same_path(self):
        L = f"{self.fx}/llama"
        pairs = [("--json", "--trace"), ("--json", "--csv"), ("--trace", "--csv"), ("--json", "--dump-logits"),
                 ("--trace", "--dump-logits"), ("--csv", "--dump-logits")]
        same = [("X", "X", []), ("X", "./X", []), ("X", "{D}/X", []), ("X", "L", [_symlink("X", "L")]),
                ("X", "sub/../X", [_mkdir("sub")]), ("X", "H", [_w("X", b"keep"), _hardlink("X", "H")])]
        for i, (a, b) in enumerate(pairs):
            for x, y, steps in [same[(i + k) % len(same)] for k in range(4)]:
                self.add(16, ["run", "--model", L, *self.RUN1, a, x, b, y], setup=steps, must_fail=True,
                         no_progress=True)
        for flag in ("--trace", "--csv"):
            for tgt, steps in (("r.json", []), ("./r.json", []), ("L", [_symlink("r.json", "L")]),
                               ("H", [_hardlink("r.json", "H")])):
                self.add(16, ["report", "r.json", flag, tgt], setup=[_w("r.json", self.record)] + steps,
                         must_fail=True, protect=["r.json"])
        self.add(16, ["report", "r.json", "--trace", "o", "--csv", "o"], setup=[_w("r.json", self.record)],
                 must_fail=True)
        plan = self.src / "plans/llama/default.json"
        for argv in (["plan", "export", L, "--plan", "p.json", "-o", "p.json"],
                     ["plan", "export", L, "--plan", "p.json", "-o", "./p.json"],
                     ["run", "--model", L, *self.RUN1, "--plan", "p.json", "--json", "p.json"],
                     ["run", "--model", L, *self.RUN1, "--plan", "p.json", "--trace", "p.json"]):
            self.add(16, argv, setup=[_copy(plan, "p.json")], must_fail=True, protect=["p.json"])
        for argv in (["run", "--model", "m", *self.RUN1, "--json", "m/config.json"],
                     ["run", "--model", "m", *self.RUN1, "--trace", "m/model.safetensors"],
                     ["plan", "export", "m", "-o", "m/config.json"],
                     ["run", "--model", "m", "--emulate-tp", "2", "--seq", "4", "--iters", "1", "--warmup", "0",
                      "--hardware", "h.json", "--json", "h.json"]):
            self.add(16, argv, setup=self.model_dir("m", self.cfg()) + [
                _copy(self.src / "plans/hardware/local-cpu.json", "h.json")], must_fail=True,
                     protect=["m", "h.json"])

    # 17 --------------------------------------------------------------------------------------------
    NUMS = [0, -1, 1, 2**31, 2**31 - 1, 2**32, 2**53 + 1, 2**63, 2**63 - 1, 2**64, -2**63, 1e308, -1e308,
            float("nan"), float("inf"), -float("inf"), 1e-308, 0.5, -0.0, 3, 7, 1000003]

    def rand_string(self, r: random.Random):
        k = r.randrange(8)
        if k == 0:
            return "x" * r.choice([1000, 100_000, 1_000_000])
        if k == 1:
            return Raw(b'"ab' + bytes([r.randrange(0x80, 0x100) for _ in range(r.randrange(1, 6))]) + b'"')
        if k == 2:
            return "\x1b[31m" + "z" * r.randrange(5)
        if k == 3:
            return ""
        if k == 4:
            return "model.layers.*." * r.randrange(1, 50)
        if k == 5:
            return "\x00\u2028\ufeff" + chr(r.randrange(0x20, 0x7e))
        if k == 6:
            return r.choice(["colwise", "rowwise", "replicate", "F32", "BF16", "llama", "silu", "Shard(-1)"])
        return "".join(r.choice("xyz0123_-./*") for _ in range(r.randrange(1, 40)))

    def mutate_value(self, v, r: random.Random):
        k = r.randrange(10)
        if k <= 3:
            return r.choice(self.NUMS)
        if k == 4:
            return self.rand_string(r)
        if k == 5:
            return r.choice([None, True, False, [], {}, [v], {"v": v}])
        if k == 6:
            return Raw(deep_array(r.choice([100, 10_000, 100_000])))
        if k == 7:
            return [r.choice(self.NUMS) for _ in range(r.choice([0, 1, 3, 1000]))]
        if k == 8:
            return Raw(r.choice([b"1e999", b"-1e999", b"NaN", b"Infinity", b"00", b"1.", b".5", b"+1", b"0x10",
                                 b"123456789012345678901234567890", b"-0", b"1e-400", b'"1"']))
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return v * r.choice([-1, 2, 1000, 2**20, 2**32]) if math.isfinite(v) else 0
        return self.rand_string(r)

    @staticmethod
    def paths(obj, prefix=()):
        out = [prefix]
        if isinstance(obj, dict):
            for k, v in obj.items():
                out += Corpus.paths(v, prefix + (k,))
        elif isinstance(obj, list):
            for i, v in enumerate(obj[:50]):
                out += Corpus.paths(v, prefix + (i,))
        return out

    def mutate_json(self, obj, r: random.Random, nmut=None) -> bytes:
        obj = json.loads(json.dumps(obj))
        for _ in range(nmut or r.choice([1, 1, 1, 2, 3])):
            ps = [p for p in self.paths(obj) if p]
            if not ps:
                break
            p = r.choice(ps)
            parent = obj
            for k in p[:-1]:
                parent = parent[k]
            key = p[-1]
            op = r.randrange(10)
            if op == 0 and isinstance(parent, dict):
                del parent[key]
            elif op == 1 and isinstance(parent, dict):
                items = list(parent.items())
                items.insert(r.randrange(len(items) + 1), (key, self.mutate_value(parent[key], r)))
                dup = Dup(items)
                if len(p) == 1:
                    obj = dup
                    break
                gp = obj
                for k in p[:-2]:
                    gp = gp[k]
                gp[p[-2]] = dup
                break
            elif op == 2 and isinstance(parent, list):
                parent.insert(r.randrange(len(parent) + 1), self.mutate_value(parent[key], r))
            elif op == 3 and isinstance(parent, dict):
                parent[self.rand_string(r) if r.random() < 0.5 else key + "_x"] = self.mutate_value(parent[key], r)
            else:
                parent[key] = self.mutate_value(parent[key], r)
            if not isinstance(obj, (dict, list)):
                break
        data = dump(obj)
        t = r.randrange(20)
        if t == 0:
            data = data[:r.randrange(len(data) + 1)]
        elif t == 1:
            i = r.randrange(len(data))
            data = data[:i] + bytes([r.randrange(256)]) + data[i + 1:]
        elif t == 2:
            data = b"\xef\xbb\xbf" + data
        elif t == 3:
            data = data + b"\n{trailing}"
        return data

    def mutate_safetensors(self, raw: bytes, r: random.Random) -> bytes:
        n = struct.unpack("<Q", raw[:8])[0]
        hdr = json.loads(raw[8:8 + n])
        body = raw[8 + n:]
        k = r.randrange(8)
        if k <= 2:
            names = [x for x in hdr if x != "__metadata__"]
            name = r.choice(names)
            t = hdr[name]
            field_ = r.choice(["dtype", "shape", "data_offsets", "data_offsets", "shape"])
            if field_ == "dtype":
                t["dtype"] = r.choice(["F32", "BF16", "F16", "F64", "I64", "I8", "U8", "BOOL", "F8_E4M3", "XX", "",
                                       "f32", 5])
            elif field_ == "shape":
                s = list(t["shape"])
                if s and r.random() < 0.7:
                    s[r.randrange(len(s))] = r.choice([0, -1, 2**31, 2**32, 2**62, 2**63, 2**64 - 1, 3.5, "4", None,
                                                       s[0] * 2, 1])
                else:
                    s = r.choice([[], [1] * 64, [2**21, 2**21, 2**21], [s[0] if s else 1]])
                t["shape"] = s
            else:
                a, b = t["data_offsets"]
                t["data_offsets"] = r.choice([[b, a], [a, b + 4], [a, 2**64 - 1], [2**64 - 4, 2**64 + 4],
                                              [a + 1, b + 1], [0, 0], [a], [a, b, b], [-4, b], [a, len(body) + 4096],
                                              [a, 2**63]])
            hb = dump(hdr)
            if r.random() < 0.3:
                hb += b" " * r.randrange(8)
            return struct.pack("<Q", len(hb)) + hb + body
        if k == 3:
            hb = self.mutate_json(hdr, r)
            return struct.pack("<Q", len(hb)) + hb + body
        if k == 4:
            h = bytearray(raw[8:8 + n])
            for _ in range(r.randrange(1, 6)):
                h[r.randrange(len(h))] = r.randrange(256)
            return raw[:8] + bytes(h) + body
        if k == 5:
            return struct.pack("<Q", r.choice([0, 1, n - 1, n + 1, len(raw), len(raw) - 8, 2**32, 2**64 - 1, 8])) \
                + raw[8:]
        if k == 6:
            return raw[:r.randrange(len(raw))]
        hdr2 = dict(hdr)
        names = [x for x in hdr if x != "__metadata__"]
        if names and r.random() < 0.5:
            del hdr2[r.choice(names)]
        else:
            hdr2["__metadata__"] = r.choice([{"format": "pt"}, {"format": 5}, [], "x", {"k" * 1000: "v" * 100000}])
        hb = dump(hdr2)
        return struct.pack("<Q", len(hb)) + hb + body

    def c17_fuzz(self, count: int):
        r = self.rng
        F = str(self.fx)
        hw_objs = []
        for h in self.hardware:
            try:
                hw_objs.append(json.loads(h.read_text()))
            except ValueError:
                pass
        plan_objs = []
        for p in self.plans:
            try:
                plan_objs.append((p, json.loads(p.read_text())))
            except ValueError:
                pass
        rec_objs = [json.loads(x) for x in self.records]
        for i in range(count):
            kind = r.choices(["config", "safetensors", "plan", "hardware", "record"], [35, 20, 20, 10, 15])[0]
            if kind == "config":
                m = r.choice(self.models)
                data = self.mutate_json(self.cfg(m), r)
                verb = r.choices(["inspect", "validate", "preview", "run", "export"], [30, 15, 25, 20, 10])[0]
                with_st = r.random() < 0.3
                steps = self.model_dir("m", data, m if with_st else None)
                if verb == "inspect":
                    self.add(17, ["inspect", "m", "--json"], setup=steps, stdout_json=True, note=f"config {m}")
                elif verb == "validate":
                    self.add(17, ["plan", "validate", "m", "--tp", r.choice(["1", "2", "4"])], setup=steps,
                             note=f"config {m}")
                elif verb == "preview":
                    self.add(17, ["plan", "preview", "m", "--json", "--seq", "8", "--tp", r.choice(["1", "2"])],
                             setup=steps, stdout_json=True, note=f"config {m}")
                elif verb == "export":
                    self.add(17, ["plan", "export", "m", "--format", "python", "-o", "o.py", "--tp", "2"],
                             setup=steps, python_outputs=["o.py"], note=f"config {m}")
                else:
                    self.add(17, ["run", "--model", "m", *self.RUN, "--json", "r.json"]
                             + ([] if with_st else ["--random-weights"]), setup=steps, json_outputs=["r.json"],
                             note=f"config {m}")
            elif kind == "safetensors":
                m = r.choice(self.models)
                st = self.mutate_safetensors(self.st(m).read_bytes(), r)
                steps = self.model_dir("m", self.cfg(m), st)
                verb = r.choices(["inspect", "show", "run"], [50, 20, 30])[0]
                if verb == "inspect":
                    self.add(17, ["inspect", "m", "--json"], setup=steps, stdout_json=True, note=f"safetensors {m}")
                elif verb == "show":
                    self.add(17, ["plan", "show", "m", "--json"], setup=steps, stdout_json=True,
                             note=f"safetensors {m}")
                else:
                    self.add(17, ["run", "--model", "m", *self.RUN, "--json", "r.json"], setup=steps,
                             json_outputs=["r.json"], note=f"safetensors {m}")
            elif kind == "plan":
                p, obj = r.choice(plan_objs)
                fam = self.fixture_family(p)
                data = self.mutate_json(obj, r)
                model = f"{F}/{fam}"
                verb = r.choices(["validate", "preview", "export", "show", "run"], [25, 25, 20, 15, 15])[0]
                s = [_w("p.json", data)]
                if verb == "validate":
                    self.add(17, ["plan", "validate", model, "--plan", "p.json"], setup=s, note=f"plan {p.name}")
                elif verb == "preview":
                    self.add(17, ["plan", "preview", model, "--plan", "p.json", "--json", "--seq", "8"], setup=s,
                             stdout_json=True, note=f"plan {p.name}")
                elif verb == "export":
                    self.add(17, ["plan", "export", model, "--plan", "p.json", "--format", "python", "-o", "o.py"],
                             setup=s, python_outputs=["o.py"], note=f"plan {p.name}")
                elif verb == "show":
                    self.add(17, ["plan", "show", model, "--plan", "p.json", "--json"], setup=s, stdout_json=True,
                             note=f"plan {p.name}")
                else:
                    self.add(17, ["run", "--model", model, "--plan", "p.json", *self.RUN, "--json", "r.json"],
                             setup=s, json_outputs=["r.json"], note=f"plan {p.name}")
            elif kind == "hardware":
                data = self.mutate_json(r.choice(hw_objs), r)
                s = [_w("h.json", data)]
                if r.random() < 0.7:
                    self.add(17, ["plan", "preview", f"{F}/llama", "--hardware", "h.json", "--json", "--seq", "8"],
                             setup=s, stdout_json=True, note="hardware")
                else:
                    self.add(17, ["run", "--model", f"{F}/llama", "--emulate-tp", "1,2", "--seq", "4", "--iters",
                                  "1", "--warmup", "0", "--hardware", "h.json", "--json", "r.json"], setup=s,
                             json_outputs=["r.json"], note="hardware (emulated)")
            else:
                data = self.mutate_json(r.choice(rec_objs), r)
                s = [_w("r.json", data)]
                if r.random() < 0.5:
                    self.add(17, ["report", "r.json"], setup=s, no_control=True, note="record")
                else:
                    self.add(17, ["report", "r.json", "--trace", "t.json", "--csv", "c.csv"], setup=s,
                             json_outputs=["t.json"], text_outputs=["c.csv"], no_control=True, note="record")


# ---------------------------------------------------------------------------------------------------
# Checks

NONFINITE_TEXT = re.compile(rb"(?<![A-Za-z0-9_.])[-+]?(nan|inf|infinity)(?![A-Za-z0-9_])", re.I)
NEGATIVE_TEXT = re.compile(rb"(?<![\w.\-])-\d[\d,]*(\.\d+)?\s?(B|KiB|MiB|GiB|TiB|PiB|bytes|ms|\xc2\xb5s|us|s|"
                           rb"GB/s|TFLOP/s|tokens/s)(?![\w/])")
HUGE_TEXT = re.compile(rb"(?<![\w.])\d[\d,]{18,}")
NUMERIC_KEY = re.compile(r"(bytes|_s$|_us$|_ms$|_ns$|seconds|time|tokens_per_s|speedup|share|tflops|gbps|bandwidth|"
                         r"^parameters$|memory|flops|latency|^params|_gib$|_mib$|efficiency|busbw|algbw)", re.I)
SANITIZER = re.compile(rb"ERROR: AddressSanitizer|runtime error:|LeakSanitizer|ERROR: ThreadSanitizer|"
                       rb"WARNING: MemorySanitizer|ERROR: UndefinedBehaviorSanitizer")
MEMORY_MSG = re.compile(rb"bad_alloc|Cannot allocate memory|hard rss limit exhausted|out of memory: (?:mmap|new)|"
                        rb"allocation-size-too-big|requested allocation size")
MPI_SIGNAL = re.compile(rb"exited on signal|Segmentation fault|Aborted \(core dumped\)|signal \d+ \(")
HUGE_INT = 2**62


def text_figures(data: bytes) -> Optional[str]:
    m = NONFINITE_TEXT.search(data)
    if m:
        return f"non-finite figure {data[max(0, m.start() - 40):m.end() + 10]!r}"
    m = NEGATIVE_TEXT.search(data)
    if m:
        return f"negative figure {data[max(0, m.start() - 40):m.end() + 10]!r}"
    m = HUGE_TEXT.search(data)
    if m and int(m.group(0).replace(b",", b"")) >= HUGE_INT:
        return f"wrapped figure {data[max(0, m.start() - 40):m.end() + 10]!r}"
    return None


def json_figures(data: bytes, what: str) -> Optional[str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"{what}: not UTF-8 ({e})"

    def bad_const(c):
        raise ValueError(f"non-finite literal {c}")

    try:
        obj = json.loads(text, parse_constant=bad_const)
    except (ValueError, RecursionError) as e:
        if "non-finite" in str(e):
            return f"{what}: {e}"
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if lines and all(ln.lstrip().startswith("{") for ln in lines):  # JSON lines
            for ln in lines:
                r = json_figures(ln.encode(), what)
                if r:
                    return r
            return None
        return f"{what}: not JSON ({str(e)[:80]})"

    stack = [(obj, "$", "")]
    while stack:
        o, path, key = stack.pop()
        if isinstance(o, dict):
            for k, v in o.items():
                stack.append((v, f"{path}.{k}", str(k)))
        elif isinstance(o, list):
            if None in o and any(isinstance(v, (int, float)) and not isinstance(v, bool) for v in o):
                return f"{what}: null among the numbers of {path}"  # how nlohmann writes NaN / Inf
            for i, v in enumerate(o[:100000]):
                stack.append((v, f"{path}[{i}]", key))
        elif isinstance(o, bool):
            continue
        elif isinstance(o, float) and not math.isfinite(o):
            return f"{what}: non-finite {path}={o}"
        elif isinstance(o, (int, float)):
            if abs(o) >= HUGE_INT and NUMERIC_KEY.search(key):
                return f"{what}: wrapped figure {path}={o}"
            if o < 0 and NUMERIC_KEY.search(key):
                return f"{what}: negative figure {path}={o}"
        elif o is None and NUMERIC_KEY.search(key):
            return f"{what}: null figure {path}"
    return None


CONTROL = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")


def tree_state(p: Path):
    """Listing of a path (names, kinds, sizes, mtimes) plus hashes of small files."""
    out = []
    if not os.path.lexists(p):
        return None
    items = [p] + (sorted(p.rglob("*")) if p.is_dir() and not p.is_symlink() else [])
    for q in items:
        st = os.lstat(q)
        h = ""
        if stat.S_ISREG(st.st_mode) and st.st_size <= (64 << 20):
            h = hashlib.sha256(q.read_bytes()).hexdigest()
        out.append((str(q.relative_to(p.parent)), stat.S_IFMT(st.st_mode), st.st_size, h))
    return out


# ---------------------------------------------------------------------------------------------------
# Runner


@dataclass
class Result:
    case: Case
    rc: Optional[int] = None
    seconds: float = 0.0
    rss_mb: float = 0.0
    reason: str = ""  # empty: pass
    detail: str = ""
    stderr_tail: bytes = b""
    cmd: str = ""
    signalled_at: Optional[float] = None  # signal cases: when the signal went
    left_behind: list = field(default_factory=list)  # signal cases: what outlived the CLI
    entries_before: set = field(default_factory=set)  # the case folder (its TMPDIR) before the command


class Runner:
    def __init__(self, args):
        self.args = args
        self.cli = os.path.abspath(args.cli)
        self.python = sys.executable or "python3"

    def argv(self, case: Case, d: Path) -> list:
        out = []
        first = case.argv[0] if case.argv else ""
        if case.program == "gui":
            out.append(self.args.gui)
        elif not case.mpi:
            out.append(self.cli)
        for a in case.argv:
            if isinstance(a, bytes):
                out.append(a.replace(b"{D}", os.fsencode(str(d))).replace(b"{CLI}", os.fsencode(self.cli)))
            else:
                out.append(a.replace("{D}", str(d)).replace("{CLI}", self.cli))
        del first
        return out

    def timeout_of(self, case: Case) -> float:
        t = case.timeout * self.args.timeout / 20.0 if case.timeout else self.args.timeout
        return t * (4 if self.args.asan else 1)

    def limits(self, case: Case):
        mem = (case.mem_mb or self.args.mem_mb) << 20
        fsize = (case.fsize_mb or self.args.fsize_mb) << 20
        asan = self.args.asan

        def pre():
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if not asan:
                resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        return pre

    def env(self, case: Case, d: Path) -> dict:
        e = dict(os.environ)
        e.update({"TMPDIR": str(d), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                  "HF_HOME": str(d / ".hf"), "LC_ALL": "C.UTF-8"})
        if self.args.asan:
            opts = f"hard_rss_limit_mb={self.args.mem_mb}:allocator_may_return_null=1:detect_leaks=1:" \
                   f"abort_on_error=0:handle_abort=1:detect_stack_use_after_return=0"
            e["ASAN_OPTIONS"] = opts + (":" + os.environ["ASAN_OPTIONS"] if os.environ.get("ASAN_OPTIONS") else "")
            e.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
            # Without RLIMIT_AS (ASan reserves terabytes of address space) the program's memory budget
            # is the normal mode's cap, set through TPSTUDIO_MAX_MEMORY; the RSS limit above stays as
            # ASan's own overhead (shadow memory, quarantine) needs it.
            e["TPSTUDIO_MAX_MEMORY"] = "2048M"
        e.update({k: v.replace("{D}", str(d)) for k, v in case.env.items()})
        e[MARK] = case.cid  # every process of the case carries it (signal cases look for what is left)
        if case.program == "gui":
            e["QT_QPA_PLATFORM"] = "offscreen"
            e["XDG_RUNTIME_DIR"] = str(d / ".runtime")
        return e

    def start(self, case: Case):
        d = Path(tempfile.mkdtemp(prefix=f"hostile-{case.cid}-", dir=self.args.workdir))
        res = Result(case)
        try:
            for s in case.setup:
                s(d)
        except OSError as e:
            res.reason, res.detail = "setup", str(e)
            return None, res, d, None
        protected = {p: tree_state(d / p) for p in case.protect}
        if case.program == "gui":  # Qt's runtime folder (else it makes TMPDIR/runtime-USER itself)
            (d / ".runtime").mkdir(mode=0o700, exist_ok=True)
        res.entries_before = set(os.listdir(d))
        argv = self.argv(case, d)
        res.cmd = " ".join(shlex.quote(os.fsdecode(a)) for a in argv)
        out = open(case.stdout_path if case.stdout_path and case.stdout_path.startswith("/dev/")
                   else d / (case.stdout_path or ".stdout"), "wb")
        err = open(d / ".stderr", "wb")
        t0 = time.monotonic()
        try:
            p = subprocess.Popen(argv, cwd=d, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                 env=self.env(case, d), preexec_fn=self.limits(case), start_new_session=True)
        except OSError as e:
            out.close()
            err.close()
            res.reason, res.detail = "setup", f"cannot start: {e}"
            return None, res, d, None
        out.close()
        err.close()
        return p, res, d, (t0, protected)

    def finish(self, p, res: Result, d: Path, meta, status, rusage, timed_out):
        case = res.case
        t0, protected = meta
        res.seconds = time.monotonic() - t0
        res.rss_mb = rusage.ru_maxrss / 1024.0
        if os.WIFSIGNALED(status):
            res.rc = -os.WTERMSIG(status)
        else:
            res.rc = os.WEXITSTATUS(status)
        stderr = (d / ".stderr").read_bytes()[:READ_LIMIT]
        res.stderr_tail = stderr[-300:]
        try:
            self.judge(res, d, stderr, protected, timed_out)
        except Exception as e:  # a checker bug must not hide the rest
            res.reason, res.detail = "checker", f"{type(e).__name__}: {e}"
        finally:
            shutil.rmtree(d, ignore_errors=True)
            if d.exists():
                subprocess.run(["chmod", "-R", "u+rwx", str(d)], check=False)
                shutil.rmtree(d, ignore_errors=True)
        return res

    def fail(self, res, reason, detail=""):
        if not res.reason:
            res.reason, res.detail = reason, detail

    def judge(self, res: Result, d: Path, stderr: bytes, protected, timed_out):
        case = res.case
        rc = res.rc
        m = SANITIZER.search(stderr)
        if m:
            return self.fail(res, "sanitizer", stderr[m.start():m.start() + 200].decode("utf-8", "replace"))
        if timed_out:
            return self.fail(res, "timeout", f"killed after {res.seconds:.1f} s")
        if b"Traceback (most recent call last)" in stderr:
            return self.fail(res, "traceback", stderr[stderr.rfind(b"\n", 0, len(stderr) - 1) + 1:][:200].decode("utf-8", "replace"))
        if case.max_rss_mb and res.rss_mb > case.max_rss_mb:
            return self.fail(res, "memory", f"peak RSS {res.rss_mb:.0f} MB > {case.max_rss_mb} MB before refusing")
        if case.signal:
            return self.judge_signal(res, d, stderr)
        if case.mpi and MPI_SIGNAL.search(stderr):
            return self.fail(res, "signal", "a rank died on a signal")
        if rc < 0:
            return self.fail(res, "signal", signal.Signals(-rc).name if -rc in signal.valid_signals() else str(rc))
        if res.rss_mb > (case.mem_mb or self.args.mem_mb): # the case's own cap, as its RLIMIT_AS
            return self.fail(res, "memory", f"peak RSS {res.rss_mb:.0f} MB > {case.mem_mb or self.args.mem_mb} MB")
        mm = MEMORY_MSG.search(stderr)
        if mm and rc != 0:
            return self.fail(res, "memory", f"allocation failed: {stderr[mm.start():mm.start() + 120]!r}")
        stdout = b""
        if not case.stdout_path or not case.stdout_path.startswith("/dev/"):
            sp = d / (case.stdout_path or ".stdout")
            if sp.exists():
                with open(sp, "rb") as fh:
                    stdout = fh.read(READ_LIMIT)
        if rc == 0:
            if case.stdout_json and case.stdout_path is None:
                r = json_figures(stdout, "stdout")
                if r:
                    return self.fail(res, "figures" if "figure" in r or "non-finite" in r else "bad-output", r)
            elif not case.stdout_path:
                r = text_figures(stdout)
                if r:
                    return self.fail(res, "figures", "stdout: " + r)
            for rel in case.json_outputs:
                f = d / rel
                if f.is_file():
                    with open(f, "rb") as fh:
                        data = fh.read(READ_LIMIT)
                    r = json_figures(data, rel)
                    if r:
                        return self.fail(res, "figures" if "figure" in r or "non-finite" in r else "bad-output", r)
            for rel in case.text_outputs:
                f = d / rel
                if f.is_file():
                    data = f.read_bytes()[:READ_LIMIT]
                    try:
                        data.decode("utf-8")
                    except UnicodeDecodeError as e:
                        return self.fail(res, "bad-output", f"{rel}: not UTF-8 ({e})")
                    r = text_figures(data)
                    if r:
                        return self.fail(res, "figures", f"{rel}: {r}")
            for rel in case.python_outputs:
                r = self.check_python(d, rel)
                if r:
                    return self.fail(res, "injection" if "marker" in r else "bad-output", r)
            if case.must_fail:
                return self.fail(res, "accepted", "exit 0 where the input must be refused")
        elif case.must_pass:
            return self.fail(res, "baseline", f"valid input refused: rc {rc}")
        elif case.mpi:
            pass
        elif rc in (1, 2):
            msg = stderr.strip()
            if not msg and [os.fsdecode(a) for a in case.argv[:2]] == ["plan", "validate"]:
                msg = stdout.strip()  # validate reports the plan's errors on stdout
            if not msg:
                return self.fail(res, "no-message", f"exit {rc} with an empty stderr")
            if len(stderr) > MAX_MESSAGE:
                return self.fail(res, "huge-message", f"{len(stderr)} bytes on stderr")
            if case.stderr_re and not re.search(case.stderr_re.encode(), stderr):
                return self.fail(res, "message", f"stderr does not match /{case.stderr_re}/")
        else:
            return self.fail(res, "exit-code", f"exit {rc}")
        # class checks that apply whatever the exit code
        if case.no_control and CONTROL.search(stdout):
            m = CONTROL.search(stdout)
            return self.fail(res, "control-chars", f"stdout: {stdout[max(0, m.start() - 20):m.end() + 10]!r}")
        if list((d).rglob(MARKER + "*")):
            return self.fail(res, "injection", "the payload created the marker file")
        for rel, before in protected.items():
            after = tree_state(d / rel)
            if after != before:
                return self.fail(res, "modified", f"{rel} changed ({len(before or [])} -> {len(after or [])} "
                                                  f"entries)")
        for rel in case.absent:
            if (d / rel).exists():
                return self.fail(res, "lost-work", f"{rel} was written before refusing")
        if case.no_progress and rc != 0 and re.search(rb"iteration \d", stderr + stdout):
            return self.fail(res, "lost-work", "refused only after running")
        if rc != 0 and not case.mpi and len(stderr) > MAX_MESSAGE:
            return self.fail(res, "huge-message", f"{len(stderr)} bytes on stderr")
        if case.check:
            why = case.check(d, stdout, stderr, rc)
            if why:
                return self.fail(res, "check", why)

    def judge_signal(self, res: Result, d: Path, stderr: bytes):
        """A signal case: the right exit, soon after the signal, and nothing left behind."""
        case = res.case
        sig = signal.Signals(case.signal[0]).name
        if res.signalled_at is None:
            return self.fail(res, "setup", f"the command ended (rc {res.rc}) before {sig} could be sent")
        if res.rc not in case.allowed_rc:
            return self.fail(res, "exit-code", f"rc {res.rc} after {sig}, expected one of {case.allowed_rc}")
        latency = res.seconds - res.signalled_at
        limit = case.max_latency * (4 if self.args.asan else 1) if case.max_latency else None
        if limit and latency > limit:
            return self.fail(res, "slowness", f"exited {latency:.2f} s after {sig} (at most {limit:.1f} s)")
        if res.left_behind:
            return self.fail(res, "left-behind", f"after {sig}: " + "; ".join(res.left_behind)[:400])
        for rel in case.absent:
            if (d / rel).exists():
                return self.fail(res, "lost-work", f"{rel} was written though the command was interrupted")
        if res.rc > 0 and not stderr.strip():
            return self.fail(res, "no-message", f"exit {res.rc} after {sig} with an empty stderr")

    def maybe_signal(self, case: Case, p, res: Result, d: Path, t0: float, now: float, deadline: float):
        sig, trigger, after = case.signal
        if now - t0 < after:
            return
        if getattr(res, "_next_look", 0) > now:
            return
        res._next_look = now + 0.1
        seen = trigger is None or now > t0 + 0.8 * (deadline - t0)  # waited long enough: send anyway
        if not seen and trigger.startswith("tmp:"):
            seen = any(e.startswith(trigger[4:]) for e in os.listdir(d))
        elif not seen:
            seen = any(trigger in cmd for pid, cmd in marked_processes(case.cid).items() if pid != p.pid)
        if seen:
            try:
                os.kill(p.pid, sig)
                res.signalled_at = now - t0
            except ProcessLookupError:
                pass

    def left_behind(self, case: Case, res: Result, d: Path) -> list:
        """What outlived the CLI: processes carrying the case's mark, given a while to end, and
        temporary folders in its TMPDIR."""
        settle = time.monotonic() + (30 if case.signal[0] == signal.SIGKILL else 15) * (4 if self.args.asan else 1)
        procs = marked_processes(case.cid)
        while procs and time.monotonic() < settle:
            time.sleep(0.2)
            procs = marked_processes(case.cid)
        out = [f"process {pid} ({cmd[:120]})" for pid, cmd in procs.items()]
        if not case.leftover_folders:
            out += [f"{e} in TMPDIR" for e in os.listdir(d)
                    if e not in res.entries_before and (TEMP_LEFTOVER.match(e) or (d / e).is_dir())]
        return out

    def check_python(self, d: Path, rel: str) -> Optional[str]:
        f = d / rel
        if not f.is_file():
            return None
        src = f.read_bytes()
        try:
            text = src.decode("utf-8")
        except UnicodeDecodeError as e:
            return f"{rel}: not UTF-8 ({e})"
        try:
            ast.parse(text)
        except (SyntaxError, ValueError) as e:
            return f"{rel}: does not parse ({e})"
        sandbox = d / ".py-sandbox"
        sandbox.mkdir(exist_ok=True)
        shutil.copyfile(f, sandbox / "plan.py")

        def pre():
            resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
            resource.setrlimit(resource.RLIMIT_FSIZE, (16 << 20, 16 << 20))
        try:
            subprocess.run([self.python, "-I", "plan.py", "--check"], cwd=sandbox, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10, preexec_fn=pre,
                           start_new_session=True, env={"PATH": "/usr/bin:/bin", "HOME": str(sandbox)})
        except subprocess.TimeoutExpired:
            return f"{rel}: python3 {rel} --check hung"
        if list(d.rglob(MARKER + "*")):
            return f"{rel}: running it created the marker file (injected code ran)"
        return None

    def run_all(self, cases: list[Case]) -> list[Result]:
        # heavy and slow cases first so they do not form the tail
        order = sorted(range(len(cases)), key=lambda i: (not cases[i].heavy, i))
        pending = list(order)
        running: dict[int, tuple] = {}
        results: dict[int, Result] = {}
        done = 0
        last = time.monotonic()
        while pending or running:
            while pending and len(running) < self.args.jobs:
                i = pending.pop(0)
                p, res, d, meta = self.start(cases[i])
                if p is None:
                    shutil.rmtree(d, ignore_errors=True)
                    results[i] = res
                    done += 1
                    continue
                running[i] = (p, res, d, meta, time.monotonic() + self.timeout_of(cases[i]))
            time.sleep(0.005)
            now = time.monotonic()
            for i in list(running):
                p, res, d, meta, deadline = running[i]
                pid, status, ru = os.wait4(p.pid, os.WNOHANG)
                timed_out = False
                if pid == 0 and cases[i].signal and res.signalled_at is None:
                    self.maybe_signal(cases[i], p, res, d, meta[0], now, deadline)
                if pid == 0:
                    if now < deadline:
                        continue
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    pid, status, ru = os.wait4(p.pid, 0)
                    timed_out = True
                p.returncode = 0  # reaped here; keep Popen from waiting again
                if cases[i].signal and not timed_out:
                    res.left_behind = self.left_behind(cases[i], res, d)
                try:
                    os.killpg(p.pid, signal.SIGKILL)  # stray children (mpirun ranks, helpers)
                except (ProcessLookupError, PermissionError):
                    pass
                for pid_ in marked_processes(cases[i].cid):
                    try:
                        os.kill(pid_, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                del running[i]
                results[i] = self.finish(p, res, d, meta, status, ru, timed_out)
                done += 1
            if not self.args.quiet and time.monotonic() - last > 15:
                last = time.monotonic()
                print(f"  ... {done}/{len(cases)} cases", file=sys.stderr, flush=True)
        return [results[i] for i in range(len(cases))]


# ---------------------------------------------------------------------------------------------------


MARK = "TPSTUDIO_HOSTILE_CASE"
TEMP_LEFTOVER = re.compile(r"^(tpstudio-|tp-verify-|tp\d+-|tmp)")


def marked_processes(cid: str) -> dict:
    """pid -> command line of the live processes whose environment carries the case's mark."""
    out = {}
    needle = f"{MARK}={cid}\0".encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                env = f.read() + b"\0"
            if needle not in env:
                continue
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[-1].split()[0] == b"Z":
                    continue  # a zombie waits for its parent only
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                out[int(entry.name)] = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            continue
    return out


def make_record(cli: str, src: Path, workdir: str) -> tuple[bytes, list[bytes]]:
    corpus = sorted((src / "tests" / "fuzz" / "corpus" / "run_record").glob("*.json"))
    records = [p.read_bytes() for p in corpus]
    rec = None
    with tempfile.TemporaryDirectory(dir=workdir) as d:
        for extra in ([], ["--decode", "2"]):
            try:
                subprocess.run([cli, "run", "--model", str(src / "tests/fixtures/models/llama"), "--tp", "1,2",
                                "--seq", "4", "--iters", "1", "--warmup", "0", *extra, "--json", f"{d}/r.json"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120, cwd=d)
                data = Path(d, "r.json").read_bytes()
                json.loads(data)
                records.append(data)
                rec = rec or data
            except (OSError, ValueError, subprocess.SubprocessError):
                pass
    if rec is None:
        if not records:
            sys.exit("hostile: no run record: 'run --json' failed and tests/fuzz/corpus/run_record is empty")
        rec = records[0]
    # normalise to 1-space indent so byte replacements of '"model": "' etc. match
    rec = json.dumps(json.loads(rec), indent=1).encode()
    return rec, [json.dumps(json.loads(x), indent=1).encode() for x in records]


def class_of(f: str) -> set[int]:
    out = set()
    for part in f.split(","):
        part = part.strip()
        if part.isdigit():
            out.add(int(part))
        else:
            out |= {k for k, v in CLASSES.items() if part.lower() in v}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--cli", required=True, help="tpstudio-cli binary to attack")
    ap.add_argument("--source", default=str(Path(__file__).resolve().parent.parent),
                    help="repository root (fixtures, plans); default: this script's parent's parent")
    ap.add_argument("--cases", type=int, default=1000, help="total cases: random mutations (at least 100) fill the corpus up to N")
    ap.add_argument("--seed", type=int, default=15, help="RNG seed (same seed, same cases)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per case (x4 under --asan)")
    ap.add_argument("--mem-mb", type=int, default=None, help="memory cap per case (default 2048; 6144 --asan)")
    ap.add_argument("--fsize-mb", type=int, default=1024, help="largest file a case may write")
    ap.add_argument("--asan", action="store_true", help="sanitizer build: RSS caps (no RLIMIT_AS), x4 timeouts")
    ap.add_argument("--filter", help="only these classes: numbers or names, comma-separated (e.g. 7,injection)")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    ap.add_argument("--json", metavar="REPORT", help="write per-case results as JSON")
    ap.add_argument("--workdir", default=None, help="where case folders go (default: $TMPDIR)")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--gui", help="the tpstudio GUI binary: its command line is attacked too")
    ap.add_argument("--python", default=os.environ.get("TPSTUDIO_PYTHON"),
                    help="a Python with torch and transformers: plan verify and class-plan signal cases "
                         "(default: TPSTUDIO_PYTHON; without one they are left out, and said so)")
    args = ap.parse_args()
    if args.mem_mb is None:
        args.mem_mb = 6144 if args.asan else 2048
    src = Path(args.source).resolve()
    if not os.access(args.cli, os.X_OK):
        sys.exit(f"hostile: {args.cli}: not an executable")
    args.workdir = args.workdir or tempfile.gettempdir()
    t0 = time.monotonic()
    CLI_PATH[0] = os.path.abspath(args.cli)
    record, records = make_record(os.path.abspath(args.cli), src, args.workdir)
    python = None
    if args.python:
        probe = subprocess.run([args.python, "-c", "import torch, transformers, safetensors, accelerate"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300, check=False)
        python = args.python if probe.returncode == 0 else None
    if not python:
        print("hostile: no --python with torch and transformers: the plan verify and class-plan signal cases are "
              "left out", file=sys.stderr)
    if args.gui and not os.access(args.gui, os.X_OK):
        sys.exit(f"hostile: {args.gui}: not an executable")
    args.gui = args.gui and os.path.abspath(args.gui)
    corpus = Corpus(src, args.seed, record, records, python, args.gui)
    cases = corpus.build(args.cases)
    if args.filter:
        keep = class_of(args.filter)
        cases = [c for c in cases if c.cls in keep]
    if args.list:
        for c in cases:
            argv = [os.fsdecode(a) for a in c.argv]
            flags = "".join(f for f, on in (("F", c.must_fail), ("P", c.must_pass)) if on)
            print(f"{c.cid} {CLASSES[c.cls]:<15} {flags:<2} {' '.join(shlex.quote(a[:120]) for a in argv)}"
                  + (f"   # {c.note}" if c.note else ""))
        print(f"{len(cases)} cases")
        return 0
    runner = Runner(args)
    results = runner.run_all(cases)
    wall = time.monotonic() - t0

    # summary
    print(f"{'class':<19} {'cases':>5} {'pass':>5} {'fail':>5}  {'max RSS MB':>10} {'max s':>6}  failures by reason")
    for k, name in CLASSES.items():
        rs = [r for r in results if r.case.cls == k]
        if not rs:
            continue
        fails = [r for r in rs if r.reason]
        by: dict[str, int] = {}
        for r in fails:
            by[r.reason] = by.get(r.reason, 0) + 1
        print(f"{k:>2} {name:<16} {len(rs):>5} {len(rs) - len(fails):>5} {len(fails):>5}  "
              f"{max(r.rss_mb for r in rs):>10.0f} {max(r.seconds for r in rs):>6.1f}  "
              + " ".join(f"{a}:{b}" for a, b in sorted(by.items())))
    slow = [r for r in results if r.case.cls == 14]
    for r in slow:
        print(f"   slowness: {r.case.cid} {r.case.note}: {r.seconds:.1f} s, rc {r.rc}, {r.rss_mb:.0f} MB")
    fails = [r for r in results if r.reason]
    if fails:
        print("\nfailures:")
        for r in fails:
            print(f"FAIL {r.case.cid} [{CLASSES[r.case.cls]}] {r.reason}: {r.detail}"
                  + (f"   ({r.case.note})" if r.case.note else ""))
            print(f"  $ {r.cmd[:600]}{' ...' if len(r.cmd) > 600 else ''}")
            print(f"  rc {r.rc}, {r.seconds:.1f} s, {r.rss_mb:.0f} MB; stderr: "
                  f"{r.stderr_tail.decode('utf-8', 'replace').strip()!r}")
    n_sig = sum(r.reason in ("signal", "sanitizer") for r in results)
    n_to = sum(r.reason == "timeout" for r in results)
    n_mem = sum(r.reason == "memory" for r in results)
    n_fig = sum(r.reason == "figures" for r in results)
    print(f"\nwall time {wall:.0f} s, {args.jobs} jobs, seed {args.seed}")
    print(f"hostile: {len(results)} cases, {n_sig} signals, {n_to} timeouts, {n_mem} over memory, "
          f"{n_fig} wrong figures, {len(fails)} failures")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"cases": len(results), "failures": len(fails), "wall_s": wall, "seed": args.seed,
                       "results": [{"id": r.case.cid, "class": CLASSES[r.case.cls], "cmd": r.cmd, "rc": r.rc,
                                    "reason": r.reason, "detail": r.detail, "seconds": round(r.seconds, 3),
                                    "rss_mb": round(r.rss_mb, 1), "must_fail": r.case.must_fail,
                                    "note": r.case.note,
                                    "stderr_tail": r.stderr_tail.decode("utf-8", "replace")} for r in results]},
                      fh, indent=1)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
