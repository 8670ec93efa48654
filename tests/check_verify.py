#!/usr/bin/env python3
"""The test of the collective audit, and `plan verify` as a user runs it.

  check_verify.py TPSTUDIO_CLI REPO_ROOT

1. The audit of one shipped plan (plans/llama/default.json on the example at T=2) passes as it is,
   and fails, naming the kind, when `plan preview` is deliberately wrong: a CLI wrapper adds one to
   the all_reduce count, or doubles the all_gather bytes, of the preview's JSON.
2. `plan verify` passes on the example (catalog id) and on a Hub-style folder holding only a
   config.json (Qwen3-30B-A3B's: MoE), printing each kind with predicted and observed counts; its
   --json holds the same.
   `plan verify DIR/mycfg.json` verifies that file, not the folder's config.json.
3. `plan verify` with a Python that lacks torch, or that does not exist, exits 1 saying so.
4. A tree read from tensor names of a model type TP Studio does not know takes its class's default plans from
   TPSTUDIO_PYTHON's Transformers, saying where from; without them it says why it has none.

Exits 77 (ctest's skip code) without torch, transformers, safetensors and accelerate.
"""
import importlib.util
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

missing = [p for p in ("torch", "transformers", "safetensors", "accelerate") if importlib.util.find_spec(p) is None]
if missing:
    print(f"SKIP: {', '.join(missing)} missing in {sys.executable}")
    sys.exit(77)

cli, repo = map(os.path.abspath, sys.argv[1:3])
verify = os.path.join(repo, "scripts", "tp_verify.py")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


WRAPPER = '''#!{python}
# tpstudio-cli with a deliberately wrong plan preview: {what}
import json, subprocess, sys
run = subprocess.run([{cli!r}] + sys.argv[1:], capture_output=True, text=True)
out = run.stdout
if sys.argv[1:3] == ["plan", "preview"] and "--json" in sys.argv and run.returncode == 0:
    j = json.loads(out)
    group = next(c for c in j["collectives"] if c["kind"] == {kind!r})
    group[{field!r}] = {change}
    out = json.dumps(j)
sys.stdout.write(out)
sys.stderr.write(run.stderr)
sys.exit(run.returncode)
'''


def audit(work, wrapper=None, what=""):
    tool = cli
    if wrapper:
        kind, field, change = wrapper
        tool = os.path.join(work, f"cli-{kind}-{field}")
        with open(tool, "w") as f:
            f.write(WRAPPER.format(python=sys.executable, cli=cli, what=what, kind=kind, field=field,
                                   change=f"group[{field!r}] {change}"))
        os.chmod(tool, os.stat(tool).st_mode | stat.S_IXUSR)
    run = subprocess.run([sys.executable, verify, "audit", "--cli", tool, "--repo", repo,
                          "--only", "llama/default.json@example:2"], capture_output=True, text=True, timeout=900)
    return run.returncode, run.stdout + run.stderr


