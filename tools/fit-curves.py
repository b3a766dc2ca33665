#!/usr/bin/env python3
"""Fits the roofline's named efficiency curves to Vidur's measured kernel times.

Vidur (github.com/microsoft/vidur, MIT licence) ships per-kernel times of
Llama-2-7B and 70B measured with CUDA timers on A100 and H100. This script
reads them, keeps a small table of the points the simulator's test checks
(tests/sim/data/vidur_op_times.csv), and fits, per GPU, the curves the
hardware profile names: GEMM compute efficiency by arithmetic intensity,
GEMM and elementwise memory efficiency by bytes, attention prefill by FLOPs
and decode by bytes. It prints the curves as profile JSON; the C++ test is
the judge of the result (this file mirrors the op sizes of models/step_ops
and the price of sim/roofline_cost_model only to fit).

Reproduce (stdlib Python only; a Vidur checkout at 7d47513 for the MLP
tables, and its commit e2d00e9 for the Llama-2-70B TP 2 attention table):

  V=/path/to/vidur/.git
  mkdir -p /tmp/vidur
  for g in a100 h100; do for m in 7b 70b; do
    git --git-dir=$V show 7d47513:data/profiling/compute/$g/meta-llama/Llama-2-$m-hf/mlp.csv \\
      > /tmp/vidur/${g}_llama-2-$m_mlp.csv; done; done
  git --git-dir=$V show e2d00e9:data/profiling/a100/attention.csv > /tmp/vidur/a100_llama-2-70b_attention.csv
  tools/fit-curves.py /tmp/vidur            # prints curves, rewrites the table

The H200's table (tests/sim/data/h200_op_times.csv) is rewritten from the
Nsight Compute CSVs of our first GPU session (h200-ncu-decode-b1.csv and
h200-ncu-b32.csv, in the folder given) and the SDPA figures below:

  tools/fit-curves.py --h200-ncu DIR        # rewrites that table, then fits

tools/gpu-check's anchors stage writes a denser sweep of the same ops
(PyTorch's kernels, $OUT/h200_op_times_torch.csv); its points are merged
into the table where it has none and PyTorch's host time did not set them:

  tools/fit-curves.py --h200-table h200_op_times_torch.csv

The Llama-2-7B A100 attention points are not in the git objects of the
Vidur repository (Git LFS); the rows used were read from a copy of that
file, sw5sh/cs378-assignment3@7ac2fe9 (same path), and are kept as they
are in tests/sim/data/vidur_a100_llama-2-7b_attention.csv.
"""
import csv
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TABLE = os.path.join(ROOT, "tests/sim/data/vidur_op_times.csv")
# Our own H200's kernels (cuBLAS GEMMs under Nsight Compute, attention
# through PyTorch's SDPA): the same columns, made by --h200-ncu.
H200_TABLE = os.path.join(ROOT, "tests/sim/data/h200_op_times.csv")
ATTN_7B = os.path.join(ROOT, "tests/sim/data/vidur_a100_llama-2-7b_attention.csv")

GPUS = {  # dense fp16 peak, HBM bandwidth (the profiles' own figures)
    "a100-80gb": (312e12, 2039e9),
    "h100-80gb": (989.4e12, 3350e9),
    "h200": (989.4e12, 4800e9),
}
MODELS = {  # hidden, intermediate, q heads, kv heads, head_dim
    "llama-2-7b": (4096, 11008, 32, 32, 128),
    "llama-2-70b": (8192, 28672, 64, 8, 128),
    "llama-3.1-8b": (4096, 14336, 32, 8, 128),
}
VOCAB = {"llama-2-7b": 32000, "llama-2-70b": 32000, "llama-3.1-8b": 128256}
CONFIGS = [("llama-2-7b", 1), ("llama-2-70b", 2), ("llama-2-70b", 4)]
TOKENS = [1, 4, 16, 32, 64, 96, 128, 192, 256, 384, 512, 1024, 1536, 2048, 3072, 4096]
# Vidur op -> ours; rmsnorm is vLLM's fused residual add + norm, two per
# layer, where Vidur times two norms and one add: half of the three.
MLP_OPS = {
    "qkv_proj": ["attn_pre_proj"],
    "o_proj": ["attn_post_proj"],
    "gate_up_proj": ["mlp_up_proj"],
    "down_proj": ["mlp_down_proj"],
    "silu_mul": ["mlp_act"],
    "rotary": ["attn_rope"],
    "rmsnorm": ["input_layernorm", "post_attention_layernorm", "add"],
}
# Family -> the ops whose measured points fit its curves. GEMMs have a
# curve per op kind: cuBLAS picks tiles by shape and each kind is its own
# shape family (qkv and o_proj about square, gate_up wide, down deep), so
# one curve for all four splits their differences; the curves fitted to all
# four ("gemm") price the GEMMs without a table of their own (LM head, MoE).
FAMILIES = {
    "gemm": ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"],
    "gemm_qkv_proj": ["qkv_proj"],
    "gemm_o_proj": ["o_proj"],
    "gemm_gate_up_proj": ["gate_up_proj"],
    "gemm_down_proj": ["down_proj"],
    "gemm_lm_head": ["lm_head"],
    "norm": ["rmsnorm"],
    "silu_mul": ["silu_mul"],
    "rotary": ["rotary"],
    "attn_prefill": ["attn_prefill"],
    "attn_decode": ["attn_decode"],
}
# Family -> the ops its curves price (where not the ops it is fitted to).
PRICES = {"gemm": ["lm_head", "moe_router", "moe_gate_up_proj", "moe_down_proj"]}
ACT = 2.0  # fp16 activations, weights and KV
# Elementwise kernels run on the CUDA cores, not the tensor cores: their
# compute roof is the fp32 peak over the fp16 tensor peak, flat (one point).
CUDA_CORES = {"a100-80gb": 19.5 / 312.0, "h100-80gb": 66.9 / 989.4, "h200": 66.9 / 989.4}
CUDA_CORE_OPS = ["embed", "rmsnorm", "qk_norm", "final_norm", "rotary", "silu_mul", "sample"]


