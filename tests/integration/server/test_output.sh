#!/bin/bash
# Large execution output over the REST API (the fake VM driver): an execution
# with 16 MiB of control bytes on each stream, JSON's most expensive to escape
# (~200 MB as a JSON reply), is answered in full by the synchronous exec and by
# GET /v1/executions/{id} while the server's peak RSS (VmHWM) grows by less than
# that reply: it is written as it is sent, never built whole. Long strings of
# every kind of character come back exactly.
#
# usage: test_output.sh AAS_SERVER_FAKE
. "$(dirname "$0")/common.sh"
SERVER=$1
admin() { "$SERVER" "$@" --state-dir "${WORK}/state"; }
hwm_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/${SERVER_PID}/status"; }

MIB=$((1 << 20))
OUT=$((16 * MIB))          # per stream: SAAS_EXEC_OUTPUT_MAX
ESCAPED=$((2 * 6 * OUT))   # both streams as "\u0001" escapes: what the reply weighs

# Under AddressSanitizer freed memory is held back (its quarantine, 256 MiB by
# default) and would count in the peak; a small one keeps the figure about the server.
export ASAN_OPTIONS="${ASAN_OPTIONS:+${ASAN_OPTIONS}:}quarantine_size_mb=8"
start_server "$SERVER"
KEY=$(admin account create --name output)
auth POST /v1/sandboxes -d '{"size":"small"}'; expect_status 201 create; SB=$(jqr .id)
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"echo warm"}'; expect_status 200 "a small exec"
BASE_HWM=$(hwm_kib)

# size_of METHOD PATH [curl args]: the status and byte count of a reply, not kept.
size_of() {
	local m=$1 p=$2; shift 2
	curl -sS -X "$m" -o "${WORK}/big.json" -w '%{http_code} %{size_download}' -H "Authorization: Bearer ${KEY}" "$@" \
		"${BASE}${p}"
}
read -r ST SZ < <(size_of POST "/v1/sandboxes/${SB}/exec" -d "{\"command\":\"spewctl ${OUT}\",\"max_output\":${OUT}}")
check "exec of 2 x 16 MiB answered: $ST" test "$ST" = 200
check "the exec reply holds all of it, escaped ($SZ bytes)" test "$SZ" -ge "$ESCAPED"
EXE=$(head -c 200 "${WORK}/big.json" | grep -o '"execution_id":"[^"]*"' | cut -d'"' -f4)
check "exec reply starts as an execution" test -n "$EXE"
check "the exec reply is the execution, whole" python3 - "${WORK}/big.json" "$OUT" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
sys.exit(0 if d["stdout"] == "\x01" * n and d["stderr"] == "\x01" * n and d["stdout_truncated"] is False else 1)
EOF
read -r ST SZ < <(size_of GET "/v1/executions/${EXE}")
check "execution get answered: $ST" test "$ST" = 200
check "the execution get holds all of it ($SZ bytes)" test "$SZ" -ge "$ESCAPED"
rm -f "${WORK}/big.json"
GROWTH=$(( ($(hwm_kib) - BASE_HWM) * 1024 ))
echo "peak RSS grew by $((GROWTH / MIB)) MiB for replies of $((SZ / MIB)) MiB"
check "peak RSS grew by less than one reply ($((GROWTH / MIB)) MiB < $((ESCAPED / MIB)) MiB)" \
	test "$GROWTH" -lt "$ESCAPED"

# Every kind of character in a string long enough to be streamed: quotes,
# backslashes, controls, DEL, 2-, 3- and 4-byte UTF-8 (a surrogate pair in JSON).
python3 - "${WORK}/stdin.json" <<'EOF'
import base64, json, sys
text = ("plain \" \\ / \x00\x01\x1f\x7f \b\f\n\r\t é € \U0001F600 " * 4000).encode()
json.dump({"command": "cat", "stdin_base64": base64.b64encode(text).decode()}, open(sys.argv[1], "w"))
open(sys.argv[1] + ".want", "wb").write(text)
EOF
auth POST "/v1/sandboxes/${SB}/exec" --data-binary @"${WORK}/stdin.json"
expect_status 200 "exec of mixed text"
printf '%s' "$BODY" >"${WORK}/mixed.json"
check "a streamed string decodes to the bytes written" python3 - "${WORK}/mixed.json" "${WORK}/stdin.json.want" <<'EOF'
import json, sys
raw = open(sys.argv[1], "rb").read()
d = json.loads(raw)
want = open(sys.argv[2], "rb").read().decode()
sys.exit(0 if d["stdout"] == want and d["stdout_encoding"] == "utf-8" and raw.isascii() else 1)
EOF

finish
