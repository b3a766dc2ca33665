"""twinserve's Python module against its command line (docs/python.md).

Run by ctest with PYTHONPATH=build/python, TWIN_BIN and TWIN_SOURCE_DIR set.
Skips (exit 77) when the module or pandas cannot be imported.
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import pandas as pd
    import twinserve
except ImportError as e:
    print(f"SKIPPED: {e}")
    sys.exit(77)

BIN = os.environ["TWIN_BIN"]
SRC = os.environ["TWIN_SOURCE_DIR"]
TRACE = os.path.join(SRC, "traces", "samples", "chat_1k.jsonl")
FLAGS = dict(model="llama-3.1-8b", hw="h100-80gb", max_requests=300, max_num_batched_tokens=2048,
             slo="ttft_p90<=2s,tpot_p90<=100ms")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def figures(summary):
    """The summary without what differs between two runs of the same inputs."""
    s = dict(summary)
    s.pop("wall_time_s", None)
    return s


def cli_run(out, **flags):
    words = [BIN, "simulate", "--trace", TRACE, "--out", out, "--no-progress"] + twinserve.flag_words(flags)
    subprocess.run(words, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)


with tempfile.TemporaryDirectory() as tmp:
    # 1. The same inputs give the same summary numbers as the command line's summary.json.
    cli = cli_run(os.path.join(tmp, "cli"), **FLAGS)
    r = twinserve.simulate(trace=TRACE, **FLAGS)
    check(json.dumps(figures(r.summary)) == json.dumps(figures(cli)), "simulate's summary equals summary.json")
    check(r.summary["energy"]["known"], "the H100 run's energy is known")
    check(isinstance(r.warnings, list), "warnings is a list")

    # 2. The tables hold the records requests.csv and steps.csv hold.
    csv_requests = pd.read_csv(os.path.join(tmp, "cli", "requests.csv"))
    csv_steps = pd.read_csv(os.path.join(tmp, "cli", "steps.csv"))
    check(len(r.requests) == len(csv_requests) == r.summary["num_requests"], "one row per request")
    check(len(r.steps) == len(csv_steps) == r.summary["num_steps"], "one row per step")
    a = r.requests.sort_values("id").reset_index(drop=True)
    b = csv_requests.sort_values("id").reset_index(drop=True)
    check(((a["ttft_ms"] - b["ttft_ms"]).abs().max()) < 1e-3, "ttft_ms as requests.csv's")
    check(((a["e2el_ms"] - b["e2el_ms"]).abs().max()) < 1e-3, "e2el_ms as requests.csv's")
    check(list(a["outcome"].astype(str)) == list(b["outcome"]), "outcomes as requests.csv's")
    step_j = r.steps["energy_j"].sum()
    check(abs(step_j - r.summary["energy"]["step_energy_j"]) < 1e-3, "the steps' energy adds up to step_energy_j")

    # 3. A trace as a DataFrame or a list of dicts is the same trace.
    df = twinserve.trace.read(TRACE, max_requests=300)
    check(len(df) == 300 and {"arrival_s", "prompt_len", "output_len"} <= set(df.columns), "trace.read's columns")
    flags = dict(FLAGS)
    flags.pop("max_requests")
    from_df = twinserve.simulate(trace=df, **flags)
    strip = lambda s: {k: v for k, v in figures(s).items() if k != "config"}
    expect = strip(r.summary)
    expect_no_max = {k: v for k, v in expect.items()}
    check(json.dumps(strip(from_df.summary)) == json.dumps(expect_no_max), "a DataFrame trace gives the same figures")
    rows = df.head(20).to_dict("records")
    check(twinserve.simulate(trace=rows, **flags).summary["num_requests"] == 20, "a list of dicts is a trace")

    # 4. Errors carry the command line's message, naming the flag.
    try:
        twinserve.simulate(trace=TRACE, max_num_batchd_tokens=5)
        check(False, "a bad flag raises")
    except ValueError as e:
        check("--max-num-batchd-tokens" in str(e), f"the error names the flag: {e}")
    try:
        twinserve.simulate(trace=TRACE, hw="no-such-gpu")
        check(False, "a bad hardware name raises")
    except ValueError as e:
        check("no-such-gpu" in str(e), f"the error names the value: {e}")

    # 5. Descriptors and a generated trace as plain objects.
    check(twinserve.hw.show("h100-80gb")["power"]["max_w"] == 700, "hw.show has the power figures")
    check(twinserve.models.show("llama-3.1-8b")["num_hidden_layers"] == 32, "models.show")
    gen = twinserve.trace.generate(requests=50, rate=5, seed=3)
    check(len(gen) == 50, "trace.generate")

    # 6. A plan's candidates as a DataFrame; a power budget prunes.
    p = twinserve.plan(trace=df.head(120), model="llama-3.1-8b", hw="h100-80gb", tp=[1, 2],
                       slo="ttft_p90<=2s,tpot_p90<=100ms", probe_requests=60, power_budget_w=1000, quiet=True)
    check(len(p.candidates) == 2, "two candidates")
    pruned = p.candidates[p.candidates["candidate.tp"] == 2]
    # power_budget_w (W) is the earlier spelling of max_power_kw; the reason names the kW flag.
    check(len(pruned) == 1 and "--max-power-kw 1.000" in pruned["reason"].iloc[0], "tp 2 is over the power budget")

if failures:
    print(f"{len(failures)} checks failed")
    sys.exit(1)
print("all checks passed")
