#!/usr/bin/env python3
"""Checks the layer rule and the header length limit of include/tessera/.

Usage: check_layers.py INCLUDE_DIR RULES_DIR     check INCLUDE_DIR/tessera
       check_layers.py --self-test RULES_DIR     check the checker on made-up trees

RULES_DIR holds layers.txt (which folders each folder may include),
allowed_includes.txt (known violations, each with its reason) and
allowed_long_headers.txt (headers over the limit, to be split). Every problem is printed
with the file and line, what is wrong and what to do. Exit status: 0 when the tree keeps
the rules, 1 when it does not, 2 for bad arguments or rule files.
"""
import os
import re
import sys
import tempfile

MAX_LINES = 500
HEADER_SUFFIXES = (".hpp", ".h", ".cuh", ".inl")
UMBRELLA = "tessera.hpp"
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


class RuleError(Exception):
    """A rule file that cannot be read or parsed (exit status 2)."""


def rule_lines(path):
    """(line number, text without comment) of the non-empty lines of a rule file."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise RuleError(f"{path}: cannot read ({e.strerror}); pass the folder that holds the rule files")
    for n, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if text:
            yield n, text


def read_layers(path):
    allowed = {}
    for n, text in rule_lines(path):
        folder, sep, rest = text.partition(":")
        folder = folder.strip()
        if not sep or not folder or "/" in folder:
            raise RuleError(f"{path}:{n}: expected `folder: folders it may include`, got `{text}`")
        if folder in allowed:
            raise RuleError(f"{path}:{n}: folder `{folder}` is listed twice; keep one line")
        allowed[folder] = set(rest.split())
    for folder, targets in allowed.items():
        for t in sorted(targets - set(allowed)):
            raise RuleError(f"{path}: `{folder}` may include `{t}`, which has no line of its own; add `{t}:`")
    return allowed


def read_allowed_includes(path):
    pairs = {}
    for n, text in rule_lines(path):
        src, sep, dst = text.partition("->")
        src, dst = src.strip(), dst.strip()
        if not sep or not src or not dst or " " in src or " " in dst:
            raise RuleError(f"{path}:{n}: expected `header -> included header`, got `{text}`")
        pairs[(src, dst)] = n
    return pairs


def read_allowed_long(path):
    names = {}
    for n, text in rule_lines(path):
        if " " in text:
            raise RuleError(f"{path}:{n}: expected one header path per line, got `{text}`")
        names[text] = n
    return names


def headers(root):
    """Paths below root (with '/'), sorted, of every header file."""
    out = []
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(HEADER_SUFFIXES):
                out.append(os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/"))
    return sorted(out)


def included_path(rel, bracket, target):
    """The included file's path below include/tessera/, or None when outside tessera."""
    if bracket == "<":
        return target[len("tessera/"):] if target.startswith("tessera/") else None
    joined = os.path.normpath(os.path.join(os.path.dirname(rel), target)).replace(os.sep, "/")
    return None if joined.startswith("..") else joined


def layer_of(rel):
    return rel.split("/", 1)[0] if "/" in rel else None


