"""Python-defined policies (docs/python.md, "Python policies"): a router and
a queue-order key function written in Python, called by the core through
its plug-in interfaces. Each is checked against the built-in policy it
re-implements: the same decisions give the same summary, bit for bit.

Run by ctest with PYTHONPATH=build/python and TWIN_SOURCE_DIR set. Skips
(exit 77) when the module or pandas cannot be imported.
"""
import json
import os
import sys

try:
    import twinserve
    from twinserve import _core
except ImportError as e:
    print(f"SKIPPED: {e}")
    sys.exit(77)

SRC = os.environ["TWIN_SOURCE_DIR"]
TRACE = os.path.join(SRC, "traces", "samples", "chat_1k.jsonl")
FLAGS = dict(model="llama-3.1-8b", hw="h100-80gb", max_requests=400, replicas=3, num_gpu_blocks_override=1200,
             tables=False)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def figures(result):
    """The summary without what differs between two runs or two spellings of one policy."""
    s = dict(result.summary)
    for key in ("wall_time_s", "config"):
        s.pop(key, None)
    return json.dumps(s, sort_keys=True)


def raises(call, kind, text, what):
    try:
        call()
        check(False, f"{what}: no exception")
    except kind as e:
        check(text in str(e), f"{what}: the message says '{text}': {e}")


# 1. Routers: Python re-implementations decide as the built-in ones do.
calls = []


def round_robin(request, replicas):
    calls.append(request["id"])
    return (len(calls) - 1) % len(replicas)


def least_outstanding(request, replicas):
    loads = [r["outstanding"] for r in replicas]
    return loads.index(min(loads))  # ties to the lowest index, as the built-in


def dp_balance(request, replicas):
    scores = [r["waiting"] * 4 + r["running"] for r in replicas]
    return scores.index(min(scores))


for name, fn in (("round_robin", round_robin), ("least_outstanding", least_outstanding), ("dp_balance", dp_balance)):
    builtin = twinserve.simulate(trace=TRACE, router=name, **FLAGS)
    python = twinserve.simulate(trace=TRACE, router=fn, **FLAGS)
    check(figures(builtin) == figures(python), f"a Python {name} gives the built-in's summary")
check(len(calls) == 400, f"the Python router is called once per request ({len(calls)})")
check(sorted(calls) == list(range(400)), "with each request's id")
check(figures(twinserve.simulate(trace=TRACE, router="least_kv", **FLAGS)) !=
      figures(twinserve.simulate(trace=TRACE, router="round_robin", **FLAGS)), "routers differ on this trace")

# 2. Queue orders: a key function as the built-in orders.
order_flags = dict(FLAGS, replicas=1, num_gpu_blocks_override=600, max_num_seqs=16)
for name, fn in (("priority", lambda r: r["priority"]),
                 ("shortest_prompt", lambda r: r["prompt_len"]),
                 ("shortest_remaining", lambda r: r["output_len"] - r["num_output"])):
    builtin = twinserve.simulate(trace=TRACE, queue_order=name, **order_flags)
    python = twinserve.simulate(trace=TRACE, queue_order=fn, **order_flags)
    check(figures(builtin) == figures(python), f"a Python {name} key gives the built-in's summary")
check(figures(twinserve.simulate(trace=TRACE, queue_order="shortest_prompt", **order_flags)) !=
      figures(twinserve.simulate(trace=TRACE, queue_order="fcfs", **order_flags)), "orders differ on this trace")

# 3. Both at once, and the run still releases and retakes the GIL cleanly.
both = twinserve.simulate(trace=TRACE, router=least_outstanding, queue_order=lambda r: r["prompt_len"], **FLAGS)
check(both.summary["num_requests"] == 400, "a Python router and queue order together")

# 4. Errors: what the function did wrong, raised as RuntimeError after the run unwinds.
raises(lambda: twinserve.simulate(trace=TRACE, router=lambda q, rs: len(rs), **FLAGS), RuntimeError,
       "the Python router returned 3", "an index out of range")
raises(lambda: twinserve.simulate(trace=TRACE, router=lambda q, rs: 1 / 0, **FLAGS), RuntimeError,
       "ZeroDivisionError", "an exception in the router")
raises(lambda: twinserve.simulate(trace=TRACE, queue_order=lambda r: "first", **order_flags), RuntimeError,
       "not an int", "a key that is not an int")
# Naming the policy without giving a function is a usage error.
raises(lambda: _core.simulate(["simulate", "--trace", TRACE, "--model", "llama-3.1-8b", "--replicas", "2",
                               "--router", "python"], False, False), ValueError,
       "router=fn", "--router python without a function")
# A run after an error works (the functions of the failed run are gone).
check(twinserve.simulate(trace=TRACE, **FLAGS).summary["num_requests"] == 400, "a plain run after the errors")

if failures:
    print(f"{len(failures)} checks failed")
    sys.exit(1)
print("all checks passed")
