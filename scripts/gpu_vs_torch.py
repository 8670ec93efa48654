#!/usr/bin/env python3
"""PyTorch eager (Transformers, SDPA attention) on one device: the prefill forward and one
decode-sized forward (one token per sequence, no cache) of a catalog model with random weights,
timed as the engine times itself (median of the timed iterations after warm-up).

  python3 scripts/gpu_vs_torch.py --model llama-3.1-8b --seq 512 [--dtype bf16] [--iters 10] [--json]
  python3 scripts/gpu_vs_torch.py --dry-run      # a 2-layer copy of the model on the CPU: proves the script

scripts/gpu_check.py runs it beside `tpstudio-cli run --backend cuda` on the same GPU.
"""
import argparse
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=1)
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
        a.seq, a.iters, a.warmup = min(a.seq, 32), 2, 1
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
    decode = timed(model, ids[:, :1], a.iters, a.warmup, sync)
    out = {"torch": torch.__version__, "transformers": transformers.__version__, "device": device,
           "device_name": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
           "model": a.model, "dtype": a.dtype, "batch": a.batch, "seq": a.seq, "attention": "sdpa",
           "prefill_ms": prefill * 1e3, "decode_ms": decode * 1e3,
           "prefill_tokens_per_s": a.batch * a.seq / prefill, "dry_run": a.dry_run}
    if a.json:
        print(json.dumps(out))
    else:
        print(f"{a.model} {a.dtype} on {out['device_name']}: prefill {a.batch}x{a.seq} {out['prefill_ms']:.2f} ms, "
              f"decode-sized forward {out['decode_ms']:.2f} ms (PyTorch {torch.__version__}, Transformers "
              f"{transformers.__version__}, sdpa)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
