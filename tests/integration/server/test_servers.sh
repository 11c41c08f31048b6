#!/bin/bash
# Many aas-servers on one PostgreSQL: real server processes with
# the fake VM driver in its shared mode (the VMs are files in one directory,
# as VMs on shared hosts are seen by every server), on a database of their own.
#
#   - a sandbox made through one server is used through another (get, list,
#     exec, files, an execution's record) and so is an MCP session, stored by
#     its SHA-256 only; an execution running on another server answers 409 to
#     its live parts;
#   - kill -9 of a server during a burst of creates (VMs booting, a warm pool
#     refilling) and of the server running an execution: another server undoes
#     every create it left (row closed failed, VM gone, nothing charged),
#     destroys its pooled VMs and marks the execution failed;
#   - kill -9 of the server holding the reaper's lease in the middle of a pass
#     over many expired sandboxes: another finishes it, each charged once;
#   - the ledger against the rows, to the micro-dollar; no VM without a live
#     row, no live row without a VM.
# Every wait polls for an outcome with a generous deadline: no timing is asserted.
#
# usage: test_servers.sh AAS_SERVER_FAKE PGDIR
. "$(dirname "$0")/common.sh"
SERVER=$1
PGDIR=$2
TTL=2 # seconds: the servers' leases, so that a dead server's work is taken over quickly

ADMIN_URL=$(cat "${PGDIR}/url")
DB="t_servers_$$_${RANDOM}"
psql -qX "$ADMIN_URL" -c "CREATE DATABASE ${DB}" >/dev/null || { echo "cannot create database ${DB}"; exit 1; }
URL=${ADMIN_URL/\/\/\/postgres\?/\/\/\/${DB}?}
VMS="${WORK}/vms"
mkdir -p "$VMS"

declare -A SPID SBASE
sql() { psql -qAtX "$URL" -c "$1"; }

# start N [VAR=VALUE...] [-- SERVER ARGS...]: server N on its own state directory and port.
start() {
	local n=$1 envs=() args=()
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
	[ "${1:-}" = -- ] && shift
	args=("$@")
	rm -f "${WORK}/port${n}"
	env AAS_FAKE_SHARED="$VMS" "${envs[@]}" "$SERVER" --listen 127.0.0.1:0 --port-file "${WORK}/port${n}" \
		--state-dir "${WORK}/state${n}" --store "$URL" --lease-ttl "$TTL" --creates-per-minute 1000 \
		--max-sandboxes 200 --requests-per-second 10000 "${args[@]}" >>"${WORK}/server${n}.log" 2>&1 &
	SPID[$n]=$!
	PIDS+=("${SPID[$n]}")
	for _ in $(seq 1 300); do
		[ -s "${WORK}/port${n}" ] && break
		kill -0 "${SPID[$n]}" 2>/dev/null || { echo "server ${n} exited early"; cat "${WORK}/server${n}.log"; exit 1; }
		sleep 0.1
	done
	SBASE[$n]="http://127.0.0.1:$(cat "${WORK}/port${n}")"
}
kill9() { kill -KILL "${SPID[$1]}"; wait "${SPID[$1]}" 2>/dev/null; SPID[$1]=; }
stop() { kill -TERM "${SPID[$1]}"; wait "${SPID[$1]}"; local rc=$?; SPID[$1]=; return $rc; }
on() { BASE=${SBASE[$1]}; } # the server the next requests go to
holder() { cat "${WORK}/state$1/holder"; }

after_stop() {
	for p in "${SPID[@]}"; do [ -n "$p" ] && kill -KILL "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	if [ "${FAILS}" -ne 0 ]; then
		for f in "${WORK}"/server*.log; do echo "---- ${f##*/} (tail) ----"; tail -n 40 "$f"; done
	fi
	psql -qX "$ADMIN_URL" -c "DROP DATABASE IF EXISTS ${DB} WITH (FORCE)" >/dev/null 2>&1
}

# until_true SECONDS COMMAND...: poll the command until it succeeds; false past the deadline.
until_true() {
	local deadline=$((SECONDS + $1)); shift
	until "$@"; do
		[ "$SECONDS" -ge "$deadline" ] && return 1
		sleep 0.2
	done
}

# Live rows and VM files, as two sorted lists: equal when no VM lacks a live row and no live row a VM.
live_rows() { sql "SELECT id FROM sandboxes WHERE status <> 3 ORDER BY id" | LC_ALL=C sort; }
vm_files() { ls -1 "$VMS" | LC_ALL=C sort; }
vms_match_rows() { [ "$(live_rows)" = "$(vm_files)" ]; }

start 1
start 2
KEY=$(AAS_STORE_URL="$URL" "$SERVER" account create --name alice --state-dir "${WORK}/admin" 2>"${WORK}/admin.err")
check "account create prints a key" grep -q '^aas_sk_' <<<"$KEY"
check "each server has its own holder" test "$(holder 1)" != "$(holder 2)"
check "each server holds its lease" test "$(sql "SELECT count(*) FROM leases WHERE name IN ('server:$(holder 1)', 'server:$(holder 2)')")" = 2

