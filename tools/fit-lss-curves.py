#!/usr/bin/env python3
"""GEMM and attention-prefill efficiency curves from LLMServingSim's vLLM kernel timings.

LLMServingSim (github.com/casys-kaist/LLMServingSim, MIT licence) publishes
per-layer times of vLLM 0.19 kernels measured on an RTX 4090 and an RTX PRO
6000 Blackwell Server (`profiler/perf/<GPU>/<model>/bf16/tp1/dense.csv` and
`attention.csv`, eager mode, CUDA timers). This script turns them into the
two curves a hardware profile names by FLOPs (docs/hardware.md):

- `gemm_curve`: the compute efficiency of the linear layers (qkv_proj,
  o_proj, gate_up_proj, down_proj) against the bf16 dense peak, from the
  points where the roofline calls the GEMM compute-bound (FLOPs / peak
  above weight bytes / bandwidth), the median of each half-decade of FLOPs;
  below the smallest such point a GEMM is memory-bound on these cards and
  the curve keeps the fixed kernel time form (eff = e0 x f / (f + peak x
  t0), t0 set so that it meets the first measured point).
- `attention_prefill`: vLLM's attention call for a prefill chunk (FLOPs
  as models/step_ops counts them: 4 x head_dim x q_heads per score pair,
  c x context + c(c+1)/2 pairs), the median of each half-decade.
- `attention_decode`: the call for a decode-only batch, a memory roof by
  the bytes models/step_ops counts (the K and V of every context token and
  the new ones, the queries and outputs), the median of each half-decade.

Reproduce (stdlib Python only):

  fetch github:casys-kaist/LLMServingSim (commit 5daddb2)
  tools/fit-lss-curves.py /work/.mirror/casys-kaist+LLMServingSim/repo

It prints the curves as JSON; the profiles carry them with this script
named in their source notes. With --table it also rewrites
tests/sim/data/lss_op_times.csv, the Llama-3.1-8B points the simulator's
op-cost test prices (tests/sim/op_costs_test.cpp): the linear layers at
1 to 2,048 tokens, prefill attention (chunks of 256 to 2,048 tokens, some
after cached ones), decode attention. With --check-mixed it prints, per
decode count, the median error of the simulator's model of a mixed step's
attention (one varlen call: the chunk's FLOPs plus the decodes' x 64, on the
fitted prefill-attention curve, plus the 4 us launch; docs/engines.md)
against vLLM's measured calls of every model timed on the card, without and
with the time per grid block it fits (the profiles' mixed_attention_block_ns).
"""
import csv
import io
import os
import json
import math
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from profile_curves import curve_at, half_decade_medians, with_small_sizes  # noqa: E402

COMMIT = "5daddb21a545658d5150b535712d0494584b5278"
GPUS = {  # bf16 dense peak, memory bandwidth: the profiles' own figures
    "RTX4090": ("rtx-4090", 165.2e12, 1008e9),
    "RTXPRO6000": ("rtx-pro-6000-blackwell-server", 483.6e12, 1597e9),
}
# The roofline adds the profile's kernel_launch_us to every op's time
# (sim/roofline_cost_model), so the curves hold the rest: the measured time
# less the launch, never below half of it.
LAUNCH_S = 4e-6


def busy(us):
    t = float(us) * 1e-6
    return max(t - LAUNCH_S, t / 2)
# model folder -> hidden, intermediate (0: MoE, no dense MLP), q heads, kv heads, head_dim
MODELS = {
    "meta-llama/Llama-3.1-8B": (4096, 14336, 32, 8, 128),
    "Qwen/Qwen3-32B": (5120, 25600, 64, 8, 128),
    "Qwen/Qwen3-30B-A3B-Instruct-2507": (2048, 0, 32, 4, 128),
}


def read_csv(repo, path):
    text = subprocess.run(["git", "-C", repo, "show", f"{COMMIT}:{path}"], capture_output=True, text=True)
    if text.returncode != 0:
        return None
    return list(csv.reader(io.StringIO(text.stdout)))[1:]


