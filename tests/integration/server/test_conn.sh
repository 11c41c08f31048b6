#!/bin/bash
# The connection policy over real sockets against the real server binary (the
# fake VM driver): slow and idle clients from one address cannot take the API
# from another (127.0.0.2 is loopback too), past the per-address cap a
# connection is refused, clients that trickle headers or a body are cut off,
# and previews cannot take the connections kept for the API.
#
# usage: test_conn.sh AAS_SERVER_FAKE
. "$(dirname "$0")/common.sh"
SERVER=$1
SLOW="$(dirname "$0")/slowclients.py"
admin() { "$SERVER" "$@" --state-dir "${WORK}/state"; }

# wait_for FILE PATTERN: until FILE has a line matching PATTERN (at most 60 s).
wait_for() {
	for _ in $(seq 1 600); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
	return 1
}
# log_count PATTERN: lines of the server's log that match.
log_count() { grep -c "$1" "${WORK}/server.log"; }
# healthz_from SRC: the status of GET /healthz sent from address SRC ("000": no answer).
healthz_from() {
	curl -s -o /dev/null -w '%{http_code}' --max-time 20 --interface "$1" "${BASE}/healthz"
}

# ---- the options' bounds ----
bad_option() { # bad_option DESCRIPTION ARGS...: the server refuses to start, saying why
	local what=$1; shift
	if timeout 20 "$SERVER" --listen 127.0.0.1:0 --state-dir "${WORK}/state" "$@" >"${WORK}/bad.out" 2>&1; then
		fail "$what: the server started"
	elif ! grep -q "aas-server: --" "${WORK}/bad.out"; then
		fail "$what: no message: $(cat "${WORK}/bad.out")"
	else
		pass
	fi
}
bad_option "previews may not take every connection" --max-connections 40 --preview-connections 40
bad_option "a header timeout of 0" --header-timeout 0
bad_option "a body timeout past an hour" --body-timeout 3601
bad_option "a per-address cap of 0" --per-ip-connections 0
check "AAS_HEADER_TIMEOUT is checked too" bash -c "AAS_HEADER_TIMEOUT=x timeout 20 '$SERVER' --listen 127.0.0.1:0 \
	--state-dir '${WORK}/state' 2>&1 | grep -q 'AAS_HEADER_TIMEOUT: expected 1 to 3600 seconds'"

# ---- one address fills what would be every connection; another still gets in ----
# Long timeouts here, so that what is held stays held while it is checked.
AAS_HEADER_TIMEOUT=600 start_server "$SERVER" --max-connections 40
python3 "$SLOW" hold 127.0.0.1 "$PORT" 40 headers "${WORK}/hold1" 600 & HOLD=$!; PIDS+=("$HOLD")
check "40 slow connections opened" wait_for "${WORK}/hold1" opened
check "16 of them refused at the per-address cap (24 by default)" wait_for "${WORK}/server.log" \
	"connection from 127.0.0.1 refused: it holds 24 connections"
check "the server logs each refusal" test "$(log_count 'connection from 127.0.0.1 refused')" -ge 16
check "another address is served while one holds its cap" test "$(healthz_from 127.0.0.2)" = 200
check "the capped address is refused" test "$(healthz_from 127.0.0.1)" = 000
kill "$HOLD" 2>/dev/null; wait "$HOLD" 2>/dev/null
served_again() { for _ in $(seq 1 100); do [ "$(healthz_from 127.0.0.1)" = 200 ] && return 0; sleep 0.1; done; return 1; }
check "the capped address is served again once its connections close" served_again
check "server stopped cleanly" stop_server

# ---- trickled headers, trickled bodies and idle connections are cut off ----
AAS_HEADER_TIMEOUT=2 AAS_BODY_TIMEOUT=2 AAS_PREVIEW_CONNECTIONS=2 start_server "$SERVER" --max-connections 40
python3 "$SLOW" hold 127.0.0.1 "$PORT" 10 headers "${WORK}/headers" 60 & PIDS+=($!)
python3 "$SLOW" hold 127.0.0.1 "$PORT" 4 body "${WORK}/body" 60 & PIDS+=($!)
python3 "$SLOW" hold 127.0.0.1 "$PORT" 4 idle "${WORK}/idle" 60 & PIDS+=($!)
check "API answered while slow clients are held" test "$(healthz_from 127.0.0.2)" = 200
check "trickled headers are cut off" wait_for "${WORK}/headers" "closed 10 of 10"
check "trickled bodies are cut off" wait_for "${WORK}/body" "closed 4 of 4"
check "idle connections are cut off" wait_for "${WORK}/idle" "closed 4 of 4"
check "the log says why (headers)" test "$(log_count 'request headers did not arrive in time')" -ge 14
check "the log says why (body)" test "$(log_count 'request body did not arrive in time')" -ge 4
check "the address is served after its slow connections were cut" test "$(healthz_from 127.0.0.1)" = 200

# A request of a normal client on a kept-alive connection is not cut by the header deadline.
KEY=$(admin account create --name conn)
auth POST /v1/sandboxes -d '{"size":"small"}'; expect_status 201 create; SB=$(jqr .id)
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"sleep 3"}'
expect_status 200 "an exec longer than the header timeout is answered"; expect_json .status exited "long exec status"

# ---- previews take at most --preview-connections; the API keeps the rest ----
python3 "$SLOW" blackhole "${WORK}/guest" & PIDS+=($!)
wait_for "${WORK}/guest" '^[0-9]' || fail "guest server did not start"
GP=$(cat "${WORK}/guest")
auth POST "/v1/sandboxes/${SB}/ports" -d "{\"port\":${GP}}"; expect_status 200 "expose the silent guest port"
# The preview's host is its URL's: "http://NAME.localhost:PORT/".
PHOST=$(jq -r .url <<<"$BODY" | sed -E 's#^[a-z]+://([^/]+)/.*#\1#')
for i in 1 2; do
	curl -s -o /dev/null --max-time 120 -H "Host: ${PHOST}" "${BASE}/" & PIDS+=($!)
done
for _ in $(seq 1 600); do [ "$(wc -l <"${WORK}/guest.accepted" 2>/dev/null || echo 0)" -ge 2 ] && break; sleep 0.1; done
check "two previews wait on the guest" test "$(wc -l <"${WORK}/guest.accepted" 2>/dev/null || echo 0)" -ge 2
req GET / -H "Host: ${PHOST}" --max-time 20
expect_status 503 "a third preview is refused"; expect_json .error.code busy "preview refusal code"
check "the refusal names the option" grep -q -- "--preview-connections 2" <<<"$BODY"
check "the refusal says when to retry" grep -qi '^Retry-After: 1' <<<"$HEADERS"
expect_json .error.retry_after 1 "the refusal's body repeats it"
auth GET "/v1/sandboxes/${SB}"; expect_status 200 "the API is answered while previews are full"

finish
