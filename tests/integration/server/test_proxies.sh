#!/bin/bash
# Behind a load balancer, over real sockets with the server's fake VM driver:
# with --trusted-proxies naming this test's address, two clients named by
# X-Forwarded-For (or Forwarded) get address-rate buckets of their own, a
# proxy's connections skip the per-address cap, and garbage from the proxy
# counts the proxy (logged at debug level); without the option the same
# headers change nothing. /readyz answers ready on SQLite with the local
# driver alone (a failing store is unit.forwarded's). Bad options are refused.
#
# Rates are checked by sending more requests in one curl process than the
# bucket holds (AAS_RATE_BURST seconds' worth), so a refusal comes long before
# a second could refill it; nothing here asserts a duration.
#
# usage: test_proxies.sh AAS_SERVER_FAKE
. "$(dirname "$0")/common.sh"
SERVER=$1
SLOW="$(dirname "$0")/slowclients.py"

# burst HEADERS...: one request to /v1/service per argument (a keyless route: the address's
# budget), its header lines separated by '|', from one curl process in order; CODES gets the
# statuses, one a line.
burst() {
	local i=0 req h
	for req in "$@"; do
		[ "$i" = 0 ] || printf 'next\n'
		i=$((i + 1))
		printf 'url = "%s/v1/service"\noutput = "/dev/null"\nwrite-out = "%%{http_code}\\n"\n' "$BASE"
		IFS='|' read -ra lines <<<"$req"
		for h in "${lines[@]}"; do
			printf 'header = "%s"\n' "$(printf '%s' "$h" | sed 's/["\\]/\\&/g')"
		done
	done >"${WORK}/burst.cfg"
	CODES=$(curl -s -K "${WORK}/burst.cfg" | tr -d '\r')
}
nth() { sed -n "${1}p" <<<"$CODES"; }
admin() { "$SERVER" "$@" --state-dir "${WORK}/state"; }
GUEST="$(dirname "$0")/guest_http.py"
GP=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 "$GUEST" "$GP" & PIDS+=($!)
for _ in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:${GP}/" && break; sleep 0.1; done
# guest_headers HEADER...: the headers the guest's server got for a preview request with these
# (a new sandbox on the running server, its port exposed), in GOT.
guest_headers() {
	local h args=()
	auth POST /v1/sandboxes -d '{"timeout":600}'; expect_status 201 "create for a preview"
	auth POST "/v1/sandboxes/$(jqr .id)/ports" -d "{\"port\":${GP}}"; expect_status 200 "expose"
	for h in "$@"; do args+=(-H "$h"); done
	GOT=$(curl -s -H "Host: $(jqr .url | sed -E 's#^https?://([^/]*)/.*$#\1#')" "${args[@]}" "${BASE}/headers")
}
A="X-Forwarded-For: 198.51.100.7, 203.0.113.10"
B="X-Forwarded-For: 198.51.100.7, 203.0.113.20"

# ---- bad options ----
bad_option() { # bad_option DESCRIPTION ARGS...: the server refuses to start, saying why
	local what=$1; shift
	if timeout 20 "$SERVER" --listen 127.0.0.1:0 --state-dir "${WORK}/state" "$@" >"${WORK}/bad.out" 2>&1; then
		fail "$what: the server started"
	elif ! grep -q "aas-server: .*\(trusted-proxies\|TRUSTED_PROXIES\|forwarded-header\)" "${WORK}/bad.out"; then
		fail "$what: no message: $(cat "${WORK}/bad.out")"
	else
		pass
	fi
}
bad_option "bits past the prefix" --trusted-proxies 10.0.0.1/8
bad_option "a prefix past 32" --trusted-proxies 10.0.0.0/33
bad_option "a name, not an address" --trusted-proxies proxy.example.com
bad_option "an empty entry" --trusted-proxies 10.0.0.0/8,
bad_option "an unknown header" --forwarded-header x-real-ip
AAS_TRUSTED_PROXIES=nonsense bad_option "AAS_TRUSTED_PROXIES is checked too"

# ---- trusted: each client its own bucket (1 a second, a burst of 2) ----
start_server "$SERVER" --address-requests-per-second 1 --trusted-proxies 127.0.0.1/32,::1 --log-level debug
check "the server says whom it trusts" grep -q "trusting X-Forwarded-For from 2 proxy networks" "${WORK}/server.log"
KEY=$(admin account create --name alice 2>/dev/null)
guest_headers "X-Forwarded-For: 198.51.100.7, 203.0.113.5" "Forwarded: for=6.6.6.6"
check "a preview appends the trusted proxy to its chain: $(grep -i forwarded <<<"$GOT" | tr '\n' ' ')" \
	grep -qi "^X-Forwarded-For: 198.51.100.7, 203.0.113.5, 127.0.0.1$" <<<"$GOT"
