"""twinserve from Python: the command line's commands as functions (docs/python.md).

Keyword arguments are the command's own flags, spelled with underscores
(``max_num_batched_tokens=2048`` is ``--max-num-batched-tokens 2048``) and
parsed by the command line's own parser, so the two cannot drift apart:
``True`` gives a bare flag, ``False`` or ``None`` leaves it out, a list or
tuple is joined with commas. Errors are raised with the command line's
message: ``ValueError`` for usage (a bad flag or value, naming it),
``RuntimeError`` for the rest. The GIL is released while a command runs, and
Ctrl-C (``KeyboardInterrupt``) stops a simulation cleanly.
"""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from . import _core

__all__ = ["simulate", "plan", "Result", "PlanResult", "models", "hw", "trace", "flag_words"]

_OUTCOMES = ("finished", "aborted", "rejected")


def flag_words(flags: Mapping[str, Any]) -> list[str]:
    """The command line words of keyword arguments, in their order."""
    words: list[str] = []
    for key, value in flags.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            words.append(flag)
        elif isinstance(value, (list, tuple)):
            words += [flag, ",".join(str(v) for v in value)]
        elif isinstance(value, dict):
            words += [flag, json.dumps(value)]  # e.g. speculative_config
        else:
            words += [flag, str(value)]
    return words


def _pandas():
    try:
        import pandas
    except ImportError as e:  # the tables need it; simulate(..., tables=False) does not
        raise ImportError("twinserve: DataFrames need pandas (Debian: apt-get install python3-pandas)") from e
    return pandas


class _TraceFile:
    """A trace given as a path, a DataFrame or a list of dicts, as a path.

    Rows are written as our JSONL format (docs/traces.md, "Our formats"):
    id (default: the row's position), arrival_s, prompt_len, output_len and
    any of priority, session_id, cancel_s, hash_block_size, hash_ids.
    """

    def __init__(self, trace: Any):
        self.path = None
        self._tmp = None
        if trace is None:
            return
        if isinstance(trace, (str, os.PathLike)):
            self.path = os.fspath(trace)
            return
        rows = trace.to_dict("records") if hasattr(trace, "to_dict") else list(trace)
        fd, self._tmp = tempfile.mkstemp(prefix="twinserve-trace-", suffix=".jsonl")
        with os.fdopen(fd, "w") as f:
            for i, row in enumerate(rows):
                f.write(json.dumps(_trace_row(i, row)) + "\n")
        self.path = self._tmp

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._tmp:
            os.unlink(self._tmp)


_TRACE_KEYS = ("id", "arrival_s", "prompt_len", "output_len", "priority", "session_id", "cancel_s",
               "hash_block_size", "hash_ids", "prompt_tokens")


def _trace_row(i: int, row: Mapping[str, Any]) -> dict:
    out = {"id": i}
    for key in _TRACE_KEYS:
        if key not in row:
            continue
        value = row[key]
        if value is None or (isinstance(value, float) and value != value):
            continue  # NaN: unset
        if hasattr(value, "tolist"):
            value = value.tolist()
        elif hasattr(value, "item"):
            value = value.item()
        out[key] = value
    if not out.get("hash_ids"):
        out.pop("hash_ids", None)
        out.pop("hash_block_size", None)
    if out.get("session_id") == -1:
        del out["session_id"]
    for key in ("arrival_s", "prompt_len", "output_len"):
        if key not in out:
            raise ValueError(f"trace row {i}: missing {key} (a trace row needs arrival_s, prompt_len, output_len)")
    return out


@dataclass
class Result:
    """One simulation: summary.json as a dict, the records as DataFrames."""
    summary: dict
    requests: Any = None  # pandas.DataFrame, requests.csv's columns
    steps: Any = None     # pandas.DataFrame, steps.csv's columns plus energy_j
    warnings: list = field(default_factory=list)


def _requests_frame(columns: dict):
    pd = _pandas()
    import numpy as np
    df = pd.DataFrame({k: v for k, v in columns.items() if k not in ("outcome_code", "reason")})
    df.insert(2, "outcome", pd.Categorical.from_codes(columns["outcome_code"], categories=list(_OUTCOMES)))
    finished = df["outcome"] == "finished"
    # requests.csv's derived columns, by its rules (docs/outputs.md).
    df["ttft_ms"] = (df["first_token_s"] - df["arrival_s"]) * 1e3
    tpot = (df["finish_s"] - df["first_token_s"]) * 1e3 / (df["output_tokens"] - 1)
    df["tpot_ms"] = tpot.where(finished & (df["output_tokens"] >= 2), np.nan)
    df["e2el_ms"] = ((df["finish_s"] - df["arrival_s"]) * 1e3).where(finished, np.nan)
    df["reason"] = columns["reason"]
    return df


