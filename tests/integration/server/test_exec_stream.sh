#!/bin/bash
# Executions as they run, over real HTTP with the server's fake VM driver:
# an exec answered as an event stream (started, each chunk, exit; bytes that
# are not UTF-8 in base64), a reconnect from a cursor (query and
# Last-Event-ID) that gets what was missed and what follows, the output so far
# of a running execution and a long poll from a cursor, stdin and its end,
# signals, cancel, the running list, the history a page at a time, and every
# refusal (bad input, ended, another account's, too many streams).
#
# usage: test_exec_stream.sh AAS_SERVER_FAKE
. "$(dirname "$0")/common.sh"
SERVER=$1
admin() { "$SERVER" "$@" --state-dir "${WORK}/state"; }

start_server "$SERVER"
KEY=$(admin account create --name alice 2>/dev/null)
OTHER=$(admin account create --name bob 2>/dev/null)
auth POST /v1/sandboxes -d '{"size":"small","timeout":600}'; expect_status 201 create; SB=$(jqr .id)

# events FILE: the "event: NAME" lines of a stream, joined by spaces.
events() { sed -n 's/^event: //p' "$1" | tr '\n' ' ' | sed 's/ $//'; }
# data FILE NAME: the data of each NAME event, one JSON per line.
data() { awk -v n="$2" '/^event: /{e=substr($0, 8)} /^data: /{if (e == n) print substr($0, 7)}' "$1"; }
sse() { # sse PATH OUTFILE [curl args...]: a stream read to its end
	local path=$1 outf=$2; shift 2
	curl -sS -N -o "$outf" -D "${WORK}/sse.headers" -H "Authorization: Bearer ${KEY}" -H 'Accept: text/event-stream' \
		"$@" "${BASE}${path}"
}

# ---- an exec as an event stream ----
sse "/v1/sandboxes/${SB}/exec" "${WORK}/s1" -X POST -d '{"command":"lines 3"}'
check "stream content type" grep -qi '^Content-Type: text/event-stream' "${WORK}/sse.headers"
# Chunks may come together: the bytes and their order are what counts.
check "stream starts and ends" grep -Eq '^started (stdout |stderr )+exit$' <<<"$(events "${WORK}/s1")"
check "stream chunks" test "$(data "${WORK}/s1" stdout | jq -j .data)" = $'line 1\nline 2\nline 3'
check "stream offsets" test "$(data "${WORK}/s1" stdout | jq -r .offset | head -1)" = 0
check "stream stderr" test "$(data "${WORK}/s1" stderr | jq -r .data)" = "done"
check "stream exit" test "$(data "${WORK}/s1" exit | jq -r '.status + " " + (.exit_code|tostring)')" = "exited 0"
check "event ids are cursors" test "$(sed -n 's/^id: //p' "${WORK}/s1" | tail -1)" = "21,5"
EXE=$(data "${WORK}/s1" started | jq -r .execution_id)
auth GET "/v1/executions/${EXE}"; expect_json .stdout $'line 1\nline 2\nline 3' "streamed execution recorded"
# Bytes that are not UTF-8 come in base64.
sse "/v1/sandboxes/${SB}/exec" "${WORK}/s2" -X POST -d '{"command":"cat","stdin_base64":"/wBh"}'
check "binary chunk in base64" test "$(data "${WORK}/s2" stdout | jq -r '.data_encoding + " " + .data_base64')" = "base64 /wBh"
# Output goes out as it is written, not when the command ends: `tick` writes a line, then runs until a
# signal, which the test sends only once the line came. (The guard is under the stream's 15 s keepalive,
# which would let the line out at last: a stream that holds output fails here rather than passing late.)
# live_wait FILE: until FILE holds a stdout event (at most 10 s); its execution id into LIVE_ID.
live_wait() {
	local until=$((SECONDS + 10))
	LIVE_ID=
	while ((SECONDS < until)); do
		grep -q '^event: stdout' "$1" 2>/dev/null && break
		sleep 0.1
	done
	LIVE_ID=$(data "$1" started | jq -r .execution_id)
}
curl -sS -N -o "${WORK}/live" -H "Authorization: Bearer ${KEY}" -H 'Accept: text/event-stream' \
	-d '{"command":"tick"}' "${BASE}/v1/sandboxes/${SB}/exec" &
