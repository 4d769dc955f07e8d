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


def scan(root: pathlib.Path) -> list:
    violations = []
    scanned = 0
    # (root is the repository root)
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
    return violations, scanned


def self_test() -> int:
    """The checker must flag a core file that includes io, and mcmc including rl."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        root = pathlib.Path(d)
        (root / "src").mkdir()
        (root / "mcmc").mkdir()
        (root / "src" / "bad.cpp").write_text('#include "herd/io/hdf5.hpp"\n#include "herd/core/rng.hpp"\n')
        (root / "mcmc" / "bad.hpp").write_text('#  include <herd/rl/env.hpp>\n#include "herd/nn/tensor.hpp"\n')
        violations, scanned = scan(root)
    ok = scanned == 2 and len(violations) == 2
    print(f"check_layers self-test: {len(violations)} of 2 violations found: {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


def main() -> int:
    if sys.argv[1:2] == ["--self-test"]:
        return self_test()
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    violations, scanned = scan(root)
    for v in violations:
        print(v)
    print(f"check_layers: {scanned} files scanned, {len(violations)} violations")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
