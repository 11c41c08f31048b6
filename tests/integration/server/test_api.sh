#!/bin/bash
# The REST API end to end over real HTTP, with the server's fake VM driver
# (fast; no VMs): every route, the seeds' flow, every error status, a 50 MiB
# file both ways, preview URLs (HTTP and WebSocket), concurrent clients, key
# revocation, logs without keys, and a clean SIGTERM.
#
# usage: test_api.sh AAS_SERVER_FAKE WSTOOL
. "$(dirname "$0")/common.sh"
SERVER=$1
WSTOOL=$2
admin() { "$SERVER" "$@" --state-dir "${WORK}/state"; }

start_server "$SERVER" --key-cache-ttl 1
KEY=$(admin account create --name alice 2>"${WORK}/admin.err")
check "account create prints only the key" test "$(printf '%s\n' "$KEY" | wc -l)" = 1
check "account create prints an aas_sk_ key" grep -q '^aas_sk_' <<<"$KEY"

# ---- keyless routes ----
req GET /healthz; expect_status 200 healthz; expect_json .status ok healthz
# A kept-alive connection is kept idle --header-timeout (10 s); responses announce half of it (server/conn.c).
check "Keep-Alive announces half the idle window" grep -qi '^Keep-Alive: timeout=5' <<<"$HEADERS"
req GET /v1/service; expect_status 200 service
expect_json '.sizes[0].name' small "service sizes"
expect_json '.sizes[0].usd_per_hour' 0.090000 "service price string"
expect_json '.sizes[0].usd_per_hour_micro' 90000 "service price micro"
expect_json '.limits.max_sandboxes' 10 "service limits"
expect_json '.links.openapi' "${BASE}/openapi.json" "service links"
req GET /openapi.json; expect_status 200 openapi; expect_json .openapi 3.0.3 "openapi version"

# ---- authentication ----
req GET /v1/account; expect_status 401 "no key"
expect_json .error.code unauthorized "no key code"
check "401 carries WWW-Authenticate" grep -qi '^WWW-Authenticate: Bearer' <<<"$HEADERS"
req GET /v1/account -H "Authorization: Bearer aas_sk_nope"; expect_status 401 "wrong key"
req GET /v1/account -H "x-api-key: ${KEY}"; expect_status 200 "x-api-key"
req GET "/v1/account?api_key=${KEY}"; expect_status 400 "key in the URL"
req GET "/v1/sandboxes?token=${KEY}" -H "Authorization: Bearer ${KEY}"; expect_status 400 "token in the URL"
# Bytes that are not UTF-8, echoed in an error message, are '?' there: never a 500 (found by fuzz.http).
req GET "/%F7nope"; expect_status 404 "non-UTF-8 path"; expect_json .error.message "no route GET /?nope" "non-UTF-8 path echoed"
req PUT "/%C0%AF"; expect_status 404 "overlong UTF-8 path"
req DELETE /v1/mcp -H $'MCP-Protocol-Version: 2025\xe1\xe1-06-18'; expect_status 400 "MCP version not UTF-8"
expect_json .error.code -32600 "MCP version not UTF-8: a JSON-RPC error"

# ---- the seeds' flow ----
auth GET /v1/account; expect_status 200 account
ACC=$(jqr .id)
expect_json .balance_usd 5.000000 "new account balance"
expect_json .balance_usd_micro 5000000 "new account balance micro"
auth POST /v1/sandboxes -d '{"size":"small","timeout":600,"unknown_field":1}'
expect_status 201 create; SB=$(jqr .id)
expect_json .status ready "created ready"
expect_json .size small "created size"
expect_json .cost_usd 0.000000 "created cost"
auth GET "/v1/sandboxes/${SB}"; expect_status 200 get; expect_json .id "$SB" "get id"
check "times are RFC 3339 with ms" grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$' <<<"$(jqr .created_at)"
# The egress counters as last recorded (no driver read), or live: the same sandbox; anything else is a 400.
auth GET "/v1/sandboxes/${SB}?counters=recorded"; expect_status 200 "get, recorded counters"; expect_json .id "$SB" "get id, recorded"
auth GET "/v1/sandboxes/${SB}?counters=live"; expect_status 200 "get, live counters"
auth GET "/v1/sandboxes/${SB}?counters=cached"; expect_status 400 "get, counters neither live nor recorded"
expect_json .error.code invalid_argument "counters=cached is invalid_argument"
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"echo hello","timeout":30}'
expect_status 200 exec; expect_json .stdout "hello" "exec stdout"; expect_json .exit_code 0 "exec exit code"
expect_json .status exited "exec status"; expect_json .stdout_encoding utf-8 "exec encoding"
expect_json .truncated false "exec truncated"
EXE=$(jqr .execution_id)
auth GET "/v1/executions/${EXE}"; expect_status 200 "execution get"; expect_json .stdout hello "execution get stdout"
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"env","env":{"GREETING":"hi there"}}'
expect_json .stdout "GREETING=hi there" "exec env"
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"pwd","cwd":"/tmp"}'; expect_json .stdout "/tmp" "exec cwd"
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"cat","stdin":"from stdin"}'; expect_json .stdout "from stdin" "exec stdin"
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"exit 3"}'; expect_json .exit_code 3 "exec exit 3"
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"cat","stdin_base64":"/wBh"}'
expect_json .stdout null "non-UTF-8 stdout is null"; expect_json .stdout_base64 /wBh "non-UTF-8 stdout base64"
expect_json .stdout_encoding base64 "non-UTF-8 encoding"
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"spew 2000","max_output":1000}'
expect_json .truncated true "output truncated"; expect_json .stdout_truncated true "stdout truncated"
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"sleep 100","timeout":1}'
expect_status 200 "timeout exec"; expect_json .status timeout "timeout status"; expect_json .exit_code null "timeout exit code"
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"echo bg","background":true}'
expect_status 202 "background exec"; BG=$(jqr .execution_id)
for _ in $(seq 1 100); do auth GET "/v1/executions/${BG}"; [ "$(jqr .status)" != running ] && break; sleep 0.1; done
expect_json .stdout bg "background result"

