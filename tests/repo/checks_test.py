#!/usr/bin/env python3
"""Each of this folder's checks fails when what it checks is broken: run on a
fixture that breaks its rule, it exits 1 and names every offender (and no
innocent); run on a fixture that keeps the rule, it exits 0.

Usage: checks_test.py doc_paths|test_labels|test_names|function_length SOURCE_DIR
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "fixtures")

# check: (script, broken args, good args, lines the broken run must print,
#         text it must not print)
CASES = {
    "doc_paths": (
        "check_doc_paths.py",
        lambda src: [src, os.path.join(FIX, "doc_paths_broken.md")],
        lambda src: [src, os.path.join(FIX, "doc_paths_good.md")],
        ["doc_paths_broken.md:3: sim/no_such_scheduler.cpp", "doc_paths_broken.md:4: tests/core_sched/no_such_test.cpp",
         "doc_paths_broken.md:5: ../../../engine/core/no_such_notes.md (link)", "1 documents, 3 broken paths"],
        "scheduler.md"),
    "test_labels": (
        "check_test_labels.py",
        lambda src: ["--json", os.path.join(FIX, "test_labels_broken.json")],
        lambda src: ["--json", os.path.join(FIX, "test_labels_good.json")],
        ["no labels: no LABELS", "no timeout: no TIMEOUT", "nothing at all: no LABELS", "nothing at all: no TIMEOUT",
         "4 tests, labels quick sim; 4 problems"],
        "labelled and timed:"),
    "test_names": (
        "check_test_names.py",
        lambda src: [os.path.join(FIX, "test_names")],
        lambda src: [os.path.join(FIX, "test_names_good")],
        ["part/test_old_style.cpp: holds TEST_CASEs", "part/empty_test.cpp: named as a test but holds no TEST_CASE",
         "part/run_things.py: a script a test runs", "3 files break the test naming rule"],
        "good_test.cpp"),
    "function_length": (
        "check_function_length.py",
        lambda src: [os.path.join(FIX, "function_length")],
        lambda src: [os.path.join(FIX, "function_length_good")],
        ["src/long.cpp:3: long_without_a_reason (81 lines)", "member_too_long (86 lines)",
         "2 functions over 80 lines"],
        "long_with_a_reason"),
}


def run(script, args):
    r = subprocess.run([sys.executable, os.path.join(HERE, script), *args], capture_output=True, text=True)
    print(f"$ {script} {' '.join(args)}\n{r.stdout}{r.stderr}(exit {r.returncode})\n")
    return r


def main(argv):
    if len(argv) != 3 or argv[1] not in CASES:
        print("usage: checks_test.py doc_paths|test_labels|test_names|function_length SOURCE_DIR", file=sys.stderr)
        return 2
    script, broken_args, good_args, want, innocent = CASES[argv[1]]
    failures = []
    broken = run(script, broken_args(argv[2]))
    if broken.returncode != 1:
        failures.append(f"the broken fixture exited {broken.returncode}, not 1")
    failures += [f"not reported: {w}" for w in want if w not in broken.stdout]
    if innocent in broken.stdout:
        failures.append(f"an innocent was reported: {innocent}")
    good = run(script, good_args(argv[2]))
    if good.returncode != 0:
        failures.append(f"the good fixture exited {good.returncode}, not 0")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
