#!/bin/bash
# Preview URLs as an attacker would try them, over real sockets, with the server's fake
# VM driver (a sandbox's port N is the host's 127.0.0.1:N): one exposure's URL opens no
# other port, the old {port}-{id} hosts open nothing, the API's credentials and cookies
# never reach the guest, a guest's cookies for the parent domain never reach the browser,
# un-exposing works at once (WebSockets included), a guest that never answers gets 504,
# and a WebSocket closes when its sandbox is destroyed or expires.
#
# usage: test_preview.sh AAS_SERVER_FAKE WSTOOL
. "$(dirname "$0")/common.sh"
SERVER=$1
WSTOOL=$2
GUEST="$(dirname "$0")/guest_http.py"
admin() { "$SERVER" "$@" --state-dir "${WORK}/state"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# A short first-byte timeout, so that a guest that never answers is seen in a second; the
# idle timeout stays long, so that a WebSocket closing below is the proxy's doing, not idleness.
start_server "$SERVER" --preview-first-byte-timeout 1
KEY=$(admin account create --name alice 2>/dev/null)
OTHER=$(admin account create --name mallory 2>/dev/null)

GP=$(free_port); WP=$(free_port)
python3 "$GUEST" "$GP" & PIDS+=($!)
"$WSTOOL" serve "$WP" & PIDS+=($!)
for _ in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:${GP}/" && break; sleep 0.1; done

auth POST /v1/sandboxes -d '{"timeout":600}'; expect_status 201 create; SB=$(jqr .id)
auth POST "/v1/sandboxes/${SB}/ports" -d "{\"port\":${GP}}"; expect_status 200 "expose the HTTP guest"
URL_G=$(jqr .url)
auth POST "/v1/sandboxes/${SB}/ports" -d "{\"port\":${WP}}"; expect_status 200 "expose the WebSocket guest"
URL_W=$(jqr .url)
host_of() { sed -E 's#^https?://([^/]*)/.*$#\1#' <<<"$1"; }
HG=$(host_of "$URL_G"); HW=$(host_of "$URL_W")
NG=${HG%%.*}
check "a preview host is one unguessable label ($HG)" grep -Eq "^[a-z2-7]{26}\.localhost:${PORT}$" <<<"$HG"
check "each exposure has its own name" test "${HG}" != "${HW}"
check "the URL names neither sandbox nor port" bash -c "! grep -q -e '${SB}' -e '${GP}' <<<'${URL_G}'"
auth POST "/v1/sandboxes/${SB}/ports" -d "{\"port\":${GP}}"; expect_json .url "$URL_G" "exposing again keeps the name"
auth GET "/v1/sandboxes/${SB}"; expect_json "[.ports[].url] | sort | join(\" \")" "$(printf '%s\n' "$URL_G" "$URL_W" | sort | paste -sd' ')" "the sandbox lists both URLs"
auth GET "/v1/sandboxes/${SB}/ports"; expect_status 200 "the ports route"
expect_json "[.ports[].url] | sort | join(\" \")" "$(printf '%s\n' "$URL_G" "$URL_W" | sort | paste -sd' ')" "it lists both URLs"
expect_json .sandbox_id "$SB" "the ports route names its sandbox"
req GET "/v1/sandboxes/${SB}/ports" -H "Authorization: Bearer ${OTHER}"; expect_status 404 "another account's ports"
req GET "/v1/sandboxes/${SB}/ports"; expect_status 401 "the ports route needs a key"

# ---- one exposure's URL reaches its own port, and no other ----
req GET / -H "Host: ${HG}"; expect_status 200 "the HTTP guest's URL"
check "it reaches its own port" test "$BODY" = "port ${GP}"
req GET / -H "Host: ${HW}"; expect_status 200 "the WebSocket guest's URL"
check "that one reaches the other port" test "$BODY" = "wstool: plain HTTP works"
for h in "${WP}-${SB}.localhost:${PORT}" "${GP}-${SB}.localhost:${PORT}" "${WP}-${NG}.localhost:${PORT}" \
	"${NG}-${WP}.localhost:${PORT}" "${NG}x.localhost:${PORT}" "${NG^^}-.localhost:${PORT}" "sbx.localhost:${PORT}"; do
	req GET / -H "Host: $h"; expect_status 404 "no preview at $h"
	expect_json .error.code not_found "404 body at $h"
	check "the 404 names no sandbox ($h)" bash -c "! grep -q '${SB}' <<<'${BODY}'"
done
req GET / -H "Host: ${NG^^}.LOCALHOST:${PORT}"; expect_status 200 "host names are case-insensitive"
req GET / -H "Host: ${NG}.localhost:${PORT}" -H 'Accept: text/html'; expect_status 200 "HTML or not"
req GET /v1/account -H "Host: ${GP}-${SB}.localhost:${PORT}" -H "Authorization: Bearer ${KEY}"
expect_status 404 "an old-style preview host is never the API"

# ---- what crosses into the guest, and back ----
req GET /headers -H "Host: ${HG}" -H "Authorization: Bearer ${KEY}" -H "x-api-key: ${KEY}" \
	-H "Proxy-Authorization: Basic c2VjcmV0" -H "Cookie: aas_session=s3cret; theme=dark; aas_csrf=t0ken; lang=en" \
	-H "X-Custom: kept"
expect_status 200 "headers echoed"
check "no API key reaches the guest" bash -c "! grep -q -e '${KEY}' -e 'aas_sk_' <<<'${BODY}'"
check "no Authorization reaches the guest" bash -c "! grep -qi '^authorization:' <<<'${BODY}'"
check "no x-api-key reaches the guest" bash -c "! grep -qi '^x-api-key:' <<<'${BODY}'"
check "no Proxy-Authorization reaches the guest" bash -c "! grep -qi '^proxy-authorization:' <<<'${BODY}'"
check "this server's cookies stay out" bash -c "! grep -q -e aas_session -e s3cret -e aas_csrf <<<'${BODY}'"
check "the guest's own cookies pass: $(grep -i '^cookie:' <<<"$BODY")" grep -qi '^Cookie: theme=dark; lang=en$' <<<"$BODY"
check "other headers pass" grep -qi '^X-Custom: kept$' <<<"$BODY"
req GET /headers -H "Host: ${HG}" -H "Cookie: aas_only=1"
check "a Cookie of only this server's cookies is dropped whole" bash -c "! grep -qi '^cookie:' <<<'${BODY}'"
req GET /cookies -H "Host: ${HG}"; expect_status 200 "cookies"
COOKIES=$(grep -i '^Set-Cookie:' <<<"$HEADERS" | tr -d '\r')
check "a host-only cookie passes" grep -q 'own=1; Path=/' <<<"$COOKIES"
check "a cookie for the preview's own host passes" grep -q "ownhost=1; Domain=${HG%%:*}" <<<"$COOKIES"
check "a cookie for the parent domain is dropped" bash -c "! grep -q 'parent=1' <<<'${COOKIES}'"
check "a cookie for another preview is dropped" bash -c "! grep -q 'sibling=1' <<<'${COOKIES}'"
check "exactly two cookies pass" test "$(grep -c . <<<"$COOKIES")" = 2

# ---- what a guest's server answers: read as browsers and curl read it ----
req GET /raw/bare-lf -H "Host: ${HG}"; expect_status 200 "header lines ended by a bare LF"
check "its body: $BODY" test "$BODY" = "bare lf"
check "its fields pass" grep -qi '^X-Bare: lf' <<<"$HEADERS"
req GET /raw/folded -H "Host: ${HG}"; expect_status 200 "obs-fold, space before a colon, a line that is no field"
check "a folded field is unfolded with one space" grep -qi '^X-Folded: one two' <<<"$HEADERS"
check "the space before a colon is removed" grep -qi '^X-Spaced: yes' <<<"$HEADERS"
check "a line that is no field is dropped" bash -c "! grep -qi 'no colon' <<<'${HEADERS}'"
check "read until close: $BODY" test "$BODY" = folded
req GET /raw/chunked -H "Host: ${HG}"; expect_status 200 "a chunked body (to an HTTP/1.0 request)"
check "de-chunked: $BODY" test "$BODY" = "chunked"
req GET /raw/interim -H "Host: ${HG}"; expect_status 201 "interim 1xx answers are skipped"
check "the final answer's body: $BODY" test "$BODY" = created
req GET /raw/no-reason -H "Host: ${HG}"; expect_status 202 "a status line without a reason phrase"
for bad in cl-te cl-cl bare-cr nul gzip-te; do
	req GET "/raw/${bad}" -H "Host: ${HG}"; expect_status 502 "ambiguous framing is refused (${bad})"
	expect_json .error.code backend_error "502 code (${bad})"
done
check "a 502 says what was wrong: $(jqr .error.message)" grep -q "transfer coding other than chunked" <<<"$(jqr .error.message)"
curl -sS -o "${WORK}/badchunk" -H "Host: ${HG}" "${BASE}/raw/bad-chunk" 2>/dev/null; RC=$?
check "a bad chunk size cuts the body, not ends it (curl exit $RC)" test "$RC" = 18 -o "$RC" = 56
check "what came before the bad chunk arrived" test "$(cat "${WORK}/badchunk")" = hello

# ---- a guest that never answers: 504 after the first-byte timeout ----
req GET /hang -H "Host: ${HG}"; expect_status 504 "a guest that never answers"
expect_json .error.code timeout "504 code"
check "504 says why: $(jqr .error.message)" grep -q "did not answer within 1 s" <<<"$(jqr .error.message)"

# ---- DELETE un-exposes: at once, WebSockets included ----
OUT=$("$WSTOOL" client 127.0.0.1 "$PORT" "$HW" "echo me" 2>&1)
check "WebSocket through the preview: $OUT" test "$OUT" = "echo me"
# hold_ws NAME HOST: a WebSocket through the preview that stays open; its output in ${WORK}/NAME.
hold_ws() {
	"$WSTOOL" hold 127.0.0.1 "$PORT" "$2" "hello" >"${WORK}/$1" 2>&1 & PIDS+=($!)
	for _ in $(seq 1 100); do grep -q open "${WORK}/$1" && return 0; sleep 0.1; done
	return 1
}
# closed NAME: did that WebSocket end (waiting up to 30 s for it: a loaded machine is slow)?
closed() {
	for _ in $(seq 1 300); do grep -q closed "${WORK}/$1" && return 0; sleep 0.1; done
	return 1
}
check "a WebSocket is held open" hold_ws ws1 "$HW"
req DELETE "/v1/sandboxes/${SB}/ports/${WP}" -H "Authorization: Bearer ${OTHER}"; expect_status 404 "another account cannot un-expose"
req GET / -H "Host: ${HW}"; expect_status 200 "still exposed after a refused un-expose"
auth DELETE "/v1/sandboxes/${SB}/ports/${WP}"; expect_status 200 "un-expose"
expect_json .exposed false "un-expose answer"; expect_json .port "$WP" "un-expose port"
check "the open WebSocket is closed by the un-expose" closed ws1
req GET / -H "Host: ${HW}"; expect_status 404 "an un-exposed port's URL opens nothing"
req GET / -H "Host: ${HG}"; expect_status 200 "the other port stays exposed"
auth DELETE "/v1/sandboxes/${SB}/ports/${WP}"; expect_status 200 "un-exposing again is fine"
auth DELETE "/v1/sandboxes/${SB}/ports/http"; expect_status 400 "a port that is not a number"
auth DELETE "/v1/sandboxes/${SB}/ports/0"; expect_status 400 "port 0"
auth DELETE "/v1/sandboxes/${SB}/ports/65536"; expect_status 400 "port 65536"
auth DELETE "/v1/sandboxes/sbx-doesnotexist/ports/80"; expect_status 404 "unknown sandbox"
req DELETE "/v1/sandboxes/${SB}/ports/${GP}"; expect_status 401 "un-expose needs a key"
auth GET "/v1/sandboxes/${SB}"; expect_json "[.ports[].port] | join(\" \")" "$GP" "only the HTTP guest stays listed"
auth POST "/v1/sandboxes/${SB}/ports" -d "{\"port\":${WP}}"; expect_status 200 "expose again"
URL_W2=$(jqr .url); HW2=$(host_of "$URL_W2")
check "exposing again gives a new name" test "$HW2" != "$HW"
req GET / -H "Host: ${HW}"; expect_status 404 "the old URL stays dead"
req GET / -H "Host: ${HW2}"; expect_status 200 "the new URL works"

# ---- a WebSocket closes when its sandbox is destroyed ----
check "a WebSocket is held open again" hold_ws ws2 "$HW2"
auth DELETE "/v1/sandboxes/${SB}"; expect_status 200 destroy
check "the open WebSocket is closed by the destroy" closed ws2
req GET / -H "Host: ${HG}"; expect_status 404 "a destroyed sandbox's URLs open nothing"

# ---- ... and when it expires (nobody calls the API: the proxy's watcher sees it) ----
# Long enough for the WebSocket to open first on a loaded machine, short enough to wait for.
auth POST /v1/sandboxes -d '{"timeout":8}'; expect_status 201 "a short-lived sandbox"; SB2=$(jqr .id)
auth POST "/v1/sandboxes/${SB2}/ports" -d "{\"port\":${WP}}"; HW3=$(host_of "$(jqr .url)")
check "a WebSocket to the short-lived sandbox" hold_ws ws3 "$HW3"
check "the open WebSocket is closed when its sandbox expires" closed ws3
req GET / -H "Host: ${HW3}"; expect_status 404 "an expired sandbox's URL opens nothing"

check "SIGTERM exits 0" stop_server

# ---- the timeouts are options, refused when out of range ----
for opt in --preview-connect-timeout --preview-first-byte-timeout --preview-idle-timeout; do
	check "$opt 0 is refused" bash -c "! '$SERVER' --listen 127.0.0.1:0 --state-dir '${WORK}/state' $opt 0 >'${WORK}/bad.log' 2>&1"
	check "$opt 0 is named" grep -q -- "$opt: expected 1 to 86400 seconds" "${WORK}/bad.log"
	check "$opt 86401 is refused" bash -c "! '$SERVER' --listen 127.0.0.1:0 --state-dir '${WORK}/state' $opt 86401 >/dev/null 2>&1"
done
check "AAS_PREVIEW_IDLE_TIMEOUT=x is refused" bash -c "! AAS_PREVIEW_IDLE_TIMEOUT=x '$SERVER' --listen 127.0.0.1:0 \
	--state-dir '${WORK}/state' >'${WORK}/bad.log' 2>&1"
check "--preview-url without {name} is refused" bash -c "! '$SERVER' --listen 127.0.0.1:0 --state-dir '${WORK}/state' \
	--preview-url 'http://{port}-{id}.example.com/' >'${WORK}/bad.log' 2>&1"
check "the refusal names {name}" grep -q '{name}' "${WORK}/bad.log"

# ---- the idle timeout: a body or a WebSocket silent for it ends ----
start_server "$SERVER" --preview-idle-timeout 1
auth POST /v1/sandboxes -d '{"timeout":600}'; SB3=$(jqr .id)
auth POST "/v1/sandboxes/${SB3}/ports" -d "{\"port\":${GP}}"; HG4=$(host_of "$(jqr .url)")
auth POST "/v1/sandboxes/${SB3}/ports" -d "{\"port\":${WP}}"; HW4=$(host_of "$(jqr .url)")
curl -sS -o "${WORK}/stall" -H "Host: ${HG4}" "${BASE}/stall" 2>"${WORK}/stall.err"; RC=$?
check "a stalled body is cut, not ended (curl exit $RC)" test "$RC" = 18
check "what came before the stall arrived" test "$(cat "${WORK}/stall")" = part
check "a silent WebSocket is held open" hold_ws ws4 "$HW4"
check "a silent WebSocket is closed after the idle timeout" closed ws4
check "SIGTERM exits 0 (idle timeout)" stop_server

# ---- the connect timeout: a tunnel that takes 3 s to open, 1 s allowed ----
AAS_FAKE_CONNECT_DELAY_MS=3000 start_server "$SERVER" --preview-connect-timeout 1
auth POST /v1/sandboxes -d '{"timeout":600}'; SB4=$(jqr .id) # the fake driver's VMs do not outlive a restart
auth POST "/v1/sandboxes/${SB4}/ports" -d "{\"port\":${GP}}"; HG5=$(host_of "$(jqr .url)")
req GET / -H "Host: ${HG5}"; expect_status 504 "a guest port that does not take the connection"
expect_json .error.code timeout "connect 504 code"
check "connect 504 says why: $(jqr .error.message)" grep -q "did not open a connection to port ${GP} within 1 s" <<<"$(jqr .error.message)"
check "SIGTERM exits 0 with a connect still under way" stop_server
finish