def linear_shapes(model):
    h, inter, q, kv, hd = MODELS[model]
    shapes = {"qkv_proj": (h, (q + 2 * kv) * hd), "o_proj": (q * hd, h)}
    if inter:
        shapes["gate_up_proj"] = (h, 2 * inter)
        shapes["down_proj"] = (inter, h)
    return shapes




def gemm_points(repo, gpu, peak, bandwidth):
    points = []
    for model in MODELS:
        rows = read_csv(repo, f"profiler/perf/{gpu}/{model}/bf16/tp1/dense.csv")
        if rows is None:
            continue
        shapes = linear_shapes(model)
        for layer, tokens, us in rows:
            if layer not in shapes:
                continue
            k, n = shapes[layer]
            m = int(tokens)
            flops, weight_bytes = 2.0 * m * k * n, 2.0 * k * n
            if flops / peak < weight_bytes / bandwidth:
                continue  # memory-bound: says nothing of the compute roof
            points.append((flops, flops / (busy(us) * peak)))
    return points




def attention_rows(repo, gpu):
    """(model's q heads, kv heads, head_dim, chunk, context, decodes, kv_len, us) of every timed attention call."""
    for model in MODELS:
        rows = read_csv(repo, f"profiler/perf/{gpu}/{model}/bf16/tp1/attention.csv")
        _, _, q, kv, hd = MODELS[model]
        for chunk, context, decodes, kv_len, us in rows or []:
            yield q, kv, hd, int(chunk), int(context), int(decodes), int(kv_len), us


def attention_points(repo, gpu, peak):
    points = []
    for q, _, hd, c, ctx, n, _, us in attention_rows(repo, gpu):
        if c == 0 or n != 0:
            continue  # prefill chunks alone
        flops = 4.0 * hd * q * (c * ctx + c * (c + 1) / 2)
        points.append((flops, flops / (busy(us) * peak)))
    return points


TABLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests/sim/data/lss_op_times.csv")
TABLE_TOKENS = (1, 16, 64, 256, 512, 1024, 2048)
TABLE_CHUNKS = ((256, 0), (512, 0), (1024, 0), (2048, 0), (512, 2048), (1024, 4096), (2048, 2048), (2048, 8192))
TABLE_DECODES = ((8, 512), (32, 2048), (64, 1024), (128, 512))


def write_table(repo):
    model = "meta-llama/Llama-3.1-8B"
    rows = []
    for gpu, (profile, _, _) in GPUS.items():
        source = f"LLMServingSim@{COMMIT[:7]} profiler/perf/{gpu}/{model}/bf16/tp1"
        for layer, tokens, us in read_csv(repo, f"profiler/perf/{gpu}/{model}/bf16/tp1/dense.csv"):
            if layer in linear_shapes(model) and int(tokens) in TABLE_TOKENS:
                rows.append([profile, "llama-3.1-8b", 1, layer, 1, int(tokens), 0, float(us) / 1e3, source + " dense.csv"])
        for chunk, context, decodes, kv, us in read_csv(repo, f"profiler/perf/{gpu}/{model}/bf16/tp1/attention.csv"):
            c, ctx, n, k = int(chunk), int(context), int(decodes), int(kv)
            if n == 0 and (c, ctx) in TABLE_CHUNKS:
                rows.append([profile, "llama-3.1-8b", 1, "attn_prefill", 1, c, ctx, float(us) / 1e3, source + " attention.csv"])
            if c == 0 and (n, k) in TABLE_DECODES:
                rows.append([profile, "llama-3.1-8b", 1, "attn_decode", n, 1, k, float(us) / 1e3, source + " attention.csv"])
    with open(TABLE, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["gpu", "model", "tp", "op", "batch", "tokens", "context", "measured_ms", "source"])
        for r in rows:
            w.writerow(r[:7] + [f"{r[7]:.5f}", r[8]])


# A mixed call's rows a card's KV cache can hold for one layer (Llama-3.1-8B
# on a 24 GB card keeps about 40k tokens): the profiler also timed batches
# of 128 decodes x 16k keys, whose times jump 3-4x past this, in a regime
# no deployment reaches.
MIXED_KEYS_LIMIT = 131072
# vLLM's FlashAttention-2 paged varlen kernel tiles each sequence's queries
# 64 rows at a time, over a grid of ceil(longest chunk / 64) tiles per
# sequence and query head (vllm-flash-attn, run_mha_fwd_splitkv_dispatch).
MIXED_TILE_ROWS = 64


