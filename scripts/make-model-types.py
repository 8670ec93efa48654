#!/usr/bin/env python3
"""Writes resources/model_types.json: what the pinned Transformers says of every tensor-parallel causal LM.

  python3 scripts/make-model-types.py           # rewrite the committed file (needs torch + transformers)
  python3 scripts/make-model-types.py --check   # compare with the committed file (ctest model_types_are_transformers_own)

The model types are every `model_type` of CONFIG_MAPPING whose config class has a non-empty
base_model_tp_plan and which AutoModelForCausalLM maps (116 in Transformers 5.24). For each: its
config class, its *ForCausalLM class, the config class's base_model_tp_plan and base_model_ep_plan and
the head class's _tp_plan (as [key, style] pairs, in order), its attribute_map (aliases of keys), the
checkpoint renamings its conversion mapping applies on load (checkpoint_renames: legacy and original names), and its
declared defaults (its dataclass
fields' defaults, those of PreTrainedConfig's own fields only where it changes them, plus
`default_theta` as rope_theta): what a config.json that omits a key means.
Defaults that Transformers derives in __post_init__ (head_dim from hidden_size / heads, say) are
null here, as declared; TP Studio derives them as the config class does. Exit 1 naming the entries
that differ (--check), 77 without transformers (ctest's skip code).
"""
import dataclasses
import json
import math
import pathlib
import sys

try:
    import transformers
    from transformers import CONFIG_MAPPING
    from transformers.conversion_mapping import get_checkpoint_conversion_mapping
    from transformers.core_model_loading import Interleave, WeightConverter, WeightRenaming
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
except ImportError as e:
    print(f"SKIP: transformers is needed ({e})")
    sys.exit(77)

OUT = pathlib.Path(__file__).resolve().parent.parent / "resources" / "model_types.json"


def scalar_or_list(v):
    """JSON-able defaults only: finite numbers, strings, booleans, null and flat lists of them (Bamba's
    time_step_limit (0.0, inf) is left out: JSON has no infinity)."""
    def plain(x):
        return x is None or isinstance(x, (bool, int, str)) or (isinstance(x, float) and math.isfinite(x))
    return plain(v) or (isinstance(v, (list, tuple)) and all(plain(x) for x in v))


def pairs(plan):
    return [[k, v] for k, v in (plan or {}).items()]


def declared(cls, base):
    """A config class's declared JSON-able defaults; the base class's own fields only where it changes them."""
    defaults = {}
    for f in dataclasses.fields(cls):
        if f.name in base and f.default == base[f.name]:
            continue
        if f.default is not dataclasses.MISSING and scalar_or_list(f.default):
            defaults[f.name] = list(f.default) if isinstance(f.default, tuple) else f.default
    if "rope_theta" not in defaults and isinstance(getattr(cls, "default_theta", None), (int, float)):
        defaults["rope_theta"] = cls.default_theta
    return defaults


def describe():
    base = {f.name: f.default for f in dataclasses.fields(transformers.PreTrainedConfig)}
    types = {}
    for model_type in sorted(CONFIG_MAPPING.keys()):
        if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
            continue
        cls = CONFIG_MAPPING[model_type]
        if not getattr(cls, "base_model_tp_plan", None):
            continue
        defaults = declared(cls, base)
        head = getattr(transformers, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type])
        types[model_type] = {"config_class": cls.__name__,
                             "causal_lm_class": MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type],
                             "defaults": defaults,
                             # [key, style] pairs in the class's order (the order Transformers resolves them in)
                             "base_model_tp_plan": pairs(cls.base_model_tp_plan),
                             "base_model_ep_plan": pairs(getattr(cls, "base_model_ep_plan", None)),
                             "head_tp_plan": pairs(getattr(head, "_tp_plan", None)),
                             # alias → the name config.json stores (Mellum's num_experts is num_local_experts)
                             "attribute_map": dict(sorted(getattr(cls, "attribute_map", {}).items()))}
        # Parameters the loader de-interleaves along a dim after splitting the checkpoint's tensor (Inkling 2's w13_weight
        # → gate_up_proj): a plain split then keeps each rank's gate and up rows paired.
        # (As Transformers looks the root model up: its class's mapping first, else its model type's: GPT-NeoX's embed_out.)
        conversions = get_checkpoint_conversion_mapping(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type])
        if conversions is None:
            conversions = get_checkpoint_conversion_mapping(model_type) or []
        # The checkpoint's names the loader renames, in order (each renaming's sources [pattern, target]: Python regexes;
        # the first that matches replaces the first occurrence of its match, \1 its group). Subclasses with rules of
        # their own (PrefixChange, LayerPairCollapse, …) are left out: a tensor they would rename stays unmatched.
        renames = [[[source, t.target_patterns[0]] for source in t.source_patterns] for t in conversions
                   if type(t) is WeightRenaming and getattr(t, "scope_prefix", None) is None]
        if renames:
            types[model_type]["checkpoint_renames"] = renames
        interleaved = [[target, op.dim] for t in conversions if isinstance(t, WeightConverter)
                       for op in t.operations if isinstance(op, Interleave) and not op.inverse for target in t.target_patterns]
        if interleaved:
            types[model_type]["interleaved_on_load"] = interleaved
        # Sub-configs the class builds from their own class when config.json leaves them out (Phi-4-multimodal's
        # vision_config and audio_config): those classes' declared defaults.
        subs = {name: declared(sub, base) for name, sub in sorted((getattr(cls, "sub_configs", None) or {}).items())
                if defaults.get(name, "absent") is None and isinstance(sub, type)}
        if subs:
            types[model_type]["sub_config_defaults"] = subs
    return {"transformers": transformers.__version__, "model_types": types}


def dump(d):
    """One line per model type (diffs of a new Transformers version read per type)."""
    lines = [f" {json.dumps(t)}: {json.dumps(v, sort_keys=True)}" for t, v in sorted(d["model_types"].items())]
    return f'{{"transformers": {json.dumps(d["transformers"])}, "model_types": {{\n' + ",\n".join(lines) + "\n}}\n"


def main():
    made = describe()
    if sys.argv[1:] == ["--check"]:
        committed = json.loads(OUT.read_text())
        bad = [t for t in sorted(set(made["model_types"]) | set(committed["model_types"]))
               if made["model_types"].get(t) != committed["model_types"].get(t)]
        if made["transformers"] != committed["transformers"]:
            bad.insert(0, f"transformers {made['transformers']} vs committed {committed['transformers']}")
        for b in bad:
            print(f"FAIL {OUT.name}: {b} differs")
        print(f"{len(made['model_types'])} model types, {len(bad)} differ from {OUT}")
        return 1 if bad else 0
    if sys.argv[1:]:
        sys.exit(f"usage: {sys.argv[0]} [--check]")
    OUT.write_text(dump(made))
    print(f"{OUT}: {len(made['model_types'])} model types (transformers {made['transformers']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
