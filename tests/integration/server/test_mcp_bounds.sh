#!/bin/bash
# /v1/mcp cannot be made to spend much by one request, over real HTTP with the
# server's fake VM driver: a body without a valid key is at most 64 KiB (413
# past it, before anything is parsed), initialize never comes in a batch,
# batches exist only in sessions of protocol version 2025-03-26 and hold at
# most 32 messages; and the reported attack (one initialize and thousands of
# tools/list in one batch) leaves the server's peak RSS where it was. The
# sessions kept are bounded (--mcp-sessions): a flood of initializes ends the
# least recently used.
#
# usage: test_mcp_bounds.sh AAS_SERVER_FAKE
. "$(dirname "$0")/common.sh"
SERVER=$1
admin() { "$SERVER" "$@" --state-dir "${WORK}/state"; }

ANON_MAX=$((64 * 1024))   # AAS_ANON_BODY_MAX
BATCH_MAX=32              # AAS_MCP_BATCH_MAX

start_server "$SERVER"
KEY=$(admin account create --name alice 2>"${WORK}/admin.err")

INIT='{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'

# mcp FILE [curl args...]: POST the file to /v1/mcp; sets STATUS, HEADERS, BODY_SIZE and BODY (its
# first 16 KiB: the unbounded server answered the attack below with tens of megabytes).
mcp() {
	local file=$1; shift
	STATUS=$(curl -sS -X POST -o "${WORK}/body" -D "${WORK}/headers" -w '%{http_code}' \
		-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
		--data-binary @"$file" "$@" "${BASE}/v1/mcp")
	HEADERS=$(cat "${WORK}/headers")
	BODY_SIZE=$(stat -c %s "${WORK}/body")
	BODY=$(head -c 16384 "${WORK}/body")
}
# batch N FORMAT: a JSON array of N messages, FORMAT a printf format of one with %d for its id.
batch() {
	local n=$1 fmt=$2
	printf '['
	for ((i = 1; i <= n; i++)); do
		[ "$i" -gt 1 ] && printf ','
		printf "$fmt" "$i"
	done
	printf ']'
}
# padded SIZE: the initialize message with spaces after it, SIZE bytes in all.
padded() {
	printf '%s' "$INIT"
	head -c $(($1 - ${#INIT})) /dev/zero | tr '\0' ' '
}
# The server's peak and current resident set, in KiB.
hwm() { awk '/^VmHWM:/ { print $2 }' "/proc/${SERVER_PID}/status"; }
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/${SERVER_PID}/status"; }
# session VERSION: initialize at that version; sets SID.
session() {
	printf '%s' "${INIT/2025-06-18/$1}" >"${WORK}/init.json"
	mcp "${WORK}/init.json"
	SID=$(grep -i '^Mcp-Session-Id:' <<<"$HEADERS" | tr -d '\r' | awk '{ print $2 }')
}
LIST='{"jsonrpc":"2.0","id":%d,"method":"tools/list"}'
PING='{"jsonrpc":"2.0","id":%d,"method":"ping"}'

# ---- the report, scaled down: one initialize and 2,000 tools/list in one anonymous batch ----
{ printf '[%s,' "$INIT"; batch 2000 "$LIST" | tail -c +2; } >"${WORK}/attack.json"
before=$(hwm)
mcp "${WORK}/attack.json"
expect_status 413 "anonymous batch of 2,001 messages ($(stat -c %s "${WORK}/attack.json") bytes)"
expect_json .error.code too_large "anonymous oversized body code"
check "413 says the bound for requests without a key" grep -q "over ${ANON_MAX} bytes, the most a request without a valid API key" <<<"$BODY"
after=$(hwm)
check "peak RSS stays put under the anonymous attack (${before} -> ${after} KiB)" test $((after - before)) -lt 16384
# With a key the body is read and parsed, but initialize in a batch is refused whole: nothing is answered.
before=$(hwm)
mcp "${WORK}/attack.json" -H "Authorization: Bearer ${KEY}"
expect_status 400 "keyed batch holding an initialize"
expect_json .error.code -32600 "initialize in a batch is an invalid request"
expect_json .id null "initialize in a batch: id null"
check "the error names initialize" grep -q initialize <<<"$BODY"
check "nothing of the batch is answered (${BODY_SIZE} bytes)" test "${BODY_SIZE}" -lt 1024
after=$(hwm)
check "peak RSS stays small under the keyed attack (${before} -> ${after} KiB)" test $((after - before)) -lt 65536
# A small anonymous batch holding an initialize: the same refusal.
{ printf '[%s,' "$INIT"; batch 100 "$LIST" | tail -c +2; } >"${WORK}/small.json"
mcp "${WORK}/small.json"
expect_status 400 "anonymous batch holding an initialize"
expect_json .error.code -32600 "anonymous batch with initialize code"

# ---- the anonymous body bound, exactly ----
padded "$ANON_MAX" >"${WORK}/at.json"
mcp "${WORK}/at.json"
expect_status 200 "an anonymous body of exactly ${ANON_MAX} bytes"
expect_json .result.protocolVersion 2025-06-18 "the bound-sized initialize is answered"
padded $((ANON_MAX + 1)) >"${WORK}/over.json"
mcp "${WORK}/over.json"
expect_status 413 "an anonymous body one byte over"
mcp "${WORK}/over.json" -H 'Transfer-Encoding: chunked'
expect_status 413 "an anonymous chunked body one byte over (no Content-Length)"
mcp "${WORK}/over.json" -H 'Authorization: Bearer aas_sk_unknown'
expect_status 413 "an unknown key counts as none"
mcp "${WORK}/over.json" -H "Authorization: Bearer ${KEY}"
expect_status 200 "with a valid key the same body is read"
mcp "${WORK}/over.json" -H "x-api-key: ${KEY}" -H 'Transfer-Encoding: chunked'
expect_status 200 "with a valid key, chunked too"

# ---- batches: only in 2025-03-26 sessions, at most 32 ----
session 2025-06-18
expect_status 200 "initialize 2025-06-18"
check "a session id" test -n "$SID"
batch 2 "$PING" >"${WORK}/b2.json"
mcp "${WORK}/b2.json" -H "Mcp-Session-Id: ${SID}"
expect_status 400 "a batch in a 2025-06-18 session"
expect_json .error.code -32600 "batch in 2025-06-18: code"
check "the refusal names the version that has batches" grep -q 2025-03-26 <<<"$BODY"
printf '[{"jsonrpc":"2.0","method":"notifications/initialized"}]' >"${WORK}/n.json"
mcp "${WORK}/n.json" -H "Mcp-Session-Id: ${SID}"
expect_status 400 "a batch of notifications in a 2025-06-18 session (not 202)"
printf "$PING" 1 >"${WORK}/p.json"
mcp "${WORK}/p.json" -H "Mcp-Session-Id: ${SID}"
expect_status 200 "one message in a 2025-06-18 session"
session 2025-03-26
expect_status 200 "initialize 2025-03-26"
batch "$BATCH_MAX" "$PING" >"${WORK}/bmax.json"
mcp "${WORK}/bmax.json" -H "Mcp-Session-Id: ${SID}"
expect_status 200 "a batch of ${BATCH_MAX} in a 2025-03-26 session"
expect_json length "$BATCH_MAX" "every member of the batch answered"
batch $((BATCH_MAX + 1)) "$PING" >"${WORK}/bover.json"
mcp "${WORK}/bover.json" -H "Mcp-Session-Id: ${SID}"
expect_status 400 "a batch of $((BATCH_MAX + 1))"
expect_json .error.code -32600 "batch over the limit: code"
check "the refusal names the limit" grep -q "limit of ${BATCH_MAX}" <<<"$BODY"
{ printf '[%s,' "${INIT/2025-06-18/2025-03-26}"; batch 1 "$PING" | tail -c +2; } >"${WORK}/i2.json"
mcp "${WORK}/i2.json" -H "Mcp-Session-Id: ${SID}"
expect_status 400 "initialize in a batch of a 2025-03-26 session"

echo "server RSS at the end: $(rss) KiB (peak $(hwm) KiB)"

# ---- the sessions kept: a flood of initializes (they need no key) ends the least recently used ----
check "the server stops cleanly" stop_server
start_server "$SERVER" --mcp-sessions 3
# ping SID: one request in that session; sets STATUS.
ping() { printf "$PING" 1 >"${WORK}/p.json"; mcp "${WORK}/p.json" -H "Mcp-Session-Id: $1"; }
session 2025-06-18; S1=$SID
session 2025-06-18; S2=$SID
session 2025-06-18; S3=$SID
check "three distinct sessions" test "$(printf '%s\n' "$S1" "$S2" "$S3" | sort -u | wc -l)" -eq 3
sleep 0.01; ping "$S1"; expect_status 200 "the first session, used again"
for i in 1 2 3 4 5 6; do session 2025-06-18; F[i]=$SID; expect_status 200 "flooding initialize $i"; done
ping "${F[6]}"; expect_status 200 "the newest session works"
ping "${F[5]}"; expect_status 200 "the one before it works"
ping "${F[4]}"; expect_status 200 "the third newest works"
for s in "$S1" "$S2" "$S3" "${F[1]}" "${F[2]}" "${F[3]}"; do
	ping "$s"; expect_status 404 "a session past the 3 kept is ended"
	expect_json .error.code -32600 "its error is an invalid request"
done
check "--mcp-sessions over its maximum is refused with a reason" \
	bash -c "! '$SERVER' --mcp-sessions 1000001 --state-dir '${WORK}/x' --listen 127.0.0.1:0 2>'${WORK}/over.err' &&
		grep -q 'mcp-sessions' '${WORK}/over.err'"
finish
