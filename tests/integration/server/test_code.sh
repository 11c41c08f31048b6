#!/bin/bash
# Code contexts over real HTTP with the server's fake VM driver, whose guest
# port 49999 is a TEST DOUBLE of the code server (code_guest.py, canned
# answers; SAAS_FAKE_PORTS maps the port): a run answered as JSON and as an
# event stream, a variable kept in a context and not in another, a PNG result
# in base64 that decodes, an error's traceback, env, a timeout that keeps the
# context, a client that leaves (the run is interrupted), contexts created,
# listed, restarted and deleted, the remote client through `aas`-less curl,
# and a 4xx with the JSON error body for every bad input.
#
# usage: test_code.sh AAS_SERVER_FAKE
. "$(dirname "$0")/common.sh"
SERVER=$1
admin() { "$SERVER" "$@" --state-dir "${WORK}/state"; }

python3 "$(dirname "$0")/code_guest.py" "${WORK}/guest.port" &
PIDS+=("$!")
for _ in $(seq 1 100); do [ -s "${WORK}/guest.port" ] && break; sleep 0.1; done
export SAAS_FAKE_PORTS="49999=127.0.0.1:$(cat "${WORK}/guest.port")"

start_server "$SERVER"
KEY=$(admin account create --name alice 2>/dev/null)
OTHER=$(admin account create --name bob 2>/dev/null)
auth POST /v1/sandboxes -d '{"size":"small","timeout":600}'; expect_status 201 create; SB=$(jqr .id)
R="/v1/sandboxes/${SB}/code"

# ---- runs as JSON ----
auth POST "$R/run" -d '{"code":"1+1"}'; expect_status 200 "run"
expect_json .status done "run: status"
expect_json '.results[0].formats["text/plain"]' "1+1" "run: main result's text"
expect_json '.results[0].is_main_result' true "run: main result"
expect_json .execution_count 1 "run: count"
expect_json .error null "run: no error"
auth POST "$R/run" -d '{"code":"x = 41"}'; expect_status 200 "set a variable"
auth POST "$R/run" -d '{"code":"x"}'; expect_json '.results[0].formats["text/plain"]' 41 "the variable survives"
auth POST "$R/run" -d '{"code":"x","language":"javascript"}'
expect_json .error.name NameError "another language's context does not share it"
auth POST "$R/run" -d '{"code":"print hello"}'; expect_json .stdout hello "stdout (its newline: jq's output loses it)"
auth POST "$R/run" -d '{"code":"boom"}'
expect_json .error.name ValueError "error name"; expect_json .error.value boom "error value"
check "traceback" grep -q 'ValueError: boom' <<<"$(jqr .error.traceback)"
expect_json .stderr 'about to fail' "stderr"
auth POST "$R/run" -d '{"code":"chart"}'
jqr '.results[0].formats["image/png"]' | base64 -d >"${WORK}/chart.png"
check "the PNG decodes" python3 -c 'import sys,struct; d=open(sys.argv[1],"rb").read(); assert d[:8]==b"\x89PNG\r\n\x1a\n"; assert struct.unpack(">II", d[16:24])==(1,1)' "${WORK}/chart.png"
auth POST "$R/run" -d '{"code":"table"}'
expect_json '.results[0].formats["text/html"]' '<table><tr><td>1</td></tr></table>' "html result"
expect_json '.results[0].formats["e2b/data"]' '{"a":[1]}' "data result"
auth POST "$R/run" -d '{"code":"env","env":{"A":"1"}}'; expect_json .stdout '{"A": "1"}' "env reaches the run"

# ---- a timeout keeps the context; a client that leaves interrupts ----
auth POST "$R/run" -d '{"code":"hang","timeout_ms":300}'; expect_status 200 "timed out run"
expect_json .status timeout "timeout status"; expect_json .stdout tick "what came before the timeout"
auth POST "$R/run" -d '{"code":"x"}'; expect_json '.results[0].formats["text/plain"]' 41 "the context lives on"

