#!/usr/bin/env python3
"""Fits the profiles' measured all-reduce curves to Vidur's NCCL timings.

Vidur (github.com/microsoft/vidur, MIT licence, commit 7d47513) measured
NCCL all-reduce on DGX A100 and DGX H100 nodes (NVSwitch) and on pairwise
NVLink nodes: data/profiling/network/<node>/all_reduce.csv, one row per
(GPUs, message size), the median of the NCCL kernel's time over 3 runs of
11 calls (torch profiler, ms); `size` is bytes (2 x fp16 elements, as
vidur/profiling/collectives/collectives_wrapper.py records it).

The single-node rows (num_workers == devices_per_node) of one group size
are sorted by size and fitted by a least-squares non-decreasing curve (pool
adjacent violators): the medians of neighbouring sizes scatter between two
modes (about 10 and 45 us on an A100 pair below 64 KiB: whether the peer's
kernel had started), and a bigger message must not cost less. The fit is
sampled at powers of two from 2 KiB to 64 MiB and printed as the profile's
"collectives" entries (bytes, microseconds per call).

Azure's AI-benchmarking-guide (github.com/Azure/AI-benchmarking-guide,
Azure_Results/ND_{A100_v4,H200_v5}_results.md) gives nccl-tests
all_reduce_perf bus bandwidth on 8 GPUs (in place, NVLS on the H200) at
powers of two from 1 KiB to 8 GiB; the table below is transcribed from it
and turned into time per call, time = bytes x 2(n-1)/n / busbw (nccl-tests'
definition of all-reduce bus bandwidth).

Reproduce (stdlib Python only):

  V=/path/to/vidur/.git; mkdir -p /tmp/vidur
  for n in a100_dgx h100_dgx a100_pairwise_nvlink h100_pairwise_nvlink; do
    git --git-dir=$V show 7d47513:data/profiling/network/$n/all_reduce.csv > /tmp/vidur/${n}_all_reduce.csv; done
  tools/fit-collectives.py /tmp/vidur
"""
import csv
import json
import math
import os
import sys

NODES = [("a100_dgx", "nvswitch", [2, 4, 8]), ("h100_dgx", "nvswitch", [2, 4, 8]),
         ("a100_pairwise_nvlink", "nvlink_bridge", [2]), ("h100_pairwise_nvlink", "nvlink_bridge", [2])]


# busbw (GB/s) at 2^10, 2^11, ... bytes, 8 GPUs, as the Azure tables print them.
AZURE = {
    "ND_A100_v4": [0.04, 0.08, 0.17, 0.33, 0.67, 1.37, 2.70, 5.15, 10.11, 19.24, 36.22, 53.54, 71.43, 89.99,
                   109.22, 132.77, 166.63, 174.18, 213.87],
    "ND_H200_v5": [0.06, 0.12, 0.23, 0.47, 0.93, 1.84, 3.72, 7.39, 14.75, 29.38, 52.96, 88.78, 138.44, 181.94,
                   240.41, 300.91, 368.11, 412.45, 432.24],
}


def azure_curve(busbw, gpus=8):
    """(bytes, us) from 2 KiB to 256 MiB, held non-decreasing."""
    points = []
    for i, bw in enumerate(busbw):
        size = 2 ** (10 + i)
        if size < 2048:
            continue
        us = size * 2.0 * (gpus - 1) / gpus / (bw * 1e9) * 1e6
        points.append([size, round(max(us, points[-1][1] if points else 0), 1)])
    return points


def non_decreasing(values):
    """Least-squares non-decreasing fit (pool adjacent violators)."""
    blocks = []  # [sum, count]
    for v in values:
        blocks.append([v, 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, c = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += c
    out = []
    for s, c in blocks:
        out += [s / c] * c
    return out


def interp_log(x, xs, ys):
    """ys at x, linear in log(x) between the neighbouring xs, held at the ends."""
    if x <= xs[0]:
        return ys[0]
    for i in range(1, len(xs)):
        if x <= xs[i]:
            t = math.log(x / xs[i - 1]) / math.log(xs[i] / xs[i - 1])
            return ys[i - 1] + t * (ys[i] - ys[i - 1])
    return ys[-1]


def fit(path, gpus):
    rows = []
    with open(path) as f:
        for r in csv.DictReader(f):
            if int(r["num_workers"]) == gpus and int(r["devices_per_node"]) == gpus:
                rows.append((float(r["size"]), float(r["time_stats.all_reduce.median"]) * 1000.0))
    rows.sort()
    sizes = [s for s, _ in rows]
    fitted = non_decreasing([t for _, t in rows])
    points = []
    for k in range(11, 27):
        size = 2.0 ** k
        if size > sizes[-1] * 1.001:
            break
        points.append([int(size), round(interp_log(size, sizes, fitted), 1)])
    return points, len(rows)


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "/tmp/vidur"
    for node, link, groups in NODES:
        path = os.path.join(folder, node + "_all_reduce.csv")
        if not os.path.exists(path):
            print("skipping %s: %s not found" % (node, path), file=sys.stderr)
            continue
        for gpus in groups:
            points, n = fit(path, gpus)
            name = "nccl_all_reduce_%s_%d" % (link, gpus)
            print("# %s, %d rows" % (node, n))
            print(json.dumps({name: {"kind": "all_reduce", "link": link, "gpus": gpus, "points": points}}))
    for system, busbw in AZURE.items():
        print("# %s, nccl-tests" % system)
        print(json.dumps({"nccl_all_reduce_nvswitch_8": {"kind": "all_reduce", "link": "nvswitch", "gpus": 8,
                                                         "points": azure_curve(busbw)}}))


if __name__ == "__main__":
    main()
