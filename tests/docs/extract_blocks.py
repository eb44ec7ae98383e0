"""Writes every ```cpp block of the given Markdown files to OUTDIR/doc_<stem>_<n>.cpp and
prints one line per block: '<file> <component-or-->'."""
import pathlib
import re
import sys

outdir = pathlib.Path(sys.argv[1])
outdir.mkdir(parents=True, exist_ok=True)
for md in sys.argv[2:]:
    path = pathlib.Path(md)
    stem = re.sub(r"[^A-Za-z0-9_]", "_", path.stem)
    blocks, cur = [], None
    for line in path.read_text(encoding="utf-8").splitlines():
        if cur is None and re.fullmatch(r"```cpp\s*", line):
            cur = []
        elif cur is not None and re.fullmatch(r"```\s*", line):
            blocks.append("\n".join(cur) + "\n")
            cur = None
        elif cur is not None:
            cur.append(line)
    if cur is not None:
        sys.exit(f"{md}: a ```cpp block is not closed")
    for n, text in enumerate(blocks, 1):
        out = outdir / f"doc_{stem}_{n}.cpp"
        if not out.exists() or out.read_text(encoding="utf-8") != text:
            out.write_text(text, encoding="utf-8")
        m = re.match(r"// tessera-requires: ([a-z]+)", text)
        print(out, m.group(1) if m else "-")
