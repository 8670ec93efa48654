#!/usr/bin/env python3
"""A tp_plan checked against Hugging Face Transformers' own tensor parallelism.

  tp_verify.py probe
  python -c "$(cat tp_verify.py)" class-plan MODEL_TYPE   (as TP Studio runs it: nothing written)
  tp_verify.py verify --cli TPSTUDIO_CLI --model SRC --tp T [--plan P] [--reduce auto|yes|no]
                      [--batch B] [--seq S] [--json OUT] [--name TEXT]
  tp_verify.py audit  --cli TPSTUDIO_CLI --repo ROOT [--max-tp 4] [--only FILE@MODEL:T,...]
                      [--fixtures-tp 2,4] [--families F,...] [--json OUT]

`tpstudio-cli plan verify` runs `verify` with the Python the user names; ctest runs `audit`, which
verifies, in one torchrun per tp size shared by every job:
- every shipped plan (plans/index.json) at every tp size it claims up to --max-tp, on a
  depth-reduced random-weight copy of its catalog model;
- every fixture family (tests/fixtures/models/F, Transformers' own tiny checkpoints) at each
  --fixtures-tp (default 2,4; "" for none), with its default plan and each of its shipped plans
  (plans/F/*.json, tp_size and the ep_size of an ep_plan set to T), on the fixture's weights and
  prompt. A default plan the planner refuses at T (heads that do not split) is reported and not
  compared; a shipped plan it refuses must be refused by Transformers too; every family needs at
  least one plan compared;
- the model types of ARCHITECTURES (planned, not run by the engine: their collectives only) at
  each --fixtures-tp, on a reduced copy of their tests/fixtures/architectures config (not with
  --families).

For each (model, plan, T):
1. The model: SRC is a folder with config.json, or a config.json. Transformers makes a copy of it
   when it has no safetensors weights or more than 1 GiB of them (--reduce auto), or always (yes):
   one layer of each kind the model has (attention type, rope or NoPE, dense or MoE), every width
   cut to 48 + (width mod 48), the hidden size then rounded up to a multiple of the heads (so that every T <= 4, 8 and 16 divides it exactly when it divides the
   real one), head sizes 16 (MLA: nope 16, rope 8, v 16), head, KV-head and expert counts and top-k
   as they are, windows and chunks at most 8, fp32; weights drawn from a fixed seed and saved by
   save_pretrained. No code from the model folder is run (no trust_remote_code).
2. `tpstudio-cli plan export` writes the complete plan (defaults + edits) as Transformers loads it;
   `plan preview --dtype f32 --logits all --json` predicts its collectives for B x S; `run` runs it
   on the engine and dumps the logits.
3. Transformers runs the exported plan: `torch.distributed.run --nproc-per-node T` (CPU, gloo),
   from_pretrained with DistributedConfig(**plan), one forward over the same token ids, every
   collective it issues on every rank recorded at the dispatcher (a TorchDispatchMode over the c10d
   and functional-collective ops, as torch's CommDebugMode counts them), with its tensors' bytes.
4. Per collective kind: Transformers' count on every rank must equal the preview's, and its bytes the
   preview's, in nccl-tests' "size": all_reduce the tensor, all_gather the gathered output,
   reduce_scatter the input, all_to_all every rank's send buffer summed (the whole exchange; the
   preview's per-expert counts, E int32 per rank, are per rank). The engine's logits must be within
   1e-4 relative (max |d| / max |logit|) of Transformers'. The engine's own collectives (its run
   record's communication spans on rank 0, per kind) must be the preview's counts too.

A plan with `sequence_parallel` keys runs in Transformers 5.24 as plain TP (its SequenceParallel takes
each rank's whole input as its shard, as the planner warns); its collectives are compared with the
preview of the plan without those keys, and said so; the engine runs it as Megatron's TP+SP, so its
own collectives are compared with the preview of the plan as written.

Exit codes: 0 every check holds, 1 a mismatch or an error (named), 77 (ctest's skip code, `audit`
only) without torch, transformers, safetensors and accelerate.
"""
import argparse
import concurrent.futures
import glob
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

PACKAGES = ("torch", "transformers", "safetensors", "accelerate")
TOLERANCE = 1e-4
REDUCE_ABOVE = 1 << 30  # bytes of safetensors above which --reduce auto makes a copy


class Failure(Exception):
    """A message for the user: the run stops with exit 1."""


def missing_packages():
    import importlib.util
    return [p for p in PACKAGES if importlib.util.find_spec(p) is None]


def class_plan(model_type):
    """One JSON line: the default plans of MODEL_TYPE's config class and *ForCausalLM class in this Python's
    Transformers (for a model type TP Studio does not know), or {"error": …}. Only Transformers' own classes are
    looked at: nothing from a model folder is imported."""
    def pairs(plan):
        return [[str(k), str(v)] for k, v in (plan or {}).items()]
    try:
        import transformers
        from transformers import CONFIG_MAPPING
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    except ImportError as e:
        print(json.dumps({"error": f"{sys.executable} cannot import transformers ({e})"}))
        return 1
    version = f"Transformers {transformers.__version__}"
    if model_type not in CONFIG_MAPPING:
        print(json.dumps({"error": f"{version} at {sys.executable} has no model_type '{model_type}' either"}))
        return 1
    cls = CONFIG_MAPPING[model_type]
    head_name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type)
    head = getattr(transformers, head_name, None) if head_name else None
    if not getattr(cls, "base_model_tp_plan", None):
        print(json.dumps({"error": f"{cls.__name__} of {version} at {sys.executable} has no base_model_tp_plan"}))
        return 1
    print(json.dumps({"origin": f"{cls.__name__} of {version} at {sys.executable}",
                      "base_model_tp_plan": pairs(cls.base_model_tp_plan),
                      "base_model_ep_plan": pairs(getattr(cls, "base_model_ep_plan", None)),
                      "head_tp_plan": pairs(getattr(head, "_tp_plan", None))}))
    return 0