printf 'print("hi")\n' >"${WORK}/main.py"
auth PUT "/v1/sandboxes/${SB}/files?path=app/main.py" --data-binary @"${WORK}/main.py"
expect_status 200 "write file"; expect_json .size 12 "write size"
auth GET "/v1/sandboxes/${SB}/files?path=app/main.py"
expect_status 200 "read file"; check "read back equal" test "$BODY" = 'print("hi")'
check "read is octet-stream" grep -qi '^Content-Type: application/octet-stream' <<<"$HEADERS"
auth GET "/v1/sandboxes/${SB}/files?path=/workspace&list=true"
expect_status 200 "list files"; expect_json '.entries[0].path' /workspace/app/main.py "list entry"
expect_json '.entries[0].type' file "list entry type"
# Directories, removal and moves (server/api/files_ops.c).
auth POST "/v1/sandboxes/${SB}/files/mkdir?path=tree/a/b"; expect_status 201 "mkdir"; expect_json .created true "mkdir created"
expect_json .path tree/a/b "mkdir path"
auth POST "/v1/sandboxes/${SB}/files/mkdir?path=/workspace/tree/a/b"; expect_status 200 "mkdir again"
expect_json .created false "mkdir: already there"
auth POST "/v1/sandboxes/${SB}/files/mkdir?path=app/main.py"; expect_status 409 "mkdir over a file"
expect_json .error.code already_exists "mkdir over a file code"
auth POST "/v1/sandboxes/${SB}/files/mkdir"; expect_status 400 "mkdir without path"
auth POST "/v1/sandboxes/${SB}/files/mkdir?path=/etc/nope"; expect_status 403 "mkdir under /etc"
auth PUT "/v1/sandboxes/${SB}/files?path=tree/a/b/f.txt" --data-binary eff; expect_status 200 "write in tree"
auth POST "/v1/sandboxes/${SB}/files/move?path=tree/a/b/f.txt&to=app/main.py"; expect_status 409 "move over a file"
expect_json .error.code already_exists "move over a file code"
auth POST "/v1/sandboxes/${SB}/files/move?path=tree/a/b/f.txt&to=moved/g.txt"; expect_status 200 "move"
expect_json .path moved/g.txt "move path"; expect_json .from tree/a/b/f.txt "move from"
auth GET "/v1/sandboxes/${SB}/files?path=moved/g.txt"; expect_status 200 "read moved"; check "moved bytes" test "$BODY" = eff
auth POST "/v1/sandboxes/${SB}/files/move?path=tree&to=tree/inside"; expect_status 400 "move into itself"
auth POST "/v1/sandboxes/${SB}/files/move?path=nope&to=x"; expect_status 404 "move missing"
auth POST "/v1/sandboxes/${SB}/files/move?path=moved/g.txt&to=x&replace=maybe"; expect_status 400 "replace=maybe"
auth POST "/v1/sandboxes/${SB}/files/move?path=moved/g.txt"; expect_status 400 "move without to"
auth DELETE "/v1/sandboxes/${SB}/files?path=tree"; expect_status 200 "remove a tree"
auth GET "/v1/sandboxes/${SB}/files?path=tree&list=true"; expect_status 404 "tree gone"
auth DELETE "/v1/sandboxes/${SB}/files?path=tree"; expect_status 404 "remove missing"
auth DELETE "/v1/sandboxes/${SB}/files?path=/"; expect_status 400 "remove /"
auth DELETE "/v1/sandboxes/${SB}/files?path=moved"; expect_status 200 "remove moved"
auth POST "/v1/sandboxes/${SB}/ports" -d '{"port":3000}'
expect_status 200 expose
check "preview URL: $(jqr .url)" grep -Eq "^http://[a-z2-7]{26}\.localhost:${PORT}/\$" <<<"$(jqr .url)"
auth POST "/v1/sandboxes/${SB}/extend" -d '{"seconds":300}'; expect_status 200 extend
auth GET /v1/usage; expect_status 200 usage; expect_json '.sandboxes[0].sandbox_id' "$SB" "usage line"
auth GET "/v1/usage?from=2020-01-01T00:00:00Z&to=$(date +%s)"; expect_status 200 "usage with times"
expect_json .from 2020-01-01T00:00:00.000Z "usage from"
auth GET "/v1/usage?from=2020-01-01&to=2020-01-31"; expect_status 200 "usage with dates"
expect_json .from 2020-01-01T00:00:00.000Z "a date from is its day's start"
expect_json .to 2020-02-01T00:00:00.000Z "a date to is its day's end"
auth GET "/v1/usage?from=2020-01-01T02:00:00%2B02:00&to=1580515200"; expect_status 200 "usage with an offset and seconds"
expect_json .from 2020-01-01T00:00:00.000Z "an offset is applied"
expect_json .to 2020-02-01T00:00:00.000Z "unix seconds"