# ---- hostile answers: a clear error ----
auth POST "$R/run" -d '{"code":"garbage"}'; expect_status 502 "a line not JSON"
expect_json .error.code protocol_error "a line not JSON: code"
auth POST "$R/run" -d '{"code":"noend"}'; expect_status 502 "no end_of_execution"

# ---- events ----
sse() { curl -sS -N -o "$2" -D "${WORK}/sse.headers" -H "Authorization: Bearer ${KEY}" -H 'Accept: text/event-stream' \
	-X POST -d "$1" "${BASE}${R}/run"; }
events() { sed -n 's/^event: //p' "$1" | tr '\n' ' ' | sed 's/ $//'; }
data() { awk -v n="$2" '/^event: /{e=substr($0, 8)} /^data: /{if (e == n) print substr($0, 7)}' "$1"; }
sse '{"code":"boom"}' "${WORK}/s1"
check "stream content type" grep -qi '^Content-Type: text/event-stream' "${WORK}/sse.headers"
check "stream events: $(events "${WORK}/s1")" test "$(events "${WORK}/s1")" = "execution_count stderr error end"
check "stream error" test "$(data "${WORK}/s1" error | jq -r .name)" = ValueError
check "stream end" test "$(data "${WORK}/s1" end | jq -r .status)" = done
sse '{"code":"chart"}' "${WORK}/s2"
check "stream result" test "$(data "${WORK}/s2" result | jq -r '.formats["image/png"]' | base64 -d | head -c 4 | tail -c 3)" = PNG
sse '{"code":"garbage"}' "${WORK}/s3"
check "stream failure" test "$(data "${WORK}/s3" failed | jq -r .error.code)" = protocol_error
# A client that leaves mid-run: the run is cut (the double sees the connection close).
curl -sS -N -o "${WORK}/s4" -m 2 -H "Authorization: Bearer ${KEY}" -H 'Accept: text/event-stream' \
	-X POST -d '{"code":"hang"}' "${BASE}${R}/run" 2>/dev/null
check "a left stream told of the tick" grep -q '"tick\\n"' "${WORK}/s4"
auth POST "$R/run" -d '{"code":"x"}'; expect_json '.results[0].formats["text/plain"]' 41 "the context outlives a left stream"
# A SILENT run whose client leaves (its timeout far away): the engine's ticks see the client gone
# and cut the run then, not at the run's end; the double counts the hang-up (what interrupts it).
interrupts() { auth POST "$R/run" -d '{"code":"interrupts"}'; jqr .stdout; }
wait_interrupts() { # wait_interrupts N: until the double counted more than N hang-ups (or 30 s)
	local i
	for i in $(seq 1 60); do [ "$(interrupts)" -gt "$1" ] && return 0; sleep 0.5; done
	return 1
}
N=$(interrupts)
curl -sS -N -o /dev/null -m 2 -H "Authorization: Bearer ${KEY}" -H 'Accept: text/event-stream' \
	-X POST -d '{"code":"hang","timeout_ms":3600000}' "${BASE}${R}/run" 2>/dev/null
check "a silent stream's run is cut when its client leaves" wait_interrupts "$N"
N=$(interrupts)
curl -sS -o /dev/null -m 2 -H "Authorization: Bearer ${KEY}" -X POST -d '{"code":"hang","timeout_ms":3600000}' \
	"${BASE}${R}/run" 2>/dev/null
check "a silent JSON run is cut when its client leaves" wait_interrupts "$N"
auth POST "$R/run" -d '{"code":"x"}'; expect_json '.results[0].formats["text/plain"]' 41 "the context outlives them"

# ---- what the code server refuses or cuts: a status and a clear message, not a 500 ----
auth POST "$R/run" -d '{"code":"toomany"}'; expect_status 429 "the guest's too many contexts"
expect_json .error.code limit_exceeded "too many contexts: code"
check "too many contexts: the guest's words" grep -q 'too many contexts' "${WORK}/body"
auth POST "$R/run" -d '{"code":"cut"}'; expect_status 200 "a run the guest cut"
expect_json .stdout_truncated true "the guest's output cut is flagged"
expect_json .results_truncated true "the guest's results cut is flagged"

