#!/usr/bin/env python3
"""Runs the README's tour, command by command, in a scratch folder.

The README promises that every command of its tour runs from a fresh clone.
This reads the tour's first sh block as a user would copy it (continuation
lines joined, comments dropped), puts the built twinserve in place of $B and
runs each command in order, in a folder where `traces/` is the repository's.
Inputs are made smaller where a count only sets the run's length (10,000
generated requests become 300, 512 replicas 8), so the whole tour takes
seconds. A few commands cannot run here: each is skipped with its reason
printed, never silently. A command the README says is refused must fail
with exit 1, the others must exit 0.

usage: readme_tour_test.py README TWINSERVE SCRATCH_DIR
"""
import os
import re
import shutil
import subprocess
import sys

# (pattern in the command, why it does not run in a test)
SKIPS = [
    ("models show ./my-model", "a user's own config.json"),
    ("azure_conv.csv", "Azure's trace, downloaded by the user"),
    ("sharegpt.json", "ShareGPT's dataset, downloaded by the user"),
    (" serve ", "a server that runs until stopped: tests/serve drives it over HTTP"),
    (" bench ", "needs a live server: tests/tools/bench_test and bench_timing_test"),
    ("validate --measured", "needs a bench run against a live server or a vLLM result file"),
    ("PYTHONPATH=build/python", "the Python module: tests/python runs it against the command line"),
]
# Smaller inputs with the same commands: (pattern, replacement).
SHRINK = [
    (r"--requests 10000\b", "--requests 300"),
    (r"--replicas 512\b", "--replicas 8"),
    (r"--replicas 32\b", "--replicas 4"),
]
# Commands the README says are refused: (pattern, expected exit code).
REFUSED = [("--explain-memory", 1)]


def tour_commands(readme):
    text = open(readme, encoding="utf-8").read()
    start = text.index("## A short tour")
    block = text[text.index("```sh", start) + len("```sh"):]
    block = block[: block.index("```")]
    commands, current = [], ""
    for raw in block.splitlines():
        line = raw.rstrip()
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.strip().startswith("#"):  # a comment line inside a continuation
            continue
        # Drop a trailing comment (the tour has no '#' inside arguments).
        code = re.sub(r"\s+#.*$", "", line)
        if code.endswith("\\"):
            current += code[:-1] + " "
            continue
        current += code
        if current.strip():
            commands.append(current.strip())
        current = ""
    return commands


def main():
    readme, twinserve, scratch = sys.argv[1:4]
    repo = os.path.dirname(os.path.abspath(readme))
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    os.symlink(os.path.join(repo, "traces"), os.path.join(scratch, "traces"))
    commands = tour_commands(readme)
    if len(commands) < 20:
        print(f"FAIL: found only {len(commands)} commands in the README's tour")
        return 1
    failures, ran = 0, 0
    for cmd in commands:
        skip = next((why for pat, why in SKIPS if pat in f" {cmd} "), None)
        if skip:
            print(f"skip: {cmd}\n      ({skip})")
            continue
        if cmd.startswith("B="):
            continue  # the tour's own binary path; $B is replaced below
        for pat, rep in SHRINK:
            cmd = re.sub(pat, rep, cmd)
        cmd = cmd.replace("$B", twinserve)
        expected = next((code for pat, code in REFUSED if pat in cmd), 0)
        result = subprocess.run(cmd, shell=True, cwd=scratch, capture_output=True, text=True, timeout=300)
        ran += 1
        status = "ok" if result.returncode == expected else "FAIL"
        print(f"{status}: exit {result.returncode} (expected {expected}): {cmd}")
        if result.returncode != expected:
            failures += 1
            print(result.stderr[-2000:])
    print(f"{ran} commands run, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