def op_size(model, tp, op, batch, tokens, context):
    """(flops, bytes) of one instance, as models/step_ops.cpp computes them."""
    h, inter, qh, kvh, hd = MODELS[model]
    q_dim = qh // tp * hd
    kv_dim = max(1, kvh // tp) * hd
    m = batch * tokens
    gemm = {"qkv_proj": (q_dim + 2 * kv_dim, h), "o_proj": (h, q_dim),
            "gate_up_proj": (2 * inter // tp, h), "down_proj": (h, inter // tp),
            "lm_head": (VOCAB[model] // tp, h)}
    if op in gemm:
        n, k = gemm[op]
        return 2.0 * m * n * k, n * k * ACT + m * k * ACT + m * n * ACT
    if op == "rmsnorm":
        return 5.0 * m * h, m * h * 4 * ACT + h * ACT
    if op == "rotary":
        w = q_dim + kv_dim
        return 3.0 * m * w, m * w * 2 * ACT + m * hd * ACT
    if op == "silu_mul":
        return 5.0 * m * (inter // tp), m * (inter // tp) * 3 * ACT
    if op in ("attn_prefill", "attn_decode"):
        pairs = batch * (tokens * context + tokens * (tokens + 1) // 2)
        flops = 4.0 * pairs * hd * (qh // tp)
        kv_rows = batch * (context + tokens)
        byts = kv_rows * 2 * kv_dim * ACT + m * 2 * kv_dim * ACT + m * 2 * q_dim * ACT
        return flops, byts
    raise ValueError(op)


def interp(points, x):
    if x <= points[0][0]:
        return points[0][1]
    if x >= points[-1][0]:
        return points[-1][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x <= x1:
            t = (math.log10(x) - math.log10(x0)) / (math.log10(x1) - math.log10(x0))
            return y0 + t * (y1 - y0)
    return points[-1][1]


def axis_value(axis, pt):
    """The op's value on a curve axis, as sim/roofline_cost_model.cpp reads it."""
    if axis == "flops":
        return pt["flops"]
    if axis == "bytes":
        return pt["bytes"]
    if axis == "intensity":
        return pt["flops"] / pt["bytes"]
    if axis == "tokens":
        return pt["tokens"]
    if axis == "context_share":
        c, t = pt["context"], pt["tokens"]
        return c / (c + t / 2.0) if c > 0 else 0.0
    raise ValueError(axis)


def work_interp(points, x):
    """interp, with the time x / efficiency held at or above the largest
    time of the knots at or below x."""
    e = interp(points, x)
    floor = max((k / ek for k, ek in points if k <= x), default=0.0)
    return min(e, x / floor) if floor > 0 else e


class Curve:
    """A named curve: rows of [x, efficiency] points, one row without a y
    axis; with one, each row sits at a y and the time per unit of work
    (1 / efficiency) is interpolated linearly in y between rows."""
    def __init__(self, axis, rows, y_axis=None, roof=None):
        self.axis = axis
        self.y_axis = y_axis
        self.rows = rows  # [(y, [(x, eff), ...]), ...]; y None without a y axis
        self.work = (roof, axis) in WORK_AXES

    def at(self, pt):
        x = axis_value(self.axis, pt)
        f = work_interp if self.work else interp
        if self.y_axis is None:
            return f(self.rows[0][1], x)
        y = axis_value(self.y_axis, pt)
        rows = self.rows
        if y <= rows[0][0]:
            return f(rows[0][1], x)
        if y >= rows[-1][0]:
            return f(rows[-1][1], x)
        for (y0, p0), (y1, p1) in zip(rows, rows[1:]):
            if y <= y1:
                t = (y - y0) / (y1 - y0)
                return 1.0 / ((1 - t) / f(p0, x) + t / f(p1, x))
        return f(rows[-1][1], x)


class Pricer:
    def __init__(self, gpu, launch_s, legacy_curve, compute_cap, memory_eff):
        self.peak, self.bw = GPUS[gpu]
        self.launch = launch_s
        self.legacy = legacy_curve
        self.cap = compute_cap
        self.memory_eff = memory_eff
        self.curves = {}  # family -> {"compute": Curve, "memory": Curve}

    def time(self, family, pt):
        c = self.curves.get(family, {})
        ec = c["compute"].at(pt) if "compute" in c else min(self.cap, interp(self.legacy, pt["flops"]))
        em = c["memory"].at(pt) if "memory" in c else self.memory_eff
        return max(pt["flops"] / (self.peak * ec), pt["bytes"] / (self.bw * em)) + self.launch


def family_of(op, fitted=None):
    """The family whose curves price the op: one fitted to the op itself
    where the GPU has one (fitted: the families with curves), else the one
    that prices it."""
    for f, ops in FAMILIES.items():
        if op in ops and f in PRICES and op not in PRICES[f]:
            continue
        if op in ops and (fitted is None or f in fitted):
            return f
    for f, ops in FAMILIES.items():
        if op in PRICES.get(f, ops):
            return f
    raise ValueError(op)


def read_mlp(path):
    rows = {}
    for r in csv.DictReader(open(path)):
        key = (int(r["num_tensor_parallel_workers"]), int(r["num_tokens"]))
        rows.setdefault(key, []).append(r)
    return rows


def measured_mlp(rows, tp, tokens, op):
    # Vidur repeats some token counts; the mean of their medians.
    rs = rows.get((tp, tokens))
    if not rs:
        return None
    vals = [sum(float(r["time_stats.%s.median" % v]) for v in MLP_OPS[op]) for r in rs]
    ms = sum(vals) / len(vals)
    return ms / 2 if op == "rmsnorm" else ms


def attention_points(path):
    """Llama-2-70B TP 2 rows of Vidur's early A100 table: a grid of
    prefill chunks and decode batches."""
    rows = list(csv.DictReader(open(path)))
    out = []
    dec = {}
    for r in rows:
        if r["is_prefill"] == "False":
            dec[(int(r["batch_size"]), int(r["kv_cache_size"]))] = float(r["time_stats.attn_decode.median"])
    kvs = sorted({k for _, k in dec})
    for b in (1, 4, 16, 64, 128):
        for want in (128, 1024, 2048, 3968):
            k = min(kvs, key=lambda v: (abs(v - want), v))
            if (b, k) in dec:
                out.append(("attn_decode", b, 1, k, dec[(b, k)]))
    pre = {}
    for r in rows:
        if r["is_prefill"] == "True" and r["time_stats.attn_prefill.median"]:
            pre.setdefault((int(r["prefill_chunk_size"]), int(r["kv_cache_size"])),
                           float(r["time_stats.attn_prefill.median"]))
    for c in (64, 128, 256, 512, 1024, 2048, 3072, 4096):
        for k in (0, 1024, 2048):
            if (c, k) in pre:
                out.append(("attn_prefill", 1, c, k, pre[(c, k)]))
    return out


def build_table(vidur_dir):
    table = []
    for gpu, tag in (("a100-80gb", "a100"), ("h100-80gb", "h100")):
        for model, tp in CONFIGS:
            path = os.path.join(vidur_dir, "%s_%s_mlp.csv" % (tag, model))
            rows = read_mlp(path)
            for op in MLP_OPS:
                for t in TOKENS:
                    ms = measured_mlp(rows, tp, t, op)
                    if ms is not None:
                        table.append([gpu, model, tp, op, 1, t, 0, round(ms, 6), "vidur@7d47513 compute/%s mlp.csv" % tag])
    for op, b, c, k, ms in attention_points(os.path.join(vidur_dir, "a100_llama-2-70b_attention.csv")):
        table.append(["a100-80gb", "llama-2-70b", 2, op, b, c, k, ms, "vidur@e2d00e9 data/profiling/a100/attention.csv"])
    for r in csv.DictReader(open(ATTN_7B)):
        op = "attn_prefill" if r["kind"] == "prefill" else "attn_decode"
        table.append(["a100-80gb", "llama-2-7b", 1, op, int(r["batch"]), int(r["chunk"]), int(r["kv"]), float(r["ms"]),
                      "vidur LFS copy sw5sh/cs378-assignment3@7ac2fe9 offset %s" % r["offset"]])
    return table


# The H200 (Llama-3.1-8B, bf16). GEMMs: cuBLAS kernels timed by Nsight
# Compute in two engine runs on our H200 (2026-12-01): h200-ncu-decode-b1.csv
# (one request of 512 prompt tokens, then batch-1 decode steps) and
# h200-ncu-b32.csv (32 requests: two 8,192-token prefill chunks, then decode
# steps of 47, 32, 16 and 1 tokens). Each step opens with the embedding
# kernel (grid = tokens x 16) and runs 4 GEMMs per layer in order (qkv, o,
# gate_up, down; a split-K GEMM's reduce kernel is added to it) and the LM
# head last. The LM head's rows are the sequences sampled: the decode steps'
# tokens, one in the single request's prefill; the other steps' LM heads are
# left out (their row count is not in the trace).
NCU_RUNS = ("h200-ncu-decode-b1.csv", "h200-ncu-b32.csv")
LAYER_GEMMS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
# Attention through PyTorch's SDPA (cuDNN's kernel chosen), dense bf16 K/V,
# 32 query and 8 KV heads of 128, tools/gpu-anchors.py on the same H200:
# (op, batch, new tokens, context, figure, unit) as the script prints it.
SDPA_ANCHORS = (
    ("attn_decode", 32, 1, 4096, 4208.0, "GB/s"),
    ("attn_decode", 1, 1, 32768, 3274.0, "GB/s"),
    ("attn_decode", 256, 1, 1024, 4322.0, "GB/s"),
    ("attn_prefill", 1, 2048, 0, 407.0, "TFLOP/s"),
    ("attn_prefill", 1, 8192, 0, 615.0, "TFLOP/s"),
)


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def ncu_steps(path):
    """[(tokens, [(kernel, ns), ...])]: each step's GEMMs in launch order."""
    steps = []
    for r in csv.DictReader(open(path)):
        k, ns = r["kernel"], int(r["gpu_time_ns"])
        if "embedding_kernel" in k:
            steps.append((int(r["grid"].strip("()").split(",")[0]) // 16, []))
        elif steps and k.startswith("nvjet"):
            steps[-1][1].append([k, ns])
        elif steps and "splitKreduce" in k:
            steps[-1][1][-1][1] += ns
    return steps


def build_h200_table(ncu_dir):
    times = {}  # (op, rows) -> [ns]
    for name in NCU_RUNS:
        steps = ncu_steps(os.path.join(ncu_dir, name))
        for i, (tokens, gemms) in enumerate(steps):
            if len(gemms) != 4 * 32 + 1:
                raise SystemExit("%s: step %d has %d GEMMs, not 129" % (name, i, len(gemms)))
            for j, (_, ns) in enumerate(gemms[:-1]):
                times.setdefault((LAYER_GEMMS[j % 4], tokens), []).append(ns)
            prefill = i == 0 or tokens > 64
            if not prefill or name == NCU_RUNS[0]:
                if tokens in (1, 16, 32) or (i == 0 and name == NCU_RUNS[0]):
                    times.setdefault(("lm_head", 1 if prefill else tokens), []).append(gemms[-1][1])
    table = []
    for (op, rows), ns in sorted(times.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        batch, tokens = (rows, 1) if op == "lm_head" else (1, rows)
        table.append(["h200", "llama-3.1-8b", 1, op, batch, tokens, 0, round(median(ns) * 1e-6, 6),
                      "twinserve H200 ncu 2026-12-01 cuBLAS median of %d" % len(ns)])
    h, _, qh, kvh, hd = MODELS["llama-3.1-8b"]
    for op, b, t, c, fig, unit in SDPA_ANCHORS:
        if unit == "GB/s":
            ms = 2 * b * kvh * c * hd * ACT / (fig * 1e9) * 1e3
        else:
            ms = 2 * 2 * qh * t * t / 2 * hd / (fig * 1e12) * 1e3
        table.append(["h200", "llama-3.1-8b", 1, op, b, t, c, round(ms, 6),
                      "twinserve H200 torch SDPA (cuDNN) 2026-12-01 %g %s" % (fig, unit)])
    return table


def knots(lo, hi, per_decade=3):
    """The data's ends and a grid between them: no knot without data beside it."""
    a, b = math.floor(math.log10(lo) * per_decade) + 1, math.ceil(math.log10(hi) * per_decade) - 1
    inner = [10 ** (i / per_decade) for i in range(a, b + 1)]
    return [lo] + [x for x in inner if lo * 1.2 < x < hi / 1.2] + [hi]


def needed(pricer, pt, roof):
    """The efficiency the point needs on one roof to take its measured time."""
    busy = max(pt["t"] - pricer.launch, 1e-9)
    if roof == "memory":
        return pt["bytes"] / (pricer.bw * busy)
    return pt["flops"] / (pricer.peak * busy)


def smooth_start(pricer, family, pts, roof):
    """Each knot starts at the geometric mean of the efficiencies the points
    near it need (triangle weights over one knot spacing in log x); with a
    y axis, each row from the points nearest to it in y."""
    curve = pricer.curves[family][roof]
    for r, (y, p) in enumerate(curve.rows):
        mine = pts
        if curve.y_axis is not None:
            ys = [row[0] for row in curve.rows]
            mine = [q for q in pts
                    if min(range(len(ys)), key=lambda i: abs(ys[i] - axis_value(curve.y_axis, q))) == r]
        need = [(axis_value(curve.axis, q), needed(pricer, q, roof)) for q in mine]
        lx = [math.log10(x) for x, _ in p]
        for j, (x, _) in enumerate(p):
            lo = lx[j - 1] if j > 0 else lx[j] - 1
            hi = lx[j + 1] if j + 1 < len(lx) else lx[j] + 1
            wsum = lsum = 0.0
            for v, e in need:
                lv = math.log10(v)
                w = 1 - (lx[j] - lv) / (lx[j] - lo) if lv <= lx[j] else 1 - (lv - lx[j]) / (hi - lx[j])
                if w > 0:
                    wsum += w
                    lsum += w * math.log(min(1.0, max(1e-4, e)))
            if wsum > 0:
                p[j] = (x, math.exp(lsum / wsum))
        # Efficiency does not fall as the work grows (the curves start
        # non-decreasing: bigger kernels fill the GPU at least as well).
        for j in range(1, len(p)):
            p[j] = (p[j][0], max(p[j][1], p[j - 1][1]))


# Curves whose x is the op's own work (FLOPs on the compute roof, bytes or
# tokens on the memory roof): a kernel's busy time, x / efficiency, must
# not fall as x grows, or a smaller op would be priced above a bigger one
# (Vidur's smallest kernels are launch-bound and noisy, and an unconstrained
# fit let efficiency jump 10x between neighbouring knots). The fit keeps the
# knots' times ascending (the 1% margin survives the 3 significant digits
# the profile keeps); between knots, where efficiency interpolated in log x
# can still dip the time, the price holds it at the knots' time so far, as
# sim/roofline_cost_model.cpp does (work_interp).
# GEMM compute curves by intensity are not held: cuBLAS's tile choice makes
# real GEMMs faster at some larger sizes (H100, Llama-2-70B TP 2 o_proj:
# 54.5 us at 192 tokens, 35 us at 256), and the curves keep that.
WORK_AXES = {("compute", "flops"), ("memory", "bytes"), ("memory", "tokens")}


def rise_limit(x0, x1):
    return 0.99 * x1 / x0


def monotone_bounds(p, j):
    """The range knot j may take with its neighbours held."""
    lo, hi = 1e-4, 1.0
    if j > 0:
        hi = min(hi, p[j - 1][1] * rise_limit(p[j - 1][0], p[j][0]))
    if j + 1 < len(p):
        lo = max(lo, p[j + 1][1] / rise_limit(p[j][0], p[j + 1][0]))
    return lo, hi


def make_monotone(p):
    """Lifts knots, right to left, until the time grows: the larger sizes'
    efficiencies are the better measured."""
    for j in range(len(p) - 2, -1, -1):
        need = p[j + 1][1] / rise_limit(p[j][0], p[j + 1][0])
        if p[j][1] < need:
            p[j] = (p[j][0], min(1.0, need))


def data_knots(vals):
    """Knots at the data's own x values (values within 20% of the one
    before are one knot): for a table too sparse for a grid, where a grid
    knot with no point beside it would take any value the fit left it."""
    xs = []
    for v in sorted(vals):
        if not xs or v > xs[-1] * 1.2:
            xs.append(v)
    return xs


def free_knots(curve, pts):
    """The knots on either side of some point: the only ones a fit may move
    when the others hold a prior's values."""
    free = set()
    for q in pts:
        x = axis_value(curve.axis, q)
        xs = [k for k, _ in curve.rows[0][1]]
        below = [j for j, k in enumerate(xs) if k <= x]
        above = [j for j, k in enumerate(xs) if k >= x]
        free.update(below[-1:] + above[:1])
    return free


def fit(pricer, family, pts, slots, frozen=None):
    """Coordinate descent on the knots' efficiencies (a line search over
    factors per knot), least squares in log time. frozen: roof -> knot
    indices that keep their values."""
    def loss():
        s = 0.0
        for q in pts:
            s += math.log(pricer.time(family, q) / q["t"]) ** 2
        return s / len(pts)
    monotone = {roof for roof in slots if (roof, pricer.curves[family][roof].axis) in WORK_AXES}
    for roof in monotone:
        for _, p in pricer.curves[family][roof].rows:
            make_monotone(p)
    best = loss()
    for _ in range(60):
        improved = False
        for roof in slots:
            for _, p in pricer.curves[family][roof].rows:
                for j in range(len(p)):
                    if frozen and j in frozen.get(roof, ()):
                        continue
                    old = p[j][1]
                    choice = old
                    lo, hi = monotone_bounds(p, j) if roof in monotone else (1e-4, 1.0)
                    for f in (0.3, 0.5, 0.7, 0.85, 0.93, 0.98, 1.02, 1.07, 1.15, 1.4, 2.0, 3.0):
                        p[j] = (p[j][0], min(hi, max(lo, old * f)))
                        cur = loss()
                        if cur < best - 1e-12:
                            best, choice, improved = cur, p[j][1], True
                    p[j] = (p[j][0], choice)
        if not improved:
            break
    return best


# Per family and roof: the curve's x axis and, for a two-axis curve, its y
# axis and the rows' y. Elementwise kernels run one thread block per token,
# so their time follows the token count below a few hundred tokens (a row's
# width changes the time per block, not the blocks): memory efficiency by
# tokens puts wide and narrow rows on one curve. Attention prefill is two
# kernels' work: the causal square of fresh tokens and the rectangle of new
# tokens against cached context run at different rates, so its curve has a
# row for each (y = the share of attended pairs that are context) and the
# time per FLOP is blended between them.
SPECS = {
    "gemm": [{"compute": ("intensity", None, None), "memory": ("bytes", None, None)}],
    "gemm_qkv_proj": [{"compute": ("intensity", None, None), "memory": ("bytes", None, None)}],
    "gemm_o_proj": [{"compute": ("intensity", None, None), "memory": ("bytes", None, None)}],
    "gemm_gate_up_proj": [{"compute": ("intensity", None, None), "memory": ("bytes", None, None)}],
    "gemm_down_proj": [{"compute": ("intensity", None, None), "memory": ("bytes", None, None)}],
    "gemm_lm_head": [{"compute": ("intensity", None, None), "memory": ("bytes", None, None)}],
    "norm": [{"memory": ("tokens", None, None)}, {"memory": ("bytes", None, None)}],
    "silu_mul": [{"memory": ("tokens", None, None)}, {"memory": ("bytes", None, None)}],
    "rotary": [{"memory": ("tokens", None, None)}, {"memory": ("bytes", None, None)}],
    "attn_prefill": [{"compute": ("flops", "context_share", [0.0, 1.0])}],
    "attn_decode": [{"memory": ("bytes", None, None)}],
}
GEMM_INTENSITY_KNOTS = (16, 32, 64, 96, 128, 192, 256, 384, 512, 1024, 2048)


def close_enough(t, measured):
    """Vidur's times are whole microseconds: within 15%, or within 1 us."""
    return abs(t / measured - 1) <= 0.15 or abs(t - measured) <= 1e-6


def read_table(path):
    table = []
    for r in csv.DictReader(open(path)):
        table.append([r["gpu"], r["model"], int(r["tp"]), r["op"], int(r["batch"]), int(r["tokens"]),
                      int(r["context"]), float(r["measured_ms"]), r["source"]])
    return table


def point(r):
    fl, by = op_size(r[1], r[2], r[3], r[4], r[5], r[6])
    return {"flops": fl, "bytes": by, "tokens": r[4] * r[5], "context": r[4] * r[6], "t": r[7] * 1e-3}


def write_table(path, table):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["gpu", "model", "tp", "op", "batch", "tokens", "context", "measured_ms", "source"])
        w.writerows(table)


OP_ORDER = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj", "lm_head", "attn_decode", "attn_prefill")


def host_bound(r):
    """A sweep point PyTorch's host time per call may have set rather than
    the kernel: GEMMs under 64 rows (16-31 us where Nsight timed their
    kernels at 15-17 us), decode attention under 0.1 ms, prefill attention
    under 1,024 tokens (512 tokens measured faster than 128)."""
    op, batch, tokens, ms = r[3], r[4], r[5], r[7]
    if op == "attn_decode":
        return ms < 0.1
    if op == "attn_prefill":
        return tokens < 1024
    return batch * tokens < 64


def merge_h200_sweep(table, sweep):
    """The table the H200's curves are fitted to, with a gpu-check sweep's
    points added where the table has none at that shape and PyTorch's host
    time did not set them; the table's own points (Nsight's kernel times)
    are kept."""
    have = {tuple(r[:7]) for r in table}
    merged = table + [r for r in sweep if tuple(r[:7]) not in have and not host_bound(r)]
    return sorted(merged, key=lambda r: (OP_ORDER.index(r[3]), r[4], r[5], r[6]))


def main():
    args = sys.argv[1:]
    if "--h200-ncu" in args:
        i = args.index("--h200-ncu")
        if i + 1 >= len(args):
            raise SystemExit("fit-curves: --h200-ncu needs the folder of the H200 ncu CSVs")
        write_table(H200_TABLE, build_h200_table(args[i + 1]))
        del args[i:i + 2]
    if "--h200-table" in args:
        # gpu-check's sweep (tools/gpu-anchors.py --table), merged into the table.
        i = args.index("--h200-table")
        if i + 1 >= len(args):
            raise SystemExit("fit-curves: --h200-table needs the CSV tools/gpu-anchors.py --table wrote")
        write_table(H200_TABLE, merge_h200_sweep(read_table(H200_TABLE), read_table(args[i + 1])))
        del args[i:i + 2]
    dirs = [a for a in args if not a.startswith("--")]
    if dirs:
        table = build_table(dirs[0])
        write_table(TABLE, table)
    else:
        table = read_table(TABLE)  # no Vidur checkout: refit from the table kept in the repository
    table += read_table(H200_TABLE)
    result = {}
    h100_curves = None
    for gpu in GPUS:
        prof = json.load(open(os.path.join(ROOT, "hwprofiles/profiles/%s.json" % gpu)))
        rows = [r for r in table if r[0] == gpu]
        # The fixed cost of a kernel: the shortest time Vidur measured on this
        # GPU. The H200 table has no small kernel; it is the H100's die, and
        # takes the H100's figure.
        launch = min(r[7] for r in rows) * 1e-3
        if gpu == "h200":
            launch = result["h100-80gb"]["kernel_launch_us"] * 1e-6
        eff = prof["efficiency"]
        if "--before" in sys.argv:
            # The profile as it stands without named curves: one GEMM curve,
            # constant memory efficiency, its own launch cost.
            launch = prof["kernel_launch_us"] * 1e-6
            families = {}
        else:
            families = FAMILIES
        pricer = Pricer(gpu, launch, [tuple(p) for p in eff["gemm_curve"]], eff["compute"], eff["memory"])
        curves = {}
        # The H200's table is sparse: its GEMM curves take the H100's shape
        # where it has no point (its fitted curves, below).
        prior = h100_curves if gpu == "h200" else None
        if families:
            for family in ("norm", "silu_mul", "rotary"):
                pricer.curves[family] = {"compute": Curve("flops", [(None, [(1.0, CUDA_CORES[gpu])])])}
        for family, ops in families.items():
            pts = [point(r) for r in rows if r[3] in ops]
            if not pts:
                continue
            best = None
            specs = SPECS[family]
            if family == "attn_prefill" and all(q["context"] == 0 for q in pts):
                # Fresh prompts only (the H200's anchors): one row, no y axis.
                specs = [{"compute": ("flops", None, None)}]
            for spec in specs:
                slots = {}
                frozen = {}
                for roof, (axis, y_axis, ys) in spec.items():
                    if family.startswith("gemm") and axis == "intensity":
                        xs = list(GEMM_INTENSITY_KNOTS)
                    elif prior is not None:
                        xs = data_knots([axis_value(axis, q) for q in pts if roof == "compute" or
                                         not family.startswith("gemm") or q["flops"] / q["bytes"] < 24])
                    else:
                        vals = [axis_value(axis, q) for q in pts]
                        xs = knots(min(vals), max(vals))
                    start = 0.7 if roof == "memory" else 0.3
                    slots[roof] = Curve(axis, [(y, [(x, start) for x in xs]) for y in (ys or [None])], y_axis, roof)
                fixed = {r: v for r, v in pricer.curves.get(family, {}).items() if r not in slots}
                pricer.curves[family] = dict(slots, **fixed)
                if family.startswith("gemm"):
                    smooth_start(pricer, family, [q for q in pts if q["flops"] / q["bytes"] < 24], "memory")
                    compute_pts = [q for q in pts if q["flops"] / q["bytes"] > 48]
                    if prior is not None:
                        # A sparse table (the H200's: 512 and 8,192 tokens
                        # above the memory roof): the curve starts as the
                        # prior's (the H100's, the same die) and the fit moves
                        # only the knots beside a point, so the shape between
                        # measured sizes is the prior's.
                        # The prior is first scaled to each point above the
                        # memory roof (the ratio interpolated in log x between
                        # them, flat past the ends); below the first one the
                        # knots are free to rise until the memory roof binds,
                        # as the prior's own fit left them unconstrained there.
                        shape = prior.get(family, prior["gemm"])["compute"]
                        at = lambda x: shape.at({"flops": x, "bytes": 1.0})
                        ratios = sorted((q["flops"] / q["bytes"], needed(pricer, q, "compute") /
                                         at(q["flops"] / q["bytes"])) for q in compute_pts)
                        row = slots["compute"].rows[0][1]
                        # Past the largest point the ratio returns to 1 by the
                        # last knot: a ratio measured near the ridge is the
                        # H200's faster memory, not faster tensor cores (the
                        # LM head measured only to 256 rows would otherwise
                        # price 4,096 rows at the peak).
                        if ratios and ratios[-1][0] < row[-1][0]:
                            ratios.append((row[-1][0], 1.0))
                        for j, (x, _) in enumerate(row):
                            row[j] = (x, min(1.0, at(x) * (interp(ratios, x) if ratios else 1.0)))
                        movable = free_knots(slots["compute"], pts)
                        frozen["compute"] = set(range(len(row))) - movable
                    else:
                        smooth_start(pricer, family, compute_pts, "compute")
                else:
                    for roof in slots:
                        smooth_start(pricer, family, pts, roof)
                loss = fit(pricer, family, pts, list(slots), frozen)
                # The target is points within 15% (or 1 us): the axis that
                # keeps most of them wins, the smaller error breaking ties.
                within = sum(1 for q in pts if close_enough(pricer.time(family, q), q["t"]))
                print("%s %s: %s, %d of %d within 15%% or 1 us, mean squared log error %.5f" % (
                    gpu, family, ", ".join("%s by %s" % (r, c.axis) for r, c in slots.items()), within, len(pts), loss),
                    file=sys.stderr)
                if best is None or (-within, loss) < best[0]:
                    best = ((-within, loss), slots)
            slots = best[1]
            fixed = {r: v for r, v in pricer.curves.get(family, {}).items() if r not in slots}
            pricer.curves[family] = dict(slots, **fixed)
            curves[family] = slots
        if gpu == "h100-80gb":
            h100_curves = {f: pricer.curves[f] for f in curves}
        # Per op: median and largest error of the fitted prices (the C++
        # test reports the same from the simulator's own code).
        for op in sorted({r[3] for r in rows}):
            errs, miss = [], []
            for r in rows:
                if r[3] != op:
                    continue
                t = pricer.time(family_of(op, curves), point(r)) * 1e3
                errs.append(abs(t / r[7] - 1))
                if abs(t / r[7] - 1) > 0.15 and abs(t - r[7]) > 0.001:
                    miss.append("%s tp%d b%d n%d c%d: %.4f vs %.4f" % (r[1], r[2], r[4], r[5], r[6], t, r[7]))
            errs.sort()
            print("%s %-13s n=%3d median %5.1f%% max %5.1f%% within 15%% or 1 us: %d" %
                  (gpu, op, len(errs), 100 * errs[len(errs) // 2], 100 * errs[-1], len(errs) - len(miss)),
                  file=sys.stderr)
            for m in miss:
                print("    miss", m, file=sys.stderr)
        result[gpu] = {"kernel_launch_us": round(launch * 1e6, 3), "curves": {}}
        result[gpu]["curves"]["cuda_cores"] = {"roof": "compute", "x": "flops",
                                               "points": [[1.0, float("%.3g" % CUDA_CORES[gpu])]], "ops": CUDA_CORE_OPS}
        for family, slots in curves.items():
            for roof, curve in slots.items():
                name = family if len(slots) == 1 else "%s_%s" % (family, roof)
                out = {"roof": roof, "x": curve.axis}
                pts_json = lambda p: [[float("%.3g" % x), float("%.3g" % e)] for x, e in p]
                if curve.y_axis is None:
                    out["points"] = pts_json(curve.rows[0][1])
                else:
                    out["y"] = curve.y_axis
                    out["rows"] = [{"y": y, "points": pts_json(p)} for y, p in curve.rows]
                out["ops"] = [op for op in PRICES.get(family, FAMILIES[family]) if family_of(op, curves) == family]
                result[gpu]["curves"][name] = out
        if gpu == "h200":
            # No H200 table of vLLM's elementwise kernels (ours are not
            # theirs): the H100's curves, fitted on the same die.
            for name in ("norm", "silu_mul", "rotary"):
                result[gpu]["curves"][name] = result["h100-80gb"]["curves"][name]
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
