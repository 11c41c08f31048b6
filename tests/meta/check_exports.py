#!/usr/bin/env python3
"""Meta-test: the shared library exports exactly the public API.

Every symbol libsaas.so exports is declared with SAAS_EXTERN in a public header
and carries a /** doc comment; every declared function is exported; nothing
but saas_* leaves the library.
"""
import pathlib
import re
import subprocess
import sys

lib, include = sys.argv[1], pathlib.Path(sys.argv[2])
out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
exported = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.split()[-2] in "TtDdBbRr"}
exported.discard("LIBSAAS_0")

declared, problems = {}, []
for header in sorted(include.rglob("*.h")):
    text = header.read_text()
    for m in re.finditer(r"SAAS_EXTERN\([^)]*\)\s*\**\s*(\w+)\s*\(", text):
        name = m.group(1)
        before = text[: m.start()].rstrip()
        if not before.endswith("*/") or before.rfind("/**") < before.rfind("/*") or "/**" not in before:
            problems.append(f"{header.name}: {name} has no /** doc comment")
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
