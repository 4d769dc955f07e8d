#!/usr/bin/env python3
"""Checks a herd HTML report (io/include/herd/io/html_report.hpp).

check_html_report.py [--run PROGRAM ARG... --] FILE [--expect NAME:KEY=N,...] [--figures N]
                     [--text STRING] [--max-bytes N]

--run: runs PROGRAM ARG... first (it must exit 0): it writes FILE.
Checks that FILE parses as HTML (html.parser, strict nesting of the elements it opens), is
self-contained (no src=/href= to another document, no @import/url() in styles, one inline
script that defines the Vega runtime), and that every figure holds a Vega spec that is valid
JSON with one top-level group per panel and one dataset per series ("herd_series"), whose CSV
values have exactly "herd_points" rows.
--expect NAME:panels=P,series=S,points=K: the figure with data-name NAME has P panels, S
series in all and K points in all (each key optional; `points_max=K` bounds every series).
--figures N: the report has exactly N figures. --text S: the visible text contains S
(repeatable). --max-bytes N: the file is at most N bytes.
Prints one line per figure; exits 1 with a message naming what is wrong.
"""
import html.parser
import json
import os
import subprocess
import sys

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Parser(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack = []
        self.errors = []
        self.figures = []  # dicts: name, spec text
        self.scripts = []  # inline scripts without a type
        self.text = []
        self._in = None
        self._buf = []
        self._fig = None
        self.external = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for k in ("src", "href"):
            v = a.get(k)
            if v is not None and not v.startswith("#"):
                self.external.append(f"<{tag} {k}=\"{v}\">")
        if tag == "figure":
            self._fig = a.get("data-name", "")
        if tag == "script":
            self._in = ("vega" if "herd-vega" in (a.get("class") or "") else
                        "json" if a.get("type") else "js")
            self._buf = []
        if tag == "style":
            self._in = "style"
            self._buf = []
        if tag not in VOID:
            self.stack.append((tag, self.getpos()))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID and self.stack and self.stack[-1][0] == tag:
            self.stack.pop()

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1][0] != tag:
            opened = self.stack[-1] if self.stack else None
            self.errors.append(f"line {self.getpos()[0]}: </{tag}> closes {opened}")
            return
        self.stack.pop()
        if tag == "script" and self._in:
            body = "".join(self._buf)
            if self._in == "vega":
                self.figures.append({"name": self._fig, "spec": body})
            elif self._in == "js":
                self.scripts.append(body)
            self._in = None
        if tag == "style":
            body = "".join(self._buf)
            if "@import" in body or "url(" in body:
                self.external.append("a style with @import or url()")
            self._in = None
        if tag == "figure":
            self._fig = None

    def handle_data(self, data):
        if self._in:
            self._buf.append(data)
        else:
            self.text.append(data)


def fail(msg):
    print(f"check_html_report: {msg}", file=sys.stderr)
    sys.exit(1)


def figure_stats(fig):
    try:
        spec = json.loads(fig["spec"])
    except json.JSONDecodeError as e:
        fail(f"figure {fig['name']}: the Vega spec is not valid JSON: {e}")
    marks = spec.get("marks", [])
    if not marks or any(m.get("type") != "group" for m in marks):
        fail(f"figure {fig['name']}: the spec's top-level marks must be one group per panel")
    series, points, most = 0, 0, 0
    for d in spec.get("data", []):
        if "herd_series" not in d:
            continue
        rows = [r for r in d["values"].split("\n")[1:] if r]
        if len(rows) != d["herd_points"]:
            fail(f"figure {fig['name']}: dataset {d['name']} has {len(rows)} rows but herd_points {d['herd_points']}")
        for r in rows:
            x, y = r.split(",")
            float(x), float(y)
        series += 1
        points += len(rows)
        most = max(most, len(rows))
    return {"panels": len(marks), "series": series, "points": points, "points_max": most}


def main(argv):
    if argv and argv[0] == "--run":
        end = argv.index("--")
        cmd = argv[1:end]
        argv = argv[end + 1:]
        r = subprocess.run(cmd)
        if r.returncode != 0:
            fail(f"{' '.join(cmd)} exited with {r.returncode}")
    path = argv[0]
    expects, texts, nfig, max_bytes = [], [], None, None
    i = 1
    while i < len(argv):
        if argv[i] == "--expect":
            expects.append(argv[i + 1])
        elif argv[i] == "--text":
            texts.append(argv[i + 1])
        elif argv[i] == "--figures":
            nfig = int(argv[i + 1])
        elif argv[i] == "--max-bytes":
            max_bytes = int(argv[i + 1])
        else:
            fail(f"unknown argument {argv[i]}")
        i += 2
    with open(path, encoding="utf-8") as f:
        doc = f.read()
    size = os.path.getsize(path)
    if max_bytes is not None and size > max_bytes:
        fail(f"{path} has {size} bytes, more than {max_bytes}")
    if not doc.startswith("<!DOCTYPE html>"):
        fail(f"{path} does not start with <!DOCTYPE html>")
    p = Parser()
    p.feed(doc)
    p.close()
    if p.errors:
        fail(f"{path}: " + "; ".join(p.errors[:5]))
    if p.stack:
        fail(f"{path}: unclosed elements {p.stack}")
    if p.external:
        fail(f"{path} is not self-contained: {p.external[:5]}")
    runtime = [s for s in p.scripts if "def('vega-view'" in s and "window.vega=vega" in s]
    if len(runtime) != 1:
        fail(f"{path}: expected one inline script with the Vega runtime, found {len(runtime)}")
    text = " ".join(" ".join(p.text).split())
    for t in texts:
        if t not in text:
            fail(f"{path}: the text does not contain {t!r}")
    stats = {}
    for fig in p.figures:
        s = figure_stats(fig)
        stats[fig["name"]] = s
        print(f"figure {fig['name']}: {s['panels']} panels, {s['series']} series, {s['points']} points "
              f"(at most {s['points_max']} per series)")
    if nfig is not None and len(p.figures) != nfig:
        fail(f"{path}: {len(p.figures)} figures, expected {nfig}")
    for e in expects:
        name, _, spec = e.partition(":")
        if name not in stats:
            fail(f"{path}: no figure named {name} (figures: {sorted(stats)})")
        for kv in spec.split(","):
            if not kv:
                continue
            k, v = kv.split("=")
            got = stats[name][k]
            ok = got <= int(v) if k == "points_max" else got == int(v)
            if not ok:
                fail(f"{path}: figure {name} has {k} {got}, expected {'<= ' if k == 'points_max' else ''}{v}")
    print(f"check_html_report: {path}: {size} bytes, {len(p.figures)} figures: OK")


if __name__ == "__main__":
    main(sys.argv[1:])
