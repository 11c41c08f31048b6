#!/bin/bash
# A keyed JSON body is bounded in what it can make the server build, not only
# in bytes, over real HTTP with the server's fake VM driver: jansson turns
# each value into a tree node of some 40 to 100 bytes, so 8 MiB of
# "[1,1,1,...]" (4 million values) used to cost hundreds of megabytes of peak
# RSS. Both JSON front ends, a REST route and /v1/mcp, count the values and
# the nesting depth before parsing and refuse a body past either bound
# (413), and the peak RSS stays where it was. So does aas-mcp, the stdio
# server, for a line of the same (-32600), when it is built.
#
# usage: test_json_bounds.sh AAS_SERVER_FAKE [AAS_MCP]
. "$(dirname "$0")/common.sh"
SERVER=$1
MCP=${2:-}
admin() { "$SERVER" "$@" --state-dir "${WORK}/state"; }

VALUES_MAX=100000   # AAS_JSON_VALUES_MAX
DEPTH_MAX=64        # AAS_JSON_DEPTH_MAX

start_server "$SERVER"
KEY=$(admin account create --name alice 2>"${WORK}/admin.err")

INIT='{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'

# post PATH FILE: POST the file with the key; sets STATUS and BODY (its first 16 KiB).
post() {
	STATUS=$(curl -sS -X POST -o "${WORK}/body" -w '%{http_code}' -H "Authorization: Bearer ${KEY}" \
		-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
		--data-binary @"$2" "${BASE}$1")
	BODY=$(head -c 16384 "${WORK}/body")
}
# ones N: a JSON array of N ones.
ones() { printf '['; yes 1 | head -n "$1" | paste -sd, | tr -d '\n'; printf ']'; }
# The server's peak resident set, in KiB.
hwm() { awk '/^VmHWM:/ { print $2 }' "/proc/${SERVER_PID}/status"; }

# ---- the finding: 8 MiB of "[1,1,...]" with a valid key ----
ones $((4 << 20)) >"${WORK}/ones.json"
check "the body is 8 MiB of JSON" test "$(stat -c %s "${WORK}/ones.json")" -eq $(((8 << 20) + 1))
before=$(hwm)
post /v1/sandboxes "${WORK}/ones.json"
expect_status 413 "REST: 4 million values"
expect_json .error.code too_large "REST: 4 million values, code"
check "REST: the error names the bound (${BODY:0:200})" grep -q "more than ${VALUES_MAX} values" <<<"$BODY"
after=$(hwm)
echo "REST: peak RSS ${before} -> ${after} KiB"
check "REST: peak RSS stays small (${before} -> ${after} KiB)" test $((after - before)) -lt 32768
# Peak RSS only grows: a fresh server for the second front end.
stop_server
start_server "$SERVER"
before=$(hwm)
post /v1/mcp "${WORK}/ones.json"
expect_status 413 "MCP: 4 million values"
expect_json .error.code -32600 "MCP: 4 million values, JSON-RPC code"
expect_json .id null "MCP: 4 million values, id"
check "MCP: the error names the bound (${BODY:0:200})" grep -q "more than ${VALUES_MAX} values" <<<"$BODY"
after=$(hwm)
echo "MCP: peak RSS ${before} -> ${after} KiB"
check "MCP: peak RSS stays small (${before} -> ${after} KiB)" test $((after - before)) -lt 32768

# ---- the value bound, exactly: {"size":[1,...]} is 3 values and the array's (400: size is a string) ----
{ printf '{"size":'; ones $((VALUES_MAX - 3)); printf '}'; } >"${WORK}/at.json"
post /v1/sandboxes "${WORK}/at.json"
check "REST: ${VALUES_MAX} values are parsed (then refused for what they say): ${STATUS} ${BODY:0:200}" \
	test "$STATUS" = 400 -a "$(jqr .error.code)" != too_large
{ printf '{"size":'; ones $((VALUES_MAX - 2)); printf '}'; } >"${WORK}/over.json"
post /v1/sandboxes "${WORK}/over.json"
expect_status 413 "REST: $((VALUES_MAX + 1)) values"
# MCP: an initialize padded with an array to exactly the bound is answered; one more value is not.
pad_init() { printf '%s' "${INIT%\}}"; printf ',"pad":'; ones "$1"; printf '}'; }
# INIT holds 19 values (keys included), "pad" and its array 2 more.
pad_init $((VALUES_MAX - 21)) >"${WORK}/init-at.json"
post /v1/mcp "${WORK}/init-at.json"
expect_status 200 "MCP: an initialize of ${VALUES_MAX} values"
expect_json .result.protocolVersion 2025-06-18 "MCP: the bound-sized initialize is answered"
pad_init $((VALUES_MAX - 20)) >"${WORK}/init-over.json"
post /v1/mcp "${WORK}/init-over.json"
expect_status 413 "MCP: an initialize of $((VALUES_MAX + 1)) values"
expect_json .error.code -32600 "MCP: one value over, JSON-RPC code"

