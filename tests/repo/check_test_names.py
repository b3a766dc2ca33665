#!/usr/bin/env python3
"""One naming rule for test files (docs/contributing.md, "Tests").

Usage: check_test_names.py TESTS_DIR

In each part folder TESTS_DIR/<part>/:
  - a C++ file holding TEST_CASEs is named <subject>_test.cpp, and a file so
    named holds at least one (helpers take any other name);
  - a script a CMakeLists.txt there runs is <subject>_test.py/.sh (a test)
    or check_<what>.py/.cmake (a check over the source tree).
The files named before the rule (LEGACY) are let be until they are next
renamed; a new file is held to it. Prints each offender and exits 1 if any.
"""
import os
import re
import sys

LEGACY = {
    "backend/test_attention.cpp", "backend/test_dense_ops.cpp", "backend/test_fp8.cpp",
    "backend/test_int8_gemm.cpp", "backend/test_moe_sampling.cpp", "backend/test_threads_errors.cpp",
    "backend_cuda/test_argmax_rule.cpp", "backend_cuda/test_attention_mma_host.cpp",
    "backend_cuda/test_cuda_cli.cpp", "backend_cuda/test_cuda_model.cpp", "backend_cuda/test_cuda_ops.cpp",
    "backend_cuda/test_decode_attention.cpp", "backend_cuda/test_paged_index.cpp",
    "backend_cuda/test_sampling_walk.cpp",
    "core_sched/test_config.cpp", "core_sched/test_disaggregation.cpp", "core_sched/test_event_queue.cpp",
    "core_sched/test_overload.cpp", "core_sched/test_random.cpp", "core_sched/test_router.cpp",
    "core_sched/test_scenarios.cpp", "core_sched/test_serving_loop.cpp", "core_sched/test_speculative.cpp",
    "core_sched/test_vllm_behaviours.cpp",
    "python/test_python_api.py", "report_render/render_reports.sh",
}
TEST_CASE_RE = re.compile(r"^\s*(TEST_CASE|TEMPLATE_TEST_CASE|SCENARIO)\s*\(", re.M)
SCRIPT_RE = re.compile(r"\$\{CMAKE_CURRENT_SOURCE_DIR\}/([\w.-]+\.(?:py|sh|cmake))\b")
SCRIPT_NAME_RE = re.compile(r"^([\w-]+_test\.(py|sh)|check_[\w-]+\.(py|cmake))$")


def offenders(tests_dir):
    found = []
    for part in sorted(os.listdir(tests_dir)):
        folder = os.path.join(tests_dir, part)
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            rel = f"{part}/{name}"
            if not name.endswith(".cpp") or rel in LEGACY:
                continue
            with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
                has_cases = bool(TEST_CASE_RE.search(f.read()))
            if has_cases and not name.endswith("_test.cpp"):
                found.append(f"{rel}: holds TEST_CASEs, so its name ends in _test.cpp")
            if name.endswith("_test.cpp") and not has_cases:
                found.append(f"{rel}: named as a test but holds no TEST_CASE (a helper takes another name)")
        lists = os.path.join(folder, "CMakeLists.txt")
        if os.path.exists(lists):
            with open(lists, encoding="utf-8") as f:
                scripts = sorted(set(SCRIPT_RE.findall(f.read())))
            found += [f"{part}/{s}: a script a test runs is <subject>_test.py/.sh or check_<what>.py/.cmake"
                      for s in scripts if f"{part}/{s}" not in LEGACY and not SCRIPT_NAME_RE.match(s)]
    return found


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print("usage: check_test_names.py TESTS_DIR", file=sys.stderr)
        return 2
    found = offenders(argv[1])
    for o in found:
        print(o)
    print(f"{len(found)} files break the test naming rule")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
