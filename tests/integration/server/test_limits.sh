#!/bin/bash
# Tenant limits over real HTTP, with the server's fake VM driver: every limit
# at its bound answers 429 with Retry-After and a JSON error naming it;
# /v1/account shows the limits; the admin command sets one account's own; and
# a flood of unknown keys costs no store lookups (counted in /metrics).
#
# Rates are checked by sending more requests in one curl process than the
# bucket's burst holds (AAS_RATE_BURST seconds' worth), so a refusal comes
# long before a second could refill it; nothing here asserts a duration.
#
# usage: test_limits.sh AAS_SERVER_FAKE
. "$(dirname "$0")/common.sh"
SERVER=$1
admin() { "$SERVER" "$@" --state-dir "${WORK}/state"; }

# Keyless requests from this test share one address bucket: 5 a second, a burst of 10.
start_server "$SERVER" --key-cache-ttl 60 --max-executions 1 --max-transfers 1 --creates-per-minute 2 \
	--requests-per-second 1000 --address-requests-per-second 5 --execution-retention 3600
KEY=$(admin account create --name alice 2>/dev/null)
KEY2=$(admin account create --name bob 2>"${WORK}/admin.err")
BOB=$(grep -o 'acc-[A-Za-z0-9]*' "${WORK}/admin.err" | head -1)

# expect_limit LIMIT MAX_RETRY DESCRIPTION: the last reply was a 429 for LIMIT,
# with a Retry-After of 1 to MAX_RETRY seconds that the body repeats.
expect_limit() {
	local after
	expect_status 429 "$3"
	expect_json .error.code limit_exceeded "$3: code"
	expect_json .error.limit "$1" "$3: limit"
	after=$(jqr .error.retry_after)
	check "$3: retry_after $after in 1..$2" test "$after" -ge 1 -a "$after" -le "$2"
	check "$3: Retry-After: $after" grep -qi "^Retry-After: ${after}"$'\r'"\?$" <<<"$HEADERS"
	check "$3: the message names the limit" grep -q "$1" <<<"$(jqr .error.message)"
}

# burst N METHOD PATH [HEADER|@BODY]...: N requests from one curl process, as fast as
# it sends them ('#' in a header is the request's number); CODES lists the statuses;
# STATUS, BODY and HEADERS are the first 429's (or the last reply's).
burst() {
	local n=$1 method=$2 path=$3 i a; shift 3
	for i in $(seq 1 "$n"); do
		printf 'url = "%s%s"\nrequest = "%s"\noutput = "%s/burst%s.body"\ndump-header = "%s/burst%s.hdr"\n' \
			"$BASE" "$path" "$method" "$WORK" "$i" "$WORK" "$i"
		printf 'write-out = "%%{http_code}\\n"\n'
		for a in "$@"; do
			case $a in @*) printf 'data = "%s"\n' "$(printf '%s' "${a#@}" | sed 's/["\\]/\\&/g')" ;;
			*) printf 'header = "%s"\n' "${a//\#/$i}" ;; esac
		done
		[ "$i" = "$n" ] || printf 'next\n'
	done >"${WORK}/burst.cfg"
	CODES=$(curl -s -K "${WORK}/burst.cfg")
	i=$(grep -n '^429$' <<<"$CODES" | head -1 | cut -d: -f1)
	[ -n "$i" ] || i=$n
	STATUS=$(sed -n "${i}p" <<<"$CODES")
	BODY=$(cat "${WORK}/burst${i}.body")
	HEADERS=$(cat "${WORK}/burst${i}.hdr")
}

# ---- the account shows its limits ----
auth GET /v1/account; expect_status 200 account
expect_json .limits.max_executions 1 "limits.max_executions"
expect_json .limits.creates_per_minute 2 "limits.creates_per_minute"
expect_json .limits.requests_per_second 1000 "limits.requests_per_second"
expect_json .limits.execution_retention 3600 "limits.execution_retention"
expect_json .limits.max_sandboxes 10 "limits.max_sandboxes"
expect_json .running_executions 0 "running_executions"

# ---- creates per minute: two at once, the third waits 30 s ----
auth POST /v1/sandboxes -d '{}'; expect_status 201 "create 1"; SB=$(jqr .id)
auth POST /v1/sandboxes -d '{}'; expect_status 201 "create 2"
auth POST /v1/sandboxes -d '{}'; expect_limit creates_per_minute 30 "create 3"

# ---- executions at once: one running in the background, the next is refused ----
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"block","background":true}'; expect_status 202 "background exec"
auth GET /v1/account; expect_json .running_executions 1 "running_executions while one runs"
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"echo hi"}'; expect_limit max_executions 1 "second exec"
auth DELETE "/v1/sandboxes/${SB}"; expect_status 200 "destroy ends the blocked exec"

# ---- file transfers at once: an upload held open by its client, the next is refused ----
# (carol's: bob's key is cached with his limits, which the next section changes.)
KEY3=$(admin account create --name carol 2>/dev/null)
KEY=$KEY3 auth POST /v1/sandboxes -d '{}'; expect_status 201 "carol's create"; SBB=$(jqr .id)
exec 7<>"/dev/tcp/127.0.0.1/${PORT}"
printf 'PUT /v1/sandboxes/%s/files?path=held HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\nContent-Length: 10\r\n\r\nx' \
	"$SBB" "$KEY3" >&7
