#!/usr/bin/python3
"""Runs the commands of the how-to guides (docs/howto/*.md) against a build, so they cannot rot.

A guide marks what is run by its code blocks' info strings:
  ```sh doc-test          shell commands, run in order
  ```python doc-test      a Python snippet, run by this python3 where it stands
  ```sh doc-test system   needs root and the kernel's ftrace: the guide runs only with --system
  ```sh doc-test skip     shown, not run (a GUI, a server of your own); says why in the text
and by invisible lines `<!-- doc-test: COMMAND -->` (waits and clean-up a reader does by eye).
Without --system it also checks that every relative link of README.md and docs/ names a file.
Every sh/python block of a guide carries one of these marks, and every guide runs something.

Each guide runs as one bash script (set -euo pipefail) in a fresh temporary directory, with the
build's bin/ first on PATH and its python/ on PYTHONPATH; background jobs are killed at its end.

  doc-test.py --build BUILD [--system] [GUIDE.md...]
Exit status: 0 all ran, 1 a guide failed, 77 (--system) a prerequisite is missing.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FENCE = re.compile(r"^```(\S*)\s*(.*)$")
HIDDEN = re.compile(r"^<!-- doc-test: (.*) -->\s*$")
TIMEOUT_S = 120


class Guide:
    def __init__(self, path):
        self.path = path
        self.steps = []  # (line, kind, text, system): kind is "sh" or "python"
        self.errors = []
        self.parse()

    def parse(self):
        lines = open(self.path, encoding="utf-8").read().split("\n")
        i = 0
        while i < len(lines):
            hidden = HIDDEN.match(lines[i])
            fence = FENCE.match(lines[i])
            if hidden:
                self.steps.append((i + 1, "sh", hidden.group(1), False))
            elif fence and fence.group(1):
                lang, marks = fence.group(1), fence.group(2).split()
                start = i + 1
                body = []
                i += 1
                while i < len(lines) and not lines[i].startswith("```"):
                    body.append(lines[i])
                    i += 1
                self.add_block(start, lang, marks, "\n".join(body))
            i += 1

    def add_block(self, line, lang, marks, body):
        if lang not in ("sh", "python"):
            return
        if "doc-test" not in marks:
            self.errors.append(f"{self.path}:{line}: a {lang} block without a doc-test mark")
            return
        if "skip" in marks:
            return
        self.steps.append((line, lang, body, "system" in marks))

    def has_system(self):
        return any(system for _, _, _, system in self.steps)


def script_for(guide, work):
    out = ["set -euo pipefail",
           "trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true' EXIT"]
    name = os.path.relpath(guide.path, ROOT)
    for n, (line, kind, text, _) in enumerate(guide.steps):
        out.append(f"echo '--- {name}:{line}' >&2")
        if kind == "sh":
            out.append(text)
        else:
            snippet = os.path.join(work, f"snippet{n}.py")
            with open(snippet, "w", encoding="utf-8") as f:
                f.write(text + "\n")
            out.append(f"{sys.executable} {snippet}")
    return "\n".join(out) + "\n"


def run(guide, build):
    work = tempfile.mkdtemp(prefix="nanotrace-doc-test.")
    try:
        env = dict(os.environ)
        env["PATH"] = os.path.join(build, "bin") + os.pathsep + env.get("PATH", "")
        env["PYTHONPATH"] = os.path.join(build, "python")
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["TMPDIR"] = work
        for var in [v for v in env if v.startswith("NANOTRACE_")]:
            del env[var]
        script = os.path.join(work, "guide.sh")
        with open(script, "w", encoding="utf-8") as f:
            f.write(script_for(guide, work))
        proc = subprocess.Popen(["bash", script], cwd=work, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            output, _ = proc.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            return False, output.decode(errors="replace") + f"\n(timed out after {TIMEOUT_S} s)"
        return proc.returncode == 0, output.decode(errors="replace")
    finally:
        shutil.rmtree(work, ignore_errors=True)


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def broken_links():
    """Relative links of README.md and docs/ that name no file (a page moved or renamed)."""
    pages = [os.path.join(ROOT, "README.md")]
    for folder, _, names in os.walk(os.path.join(ROOT, "docs")):
        pages += [os.path.join(folder, n) for n in names if n.endswith(".md")]
    broken = []
    for page in sorted(pages):
        for match in LINK.finditer(open(page, encoding="utf-8").read()):
            target = match.group(1)
            if "://" in target or target.startswith("mailto:"):
                continue
            if not os.path.exists(os.path.join(os.path.dirname(page), target)):
                broken.append(f"{os.path.relpath(page, ROOT)}: broken link {target}")
    return broken


def system_prerequisite_missing():
    """Why the system guides cannot run here, or None."""
    if os.geteuid() != 0:
        return "not root (the kernel guide needs ftrace and a loop device)"
    if not os.path.isdir("/sys/kernel/tracing/events"):
        return "no tracefs at /sys/kernel/tracing"
    if not os.path.exists("/dev/loop-control"):
        return "no /dev/loop-control"
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", required=True, help="the build directory (its bin/, python/)")
    parser.add_argument("--system", action="store_true",
                        help="run the guides with system blocks (and only those)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print each guide's output, not only a failing one's")
    parser.add_argument("guides", nargs="*")
    args = parser.parse_args()
    paths = args.guides or sorted(
        os.path.join(ROOT, "docs", "howto", name)
        for name in os.listdir(os.path.join(ROOT, "docs", "howto")) if name.endswith(".md"))
    if args.system:
        missing = system_prerequisite_missing()
        if missing:
            print(f"SKIP: {missing}")
            # On CI (as root) a missing prerequisite is a failure, as for the other system tests.
            return 1 if os.environ.get("CI") == "true" else 77
    failed = 0
    if not args.system:
        for line in broken_links():
            print(line)
            failed += 1
    for path in paths:
        guide = Guide(path)
        name = os.path.relpath(path, ROOT)
        if guide.errors:
            print("\n".join(guide.errors))
            failed += 1
            continue
        if not guide.steps:
            print(f"FAIL {name}: runs nothing (mark its commands ```sh doc-test)")
            failed += 1
            continue
        if args.system != guide.has_system():
            continue  # the other test runs it
        ok, output = run(guide, os.path.abspath(args.build))
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
        if not ok or args.verbose:
            print(output)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
