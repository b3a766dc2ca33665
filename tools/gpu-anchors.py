#!/usr/bin/env python3
"""Same-GPU anchors for tools/gpu-check: PyTorch's figures for the shapes
bench_cuda measures (Llama-3.1-8B, bf16), so each of our figures can be read
as a ratio measured in the same run. A measurement aid, not a dependency:
gpu-check runs it only where `import torch` works. Prints one line per figure:
  anchor NAME VALUE UNIT
With --table PATH it also times each op kind the simulator prices over a
sweep of sizes (the GEMMs of Llama-3.1-8B at the 16 token counts of the
Vidur tables, decode attention over batch x context, causal prefill) and
writes them as rows of tests/sim/data/h200_op_times.csv's format, for
tools/fit-curves.py --h200-table PATH to fit the H200's curves from."""
import csv
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except Exception as e:  # no torch: nothing to compare with
    print(f"anchors: PyTorch not available ({e})")
    sys.exit(0)

if not torch.cuda.is_available():
    print("anchors: PyTorch sees no CUDA device")
    sys.exit(0)

dev = torch.device("cuda")
torch.manual_seed(0)
H, I, L, HEADS, KV, D, V = 4096, 14336, 32, 32, 8, 128, 128256


def ms(fn, reps=20, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


def say(name, value, unit):
    print(f"anchor {name} {value:.3f} {unit}", flush=True)


def bf16(*shape):
    return torch.randn(*shape, device=dev, dtype=torch.bfloat16) * 0.02


# GEMMs of one layer at 4096 tokens.
x = bf16(4096, H)
flops = 0.0
total_ms = 0.0
for name, n, k in [("qkv", 6144, H), ("o", H, H), ("gate_up", 2 * I, H), ("down", H, I)]:
    w = bf16(n, k)
    a = x if k == H else bf16(4096, k)
    t = ms(lambda: a @ w.t())
    say(f"gemm_{name}_4096_tflops", 2 * 4096 * n * k / t / 1e9, "TFLOP/s")
    flops += 2 * 4096 * n * k
    total_ms += t
say("gemm_layer_4096_tflops", flops / total_ms / 1e9, "TFLOP/s")
del x

# The same GEMMs in fp8 (E4M3 x E4M3 -> bf16 on the fp8 tensor cores,
# torch._scaled_mm with per-tensor scales), beside bench_cuda's fp8 W8A8
# table; where this PyTorch or GPU has no fp8 matmul it says so.
try:
    flops = 0.0
    total_ms = 0.0
    one = torch.ones((), device=dev, dtype=torch.float32)
    for name, n, k in [("qkv", 6144, H), ("o", H, H), ("gate_up", 2 * I, H), ("down", H, I)]:
        a8 = bf16(4096, k).to(torch.float8_e4m3fn)
        w8 = bf16(n, k).to(torch.float8_e4m3fn)
        t = ms(lambda: torch._scaled_mm(a8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
        say(f"gemm_fp8_{name}_4096_tflops", 2 * 4096 * n * k / t / 1e9, "TFLOP/s")
        flops += 2 * 4096 * n * k
        total_ms += t
        del a8, w8
    say("gemm_fp8_layer_4096_tflops", flops / total_ms / 1e9, "TFLOP/s")
except Exception as e:
    print(f"anchors: no fp8 matmul here ({e})")

# A decode step's weight reads: every layer's GEMVs and the LM head, batch 1
# and 64 (GEMMs only: the weights / HBM roofline's part).
layers = [(bf16(6144, H), bf16(H, H), bf16(2 * I, H), bf16(H, I)) for _ in range(L)]
head = bf16(V, H)


def gemv_step(xb):
    h = xb
    for qkv, o, gu, down in layers:
        h2 = h @ qkv.t()
        h = h2[:, :H] @ o.t()
        g = h @ gu.t()
        h = (F.silu(g[:, :I]) * g[:, I:]) @ down.t()
    return h @ head.t()


for batch in (1, 64):
    xb = bf16(batch, H)
    say(f"decode_gemms_b{batch}_ms", ms(lambda: gemv_step(xb), reps=10), "ms")
    try:
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            gemv_step(xb)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g):
            gemv_step(xb)
        say(f"decode_gemms_b{batch}_graph_ms", ms(lambda: g.replay(), reps=10), "ms")
    except Exception as e:
        print(f"anchors: CUDA graph capture failed ({e})")
del layers, head

# Decode attention (dense K/V, SDPA picks its kernel): bytes of K and V.
for seqs, ctx in ((32, 4096), (1, 32768), (256, 1024), (64, 2048)):
    q = bf16(seqs, HEADS, 1, D)
    k = bf16(seqs, KV, ctx, D)
    v = bf16(seqs, KV, ctx, D)
    t = ms(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
    say(f"decode_attention_{seqs}x{ctx}_gbps", 2 * seqs * KV * ctx * D * 2 / t / 1e6, "GB/s")
    del q, k, v

# Prefill attention, causal, 32 heads.
for ctx in (2048, 8192):
    q = bf16(1, HEADS, ctx, D)
    k = bf16(1, KV, ctx, D)
    v = bf16(1, KV, ctx, D)
    t = ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True), reps=10)
    say(f"prefill_attention_{ctx}_causal_tflops", 2 * 2 * HEADS * ctx * ctx / 2 * D / t / 1e9, "TFLOP/s")
    del q, k, v

# Small kernels.
for rows in (1, 8192):
    xr = torch.randn(rows, H, device=dev)
    w = torch.ones(H, device=dev)
    say(f"rmsnorm_f32_{rows}_us", ms(lambda: F.rms_norm(xr, (H,), w, 1e-5)) * 1e3, "us")
for rows in (1, 256):
    logits = torch.randn(rows, V, device=dev)
    say(f"argmax_{rows}x{V}_us", ms(lambda: torch.argmax(logits, dim=-1)) * 1e3, "us")


# The sweep for the simulator's curves (--table PATH): rows of
# gpu,model,tp,op,batch,tokens,context,measured_ms,source as
# tests/sim/data/*_op_times.csv, times of PyTorch's kernels (cuBLAS GEMMs,
# SDPA attention) back to back, the way a serving engine runs them.
if "--table" in sys.argv:
    path = sys.argv[sys.argv.index("--table") + 1]
    name = torch.cuda.get_device_name().replace(",", " ")
    source = f"gpu-anchors.py torch {torch.__version__} on {name} {time.strftime('%Y-%m-%d')}"
    rows = []
    tokens_list = (1, 4, 16, 32, 64, 96, 128, 192, 256, 384, 512, 1024, 1536, 2048, 3072, 4096)
    for op, n, k in (("qkv_proj", 6144, H), ("o_proj", H, H), ("gate_up_proj", 2 * I, H), ("down_proj", H, I)):
        w = bf16(n, k)
        for t in tokens_list:
            a = bf16(t, k)
            rows.append([op, 1, t, 0, ms(lambda: a @ w.t())])
        del w
    head = bf16(V, H)
    for b in (1, 4, 16, 32, 64, 128, 256):
        a = bf16(b, H)
        rows.append(["lm_head", b, 1, 0, ms(lambda: a @ head.t())])
    del head
    for b in (1, 4, 16, 64, 256):
        for c in (512, 2048, 8192):
            if b * c > 256 * 4096:
                continue
            q = bf16(b, HEADS, 1, D)
            k = bf16(b, KV, c, D)
            v = bf16(b, KV, c, D)
            rows.append(["attn_decode", b, 1, c, ms(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))])
            del q, k, v
    for t in (128, 512, 1024, 2048, 4096, 8192):
        q = bf16(1, HEADS, t, D)
        k = bf16(1, KV, t, D)
        v = bf16(1, KV, t, D)
        rows.append(["attn_prefill", 1, t, 0,
                     ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True), reps=10)])
        del q, k, v
    with open(path, "w", newline="") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(["gpu", "model", "tp", "op", "batch", "tokens", "context", "measured_ms", "source"])
        for op, b, t, c, t_ms in rows:
            out.writerow(["h200", "llama-3.1-8b", 1, op, b, t, c, round(t_ms, 6), source])
    print(f"anchors: {len(rows)} op times written to {path}")
