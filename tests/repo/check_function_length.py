#!/usr/bin/env python3
"""Functions fit on a screen (docs/contributing.md): every C++ function
outside tests/ and the CUDA kernels (.cu) is at most 80 lines, signature to
closing brace, unless the comment right above it says why, starting "Over
80 lines". Prints each offender as PATH:LINE: NAME (N lines) and exits 1
when there is one.

A function is found as the style writes one: a line at column 0, or 2 for a
member defined in its class, that names something and opens a parameter
list, whose body's brace opens within the next eight lines before any ';'.
Its end is the brace that closes it, strings, characters and // comments
left out of the count. Control statements, lambdas assigned with '=' and
anything inside a function body are never taken for a function.

Usage: check_function_length.py SOURCE_DIR [--limit N]
"""
import os
import re
import sys

SKIP_DIRS = {".git", "tests", "build", "third_party"}
KEYWORDS = ("if", "for", "while", "switch", "return", "case", "else", "namespace", "using", "static_assert", "do",
            "template", "class", "struct", "enum", "union", "extern", "typedef")
START = re.compile(r"^( {0,2})[A-Za-z_][\w:<>,*&~ \[\]]*\(")
WHY = re.compile(r"Over 80 lines")


def code_of(line):
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])*'", "''", line)
    return line.split("//")[0]


def comment_above(lines, i):
    """The // comment block right above line i (template lines skipped)."""
    j = i - 1
    while j >= 0 and lines[j].lstrip().startswith("template"):
        j -= 1
    block = []
    while j >= 0 and lines[j].lstrip().startswith("//"):
        block.append(lines[j])
        j -= 1
    return "\n".join(reversed(block))


def body_end(lines, j):
    """The line of the brace that closes the body opening on line j."""
    depth, started = 0, False
    for k in range(j, len(lines)):
        code = code_of(lines[k])
        depth += code.count("{") - code.count("}")
        started = started or "{" in code
        if started and depth <= 0:
            return k
    return len(lines) - 1


def functions(lines):
    """(first line, last line, name) of every function definition."""
    i = 0
    while i < len(lines):
        line = lines[i]
        word = line.strip().split("(")[0].split(" ")[0]
        if START.match(line) and word not in KEYWORDS and "=" not in code_of(line).split("(")[0]:
            j = i
            while j < len(lines) and j - i < 8 and "{" not in code_of(lines[j]) and ";" not in code_of(lines[j]):
                j += 1
            if j < len(lines) and "{" in code_of(lines[j]) and ";" not in code_of(lines[j]).split("{")[0]:
                k = body_end(lines, j)
                head = re.sub(r"__attribute__\(\(.*?\)\)\s*", "", line.strip())
                name = head.split("(")[0].split(" ")[-1]
                yield i, k, name
                i = k + 1
                continue
        i += 1


def offenders(root, limit):
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("build"))
        for f in sorted(filenames):
            if not f.endswith((".cpp", ".hpp")):
                continue
            path = os.path.join(dirpath, f)
            with open(path, errors="replace") as fh:
                lines = fh.read().split("\n")
            for first, last, name in functions(lines):
                n = last - first + 1
                if n > limit and not WHY.search(comment_above(lines, first)):
                    found.append(f"{os.path.relpath(path, root)}:{first + 1}: {name} ({n} lines)")
    return found


def main(argv):
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--limit"):
        print(__doc__.split("\n\n")[-1], file=sys.stderr)
        return 2
    limit = int(argv[3]) if len(argv) == 4 else 80
    found = offenders(argv[1], limit)
    for f in found:
        print(f)
    print(f"{len(found)} functions over {limit} lines without an 'Over {limit} lines' comment saying why")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
