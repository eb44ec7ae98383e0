"""Writes every ```cpp block of the given Markdown files to OUTDIR/doc_<stem>_<n>.cpp and
prints one line per block: '<file> <component-or-> <expected-output-file> <docs/x.md:line>'
(the last two '-' where the block's output is not shown).

A plain block (``` or ```text, any info string but cpp) directly after the line
`<!-- tessera-output -->` is the stdout of the nearest ```cpp block above it; it is
written to OUTDIR/doc_<stem>_<n>.out and the test compares it with the program's output
(check_output.py). `<!-- tessera-output varies: REGEX -->` also writes the regular
expression to OUTDIR/doc_<stem>_<n>.varies: what it matches, in the expected and in the
actual lines, is masked before the comparison. `<!-- tessera-output last-digit -->` (before
`varies:` when both are given) writes OUTDIR/doc_<stem>_<n>.last-digit: the block's decimal
numbers may differ from the program's by one in their last printed digit (f32 sums in
another order: another CPU's BLAS kernels). A marker in the wrong place is an error naming
the file and line (exit status 1)."""
import pathlib
import re
import sys

# `varies: ` and ` -->` with one space each: the regular expression is what lies between.
MARKER = re.compile(r"<!-- tessera-output(?P<last> last-digit)?(?: varies: (?P<varies>.*?))? -->")
MARKER_LIKE = re.compile(r"<!--\s*tessera-output")
OPEN = re.compile(r"```(?P<info>[^`\s]*)[^`]*")
CLOSE = re.compile(r"```\s*")


class MarkerError(Exception):
    pass


def parse(md):
    """The ```cpp blocks of one Markdown file, each a dict: text, line, output, varies."""
    lines = md.read_text(encoding="utf-8").splitlines()
    blocks = []
    pending = None  # (line number, varies) of a marker waiting for its block
    i = 0
    while i < len(lines):
        line, lineno = lines[i], i + 1
        m = OPEN.fullmatch(line)
        if m is None:
            if MARKER_LIKE.match(line):  # at the start of a line, as fences are
                mm = MARKER.fullmatch(line.rstrip())
                if mm is None:
                    raise MarkerError(f"{md}:{lineno}: malformed marker (expected "
                                      "'<!-- tessera-output -->', '<!-- tessera-output varies: REGEX -->' or "
                                      "'<!-- tessera-output last-digit varies: REGEX -->')")
                if pending is not None:
                    raise MarkerError(f"{md}:{pending[0]}: a tessera-output marker not followed by a ``` block")
                varies = mm.group("varies")
                if varies is not None:
                    try:
                        re.compile(varies)
                    except re.error as e:
                        raise MarkerError(f"{md}:{lineno}: bad 'varies' regular expression: {e}")
                    if varies == "":
                        raise MarkerError(f"{md}:{lineno}: empty 'varies' regular expression")
                pending = (lineno, varies, mm.group("last") is not None)
            elif pending is not None and line.strip() != "":
                raise MarkerError(f"{md}:{pending[0]}: a tessera-output marker not followed by a ``` block")
            i += 1
            continue
        info = m.group("info")
        body = []
        i += 1
        while i < len(lines) and not CLOSE.fullmatch(lines[i]):
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise MarkerError(f"{md}:{lineno}: a ```{info} block is not closed")
        i += 1
        if info == "cpp":
            if pending is not None:
                raise MarkerError(f"{md}:{pending[0]}: a tessera-output marker before a ```cpp block "
                                  "(it marks the plain block that shows the output of the ```cpp block above)")
            blocks.append({"text": "\n".join(body) + "\n", "line": lineno, "output": None, "varies": None,
                           "last_digit": False})
        elif pending is not None:
            if not blocks:
                raise MarkerError(f"{md}:{pending[0]}: a tessera-output marker with no ```cpp block above it")
            if blocks[-1]["output"] is not None:
                raise MarkerError(f"{md}:{pending[0]}: a second tessera-output block for the ```cpp block "
                                  f"of line {blocks[-1]['line']} (its output is at line {blocks[-1]['output_line']})")
            blocks[-1]["output"] = "\n".join(body) + "\n" if body else ""
            blocks[-1]["output_line"] = lineno
            blocks[-1]["varies"] = pending[1]
            blocks[-1]["last_digit"] = pending[2]
            pending = None
    if pending is not None:
        raise MarkerError(f"{md}:{pending[0]}: a tessera-output marker not followed by a ``` block")
    return blocks


def write_if_changed(path, text):
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def main(argv):
    outdir = pathlib.Path(argv[1])
    outdir.mkdir(parents=True, exist_ok=True)
    listing = []
    for md in argv[2:]:
        path = pathlib.Path(md)
        stem = re.sub(r"[^A-Za-z0-9_]", "_", path.stem)
        try:
            blocks = parse(path)
        except MarkerError as e:
            print(f"extract_blocks.py: {e}", file=sys.stderr)
            return 1
        for n, b in enumerate(blocks, 1):
            out = outdir / f"doc_{stem}_{n}.cpp"
            write_if_changed(out, b["text"])
            expected = outdir / f"doc_{stem}_{n}.out"
            varies = outdir / f"doc_{stem}_{n}.varies"
            last_digit = outdir / f"doc_{stem}_{n}.last-digit"
            if b["last_digit"]:
                write_if_changed(last_digit, "")
            else:
                last_digit.unlink(missing_ok=True)
            if b["output"] is None:
                expected.unlink(missing_ok=True)
                varies.unlink(missing_ok=True)
            else:
                write_if_changed(expected, b["output"])
                if b["varies"] is None:
                    varies.unlink(missing_ok=True)
                else:
                    write_if_changed(varies, b["varies"] + "\n")
            m = re.match(r"// tessera-requires: ([a-z]+)", b["text"])
            if b["output"] is None:
                listing.append(f"{out} {m.group(1) if m else '-'} - -")
            else:
                where = f"{path.parent.name}/{path.name}:{b['output_line']}"
                listing.append(f"{out} {m.group(1) if m else '-'} {expected} {where}")
    print("\n".join(listing))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
