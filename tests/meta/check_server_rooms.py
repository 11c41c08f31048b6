#!/usr/bin/env python3
"""Meta-test: aas-server's rooms keep to their doors.

server/ is a floor (the files at its top) and rooms (its folders). A room's
public header is the only one of its headers another room or the floor may
include; everything else in a room's folder (internal.h, web/html.h) is its
own. front.h is the floor's alone. And nothing aas-server is built from
reaches a backend author's header (include/saas/sys/): a test's driver comes
in through the engine options (app.h), as an out-of-tree backend's does.

Tests may include what they like: unit tests reach internals on purpose.

usage: check_server_rooms.py SOURCE_DIR
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1]).resolve()
server = root / "server"
# The headers a room shows the others; every other header in a room's folder is private to it.
PUBLIC = {"api": "api.h", "web": "web.h", "preview": "preview.h", "mcp": "mcp_http.h", "admin": "admin.h",
          "e2b": "e2b.h"}
# Where the server's quoted includes are found, after the including file's own folder.
SEARCH = [server, root / "include", root / "lib" / "wire", root / "mcp"]
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)

problems = []
rooms = sorted(p.name for p in server.iterdir() if p.is_dir() and any(p.glob("*.[ch]")))
for room in rooms:
    if room not in PUBLIC:
        problems.append(f"server/{room}/ is a room without a public header named in {sys.argv[0]}")


def resolve(src, kind, name):
    dirs = ([src.parent] if kind == '"' else []) + SEARCH
    for d in dirs:
        p = d / name
        if p.is_file():
            return p.resolve()
    return None


def room_of(path):
    rel = path.relative_to(server.resolve())
    return rel.parts[0] if len(rel.parts) > 1 else None


def includes(path):
    for kind, name in INCLUDE.findall(path.read_text()):
        p = resolve(path, kind, name)
        if p is not None:
            yield name, p


sys_dir = (root / "include" / "saas" / "sys").resolve()
sources = sorted(p for p in server.rglob("*") if p.suffix in (".c", ".h") and p.is_file())
for src in sources:
    src = src.resolve()
    mine = room_of(src)
    for name, p in includes(src):
        if not p.is_relative_to(server.resolve()):
            continue
        theirs = room_of(p)
        if theirs is None and p.name == "front.h" and mine is not None:
            problems.append(f"{src.relative_to(root)}: includes front.h, the floor's own")
        if theirs is not None and theirs != mine and p.name != PUBLIC.get(theirs):
            problems.append(f"{src.relative_to(root)}: includes {name}, private to server/{theirs}/")
    # Everything it reaches, transitively, within the tree.
    seen, todo = set(), [src]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        if f.is_relative_to(sys_dir):
            problems.append(f"{src.relative_to(root)}: reaches {f.relative_to(root)}, a backend author's header")
            continue
        todo.extend(p for _, p in includes(f))

for p in problems:
    print(p)
sys.exit(1 if problems else 0)