def probe():
    missing = missing_packages()
    if missing:
        print(f"{sys.executable} lacks {', '.join(missing)}: install torch, transformers, safetensors and accelerate "
              f"(scripts/python-requirements.txt pins the versions TP Studio is tested with), or name another Python")
        return 1
    import torch
    import transformers
    try:
        from transformers.distributed import DistributedConfig  # noqa: F401
    except ImportError:
        print(f"transformers {transformers.__version__} has no transformers.distributed.DistributedConfig "
              f"(Transformers 5.x has it; TP Studio is tested with the version in scripts/python-requirements.txt)")
        return 1
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    return 0


# --- the depth-reduced random-weight copy --------------------------------------------------------

def narrow(x):
    return 48 + x % 48


def layer_kinds(cfg):
    """The index of the first layer of each kind (attention type, rope, dense or MoE), two at least."""
    d = cfg
    mt = d["model_type"]
    # Nemotron-H: num_hidden_layers is the length of layers_block_type, the key its layer_types is stored under;
    # LongCat-Flash: num_layers layers of two sublayers each.
    n = d["num_hidden_layers"] if "num_hidden_layers" in d else d["num_layers"] if "num_layers" in d else len(d["layers_block_type"])

    def kind(i):
        k = []
        for key in ("layer_types", "layers_block_type", "mlp_layer_types", "indexer_types"):
            if isinstance(d.get(key), list):
                k.append(d[key][i])
        if isinstance(d.get("no_rope_layers"), list):
            k.append(d["no_rope_layers"][i])
        if isinstance(d.get("attn_layer_indices"), list):  # Bamba: the attention layers among Mamba ones
            k.append(i in d["attn_layer_indices"])
        if d.get("num_kv_shared_layers"):  # Gemma 4: the last layers reuse keys and values
            k.append(i >= n - d["num_kv_shared_layers"])
        if isinstance(d.get("per_layer_config"), dict):  # a layer's own sizes
            k.append(json.dumps(d["per_layer_config"].get(i, d["per_layer_config"].get(str(i))), sort_keys=True))
        if mt == "deepseek_v3":
            k.append(i >= d.get("first_k_dense_replace", 0))
        elif mt == "qwen3_moe":
            k.append(i not in (d.get("mlp_only_layers") or []) and (i + 1) % max(d.get("decoder_sparse_step", 1), 1) == 0)
        elif mt == "llama4_text":
            k.append(i in (d.get("moe_layers") or []))
        elif mt == "inkling2_loop_text":  # in the loop or not
            k.append(d["loop_layer_index_start"] <= i < d["loop_layer_index_end"])
        return tuple(k)
    seen, keep = set(), []
    for i in range(n):
        if kind(i) not in seen:
            seen.add(kind(i))
            keep.append(i)
    while len(keep) < min(2, n):  # two layers at least: a residual stream that crosses a layer
        keep = sorted(set(keep) | {min(set(range(n)) - set(keep))})
    return keep


