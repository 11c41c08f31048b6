#!/bin/bash
# A create whose client leaves before the sandbox is ready leaves nothing
# running: the server destroys what it made for nobody. Over real HTTP with
# the server's fake VM driver, whose VMs here take a while to create: a curl
# killed while its POST /v1/sandboxes waits, and aas-mcp (the stdio MCP
# server, over the remote client) killed with SIGKILL, which it cannot catch,
# while its create_sandbox runs; and aas-mcp's own client going away (it stops
# reading and closes stdin) mid-create. A client that stays gets its sandbox.
#
# usage: test_abandoned_create.sh AAS_SERVER_FAKE [AAS_MCP]
. "$(dirname "$0")/common.sh"
SERVER=$1
MCP=${2:-}
admin() { "$SERVER" "$@" --state-dir "${WORK}/state"; }

AAS_FAKE_CREATE_DELAY_MS=2000 start_server "$SERVER"
KEY=$(admin account create --name alice 2>"${WORK}/admin.err")

# count STATUS: how many of the account's sandboxes have that status.
count() {
	auth GET /v1/sandboxes
	jqr "[.sandboxes[] | select(.status == \"$1\")] | length"
}
# wait_for STATUS N: until N sandboxes have that status (60 s at most).
wait_for() {
	for _ in $(seq 1 600); do
		[ "$(count "$1")" -ge "$2" ] && return 0
		sleep 0.1
	done
	return 1
}
# settle: until no create is in flight; then every sandbox must be destroyed.
settle() {
	for _ in $(seq 1 600); do
		[ "$(count creating)" = 0 ] && break
		sleep 0.1
	done
	check "$1: no create left in flight" test "$(count creating)" = 0
	check "$1: nothing left running" test "$(count ready)" = 0
	check "$1: the sandbox was destroyed" test "$(count destroyed)" = "$2"
}

# ---- a REST client that gives up while the VM is made ----
curl -sS -o /dev/null -X POST -H "Authorization: Bearer ${KEY}" -d '{}' "${BASE}/v1/sandboxes" &
CURL=$!
PIDS+=("$CURL")
check "the create is in flight" wait_for creating 1
kill -KILL "$CURL"
wait "$CURL" 2>/dev/null
settle "curl killed mid-create" 1
check "the server says why it destroyed it" grep -q "the client left before it was ready; destroyed" "${WORK}/server.log"

# start_mcp OUT: aas-mcp reading the fifo mcp.in (written through fd 8) and writing OUT; asks it to create.
start_mcp() {
	rm -f "${WORK}/mcp.in"
	mkfifo "${WORK}/mcp.in"
	AAS_API_KEY=$KEY AAS_BASE_URL=$BASE "$MCP" <"${WORK}/mcp.in" >"$1" 2>>"${WORK}/mcp.err" &
	AAS_MCP_PID=$!
	PIDS+=("$AAS_MCP_PID")
	exec 8>"${WORK}/mcp.in"
	printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}' \
		'{"jsonrpc":"2.0","method":"notifications/initialized"}' \
		'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"create_sandbox","arguments":{}}}' >&8
}

if [ -n "$MCP" ]; then
	# ---- aas-mcp killed mid-create: only the server sees it go ----
	start_mcp "${WORK}/mcp.out"
	check "aas-mcp's create is in flight" wait_for creating 1
	kill -KILL "$AAS_MCP_PID"
	wait "$AAS_MCP_PID" 2>/dev/null
	exec 8>&-
	settle "aas-mcp killed mid-create" 2
	check "aas-mcp never answered the call" test "$(grep -c '"id":2' "${WORK}/mcp.out")" = 0

	# ---- aas-mcp's client gone mid-create (stops reading, closes stdin): aas-mcp destroys it ----
	mkfifo "${WORK}/mcp.outfifo"
	start_mcp "${WORK}/mcp.outfifo"
	exec 9<"${WORK}/mcp.outfifo"
	check "the create is in flight" wait_for creating 1
	exec 9<&- 8>&-
	wait "$AAS_MCP_PID"
	check "aas-mcp exits 0 when its client has gone" test $? = 0
	settle "aas-mcp's client gone mid-create" 3
fi

# ---- a client that stays gets its sandbox ----
auth POST /v1/sandboxes -d '{}'
expect_status 201 "a create whose client waits"
expect_json .status ready "its sandbox is ready"
check "and it runs" test "$(count ready)" = 1

finish
