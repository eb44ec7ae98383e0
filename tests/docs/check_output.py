"""Runs a docs program and compares its stdout with the output block the docs show.

usage: check_output.py --doc DOC --block NAME --expected FILE [--varies FILE] [--last-digit] -- PROGRAM [ARGS...]

The program's stderr passes through; it must exit 0. Its stdout must equal the expected
text line for line, except:
  - trailing whitespace of a line and trailing blank lines are ignored (Markdown keeps
    neither reliably);
  - an expected line that is exactly `...` matches any number of lines (none included);
  - with --varies, every match of that regular expression (one line of the file) is
    replaced by <varies> in both texts before comparing;
  - with --last-digit, a decimal number (digits, a point, digits, an optional exponent) may
    differ by one in its last printed digit from the expected one (printed with as many
    digits): f32 sums in another order, as another CPU's BLAS kernels add them, move the
    last digit of a printed loss across a rounding boundary now and then; the rest of the
    line must be equal.
A mismatch prints a unified diff (expected: the docs; actual: the program) naming the docs
file and the block, and exits 1."""
import argparse
import difflib
import re
import subprocess
import sys


def normalize(text):
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and lines[-1] == "":
        lines.pop()
    return lines


DECIMAL = re.compile(r"-?\d+\.(\d+)(?:[eE]([-+]?\d+))?")


def near(e, a):
    """Whether line a equals line e but for decimal numbers one unit apart in the last digit."""
    es, as_ = DECIMAL.split(e), DECIMAL.split(a)
    en, an = list(DECIMAL.finditer(e)), list(DECIMAL.finditer(a))
    if len(en) != len(an) or len(es) != len(as_):
        return False
    # split() interleaves the text between numbers with the groups; compare the text parts
    step = 3  # text, fraction digits, exponent
    if es[::step] != as_[::step]:
        return False
    for x, y in zip(en, an):
        if len(x.group(1)) != len(y.group(1)) or x.group(2) != y.group(2):
            return False
        unit = 10.0 ** (-len(x.group(1)))
        mx = float(x.group(0).split("e")[0].split("E")[0])
        my = float(y.group(0).split("e")[0].split("E")[0])
        if abs(mx - my) > 1.5 * unit:
            return False
    return True


def matches(expected, actual, same=lambda e, a: e == a):
    """Whether actual matches expected, where an expected line '...' matches any lines."""
    # Dynamic programming over (expected index, actual index); outputs are short.
    n, m = len(expected), len(actual)
    ok = [[False] * (m + 1) for _ in range(n + 1)]
    ok[n][m] = True
    for i in range(n - 1, -1, -1):
        for j in range(m, -1, -1):
            if expected[i] == "...":
                ok[i][j] = ok[i + 1][j] or (j < m and ok[i][j + 1])
            else:
                ok[i][j] = j < m and same(expected[i], actual[j]) and ok[i + 1][j + 1]
    return ok[0][0]


def main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--doc", required=True)
    p.add_argument("--block", required=True)
    p.add_argument("--expected", required=True)
    p.add_argument("--varies")
    p.add_argument("--last-digit", action="store_true")
    p.add_argument("command", nargs="+")
    a = p.parse_args(argv)

    with open(a.expected, encoding="utf-8") as f:
        expected = normalize(f.read())
    run = subprocess.run(a.command, stdout=subprocess.PIPE)
    actual = normalize(run.stdout.decode("utf-8", errors="replace"))
    if run.returncode != 0:
        sys.stdout.write(run.stdout.decode("utf-8", errors="replace"))
        print(f"check_output.py: {a.block} exited with {run.returncode}")
        return 1
    if a.varies:
        with open(a.varies, encoding="utf-8") as f:
            varies = re.compile(f.read().rstrip("\n"))
        expected = [line if line == "..." else varies.sub("<varies>", line) for line in expected]
        actual = [varies.sub("<varies>", line) for line in actual]
    same = (lambda e, x: e == x or near(e, x)) if a.last_digit else (lambda e, x: e == x)
    if matches(expected, actual, same):
        print(f"{a.block}: output matches {a.doc} ({len(actual)} lines)")
        return 0
    print(f"{a.block}: the output differs from the block in {a.doc} "
          "(- the docs, + the program; paste the program's output into the docs if it is right):")
    sys.stdout.writelines(difflib.unified_diff(
        [line + "\n" for line in expected], [line + "\n" for line in actual],
        fromfile=f"{a.doc} ({a.block}, expected)", tofile=f"{a.block} (actual stdout)", lineterm="\n"))
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
