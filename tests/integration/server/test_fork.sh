#!/bin/bash
# Fork, pause and resume over real HTTP with the server's fake VM driver (its
# snapshots copy a VM's files): the routes' answers, their JSON error bodies
# for every bad input and wrong state, the paused price in /v1/account and
# /v1/service, another account's sandbox not found. Every response body is
# checked against server/openapi.json (AAS_TEST_OPENAPI).
#
# usage: test_fork.sh AAS_SERVER_FAKE
. "$(dirname "$0")/common.sh"
SERVER=$1
admin() { "$SERVER" "$@" --state-dir "${WORK}/state"; }

start_server "$SERVER"
KEY=$(admin account create --name alice 2>/dev/null)
OTHER=$(admin account create --name bob 2>/dev/null)
auth POST /v1/sandboxes -d '{"size":"small","timeout":600}'; expect_status 201 create; SB=$(jqr .id)
auth PUT "/v1/sandboxes/${SB}/files?path=state.txt" --data-binary 'prepared'; expect_status 200 "write a file"

# ---- prices ----
auth GET /v1/account; expect_status 200 account
expect_json .paused_usd_per_gib_hour_micro 100 "account: paused price per GiB-hour"
expect_json '.sizes[] | select(.name == "small") | .paused_usd_per_hour_micro' 4400 "account: small's paused price"
req GET /v1/service; expect_status 200 service
expect_json '.sizes[] | select(.name == "small") | .paused_usd_per_hour' 0.004400 "service: small's paused price"

# ---- fork ----
auth POST "/v1/sandboxes/${SB}/fork" -d '{"count":2,"timeout":300}'; expect_status 201 "fork 2"
expect_json '.sandboxes | length' 2 "fork: two children"
expect_json '.sandboxes[0].parent_id' "$SB" "fork: the child names its parent"
expect_json '.sandboxes[0].status' ready "fork: the child is ready"
expect_json '[.sandboxes[].id] | unique | length' 2 "fork: distinct ids"
KID=$(jqr '.sandboxes[0].id')
auth GET "/v1/sandboxes/${KID}/files?path=state.txt"; expect_status 200 "read the child's copy"
check "the child has the parent's file" test "$BODY" = prepared
auth POST "/v1/sandboxes/${SB}/fork"; expect_status 201 "fork without a body: one child"
expect_json '.sandboxes | length' 1 "fork default count"
KID2=$(jqr '.sandboxes[0].id')
for bad in '{"count":0}' '{"count":11}' '{"count":"2"}' '{"timeout":0}' '{"count":1.5}' '{"network":"everything"}'; do
	auth POST "/v1/sandboxes/${SB}/fork" -d "$bad"; expect_status 400 "fork $bad"
	expect_json .error.code invalid_argument "fork $bad: error code"
done
auth POST "/v1/sandboxes/${SB}/fork" -d '{"count":'; expect_status 400 "fork: broken JSON"
auth POST "/v1/sandboxes/${SB}/fork" -d '[]'; expect_status 400 "fork: not an object"; expect_json .error.code invalid_json "fork []"
auth POST /v1/sandboxes/sbx-doesnotexist/fork -d '{}'; expect_status 404 "fork: unknown sandbox"
expect_json .error.code not_found "fork 404 code"
KEY=$OTHER auth POST "/v1/sandboxes/${SB}/fork" -d '{}'; expect_status 404 "fork: another account's sandbox"
# max_sandboxes (10 by default): the parent and 3 children live; 7 more would pass it.
auth POST "/v1/sandboxes/${SB}/fork" -d '{"count":7}'; expect_status 429 "fork past max_sandboxes"
expect_json .error.code limit_exceeded "fork limit code"