def reduced_config(src_path):
    """The reduced copy's config (a Transformers config object) from a config.json."""
    from transformers import AutoConfig
    with open(src_path, "rb") as f:
        raw = json.loads(f.read().decode("utf-8"))
    if not isinstance(raw, dict) or not isinstance(raw.get("model_type"), str):
        raise Failure(f"{src_path}: no 'model_type' string; Transformers cannot build it")
    raw.pop("quantization_config", None)  # random fp32 weights are not quantized
    raw.pop("auto_map", None)             # never the folder's own code
    try:
        config = AutoConfig.for_model(**raw)
    except Exception as e:
        raise Failure(f"{src_path}: Transformers cannot read it: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    if getattr(config, "text_config", None) is not None and raw["model_type"] in ("gemma3", "llama4"):
        config = config.text_config  # the causal LM the planner describes
    d = config.to_dict()
    mt = d["model_type"]
    if mt == "dory":  # its to_dict lists each layer as an attention and an mlp block, the counts doubled
        d["layer_types"] = d["layer_types"][::2]
        d.update({key: d[key] // 2 for key in ("num_hidden_layers", "n_input_layers", "n_recurrent_layers", "n_output_layers")})
    keep = layer_kinds(d)
    for key in ("layer_types", "layers_block_type", "mlp_layer_types", "no_rope_layers", "intermediate_size",
                "activation_sparsity_pattern", "indexer_types"):
        if isinstance(d.get(key), list):
            d[key] = [d[key][i] for i in keep]
    if mt == "deepseek_v3":
        d["first_k_dense_replace"] = sum(1 for i in keep if i < d.get("first_k_dense_replace", 0))
    if mt == "qwen3_moe":
        step = max(d.get("decoder_sparse_step", 1), 1)
        d["mlp_only_layers"] = [j for j, i in enumerate(keep) if i in (d.get("mlp_only_layers") or []) or (i + 1) % step]
        d["decoder_sparse_step"] = 1
    if mt == "llama4_text":
        d["moe_layers"] = [j for j, i in enumerate(keep) if i in (d.get("moe_layers") or [])]
    if isinstance(d.get("attn_layer_indices"), list):
        d["attn_layer_indices"] = [j for j, i in enumerate(keep) if i in d["attn_layer_indices"]]
    if mt == "inkling2_loop_text":  # the loop's bounds among the kept layers; blocks of one layer keep them multiples
        d["loop_layer_index_start"], d["loop_layer_index_end"] = (
            sum(1 for i in keep if i < d[key]) for key in ("loop_layer_index_start", "loop_layer_index_end"))
        d["n_layers_per_attn_res_block"] = 1
        d.pop("loop_config", None)  # its bounds, already in the fields above, would win again
    if d.get("num_kv_shared_layers"):
        d["num_kv_shared_layers"] = sum(1 for i in keep if i >= d["num_hidden_layers"] - d["num_kv_shared_layers"])
    if isinstance(d.get("per_layer_config"), dict):
        plc = {int(i): v for i, v in d["per_layer_config"].items()}
        d["per_layer_config"] = {j: plc[i] for j, i in enumerate(keep) if i in plc}
    d["num_hidden_layers"] = len(keep)
    if mt == "hrm_text":  # num_hidden_layers counts the stacks' layer runs: at most two layers a stack, every cycle run
        keep = list(range(min(d["num_layers_per_stack"], 2)))
        d["num_layers_per_stack"] = len(keep)
        d["num_hidden_layers"] = len(keep) * d["H_cycles"] * (d["L_cycles"] + 1)
    if mt == "longcat_flash":  # its num_hidden_layers counts sublayers (twice num_layers)
        d["num_layers"] = d.pop("num_hidden_layers")
    if mt == "dory":  # the kept layers run once each, as input layers
        d.update(n_input_layers=len(keep), n_recurrent_layers=0, n_output_layers=0)
    for key in ("hidden_size", "intermediate_size", "moe_intermediate_size", "intermediate_size_mlp", "vocab_size",
                "q_lora_rank", "kv_lora_rank", "shared_expert_intermediate_size"):
        if isinstance(d.get(key), int) and d[key] > 0:
            d[key] = narrow(d[key])
        elif isinstance(d.get(key), list):  # one a layer (Gemma 3n's intermediate_size)
            d[key] = [narrow(v) for v in d[key]]
    if mt in ("deepseek_v3", "longcat_flash"):  # LongCat-Flash's rotary embedding is head_dim wide: the rope head
        d.update(qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, qk_head_dim=24, head_dim=8)
    elif mt == "dots3_note_text":  # MLA: head_dim is the rotary fraction's base, a sliding layer's nope + rope
        pass
    elif d.get("head_dim"):
        d["head_dim"] = 16
    else:  # the head size is hidden / heads
        d["hidden_size"] = 16 * d["num_attention_heads"]
    if isinstance(d.get("unpadded_vocab_size"), int):  # Inkling 2: lm_head's rows, fewer than the padded vocabulary
        d["unpadded_vocab_size"] = max(1, d["vocab_size"] - 8)
    heads = d["num_attention_heads"]
    d["hidden_size"] = -(-d["hidden_size"] // heads) * heads  # Transformers wants a multiple of the heads
    for key in ("sliding_window", "attention_chunk_size"):
        if isinstance(d.get(key), int):
            d[key] = min(d[key], 8)
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        v = d.get(key)
        if isinstance(v, list):
            d[key] = [t for t in v if t < d["vocab_size"]] or None
        elif isinstance(v, int) and v >= d["vocab_size"]:
            d[key] = None
    d["torch_dtype"] = d["dtype"] = "float32"
    d.pop("transformers_version", None)
    return type(config)(**{k: v for k, v in d.items() if k not in ("model_type",)}), keep


def make(src_path, out_dir, seed=1234):
    import torch
    from transformers import AutoModelForCausalLM
    config, keep = reduced_config(src_path)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    # Weights of unit scale, norms and biases drawn too (their defaults are ones and zeros), so that a
    # missing, doubled or misplaced one changes the logits and routing has no near-ties.
    with torch.no_grad():
        for name, p in model.named_parameters():
            last = name.rsplit(".", 2)[-2] if "." in name else name
            if "norm" in last or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.2)
            elif p.dim() == 2:
                p.normal_(0.0, p.shape[1] ** -0.5)
            else:
                p.normal_(0.0, 0.1)
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.normal_(0.0, 0.1)
    model.save_pretrained(out_dir, safe_serialization=True)
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(out_dir, extra)):
            os.unlink(os.path.join(out_dir, extra))
    return {"layers": keep, "hidden_size": config.hidden_size, "vocab_size": config.vocab_size,
            "parameters": sum(p.numel() for p in model.parameters())}


# --- Transformers' TP run (under torchrun) --------------------------------------------------------

def die_with_parent(sig):
    """Linux: `sig` comes to this process when its parent ends, however it ends (SIGKILL included)."""
    try:
        import ctypes
        import signal
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(sig), 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:  # the parent was gone before the request
            signal.raise_signal(sig)
    except (OSError, AttributeError):
        pass


def stop_on_hangup(owner_dir=None):
    """SIGTERM, SIGHUP and SIGQUIT (and the parent's death, which sends SIGTERM) stop the driver as Ctrl-C
    does: as the leader of its process group (tpstudio-cli plan verify starts it so), it passes SIGINT to
    the group (torchrun, the ranks, the engine's processes), then removes its temporary folders, and the
    parent's (`owner_dir`: the embedded script's, which a killed tpstudio-cli leaves; one it still
    removes itself is gone already, which it does not mind). The parent's death is not told by getppid():
    each of a multi-threaded parent's threads that dies sends the signal, and the children are only
    reparented away from the process when its last thread has died."""
    import signal
    OWNER[:] = [owner_dir, False]

    def handler(sig, frame):
        OWNER[1] = True
        remove_owner_dir()
        if os.getpgrp() == os.getpid():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            os.killpg(os.getpgrp(), signal.SIGINT)
            signal.signal(signal.SIGINT, signal.default_int_handler)
        raise KeyboardInterrupt
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, handler)
    die_with_parent(signal.SIGTERM)


OWNER = [None, False]  # the parent's folder, and whether a stop signal came (stop_on_hangup)


def remove_owner_dir():
    """The parent's folder, once a stop signal came (the parent may be gone and cannot remove it)."""
    owner_dir, signalled = OWNER
    if owner_dir and signalled and os.path.basename(owner_dir).startswith("tpstudio-verify-"):
        import shutil
        shutil.rmtree(owner_dir, ignore_errors=True)


def worker(jobs_path, out_dir):
    import signal
    die_with_parent(signal.SIGKILL)  # torchrun killed: no rank runs on
    import datetime
    import torch
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor
    from torch.utils._python_dispatch import TorchDispatchMode
    from transformers import AutoModelForCausalLM
    from transformers.distributed import DistributedConfig

    def nbytes(x):
        if isinstance(x, torch.Tensor):
            return x.numel() * x.element_size()
        if isinstance(x, (list, tuple)):
            return sum(nbytes(y) for y in x)
        return 0

    # op name → (kind, which argument holds the bytes nccl-tests calls "size", factor)
    OPS = {
        "allreduce_": ("all_reduce", 0), "all_reduce": ("all_reduce", 0), "all_reduce_": ("all_reduce", 0),
        "allreduce_coalesced_": ("all_reduce", 0), "all_reduce_coalesced": ("all_reduce", 0),
        "allgather_": ("all_gather", 0), "_allgather_base_": ("all_gather", 0),
        "all_gather_into_tensor": ("all_gather", "gathered"), "all_gather_into_tensor_out": ("all_gather", "out"),
        "allgather_into_tensor_coalesced_": ("all_gather", 0),
        "reduce_scatter_": ("reduce_scatter", 1), "_reduce_scatter_base_": ("reduce_scatter", 1),
        "reduce_scatter_tensor": ("reduce_scatter", 0), "reduce_scatter_tensor_out": ("reduce_scatter", 0),
        "alltoall_": ("all_to_all", 1), "alltoall_base_": ("all_to_all", 1), "all_to_all_single": ("all_to_all", 0),
        "broadcast_": ("broadcast", 0), "broadcast": ("broadcast", 0), "reduce_": ("reduce", 0),
        "gather_": ("gather", 1), "scatter_": ("scatter", 1), "send": ("send", 0), "recv_": ("recv", 0),
    }

    class Collectives(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            # Modes run before tensor subclasses: handing a DTensor op back lets DTensor desugar it
            # into its collectives first, which then come here (as CommDebugMode does).
            if any(issubclass(t, DTensor) for t in types):
                return NotImplemented
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if func.namespace in ("c10d", "_c10d_functional", "c10d_functional"):
                name = func._schema.name.split("::")[-1]
                if name in OPS:
                    kind, where = OPS[name]
                    if where == "gathered":  # functional all_gather: the input times the group size
                        size = nbytes(args[0]) * int(args[1])
                    elif where == "out":
                        size = nbytes(kwargs.get("out", out))
                    else:
                        size = nbytes(args[where])
                    first = args[0][0] if isinstance(args[0], (list, tuple)) and args[0] else args[0]
                    integer = isinstance(first, torch.Tensor) and not first.is_floating_point()
                    self.calls.append({"kind": kind, "op": name, "bytes": size, "integer": integer})
            return out

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    rank = dist.get_rank()
    with open(jobs_path) as f:
        jobs = json.load(f)
    results = []
    for job in jobs:
        try:
            with open(job["plan"]) as f:
                plan = json.load(f)
            model = AutoModelForCausalLM.from_pretrained(job["model"], dtype=torch.float32,
                                                         distributed_config=DistributedConfig(**plan)).eval()
            ids = torch.tensor(job["tokens"]).reshape(job["batch"], job["seq"])
            mode = Collectives()
            with torch.no_grad(), mode:
                logits = model(ids).logits
            result = {"calls": mode.calls}
            if rank == 0:
                result["logits"] = logits.reshape(-1).float().tolist()
            del model
        except Exception as e:  # Transformers refuses the plan, or fails running it
            result = {"error": f"{type(e).__name__}: {e}".splitlines()[0][:400]}
        results.append(result)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(results, f)
    dist.destroy_process_group()


# --- the driver -----------------------------------------------------------------------------------

def cli(cmd, what, timeout=600):
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failure(f"{what}: tpstudio-cli took more than {timeout} s")
    if run.returncode != 0:
        msg = (run.stderr.strip() or run.stdout.strip() or f"exit {run.returncode}").splitlines()
        raise Failure(f"{what}: {' / '.join(msg[:3])[:600]}")
    return run.stdout


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def available_memory():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 1 << 62


def has_weights(folder):
    files = [f for f in os.listdir(folder) if f.endswith(".safetensors")] if os.path.isdir(folder) else []
    for f in files:
        if not os.path.isfile(os.path.join(folder, f)):
            raise Failure(f"{os.path.join(folder, f)}: not a readable file (a link to nothing, or a folder)")
    return files, sum(os.path.getsize(os.path.join(folder, f)) for f in files)


def predicted(preview):
    """Per kind: (count, bytes) of one forward, from `plan preview --json`."""
    out = {}
    for c in preview.get("collectives", []):
        n, b = out.get(c["kind"], (0, 0))
        out[c["kind"]] = (n + c["count"], b + c["count"] * c["bytes"])
    return out


def observed(ranks, tp):
    """Per kind: (counts per rank, bytes in nccl-tests' size) of Transformers' forward."""
    out = {}
    for r, res in enumerate(ranks):
        for call in res["calls"]:
            counts, size = out.setdefault(call["kind"], ([0] * tp, [0, 0]))
            counts[r] += 1
            if call["kind"] == "all_to_all" and not call["integer"]:
                size[0] += call["bytes"]  # the rows: the whole exchange, every rank's send buffer
            elif r == 0:  # the per-expert counts (integers, E per rank) are per rank, as the rest
                size[0] += call["bytes"]
    return out


def compare(pred, obs, tp):
    """Rows (kind, predicted count, observed counts, predicted bytes, observed bytes, ok)."""
    rows = []
    for kind in sorted(set(pred) | set(obs)):
        pc, pb = pred.get(kind, (0, 0))
        oc, ob = obs.get(kind, ([0] * tp, [0, 0]))
        ok = all(c == pc for c in oc) and sum(ob) == pb
        rows.append({"kind": kind, "predicted_count": pc, "observed_counts": oc, "predicted_bytes": pb,
                     "observed_bytes": sum(ob), "ok": ok})
    return rows


def human(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def tokens_for(vocab, count):
    return [(i * 7919 + 13) % vocab for i in range(count)]


class Job:
    def __init__(self, name, source, plan, tp, reduce, batch, seq, tokens=None, default=False, family=None):
        self.name, self.source, self.plan, self.tp = name, source, plan, tp
        self.reduce, self.batch, self.seq = reduce, batch, seq
        self.tokens = tokens   # the prompt (a fixture's); else tokens_for()
        self.family = family   # the fixture family, whose jobs must compare at least one plan
        self.default = default  # the model's default plan: a refusal of it at this T is not compared
        self.model = None      # the folder Transformers and the engine load
        self.model_note = ""
        self.error = None
        self.refused = None    # the planner's refusal, which Transformers must share
        self.skipped = None    # why it was not compared (not a failure)
        self.engine_refused = None  # why the engine does not run it (its preview is still compared)
        self.result = None


def prepare_models(jobs, work, python):
    """Each job's model folder: the source itself, or its reduced copy (made once per source)."""
    made, to_make = {}, {}
    for job in jobs:
        src = job.source
        folder = src if os.path.isdir(src) else os.path.dirname(os.path.abspath(src))
        config = os.path.join(folder, "config.json") if os.path.isdir(src) else src
        files, size = has_weights(folder)
        reduce = job.reduce == "yes" or (job.reduce == "auto" and (not files or size > REDUCE_ABOVE))
        if not reduce:
            if not files:
                job.error = f"{folder}: no safetensors weights, and --reduce no"
            elif size * job.tp * 2 > available_memory():  # each rank may hold the whole model while it loads
                job.error = (f"{folder}: {human(size)} of weights on {job.tp} CPU ranks needs about "
                             f"{human(size * job.tp * 2)}, more than the {human(available_memory())} available; "
                             f"--reduce auto or yes verifies a reduced copy")
            job.model, job.model_note = folder, f"its own weights ({human(size)})"
            continue
        key = os.path.abspath(config)
        if key not in made:
            out = os.path.join(work, f"model{len(made)}")
            made[key] = out
            to_make[key] = out
        job.model = made[key]
        job.config = key
    if to_make:
        spec = os.path.join(work, "make.json")
        with open(spec, "w") as f:
            json.dump(to_make, f)
        run = subprocess.run([python, os.path.abspath(__file__), "make", spec], capture_output=True, text=True,
                             timeout=1800)
        notes = {}
        for line in run.stdout.splitlines():
            if line.startswith("{"):
                notes.update(json.loads(line))
        for job in jobs:
            if getattr(job, "config", None) in to_make:
                note = notes.get(job.config)
                if note is None:
                    job.error = "Transformers could not make the reduced copy: " + (run.stderr.strip().splitlines() or ["?"])[-1][:400]
                elif "error" in note:
                    job.error = note["error"]
                else:
                    job.model_note = (f"a reduced copy made by Transformers: layers {note['layers']} of the original, "
                                      f"hidden {note['hidden_size']}, vocab {note['vocab_size']}, "
                                      f"{note['parameters']:,} random parameters")


def engine_counts(record):
    """Per kind: the collectives of the engine's run, from its record's comm spans on rank 0."""
    with open(record) as f:
        spans = json.load(f)["runs"][-1]["spans"]
    out = {}
    for s in spans:
        if s["kind"] == "comm" and s["rank"] == 0:
            out[s["op"]] = out.get(s["op"], 0) + 1
    return out


def engine_side(job, cli_path, work):
    """Export, preview and run the plan on the engine."""
    tp, d = job.tp, os.path.join(work, f"job{id(job)}")
    os.makedirs(d, exist_ok=True)
    args = [cli_path, "plan", "export", job.model, "--tp", str(tp)] + (["--plan", job.plan] if job.plan else [])
    try:
        exported = json.loads(cli(args, "plan export"))
    except Failure as e:
        if job.default:  # heads or experts that do not split over T: not compared
            job.skipped = f"the planner refuses the default plan at T={tp}: {e}"
        elif job.tokens is not None:  # a fixture's shipped plan: Transformers must refuse it too
            job.refused, job.plan_path = str(e), job.plan
        else:
            raise
        return
    job.plan_path = os.path.join(d, "plan.json")
    with open(job.plan_path, "w") as f:
        json.dump(exported, f)
    sp = {k for k, v in exported.get("tp_plan", {}).items() if v == "sequence_parallel"}
    expect_path = job.plan_path
    if sp:  # Transformers 5.24 runs it as plain TP: compare with the plan without those keys
        expect_path = os.path.join(d, "plan-without-sp.json")
        with open(expect_path, "w") as f:
            json.dump(dict(exported, tp_plan={k: v for k, v in exported["tp_plan"].items() if k not in sp}), f)
    job.sequence_parallel = sorted(sp)
    shape = ["--tp", str(tp), "--batch", str(job.batch), "--seq", str(job.seq)]
    preview = json.loads(cli([cli_path, "plan", "preview", job.model, "--plan", expect_path, "--dtype", "f32",
                              "--logits", "all", "--json"] + shape, "plan preview"))
    if not preview.get("valid", True):
        raise Failure("plan preview: the plan is invalid at T=%d" % tp)
    job.predicted = predicted(preview)
    if sp:  # the engine runs the plan as written (TP+SP): its own preview
        preview = json.loads(cli([cli_path, "plan", "preview", job.model, "--plan", job.plan_path, "--dtype", "f32",
                                  "--logits", "all", "--json"] + shape, "plan preview"))
    job.engine_predicted = {k: n for k, (n, _) in predicted(preview).items()}
    if job.tokens is None:
        with open(os.path.join(job.model, "config.json")) as f:
            cfg = json.load(f)
        vocab = cfg.get("vocab_size") or cfg.get("text_config", {}).get("vocab_size")
        job.tokens = tokens_for(vocab, job.batch * job.seq)
    logits, record = os.path.join(d, "engine-logits.json"), os.path.join(d, "engine-record.json")
    tokens = os.path.join(d, "tokens.txt")  # a file: B x S ids may be more than a command line holds
    with open(tokens, "w") as f:
        f.write(",".join(map(str, job.tokens)))
    try:
        cli([cli_path, "run", "--model", job.model, "--plan", job.plan_path, "--dtype", "f32", "--logits", "all",
             "--warmup", "0", "--iters", "1", "--tokens-file", tokens, "--dump-logits", logits,
             "--json", record] + shape, "run (the engine)")
    except Failure as e:
        # A model type TP Studio plans but does not run: the preview's collectives are still compared
        # with Transformers' own run; the engine's logits and collectives are not.
        if "the engine does not run model_type" not in str(e):
            raise
        job.engine_refused = str(e).split("tpstudio-cli run: ")[-1].split(" (it runs")[0]
        return
    with open(logits) as f:
        job.engine_logits = json.load(f)["logits"]
    job.engine_calls = engine_counts(record)


def transformers_side(jobs, tp, python, work):
    """One torchrun for every job at this T; each job's per-rank results."""
    d = tempfile.mkdtemp(prefix=f"tp{tp}-", dir=work)
    spec = os.path.join(d, "jobs.json")
    with open(spec, "w") as f:
        json.dump([{"model": j.model, "plan": j.plan_path, "tokens": j.tokens, "batch": j.batch, "seq": j.seq}
                   for j in jobs], f)
    # TMPDIR inside this run's folder: torchrun's own temporary folder goes with it, even when torchrun
    # is killed (an interrupt) before it could remove it.
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", TMPDIR=d)
    env.pop("PYTHONPATH", None)
    cmd = [python, "-m", "torch.distributed.run", "--nproc-per-node", str(tp), "--master-addr", "127.0.0.1",
           "--master-port", str(free_port()), os.path.abspath(__file__), "worker", spec, d]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300 + 120 * len(jobs), env=env, cwd=d)
    ranks = []
    for r in range(tp):
        path = os.path.join(d, f"rank{r}.json")
        if not os.path.exists(path):
            tail = [l for l in run.stderr.splitlines() if "Error" in l] or run.stderr.strip().splitlines() or ["no output"]
            raise Failure(f"torchrun at T={tp} exited {run.returncode} without rank {r}'s results: {tail[-1][:400]}")
        with open(path) as f:
            ranks.append(json.load(f))
    for i, job in enumerate(jobs):
        job.ranks = [ranks[r][i] for r in range(tp)]


def rel(a, b):
    if len(a) != len(b):
        return float("inf")
    return max(abs(x - y) for x, y in zip(a, b)) / max(max(abs(y) for y in b), 1e-30)


def judge(job):
    errors = [r["error"] for r in job.ranks if "error" in r]
    if job.refused:
        if errors:
            job.skipped = f"the planner and Transformers both refuse it: {job.refused[:200]} / {errors[0][:200]}"
        else:
            job.error = f"the planner refuses a plan Transformers runs: {job.refused}"
        return
    if errors:
        job.error = "Transformers: " + errors[0]
        return
    obs = observed(job.ranks, job.tp)
    rows = compare(job.predicted, obs, job.tp)
    if job.engine_refused:
        job.result = {"collectives": rows, "engine_not_run": job.engine_refused, "ok": all(r["ok"] for r in rows)}
        return
    for r in rows:
        r["engine_count"] = job.engine_calls.get(r["kind"], 0)
    # The engine's own collectives against the preview of the plan it ran (for a sequence-parallel
    # plan, the plan as written; Transformers' against the plan without those keys).
    engine_ok = job.engine_calls == job.engine_predicted
    err = rel(job.engine_logits, job.ranks[0]["logits"])
    job.result = {"collectives": rows, "logits_rel_error": err, "engine_collectives": job.engine_calls,
                  "engine_collectives_ok": engine_ok,
                  "ok": all(r["ok"] for r in rows) and err <= TOLERANCE and engine_ok}


def report(job, out):
    head = f"{job.name} at T={job.tp}, B={job.batch}, S={job.seq}, fp32"
    if job.error:
        print(f"FAIL {head}: {job.error}", file=out)
        return
    if job.skipped:
        print(f"--   {head}: not compared: {job.skipped}", file=out)
        return
    res = job.result
    print(f"{'ok  ' if res['ok'] else 'FAIL'} {head}: {job.model_note}", file=out)
    if job.sequence_parallel:
        print(f"     sequence_parallel on {', '.join(job.sequence_parallel)}: Transformers runs it as plain TP, so its "
              f"collectives are compared with the preview of the plan without those keys", file=out)
    print(f"     {'collective':<15} {'predicted':>9} {'observed':>9}  {'predicted bytes':>16} {'observed bytes':>16}", file=out)
    for r in res["collectives"]:
        counts = r["observed_counts"]
        if "engine_not_run" in res:
            r.setdefault("engine_count", "-")
        oc = str(counts[0]) if len(set(counts)) == 1 else "/".join(map(str, counts))
        print(f"     {r['kind']:<15} {r['predicted_count']:>9} {oc:>9}  {human(r['predicted_bytes']):>16} "
              f"{human(r['observed_bytes']):>16}  {'ok' if r['ok'] else 'MISMATCH'}", file=out)
    if not res["collectives"]:
        print("     no collectives, predicted or observed", file=out)
    if "engine_not_run" in res:
        print(f"     engine: not run ({res['engine_not_run']}); the preview's collectives are compared", file=out)
        return
    if not res["engine_collectives_ok"]:
        print(f"     MISMATCH the engine's run issued {res['engine_collectives']}, its preview "
              f"{job.engine_predicted}", file=out)
    print(f"     logits, engine vs Transformers: {res['logits_rel_error']:.1e} relative "
          f"({'ok' if res['logits_rel_error'] <= TOLERANCE else 'above'} {TOLERANCE:g})", file=out)


def run_jobs(jobs, cli_path, python, work):
    prepare_models(jobs, work, python)

    def one(job):
        try:
            engine_side(job, cli_path, work)
        except Failure as e:
            job.error = str(e)
    # The engine side is a few short tpstudio-cli processes per job, each job in its own folder: one
    # job per core at a time (the audit's ~200 jobs took most of its time one after another).
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(one, [j for j in jobs if not j.error]))
    by_tp = {}
    for job in jobs:
        if not job.error and not job.skipped:
            by_tp.setdefault(job.tp, []).append(job)
    for tp, group in sorted(by_tp.items()):
        try:
            transformers_side(group, tp, python, work)
        except Failure as e:
            for job in group:
                job.error = str(e)
            continue
        for job in group:
            judge(job)
    for job in jobs:
        report(job, sys.stdout)
        sys.stdout.flush()
    return all(not j.error and (j.skipped or j.result["ok"]) for j in jobs)


def as_json(jobs):
    return [{"name": j.name, "tp": j.tp, "batch": j.batch, "seq": j.seq, "model": j.model_note,
             "sequence_parallel": getattr(j, "sequence_parallel", []), "error": j.error, "not_compared": j.skipped,
             **(j.result or {})} for j in jobs]


# Model types TP Studio plans but does not run, one or more of each kind of block they are composed of
# (tests/fixtures/architectures): post norms and whole-projection q/k norms, parallel attention + MLP,
# GLM-4's sandwich norms with a fused gate_up_proj, an ungated MLP with biases and LayerNorms,
# MoE with a gated shared expert, a block named block_sparse_moe, DeepSeek's sparse blocks on
# standard attention, dense MLA, MLA MoE with a softmax router, and a sequence mixer (Qwen3-Next's
# gated delta rule, its projections gathered, beside gated-query attention). Their default plans'
# collectives are compared with Transformers' own run (the engine's logits are not: it refuses them).
ARCHITECTURES = ["granite", "olmo2", "cohere", "glm4", "starcoder2", "qwen2_moe", "granitemoe", "glm4_moe", "minicpm3",
                 "deepseek_v2", "deepseek_v4", "qwen3_next"]


def architecture_jobs(repo, tps, work):
    """The ARCHITECTURES at each T, with their default plans on a reduced copy of their fixture config."""
    jobs = []
    for mt in ARCHITECTURES:
        with open(os.path.join(os.path.abspath(repo), "tests", "fixtures", "architectures", mt + ".json")) as f:
            config = json.load(f)["config"]
        folder = os.path.join(work, "arch-" + mt)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config, f)
        for tp in tps:
            jobs.append(Job(f"the default plan on {mt} (tests/fixtures/architectures)", folder, None, tp, "yes", 1, 16,
                            default=True, family=mt))
    return jobs