def check(include_dir, rules_dir):
    """Returns (problems, notes): lists of printable lines."""
    root = os.path.join(include_dir, "tessera")
    if not os.path.isdir(root):
        raise RuleError(f"{root}: no such folder; pass the include/ folder of the repository")
    layers_txt = os.path.join(rules_dir, "layers.txt")
    includes_txt = os.path.join(rules_dir, "allowed_includes.txt")
    long_txt = os.path.join(rules_dir, "allowed_long_headers.txt")
    layers = read_layers(layers_txt)
    allowed_includes = read_allowed_includes(includes_txt)
    allowed_long = read_allowed_long(long_txt)
    problems, notes, used, files = [], [], set(), headers(root)
    n_includes = 0
    for rel in files:
        path = os.path.join(root, rel)
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
        layer = layer_of(rel)
        if layer is None and rel != UMBRELLA:
            problems.append(f"include/tessera/{rel}: a header outside every layer folder; move it into the "
                            f"folder of its layer ({layers_txt})")
        elif layer is not None and layer not in layers:
            problems.append(f"include/tessera/{rel}: folder `{layer}` has no line in {layers_txt}; add "
                            f"`{layer}: <the folders it may include>` in its place in the order")
        if len(lines) > MAX_LINES and rel not in allowed_long:
            problems.append(f"include/tessera/{rel}: {len(lines)} lines, over the limit of {MAX_LINES}; split it "
                            f"(about 450 lines a header; what users must not include goes to detail/)")
        elif rel in allowed_long:
            if len(lines) > MAX_LINES:
                notes.append(f"allowed: include/tessera/{rel} has {len(lines)} lines ({long_txt}:{allowed_long[rel]})")
            else:
                problems.append(f"{long_txt}:{allowed_long[rel]}: include/tessera/{rel} has {len(lines)} lines, "
                                f"within the limit now; delete this line")
        if layer is None or layer not in layers:
            continue
        for n, line in enumerate(lines, 1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            target = included_path(rel, m.group(1), m.group(2))
            if target is None:
                continue
            n_includes += 1
            other = layer_of(target) or target  # tessera.hpp itself counts as a folder of its own
            if other == layer or other in layers[layer]:
                continue
            if (rel, target) in allowed_includes:
                used.add((rel, target))
                notes.append(f"allowed: include/tessera/{rel}:{n} includes {target} "
                             f"({includes_txt}:{allowed_includes[(rel, target)]})")
                continue
            may = " ".join(sorted(layers[layer])) or "nothing outside itself"
            problems.append(f"include/tessera/{rel}:{n}: includes {target}, but `{layer}` may include only: {may} "
                            f"(a lower layer never includes a higher one); move what it needs down a layer, or "
                            f"the header up")
    for (src, dst), n in sorted(allowed_includes.items(), key=lambda kv: kv[1]):
        if (src, dst) not in used:
            problems.append(f"{includes_txt}:{n}: include/tessera/{src} no longer includes {dst} against the rule; "
                            f"delete this line")
    for rel, n in sorted(allowed_long.items(), key=lambda kv: kv[1]):
        if rel not in files:
            problems.append(f"{long_txt}:{n}: include/tessera/{rel} does not exist; delete this line")
    notes.append(f"checked {len(files)} headers and {n_includes} includes of tessera headers")
    return problems, notes


def run(include_dir, rules_dir):
    try:
        problems, notes = check(include_dir, rules_dir)
    except RuleError as e:
        print(f"check_layers: {e}", file=sys.stderr)
        return 2
    for line in notes:
        print(line)
    for line in problems:
        print(f"error: {line}")
    if problems:
        print(f"check_layers: {len(problems)} problem(s)")
        return 1
    print("check_layers: the layer rule and the header length limit hold")
    return 0


def self_test(rules_dir):
    """Runs check() on small made-up trees, one rule broken at a time, using the real
    layers.txt: each must be reported, and the clean tree must pass."""
    failures = []
    scratch = tempfile.TemporaryDirectory(prefix="tessera_layers_")

    def tree(files, allowed_includes="", allowed_long=""):
        tmp = tempfile.mkdtemp(dir=scratch.name)
        for rel, text in files.items():
            path = os.path.join(tmp, "include", "tessera", rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        rules = os.path.join(tmp, "rules")
        os.makedirs(rules)
        with open(os.path.join(rules_dir, "layers.txt"), encoding="utf-8") as f:
            layers = f.read()
        for name, text in (("layers.txt", layers), ("allowed_includes.txt", allowed_includes),
                           ("allowed_long_headers.txt", allowed_long)):
            with open(os.path.join(rules, name), "w", encoding="utf-8") as f:
                f.write(text)
        return os.path.join(tmp, "include"), rules

    clean = {
        "tessera.hpp": "#include <tessera/train/trainer.hpp>\n",
        "core/a.hpp": "#pragma once\n",
        "layout/a.hpp": "#include <tessera/core/a.hpp>\n",
        "model/m.hpp": "#include <tessera/tensor/t.hpp>\n#include \"detail/d.hpp\"\n",
        "model/detail/d.hpp": "#include \"../../kernels/cpu/k.hpp\"\n",
        "kernels/cpu/k.hpp": "#include <vector>\n",
        "tensor/t.hpp": "#include <tessera/comm/c.hpp>\n",
        "comm/c.hpp": "#pragma once\n",
        "train/trainer.hpp": "#include <tessera/parallel/p.hpp>\n",
        "parallel/p.hpp": "#include <tessera/model/m.hpp>\n",
    }
    cases = [
        ("clean tree", {}, "", "", []),
        ("model includes parallel", {"model/m.hpp": "#include <tessera/parallel/p.hpp>\n"}, "", "",
         ["model/m.hpp:1: includes parallel/p.hpp, but `model` may include only"]),
        ("model includes comm", {"model/x.hpp": "\n#include <tessera/comm/c.hpp>\n"}, "", "",
         ["model/x.hpp:2: includes comm/c.hpp"]),
        ("relative include upwards", {"core/b.hpp": "#include \"../layout/a.hpp\"\n"}, "", "",
         ["core/b.hpp:1: includes layout/a.hpp"]),
        ("pipeline includes model", {"pipeline/q.hpp": "#include <tessera/model/m.hpp>\n"}, "", "",
         ["pipeline/q.hpp:1: includes model/m.hpp"]),
        ("a layer includes the umbrella", {"plan/u.hpp": "#include <tessera/tessera.hpp>\n"}, "", "",
         ["plan/u.hpp:1: includes tessera.hpp"]),
        ("allowed violation", {"model/m.hpp": "#include <tessera/parallel/p.hpp>\n"},
         "model/m.hpp -> parallel/p.hpp  # reason\n", "", []),
        ("stale allowance", {}, "model/m.hpp -> parallel/p.hpp  # reason\n", "",
         ["allowed_includes.txt:1: include/tessera/model/m.hpp no longer includes parallel/p.hpp"]),
        ("unknown folder", {"widgets/w.hpp": "#pragma once\n"}, "", "",
         ["folder `widgets` has no line in"]),
        ("header outside the folders", {"loose.hpp": "#pragma once\n"}, "", "",
         ["include/tessera/loose.hpp: a header outside every layer folder"]),
        ("long header", {"plan/long.hpp": "//\n" * (MAX_LINES + 1)}, "", "",
         [f"include/tessera/plan/long.hpp: {MAX_LINES + 1} lines, over the limit"]),
        ("header at the limit", {"plan/long.hpp": "//\n" * MAX_LINES}, "", "", []),
        ("allowed long header", {"plan/long.hpp": "//\n" * (MAX_LINES + 1)}, "", "plan/long.hpp\n", []),
        ("stale long allowance", {}, "", "core/a.hpp\nplan/gone.hpp\n",
         ["allowed_long_headers.txt:1: include/tessera/core/a.hpp has 1 lines, within the limit now",
          "allowed_long_headers.txt:2: include/tessera/plan/gone.hpp does not exist"]),
    ]
    for name, extra, allowed_includes, allowed_long, expected in cases:
        files = dict(clean)
        files.update(extra)
        include_dir, rules = tree(files, allowed_includes, allowed_long)
        problems, _ = check(include_dir, rules)
        missing = [e for e in expected if not any(e in p for p in problems)]
        if missing or len(problems) != len(expected):
            failures.append(f"{name}: expected {expected}, got {problems}")
    include_dir, rules = tree(clean, "model/m.hpp parallel/p.hpp\n")
    try:
        check(include_dir, rules)
        failures.append("a malformed allowed_includes.txt line was accepted")
    except RuleError as e:
        if "expected `header -> included header`" not in str(e):
            failures.append(f"malformed allowed_includes.txt: unexpected message {e}")
    scratch.cleanup()
    for f in failures:
        print(f"self-test failed: {f}")
    if failures:
        return 1
    print(f"check_layers self-test: {len(cases) + 1} cases pass")
    return 0


def main(argv):
    if len(argv) == 3 and argv[1] == "--self-test":
        return self_test(argv[2])
    if len(argv) == 3 and not argv[1].startswith("-"):
        return run(argv[1], argv[2])
    print(__doc__.strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