LIVE=$!; PIDS+=("$LIVE")
live_wait "${WORK}/live"
check "output streams while the command runs: $(events "${WORK}/live")" test "$(events "${WORK}/live")" = "started stdout"
auth POST "/v1/executions/${LIVE_ID}/signal" -d '{"signal":"TERM"}'; expect_status 200 "end the ticking command"
wait "$LIVE"
check "then the end" test "$(events "${WORK}/live")" = "started stdout exit"
check "the line, once" test "$(data "${WORK}/live" stdout | jq -j .data)" = tick
# A long poll answers with the first output, not at its wait_ms: a cat given a line, and its stdin closed
# only 20 s later (a poll that held the line to the end would see it exited).
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"cat","background":true,"stdin_open":true}'
LIVE_ID=$(jqr .execution_id)
# (Its requests keep their answers to themselves: req's files are the long poll's.)
stdin_to() { curl -sS -o /dev/null -H "Authorization: Bearer ${KEY}" -d "$2" "${BASE}/v1/executions/$1/stdin"; }
( sleep 0.5; stdin_to "$LIVE_ID" '{"stdin":"x"}'; sleep 20; stdin_to "$LIVE_ID" '{"close":true}' ) &
LIVE=$!; PIDS+=("$LIVE")
auth GET "/v1/executions/${LIVE_ID}?stdout_offset=0&wait_ms=30000"; expect_json .stdout x "long poll: the first output"
expect_json .status running "long poll: answered while the command runs"
kill "$LIVE" 2>/dev/null; wait "$LIVE" 2>/dev/null
auth POST "/v1/executions/${LIVE_ID}/stdin" -d '{"close":true}'; expect_status 200 "the cat's stdin closed"
# A refusal before the command starts is an ordinary JSON error.
sse "/v1/sandboxes/sbx-nosuch/exec" "${WORK}/s3" -X POST -d '{"command":"echo"}'
check "stream of a missing sandbox is a 404" grep -q '"not_found"' "${WORK}/s3"

# ---- a running execution: stdin, output so far, reconnects, the list ----
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"cat","background":true,"stdin_open":true}'
expect_status 202 "background with stdin open"; CAT=$(jqr .execution_id); expect_json .stdin_open true "stdin_open shown"
auth POST "/v1/executions/${CAT}/stdin" -d '{"stdin":"first\n"}'; expect_status 200 "stdin"
expect_json .status running "stdin answer"
auth GET "/v1/executions/${CAT}?stdout_offset=0&wait_ms=5000"; expect_status 200 "long poll"
expect_json .stdout first "output so far"; expect_json .stdout_offset 0 "long poll offset"
expect_json .status running "running while read"
auth POST "/v1/executions/${CAT}/stdin" -d '{"stdin_base64":"c2Vjb25kCg=="}'; expect_status 200 "stdin base64"
auth GET "/v1/executions/${CAT}?stdout_offset=6&wait_ms=5000"; expect_json .stdout second "read from a cursor: only the new"
expect_json .stdout_offset 6 "cursor offset echoed"
auth GET "/v1/executions/${CAT}"; expect_json .stdout $'first\nsecond' "whole output so far"
expect_json .stdout_total 13 "total so far"
auth GET "/v1/sandboxes/${SB}/executions?running=true"; expect_status 200 "running list"
expect_json '[.executions[].execution_id] | join(" ")' "$CAT" "running list holds it"
expect_json '.executions[0].stdout' null "the list carries no output"
auth GET "/v1/sandboxes/${SB}/executions?running=true&limit=5"; expect_status 400 "the running list takes no limit"
expect_json .error.code invalid_argument "the running list's refusal"
KEY=$OTHER auth GET "/v1/sandboxes/${SB}/executions"; expect_status 404 "another's sandbox list"
KEY=$OTHER auth GET "/v1/sandboxes/${SB}/executions?running=true"; expect_status 404 "another's running list"
KEY=$OTHER auth POST "/v1/executions/${CAT}/stdin" -d '{"stdin":"x"}'; expect_status 404 "another's stdin"
# A reconnect after the first line: what was missed, then what follows, then the end.
( sleep 0.5; curl -sS -o /dev/null -H "Authorization: Bearer ${KEY}" -d '{"stdin":"third\n","close":true}' \
	"${BASE}/v1/executions/${CAT}/stdin" ) &
