#!/bin/bash
# The OpenAPI document matches the routes: every route the server serves is
# documented, every documented operation is served (never "no route" or 405),
# and GET /openapi.json is exactly server/openapi.json.
#
# usage: test_openapi.sh AAS_SERVER OPENAPI_JSON
. "$(dirname "$0")/common.sh"
SERVER=$1
DOC=$2

"$SERVER" routes | sort >"${WORK}/served"
jq -r '.paths | to_entries[] | .key as $p | .value | keys[] | select(. != "parameters") | "\(ascii_upcase) \($p)"' \
	"$DOC" | sort >"${WORK}/documented"
check "served routes == documented operations: $(diff "${WORK}/served" "${WORK}/documented" | tr '\n' ' ')" \
	diff -q "${WORK}/served" "${WORK}/documented"

start_server "$SERVER"
req GET /openapi.json; expect_status 200 "openapi served"
check "served document is the file" test "$(jq -S . <<<"$BODY")" = "$(jq -S . "$DOC")"
check "OpenAPI 3.0" test "$(jqr .openapi | cut -c1-3)" = 3.0

# Every documented operation answers with something other than "no such route".
while read -r method path; do
	p=${path//\{id\}/sbx-none}
	req "$method" "$p" -H "Authorization: Bearer aas_sk_invalid" -d '{}'
	code=$(jqr '.error.code? // empty' 2>/dev/null)
	if [ "$STATUS" = 405 ] || { [ "$STATUS" = 404 ] && grep -q 'no route' <<<"$BODY"; }; then
		fail "$method $path is documented but not served ($STATUS $code)"
	else
		pass
	fi
done <"${WORK}/documented"

# Every documented schema reference resolves.
for r in $(jq -r '.. | objects | ."$ref"? // empty' "$DOC" | sort -u); do
	name=${r#\#/components/}
	check "ref $r resolves" test "$(jq -r --arg p "$name" '.components | getpath($p | split("/")) | type' "$DOC")" = object
done
finish