check "and passes no client's Forwarded" bash -c "! grep -qi '^Forwarded:' <<<'$GOT'"
req GET /readyz; expect_status 200 "readyz"
expect_json .status ready "readyz: ready"
expect_json .checks.store ok "readyz: the store answers"
expect_json .checks.vm_hosts local "readyz: the local driver, no hosts"
check "readyz names no secret" bash -c "! grep -q 'sqlite\|${WORK}' <<<'$BODY'"
req GET /healthz; expect_status 200 "healthz"

burst "$A" "$A" "$A" "$A" "$B" "$A"
check "client A spends its own burst: $(echo $CODES)" test "$(nth 1)$(nth 2)" = 200200
check "client A is then refused" test "$(nth 4)" = 429
check "client B, through the same proxy, has its own bucket" test "$(nth 5)" = 200
check "and A is still refused" test "$(nth 6)" = 429
# Lines as HAProxy adds them (one of its own, last): one list, read from the last line's end.
H="X-Forwarded-For: 203.0.113.30|X-Forwarded-For: 198.51.100.8"
burst "$H" "$H" "$H" "X-Forwarded-For: 203.0.113.30"
check "a client named on the last line spends its burst: $(echo $CODES)" test "$(nth 1)$(nth 2)$(nth 3)" = 200200429
check "the first line's address, not read, is another bucket" test "$(nth 4)" = 200
# The proxy's own garbage: its address counts, and the log says why (debug).
burst "X-Forwarded-For: not-an-address" "X-Forwarded-For: 203.0.113.40, garbage"
check "garbage from the proxy is logged" grep -q "client address: X-Forwarded-For from trusted proxy 127.0.0.1: an element is no address" \
	"${WORK}/server.log"
# A client's Forwarded is not the header this proxy writes: never read.
burst "Forwarded: for=203.0.113.50" "Forwarded: for=203.0.113.50" "Forwarded: for=203.0.113.50" \
	"Forwarded: for=203.0.113.60"
check "Forwarded is not read when the proxies write X-Forwarded-For: $(echo $CODES)" test "$(nth 4)" = 429

# The proxy's connections skip the per-address cap; max-connections still holds them.
check "server stopped cleanly" stop_server
AAS_HEADER_TIMEOUT=600 start_server "$SERVER" --per-ip-connections 2 --trusted-proxies 127.0.0.1
python3 "$SLOW" hold 127.0.0.1 "$PORT" 6 headers "${WORK}/hold" 600 & HOLD=$!; PIDS+=("$HOLD")
for _ in $(seq 1 600); do grep -q opened "${WORK}/hold" 2>/dev/null && break; sleep 0.1; done
check "a trusted proxy holds more connections than the per-address cap" \
	test "$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 "${BASE}/healthz")" = 200
check "none was refused" bash -c "! grep -q 'connection from 127.0.0.1 refused' '${WORK}/server.log'"
kill "$HOLD" 2>/dev/null; wait "$HOLD" 2>/dev/null
check "server stopped cleanly" stop_server

# ---- Forwarded (RFC 7239), when the proxies write it ----
start_server "$SERVER" --address-requests-per-second 1 --trusted-proxies 127.0.0.1 --forwarded-header forwarded
C='Forwarded: for=198.51.100.7, for="[2001:db8:1:2::5]:4711";proto=https'
D='Forwarded: for="[2001:db8:1:2::6]"'
E='Forwarded: for="[2001:db8:1:3::5]"'
guest_headers "$C" "X-Forwarded-For: 6.6.6.6"
check "a preview appends to the Forwarded chain: $(grep -i forwarded <<<"$GOT" | tr '\n' ' ')" \
	grep -qi '^Forwarded: for=198.51.100.7, for="\[2001:db8:1:2::5\]:4711";proto=https, for=127.0.0.1$' <<<"$GOT"
check "and X-Forwarded-For is the proxy alone" grep -qi "^X-Forwarded-For: 127.0.0.1$" <<<"$GOT"
burst "$C" "$C" "$C" "$D" "$E"
check "an IPv6 client spends its burst: $(echo $CODES)" test "$(nth 1)$(nth 2)$(nth 3)" = 200200429
check "another address of its /64 shares its bucket" test "$(nth 4)" = 429
check "another /64 has its own" test "$(nth 5)" = 200
check "server stopped cleanly" stop_server

# ---- not trusted: the headers change nothing ----
start_server "$SERVER" --address-requests-per-second 1
guest_headers "$A" "Forwarded: for=6.6.6.6"
check "an untrusted peer's chain is replaced by its address: $(grep -i forwarded <<<"$GOT" | tr '\n' ' ')" \
	grep -qi "^X-Forwarded-For: 127.0.0.1$" <<<"$GOT"
check "and its Forwarded is dropped" bash -c "! grep -qi '^Forwarded:' <<<'$GOT'"
burst "$A" "$A" "$A" "$A" "$B" "X-Forwarded-For: 203.0.113.99" "Forwarded: for=203.0.113.98"
check "without --trusted-proxies, A spends the address's burst: $(echo $CODES)" test "$(nth 3)" = 429
check "and B, named by the header, is the same address" test "$(nth 5)" = 429
check "as is any other it names" test "$(nth 6)$(nth 7)" = 429429
finish
