#!/usr/bin/env python3
"""PyTorch eager (Transformers, SDPA attention) on one device: the prefill forward, and greedy
decode with a DynamicCache after it (the inter-token latency: median of the steps, each ending with
its token on the host), of a catalog model with random weights, timed as the engine times itself.

  python3 scripts/gpu_vs_torch.py --model llama-3.1-8b --seq 512 [--decode 32] [--dtype bf16] [--iters 10] [--json]
  python3 scripts/gpu_vs_torch.py --dry-run      # a 2-layer copy of the model on the CPU: proves the script

scripts/gpu_check.py runs it beside `tpstudio-cli run --backend cuda` on the same GPU.
"""
import argparse
import inspect
import json
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def timed(model, ids, iters, warmup, sync):
    import torch
    times = []
    with torch.no_grad():
        for i in range(warmup + iters):
            sync()
            t0 = time.perf_counter()
            model(ids, use_cache=False)
            sync()
            if i >= warmup:
                times.append(time.perf_counter() - t0)
    return statistics.median(times)


def decode_itl(model, ids, steps, warmup, sync):
    """Median step of greedy decode after a prefill of `ids`, over `warmup` + 1 generations (the last timed)."""
    import torch
    cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    times = []
    with torch.no_grad():
        for _ in range(warmup + 1):
            out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
            cache, tok = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
            times = []
            for _ in range(steps):
                sync()
                t0 = time.perf_counter()
                out = model(input_ids=tok, use_cache=True, **{cache_kw: cache})
                tok = out.logits[:, -1].argmax(-1, keepdim=True)
                tok.cpu()  # the token on the host, as the engine's step ends
                times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--decode", type=int, default=32, help="greedy decode steps after the prompt")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"])
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--dry-run", action="store_true", help="2 layers, narrower, on the CPU")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM

    raw = json.loads((ROOT / "resources" / "catalog" / f"{a.model}.json").read_text())
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[a.dtype]
    if a.dry_run:
        raw.update(num_hidden_layers=2, hidden_size=256, intermediate_size=512, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=64, vocab_size=1000, bos_token_id=None, eos_token_id=None)
        a.seq, a.iters, a.warmup, a.decode = min(a.seq, 32), 2, 1, min(a.decode, 8)
    config = AutoConfig.for_model(**raw)
    device = "cpu" if a.dry_run or not torch.cuda.is_available() else "cuda"
    if device == "cpu" and not a.dry_run:
        print("gpu_vs_torch: no CUDA device visible to PyTorch", file=sys.stderr)
        return 1
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa").eval()
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    ids = torch.randint(0, config.vocab_size, (a.batch, a.seq), device=device)
    prefill = timed(model, ids, a.iters, a.warmup, sync)
    decode = decode_itl(model, ids, a.decode, 1, sync)
    out = {"torch": torch.__version__, "transformers": transformers.__version__, "device": device,
           "device_name": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
           "model": a.model, "dtype": a.dtype, "batch": a.batch, "seq": a.seq, "attention": "sdpa",
           "prefill_ms": prefill * 1e3, "decode_ms": decode * 1e3, "decode_steps": a.decode,
           "prefill_tokens_per_s": a.batch * a.seq / prefill, "dry_run": a.dry_run}
    if a.json:
        print(json.dumps(out))
    else:
        print(f"{a.model} {a.dtype} on {out['device_name']}: prefill {a.batch}x{a.seq} {out['prefill_ms']:.2f} ms, "
              f"decode step (ITL, {a.decode} steps after the prompt) {out['decode_ms']:.2f} ms (PyTorch {torch.__version__}, Transformers "
              f"{transformers.__version__}, sdpa)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
