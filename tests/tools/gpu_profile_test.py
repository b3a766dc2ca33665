#!/usr/bin/env python3
"""tools/gpu-profile's fit, without a GPU: a sweep timed by a hidden
roofline (known efficiencies and launch) is fitted on the H200's base
profile; the fit must recover the hidden efficiencies, the C++ loader must
take the profile, and the simulator must price a decode step's attention
and a prefill GEMM from it as the hidden device runs them. Bad sweeps must
fail with the file and the key named.

usage: gpu_profile_test.py REPO TWINSERVE SCRATCH"""
import importlib.machinery
import importlib.util
import json
import os
import re
import subprocess
import sys

REPO, TWINSERVE, SCRATCH = sys.argv[1:4]
TOOL = os.path.join(REPO, "tools", "gpu-profile")
loader = importlib.machinery.SourceFileLoader("gpu_profile", TOOL)
spec = importlib.util.spec_from_loader("gpu_profile", loader)
gp = importlib.util.module_from_spec(spec)
loader.exec_module(gp)

BASE = json.load(open(os.path.join(REPO, "hwprofiles", "profiles", "h200.json")))
PEAK, BW, LAUNCH = BASE["peak_tflops"]["bf16"] * 1e12, BASE["memory_bandwidth_gbps"] * 1e9, BASE["kernel_launch_us"]
HIDDEN = {"gemm": 0.71, "prefill": 0.52, "decode": 0.83, "memory": 0.9, "rmsnorm": 0.61, "silu_mul": 0.66,
          "rotary": 0.47}
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def hidden_us(p):
    flops, byts = gp.point_work(p)
    if p["op"] in gp.GEMM_OPS:
        t = max(flops / (PEAK * HIDDEN["gemm"]), byts / (BW * HIDDEN["memory"]))
    elif p["op"] == "attn_prefill":
        t = max(flops / (PEAK * HIDDEN["prefill"]), byts / (BW * HIDDEN["memory"]))
    elif p["op"] == "attn_decode":
        t = byts / (BW * HIDDEN["decode"])
    else:
        t = byts / (BW * HIDDEN[p["op"]])
    return round(t * 1e6 + LAUNCH, 3)


FP8_PEAK, FP8_EFF = BASE["peak_tflops"]["fp8"] * 1e12, 0.6


def fp8_us(m, n, k):
    flops, byts = 2.0 * m * n * k, float(n * k + m * k + 2 * m * n)
    return round(max(flops / (FP8_PEAK * FP8_EFF), byts / (BW * HIDDEN["memory"])) * 1e6 + LAUNCH, 3)


def hidden_sweep():
    points = []
    for model in gp.SHAPES:
        for op, (n, k) in gp.gemm_shapes(model).items():
            for m in gp.HEAD_TOKENS if op == "lm_head" else gp.GEMM_TOKENS:
                points.append({"op": op, "model": model, "m": m, "n": n, "k": k})
    h, _, qh, kvh, hd, _ = gp.SHAPES["llama-3.1-8b"]
    for t in gp.PREFILL_TOKENS:
        points.append({"op": "attn_prefill", "batch": 1, "tokens": t, "context": 0, "q_heads": qh, "kv_heads": kvh,
                       "head_dim": hd})
    for b in gp.DECODE_BATCHES:
        for c in gp.DECODE_CONTEXTS:
            points.append({"op": "attn_decode", "batch": b, "tokens": 1, "context": c - 1, "q_heads": qh,
                           "kv_heads": kvh, "head_dim": hd})
    for model, (h, inter, qh, kvh, hd, _) in gp.SHAPES.items():
        for m in gp.GEMM_TOKENS:
            for op, width in (("rmsnorm", h), ("silu_mul", inter), ("rotary", (qh + kvh) * hd)):
                points.append({"op": op, "model": model, "tokens": m, "width": width, "head_dim": hd})
    for p in points:
        p["us"] = hidden_us(p)
    device = {"name": "hidden test GPU", "compute_capability": "9.0", "sm_count": 132, "total_memory": 150e9,
              "torch": "none", "cuda": "none", "date": "2026-12-04", "copy_gbps": HIDDEN["memory"] * BW / 1e9,
              "kernel_floor_us": 2.0}
    # W8A8 fp8 GEMMs at 0.6 of the fp8 peak where compute-bound.
    fp8 = []
    for model in gp.SHAPES:
        for op, (n, k) in gp.gemm_shapes(model).items():
            if op in gp.FP8_OPS:
                for m in (t for t in gp.GEMM_TOKENS if t >= 16):
                    fp8.append({"op": op, "model": model, "m": m, "n": n, "k": k, "us": fp8_us(m, n, k)})
    # Two GPUs' NCCL all-reduce: 2 KiB to 128 MiB, 10 us plus 400 GB/s.
    all_reduce = [[b, round(10.0 + b / 400e3, 2)] for b in gp.ALL_REDUCE_BYTES]
    return {"format": "twinserve-gpu-sweep", "version": 1, "device": device, "points": points,
            "all_reduce": {"2": all_reduce}, "fp8_gemm": fp8}


