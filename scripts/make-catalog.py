#!/usr/bin/env python3
"""Writes the catalog's representatives of the model kinds beyond the 12 families (resources/catalog/<id>.json).

  python3 scripts/make-catalog.py           # rewrite them (needs transformers)
  python3 scripts/make-catalog.py --check   # compare with the committed files (ctest catalog_is_transformers_own)

Each is the pinned Transformers' config class with its own defaults (`to_dict()`), the sizes the class
documents, plus `architectures` (its *ForCausalLM class) and dtype bfloat16 (what such models are served
in). The catalog names each after the class and the checkpoint its docstring points to; the defaults are
not always that checkpoint's sizes (GraniteConfig's are Llama-like), so the name says they are the class's.
Classes whose defaults do not make a model worth planning are left out: Glm4MoeConfig's (96 heads over 4096
without a head_dim: Transformers floors it to 42), DeepseekV2Config's (moe_intermediate_size 1407, odd).
Exit 1 naming the files that differ (--check), 77 without transformers (ctest's skip code).
"""
import json
import pathlib
import sys

try:
    import transformers
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
except ImportError as e:
    print(f"SKIP: transformers is needed ({e})")
    sys.exit(77)

OUT = pathlib.Path(__file__).resolve().parent.parent / "resources" / "catalog"

# Catalog id → model type: one of each kind of issue 34's groups (engine/src/model/catalog.cpp lists them too).
REPRESENTATIVES = {
    "olmo2-defaults": "olmo2",              # dense, norms after each block
    "granite-defaults": "granite",          # dense, Llama's tree with multipliers
    "qwen2-moe-defaults": "qwen2_moe",      # MoE on standard attention, a gated shared expert
    "deepseek-v32-defaults": "deepseek_v32",  # MLA + MoE + the sparse-attention indexer
    "deepseek-v4-defaults": "deepseek_v4",  # compressed attention, hyper-connections, hash routing
    "qwen3-next-defaults": "qwen3_next",    # gated delta rule beside attention
    "gemma3n-defaults": "gemma3n_text",     # AltUp, LAuReL, per-layer embeddings
}


def made(model_type):
    cls = CONFIG_MAPPING[model_type]
    d = cls().to_dict()
    d.pop("transformers_version", None)
    d["architectures"] = [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type]]
    d["dtype"] = "bfloat16"
    return json.dumps(d, sort_keys=True, indent=1) + "\n"


def main():
    check = sys.argv[1:] == ["--check"]
    if sys.argv[1:] and not check:
        sys.exit(f"usage: {sys.argv[0]} [--check]")
    bad = []
    for cid, model_type in REPRESENTATIVES.items():
        path = OUT / f"{cid}.json"
        text = made(model_type)
        if not check:
            path.write_text(text)
        elif not path.exists() or path.read_text() != text:
            bad.append(path.name)
            print(f"FAIL {path.name}: differs from {CONFIG_MAPPING[model_type].__name__}'s defaults")
    print(f"{len(REPRESENTATIVES)} catalog configs from transformers {transformers.__version__}"
          + (f", {len(bad)} differ" if check else " written"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
