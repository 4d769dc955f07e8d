#!/usr/bin/env python3
"""Checks the layer rules of DESIGN.md §1 by scanning #include lines.

src (core) depends on nothing of ours; io on core; nn on core and io; mcmc and rl on nn,
io and core, and never on each other. apps, examples, tests and bench may use everything.
Usage: check_layers.py REPO_ROOT. Exit 1 and one line per violation when a rule is broken.
"""
import pathlib
import re
import sys

FOLDER_TO_MODULE = {"src": "core", "io": "io", "nn": "nn", "mcmc": "mcmc", "rl": "rl"}
ALLOWED = {
    "core": {"core"},
    "io": {"core", "io"},
    "nn": {"core", "io", "nn"},
    "mcmc": {"core", "io", "nn", "mcmc"},
    "rl": {"core", "io", "nn", "rl"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]herd/(\w+)/')
SUFFIXES = {".hpp", ".h", ".cpp", ".cu", ".cuh", ".in"}


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    violations = []
    scanned = 0
    for folder, module in FOLDER_TO_MODULE.items():
        base = root / folder
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if path.suffix not in SUFFIXES or not path.is_file():
                continue
            scanned += 1
            for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                m = INCLUDE.match(line)
                if m and m.group(1) not in ALLOWED[module]:
                    violations.append(
                        f"{path.relative_to(root)}:{lineno}: layer '{module}' includes "
                        f"herd/{m.group(1)}/, but may include only {sorted(ALLOWED[module])}")
    for v in violations:
        print(v)
    print(f"check_layers: {scanned} files scanned, {len(violations)} violations")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
