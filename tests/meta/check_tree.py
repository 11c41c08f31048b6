#!/usr/bin/env python3
"""The tree map (docs/tree.md) against the tree.

The map's table names every folder that holds tracked files and, for each
folder with C sources, the folders whose headers it may include. This check
fails when a folder is missing from the map, when the map names a folder that
is gone, or when a source file includes a header from a folder its row does
not allow: the map cannot rot, and a call that goes the wrong way (a store
reaching into the core, a room of the server into another's internals) is
seen the day it is written.

Usage: check_tree.py SOURCE_DIR
"""

import os
import re
import subprocess
import sys

ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|(.*)\|(.*)\|\s*$")
TICKED = re.compile(r"`([^`]+)`")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
SOURCE = (".c", ".h")


def folder(path):
    d = os.path.dirname(path)
    return d if d else "."


def tracked(top):
    try:
        out = subprocess.run(["git", "-C", top, "ls-files", "-z"], check=True,
                             capture_output=True).stdout
        return [p for p in out.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for root, dirs, names in os.walk(top):
            dirs[:] = [d for d in dirs if not d.startswith(".") and d != "build"]
            for n in names:
                files.append(os.path.relpath(os.path.join(root, n), top))
        return files


def read_map(path):
    """{folder: (below, allowed or None for anything)} from the map's table."""
    rows = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = ROW.match(line.rstrip("\n"))
            if not m or m.group(1) == "folder":
                continue
            name = m.group(1)
            below = name.endswith("/**")
            name = name[:-3] if below else name.rstrip("/")
            calls = m.group(3).strip()
            if "anything" in calls:
                allowed = None
            else:
                allowed = {t.rstrip("/") for t in TICKED.findall(calls)}
            if name in rows:
                raise SystemExit(f"{path}: `{name}` is in the map twice")
            rows[name] = (below, allowed)
    return rows


def resolve(top, files, src, target):
    """The tracked file an include names, or None (a system header)."""
    here = folder(src)
    for base in (here, "lib", "include", "server", os.path.join("lib", "wire")):
        p = os.path.normpath(os.path.join(base, target))
        if p in files:
            return p
    ends = [f for f in files if f.endswith("/" + target)]
    return ends[0] if len(ends) == 1 else None


def covering(rows, d):
    """The row that names folder d: its own, or an ancestor's marked /**."""
    if d in rows:
        return d
    p = d
    while p not in (".", ""):
        p = folder(p)
        if p in rows and rows[p][0]:
            return p
    return None


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__.strip().splitlines()[-1])
    top = sys.argv[1]
    files = set(tracked(top))
    rows = read_map(os.path.join(top, "docs", "tree.md"))
    bad = []
    folders = {folder(f) for f in files}
    for d in sorted(folders):
        if covering(rows, d) is None:
            bad.append(f"docs/tree.md does not name the folder `{d}/`")
    for name in sorted(rows):
        if name not in folders and not any(f.startswith(name + "/") for f in folders):
            bad.append(f"docs/tree.md names `{name}/`, which holds no tracked file")
    for src in sorted(files):
        if not src.endswith(SOURCE):
            continue
        row = covering(rows, folder(src))
        if row is None:
            continue
        allowed = rows[row][1]
        if allowed is None:
            continue
        with open(os.path.join(top, src), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for _, target in INCLUDE.findall(text):
            dest = resolve(top, files, src, target)
            if dest is None:
                continue
            to = covering(rows, folder(dest)) or folder(dest)
            if to == row or to in allowed:
                continue
            bad.append(f"{src} includes {dest}: `{row}/` may not reach `{to}/` (docs/tree.md)")
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} difference(s) between docs/tree.md and the tree")
        return 1
    print(f"docs/tree.md names all {len(folders)} folders; every include goes where the map says")
    return 0


if __name__ == "__main__":
    sys.exit(main())
