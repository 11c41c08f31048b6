#!/usr/bin/env python3
"""Meta-test: the shared library exports exactly the public API.

Every symbol libsaas.so exports is declared with SAAS_EXTERN in a public header
and carries a /** doc comment with a "Since: X.Y.Z" line; every declared
function is exported; nothing but saas_* leaves the library; each function is
listed in the symbol map's node of the release its Since line names
(LIBSAAS_X.Y.Z), and that node exists.

usage: check_exports.py LIBSAAS_SO INCLUDE_DIR [SYMBOL_MAP]
"""
import pathlib
import re
import subprocess
import sys

lib, include = sys.argv[1], pathlib.Path(sys.argv[2])
symbol_map = pathlib.Path(sys.argv[3]) if len(sys.argv) > 3 else None
out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
exported = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.split()[-2] in "TtDdBbRr"}
exported = {name for name in exported if not name.startswith("LIBSAAS_")}

# The map's nodes: LIBSAAS_X.Y.Z { global: name; ... }
node_of = {}
if symbol_map:
    text = re.sub(r"/\*.*?\*/", "", symbol_map.read_text(), flags=re.S)
    for node, body in re.findall(r"(LIBSAAS_[0-9.]+)\s*\{(.*?)\}", text, flags=re.S):
        globals_ = body.split("local:")[0].replace("global:", "")
        for name in re.findall(r"([A-Za-z_]\w*)\s*;", globals_):
            node_of[name] = node

declared, problems = {}, []
for header in sorted(include.rglob("*.h")):
    text = header.read_text()
    for m in re.finditer(r"SAAS_EXTERN\([^)]*\)\s*\**\s*(\w+)\s*\(", text):
        name = m.group(1)
        before = text[: m.start()].rstrip()
        if not before.endswith("*/") or before.rfind("/**") < before.rfind("/*") or "/**" not in before:
            problems.append(f"{header.name}: {name} has no /** doc comment")
        else:
            doc = before[before.rfind("/**"):]
            since = re.search(r"Since: (\d+\.\d+\.\d+)", doc)
            if not since:
                problems.append(f"{header.name}: {name}'s doc comment has no 'Since: X.Y.Z' line")
            elif symbol_map and node_of.get(name) != f"LIBSAAS_{since.group(1)}":
                problems.append(f"{header.name}: {name} is since {since.group(1)} but in symbol map node "
                                f"{node_of.get(name, '(none)')}")
        declared[name] = header.name

for name in sorted(exported - declared.keys()):
    problems.append(f"exported but not declared in a public header: {name}")
for name in sorted(declared.keys() - exported):
    problems.append(f"declared in {declared[name]} but not exported: {name}")
for name in sorted(exported):
    if not re.match(r"saas_[a-z]", name):
        problems.append(f"exported symbol outside the saas_ namespace: {name}")

for p in problems:
    print(p)
print(f"{len(exported)} exported, {len(declared)} declared, {len(problems)} problems")
sys.exit(1 if problems else 0)
