#!/usr/bin/env python3
"""make test runs the example notebooks (examples/*.ipynb) so they cannot rot.

1. Every notebook in the repository is stripped: no outputs, no execution
   counts (a notebook committed with its outputs fails here, naming it).
2. Each is executed top to bottom with nbclient (Debian's python3-nbclient,
   the python3 kernel of python3-ipykernel), in its own folder, with the
   build tree's `twinserve` module on PYTHONPATH; a cell that raises fails
   the test with the notebook, the cell and the error.

usage: notebooks_test.py EXAMPLES_DIR MODULE_DIR [--strip-check-only]
Exit 77 (skipped, visibly) when nbclient or the kernel is missing.
"""
import json
import os
import sys


def strip_problems(path):
    with open(path) as f:
        nb = json.load(f)
    problems = []
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        if cell.get("outputs"):
            problems.append(f"cell {i}: has outputs")
        if cell.get("execution_count") is not None:
            problems.append(f"cell {i}: has an execution count")
    if "widgets" in nb.get("metadata", {}):
        problems.append("notebook metadata holds widget state")
    return problems


def main():
    if len(sys.argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    examples, module_dir = sys.argv[1], sys.argv[2]
    strip_only = "--strip-check-only" in sys.argv[3:]
    notebooks = sorted(os.path.join(examples, n) for n in os.listdir(examples) if n.endswith(".ipynb"))
    if not notebooks:
        print(f"no notebooks in {examples}")
        return 1
    failed = False
    for path in notebooks:
        for p in strip_problems(path):
            print(f"{path}: {p}: strip it (jupyter nbconvert --clear-output --inplace, or nbstripout)")
            failed = True
    if failed or strip_only:
        return 1 if failed else 0
    try:
        import nbformat
        from nbclient import NotebookClient
        from nbclient.exceptions import CellExecutionError
        from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
        KernelSpecManager().get_kernel_spec("python3")
    except (ImportError, NoSuchKernel) as e:
        print(f"SKIPPED: cannot execute notebooks here ({e}); tools/install-deps installs python3-nbclient "
              "python3-ipykernel")
        return 77
    # The kernel inherits this environment: the build tree's module first.
    os.environ["PYTHONPATH"] = module_dir + os.pathsep + os.environ.get("PYTHONPATH", "")
    os.environ["MPLBACKEND"] = "Agg"
    os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # ipykernel's debugger note on frozen modules
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(nb, timeout=600, kernel_name="python3",
                                resources={"metadata": {"path": os.path.dirname(os.path.abspath(path))}})
        try:
            client.execute()
        except CellExecutionError as e:
            print(f"{path}: a cell failed:\n{e}")
            failed = True
            continue
        print(f"{path}: ran {sum(c.cell_type == 'code' for c in nb.cells)} code cells")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