def mixed_calls(repo, gpu, curves):
    """(priced seconds without the grid term, the decodes' grid blocks, measured seconds, decodes) of
    every mixed call (one chunk from an empty context and its decodes)."""
    profile, peak, bandwidth = GPUS[gpu]
    points = curves[profile]["attention_prefill"]
    for q, kv, hd, c, ctx, n, k, us in attention_rows(repo, gpu):
        if c == 0 or n == 0 or ctx != 0 or n * k > MIXED_KEYS_LIMIT:
            continue
        flops = 4.0 * hd * q * (c * (c + 1) / 2) + 4.0 * hd * q * n * (k + 1) * MIXED_TILE_ROWS
        compute = flops / (curve_at(points, flops) * peak)
        memory = n * k * 2 * kv * hd * 2 / (bandwidth * 0.85)  # the decodes' K and V, bf16
        blocks = n * q * math.ceil(c / MIXED_TILE_ROWS)
        yield max(compute, memory) + LAUNCH_S, blocks, float(us) * 1e-6, n


def fit_block_s(calls):
    """The time per grid block of a decode (the one tile that works and the
    ones past its single query row that exit at once), least squares on the
    relative error: t = priced + blocks x b."""
    num = sum(blocks / t * (1 - priced / t) for priced, blocks, t, _ in calls)
    den = sum((blocks / t) ** 2 for _, blocks, t, _ in calls)
    return num / den


def check_mixed(repo, curves):
    """Per card: the fitted time per grid block, and the median error per
    decode count of the mixed call priced without and with it."""
    for gpu, (profile, _, _) in GPUS.items():
        calls = list(mixed_calls(repo, gpu, curves))
        b = fit_block_s(calls)
        without, with_blocks = {}, {}
        for priced, blocks, t, n in calls:
            without.setdefault(n, []).append(priced / t - 1)
            with_blocks.setdefault(n, []).append((priced + blocks * b) / t - 1)
        med = lambda e: statistics.median(abs(x) for v in e.values() for x in v)
        print(f"{profile}: {b * 1e9:.2f} ns a grid block, {len(calls)} calls, median |error| "
              f"{med(without):.1%} -> {med(with_blocks):.1%}")
        for name, errors in (("  without", without), ("  with", with_blocks)):
            print(name + ": " + ", ".join(f"{n} decodes {statistics.median(e):+.0%}" for n, e in sorted(errors.items())))




def decode_points(repo, gpu, bandwidth):
    points = []
    for q, kv, hd, c, _, n, k, us in attention_rows(repo, gpu):
        if c != 0 or n == 0:
            continue  # decode-only batches
        byts = n * (k + 1) * 2 * kv * hd * 2 + n * 2 * kv * hd * 2 + n * 2 * q * hd * 2
        points.append((byts, byts / (busy(us) * bandwidth)))
    return points


def main():
    args = [a for a in sys.argv[1:] if a not in ("--table", "--check-mixed")]
    if len(args) != 1:
        sys.exit("usage: fit-lss-curves.py [--table] [--check-mixed] LLMSERVINGSIM_GIT_DIR")
    repo = args[0]
    if "--table" in sys.argv:
        write_table(repo)
    out = {}
    for gpu, (profile, peak, bandwidth) in GPUS.items():
        gemm = half_decade_medians(gemm_points(repo, gpu, peak, bandwidth))
        if not gemm:
            sys.exit(f"{repo}: no {gpu} dense.csv at {COMMIT}")
        gemm, t0 = with_small_sizes(gemm, peak)
        attention = half_decade_medians(attention_points(repo, gpu, peak))
        decode = half_decade_medians(decode_points(repo, gpu, bandwidth))
        out[profile] = {"gemm_curve": gemm, "gemm_fixed_us": round(t0 * 1e6, 2), "attention_prefill": attention,
                        "attention_decode": decode}
    if "--check-mixed" in sys.argv:
        check_mixed(repo, out)
        return
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
