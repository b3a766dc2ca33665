#!/usr/bin/env python3
"""Every repository path a document names exists.

Usage: check_doc_paths.py ROOT [DOC...]

Without DOC, checks README.md, docs/**/*.md and every other *.md under ROOT
outside tests/ and build folders. A path is a word that starts with one of
ROOT's top-level entries followed by '/' (tools/install-deps, sim/run.hpp,
traces/samples/*.jsonl), or a Markdown link target, which is read relative to
the document that holds it. A word inside a URL or after another folder
(build/tools/twinserve, vllm/v1/core/...) is not ours and is left alone. A
trailing ':LINE' or ':LINE-LINE', '#anchor' or punctuation is dropped; a glob
or a placeholder in capitals (NAME.json) must match at least one file; a
module may be named without its extension (models/step_ops). Prints each
broken path as FILE:LINE: PATH and exits 1 when there is one, 2 on a usage
error.
"""
import glob
import os
import re
import sys

LINK_RE = re.compile(r"\]\(([^)\s]+)\)")
URL_RE = re.compile(r"[a-z][a-z0-9+.-]*://\S*", re.I)
SUFFIX_RE = re.compile(r"(:\d+(-\d+)?)+$")
# A placeholder in capitals (profiles/NAME.json, NAME_cmd.cpp,
# regressions/TARGET/) stands for any one name.
PLACEHOLDER_RE = re.compile(r"(?<![A-Za-z0-9])[A-Z]{3,}(?![a-z0-9])")
# A module named without its extension (models/step_ops) is its header or
# source.
MODULE_EXTENSIONS = (".hpp", ".cpp", ".h", ".cu", ".cuh", ".py")
# Paths in the upstream repositories the docs cite, which share a top-level
# folder name with ours: SGLang's python/sglang/, TensorRT-LLM's docs/source/.
FOREIGN_PREFIXES = ("python/sglang/", "docs/source/")


def documents(root):
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        # Build folders (a CMakeCache.txt), git's own, and tests/ (its
        # fixtures name missing paths on purpose) are not documentation.
        dirnames[:] = sorted(d for d in dirnames
                             if not d.startswith(".")
                             and not (rel == "." and d == "tests")
                             and not os.path.exists(os.path.join(dirpath, d, "CMakeCache.txt")))
        found += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".md")]
    return found


def top_level_names(root):
    return sorted((e for e in os.listdir(root)
                   if not e.startswith(".") and os.path.isdir(os.path.join(root, e))
                   and not os.path.exists(os.path.join(root, e, "CMakeCache.txt"))),
                  key=len, reverse=True)


def clean(path):
    path = path.split("#", 1)[0]
    path = SUFFIX_RE.sub("", path.rstrip(".,;:)'\"`"))
    return path.rstrip(".,;:)'\"`")


def exists(base, path):
    full = os.path.normpath(os.path.join(base, PLACEHOLDER_RE.sub("*", path)))
    if any(c in full for c in "*?["):
        return bool(glob.glob(full))
    return os.path.exists(full) or any(os.path.isfile(full + e) for e in MODULE_EXTENSIONS)


def word_paths(line, tops):
    """Repository-rooted words of one line, outside URLs."""
    line = URL_RE.sub(" ", line)
    pattern = re.compile(r"(?<![\w./$~-])((?:%s)/[\w./*+-]*)" % "|".join(map(re.escape, tops)))
    return [m.group(1) for m in pattern.finditer(line) if not m.group(1).startswith(FOREIGN_PREFIXES)]


def check(root, doc, tops):
    broken = []
    rel_doc = os.path.relpath(doc, root)
    with open(doc, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            for target in LINK_RE.findall(line):
                if URL_RE.match(target) or target.startswith(("#", "mailto:")):
                    continue
                path = clean(target)
                if path and not exists(os.path.dirname(doc), path):
                    broken.append(f"{rel_doc}:{n}: {target} (link)")
            for word in word_paths(LINK_RE.sub(" ", line), tops):
                path = clean(word)
                if path and not exists(root, path):
                    broken.append(f"{rel_doc}:{n}: {path}")
    return broken


def main(argv):
    if len(argv) < 2 or not os.path.isdir(argv[1]):
        print("usage: check_doc_paths.py ROOT [DOC...]", file=sys.stderr)
        return 2
    root = os.path.abspath(argv[1])
    docs = [os.path.abspath(d) for d in argv[2:]] or documents(root)
    tops = top_level_names(root)
    broken = [b for d in docs for b in check(root, d, tops)]
    for b in broken:
        print(b)
    print(f"{len(docs)} documents, {len(broken)} broken paths")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
