#!/usr/bin/env python3
"""Check recorded responses of aas-server against server/openapi.json's schemas.

usage: check_openapi.py OPENAPI_JSON RECORDS_DIR

RECORDS_DIR holds NAME.meta ("METHOD PATH STATUS CONTENT-TYPE") and NAME.body
for each response common.sh's req() saw (AAS_TEST_OPENAPI set). Every JSON body of
a documented operation must validate against the schema documented for its
status (or "default"); a status the operation does not document is a failure
too. Responses of paths the document does not have (a "no route" 404) are
left alone: test_openapi.sh checks the routes.

The validator is Debian's python3-jsonschema: the tests already need python3,
and the package is in the distribution, so no registry is asked at test time.
OpenAPI 3.0 schema objects are JSON Schema draft 4 plus "nullable", which is
rewritten here as the union it means.
"""
import json
import os
import re
import sys

import jsonschema


def nullable_to_union(node):
    """OpenAPI 3.0's `nullable: true` -> anyOf [the schema, null], everywhere."""
    if isinstance(node, list):
        return [nullable_to_union(v) for v in node]
    if not isinstance(node, dict):
        return node
    node = {k: nullable_to_union(v) for k, v in node.items()}
    if node.pop("nullable", False) is True:
        return {"anyOf": [node, {"type": "null"}]}
    return node


def operations(doc):
    """(METHOD, compiled path regex, operation) for every documented operation."""
    ops = []
    for path, item in doc.get("paths", {}).items():
        rx = re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(path)) + "$")
        for method, op in item.items():
            if method != "parameters":
                ops.append((method.upper(), rx, path, op))
    return ops


def resolve(doc, obj):
    while isinstance(obj, dict) and "$ref" in obj:
        node = doc
        for part in obj["$ref"].lstrip("#/").split("/"):
            node = node[part]
        obj = node
    return obj


def main():
    doc = nullable_to_union(json.load(open(sys.argv[1])))
    rec = sys.argv[2]
    ops = operations(doc)
    checked = failed = 0
    validators = {}
    names = sorted(n for n in os.listdir(rec) if n.endswith(".meta"))
    for name in names:
        method, url, status, ctype = (open(os.path.join(rec, name)).read().split(" ", 3) + [""] * 4)[:4]
        path = url.split("?", 1)[0]
        match = [(p, op) for m, rx, p, op in ops if m == method and rx.match(path)]
        if not match:
            continue
        # The most specific template: fewest {parameters}.
        tmpl, op = min(match, key=lambda m: m[0].count("{"))
        where = f"{method} {url} -> {status}"
        responses = op.get("responses", {})
        resp = responses.get(status, responses.get("default"))
        if resp is None:
            print(f"FAIL: {where}: status {status} is not documented for {method} {tmpl}")
            failed += 1
            continue
        schema = resolve(doc, resp).get("content", {}).get("application/json", {}).get("schema")
        if schema is None or not ctype.strip().startswith("application/json"):
            continue
        body = open(os.path.join(rec, name[:-5] + ".body"), "rb").read()
        try:
            value = json.loads(body)
        except ValueError as e:
            print(f"FAIL: {where}: not JSON ({e})")
            failed += 1
            continue
        key = (method, tmpl, status)
        if key not in validators:
            root = dict(schema)
            root["components"] = doc.get("components", {})
            validators[key] = jsonschema.Draft4Validator(root)
        errors = sorted(validators[key].iter_errors(value), key=lambda e: list(e.path))
        checked += 1
        for e in errors[:5]:
            at = "/".join(str(p) for p in e.path) or "(the body)"
            print(f"FAIL: {where}: {at}: {e.message[:300]}")
        failed += bool(errors)
    print(f"openapi: {checked} response bodies checked against {os.path.basename(sys.argv[1])}, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
