#!/bin/bash
# aas-server with real VMs (the libvirt driver, the tiny image): the seeds'
# flow verbatim with curl, a 50 MiB file both ways, a preview URL served by
# an HTTP server started inside the guest with '&', and a WebSocket echo
# from a static binary uploaded into the guest; then a restart, after which the
# preview answers and /metrics counts the sandbox before anyone calls the API;
# the restarted server keeps a warm pool of one, and a create is served from it.
# Every sandbox is destroyed and every QEMU of this run killed afterwards, pass
# or fail.
#
# usage: test_vm.sh AAS_SERVER WSTOOL IMAGE_DIR
. "$(dirname "$0")/common.sh"
SERVER=$1
WSTOOL_SRC=$(dirname "$0")/wstool.c
# wstool frames with the library's own WebSocket code (lib/wire/ws.c, which needs nothing else).
WS_DIR=$(dirname "$0")/../../../lib/wire
IMAGES=$3
admin() { "$SERVER" "$@" --state-dir "${WORK}/state"; }

before_stop() { # destroy whatever this run created, through the API
	local ids
	ids=$(curl -s -H "Authorization: Bearer ${KEY:-}" "${BASE}/v1/sandboxes?status=active" | jq -r '.sandboxes[]?.id')
	for id in $ids; do curl -s -o /dev/null -X DELETE -H "Authorization: Bearer ${KEY}" "${BASE}/v1/sandboxes/${id}"; done
}
after_stop() { "$(dirname "$0")/../vm-cleanup" "${WORK}/state" >/dev/null 2>&1; mkdir -p "${WORK}"; }

[ -d "${IMAGES}/tiny" ] || { echo "no tiny image in ${IMAGES} (run the vmimage fixture)"; exit 1; }
start_server "$SERVER" --images "$IMAGES" --image tiny
KEY=$(admin account create --name seeds 2>/dev/null)
H="Authorization: Bearer ${KEY}"

# The seeds' flow, verbatim in spirit: curl against the base URL.
auth POST /v1/sandboxes -H 'Content-Type: application/json' -d '{"size":"small","timeout":900}'
expect_status 201 create; SB=$(jqr .id); expect_json .status ready "ready"
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"uname -s && id -un && pwd"}'
expect_status 200 exec; expect_json .exit_code 0 "exec exit"
check "runs as the unprivileged user in /workspace: $(jqr .stdout)" grep -q "^Linux$" <<<"$(jqr .stdout)"
check "cwd /workspace" grep -q "^/workspace$" <<<"$(jqr .stdout)"
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"printf \"\\377\\376\""}'
expect_json .stdout_encoding base64 "binary output encoded"; expect_json .stdout_base64 "//4=" "binary output bytes"
auth PUT "/v1/sandboxes/${SB}/files?path=hello.txt" --data-binary 'hello, sandbox'
expect_status 200 write
auth GET "/v1/sandboxes/${SB}/files?path=out.txt"; expect_status 404 "missing file"
# The real guest's permissions and name limits, as the fake driver mimics them.
auth PUT "/v1/sandboxes/${SB}/files?path=/etc/x" --data-binary x; expect_status 403 "write /etc/x in the guest"
auth GET "/v1/sandboxes/${SB}/files?path=/etc/shadow"; expect_status 403 "read /etc/shadow in the guest"
auth PUT "/v1/sandboxes/${SB}/files?path=$(printf 'n%.0s' $(seq 1 255))" --data-binary x; expect_status 200 "a 255-byte name in the guest"
# An unknown image: 400 naming it, never the server's image directory.
auth POST /v1/sandboxes -d '{"image":"nosuchimage"}'; expect_status 400 "unknown image"
check "unknown image named" grep -q "nosuchimage" <<<"$(jqr .error.message)"
check "unknown image hides the host's paths" bash -c "! grep -q '/' <<<'$(jqr .error.message)'"
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"tr a-z A-Z < hello.txt > out.txt"}'
auth GET "/v1/sandboxes/${SB}/files?path=out.txt"; expect_status 200 read
check "read back" test "$BODY" = "HELLO, SANDBOX"
auth GET "/v1/sandboxes/${SB}/files?path=/workspace&list=true"; expect_status 200 list
check "listing has out.txt" grep -q /workspace/out.txt <<<"$(jqr '.entries[].path')"
auth POST "/v1/sandboxes/${SB}/extend" -d '{"seconds":600}'; expect_status 200 extend
auth GET /v1/account; expect_status 200 account
auth GET /v1/usage; expect_status 200 usage

