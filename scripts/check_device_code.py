#!/usr/bin/env python3
"""Static checks of herd's CUDA device code, from the built objects, without a GPU.

Reads the device code that nvcc embedded in object files or static libraries (the sm_XX
cubin ELF images and the PTX text of the fat binary; the CUDA targets are compiled with
`--no-compress` so the PTX is readable) and fails when a kernel

  * can recurse: a cycle in the PTX call graph (a device function that calls itself,
    directly or through others), or an indirect call (function pointer, virtual call),
    whose stack the driver's per-thread reservation cannot bound;
  * needs more than --max-stack bytes of stack per thread (the kernel's cumulative stack,
    EIATTR_MIN_STACK_SIZE, or its own frame, EIATTR_FRAME_SIZE, whichever is larger);
  * has registers per thread x block size above --max-regs-x-block (the block size is the
    kernel's `__launch_bounds__` maximum when it declares one, else --block, herd's widest
    launch, 256 threads);
  * uses more than --max-shared bytes of static shared memory per block (the
    `.nv.shared.<kernel>` section as laid out in the cubin, which on sm_90 includes the
    1 KB the driver reserves); more than 48 KB needs a dynamic allocation and an explicit
    cudaFuncSetAttribute opt-in, which a static check cannot see.

Prints one line per kernel (registers, stack, shared memory, block) and one line per
violation; exit status 0 when every kernel passes, 1 on a violation, 2 on unreadable input
(for example an object without PTX: compile with --no-compress).
With --expect-violation KIND (recursion, stack, registers, shared), the status is inverted
for the self-test: 0 only when a violation of that kind was found.

The ELF attribute codes (EIATTR_*) are those the CUDA toolchain writes into `.nv.info`
sections: REGCOUNT 0x2f, FRAME_SIZE 0x11, MIN_STACK_SIZE 0x12, MAX_THREADS 0x05; each
record is a 4-byte header (format, attribute, 16-bit value or payload size), format 4
followed by its payload.
"""

import argparse
import re
import shutil
import struct
import subprocess
import sys

EM_CUDA = 190
EIATTR_MAX_THREADS = 0x05
EIATTR_FRAME_SIZE = 0x11
EIATTR_MIN_STACK_SIZE = 0x12
EIATTR_REGCOUNT = 0x2F
EIFMT_SVAL = 4


def demangle(names):
    """Demangled names (c++filt when present), same order."""
    tool = shutil.which("c++filt")
    if not tool or not names:
        return list(names)
    try:
        out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, timeout=30).stdout
        lines = out.splitlines()
        return lines if len(lines) == len(names) else list(names)
    except (OSError, subprocess.SubprocessError):
        return list(names)


def short(name, width=110):
    return name if len(name) <= width else name[: width - 3] + "..."


# --- cubin (ELF) ----------------------------------------------------------------------------