def real_with_ar():
    path = os.path.join(SCRATCH, "with-all-reduce.json")
    json.dump(hidden_sweep(), open(path, "w"))
    return path


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True)


os.makedirs(SCRATCH, exist_ok=True)
sweep_path, out = os.path.join(SCRATCH, "sweep.json"), os.path.join(SCRATCH, "fitted.json")
json.dump(hidden_sweep(), open(sweep_path, "w"))
r = run(sys.executable, TOOL, "--base", "h200", "--name", "h200-hidden", "--from-sweep", sweep_path, "--out", out,
        "--overwrite")
kept = json.load(open(out))["efficiency"]["curves"]
check(r.returncode == 0 and kept["norm"] == BASE["efficiency"]["curves"]["norm"],
      "without --fit-elementwise the base's norm curve is kept")
r = run(sys.executable, TOOL, "--base", "h200", "--name", "h200-hidden", "--from-sweep", sweep_path, "--out", out,
        "--overwrite", "--fit-elementwise")
check(r.returncode == 0, "gpu-profile fits the hidden sweep: " + r.stderr.strip().splitlines()[-1 if r.returncode else 0])
prof = json.load(open(out))
eff = prof["efficiency"]
check(abs(eff["memory"] - HIDDEN["memory"]) < 0.01,
      f"memory efficiency {eff['memory']} is the hidden weight streaming's {HIDDEN['memory']}")
top = eff["gemm_curve"][-1][1]
check(abs(top / HIDDEN["gemm"] - 1) < 0.03, f"large GEMMs' efficiency {top} within 3% of {HIDDEN['gemm']}")
dec = prof["efficiency"]["curves"]["attention_decode"]["points"][-1][1]
check(abs(dec / HIDDEN["decode"] - 1) < 0.03, f"decode attention's efficiency {dec} within 3% of {HIDDEN['decode']}")
names = set(eff["curves"])
check(not any(n.startswith("gemm_") and n not in ("gemm_memory", "gemm_fp8") for n in names),
      "the base's GEMM curves are replaced (" + ", ".join(sorted(names)) + ")")
check("cuda_cores" in names, "the base's compute curve of the elementwise ops is kept")
for op, curve in (("rmsnorm", "norm"), ("silu_mul", "silu_mul"), ("rotary", "rotary")):
    got = eff["curves"][curve]["points"][-1][1]
    check(abs(got / HIDDEN[op] - 1) < 0.03 and eff["curves"][curve]["ops"] == [op],
          f"{op}'s memory curve {curve} ends at {got}, the hidden {HIDDEN[op]}")
worst = max(e["median_abs_error"] for e in prof["fitted_from"]["errors"].values())
check(worst < 0.05, f"every op's median refit error under 5% (largest {100 * worst:.1f}%)")

