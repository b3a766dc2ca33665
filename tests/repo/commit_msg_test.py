#!/usr/bin/env python3
"""tools/commit-msg on good and bad messages, and tools/install-hooks in a
scratch clone, a worktree of it and an unpacked tarball (docs/contributing.md).

Usage: commit_msg_test.py SOURCE_DIR SCRATCH_DIR [--install]
Without --install: the message rules only (no git needed). With --install:
the hook installed and run by git itself; exits 77 (ctest: skipped) where
git is not installed.
"""
import os
import shutil
import subprocess
import sys

FAILURES = []


def expect(what, ok):
    print(("ok:   " if ok else "FAIL: ") + what)
    if not ok:
        FAILURES.append(what)


def run_hook(hook, scratch, text, staged):
    path = os.path.join(scratch, "MSG")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    r = subprocess.run([sys.executable, hook, path, "--staged-lines", str(staged)], capture_output=True, text=True)
    return r.returncode, r.stderr


def check_messages(src, scratch):
    hook = os.path.join(src, "tools", "commit-msg")
    s72, s73 = "a" * 72, "b" * 73
    cases = [  # (what, message, staged lines, exit code, text in stderr)
        ("a 72-character subject and a body", f"{s72}\n\nWhy.\n", 500, 0, None),
        ("a short subject alone on a small change", "Fix a typo in docs/plan.md\n", 3, 0, None),
        ("a 73-character subject is refused", f"{s73}\n\nWhy.\n", 5, 1, "73 characters"),
        ("a 1,712-character subject is refused", "c" * 1712 + "\n", 5, 1, "1712 characters"),
        ("a non-blank second line is refused", "Subject\nbody glued on\n", 5, 1, "second line"),
        ("an empty message is refused", "\n\n# only comments\n", 5, 1, "empty"),
        ("a large change without a body is warned about, not refused", "Rework the scheduler\n", 400, 0,
         "400 lines and has no body"),
        ("a small change without a body has no warning", "Rename a variable\n", 20, 0, ""),
        ("git's comments and the scissors part are not the message",
         f"Subject\n\nBody.\n# {s73}\n# ------------------------ >8 ------------------------\n{s73}\n", 50, 0, ""),
        ("a merge subject needs no body", "Merge branch 's50-infra'\n", 900, 0, ""),
        ("72 characters are counted, not bytes", "é" * 72 + "\n\nWhy.\n", 50, 0, None),
    ]
    for what, text, staged, code, needle in cases:
        rc, err = run_hook(hook, scratch, text, staged)
        ok = rc == code and (needle is None or (needle in err if needle else err == ""))
        expect(f"{what} (exit {rc}{', ' + err.strip() if err.strip() else ''})", ok)
    r = subprocess.run([sys.executable, hook], capture_output=True, text=True)
    expect("no message file is a usage error (exit 2)", r.returncode == 2)


def git(cwd, *args, check=True):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t", GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=check, env=env)


def copy_tools(src, dest):
    os.makedirs(os.path.join(dest, "tools"), exist_ok=True)
    for name in ("commit-msg", "install-hooks"):
        shutil.copy2(os.path.join(src, "tools", name), os.path.join(dest, "tools", name))


def check_install(src, scratch):
    clone = os.path.join(scratch, "clone")
    git(scratch, "init", "-q", clone)
    copy_tools(src, clone)
    install = os.path.join(clone, "tools", "install-hooks")
    r = subprocess.run([install], capture_output=True, text=True)
    hook = os.path.join(git(clone, "rev-parse", "--absolute-git-dir").stdout.strip(), "hooks", "commit-msg")
    expect(f"install-hooks installs the hook ({r.stdout.strip()})", r.returncode == 0 and os.access(hook, os.X_OK))
    r = subprocess.run([install], capture_output=True, text=True)
    expect("a second install is silent", r.returncode == 0 and r.stdout == "" and r.stderr == "")
    git(clone, "add", "tools")
    bad = git(clone, "commit", "-q", "-m", "d" * 80, check=False)
    expect("git commit with an 80-character subject is refused", bad.returncode != 0 and "80 characters" in bad.stderr)
    good = git(clone, "commit", "-q", "-m", "Add the commit-msg hook", "-m", "Why: the history.", check=False)
    expect("git commit with a good message goes through", good.returncode == 0)

    tree = os.path.join(scratch, "worktree")
    git(clone, "worktree", "add", "-q", tree)
    r = subprocess.run([os.path.join(tree, "tools", "install-hooks")], capture_output=True, text=True)
    expect("in a worktree, the install finds the clone's hooks (nothing new to do)",
           r.returncode == 0 and r.stdout == "")
    bad = git(tree, "commit", "-q", "--allow-empty", "-m", "e" * 80, check=False)
    expect("a worktree's commits are checked too", bad.returncode != 0 and "80 characters" in bad.stderr)

    with open(hook, "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    r = subprocess.run([install], capture_output=True, text=True)
    expect("a commit-msg hook of the user's own is left alone",
           r.returncode == 0 and "not twinserve's" in r.stderr and open(hook).read() == "#!/bin/sh\nexit 0\n")

    # A tarball unpacked inside another repository: that repository is not ours.
    tarball = os.path.join(scratch, "outer", "twinserve")
    git(scratch, "init", "-q", os.path.dirname(tarball))
    copy_tools(src, tarball)
    r = subprocess.run([os.path.join(tarball, "tools", "install-hooks")], capture_output=True, text=True)
    outer_hook = os.path.join(os.path.dirname(tarball), ".git", "hooks", "commit-msg")
    expect("a tarball inside another clone installs nothing", r.returncode == 0 and not os.path.exists(outer_hook))
    lone = os.path.join(scratch, "lone")
    copy_tools(src, lone)
    r = subprocess.run([os.path.join(lone, "tools", "install-hooks")], capture_output=True, text=True,
                       env=dict(os.environ, GIT_CEILING_DIRECTORIES=scratch))
    expect("a tarball outside any clone installs nothing and succeeds", r.returncode == 0 and r.stdout == "")


def main(argv):
    if len(argv) not in (3, 4):
        print("usage: commit_msg_test.py SOURCE_DIR SCRATCH_DIR [--install]", file=sys.stderr)
        return 2
    src, scratch = argv[1], argv[2]
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    if len(argv) == 4:
        if shutil.which("git") is None:
            print("SKIPPED: git is not installed")
            return 77
        check_install(src, scratch)
    else:
        check_messages(src, scratch)
    print(f"{len(FAILURES)} failures")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