def parse_cubin(data, off):
    """Kernels of the cubin at data[off:]: {name: {regs, frame, stack, max_threads, shared}}, or None."""
    if data[off + 4] != 2 or data[off + 5] != 1:  # ELF64, little endian
        return None
    (e_machine,) = struct.unpack_from("<H", data, off + 0x12)
    if e_machine != EM_CUDA:
        return None
    (e_shoff,) = struct.unpack_from("<Q", data, off + 0x28)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", data, off + 0x3A)
    if e_shentsize != 64 or off + e_shoff + e_shnum * 64 > len(data):
        return None
    secs = []
    for i in range(e_shnum):
        name, typ, _flags, _addr, soff, size, link, _info, _align, _ent = struct.unpack_from(
            "<IIQQQQIIQQ", data, off + e_shoff + i * 64)
        secs.append({"name": name, "type": typ, "off": off + soff, "size": size, "link": link})

    def cstr(table, o):
        start = table["off"] + o
        return data[start:data.index(b"\0", start)].decode("latin-1")

    shstr = secs[e_shstrndx]
    for s in secs:
        s["n"] = cstr(shstr, s["name"])
    symtabs = [s for s in secs if s["type"] == 2]
    if not symtabs:
        return None
    symtab = symtabs[0]
    strtab = secs[symtab["link"]]
    syms = []
    for i in range(symtab["size"] // 24):
        nm, _info, _other, _shndx, _val, _sz = struct.unpack_from("<IBBHQQ", data, symtab["off"] + i * 24)
        syms.append(cstr(strtab, nm))

    def records(sec):
        o, end = sec["off"], sec["off"] + sec["size"]
        while o + 4 <= end:
            fmt, attr = data[o], data[o + 1]
            (val,) = struct.unpack_from("<H", data, o + 2)
            if fmt == EIFMT_SVAL:
                yield attr, data[o + 4:o + 4 + val]
                o += 4 + val
            else:
                yield attr, struct.pack("<H", val)
                o += 4

    kernels = {}
    for s in secs:
        if s["n"].startswith(".nv.info."):
            k = kernels.setdefault(s["n"][len(".nv.info."):], {})
            for attr, pay in records(s):
                if attr == EIATTR_MAX_THREADS and len(pay) >= 12:
                    x, y, z = struct.unpack_from("<III", pay)
                    k["max_threads"] = x * y * z
    per_sym = {}
    for s in secs:
        if s["n"] == ".nv.info":
            for attr, pay in records(s):
                if attr in (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE, EIATTR_MIN_STACK_SIZE) and len(pay) >= 8:
                    sym, v = struct.unpack_from("<II", pay)
                    if sym < len(syms):
                        per_sym.setdefault(syms[sym], {})[attr] = v
    for name, k in kernels.items():
        a = per_sym.get(name, {})
        k["regs"] = a.get(EIATTR_REGCOUNT, 0)
        k["frame"] = a.get(EIATTR_FRAME_SIZE, 0)
        k["stack"] = max(a.get(EIATTR_MIN_STACK_SIZE, 0), k["frame"])
        k["shared"] = 0
    for s in secs:
        if s["n"].startswith(".nv.shared.") and s["n"][len(".nv.shared."):] in kernels:
            kernels[s["n"][len(".nv.shared."):]]["shared"] = s["size"]
    return kernels


# --- PTX ------------------------------------------------------------------------------------

HEADER = re.compile(r"\.(entry|func)\s+(?:\([^)]*\)\s*)?([A-Za-z_$%][\w$.]*)\s*\(")
CALL = re.compile(r"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?([^\s,;()]+)")
PARENS = re.compile(r"[()]")
BRACES = re.compile(r"[{}]")


def after_match(text, pos, pattern, opener):
    """Index just past the bracket closing the one opened before `pos` (depth 1 at `pos`)."""
    depth = 1
    for m in pattern.finditer(text, pos):
        depth += 1 if m.group() == opener else -1
        if depth == 0:
            return m.end()
    return len(text)



def ptx_texts(data):
    for m in re.finditer(rb"\.version \d+\.\d+", data):
        end = data.find(b"\0", m.start())
        text = data[m.start():end if end >= 0 else len(data)].decode("latin-1")
        if ".target" in text:
            yield text


def ptx_call_graph(text):
    """({function: set(callees)}, {function: [indirect call sites]}, set(entries))."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    graph, indirect, entries = {}, {}, set()
    pos = 0
    while True:
        m = HEADER.search(text, pos)
        if not m:
            break
        kind, name = m.group(1), m.group(2)
        i = after_match(text, m.end(), PARENS, "(")
        nb, ns = text.find("{", i), text.find(";", i)
        if nb < 0 or (0 <= ns < nb):  # a declaration
            pos = i
            continue
        j = after_match(text, nb + 1, BRACES, "{")
        body = text[nb:j]
        callees = graph.setdefault(name, set())
        if kind == "entry":
            entries.add(name)
        for c in CALL.finditer(body):
            target = c.group(1)
            if target.startswith("%"):
                indirect.setdefault(name, []).append(target)
            else:
                callees.add(target)
        pos = j
    return graph, indirect, entries


def cycles(graph):
    """Strongly connected components with a cycle (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in graph.get(v, ()):
                    out.append(sorted(comp))
    return out


def reachable(graph, start):
    seen, todo = set(), [start]
    while todo:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        todo.extend(graph.get(v, ()))
    return seen


# --- the check ------------------------------------------------------------------------------


def check_file(path, args, out):
    """Violations of one file as (kind, line) pairs; raises ValueError on unreadable input."""
    with open(path, "rb") as f:
        data = f.read()
    kernels = {}
    for m in re.finditer(rb"\x7fELF", data):
        if m.start() == 0:
            continue
        try:
            k = parse_cubin(data, m.start())
        except (struct.error, ValueError, IndexError):
            k = None
        if k:
            kernels.update(k)
    graph, indirect, entries = {}, {}, set()
    for text in ptx_texts(data):
        g, ind, ent = ptx_call_graph(text)
        for f, callees in g.items():
            graph.setdefault(f, set()).update(callees)
        for f, sites in ind.items():
            indirect.setdefault(f, []).extend(sites)
        entries |= ent
    if not kernels and not entries:
        return []  # host-only object
    if kernels and not entries:
        raise ValueError(f"{path}: device code without readable PTX (compile the CUDA sources with --no-compress)")
    violations = []
    names = sorted(kernels)
    pretty = dict(zip(names, demangle(names)))
    for comp in cycles(graph):
        shown = demangle(comp)
        hit = sorted(e for e in entries if reachable(graph, e) & set(comp))
        violations.append(("recursion", f"{path}: recursion through {' -> '.join(short(s, 80) for s in shown)}"
                                        f" (reached from {len(hit)} kernel(s)); the per-thread stack cannot be bounded"))
    for f, sites in sorted(indirect.items()):
        violations.append(("recursion", f"{path}: indirect call in {short(demangle([f])[0], 80)} "
                                        f"({len(sites)} site(s)); the per-thread stack cannot be bounded"))
    for name in names:
        k = kernels[name]
        block = k.get("max_threads") or args.block
        line = (f"{short(pretty[name], 90)}: regs {k['regs']}, stack {k['stack']} B, shared {k['shared']} B, "
                f"block {block}")
        print(line, file=out)
        if k["stack"] > args.max_stack:
            violations.append(("stack", f"{path}: {short(pretty[name], 90)}: stack {k['stack']} bytes per thread"
                                        f" > limit {args.max_stack}"))
        if k["regs"] * block > args.max_regs_x_block:
            violations.append(("registers", f"{path}: {short(pretty[name], 90)}: {k['regs']} registers x {block}"
                                            f" threads = {k['regs'] * block} > limit {args.max_regs_x_block}"))
        if k["shared"] > args.max_shared:
            violations.append(("shared", f"{path}: {short(pretty[name], 90)}: static shared memory {k['shared']}"
                                         f" bytes > limit {args.max_shared}"))
    return violations


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="object files or static libraries with CUDA device code")
    ap.add_argument("--max-stack", type=int, default=4096, help="stack bytes per thread (4096)")
    ap.add_argument("--max-regs-x-block", type=int, default=32768,
                    help="registers per thread x block size (32768: half an SM's register file, two blocks per SM)")
    ap.add_argument("--block", type=int, default=256, help="block size of kernels without __launch_bounds__ (256)")
    ap.add_argument("--max-shared", type=int, default=48 * 1024, help="static shared bytes per block (49152)")
    ap.add_argument("--expect-violation", choices=["recursion", "stack", "registers", "shared"],
                    help="self-test: succeed only if a violation of this kind is found")
    args = ap.parse_args()
    found = []
    for path in args.files:
        try:
            found += check_file(path, args, sys.stdout)
        except (OSError, ValueError) as e:
            print(f"check_device_code: {e}", file=sys.stderr)
            return 2
    for _kind, line in found:
        print("VIOLATION " + line)
    if args.expect_violation:
        ok = any(kind == args.expect_violation for kind, _ in found)
        print(f"self-test: {'found' if ok else 'did NOT find'} the expected {args.expect_violation} violation")
        return 0 if ok else 1
    print(f"check_device_code: {len(found)} violation(s) in {len(args.files)} file(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
