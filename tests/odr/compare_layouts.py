#!/usr/bin/env python3
"""Compares the class types of two object files compiled with -g (one by nvcc, one by g++):
every class, struct and closure type both describe must have the same size and the same
members at the same offsets (docs/cuda.md, "nvcc and g++ units in one program").

nvcc's host code is compiled by g++ after cudafe++, whose #line directives keep each header's
file and line, so both objects describe a type the same way. A type is known by its scope
(the enclosing namespaces, classes and functions, by their linkage names where they have one),
its name, and its file and line; a closure, which has no name, also by its captures' names
(g++ calls them `__this`, `__x`, ...). Two lambdas on one line with the same captures would be
taken for one, which can only make this stricter. Reads the DWARF with llvm-dwarfdump.

Usage: compare_layouts.py A.o B.o
Exit 0: every type both objects hold is laid out alike; 1: some differ (each named);
77: no llvm-dwarfdump (skipped); 2: an object describes no type (not built with -g).
"""
import collections
import re
import shutil
import subprocess
import sys

DIE = re.compile(r"0x[0-9a-f]+:( +)(DW_TAG_\w+|NULL)")
ATTR = re.compile(r"\s+(DW_AT_\w+)\s+\((.*)\)\s*$")
CLASSES = ("DW_TAG_class_type", "DW_TAG_structure_type")
SCOPES = CLASSES + ("DW_TAG_union_type", "DW_TAG_namespace", "DW_TAG_subprogram")


def layouts(dwarfdump, obj):
    """{(scope, name, file, line, capture names): {(size, ((member, offset), ...))}}"""
    out = collections.defaultdict(set)
    p = subprocess.Popen([dwarfdump, "--debug-info", obj], stdout=subprocess.PIPE, text=True, errors="replace")
    stack, target = [], None  # the open scopes; whose attributes the next lines are

    def close(depth):
        while stack and stack[-1]["depth"] >= depth:
            c = stack[-1]
            if c["tag"] in CLASSES and not c.get("decl") and c.get("file"):
                names = [m[0] or "" for m in c["members"]]
                closure = c.get("name") is None
                if not closure or (names and all(n.startswith("__") for n in names)):
                    scope = "::".join(d.get("linkage") or d.get("name") or "?" for d in stack[:-1])
                    key = (scope, c.get("name") or "<lambda>", c["file"], c.get("line"),
                           tuple(sorted(names)) if closure else ())
                    out[key].add((c.get("size"), tuple((m[0], m[1]) for m in c["members"])))
            stack.pop()

    for line in p.stdout:
        m = DIE.match(line)
        if m:
            depth, tag = len(m.group(1)), m.group(2)
            close(depth)
            target = None
            if tag in SCOPES:
                stack.append({"depth": depth, "tag": tag, "members": []})
                target = stack[-1]
            elif stack and stack[-1]["tag"] in CLASSES and tag == "DW_TAG_member" and depth == stack[-1]["depth"] + 2:
                stack[-1]["members"].append([None, None])
                target = stack[-1]["members"][-1]
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
        elif k == "DW_AT_name":
            target["name"] = v.strip('"')
        elif k == "DW_AT_linkage_name":
            target["linkage"] = v.strip('"')
        elif k in ("DW_AT_declaration", "DW_AT_specification"):
            target["decl"] = True
        elif k == "DW_AT_decl_file":
            target["file"] = v.strip('"')
        elif k == "DW_AT_decl_line":
            target["line"] = int(v, 0)
        elif k == "DW_AT_byte_size":
            target["size"] = int(v, 0)
    close(0)
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
    a, b = (layouts(dwarfdump, o) for o in sys.argv[1:])
    for o, t in zip(sys.argv[1:], (a, b)):
        if not t:
            print("%s describes no class type: build it with -g" % o)
            return 2
    common = sorted(set(a) & set(b), key=str)
    bad = [k for k in common if a[k] != b[k]]
    for scope, name, f, line, captures in bad:
        what = "closure with captures " + ", ".join(captures) if name == "<lambda>" else "type " + name
        k = (scope, name, f, line, captures)
        print("%s:%s: %s laid out differently:\n  %s: %s\n  %s: %s" %
              (f, line, what, sys.argv[1], sorted(a[k]), sys.argv[2], sorted(b[k])))
    closures = sum(1 for k in common if k[1] == "<lambda>")
    print("class types: %d in %s, %d in %s, %d in both (%d of them closures), %d laid out differently" %
          (len(a), sys.argv[1], len(b), sys.argv[2], len(common), closures, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