with tempfile.TemporaryDirectory() as work:
    rc, out = audit(work)
    check(rc == 0 and "1 passed, 0 failed" in out, "the audit of plans/llama/default.json on the example at T=2 passes")
    if rc != 0:
        print(out)
    for wrapper, what, line in ((("all_reduce", "count", "+ 1"), "one all_reduce too many",
                                 r"all_reduce\s+(\d+)\s+(\d+).*MISMATCH"),
                                (("all_gather", "bytes", "* 2"), "the all_gather bytes doubled",
                                 r"all_gather\s+(\d+)\s+(\d+).*MISMATCH")):
        rc, out = audit(work, wrapper, what)
        m = re.search(line, out)
        check(rc == 1 and m is not None and "0 passed, 1 failed" in out,
              f"a preview with {what} fails the audit, naming {wrapper[0]}")
        if wrapper[1] == "count" and m:
            check(int(m.group(1)) == int(m.group(2)) + 1, f"  predicted {m.group(1)} against observed {m.group(2)}")
        if rc != 1 or not m:
            print(out)

    # plan verify, as a user runs it
    js = os.path.join(work, "verify.json")
    run = subprocess.run([cli, "plan", "verify", "example", "--tp", "2", "--python", sys.executable, "--json", js],
                         capture_output=True, text=True, timeout=900)
    out = run.stdout + run.stderr
    check(run.returncode == 0 and re.search(r"all_reduce\s+\d+\s+\d+", out) is not None,
          "plan verify example --tp 2 passes and prints all_reduce with predicted and observed counts")
    if run.returncode != 0:
        print(out)
    else:
        res = json.load(open(js))["results"][0]
        kinds = {r["kind"]: r for r in res["collectives"]}
        check(res["logits_rel_error"] <= 1e-4 and {"all_reduce", "all_gather"} <= set(kinds)
              and all(r["ok"] for r in kinds.values()), "  its --json names every kind, all agreeing, logits within 1e-4")

    hub = os.path.join(work, "Qwen3-30B-A3B")
    os.mkdir(hub)
    shutil.copy(os.path.join(repo, "resources", "catalog", "qwen3-30b-a3b.json"), os.path.join(hub, "config.json"))
    run = subprocess.run([cli, "plan", "verify", hub, "--tp", "2", "--python", sys.executable],
                         capture_output=True, text=True, timeout=900)
    out = run.stdout + run.stderr
    check(run.returncode == 0 and "reduced copy" in out and re.search(r"all_reduce\s+\d+\s+\d+", out) is not None,
          "plan verify on a folder with config.json only (Qwen3-30B-A3B) verifies a reduced copy")
    check(sorted(os.listdir(hub)) == ["config.json"], "  and leaves the folder as it was")
    if run.returncode != 0:
        print(out)

    # Issue 40: a config file other than config.json is what is verified (its one layer, not the
    # folder's config.json with its two and their weights).
    other = os.path.join(work, "other")
    os.mkdir(other)
    for f in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(repo, "tests", "fixtures", "models", "llama", f), other)
    cfg = json.load(open(os.path.join(other, "config.json")))
    json.dump(dict(cfg, num_hidden_layers=1), open(os.path.join(other, "mycfg.json"), "w"))
    # Its preview's counts are the predicted ones, which Transformers must match: one run is enough;
    # the folder's config.json (two layers) predicts more all-reduces.
    folder = json.loads(subprocess.run([cli, "plan", "preview", other, "--tp", "2", "--json"], capture_output=True,
                                       text=True, timeout=120).stdout)["collective_counts"]["all_reduce"]
    run = subprocess.run([cli, "plan", "verify", os.path.join(other, "mycfg.json"), "--tp", "2", "--python", sys.executable],
                         capture_output=True, text=True, timeout=900)
    m = re.search(r"all_reduce\s+(\d+)\s+(\d+)", run.stdout)
    observed = int(m.group(2)) if m else None
    check(run.returncode == 0 and "reduced copy" in run.stdout and observed is not None and observed < folder,
          f"plan verify DIR/mycfg.json verifies mycfg.json (1 layer: {observed} all_reduce observed), not the "
          f"folder's config.json ({folder})")
    if run.returncode != 0:
        print(run.stdout + run.stderr)

    bare = os.path.join(work, "bare-python")
    with open(bare, "w") as f:
        f.write(f"#!/bin/sh\nexec {sys.executable} -I -S \"$@\"\n")  # no site-packages: no torch
    os.chmod(bare, 0o755)
    for python, expect in ((bare, "lacks torch"), (os.path.join(work, "no-such-python"), "cannot run the Python")):
        run = subprocess.run([cli, "plan", "verify", "example", "--tp", "2", "--python", python],
                             capture_output=True, text=True, timeout=120)
        check(run.returncode == 1 and expect in run.stderr, f"plan verify with {os.path.basename(python)}: exit 1, '{expect}'")
        if run.returncode != 1 or expect not in run.stderr:
            print(run.stdout + run.stderr)

    # 4. A model type TP Studio does not know, read from tensor names: its class's default plans from the
    # TPSTUDIO_PYTHON's Transformers (qwen2_vl_text: a text model no *ForCausalLM maps, so no lm_head key), said where
    # from; a model type that Python does not know either, or no such Python, leaves it without one, saying why.
    import torch
    from safetensors.torch import save_file
    unknown = os.path.join(work, "unknown-type")
    os.mkdir(unknown)
    fixture = json.load(open(os.path.join(repo, "tests", "fixtures", "architectures", "qwen2.json")))
    save_file({k: torch.zeros(v[0]) for k, v in fixture["state_dict"].items()}, os.path.join(unknown, "model.safetensors"))
    for model_type, python, expect in (
            ("qwen2_vl_text", sys.executable, "from Qwen2VLTextConfig of Transformers"),
            ("zz_future_lm", sys.executable, "has no model_type 'zz_future_lm' either"),
            ("qwen2_vl_text", os.path.join(work, "no-such-python"), "cannot run the Python")):
        json.dump(dict(fixture["config"], model_type=model_type), open(os.path.join(unknown, "config.json"), "w"))
        run = subprocess.run([cli, "inspect", unknown, "--json"], capture_output=True, text=True, timeout=300,
                             env=dict(os.environ, TPSTUDIO_PYTHON=python))
        j = json.loads(run.stdout) if run.returncode == 0 else {}
        said = any(expect in d.get("message", "") for d in j.get("diagnostics", []))
        planned = "model.layers.*.self_attn.q_proj" in j.get("default_tp_plan", {})
        ok = said and planned == (expect.startswith("from"))
        check(run.returncode == 0 and ok, f"inspect of a {model_type} tree with TPSTUDIO_PYTHON={os.path.basename(python)}: "
                                          f"'{expect}', {'the class' + chr(39) + 's default plan' if planned else 'no default plan'}")
        if not ok:
            print(run.stdout[:2000] + run.stderr)

print(f"{len(failures)} failed")
sys.exit(1 if failures else 0)