# ---- a sandbox made through server 1, used through server 2 ----
on 1; auth POST /v1/sandboxes -d '{"size":"small","timeout":600}'; expect_status 201 "create on 1"; SB=$(jqr .id)
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"echo one"}'; expect_status 200 "exec on 1"; EXE1=$(jqr .execution_id)
on 2
auth GET "/v1/sandboxes/${SB}"; expect_status 200 "get on 2"; expect_json .status ready "ready on 2"
auth GET /v1/sandboxes; expect_status 200 "list on 2"
check "list on 2 shows it" grep -q "$SB" <<<"$BODY"
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"echo two"}'; expect_status 200 "exec on 2"; expect_json .stdout two "exec on 2 output"
auth GET "/v1/executions/${EXE1}"; expect_status 200 "an execution of 1 read on 2"; expect_json .stdout one "its output on 2"
auth PUT "/v1/sandboxes/${SB}/files?path=/workspace/a.txt" --data-binary 'hello'; expect_status 200 "file write on 2"
auth GET "/v1/sandboxes/${SB}/files?path=/workspace/a.txt"; expect_status 200 "file read on 2"
check "file content on 2" test "$BODY" = hello

# ---- an MCP session begun on 1, used on 2, ended on 2 ----
INIT='{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
mcp() { req POST /v1/mcp -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' "$@"; }
on 1; mcp -d "$INIT"; expect_status 200 "MCP initialize on 1"
SID=$(grep -i '^Mcp-Session-Id:' <<<"$HEADERS" | tr -d '\r' | awk '{ print $2 }')
check "a session id" grep -Eq '^[0-9a-f]{32}$' <<<"$SID"
on 2; mcp -H "Mcp-Session-Id: ${SID}" -H "Authorization: Bearer ${KEY}" -d '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
expect_status 200 "MCP session of 1 used on 2"
check "tools listed on 2" grep -q '"create_sandbox"' <<<"$BODY"
HASH=$(printf '%s' "$SID" | sha256sum | cut -c1-64)
check "the store keeps the session's SHA-256" test "$(sql "SELECT count(*) FROM mcp_sessions WHERE hash = '${HASH}'")" = 1
check "the store never keeps the session id" test -z "$(sql "SELECT hash FROM mcp_sessions" | grep -F "$SID")"
req DELETE /v1/mcp -H "Mcp-Session-Id: ${SID}"; expect_status 204 "MCP session ended on 2"
on 1; mcp -H "Mcp-Session-Id: ${SID}" -d '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
expect_status 404 "the ended session is unknown on 1"

# ---- an execution running on 1: read on 2, its live parts refused there ----
on 1; auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"wait","background":true}'; expect_status 202 "background on 1"
W=$(jqr .execution_id)
on 2; auth GET "/v1/executions/${W}"; expect_status 200 "running execution read on 2"; expect_json .status running "running on 2"
auth POST "/v1/executions/${W}/signal" -d '{"signal":"TERM"}'; expect_status 409 "signal on another server"
check "409 says it runs on another server" grep -q 'runs on another server' <<<"$BODY"
auth POST "/v1/executions/${W}/cancel"; expect_status 409 "cancel on another server"
auth POST "/v1/executions/${W}/stdin" -d '{"stdin":"x"}'; expect_status 409 "stdin on another server"

# ---- kill -9 during a burst of creates (booting VMs, a pool refilling), and of the server running W ----
start 3 AAS_FAKE_BOOT_MS=60000 -- --pool small=2
until_true 30 test "$(sql "SELECT count(*) FROM leases WHERE name LIKE 'pool:%'")" -ge 1
check "server 3's pool refill holds a pool lease" test $? -eq 0
for i in $(seq 1 8); do
	curl -sS -o /dev/null -X POST -H "Authorization: Bearer ${KEY}" -H 'Content-Type: application/json' \
		-d '{"size":"medium","timeout":600}' "${SBASE[3]}/v1/sandboxes" 2>/dev/null &
done
for i in $(seq 1 4); do
	curl -sS -o "${WORK}/made${i}" -w '%{http_code}' -X POST -H "Authorization: Bearer ${KEY}" \
		-H 'Content-Type: application/json' -d '{"size":"small","timeout":600}' "${SBASE[2]}/v1/sandboxes" \
		>"${WORK}/made${i}.status" &
	MADE+=($!)
