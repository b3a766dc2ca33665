#!/usr/bin/env python3
"""Every registered test has a label and a time limit (docs/contributing.md).

Usage: check_test_labels.py CTEST BUILD_DIR   (runs CTEST --show-only=json-v1 there)
       check_test_labels.py --json FILE       (a saved listing, for the fixtures)

A test needs a LABELS property naming its part and kind (tests/CMakeLists.txt
gives every test its folder's labels) and a TIMEOUT above 0. Prints each test
that lacks one and exits 1 if any; exits 2 when the listing cannot be read.
"""
import json
import subprocess
import sys


def listing(argv):
    if len(argv) == 3 and argv[1] == "--json":
        with open(argv[2], encoding="utf-8") as f:
            return json.load(f)
    if len(argv) == 3:
        out = subprocess.run([argv[1], "--show-only=json-v1"], cwd=argv[2], capture_output=True, text=True,
                             check=True).stdout
        return json.loads(out)
    raise ValueError("usage: check_test_labels.py CTEST BUILD_DIR | --json FILE")


def problems(tests):
    found = []
    for t in tests:
        if "_NOT_BUILT" in t["name"]:
            # catch_discover_tests' stand-in for an executable not built yet:
            # its cases, and so their properties, are unknown.
            found.append(f"{t['name']}: not built, so its tests cannot be checked (build every target first)")
            continue
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        if not props.get("LABELS"):
            found.append(f"{t['name']}: no LABELS")
        try:
            timeout = float(props.get("TIMEOUT", 0))
        except (TypeError, ValueError):
            timeout = 0
        if timeout <= 0:
            found.append(f"{t['name']}: no TIMEOUT")
    return found


def main(argv):
    try:
        tests = listing(argv).get("tests", [])
    except (OSError, ValueError, subprocess.CalledProcessError) as e:
        print(f"check_test_labels.py: {e}", file=sys.stderr)
        return 2
    found = problems(tests)
    for p in found:
        print(p)
    labels = sorted({label for t in tests for p in t.get("properties", []) if p["name"] == "LABELS"
                     for label in p["value"]})
    print(f"{len(tests)} tests, labels {' '.join(labels)}; {len(found)} problems")
    return 1 if found or not tests else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
