"""A what-if loop: token budget x prefix caching on the bundled chat trace.

    PYTHONPATH=build/python /usr/bin/python3 examples/what_if.py

One simulation per point, its summary's figures in a DataFrame row
(docs/python.md). Prints the table; with matplotlib installed, also saves
what_if.png (TTFT p90 and J/token against the token budget).
"""
import os
import sys

import pandas as pd
import twinserve

here = os.path.dirname(os.path.abspath(__file__))
trace = twinserve.trace.read(os.path.join(here, "..", "traces", "samples", "chat_1k.jsonl"), max_requests=400)

rows = []
for budget in (512, 2048, 8192):
    for caching in (True, False):
        r = twinserve.simulate(trace=trace, model="llama-3.1-8b", hw="h100-80gb", max_num_batched_tokens=budget,
                               enable_prefix_caching=caching, no_enable_prefix_caching=not caching, tables=False)
        s = r.summary
        rows.append({
            "max_num_batched_tokens": budget,
            "prefix_caching": caching,
            "ttft_p90_ms": s["ttft_ms"]["p90"],
            "tpot_p90_ms": s["tpot_ms"]["p90"],
            "output_tok_s": s["output_throughput"],
            "hit_rate": s["prefix_cache_hit_rate"],
            "j_per_token": s["energy"].get("joules_per_output_token"),
            "avg_power_w": s["energy"].get("average_power_w"),
        })

table = pd.DataFrame(rows)
pd.set_option("display.width", 160)
print(table.to_string(index=False))

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit(0)
fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
for caching, part in table.groupby("prefix_caching"):
    label = "prefix caching" if caching else "no prefix caching"
    a.plot(part["max_num_batched_tokens"], part["ttft_p90_ms"], marker="o", label=label)
    b.plot(part["max_num_batched_tokens"], part["j_per_token"], marker="o", label=label)
a.set_xscale("log", base=2); b.set_xscale("log", base=2)
a.set_xlabel("max_num_batched_tokens"); a.set_ylabel("TTFT p90 (ms)")
b.set_xlabel("max_num_batched_tokens"); b.set_ylabel("J per output token")
a.legend()
fig.tight_layout()
fig.savefig("what_if.png")
print("wrote what_if.png")