# The C++ side: the loader takes the profile and prices from its curves.
r = run(TWINSERVE, "hw", "show", out)
check(r.returncode == 0 and "h200-hidden" in r.stdout, "twinserve hw show loads the fitted profile")
r = run(TWINSERVE, "simulate", "--model", "llama-3.1-8b", "--hw", out, "--explain-ops", "64x2047,4096,1x511")
check(r.returncode == 0, "simulate --explain-ops prices with the fitted profile " + r.stderr[-300:])


def each_us(text, op, nth):
    rows = [float(m.group(1)) for m in re.finditer(r"^\s+" + op + r"\s+\d+\s+([\d.]+)", text, re.M)]
    return rows[nth] if len(rows) > nth else float("nan")


want = hidden_us({"op": "attn_decode", "batch": 64, "tokens": 1, "context": 2047, "q_heads": 32, "kv_heads": 8,
                  "head_dim": 128})
got = each_us(r.stdout, "attn_decode", 0)
check(abs(got / want - 1) < 0.05, f"a 64 x 2048 decode's attention priced {got} us, the hidden device's {want} us")
want = hidden_us({"op": "gate_up_proj", "m": 4096, "n": 28672, "k": 4096})
got = each_us(r.stdout, "gate_up_proj", 1)
check(abs(got / want - 1) < 0.05, f"a 4096-token gate_up_proj priced {got} us, the hidden device's {want} us")
want = hidden_us({"op": "qkv_proj", "m": 1, "n": 6144, "k": 4096})
got = each_us(r.stdout, "qkv_proj", 2)
check(abs(got / want - 1) < 0.05, f"a one-token qkv_proj (memory-bound) priced {got} us, the hidden device's {want} us")
want = hidden_us({"op": "silu_mul", "tokens": 4096, "width": 14336, "head_dim": 128})
got = each_us(r.stdout, "silu_mul", 1)
check(abs(got / want - 1) < 0.05, f"a 4096-token silu_mul priced {got} us, the hidden device's {want} us")

# The fp8 curve: 0.6 recovered for the large GEMMs, and the simulator's fp8
# run (--quantization fp8) prices a 4,096-token gate_up_proj on it.
fp8_curve = prof["efficiency"]["curves"]["gemm_fp8"]
check(fp8_curve["dtype"] == "fp8" and abs(fp8_curve["points"][-1][1] / FP8_EFF - 1) < 0.03,
      f"the fp8 GEMMs' curve ends at {fp8_curve['points'][-1][1]}, the hidden {FP8_EFF}")
r = run(TWINSERVE, "simulate", "--model", "llama-3.1-8b", "--hw", out, "--quantization", "fp8", "--explain-ops", "4096")
want = fp8_us(4096, 28672, 4096)
got = each_us(r.stdout, "gate_up_proj", 0)
check(abs(got / want - 1) < 0.05 and "gemm_fp8" in r.stdout,
      f"an fp8 4096-token gate_up_proj priced {got} us on gemm_fp8, the hidden device's {want} us")

# The all-reduce curve: the base's NVSwitch pair curve replaced, the others
# kept, and a TP 2 prefill's all-reduce (4,096 tokens x 4,096 x 2 bytes =
# 32 MiB, past the engines' own all-reduce) priced on it.
coll = prof["collectives"]
check(coll["nccl_all_reduce_nvswitch_2"]["points"] == hidden_sweep()["all_reduce"]["2"]
      and "nccl_all_reduce_nvswitch_8" in coll and prof["fitted_from"]["all_reduce_curves"] == ["nccl_all_reduce_nvswitch_2"],
      "the measured all-reduce replaces the base's 2-GPU NVSwitch curve and keeps the others")
r = run(TWINSERVE, "simulate", "--model", "llama-3.1-8b", "--hw", out, "--tp", "2", "--explain-ops", "4096")
ar = [line for line in r.stdout.splitlines() if line.strip().startswith("tp_allreduce")]
want = 10.0 + 33554432 / 400e3
check(len(ar) == 1 and "nccl_all_reduce_nvswitch_2" in ar[0] and abs(each_us(r.stdout, "tp_allreduce", 0) / want - 1) < 0.01,
      f"a TP 2 prefill's all-reduce priced on the measured curve ({ar[0].split() if ar else r.stderr[-200:]}; "
      f"want {want:.1f} us)")

