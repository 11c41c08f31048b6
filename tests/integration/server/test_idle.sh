#!/bin/bash
# Idle and trickling connections from many addresses, against the real server
# binary (the fake VM driver) with its default connection limits: more
# unfinished requests than the old front end's 512 connections in all, each
# address under its cap, leave an authenticated request from another address
# answered; and connections that trickle their headers one byte at a time from
# many addresses are closed at the header deadline. Loopback only (127.1.x.y
# hold, 127.0.0.2 asks); every wait is bounded, nothing asserts a duration.
#
# usage: test_idle.sh AAS_SERVER_FAKE
. "$(dirname "$0")/common.sh"
SERVER=$1
SLOW="$(dirname "$0")/slowclients.py"
admin() { "$SERVER" "$@" --state-dir "${WORK}/state"; }

# 40 addresses x 15 = 600 held: past 512, and under any per-address cap of 15 or more.
NADDR=40
PER=15
HELD=$((NADDR * PER))

# wait_for FILE PATTERN: until FILE has a line matching PATTERN (at most 120 s).
wait_for() {
	for _ in $(seq 1 1200); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
	return 1
}
# threads: the server's threads now.
threads() { awk '/^Threads:/ { print $2 }' "/proc/${SERVER_PID}/status"; }
# held_by_server N: until the server runs at least N threads (one per connection it took), at most 60 s.
held_by_server() {
	for _ in $(seq 1 600); do [ "$(threads)" -ge "$1" ] && return 0; sleep 0.1; done
	return 1
}

# ---- unfinished requests from many addresses; the API still answers another ----
# A soft limit on open files below what the held connections need: the server raises its own to
# its hard limit (the holder does the same). Kept when the hard limit itself is that low.
LOW_NOFILE=
if [ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -ge 2048 ]; then
	LOW_NOFILE=512
	ulimit -Sn "$LOW_NOFILE"
fi
# A long header deadline, so that what is held stays held while it is checked.
AAS_HEADER_TIMEOUT=600 start_server "$SERVER"
if [ -n "$LOW_NOFILE" ]; then
	check "the server raised its soft limit on open files" \
		grep -q "RLIMIT_NOFILE (open files) raised from ${LOW_NOFILE} to" "${WORK}/server.log"
fi
check "the server says what it takes" grep -q "taking [0-9]* connections at once" "${WORK}/server.log"
KEY=$(admin account create --name idle)
python3 "$SLOW" spread "$NADDR" "$PER" "$PORT" partial "${WORK}/held" 600 & HOLD=$!; PIDS+=("$HOLD")
check "the held connections were opened" wait_for "${WORK}/held" "opened ${HELD} of ${HELD}"
check "the server took every held connection (a thread each)" held_by_server "$HELD"
auth GET /v1/account --interface 127.0.0.2 --max-time 30
expect_status 200 "an authenticated GET /v1/account from another address while ${HELD} are held"
check "none of the held connections was refused" test "$(grep -c 'refused: it holds' "${WORK}/server.log")" = 0
check "none was closed by the server" test "$(cat "${WORK}/held")" = "opened ${HELD} of ${HELD}"
kill "$HOLD" 2>/dev/null; wait "$HOLD" 2>/dev/null
check "server stopped cleanly" stop_server

# ---- trickled headers from many addresses are closed at the header deadline ----
# 100 connections from 20 addresses, one header byte every 0.3 s: their headers never end.
AAS_HEADER_TIMEOUT=2 start_server "$SERVER"
python3 "$SLOW" spread 20 5 "$PORT" headers "${WORK}/trickle" 120 & PIDS+=($!)
check "the trickling connections were opened" wait_for "${WORK}/trickle" "opened 100 of 100"
auth GET /v1/account --interface 127.0.0.2 --max-time 30
expect_status 200 "the API answers while headers trickle in"
check "every trickling connection is closed by the server" wait_for "${WORK}/trickle" "closed 100 of 100"
check "the log says the header deadline closed them" \
	test "$(grep -c 'request headers did not arrive in time (--header-timeout)' "${WORK}/server.log")" -ge 100
check "server stopped cleanly" stop_server

finish