def simulate(trace: Any = None, *, tables: bool = True, router: Any = None, queue_order: Any = None,
             **flags) -> Result:
    """Runs `twinserve simulate` with these flags and returns its result.

    trace: a path (any format the readers know), a DataFrame or a list of
    dicts (arrival_s, prompt_len, output_len, ...). tables=False skips the
    per-request and per-step DataFrames (faster for large runs).
    router: a registered router's name, or a Python function
    fn(request, replicas) -> replica index (docs/python.md, "Python policies").
    queue_order: a registered queue order's name, or a Python function
    fn(request) -> int key, lower served first.
    """
    router_fn = router if callable(router) else None
    order_fn = queue_order if callable(queue_order) else None
    flags["router"] = "python" if router_fn else router
    flags["queue_order"] = "python" if order_fn else queue_order
    with _TraceFile(trace) as t:
        words = ["simulate"] + (["--trace", t.path] if t.path else []) + flag_words(flags)
        out = _core.simulate(words, tables, tables, router_fn, order_fn)
    result = Result(summary=json.loads(out["summary_json"]), warnings=list(out["notes"]) + list(out["warnings"]))
    if tables:
        result.requests = _requests_frame(out["requests"])
        result.steps = _pandas().DataFrame(out["steps"])
    return result


@dataclass
class PlanResult:
    """A capacity plan: every candidate as a row, the chosen one, plan.json."""
    candidates: Any  # pandas.DataFrame, one row per candidate
    chosen: dict | None
    plan: dict


def plan(trace: Any, *, out: str | None = None, **flags) -> PlanResult:
    """Runs `twinserve plan` with these flags (slo=..., model=..., hw=...)."""
    pd = _pandas()
    with tempfile.TemporaryDirectory(prefix="twinserve-plan-") as tmp, _TraceFile(trace) as t:
        flags.setdefault("no_plots", True)
        words = ["plan", "--trace", t.path, "--out", out or os.path.join(tmp, "plan")] + flag_words(flags)
        result = json.loads(_core.plan(words))
    rows = result.get("candidates", []) + result.get("pruned", [])
    candidates = pd.json_normalize(rows) if rows else pd.DataFrame()
    return PlanResult(candidates=candidates, chosen=result.get("chosen"), plan=result)


def run(trace: Any, *, out: str | None = None, **flags) -> Result:
    """Runs `twinserve run`: the engine itself on this machine (--backend cpu
    by default), the trace played in wall-clock time (asap=True: all at
    once). Returns its summary.json (with "measured_energy": RAPL or NVML
    where readable, docs/energy.md) and requests.csv as a DataFrame.
    """
    pd = _pandas()
    with tempfile.TemporaryDirectory(prefix="twinserve-run-") as tmp, _TraceFile(trace) as t:
        folder = out or os.path.join(tmp, "run")
        flags.setdefault("quiet", True)
        _core.run_command(["run", "--trace", t.path, "--out", folder] + flag_words(flags))
        with open(os.path.join(folder, "summary.json")) as f:
            summary = json.load(f)
        requests = pd.read_csv(os.path.join(folder, "requests.csv"))
    return Result(summary=summary, requests=requests)


def validate(*, out: str | None = None, **flags) -> dict:
    """Runs `twinserve validate` with these flags (measured="requests.csv",
    trace=..., model=..., hw=... for a run measured elsewhere; see
    docs/validate.md) and returns report.json's content."""
    with tempfile.TemporaryDirectory(prefix="twinserve-validate-") as tmp:
        folder = out or os.path.join(tmp, "validate")
        flags.setdefault("no_plots", True)
        _core.run_command(["validate", "--out", folder] + flag_words(flags))
        with open(os.path.join(folder, "report.json")) as f:
            return json.load(f)


class _Show:
    def __init__(self, command: str):
        self._command = command

    def show(self, name: str) -> dict:
        """The descriptor as `twinserve %s show NAME --json` prints it."""
        return json.loads(_core.run_command([self._command, "show", name, "--json"]))


models = _Show("models")
hw = _Show("hw")


class _Trace:
    """`twinserve trace`: read, generate, stats, convert."""

    @staticmethod
    def read(path: str, **flags):
        """A trace as a DataFrame: id, arrival_s, prompt_len, output_len, priority, session_id, cancel_s."""
        return _pandas().DataFrame(_core.read_trace(["--trace", os.fspath(path)] + flag_words(flags)))

    @staticmethod
    def generate(out: str | None = None, **flags):
        """Runs `trace generate` (flags as the command's) and reads the result back."""
        if out is not None:
            _core.run_command(["trace", "generate", os.fspath(out)] + flag_words(flags))
            return _Trace.read(out)
        with tempfile.TemporaryDirectory(prefix="twinserve-trace-") as tmp:
            path = os.path.join(tmp, "trace.jsonl")
            _core.run_command(["trace", "generate", path] + flag_words(flags))
            return _Trace.read(path)

    @staticmethod
    def stats(path: str, **flags) -> dict:
        return json.loads(_core.run_command(["trace", "stats", os.fspath(path), "--json"] + flag_words(flags)))

    @staticmethod
    def convert(src: str, dst: str, **flags) -> None:
        _core.run_command(["trace", "convert", os.fspath(src), os.fspath(dst)] + flag_words(flags))


trace = _Trace()