# ---- listing ----
auth POST /v1/sandboxes -d '{}'; SB2=$(jqr .id)
auth GET "/v1/sandboxes?limit=1"; expect_status 200 list; expect_json '.sandboxes[0].id' "$SB2" "newest first"
CUR=$(jqr .next_cursor)
auth GET "/v1/sandboxes?limit=1&cursor=${CUR}"; expect_json '.sandboxes[0].id' "$SB" "second page"
auth GET "/v1/sandboxes?limit=1&counters=recorded"; expect_status 200 "list, recorded counters"
expect_json '.sandboxes[0].id' "$SB2" "list, recorded counters: newest first"
expect_json '.sandboxes[0].network.denied.connections' 0 "list, recorded counters: the counts are there"
auth GET "/v1/sandboxes?limit=1&cursor=${CUR}&counters=recorded"; expect_json '.sandboxes[0].id' "$SB" "second page, recorded"
auth GET "/v1/sandboxes?counters=live"; expect_status 200 "list, live counters"
auth GET "/v1/sandboxes?counters=cached"; expect_status 400 "list, counters neither live nor recorded"
expect_json .error.code invalid_argument "list counters=cached is invalid_argument"

# ---- destroy: idempotent, returns the final object ----
auth DELETE "/v1/sandboxes/${SB2}"; expect_status 200 destroy; expect_json .status destroyed "destroyed"
expect_json .end_reason destroyed "end reason"
auth DELETE "/v1/sandboxes/${SB2}"; expect_status 200 "destroy again"; expect_json .status destroyed "still destroyed"
auth GET "/v1/sandboxes?status=destroyed"; expect_json '.sandboxes[0].id' "$SB2" "filter destroyed"
auth GET "/v1/sandboxes?status=active"; expect_json '[.sandboxes[].id] | index("'"$SB2"'")' null "filter active"
auth GET "/v1/sandboxes?status=ready"; expect_json '.sandboxes[0].id' "$SB" "filter ready"

# ---- errors ----
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":'; expect_status 400 "malformed JSON"; expect_json .error.code invalid_json "invalid_json"
auth POST "/v1/sandboxes/${SB}/exec" -d '[1]'; expect_status 400 "JSON not an object"
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":5}'; expect_status 400 "wrong type"
check "wrong type names the field" grep -q command <<<"$(jqr .error.message)"
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"echo","timeout":"x"}'; expect_status 400 "timeout wrong type"
check "names timeout" grep -q timeout <<<"$(jqr .error.message)"
auth POST "/v1/sandboxes/${SB}/exec" -d '{}'; expect_status 400 "command missing"
auth POST /v1/sandboxes -d '{"size":"galactic"}'; expect_status 400 "unknown size"; expect_json .error.code invalid_argument "EINVAL code"
auth GET "/v1/sandboxes?limit=0"; expect_status 400 "bad limit"
auth GET "/v1/sandboxes?cursor=garbage"; expect_status 400 "bad cursor"
auth GET "/v1/usage?from=yesterday"; expect_status 400 "bad from"
auth GET "/v1/usage?to=2020-02-30"; expect_status 400 "bad to"; expect_json .error.code invalid_argument "bad to code"
auth GET /v1/sandboxes/sbx-doesnotexist; expect_status 404 "unknown sandbox"; expect_json .error.code not_found "not_found"
auth GET /v1/executions/exe-doesnotexist; expect_status 404 "unknown execution"
auth GET "/v1/sandboxes/${SB}/files?path=missing.txt"; expect_status 404 "missing file"
auth GET "/v1/sandboxes/${SB}/files"; expect_status 400 "file path missing"
auth GET /v1/nothing; expect_status 404 "unknown route"
auth PATCH "/v1/sandboxes/${SB}"; expect_status 405 "wrong method"
check "405 carries Allow" grep -qi '^Allow: GET, HEAD, DELETE' <<<"$HEADERS"
auth POST "/v1/sandboxes/${SB2}/exec" -d '{"command":"echo"}'; expect_status 409 "exec on destroyed"; expect_json .error.code conflict "conflict"
auth PUT "/v1/sandboxes/${SB2}/files?path=x" --data-binary x; expect_status 409 "write on destroyed"
auth DELETE "/v1/sandboxes/${SB2}/files?path=x"; expect_status 409 "remove on destroyed"
auth POST "/v1/sandboxes/${SB}/extend" -d '{"seconds":999999}'; expect_status 400 "extend past max (no retry helps)"
expect_json .error.code invalid_argument "extend past max code"
auth POST /v1/sandboxes -d '{"timeout":999999}'; expect_status 400 "create past max, the same answer"