# ---- pause and resume ----
auth POST "/v1/sandboxes/${KID}/pause"; expect_status 200 pause
expect_json .status paused "paused"
check "paused_at is set" test "$(jqr .paused_at)" != null
auth POST "/v1/sandboxes/${KID}/pause"; expect_status 409 "pause a paused sandbox"
expect_json .error.code conflict "pause twice: code"
auth POST "/v1/sandboxes/${KID}/exec" -d '{"command":"echo hi"}'; expect_status 409 "exec in a paused sandbox"
check "exec says paused" grep -q paused <<<"$(jqr .error.message)"
auth POST "/v1/sandboxes/${KID}/fork" -d '{}'; expect_status 409 "fork a paused sandbox"
auth POST "/v1/sandboxes/${KID}/extend" -d '{"seconds":60}'; expect_status 200 "extend a paused sandbox"
auth GET "/v1/sandboxes/${KID}"; expect_json .status paused "get shows paused"
auth POST "/v1/sandboxes/${KID}/resume"; expect_status 200 resume
expect_json .status ready "resumed"
expect_json .paused_at null "resumed: paused_at null"
auth GET "/v1/sandboxes/${KID}/files?path=state.txt"; expect_status 200 "the file survived"
check "resumed with its file" test "$BODY" = prepared
auth POST "/v1/sandboxes/${KID}/resume"; expect_status 409 "resume a running sandbox"
check "resume says not paused" grep -q "not paused" <<<"$(jqr .error.message)"
auth POST /v1/sandboxes/sbx-doesnotexist/pause; expect_status 404 "pause: unknown sandbox"
KEY=$OTHER auth POST "/v1/sandboxes/${KID}/resume"; expect_status 404 "resume: another account's"
req POST "/v1/sandboxes/${KID}/pause"; expect_status 401 "pause without a key"
auth GET "/v1/sandboxes/${KID}/pause"; check "GET pause is not a route" test "$STATUS" = 404 -o "$STATUS" = 405

# ---- a paused sandbox destroyed: its state goes ----
auth POST "/v1/sandboxes/${KID2}/pause"; expect_status 200 "pause the second child"
auth DELETE "/v1/sandboxes/${KID2}"; expect_status 200 "destroy a paused sandbox"
expect_json .status destroyed "destroyed"
auth POST "/v1/sandboxes/${KID2}/resume"; expect_status 409 "resume a destroyed sandbox"

# ---- the paused price as an option: bad values named, a good one shown, kept by the sandboxes made before ----
stop_server || fail "the server stopped badly"
check "--help lists --paused-price" bash -c "'$SERVER' --help | grep -q -- '--paused-price USD'"
for bad in -1 abc 0.0000001 1000.000001 1e-4 ''; do
	check "--paused-price '$bad' refuses to start" bash -c "! '$SERVER' --listen 127.0.0.1:0 --state-dir '${WORK}/state' \
		--paused-price '$bad' >'${WORK}/badprice.log' 2>&1"
	check "the bad --paused-price '$bad' is named" grep -q -- "--paused-price: expected US dollars per GiB-hour, 0 to 1000" \
		"${WORK}/badprice.log"
done
check "a bad AAS_PAUSED_PRICE refuses to start" bash -c "! AAS_PAUSED_PRICE=free '$SERVER' --listen 127.0.0.1:0 \
	--state-dir '${WORK}/state' >'${WORK}/badprice.log' 2>&1"
check "the bad AAS_PAUSED_PRICE is named" grep -q 'AAS_PAUSED_PRICE: expected US dollars per GiB-hour' "${WORK}/badprice.log"
start_server "$SERVER" --paused-price 0.00025
auth GET /v1/account; expect_status 200 "account at --paused-price 0.00025"
expect_json .paused_usd_per_gib_hour_micro 250 "account: the option's paused price per GiB-hour"
expect_json '.sizes[] | select(.name == "small") | .paused_usd_per_hour_micro' 11000 "account: small's paused price"
req GET /v1/service; expect_status 200 service
expect_json .paused_usd_per_gib_hour 0.000250 "service: the option's paused price per GiB-hour"
stop_server || fail "the server stopped badly"
AAS_PAUSED_PRICE=0 start_server "$SERVER"
req GET /v1/service; expect_json .paused_usd_per_gib_hour 0.000000 "service: AAS_PAUSED_PRICE=0 makes pausing free"

finish
