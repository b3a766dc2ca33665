"""Efficiency curves from measured kernel times, as the hardware profiles
hold them (docs/hardware.md): shared by tools/fit-lss-curves.py (vLLM's
kernels timed by LLMServingSim) and tools/gpu-profile (a GPU's own
microbenchmarks). Stdlib only."""
import math
import statistics


def half_decade_medians(points, cap=None):
    """[(x, efficiency)] -> one [x, median efficiency] per half decade of x
    (x the geometric mean of the bin's points), the median held at or below
    `cap` when given."""
    bins = {}
    for x, eff in points:
        bins.setdefault(math.floor(math.log10(x) * 2), []).append((x, eff))
    out = []
    for key in sorted(bins):
        group = bins[key]
        x = math.exp(statistics.mean(math.log(f) for f, _ in group))
        median = statistics.median(e for _, e in group)
        out.append([float(f"{x:.4g}"), round(median if cap is None else min(cap, median), 4)])
    return out


def with_small_sizes(curve, peak):
    """Below the first compute-bound point a GEMM is memory-bound: the curve
    keeps the fixed-kernel-time form eff = e0 x f / (f + peak x t0), t0 set
    so that it meets the first measured point. Returns (curve, t0)."""
    f1, e1 = curve[0]
    e0 = max(e for _, e in curve)
    t0 = max(f1 * (e0 / e1 - 1.0) / peak, 0.0)
    small = [[f, round(e0 * f / (f + peak * t0), 6)] for f in (1e6, 1e7, 1e8, 1e9) if f < f1]
    return small + curve, t0


def curve_at(points, x):
    """The simulator's interpolation: linear in log x, flat past the ends."""
    if x <= points[0][0]:
        return points[0][1]
    for (a, ea), (b, eb) in zip(points, points[1:]):
        if x <= b:
            return ea + (eb - ea) * math.log(x / a) / math.log(b / a)
    return points[-1][1]