# 50 MiB both ways.
head -c $((50 * 1024 * 1024)) /dev/urandom >"${WORK}/big.bin"
auth PUT "/v1/sandboxes/${SB}/files?path=big.bin" --data-binary @"${WORK}/big.bin"; expect_status 200 "50 MiB up"
curl -sS -H "$H" -o "${WORK}/big.out" "${BASE}/v1/sandboxes/${SB}/files?path=big.bin"
check "50 MiB byte-equal" cmp -s "${WORK}/big.bin" "${WORK}/big.out"
rm -f "${WORK}/big.bin" "${WORK}/big.out"

# A preview: an HTTP server started inside with '&'.
auth PUT "/v1/sandboxes/${SB}/files?path=site/index.html" --data-binary 'hello from inside'
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"busybox httpd -p 8000 -h /workspace/site &"}'
expect_status 200 "start httpd"
# The host label of an exposure's URL (its name): the host is NAME.localhost:PORT.
preview_name() { auth POST "/v1/sandboxes/${SB}/ports" -d "{\"port\":$1}"; sed -E 's#^http://([^.]*)\..*$#\1#' <<<"$(jqr .url)"; }
N8000=$(preview_name 8000); expect_status 200 expose
for _ in $(seq 1 50); do
	req GET /index.html -H "Host: ${N8000}.localhost:${PORT}"; [ "$STATUS" = 200 ] && break; sleep 0.2
done
expect_status 200 "preview from inside"; check "preview body" test "$BODY" = "hello from inside"
N8002=$(preview_name 8002)
req GET / -H "Host: ${N8002}.localhost:${PORT}"; expect_status 502 "nothing listens inside"

# A WebSocket echo from a static binary built here.
if cc -static -O2 -I "$WS_DIR" -o "${WORK}/wstool" "$WSTOOL_SRC" "$WS_DIR/ws.c" 2>"${WORK}/cc.err"; then
	auth PUT "/v1/sandboxes/${SB}/files?path=wstool&mode=0755" --data-binary @"${WORK}/wstool"
	auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"./wstool serve 8001 >/dev/null 2>&1 &"}'
	N8001=$(preview_name 8001)
	OUT=
	for _ in $(seq 1 25); do
		OUT=$("${WORK}/wstool" client 127.0.0.1 "$PORT" "${N8001}.localhost:${PORT}" "ws in a vm" 2>&1) && break
		sleep 0.2
	done
	check "WebSocket echo from the guest: $OUT" test "$OUT" = "ws in a vm"
else
	fail "cannot build a static wstool: $(cat "${WORK}/cc.err")"
fi

# Restart the server on the same state directory. With no API call first (no key, nobody
# touching the sandbox), /metrics counts the sandbox and its preview answers.
# The pool's VM below must be a clone (its first commands go over the control port): let the
# template this server builds in the background be saved first, or the next server would find none
# and boot its pooled VM cold (its commands then over SSH).
template_saved() { grep -Eq 'template [0-9a-f]+ ready in' "${WORK}/server.log"; }
for _ in $(seq 1 600); do template_saved && break; sleep 0.5; done
check "the template is saved before the restart" template_saved
check "SIGTERM exits 0" stop_server
start_server "$SERVER" --images "$IMAGES" --image tiny --pool small:tiny=1
req GET /metrics; expect_status 200 "metrics after restart"
check "metrics after restart: the sandbox is counted" grep -Eq '^aas_sandboxes\{state="ready"\} [1-9]' <<<"$BODY"
req GET /index.html -H "Host: ${N8000}.localhost:${PORT}"
expect_status 200 "preview right after a restart"; check "preview body after restart" test "$BODY" = "hello from inside"
req GET / -H "Host: 8000-${SB}.localhost:${PORT}"; expect_status 404 "an old-style host opens nothing"