# ---- bad input: the right status, never a 500, never an internal detail ----
# The guest's unprivileged user may not write /etc or read /etc/shadow: 403, not 500.
auth PUT "/v1/sandboxes/${SB}/files?path=/etc/x" --data-binary x; expect_status 403 "write /etc/x"
expect_json .error.code permission_denied "write /etc/x code"
check "write /etc/x says permission denied" grep -q "permission denied" <<<"$(jqr .error.message)"
auth GET "/v1/sandboxes/${SB}/files?path=/etc/shadow"; expect_status 403 "read /etc/shadow"
expect_json .error.code permission_denied "read /etc/shadow code"
# The guest's NAME_MAX (255) and PATH_MAX (4096 with its NUL), checked before the guest is asked.
N255=$(printf 'n%.0s' $(seq 1 255)); N256="${N255}n"
auth PUT "/v1/sandboxes/${SB}/files?path=${N255}" --data-binary x; expect_status 200 "a 255-byte name"
auth PUT "/v1/sandboxes/${SB}/files?path=${N256}" --data-binary x; expect_status 400 "a 256-byte name"
check "a 256-byte name is named" grep -q "256 bytes; at most 255" <<<"$(jqr .error.message)"
auth PUT "/v1/sandboxes/${SB}/files?path=/workspace/${N255}n${N255}n${N255}n" --data-binary x; expect_status 400 "a 300-byte file name (and more)"
LONG=/workspace; while [ ${#LONG} -lt 3840 ]; do LONG="${LONG}/${N255}"; done
LONG="${LONG}/$(printf 'p%.0s' $(seq 1 $((4095 - ${#LONG} - 1))))"
auth PUT "/v1/sandboxes/${SB}/files?path=${LONG}" --data-binary x; expect_status 200 "a 4095-byte path"
auth PUT "/v1/sandboxes/${SB}/files?path=${LONG}p" --data-binary x; expect_status 400 "a 4096-byte path"
auth PUT "/v1/sandboxes/${SB}/files?path=${LONG#/workspace/}" --data-binary x; expect_status 200 "relative: 4095 bytes once absolute"
auth PUT "/v1/sandboxes/${SB}/files?path=${LONG#/workspace/}p" --data-binary x; expect_status 400 "relative: 4096 bytes once absolute"
auth POST "/v1/sandboxes/${SB}/exec" -d "{\"command\":\"pwd\",\"cwd\":\"/${N256}\"}"; expect_status 400 "a cwd with a 256-byte name"
# A NUL in a query parameter is refused, never cut short (it wrote /workspace/nul), and so is a repeat.
auth PUT "/v1/sandboxes/${SB}/files?path=nul%00evil" --data-binary x; expect_status 400 "path with %00"
check "path with %00 says NUL" grep -q "NUL" <<<"$(jqr .error.message)"
auth GET "/v1/sandboxes/${SB}/files?path=nul"; expect_status 404 "nothing was written for path with %00"
auth GET "/v1/sandboxes/${SB}/files?path=app/main.py&path=/etc/shadow"; expect_status 400 "path given twice"
auth GET "/v1/sandboxes?status=active%00x"; expect_status 400 "status with %00"
# "\u0000" is valid JSON: said in plain words, without jansson's flag names.
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"echo \u0000"}'; expect_status 400 "\\u0000 in a string"
check "\\u0000 is explained" grep -q 'NUL' <<<"$(jqr .error.message)"
check "no jansson flag in the message" bash -c "! grep -q JSON_ <<<'$(jqr .error.message)'"
# Query booleans and integers: true/false/1/0 and digits only, anything else 400.
auth GET "/v1/sandboxes/${SB}/files?path=/workspace&list=yes"; expect_status 400 "list=yes"
auth GET "/v1/sandboxes/${SB}/files?path=/workspace&list=1"; expect_status 200 "list=1"
expect_json '.entries | length > 0' true "list=1 lists"
auth GET "/v1/sandboxes/${SB}/files?path=app/main.py&list=false"; expect_status 200 "list=false reads"
auth GET "/v1/sandboxes/${SB}/files?path=/workspace&list=true&depth=0"; expect_status 400 "depth=0"
auth GET "/v1/sandboxes/${SB}/files?path=/workspace&list=true&depth=%2B2"; expect_status 400 "depth=+2"
auth GET "/v1/sandboxes/${SB}/files?path=/workspace&list=true&depth=16"; expect_status 200 "depth=16"
auth GET "/v1/sandboxes/${SB}/files?path=/workspace&list=true&depth=17"; expect_status 400 "depth=17"
auth GET "/v1/sandboxes?limit=%201"; expect_status 400 "limit with a space"
auth GET "/v1/sandboxes?limit=1000"; expect_status 200 "limit=1000"
auth PUT "/v1/sandboxes/${SB}/files?path=m&mode=%2B755" --data-binary x; expect_status 400 "mode=+755"
auth POST "/v1/sandboxes/${SB}/ports" -d '{"port":22}'; expect_status 400 "port 22"
head -c $((25 * 1024 * 1024)) /dev/zero >"${WORK}/big.json"
auth POST "/v1/sandboxes/${SB}/exec" --data-binary @"${WORK}/big.json"; expect_status 413 "JSON body too large"
auth POST /v1/sandboxes -H 'Transfer-Encoding: chunked' --data-binary @"${WORK}/big.json"; expect_status 413 "chunked JSON body too large"
rm -f "${WORK}/big.json"
POOR=$(admin account create --name poor --credit 0 2>/dev/null)
req POST /v1/sandboxes -H "Authorization: Bearer ${POOR}" -d '{}'; expect_status 402 "no credit"; expect_json .error.code insufficient_credit "credit code"
MANY=$(admin account create --name many --credit 100 2>/dev/null)
for _ in $(seq 1 10); do req POST /v1/sandboxes -H "Authorization: Bearer ${MANY}" -d '{}'; done
expect_status 201 "tenth sandbox"
req POST /v1/sandboxes -H "Authorization: Bearer ${MANY}" -d '{}'; expect_status 429 "too many sandboxes"
# tenancy: another account's sandbox is not found
req GET "/v1/sandboxes/${SB}" -H "Authorization: Bearer ${MANY}"; expect_status 404 "other account's sandbox"

# ---- 50 MiB both ways, byte-equal (AAS_TEST_BIG_MIB: the fake driver's in-memory
# files grow by realloc per 8 KiB, which is quadratic under ASan) ----
BIG=$(( ${AAS_TEST_BIG_MIB:-50} * 1024 * 1024 ))
head -c "$BIG" /dev/urandom >"${WORK}/big.bin"
auth PUT "/v1/sandboxes/${SB}/files?path=big.bin" -H 'Content-Type: application/octet-stream' --data-binary @"${WORK}/big.bin"
expect_status 200 "50 MiB upload"; expect_json .size "$BIG" "50 MiB size"
curl -sS -H "Authorization: Bearer ${KEY}" -o "${WORK}/big.out" "${BASE}/v1/sandboxes/${SB}/files?path=big.bin"
check "50 MiB download byte-equal" cmp -s "${WORK}/big.bin" "${WORK}/big.out"
curl -sS -H "Authorization: Bearer ${KEY}" -T "${WORK}/big.bin" -H 'Transfer-Encoding: chunked' -o /dev/null \
	"${BASE}/v1/sandboxes/${SB}/files?path=big2.bin"
curl -sS -H "Authorization: Bearer ${KEY}" -o "${WORK}/big.out" "${BASE}/v1/sandboxes/${SB}/files?path=big2.bin"
check "chunked upload byte-equal" cmp -s "${WORK}/big.bin" "${WORK}/big.out"
rm -f "${WORK}/big.bin" "${WORK}/big.out"

# ---- preview URLs (the fake driver's port N is the host's 127.0.0.1:N) ----
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
HP=$(free_port); WP=$(free_port); NP=$(free_port)
mkdir -p "${WORK}/www"; echo "hello from the preview" >"${WORK}/www/index.html"
(cd "${WORK}/www" && exec python3 -m http.server "$HP" --bind 127.0.0.1 >/dev/null 2>&1) & PIDS+=($!)
"$WSTOOL" serve "$WP" & PIDS+=($!)
for _ in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:${HP}/" && break; sleep 0.1; done
preview_host() { auth POST "/v1/sandboxes/${SB}/ports" -d "{\"port\":$1}"; sed -E 's#^http://([^/]*)/$#\1#' <<<"$(jqr .url)"; }
HH=$(preview_host "$HP"); WH=$(preview_host "$WP"); NH=$(preview_host "$NP")
PREVIEW="http://${HH}"
req GET /index.html -H "Host: ${HH}"
expect_status 200 "preview GET (no key)"; check "preview body" test "$BODY" = "hello from the preview"
req GET /absent -H "Host: ${HH}"; expect_status 404 "preview passes the inner 404"
req GET / -H "Host: ${NH}"; expect_status 502 "nothing listens inside"
check "502 explains" grep -q "nothing answers" <<<"$BODY"
req GET / -H "Host: ${NH}" -H 'Accept: text/html'; expect_status 502 "502 as HTML"
check "502 HTML" grep -q "<html>" <<<"$BODY"
req GET / -H "Host: ${HP}-${SB}.localhost:${PORT}"; expect_status 404 "an old-style host opens nothing"
req GET / -H "Host: aaaaaaaaaaaaaaaaaaaaaaaaaa.localhost:${PORT}"; expect_status 404 "unknown preview"
if command -v getent >/dev/null && getent hosts "${HH%%:*}" >/dev/null; then
	check "preview by name" test "$(curl -s "${PREVIEW}/index.html")" = "hello from the preview"
fi
OUT=$("$WSTOOL" client 127.0.0.1 "$PORT" "${WH}" "echo me" 2>&1)
check "WebSocket echo through the preview: $OUT" test "$OUT" = "echo me"

# ---- concurrent clients ----
conc() {
	local i=$1 ok=0
	for _ in $(seq 1 10); do
		c1=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer ${KEY}" "${BASE}/v1/sandboxes/${SB}")
		c2=$(curl -s -o "${WORK}/c$i" -w '%{http_code}' -H "Authorization: Bearer ${KEY}" \
			-d "{\"command\":\"echo t$i\"}" "${BASE}/v1/sandboxes/${SB}/exec")
		[ "$c1$c2" = 200200 ] && [ "$(jq -r .stdout "${WORK}/c$i")" = "t$i" ] && ok=$((ok + 1))
	done
	echo "$ok" >"${WORK}/conc$i"
}
for i in $(seq 1 8); do conc "$i" & done
wait_conc() { for i in $(seq 1 8); do while [ ! -s "${WORK}/conc$i" ]; do sleep 0.1; done; done; }
wait_conc
TOTAL=0; for i in $(seq 1 8); do TOTAL=$((TOTAL + $(cat "${WORK}/conc$i"))); done
check "8 concurrent clients x 10 rounds all answered ($TOTAL/80)" test "$TOTAL" = 80

# ---- metrics ----
req GET /metrics; expect_status 200 metrics
check "metrics: requests" grep -q 'aas_http_requests_total{route="/v1/sandboxes/{id}",method="GET",status="200"}' <<<"$BODY"
check "metrics: latency" grep -q 'aas_http_request_duration_seconds_bucket{route="/healthz",le="+Inf"}' <<<"$BODY"
check "metrics: creates" grep -Eq '^aas_sandbox_creates_total\{result="ok"\} [1-9]' <<<"$BODY"
# Refusals of the client's own mistakes are counted by reason, not as failures an alert should see.
check "metrics: invalid creates" grep -Eq '^aas_sandbox_creates_total\{result="invalid"\} [1-9]' <<<"$BODY"
check "metrics: creates without credit" grep -Eq '^aas_sandbox_creates_total\{result="credit"\} [1-9]' <<<"$BODY"
check "metrics: creates past a limit" grep -Eq '^aas_sandbox_creates_total\{result="limit"\} [1-9]' <<<"$BODY"
check "metrics: no failed creates yet" grep -Eq '^aas_sandbox_creates_total\{result="error"\} 0$' <<<"$BODY"
check "metrics: create durations" grep -q '^aas_sandbox_create_duration_seconds_count' <<<"$BODY"
check "metrics: sandboxes by state" grep -Eq '^aas_sandboxes\{state="ready"\} [1-9]' <<<"$BODY"
# The gauges count every account's sandboxes (the engine's), not only those of accounts this server
# holds a client for: bob creates one, then his only key is revoked (so the server drops his
# client), and the gauges do not change.
gauges() { req GET /metrics; grep -E '^aas_(sandboxes\{state="ready"\}|accounts_with_sandboxes) ' <<<"$BODY"; }
BOBKEY=$(admin account create --name bob 2>"${WORK}/bob.err")
BOBACC=$(grep -o 'acc-[a-z0-9]*' "${WORK}/bob.err" | head -1)
BOBKID=$(admin key list --account "$BOBACC" 2>/dev/null | grep -o 'key-[a-z0-9]*' | head -1)
BEFORE=$(gauges)
req POST /v1/sandboxes -H "Authorization: Bearer ${BOBKEY}" -d '{"timeout":600}'; expect_status 201 "bob creates"
WITH_BOB=$(gauges)
check "metrics: bob's sandbox counted ($BEFORE -> $WITH_BOB)" test "$BEFORE" != "$WITH_BOB"
admin key revoke --id "$BOBKID" 2>/dev/null
for _ in $(seq 1 100); do
	req GET /v1/account -H "Authorization: Bearer ${BOBKEY}"; [ "$STATUS" = 401 ] && break; sleep 0.1
done
expect_status 401 "bob's key revoked"
AFTER=$(gauges)
check "metrics: every account's sandboxes, not just known clients' ($WITH_BOB -> $AFTER)" test "$WITH_BOB" = "$AFTER"

# ---- revocation is honoured (cache TTL 1 s here) ----
KEY2=$(admin key create --account "$ACC" --name ci 2>"${WORK}/keyinfo")
KID=$(grep -o 'key-[a-z0-9]*' "${WORK}/keyinfo" | head -1)
req GET /v1/account -H "Authorization: Bearer ${KEY2}"; expect_status 200 "second key works"
admin key revoke --id "$KID" 2>/dev/null
for _ in $(seq 1 100); do
	req GET /v1/account -H "Authorization: Bearer ${KEY2}"; [ "$STATUS" = 401 ] && break; sleep 0.1
done
expect_status 401 "revoked key refused"

# ---- the network policy is a create field ----
auth POST /v1/sandboxes -d '{"network":"everywhere"}'; expect_status 400 "unknown network policy"
auth POST /v1/sandboxes -d '{"network":7}'; expect_status 400 "network of the wrong type"
auth POST /v1/sandboxes -d '{"network":"isolated","timeout":60}'; expect_status 201 "isolated network"
expect_json .network.mode isolated "an isolated create reports isolated"
expect_json '.network.denied.connections' 0 "denied connections reported"
auth DELETE "/v1/sandboxes/$(jqr .id)"; expect_status 200 "destroy the isolated one"

# ---- a policy on create, read back normalised, changed at runtime (PUT /network) ----
auth POST /v1/sandboxes -d '{"network":{"allow":["API.Example.com","203.0.113.7"],"deny":["*.ads.example.com"]},"timeout":60}'
expect_status 201 "create with a policy"
NSB=$(jqr .id)
expect_json .network.mode policy "policy mode reported"
expect_json '.network.allow | join(",")' "api.example.com,203.0.113.7/32" "allow normalised"
expect_json '.network.deny[0]' "*.ads.example.com" "deny reported"
auth GET "/v1/sandboxes/${NSB}"; expect_json '.network.allow[0]' api.example.com "policy on get"
auth POST /v1/sandboxes -d '{"network":{"allow":["10.1.2.3/8"]}}'; expect_status 400 "host bits set"
expect_json '.error.message | contains("\"10.1.2.3/8\" in allow")' true "the message names the rule"
auth POST /v1/sandboxes -d '{"network":{"allow":"example.com"}}'; expect_status 400 "allow not an array"
auth POST /v1/sandboxes -d '{"network":{"allow":["example.com"],"extra":1}}'; expect_status 400 "unknown member"
auth POST /v1/sandboxes -d '{"network":{"mode":"internet","allow":["example.com"]}}'; expect_status 400 "rules outside a policy"
auth POST /v1/sandboxes -d "{\"network\":{\"allow\":[$(seq -f '"h%g.example"' -s, 1 65)]}}"; expect_status 400 "65 rules"
auth PUT "/v1/sandboxes/${NSB}/network" -d '{"mode":"policy","allow":["*.Example.org"]}'; expect_status 200 "change at runtime"
expect_json '.network.allow | join(",")' "*.example.org" "the new policy"
expect_json '.network.deny | length' 0 "deny replaced, not merged"
auth PUT "/v1/sandboxes/${NSB}/network" -d '{"mode":"isolated"}'; expect_status 200 "to isolated"
expect_json .network.mode isolated "isolated now"
auth PUT "/v1/sandboxes/${NSB}/network" -d '{"allow":["bad rule"]}'; expect_status 400 "bad rule at runtime"
auth PUT "/v1/sandboxes/${NSB}/network" -d '"internet"'; expect_status 400 "a body that is not an object"
auth PUT "/v1/sandboxes/sbx-nosuchsandbox/network" -d '{"mode":"internet"}'; expect_status 404 "no such sandbox"
auth DELETE "/v1/sandboxes/${NSB}"; expect_status 200 "destroy the policy one"
auth PUT "/v1/sandboxes/${NSB}/network" -d '{"mode":"internet"}'; expect_status 409 "destroyed: no change"

# ---- logs: one line per request, never a key ----
check "no key in the log" bash -c "! grep -q aas_sk_ '${WORK}/server.log'"
check "access log line" grep -Eq "GET /v1/sandboxes/${SB} 200 [0-9.]+ms account=${ACC}" "${WORK}/server.log"
check "query never logged" bash -c "! grep -q 'api_key=' '${WORK}/server.log'"

# ---- SIGTERM: a clean stop ----
check "SIGTERM exits 0" stop_server
check "stopped logged" grep -q ' stopped$' "${WORK}/server.log"

# ---- a server-side failure: the tenant reads the code's fixed text, the operator's log the detail ----
AAS_FAKE_FAIL_CREATES=1 start_server "$SERVER"
auth POST /v1/sandboxes -d '{}'; expect_status 502 "a create the driver fails"
expect_json .error.code backend_error "a create the driver fails: code"
check "the driver's words are not the tenant's" bash -c "! grep -q 'fake:' <<<'$(jqr .error.message)'"
check "the driver's words are in the operator's log" grep -q "answering 502 backend_error for: .*fake: this create fails" "${WORK}/server.log"
req GET /metrics; check "metrics: a failed create is an error" grep -Eq '^aas_sandbox_creates_total\{result="error"\} 1$' <<<"$BODY"
check "SIGTERM after a failed create exits 0" stop_server

# ---- the driver's "busy" names host facts (free memory, the QEMU uid range): plain words for the tenant ----
AAS_FAKE_BUSY_CREATES=1 AAS_FAKE_BUSY_RESTORES=2 start_server "$SERVER"
auth POST /v1/sandboxes -d '{}'; expect_status 503 "a create the driver finds no room for"
expect_json .error.code busy "a busy create: code"
check "the host's facts are not the tenant's" bash -c "! grep -Eq 'fake:|uid|MiB' <<<'$(jqr .error.message)'"
check "a busy create says so in plain words" grep -q "resource busy" <<<"$(jqr .error.message)"
check "and tells the tenant to come back, not that the server broke" grep -q "no room for it right now" <<<"$(jqr .error.message)"
check "and when: Retry-After, in seconds" grep -qi '^Retry-After: 10' <<<"$HEADERS"
expect_json .error.retry_after 10 "the body repeats Retry-After's seconds"
auth GET /v1/sandboxes; check "no Retry-After on an answer that is not busy" bash -c "! grep -qi '^Retry-After' <<<'$HEADERS'"
check "the host's facts are in the operator's log" grep -q "answering 503 busy for: .*QEMU uid of the range 70000" \
	"${WORK}/server.log"
# A fork's child and a resume refused for room (the driver's memory refusal on a restore): the same answer.
busy_restore() { # busy_restore WHAT
	expect_status 503 "$1 the driver finds no room for"
	expect_json .error.code busy "a busy $1: code"
	check "a busy $1: the host's facts are not the tenant's" bash -c "! grep -Eq 'fake:|MiB' <<<'$(jqr .error.message)'"
	check "a busy $1: Retry-After, in seconds" grep -qi $'^Retry-After: 10\r\\?$' <<<"$HEADERS"
	expect_json .error.retry_after 10 "a busy $1: the body repeats it"
}
auth POST /v1/sandboxes -d '{}'; expect_status 201 "the next create has room"; BSB=$(jqr .id)
auth POST "/v1/sandboxes/${BSB}/fork" -d '{"count":1}'; busy_restore "fork"
auth POST "/v1/sandboxes/${BSB}/pause"; expect_status 200 "pause for the busy resume"
auth POST "/v1/sandboxes/${BSB}/resume"; busy_restore "resume"
check "a busy resume says so in plain words" grep -q "no room for it right now" <<<"$(jqr .error.message)"
auth GET "/v1/sandboxes/${BSB}"; expect_json .status paused "a busy resume: still paused"
auth POST "/v1/sandboxes/${BSB}/resume"; expect_status 200 "resumed once there is room"
check "the restores' refusals are in the operator's log" grep -q "answering 503 busy for: .*short of memory" \
	"${WORK}/server.log"
check "SIGTERM after a busy create exits 0" stop_server

# ---- warm pools: a bad spec stops the start; AAS_POOL fills a pool, /metrics shows it, a create claims it ----
check "a bad pool spec refuses to start" bash -c "! '$SERVER' --listen 127.0.0.1:0 --state-dir '${WORK}/state' \
	--pool huge=1 >'${WORK}/badpool.log' 2>&1"
check "the bad pool entry is named" grep -q "unknown size 'huge'" "${WORK}/badpool.log"
check "--help lists --pool" bash -c "'$SERVER' --help | grep -q -- '--pool SPEC'"
check "a bad --templates refuses to start" bash -c "! '$SERVER' --listen 127.0.0.1:0 --state-dir '${WORK}/state' \
	--templates maybe >'${WORK}/badtpl.log' 2>&1"
check "the bad --templates value is named" grep -q 'expected on or off, got "maybe"' "${WORK}/badtpl.log"
check "a bad AAS_TEMPLATES refuses to start" bash -c "! AAS_TEMPLATES=yes '$SERVER' --listen 127.0.0.1:0 \
	--state-dir '${WORK}/state' >'${WORK}/badtpl.log' 2>&1"
export AAS_POOL="small=1"
start_server "$SERVER"
unset AAS_POOL
pool_metric() { req GET /metrics; sed -n "s/^aas_pool_$1{size=\"small\",image=\"default\"} //p" <<<"$BODY"; }
for _ in $(seq 1 100); do [ "$(pool_metric ready)" = 1 ] && break; sleep 0.1; done
check "metrics: aas_pool_ready 1" test "$(pool_metric ready)" = 1
check "metrics: aas_pool_target 1" test "$(pool_metric target)" = 1
req GET /metrics; check "metrics: aas_pool_ready is a gauge" grep -q '^# TYPE aas_pool_ready gauge' <<<"$BODY"
auth POST /v1/sandboxes -d '{"size":"small","timeout":60}'; expect_status 201 "create from the pool"
PSB=$(jqr .id)
check "the create was served from the pool" grep -q "sandbox ${PSB} ready in [0-9]* ms (from the pool)" "${WORK}/server.log"
check "metrics: aas_pool_claims_total 1" test "$(pool_metric claims_total)" = 1
auth GET "/v1/sandboxes?status=active"
check "the account lists its claimed sandbox and no pooled VM" test "$(jqr '[.sandboxes[].id] | join(" ")')" = "$PSB"
auth DELETE "/v1/sandboxes/${PSB}"; expect_status 200 "destroy the pooled one"
# The refill holds off 2 s after a claim, then makes the replacement.
for _ in $(seq 1 100); do [ "$(pool_metric ready)" = 1 ] && break; sleep 0.1; done
check "the pool refills after the claim" test "$(pool_metric ready)" = 1
check "SIGTERM with a pool exits 0" stop_server
check "the unclaimed pooled VM is destroyed at stop" grep -q "destroying unclaimed VM" "${WORK}/server.log"

# ---- free space: --min-free-mb in 1..16777216; under it a create is 503 busy, saying why and no path ----
check "--help lists --min-free-mb" bash -c "'$SERVER' --help | grep -q -- '--min-free-mb N'"
check "--min-free-mb 0 refuses to start" bash -c "! '$SERVER' --listen 127.0.0.1:0 --state-dir '${WORK}/state' \
	--min-free-mb 0 >'${WORK}/badfree.log' 2>&1"
check "the bad --min-free-mb is named" grep -q -- '--min-free-mb: expected 1 to 16777216 MiB' "${WORK}/badfree.log"
check "--min-free-mb past 16 TiB refuses to start" bash -c "! '$SERVER' --listen 127.0.0.1:0 \
	--state-dir '${WORK}/state' --min-free-mb 16777217 >'${WORK}/badfree.log' 2>&1"
check "a bad AAS_MIN_FREE_MB refuses to start" bash -c "! AAS_MIN_FREE_MB=lots '$SERVER' --listen 127.0.0.1:0 \
	--state-dir '${WORK}/state' >'${WORK}/badfree.log' 2>&1"
# 16 TiB, the most there is to ask: more than this disk has free.
start_server "$SERVER" --min-free-mb 16777216
auth POST /v1/sandboxes -d '{"timeout":60}'; expect_status 503 "a create while the disk is short"
expect_json .error.code busy "a short disk is busy"
check "the 503 says the disk is short" grep -q 'short of disk space' <<<"$BODY"
check "the 503 names no server path" bash -c "! grep -q '${WORK}' <<<'$BODY'"
req GET /metrics; check "metrics: a create refused for disk space is busy" \
	grep -Eq '^aas_sandbox_creates_total\{result="busy"\} 1$' <<<"$BODY"
check "the log names the filesystem" grep -q "${WORK}/state has .* MiB free, under the 16777216 MiB kept free" "${WORK}/server.log"
check "SIGTERM after a refused create exits 0" stop_server
finish
