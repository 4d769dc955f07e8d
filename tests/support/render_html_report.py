#!/usr/bin/env python3
"""Renders a herd HTML report with headless Chromium and checks the picture.

render_html_report.py [--run PROGRAM ARG... --] FILE.html OUT.png [--height PX]

--run: runs PROGRAM ARG... first (it must exit 0): it writes FILE.html.
1. chromium --headless --dump-dom: every figure must have rendered (its plot element gets
   data-rendered="1" when Vega's view has run) and none may say "plot failed".
2. chromium --headless --screenshot: OUT.png (1280 px wide); the picture must not be blank:
   at least 2% of its pixels not white and at least 8 distinct colours.
Exits 77 (CTest SKIP_RETURN_CODE) with a visible message when no Chromium is installed
(Debian: apt-get install chromium; not part of scripts/setup).
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib


def fail(msg):
    print(f"render_html_report: {msg}", file=sys.stderr)
    sys.exit(1)


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        p = shutil.which(name)
        if p:
            return p
    return None


def read_png(path):
    """Width, height and rows of RGB(A) byte tuples of an 8-bit PNG (colour types 2 and 6)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path} is not a PNG")
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            if depth != 8 or ctype not in (2, 6):
                fail(f"{path}: unsupported PNG (depth {depth}, colour type {ctype})")
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(h):
        ftype = raw[i]
        line = bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if ftype == 1:
                line[x] = (line[x] + a) & 255
            elif ftype == 2:
                line[x] = (line[x] + b) & 255
            elif ftype == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif ftype == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                pr = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[x] = (line[x] + pr) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def main(argv):
    if argv and argv[0] == "--run":
        end = argv.index("--")
        cmd = argv[1:end]
        argv = argv[end + 1:]
        r = subprocess.run(cmd)
        if r.returncode != 0:
            fail(f"{' '.join(cmd)} exited with {r.returncode}")
    html, png = os.path.abspath(argv[0]), os.path.abspath(argv[1])
    height = int(argv[3]) if len(argv) > 3 and argv[2] == "--height" else 4000
    chromium = find_chromium()
    if not chromium:
        print("SKIP: no Chromium found (chromium, chromium-browser, google-chrome): the HTML report was not "
              "rendered. Install Debian's chromium to run this test.")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as profile:
        base = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                "--no-first-run", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
                "--virtual-time-budget=30000"]
        url = "file://" + html
        r = subprocess.run(base + ["--dump-dom", url], capture_output=True, text=True, timeout=150)
        if r.returncode != 0:
            fail(f"chromium --dump-dom exited with {r.returncode}: {r.stderr[-2000:]}")
        dom = r.stdout
        figures = len(re.findall(r'<script type="application/json" class="herd-vega"', dom))
        rendered = len(re.findall(r'data-rendered="1"', dom))
        m = re.search(r'data-error="([^"]*)"', dom)
        if m:
            fail(f"{html}: a plot failed: {m.group(1)}")
        if figures == 0 or rendered != figures:
            fail(f"{html}: {rendered} of {figures} figures rendered")
        if os.path.exists(png):
            os.remove(png)
        r = subprocess.run(base + [f"--screenshot={png}", f"--window-size=1280,{height}", url],
                           capture_output=True, text=True, timeout=150)
        if r.returncode != 0 or not os.path.exists(png):
            fail(f"chromium --screenshot exited with {r.returncode}: {r.stderr[-2000:]}")
    w, h, bpp, rows = read_png(png)
    # Ink is counted over the rows down to the last one that is not white (the window is
    # taller than most reports), on every second row and column.
    white = b"\xff" * (w * bpp)
    last = max((i for i, r in enumerate(rows) if r != white), default=-1)
    colours, ink, total = set(), 0, 0
    for row in rows[:last + 1:2]:
        for x in range(0, w * bpp, bpp * 2):
            px = row[x:x + 3]
            colours.add(px)
            total += 1
            if px != b"\xff\xff\xff":
                ink += 1
    share = ink / total if total else 0.0
    print(f"render_html_report: {figures} figures rendered; {png}: {w}x{h}, content down to row {last + 1}, "
          f"{100 * share:.1f}% ink, {len(colours)} colours")
    if share < 0.02 or len(colours) < 8:
        fail(f"{png} looks blank ({100 * share:.2f}% non-white pixels, {len(colours)} colours)")


if __name__ == "__main__":
    main(sys.argv[1:])