# ---- contexts ----
auth POST "$R/contexts" -d '{"language":"python","cwd":"/tmp"}'; expect_status 201 "create a context"
C1=$(jqr .id); expect_json .cwd /tmp "context cwd"
auth POST "$R/contexts" -d '{"language":"bash"}'; expect_status 201 "create a second"; C2=$(jqr .id)
expect_json .language bash "second's language"
auth GET "$R/contexts"; expect_status 200 list; expect_json '.contexts | length' 2 "two listed"
auth POST "$R/run" -d "{\"code\":\"x = 7\",\"context_id\":\"$C1\"}"; expect_status 200 "run in a context"
auth POST "$R/run" -d "{\"code\":\"x\",\"context_id\":\"$C1\"}"; expect_json '.results[0].formats["text/plain"]' 7 "its variable"
auth POST "$R/run" -d "{\"code\":\"x\",\"context_id\":\"$C2\"}"; expect_json .error.name NameError "two contexts do not share"
auth POST "$R/contexts/$C1/restart"; expect_status 204 restart
auth POST "$R/run" -d "{\"code\":\"x\",\"context_id\":\"$C1\"}"; expect_json .error.name NameError "restart forgets"
auth DELETE "$R/contexts/$C1"; expect_status 204 delete
auth DELETE "$R/contexts/$C1"; expect_status 404 "delete again"; expect_json .error.code not_found "delete again: code"
auth POST "$R/run" -d "{\"code\":\"x\",\"context_id\":\"$C1\"}"; expect_status 404 "a deleted context"
auth POST "$R/contexts/$C2/restart"; expect_status 204 "restart the other"

# ---- bad input: 4xx with our error body ----
auth POST "$R/run" -d '{}'; expect_status 400 "no code"; expect_json .error.code invalid_argument "no code: code"
auth POST "$R/run" -d '{"code":1}'; expect_status 400 "code not a string"
auth POST "$R/run" -d '{"code":"1","language":"cobol"}'; expect_status 400 "unknown language"
auth POST "$R/run" -d '{"code":"1","language":"python","context_id":"c"}'; expect_status 400 "language and context"
auth POST "$R/run" -d '{"code":"1","context_id":"../x"}'; expect_status 400 "bad context id"
auth POST "$R/run" -d '{"code":"1","timeout_ms":-5}'; expect_status 400 "negative timeout"
auth POST "$R/run" -d '{"code":"1","timeout_ms":99999999999}'; expect_status 400 "timeout too large"
auth POST "$R/run" -d '{"code":"1","max_output":999999999999}'; expect_status 400 "max_output too large"
auth POST "$R/run" -d '{"code":"1","env":{"A=B":"x"}}'; expect_status 400 "bad env name"
auth POST "$R/run" -d '{"code":"1","env":[1]}'; expect_status 400 "env not an object"
auth POST "$R/run" -d 'not json'; expect_status 400 "body not JSON"
auth POST "$R/contexts" -d '{"language":"ruby"}'; expect_status 400 "context: unknown language"
auth POST "$R/contexts" -d '{"cwd":5}'; expect_status 400 "context: cwd not a string"
auth POST "$R/contexts/a.b.c%2F/restart"; check "restart: a bad id is a 4xx ($STATUS)" test "${STATUS:0:1}" = 4
auth POST "/v1/sandboxes/sbx-nosuch/code/run" -d '{"code":"1"}'; expect_status 404 "no such sandbox"
req POST "$R/run" -H "Authorization: Bearer ${OTHER}" -d '{"code":"1"}'; expect_status 404 "another account's sandbox"
req GET "$R/contexts" -H "Authorization: Bearer ${OTHER}"; expect_status 404 "another account's contexts"
req POST "$R/run" -d '{"code":"1"}'; expect_status 401 "no key"

# ---- a sandbox without a code server ----
unset SAAS_FAKE_PORTS
finish
