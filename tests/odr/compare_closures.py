#!/usr/bin/env python3
"""Compares the closure types of two object files compiled with -g (one by nvcc, one by g++):
every closure type both describe must have the same captures at the same offsets
(docs/cuda.md, "nvcc and g++ units in one program").

g++ describes a closure as an unnamed structure whose members are the captures, named
`__this`, `__x`, ..., declared at the lambda's file and line; nvcc's host code is compiled by
g++ after cudafe++, whose #line directives keep the header's file and line. Closures are
matched by (file, line, capture names): two lambdas on one line with the same captures would
be taken for one, which can only make this stricter. Reads the DWARF with llvm-dwarfdump.

Usage: compare_closures.py A.o B.o
Exit 0: every closure type both objects hold is laid out alike; 1: some differ (each named);
77: no llvm-dwarfdump (skipped); 2: an object has no closure described (not built with -g).
"""
import collections
import re
import shutil
import subprocess
import sys

DIE = re.compile(r"0x[0-9a-f]+:( +)(DW_TAG_\w+|NULL)")
ATTR = re.compile(r"\s+(DW_AT_\w+)\s+\((.*)\)\s*$")


def closures(dwarfdump, obj):
    """{(file, line, capture names): {(size, ((capture, offset), ...))}}"""
    out = collections.defaultdict(set)
    p = subprocess.Popen([dwarfdump, "--debug-info", obj], stdout=subprocess.PIPE, text=True, errors="replace")
    cur, depth0, target = None, 0, None  # the structure read, its depth, whose attributes follow

    def flush():
        ms = cur["members"]
        if cur.get("file") and not cur.get("named") and ms and all((m[0] or "").startswith("__") for m in ms):
            mem = tuple((m[0], m[1]) for m in ms)
            out[(cur["file"], cur.get("line"), tuple(sorted(m[0] for m in mem)))].add((cur.get("size"), mem))

    for line in p.stdout:
        m = DIE.match(line)
        if m:
            depth, tag = len(m.group(1)), m.group(2)
            if cur is not None and depth <= depth0:
                flush()
                cur = None
            target = None
            if tag in ("DW_TAG_class_type", "DW_TAG_structure_type"):
                cur, depth0 = {"members": []}, depth
                target = cur
            elif cur is not None and tag == "DW_TAG_member" and depth == depth0 + 2:
                cur["members"].append([None, None])
                target = cur["members"][-1]
            continue
        a = ATTR.match(line)
        if target is None or not a:
            continue
        k, v = a.groups()
        if isinstance(target, list):
            if k == "DW_AT_name":
                target[0] = v.strip('"')
            elif k == "DW_AT_data_member_location":
                target[1] = int(v, 0)
        elif k in ("DW_AT_name", "DW_AT_declaration"):
            target["named"] = True
        elif k == "DW_AT_decl_file":
            target["file"] = v.strip('"')
        elif k == "DW_AT_decl_line":
            target["line"] = int(v, 0)
        elif k == "DW_AT_byte_size":
            target["size"] = int(v, 0)
    if cur is not None:
        flush()
    if p.wait() != 0:
        raise SystemExit("llvm-dwarfdump failed on %s" % obj)
    return out


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    dwarfdump = shutil.which("llvm-dwarfdump") or shutil.which("llvm-dwarfdump-14")
    if not dwarfdump:
        print("skipped: no llvm-dwarfdump (Debian: llvm; .ci/setup.sh installs it)")
        return 77
    a, b = (closures(dwarfdump, o) for o in sys.argv[1:])
    for o, c in zip(sys.argv[1:], (a, b)):
        if not c:
            print("%s describes no closure type: build it with -g" % o)
            return 2
    common = sorted(set(a) & set(b), key=str)
    bad = [k for k in common if a[k] != b[k]]
    for k in bad:
        print("%s:%s: closure with captures %s laid out differently:\n  %s: %s\n  %s: %s" %
              (k[0], k[1], ", ".join(k[2]), sys.argv[1], sorted(a[k]), sys.argv[2], sorted(b[k])))
    print("closure types: %d in %s, %d in %s, %d in both, %d laid out differently" %
          (len(a), sys.argv[1], len(b), sys.argv[2], len(common), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