PIDS+=($!)
sse "/v1/executions/${CAT}/events" "${WORK}/s4" -H 'Last-Event-ID: 6,0'
check "reconnect: missed, then new, then exit" test "$(events "${WORK}/s4")" = "stdout stdout exit" -o \
	"$(events "${WORK}/s4")" = "stdout exit"
check "reconnect data" test "$(data "${WORK}/s4" stdout | jq -j .data)" = $'second\nthird'
check "reconnect exit" test "$(data "${WORK}/s4" exit | jq -r .status)" = exited
sse "/v1/executions/${CAT}/events?stdout_offset=13" "${WORK}/s5"
check "reconnect to an ended one" test "$(events "${WORK}/s5")" = "stdout exit"
check "reconnect to an ended one: from the cursor" test "$(data "${WORK}/s5" stdout | jq -j .data)" = third
auth POST "/v1/executions/${CAT}/stdin" -d '{"stdin":"late"}'; expect_status 409 "stdin after the end"
auth GET "/v1/sandboxes/${SB}/executions?running=true"; expect_json '.executions | length' 0 "none running"

# ---- the history: newest first, a page at a time ----
auth GET "/v1/sandboxes/${SB}/executions?running=false"; expect_status 200 history
expect_json '.executions[0].execution_id' "$CAT" "the newest first"
expect_json '.executions[0].command' cat "with its command"
expect_json '.executions[0].status' exited "ended, and listed"
expect_json '.executions[0].stdout' null "the history carries no output"
expect_json .next_cursor null "one page"
ALL=$(jqr '[.executions[].execution_id] | join(" ")')
check "the history is in start order" test "$(jqr '[.executions[].started_at] | . == (sort | reverse)')" = true
PAGED="" CUR=""
for _ in $(seq 1 20); do
	auth GET "/v1/sandboxes/${SB}/executions?limit=1${CUR:+&cursor=$CUR}"; expect_status 200 "a page"
	PAGED="${PAGED:+$PAGED }$(jqr '.executions[].execution_id')"
	CUR=$(jqr '.next_cursor // empty')
	[ -z "$CUR" ] && break
done
check "page by page: the same history" test "$PAGED" = "$ALL"
auth GET "/v1/sandboxes/${SB}/executions?limit=0"; expect_status 400 "limit 0"
expect_json .error.code invalid_argument "limit 0: the error body"
auth GET "/v1/sandboxes/${SB}/executions?limit=501"; expect_status 400 "limit over the maximum"
auth GET "/v1/sandboxes/${SB}/executions?limit=x"; expect_status 400 "limit not a number"
auth GET "/v1/sandboxes/${SB}/executions?cursor=garbage"; expect_status 400 "bad cursor"
expect_json .error.code invalid_argument "bad cursor: the error body"
auth GET "/v1/sandboxes/${SB}/executions?cursor=1.x&cursor=2.y"; expect_status 400 "two cursors"
auth GET "/v1/sandboxes/sbx-nosuch/executions"; expect_status 404 "history of an unknown sandbox"

# ---- the sandbox's metrics (the commands above ran in it: the fake driver counts a CPU-second each) ----
auth GET "/v1/sandboxes/${SB}/metrics"; expect_status 200 metrics
check "metrics: at least one sample" test "$(jqr '.count >= 1 and (.metrics | length) == .count')" = true
check "metrics: the size's shape" test "$(jqr '.metrics[-1] | .vcpus == 2 and .memory_total == 4294967296')" = true
check "metrics: used within total" test "$(jqr '.metrics[-1] | .memory_used <= .memory_total and .disk_used <= .disk_total')" = true
check "metrics: CPU a percentage" test "$(jqr '.metrics[-1].cpu_used_pct | . >= 0 and . <= 100')" = true
auth GET "/v1/sandboxes/${SB}/metrics?start=2020-01-01&end=2020-01-02"; expect_status 200 "metrics of a window long past"
expect_json .count 0 "none then"
auth GET "/v1/sandboxes/${SB}/metrics?start=yesterday"; expect_status 400 "metrics: a bad time"
expect_json .error.code invalid_argument "a bad time: the error body"
auth GET "/v1/sandboxes/${SB}/metrics?start=2030-01-01&end=2020-01-01"; expect_status 400 "metrics: start after end"
auth GET "/v1/sandboxes/sbx-nosuch/metrics"; expect_status 404 "metrics of an unknown sandbox"