# ---- depth ----
nest() { printf '{"size":'; for ((i = 1; i < $1; i++)); do printf '['; done; printf '1'; for ((i = 1; i < $1; i++)); do printf ']'; done; printf '}'; }
nest "$DEPTH_MAX" >"${WORK}/deep-at.json"
post /v1/sandboxes "${WORK}/deep-at.json"
check "REST: ${DEPTH_MAX} levels are parsed: ${STATUS} ${BODY:0:200}" test "$STATUS" = 400 -a "$(jqr .error.code)" != too_large
nest $((DEPTH_MAX + 1)) >"${WORK}/deep-over.json"
post /v1/sandboxes "${WORK}/deep-over.json"
expect_status 413 "REST: $((DEPTH_MAX + 1)) levels"
check "REST: the error names the depth bound (${BODY:0:200})" grep -q "more than ${DEPTH_MAX} deep" <<<"$BODY"
post /v1/mcp "${WORK}/deep-over.json"
expect_status 413 "MCP: $((DEPTH_MAX + 1)) levels"
expect_json .error.code -32600 "MCP: too deep, JSON-RPC code"

# ---- one long string is one value: a 6 MiB command with brackets, commas and escapes in it ----
{ printf '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"s":"'
  head -c $((1 << 20)) /dev/zero | tr '\0' ',' ; head -c $((1 << 20)) /dev/zero | tr '\0' '['
  for ((i = 0; i < 4096; i++)); do printf '\\"[1,2,3],{\\\\'; done
  head -c $((4 << 20)) /dev/zero | tr '\0' '1'; printf '"}}'; } >"${WORK}/string.json"
post /v1/mcp "${WORK}/string.json"
check "MCP: a 6 MiB string of brackets and commas is one value (not 413): ${STATUS} ${BODY:0:200}" test "$STATUS" != 413

# ---- aas-mcp: the same 8 MiB as one line on stdin ----
if [ -n "$MCP" ]; then
	mkfifo "${WORK}/mcp.in" "${WORK}/mcp.out"
	AAS_BASE_URL=$BASE AAS_API_KEY=$KEY "$MCP" <"${WORK}/mcp.in" >"${WORK}/mcp.out" 2>"${WORK}/mcp.err" &
	MCP_PID=$!
	PIDS+=("$MCP_PID")
	exec 3>"${WORK}/mcp.in" 4<"${WORK}/mcp.out"
	mcp_hwm() { awk '/^VmHWM:/ { print $2 }' "/proc/${MCP_PID}/status"; }
	printf '%s\n' "$INIT" >&3
	read -r -t 30 LINE <&4
	check "aas-mcp: initialize answered (${LINE:0:100})" grep -q '"protocolVersion":"2025-06-18"' <<<"$LINE"
	before=$(mcp_hwm)
	{ cat "${WORK}/ones.json"; printf '\n'; } >&3
	read -r -t 60 LINE <&4
	after=$(mcp_hwm)
	BODY=$LINE
	expect_json .error.code -32600 "aas-mcp: 4 million values, JSON-RPC code"
	check "aas-mcp: the error names the bound (${LINE:0:200})" grep -q "more than ${VALUES_MAX} values" <<<"$LINE"
	echo "aas-mcp: peak RSS ${before} -> ${after} KiB"
	# The line itself is read into a buffer that doubles: 16 MiB for these 8.
	check "aas-mcp: peak RSS stays small (${before} -> ${after} KiB)" test $((after - before)) -lt 40960
	printf '{"jsonrpc":"2.0","id":2,"method":"ping"}\n' >&3
	read -r -t 30 LINE <&4
	check "aas-mcp: the next message is answered (${LINE:0:100})" grep -q '"id":2,"result"' <<<"$LINE"
	exec 3>&- 4<&-
	wait "$MCP_PID"
	check "aas-mcp: exits cleanly at the end of its input" test $? -eq 0
fi

finish