def fixture_jobs(repo, tps, families, work):
    """Every fixture family at each T: its default plan and each of its shipped plans."""
    repo = os.path.abspath(repo)  # torchrun's workers run in another folder
    models = os.path.join(repo, "tests", "fixtures", "models")
    found = sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(models, "*", "logits.json")))
    unknown = set(families) - set(found)
    if unknown:
        raise Failure(f"--families names {', '.join(sorted(unknown))}, not among the fixtures ({', '.join(found)})")
    jobs = []
    for fam in [f for f in found if not families or f in families]:
        folder = os.path.join(models, fam)
        with open(os.path.join(folder, "logits.json")) as f:
            ref = json.load(f)
        for tp in tps:
            jobs.append(Job(f"the default plan on fixture {fam}", folder, None, tp, "no", ref["batch"], ref["seq"],
                            tokens=ref["tokens"], default=True, family=fam))
            for path in sorted(glob.glob(os.path.join(repo, "plans", fam.removesuffix("_text"), "*.json"))):
                with open(path) as f:
                    plan = dict(json.load(f), tp_size=tp)
                if "ep_plan" in plan:  # expert parallelism on the same ranks
                    plan["ep_size"] = tp
                written = os.path.join(work, f"{fam}-{tp}-{os.path.basename(path)}")
                with open(written, "w") as f:
                    json.dump(plan, f)
                jobs.append(Job(f"{os.path.relpath(path, repo)} on fixture {fam}", folder, written, tp, "no",
                                ref["batch"], ref["seq"], tokens=ref["tokens"], family=fam))
    return jobs


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "worker":
        return worker(sys.argv[2], sys.argv[3])
    if len(sys.argv) >= 2 and sys.argv[1] == "make":
        import signal
        die_with_parent(signal.SIGKILL)
        with open(sys.argv[2]) as f:
            todo = json.load(f)
        for src, out in todo.items():
            try:
                print(json.dumps({src: make(src, out)}), flush=True)
            except Exception as e:  # noqa: BLE001 - every failure is reported for its model
                msg = str(e) if isinstance(e, Failure) else f"{src}: {type(e).__name__}: {str(e).splitlines()[-1][:300]}"
                print(json.dumps({src: {"error": msg}}), flush=True)
        return 0
    if len(sys.argv) >= 2 and sys.argv[1] == "probe":
        import signal
        die_with_parent(signal.SIGKILL)
        return probe()
    if len(sys.argv) == 3 and sys.argv[1] == "class-plan":
        import signal
        die_with_parent(signal.SIGKILL)  # asked by a tpstudio-cli or GUI that may end first
        return class_plan(sys.argv[2])

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    v = sub.add_parser("verify")
    v.add_argument("--model", required=True)
    v.add_argument("--plan")
    v.add_argument("--tp", type=int, required=True)
    v.add_argument("--reduce", choices=("auto", "yes", "no"), default="auto")
    v.add_argument("--name")
    v.add_argument("--owner-dir", help=argparse.SUPPRESS)  # tpstudio-cli's folder, removed if it dies
    a = sub.add_parser("audit")
    a.add_argument("--repo", required=True)
    a.add_argument("--max-tp", type=int, default=4)
    a.add_argument("--only", default="", help="FILE@MODEL:T,... (plans/index.json's file and model ids); "
                                               "no fixture family unless --fixtures-tp is given")
    a.add_argument("--fixtures-tp", help="tp sizes for the fixture families (default 2,4; '' for none)")
    a.add_argument("--families", default="", help="F,... : only these fixture families")
    for p in (v, a):
        p.add_argument("--cli", required=True)
        p.add_argument("--batch", type=int, default=1)
        p.add_argument("--seq", type=int, default=16)
        p.add_argument("--json")
    o = ap.parse_args()
    stop_on_hangup(getattr(o, "owner_dir", None))
    if not (1 <= o.batch <= 64 and 1 <= o.seq <= 4096):
        print("tp_verify: --batch is 1..64 and --seq 1..4096 (a check, not a benchmark)", file=sys.stderr)
        return 1
    missing = missing_packages()
    if missing:
        msg = f"{sys.executable} lacks {', '.join(missing)}"
        if o.mode == "audit":
            print(f"SKIP: {msg}")
            return 77
        print(f"tp_verify: {msg}", file=sys.stderr)
        return 1
    if o.mode == "verify":
        if not 1 <= o.tp <= 16:
            print("tp_verify: --tp is 1..16 here: Transformers runs one CPU process per rank", file=sys.stderr)
            return 1
        jobs = [Job(o.name or f"{o.plan or 'the default plan'} on {o.model}", o.model, o.plan, o.tp, o.reduce,
                    o.batch, o.seq)]
    else:
        with open(os.path.join(o.repo, "plans", "index.json")) as f:
            index = json.load(f)["plans"]
        only = set(filter(None, o.only.split(",")))
        jobs = []
        for entry in index:
            for tp in entry["tp"]:
                key = f"{entry['file']}@{entry['model']}:{tp}"
                if tp > o.max_tp or (only and key not in only):
                    continue
                src = os.path.join(o.repo, "resources", "catalog", entry["model"] + ".json")
                jobs.append(Job(f"plans/{entry['file']} on {entry['model']}", src,
                                os.path.join(o.repo, "plans", entry["file"]), tp, "yes", o.batch, o.seq))
        if only and len(jobs) != len(only):
            print(f"tp_verify: --only names {len(only)} entries, plans/index.json has {len(jobs)} of them", file=sys.stderr)
            return 1
        fixtures_tp = o.fixtures_tp if o.fixtures_tp is not None else ("" if only else "2,4")
        try:
            fixtures_tp = [int(t) for t in fixtures_tp.split(",") if t.strip()]
        except ValueError:
            print(f"tp_verify: --fixtures-tp {o.fixtures_tp!r} is not a list of tp sizes", file=sys.stderr)
            return 1
        if any(not 1 <= t <= 16 for t in fixtures_tp):
            print("tp_verify: --fixtures-tp sizes are 1..16 here: Transformers runs one CPU process per rank", file=sys.stderr)
            return 1
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="tp-verify-") as work:
        try:
            if o.mode == "audit":
                families = [f for f in o.families.split(",") if f]
                jobs += fixture_jobs(o.repo, fixtures_tp, families, work)
                if not families:
                    jobs += architecture_jobs(o.repo, fixtures_tp, work)
            ok = run_jobs(jobs, os.path.abspath(o.cli), sys.executable, work)
        except Failure as e:
            print(f"tp_verify: {e}", file=sys.stderr)
            return 1
        for fam in sorted({j.family for j in jobs if j.family}):
            if not any(j.family == fam and j.result and j.result["ok"] for j in jobs):
                ok = False
                print(f"FAIL fixture {fam}: no plan was compared at any T (every one refused or failing)")
    if o.json:  # whole or not at all: a temporary file beside it, renamed over it
        tmp = f"{o.json}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump({"schema": "tpstudio.verify/1", "tolerance": TOLERANCE, "results": as_json(jobs)}, f, indent=1)
        os.replace(tmp, o.json)
    failed = sum(1 for j in jobs if j.error or not (j.skipped or j.result["ok"]))
    skipped = sum(1 for j in jobs if j.skipped and not j.error)
    print(f"{len(jobs) - failed - skipped} passed, {failed} failed, {skipped} not compared ({time.time() - start:.0f} s)")
    return 1 if failed or not ok else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C: the temporary folders are gone, nothing was written
        print("tp_verify: interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as e:  # noqa: BLE001 - one line, never a traceback
        print(f"tp_verify: {type(e).__name__}: {str(e).splitlines()[0][:600] if str(e) else ''}", file=sys.stderr)
        sys.exit(1)
    finally:  # however it ended: a folder its dead parent left is not left behind
        remove_owner_dir()
