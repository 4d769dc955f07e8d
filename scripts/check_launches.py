#!/usr/bin/env python3
"""Every kernel of herd is launched through herd::gpu::launch (src/include/herd/core/cuda/
launch.hpp), so that it also runs on the host backend (label host-emu). This check fails,
naming file:line, on a triple-chevron launch anywhere else in the sources.

Usage: check_launches.py <source root> | --self-test
"""
import os
import re
import sys

ALLOWED = os.path.join("src", "include", "herd", "core", "cuda", "launch.hpp")
SUFFIXES = (".cu", ".cuh", ".cpp", ".hpp", ".h")
FOLDERS = ("src", "nn", "mcmc", "rl", "io", "apps", "bench", "tests", "examples")
# A launch: a name (possibly templated or qualified) then <<< ... >>> then (
LAUNCH = re.compile(r"[A-Za-z_][\w:]*(<[^;]*?>)?\s*<<<")


def offenders(root):
    found = []
    for folder in FOLDERS:
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for name in sorted(files):
                if not name.endswith(SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                if rel == ALLOWED:
                    continue
                with open(path, encoding="utf-8", errors="replace") as f:
                    for n, line in enumerate(f, 1):
                        code = line.split("//", 1)[0]
                        if LAUNCH.search(code):
                            found.append(f"{rel}:{n}: kernel launched with <<<...>>>; use herd::gpu::launch")
    return found


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "nn", "cuda"))
        os.makedirs(os.path.dirname(os.path.join(d, ALLOWED)))
        with open(os.path.join(d, ALLOWED), "w") as f:
            f.write("kernel<<<grid, block, shared_bytes, stream>>>(args...);\n")
        with open(os.path.join(d, "nn", "cuda", "k.cu"), "w") as f:
            f.write("// k<<<1, 1>>>() in a comment is fine\nherd::gpu::launch(k<T>, 1, 1, 0, s, x);\n")
        assert offenders(d) == [], offenders(d)
        with open(os.path.join(d, "nn", "cuda", "k.cu"), "a") as f:
            f.write("  bias_kernel<float><<<blocks, 256, 0, s>>>(y, b);\n")
        got = offenders(d)
        assert len(got) == 1 and got[0].startswith(os.path.join("nn", "cuda", "k.cu") + ":3:"), got
    print("check_launches self-test: ok")
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    bad = offenders(argv[1])
    for b in bad:
        print(b, file=sys.stderr)
    if not bad:
        print("check_launches: every kernel launch goes through herd::gpu::launch")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
