#!/usr/bin/env python3
"""Checks that TP Studio's plan export loads in Hugging Face Transformers' DistributedConfig.

  python3 scripts/check_export.py TPSTUDIO_CLI MODEL [MODEL ...]

For each model: `tpstudio-cli plan export MODEL --tp 2`, then DistributedConfig(**json.load(f)) and
DistributedConfig.from_dict(...); every style must be registered in ALL_PARALLEL_STYLES. Exits 77
(ctest's skip code) when transformers is not installed, 1 on any failure.
"""
import json
import subprocess
import sys

try:
    from transformers.distributed import DistributedConfig
    import transformers.distributed.expert_parallel  # noqa: F401  (registers EP styles)
    from transformers.distributed.tensor_parallel import ALL_PARALLEL_STYLES
except Exception as e:  # not installed, or a version without transformers.distributed
    print(f"SKIP: transformers with DistributedConfig is not importable ({e})")
    sys.exit(77)


def main():
    cli, models = sys.argv[1], sys.argv[2:]
    failures = 0
    for model in models:
        out = subprocess.run([cli, "plan", "export", model, "--tp", "2"], capture_output=True, text=True)
        if out.returncode != 0:
            print(f"FAIL {model}: export exited {out.returncode}: {out.stderr.strip()}")
            failures += 1
            continue
        d = json.loads(out.stdout)
        cfg = DistributedConfig(**d)
        cfg2 = DistributedConfig.from_dict(d)
        unknown = [s for s in d["tp_plan"].values() if s not in ALL_PARALLEL_STYLES]
        if cfg.tp_size != 2 or cfg.tp_plan != d["tp_plan"] or cfg2.tp_plan != d["tp_plan"] or unknown:
            print(f"FAIL {model}: tp_size={cfg.tp_size} unknown styles={unknown}")
            failures += 1
            continue
        print(f"ok   {model}: {len(d['tp_plan'])} keys accepted by DistributedConfig")
    print(f"{len(models) - failures} passed, {failures} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
