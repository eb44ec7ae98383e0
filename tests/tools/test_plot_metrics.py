"""tools/plot_metrics.py: the SVG of two small metrics files has one polyline per file and
panel with a point per step (a null loss leaves a gap), and bad input gets a clear message
and the documented exit status."""
import pathlib
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

tool = pathlib.Path(sys.argv[1])
fails = []


def check(ok, what):
    if not ok:
        fails.append(what)


def run(*args):
    return subprocess.run([sys.executable, str(tool), *map(str, args)], capture_output=True, text=True)


with tempfile.TemporaryDirectory() as t:
    d = pathlib.Path(t)
    a, b = d / "a.jsonl", d / "b.jsonl"
    a.write_text("".join(f'{{"step": {s}, "loss": {8 - s * 0.1}, "grad_norm": 1, "lr": 0.001, '
                         f'"tokens_per_s": {1000 + s}, "mfu": 0.3, "peak_memory_bytes": 1}}\n' for s in range(1, 11)))
    b.write_text('{"step": 1, "loss": 8.0, "tokens_per_s": 900}\n{"step": 2, "loss": null, "tokens_per_s": 950}\n'
                 '{"step": 3, "loss": 7.5, "tokens_per_s": 990}\n\n')
    svg = d / "curves.svg"
    p = run(a, b, "-o", svg, "--label", "run A", "--label", "run B")
    check(p.returncode == 0, f"exit {p.returncode}: {p.stderr}")
    root = ET.parse(svg).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    lines = root.findall(f".//{ns}polyline")
    by_label = {}
    for pl in lines:
        by_label.setdefault(pl.get("data-label"), []).append(len(pl.get("points").split()))
    # run A: 10 points in each panel; run B: loss split by the null (1 + 1), tokens/s 3.
    check(by_label.get("run A") == [10, 10], f"run A's polylines: {by_label.get('run A')}")
    check(by_label.get("run B") == [1, 1, 3], f"run B's polylines: {by_label.get('run B')}")
    texts = [el.text for el in root.iter(f"{ns}text")]
    for want in ("loss", "tokens per second", "run A (10 steps)", "run B (3 steps)"):
        check(want in texts, f"no text '{want}' in the SVG")
    check(not list(d.glob("*.tmp.*")), "a temporary file was left behind")

    bad = d / "bad.jsonl"
    bad.write_text('{"step": 1, "loss": 8.0, "tokens_per_s": 900}\n{"step": 2, "loss": 7.9\n')
    p = run(bad, "-o", d / "x.svg")
    check(p.returncode == 1 and f"{bad}:2: not a JSON object" in p.stderr, f"malformed line: {p.returncode} {p.stderr}")
    check(not (d / "x.svg").exists(), "an SVG was written for bad input")
    other = d / "other.jsonl"
    other.write_text('{"step": 1, "value": 3}\n')
    p = run(other, "-o", d / "x.svg")
    check(p.returncode == 1 and "no 'loss' key" in p.stderr, f"wrong keys: {p.returncode} {p.stderr}")
    empty = d / "empty.jsonl"
    empty.write_text("\n")
    p = run(empty, "-o", d / "x.svg")
    check(p.returncode == 1 and "no steps" in p.stderr, f"empty file: {p.returncode} {p.stderr}")
    p = run(d / "missing.jsonl", "-o", d / "x.svg")
    check(p.returncode == 1 and "cannot read" in p.stderr, f"missing file: {p.returncode} {p.stderr}")
    p = run(a, "-o", d / "no" / "x.svg")
    check(p.returncode == 2 and "does not exist" in p.stderr, f"missing folder: {p.returncode} {p.stderr}")
    p = run(a, b, "-o", d / "x.svg", "--label", "only one")
    check(p.returncode == 2 and "one --label per metrics file" in p.stderr, f"labels: {p.returncode} {p.stderr}")
    p = run(a)
    check(p.returncode == 2 and "-o/--output" in p.stderr, f"no output: {p.returncode} {p.stderr}")

for f in fails:
    print("FAILED:", f)
sys.exit(1 if fails else 0)
