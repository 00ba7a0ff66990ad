#!/usr/bin/env python3
"""docker_context.py SRC DEST | --check SRC PATH... - the build context a container builder sends for SRC: SRC's files
minus those its .dockerignore excludes, copied (modification times kept, so builds from DEST
stay incremental) into DEST, whose other files are removed. Prints the file count and bytes.
With --check, prints "excluded PATH" or "included PATH" for each path (relative to SRC).

The matching follows Docker's (moby/patternmatcher): '#' lines are comments, a pattern is
cleaned and anchored at the context root, '*' and '?' stay within one path segment, '**'
spans any number of them, a path is excluded when it or one of its parent folders matches, a
'!' pattern re-includes, and the last matching pattern wins. Used by test_image_build.sh."""
import os
import re
import shutil
import sys


def compile_pattern(p):
    rx, i = "", 0
    while i < len(p):
        if p.startswith("**/", i):
            rx += "(?:.*/)?"
            i += 3
        elif p.startswith("**", i):
            rx += ".*"
            i += 2
        elif p[i] == "*":
            rx += "[^/]*"
            i += 1
        elif p[i] == "?":
            rx += "[^/]"
            i += 1
        else:
            rx += re.escape(p[i])
            i += 1
    return re.compile(rx + r"\Z")


def load(src):
    rules = []
    path = os.path.join(src, ".dockerignore")
    if not os.path.exists(path):
        return rules
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        neg = line.startswith("!")
        if neg:
            line = line[1:].strip()
        line = os.path.normpath(line).lstrip("/")
        if line in ("", "."):
            continue
        rules.append((neg, compile_pattern(line)))
    return rules


def excluded(rules, rel):
    parts = rel.split("/")
    prefixes = ["/".join(parts[: k + 1]) for k in range(len(parts))]
    out = False
    for neg, rx in rules:
        if any(rx.match(p) for p in prefixes):
            out = not neg
    return out


def main():
    if sys.argv[1] == "--check":
        rules = load(sys.argv[2])
        for rel in sys.argv[3:]:
            print(("excluded " if excluded(rules, rel) else "included ") + rel)
        return
    src, dest = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    rules = load(src)
    keep, total = set(), 0
    for root, dirs, files in os.walk(src):
        rel_root = os.path.relpath(root, src)
        rel_root = "" if rel_root == "." else rel_root + "/"
        if os.path.abspath(root) == dest or (rel_root and excluded(rules, rel_root.rstrip("/"))
                                             and not any(neg for neg, _ in rules)):
            dirs[:] = []
            continue
        dirs[:] = [d for d in dirs if os.path.join(root, d) != dest]
        for f in files:
            rel = rel_root + f
            if excluded(rules, rel):
                continue
            s, d = os.path.join(src, rel), os.path.join(dest, rel)
            if os.path.islink(s) or not os.path.isfile(s):
                continue
            keep.add(rel)
            st = os.stat(s)
            total += st.st_size
            try:
                dt = os.stat(d)
                if dt.st_size == st.st_size and int(dt.st_mtime) == int(st.st_mtime):
                    continue
            except FileNotFoundError:
                pass
            os.makedirs(os.path.dirname(d), exist_ok=True)
            shutil.copy2(s, d)
    for root, dirs, files in os.walk(dest, topdown=False):
        for f in files:
            rel = os.path.relpath(os.path.join(root, f), dest)
            if rel not in keep:
                os.remove(os.path.join(root, f))
        if root != dest and not os.listdir(root):
            os.rmdir(root)
    print(f"{len(keep)} files, {total} bytes")


if __name__ == "__main__":
    main()