# The held one starts in its own time: ask until it has.
for _ in $(seq 1 100); do
	KEY=$KEY3 auth PUT "/v1/sandboxes/${SBB}/files?path=second" --data-binary 'y'; [ "$STATUS" = 429 ] && break
	sleep 0.1
done
expect_limit max_transfers 1 "a second transfer"
KEY=$KEY3 auth GET "/v1/sandboxes/${SBB}/files?path=second"; expect_limit max_transfers 1 "a download"
exec 7>&-
# The held one's end gives its place back (its client went: the upload fails, in its own time).
for _ in $(seq 1 100); do
	KEY=$KEY3 auth PUT "/v1/sandboxes/${SBB}/files?path=third" --data-binary 'z'; [ "$STATUS" = 200 ] && break
	sleep 0.1
done
expect_status 200 "a transfer once the held one ended"
KEY=$KEY3 auth DELETE "/v1/sandboxes/${SBB}"; expect_status 200 "carol's destroy"

# ---- one account's own limits, set beside the running server ----
OUT=$(admin account limits --id "$BOB" --requests-per-second 1 --max-sandboxes 3)
check "admin limits prints what it set: $OUT" grep -q "max_sandboxes=3 max_executions=default creates_per_minute=default requests_per_second=1" <<<"$OUT"
OUT=$(admin account limits --id "$BOB")
check "admin limits shows them" grep -q "requests_per_second=1\$" <<<"$OUT"
check "admin limits refuses a bad value" bash -c "! '$SERVER' account limits --id '$BOB' --max-executions -1 --state-dir '${WORK}/state' 2>/dev/null"
check "admin limits refuses an unknown account" bash -c "! '$SERVER' account limits --id acc-nope --state-dir '${WORK}/state' 2>/dev/null"

# ---- requests per second per key: bob's one a second, a burst of two ----
KEY=$KEY2
auth GET /v1/account; expect_status 200 "bob's account"
expect_json .limits.requests_per_second 1 "bob's own rate"
expect_json .limits.max_sandboxes 3 "bob's own max_sandboxes"
burst 6 GET /v1/sandboxes "Authorization: Bearer ${KEY2}"
expect_limit requests_per_second 1 "a burst past bob's rate"
# Alice's key has its own bucket.
KEY=$(admin key create --account "$(admin account list | awk '$2 == "alice" {print $1}')" 2>/dev/null)
auth GET /v1/sandboxes; expect_status 200 "another account is not slowed"

# ---- unknown keys: the negative cache, then the address's budget ----
metric() { curl -s "${BASE}/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
L0=$(metric aas_auth_key_lookups_total); N0=$(metric aas_auth_negative_hits_total)
for _ in 1 2 3 4 5; do req GET /v1/account -H "Authorization: Bearer aas_sk_unknown"; done
expect_status 401 "an unknown key is refused"
L1=$(metric aas_auth_key_lookups_total); N1=$(metric aas_auth_negative_hits_total)
check "five tries of one unknown key: one store lookup ($L0 -> $L1)" test "$((L1 - L0))" = 1
check "the other four came from the negative cache ($N0 -> $N1)" test "$((N1 - N0))" -ge 4
sleep 2.5 # let the address's bucket fill again (it holds 2 s of its rate)
# One curl process, thirty made-up keys (a config file gives each URL its own header).
burst 30 GET /v1/account "x-api-key: aas_sk_made_up_#"
check "a flood of made-up keys meets 429: $(echo $CODES | tr ' ' ',')" grep -q 429 <<<"$CODES"
sleep 2.5
L2=$(metric aas_auth_key_lookups_total)
# Each admitted made-up key cost one lookup (its 401); each refused one (its 429) none.
check "only the admitted made-up keys were looked up ($L1 -> $L2)" test "$((L2 - L1))" = "$(grep -c '^401$' <<<"$CODES")"
req GET /v1/account -H "x-api-key: aas_sk_made_up_1"; expect_status 401 "after the wait, a bad key is a 401 again"

# ---- keyless routes count by address ----
sleep 2.5
burst 15 GET /v1/service
expect_limit requests_per_address 1 "keyless requests past the address's rate"
sleep 2.5
burst 15 POST /v1/mcp "Content-Type: application/json" "Accept: application/json, text/event-stream" \
	'@{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
expect_limit requests_per_address 1 "MCP discovery past the address's rate"

# ---- bad flags ----
check "--max-executions 0 is refused" bash -c "! '$SERVER' --max-executions 0 2>/dev/null"
check "--requests-per-second junk is refused" bash -c "! '$SERVER' --requests-per-second fast 2>/dev/null"
check "AAS_CREATES_PER_MINUTE over the maximum is refused" bash -c "! AAS_CREATES_PER_MINUTE=100001 '$SERVER' 2>/dev/null"
finish