# The warm pool: one ready VM, in nobody's list, then claimed by a create.
pool_wait() { # sets POOLED once /metrics shows the small tiny pool holding its VM (at most 5 minutes)
	POOLED=
	for _ in $(seq 1 600); do
		req GET /metrics
		grep -Eq '^aas_pool_ready\{size="small",image="tiny"\} 1' <<<"$BODY" && POOLED=1 && return
		sleep 0.5
	done
}
pool_wait
check "the pool filled: $(grep '^aas_pool' <<<"$BODY" | tr '\n' ' ')" test -n "$POOLED"
FILLED=$(date +%s)
auth GET "/v1/sandboxes?status=active"
check "a pooled VM is in no account's list" test "$(jqr '.sandboxes | length')" = 1
sleep 3 # the pooled VM idles; nobody may pay for that
auth POST /v1/sandboxes -d '{"size":"small"}'; expect_status 201 "create from the pool"; P=$(jqr .id)
READY=$(date -d "$(jqr .ready_at)" +%s)
check "billing (from ready_at) starts at the claim, not when the pooled VM was made ($READY vs $FILLED)" test "$READY" -ge $((FILLED + 2))
check "served from the pool" grep -q "sandbox ${P} ready in [0-9]* ms (from the pool)" "${WORK}/server.log"
auth POST "/v1/sandboxes/${P}/exec" -d '{"command":"hostname"}'; expect_status 200 "exec in the claimed VM"
check "the claimed VM is named after its sandbox" test "$(jqr .stdout)" = "${P}"
# Output as it is written, on every path: an event stream's 'a' reaches the client while the command
# still runs (it waits for a file the test makes only once 'a' came, so 'b' cannot be printed
# before). First over the control port (a clone's commands, until something brings its SSH session
# up: the file's exec does), then over SSH, then over SSH with stdin open. The wait for 'a' is under
# the stream's 15 s keepalive, which would let a held 'a' out at last.
live_exec() { # live_exec LABEL VIA EXTRA_JSON: VIA is what the command says of SSH_CONNECTION
	local label=$1 via=$2 go="/tmp/go-$RANDOM" out="${WORK}/live-$1" pid body
	body=$(jq -nc --arg c "echo a; while [ ! -e ${go} ]; do sleep 0.1; done; echo b; echo \"via \${SSH_CONNECTION:+ssh}\"" \
		--argjson x "$3" '{command: $c} + $x')
	curl -sS -N -o "$out" -H "$H" -H 'Accept: text/event-stream' -d "$body" "${BASE}/v1/sandboxes/${P}/exec" &
	pid=$!; PIDS+=("$pid")
	local until=$((SECONDS + 10))
	while ((SECONDS < until)); do grep -q '^event: stdout' "$out" 2>/dev/null && break; sleep 0.1; done
	check "${label}: 'a' streams while the command runs ($(events "$out"))" test "$(events "$out")" = "started stdout"
	check "${label}: 'a' alone" test "$(data "$out" stdout | jq -j .data)" = a
	auth POST "/v1/sandboxes/${P}/exec" -d "{\"command\":\"touch ${go}\"}"; expect_status 200 "${label}: the go file"
	wait "$pid"
	check "${label}: then 'b' and the end" test "$(data "$out" stdout | jq -j .data)" = $'a\nb\nvia '"${via}"
	check "${label}: exit 0" test "$(data "$out" exit | jq -r .exit_code)" = 0
}
events() { sed -n 's/^event: //p' "$1" | tr '\n' ' ' | sed 's/ $//'; }
data() { awk -v n="$2" '/^event: /{e=substr($0, 8)} /^data: /{if (e == n) print substr($0, 7)}' "$1"; }
live_exec port "" '{}'
live_exec ssh ssh '{}'
live_exec ssh-stdin ssh '{"stdin_open":true}'
req GET /metrics
check "a claim is counted" grep -Eq '^aas_pool_claims_total\{size="small",image="tiny"\} 1' <<<"$BODY"
auth DELETE "/v1/sandboxes/${P}"; expect_status 200 "destroy the claimed sandbox"
# Never reused: the pool refills with a new VM, and the next claim is another machine.
pool_wait
check "the pool refilled" test -n "$POOLED"
auth POST /v1/sandboxes -d '{"size":"small"}'; expect_status 201 "second create from the pool"; P2=$(jqr .id)
check "the second claim is a new sandbox" test "$P2" != "$P"
check "served from the pool again" grep -q "sandbox ${P2} ready in [0-9]* ms (from the pool)" "${WORK}/server.log"
auth POST "/v1/sandboxes/${P2}/exec" -d '{"command":"hostname; ls /workspace"}'
check "a fresh machine: its own name, an empty workspace" test "$(jqr .stdout)" = "${P2}"
auth DELETE "/v1/sandboxes/${P2}"; expect_status 200 "destroy the second claimed sandbox"

auth DELETE "/v1/sandboxes/${SB}"; expect_status 200 destroy; expect_json .status destroyed destroyed
check "final cost is exact" grep -Eq '^[0-9]+\.[0-9]{6}$' <<<"$(jqr .cost_usd)"
req GET / -H "Host: ${N8000}.localhost:${PORT}"; expect_status 404 "preview gone with the sandbox"
finish