done
creating() { test "$(sql "SELECT count(*) FROM sandboxes WHERE status = 1")" -ge 8; }
until_true 30 creating; check "eight creates under way on 3" test $? -eq 0
check "their create leases are held" test "$(sql "SELECT count(*) FROM leases WHERE name LIKE 'create:%'")" -ge 8
CREATING=$(sql "SELECT id FROM sandboxes WHERE status = 1 ORDER BY id")
kill9 3
kill9 1
wait "${MADE[@]}"
for i in $(seq 1 4); do check "create ${i} on 2 during the burst" test "$(cat "${WORK}/made${i}.status")" = 201; done
undone() { test "$(sql "SELECT count(*) FROM sandboxes WHERE status = 1")" = 0; }
until_true 60 undone; check "server 2 undid every create of dead server 3" test $? -eq 0
for id in $CREATING; do
	check "${id}: closed failed, cost 0" test "$(sql "SELECT status, end_reason, cost FROM sandboxes WHERE id = '${id}'")" = "3|4|0"
	check "${id}: no VM left" test ! -e "${VMS}/${id}"
done
check "nothing charged for the undone creates" \
	test "$(sql "SELECT count(*) FROM ledger WHERE kind = 'charge' AND sandbox_id IN (SELECT id FROM sandboxes WHERE end_reason = 4)")" = 0
failed() { on 2; auth GET "/v1/executions/${W}"; [ "$(jqr .status)" = failed ]; }
until_true 60 failed; check "the execution of dead server 1 is marked failed by 2" test $? -eq 0
check "it says why" grep -q 'server that ran it stopped' <<<"$BODY"
on 2; auth GET "/v1/sandboxes/${SB}"; expect_json .status ready "server 1's sandbox lives on through 2"

# ---- kill -9 of the reaper's holder in the middle of a pass over many expired sandboxes ----
stop 2; check "server 2 stops cleanly" test $? -eq 0
check "a clean stop releases its leases" test "$(sql "SELECT count(*) FROM leases WHERE holder = '$(holder 2)'")" = 0
start 4 AAS_FAKE_DESTROY_DELAY_MS=400
reaping() { test "$(sql "SELECT holder FROM leases WHERE name = 'reaper'")" = "$(holder 4)"; }
until_true 30 reaping; check "server 4 holds the reaper's lease" test $? -eq 0
start 5
N=16
on 5
for i in $(seq 1 $N); do
	auth POST /v1/sandboxes -d '{"size":"small","timeout":3}'; expect_status 201 "short-lived create ${i}"
	SHORT+=("$(jqr .id)")
done
IDS=$(printf "'%s'," "${SHORT[@]}"); IDS=${IDS%,}
some_reaped() { test "$(sql "SELECT count(*) FROM sandboxes WHERE id IN (${IDS}) AND status = 3")" -ge 2; }
until_true 60 some_reaped; check "server 4's pass began" test $? -eq 0
check "and was cut short" test "$(sql "SELECT count(*) FROM sandboxes WHERE id IN (${IDS}) AND status = 3")" -lt "$N"
kill9 4
all_reaped() { test "$(sql "SELECT count(*) FROM sandboxes WHERE id IN (${IDS}) AND status = 3")" = "$N"; }
until_true 60 all_reaped; check "server 5 finished the pass" test $? -eq 0
check "every one expired, billed to its expiry exactly" test "$(sql "SELECT count(*) FROM sandboxes WHERE id IN (${IDS})
	AND end_reason = 2 AND cost = usd_micro_per_hour * ((expires_at - ready_at) / 1000) / 3600")" = "$N"
check "each charged once, its cost" test "$(sql "SELECT count(*) FROM sandboxes s WHERE id IN (${IDS})
	AND (SELECT count(*) FROM ledger l WHERE l.sandbox_id = s.id AND kind = 'charge') = 1
	AND (SELECT sum(amount) FROM ledger l WHERE l.sandbox_id = s.id AND kind = 'charge') = s.cost")" = "$N"

# ---- the ledger against the rows, and the VMs against the rows ----
on 5
for id in $(live_rows); do auth DELETE "/v1/sandboxes/${id}"; expect_status 200 "destroy ${id} on 5"; done
check "every sandbox's charges are its cost" test "$(sql "SELECT count(*) FROM sandboxes s
	WHERE s.cost <> COALESCE((SELECT sum(amount) FROM ledger l WHERE l.sandbox_id = s.id AND kind = 'charge'), 0)")" = 0
CHARGED=$(sql "SELECT COALESCE(sum(amount), 0) FROM ledger WHERE kind = 'charge'")
COSTS=$(sql "SELECT COALESCE(sum(cost), 0) FROM sandboxes")
check "charges ${CHARGED} = costs ${COSTS}" test "$CHARGED" = "$COSTS"
auth GET /v1/account; expect_status 200 account
expect_json .balance_usd_micro "$((5000000 - CHARGED))" "the balance, to the micro-dollar"
# A dead server's pooled VMs and the VM a cut-short pass was destroying go with the orphan sweep
# (closed rows are given ORPHAN_GRACE_MS to the destroy that closed them).
until_true 120 vms_match_rows; check "no VM without a live row, no live row without a VM" test $? -eq 0
check "server 5 stops cleanly" stop 5
finish