# ---- signals and cancel ----
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"wait","background":true}'; W=$(jqr .execution_id)
auth POST "/v1/executions/${W}/stdin" -d '{"stdin":"x"}'; expect_status 409 "stdin not open"
auth POST "/v1/executions/${W}/signal" -d '{"signal":"STOP"}'; expect_status 400 "bad signal"
auth POST "/v1/executions/${W}/signal" -d '{}'; expect_status 400 "no signal"
auth POST "/v1/executions/${W}/signal" -d '{"signal":"TERM"}'; expect_status 200 "signal"
sse "/v1/executions/${W}/events" "${WORK}/s6"
check "signalled exit" test "$(data "${WORK}/s6" exit | jq -r .exit_code)" = 143
auth POST "/v1/executions/${W}/signal" -d '{"signal":"KILL"}'; expect_status 409 "signal after the end"
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"wait","background":true}'; W=$(jqr .execution_id)
auth POST "/v1/executions/${W}/cancel"; expect_status 200 "cancel"
sse "/v1/executions/${W}/events" "${WORK}/s7"
check "cancelled" test "$(data "${WORK}/s7" exit | jq -r '.status + " " + .error')" = \
	"failed cancelled: the command was killed, with every process it started"
auth POST "/v1/executions/exe-nosuch/cancel"; expect_status 404 "cancel unknown"
auth GET "/v1/executions/exe-nosuch/events"; expect_status 404 "events of unknown"
auth GET "/v1/executions/${W}?stdout_offset=x"; expect_status 400 "bad offset"
auth GET "/v1/executions/${W}/events" -H 'Last-Event-ID: nope'; expect_status 400 "bad Last-Event-ID"
auth POST "/v1/executions/${W}/stdin" -d '{}'; expect_status 400 "stdin without anything"

# ---- the bound on streams per account ----
for i in $(seq 1 16); do
	curl -sS -N -o /dev/null -H "Authorization: Bearer ${KEY}" -H 'Accept: text/event-stream' \
		-d '{"command":"wait"}' "${BASE}/v1/sandboxes/${SB}/exec" &
	PIDS+=($!)
done
for _ in $(seq 1 100); do
	auth GET "/v1/sandboxes/${SB}/executions?running=true"; [ "$(jqr '.executions | length')" -ge 8 ] && break; sleep 0.1
done
# max_executions (8) is the first bound a tenant meets; with them all running, a follower is the 17th stream.
RUNNING=$(jqr '.executions[0].execution_id')
OPEN=$(jqr '.executions | length')
for i in $(seq $((OPEN + 1)) 16); do
	curl -sS -N -o /dev/null -H "Authorization: Bearer ${KEY}" "${BASE}/v1/executions/${RUNNING}/events" &
	PIDS+=($!)
done
# The streams connect in their own time: ask until the last of them is in (a stream let in is cut after 1 s).
for _ in $(seq 1 60); do
	STATUS=$(curl -sS -o "${WORK}/body" -w '%{http_code}' --max-time 1 -H "Authorization: Bearer ${KEY}" \
		"${BASE}/v1/executions/${RUNNING}/events" 2>/dev/null)
	[ "$STATUS" = 429 ] && break
done
BODY=$(cat "${WORK}/body")
expect_status 429 "17th stream"; expect_json .error.limit streams "the limit named"
auth GET "/v1/sandboxes/${SB}/executions?running=true"
for x in $(jqr '.executions[].execution_id'); do auth POST "/v1/executions/${x}/cancel"; done

finish