# The H200's sweep of 2026-12-04 (tools/gpu-profile on our H200, PyTorch
# 2.11): every fitted op's refit within 8% at the median, and the simulator's
# prices of measured shapes from the fitted profile beside the measured.
real = os.path.join(REPO, "tests", "tools", "data", "h200-gpu-profile-sweep.json")
out_real = os.path.join(SCRATCH, "h200-measured.json")
r = run(sys.executable, TOOL, "--base", "h200", "--from-sweep", real, "--out", out_real, "--overwrite")
check(r.returncode == 0, "gpu-profile fits the H200's measured sweep")
errors = {op: e for op, e in json.load(open(out_real))["fitted_from"]["errors"].items()
          if op not in gp.ELEMENTWISE_CURVES}  # measured against the base's curves, kept
worst = max(errors, key=lambda op: errors[op]["median_abs_error"])
check(errors[worst]["median_abs_error"] < 0.08,
      f"the H200 sweep's median refit errors under 8% (largest {worst}: {100 * errors[worst]['median_abs_error']:.1f}%)")
r = run(TWINSERVE, "simulate", "--model", "llama-3.1-8b", "--hw", out_real, "--explain-ops", "64x2047,4096,1x511")
measured = {(p["op"], p.get("m", p.get("batch")), p.get("context", 0)): p["us"]
            for p in json.load(open(real))["points"] if p["model"] == "llama-3.1-8b"}
for op, nth, key in (("attn_decode", 0, ("attn_decode", 64, 2047)), ("gate_up_proj", 1, ("gate_up_proj", 4096, 0)),
                     ("down_proj", 2, ("down_proj", 1, 0))):
    got, want = each_us(r.stdout, op, nth), measured[key]
    check(abs(got / want - 1) < 0.1, f"H200 {key}: priced {got} us, measured {want} us")

# Bad input: named file and key, non-zero exit, nothing written.
bad = hidden_sweep()
bad["points"][3]["us"] = -1
json.dump(bad, open(sweep_path, "w"))
r = run(sys.executable, TOOL, "--base", "h200", "--from-sweep", sweep_path, "--out", out, "--overwrite")
check(r.returncode == 1 and "points[3].us" in r.stderr and sweep_path in r.stderr, "a negative time is refused by key")
bad = hidden_sweep()
bad["points"] = [p for p in bad["points"] if p["op"] != "attn_decode"]
json.dump(bad, open(sweep_path, "w"))
r = run(sys.executable, TOOL, "--base", "h200", "--from-sweep", sweep_path, "--out", out, "--overwrite")
check(r.returncode == 1 and "no attn_decode point" in r.stderr, "a sweep without decode attention is refused")
bad = hidden_sweep()
bad["all_reduce"]["2"][3][0] = 1
json.dump(bad, open(sweep_path, "w"))
r = run(sys.executable, TOOL, "--base", "h200", "--from-sweep", sweep_path, "--out", out, "--overwrite")
check(r.returncode == 1 and "all_reduce.2" in r.stderr, "an all-reduce curve out of order is refused by key")
r = run(sys.executable, TOOL, "--base", "mi300x", "--from-sweep", real_with_ar(), "--out", out, "--overwrite")
check(r.returncode == 1 and "--link" in r.stderr, "an interconnect with no collective link name asks for --link")
r = run(sys.executable, TOOL, "--base", "no-such-gpu", "--from-sweep", sweep_path, "--out", out, "--overwrite")
check(r.returncode == 1 and "bundled:" in r.stderr, "an unknown base is refused with the bundled list")
r = run(sys.executable, TOOL, "--base", "h200", "--from-sweep", sweep_path, "--out", out)
check(r.returncode == 1 and "--overwrite" in r.stderr, "an existing --out needs --overwrite")
sys.exit(1 if failures else 0)
