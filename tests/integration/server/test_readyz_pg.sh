#!/bin/bash
# /readyz against a store that goes away: the server on a PostgreSQL cluster of
# this test's own (tests/pg-server, not the shared one the other tests use) is
# ready, then the cluster is stopped and /readyz answers 503 naming the store,
# with no error text, while /healthz still says the process lives.
#
# usage: test_readyz_pg.sh AAS_SERVER_FAKE PG_SERVER_SCRIPT
. "$(dirname "$0")/common.sh"
SERVER=$1
PGSERVER=$2
PGDIR="${WORK}/pg"
after_stop() { "$PGSERVER" stop "$PGDIR" >/dev/null 2>&1 || true; }

"$PGSERVER" start "$PGDIR" >"${WORK}/pg.log" 2>&1 || { cat "${WORK}/pg.log"; exit 1; }
URL=$(cat "${PGDIR}/url")
AAS_STORE_URL="$URL" start_server "$SERVER"

req GET /readyz; expect_status 200 "ready on PostgreSQL"
expect_json .checks.store ok "the store answers"
expect_json .checks.vm_hosts local "no hosts: the local driver"

"$PGSERVER" stop "$PGDIR" >>"${WORK}/pg.log" 2>&1
# The last answer is kept for a second: ask until the probe sees the store gone (at most 30 s).
for _ in $(seq 1 300); do
	req GET /readyz; [ "$STATUS" = 503 ] && break
	sleep 0.1
done
expect_status 503 "not ready once the store is gone"
expect_json .status not_ready "the status says so"
expect_json .checks.store failed "the body names the store"
expect_json .checks.vm_hosts unknown "and cannot say for the hosts"
check "the body holds no error text or address: $BODY" bash -c "! grep -qi 'socket\|postgres\|${WORK}\|connect' <<<'$BODY'"
check "the log says why" grep -q "readiness: the store did not answer" "${WORK}/server.log"
req GET /healthz; expect_status 200 "healthz: the process still lives"
finish
