#!/bin/bash
# The aas command-line tool end to end against aas-server on a free loopback
# port: every subcommand, text and --json output, exit codes, cp both ways on
# binary data, login. Two ways: against aas-server-fake (the server's code
# with the fake VM driver; fast), and, given an image directory, against the
# real aas-server with real VMs (the tiny image).
#
# usage: test_cli.sh AAS AAS_SERVER [IMAGE_DIR]
. "$(dirname "$0")/../server/common.sh"
AAS=$1
SERVER=$2
IMAGES=${3:-}
admin() { "$SERVER" "$@" --state-dir "${WORK}/state"; }
if [ -n "$IMAGES" ]; then
	before_stop() { # destroy whatever this run left, through the API
		local ids
		ids=$(curl -s -H "Authorization: Bearer ${KEY:-}" "${BASE}/v1/sandboxes?status=active" | jq -r '.sandboxes[]?.id')
		for id in $ids; do curl -s -o /dev/null -X DELETE -H "Authorization: Bearer ${KEY}" "${BASE}/v1/sandboxes/${id}"; done
	}
	after_stop() { "$(dirname "$0")/../vm-cleanup" "${WORK}/state" >/dev/null 2>&1; mkdir -p "${WORK}"; }
fi

# Keep the user's own configuration and environment out of it.
export XDG_CONFIG_HOME="${WORK}/config" HOME="${WORK}/home"
unset AAS_API_KEY AAS_BASE_URL
mkdir -p "${HOME}"

if [ -n "$IMAGES" ]; then
	[ -d "${IMAGES}/tiny" ] || { echo "no tiny image in ${IMAGES} (run the vmimage fixture)"; exit 1; }
	start_server "$SERVER" --images "$IMAGES" --image tiny
else
	# aas run's cases: the fake's guest port 49999 is the code server's test double (../server/code_guest.py).
	python3 "$(dirname "$0")/../server/code_guest.py" "${WORK}/guest.port" &
	PIDS+=("$!")
	for _ in $(seq 1 100); do [ -s "${WORK}/guest.port" ] && break; sleep 0.1; done
	export SAAS_FAKE_PORTS="49999=127.0.0.1:$(cat "${WORK}/guest.port")"
	start_server "$SERVER"
fi
KEY=$(admin account create --name cli 2>"${WORK}/admin.err")
check "account create gave a key" grep -q '^aas_sk_' <<<"$KEY"

# run ARGS...: runs aas with stdin from /dev/null; sets OUT, ERR, RC.
run() {
	"$AAS" "$@" </dev/null >"${WORK}/out" 2>"${WORK}/err"
	RC=$?
	OUT=$(cat "${WORK}/out")
	ERR=$(cat "${WORK}/err")
}
expect_rc() { # expect_rc WANT DESCRIPTION
	if [ "$RC" = "$1" ]; then pass; else fail "$2: exit $RC, want $1 (stderr: ${ERR:0:300})"; fi
}
expect_out() { # expect_out WANT DESCRIPTION
	if [ "$OUT" = "$1" ]; then pass; else fail "$2: stdout '${OUT:0:300}', want '$1'"; fi
}
jout() { printf '%s' "$OUT" | jq -r "$1"; }
expect_jq() { # expect_jq EXPR WANT DESCRIPTION
	local got; got=$(jout "$1")
	if [ "$got" = "$2" ]; then pass; else fail "$3: $1 = '$got', want '$2' (out: ${OUT:0:300})"; fi
}
one_line_err() { # the error is one line starting with "aas"
	if [ "$(printf '%s\n' "$ERR" | wc -l)" = 1 ] && grep -q '^aas' <<<"$ERR"; then pass; else fail "$1: stderr not one line: $ERR"; fi
}

# ---- help and usage errors (no server needed) ----
run --help; expect_rc 0 "aas --help"
check "help documents exit codes" grep -q 'Exit status' <<<"$OUT"
for c in create ls get exec cp files expose unexpose extend network rm usage account login fork pause resume history e2b metrics; do
	run "$c" --help; expect_rc 0 "aas $c --help"
	check "aas $c --help prints usage" grep -q "^usage: aas $c" <<<"$OUT"
done
run; expect_rc 2 "no command"
run frobnicate; expect_rc 2 "unknown command"; one_line_err "unknown command"
run ls --bogus; expect_rc 2 "unknown option"; one_line_err "unknown option"
run create --timeout 5x; expect_rc 2 "bad duration"
run create --metadata team; expect_rc 2 "--metadata without '='"; one_line_err "--metadata without '='"
run create -e =x; expect_rc 2 "--env without a name"; one_line_err "--env without a name"
run create --env; expect_rc 2 "--env without a value"
run get; expect_rc 2 "get without id"
run exec sbx-x; expect_rc 2 "exec without command"
run cp a b; expect_rc 2 "cp local to local"
run fork; expect_rc 2 "fork without id"
run fork sbx-x -n 11; expect_rc 2 "fork: count past 10"; one_line_err "fork count"
run fork sbx-x -n two; expect_rc 2 "fork: count not a number"
run pause; expect_rc 2 "pause without id"
run resume sbx-x sbx-y; expect_rc 2 "resume: two ids"
run history; expect_rc 2 "history without id"
run history sbx-x -n 0; expect_rc 2 "history: -n 0"; one_line_err "history count"
run history sbx-x -n 501; expect_rc 2 "history: -n past 500"
run expose sbx-x 70000; expect_rc 2 "bad port"
run unexpose sbx-x 0; expect_rc 2 "unexpose: bad port"
run unexpose sbx-x; expect_rc 2 "unexpose without a port"
run run; expect_rc 2 "run without id"; one_line_err "run without id"
run run sbx-x --language python --context c1 -; expect_rc 2 "run: --language with --context"; one_line_err "run: both"
run run sbx-x --timeout 5x -; expect_rc 2 "run: bad timeout"
run run sbx-x --timeout 2h -; expect_rc 2 "run: timeout past 1h"; one_line_err "run: timeout past 1h"
run run sbx-x a.py b.py; expect_rc 2 "run: two files"
run run sbx-x -e NOEQUALS -; expect_rc 2 "run: -e without ="; one_line_err "run: -e without ="
run run --help; expect_rc 0 "run --help"
check "run --help names --out-dir" grep -q -- '--out-dir DIR' <<<"$OUT"

# ---- no key, wrong key, server down ----
run --url "$BASE" ls; expect_rc 3 "no key"; one_line_err "no key"
check "no key says what to do" grep -q 'aas login' <<<"$ERR"
run --url "$BASE" --key aas_sk_wrong ls; expect_rc 3 "wrong key"; one_line_err "wrong key"
check "wrong key says what to do" grep -q 'AAS_API_KEY' <<<"$ERR"
# A port nothing listens on: bind one and let it go.
DEAD=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
run --url "http://127.0.0.1:${DEAD}" --key "$KEY" ls; expect_rc 5 "server down"; one_line_err "server down"

# ---- flags > environment ----
export AAS_API_KEY="$KEY" AAS_BASE_URL="$BASE"
run --key aas_sk_wrong ls; expect_rc 3 "--key beats AAS_API_KEY"

# ---- e2b: the environment for E2B's SDKs, with the key in E2B's shape ----
run e2b extra; expect_rc 2 "e2b takes no operand"
run --key aas_sk_wrong e2b; expect_rc 3 "e2b: a key not in a key's shape"; one_line_err "e2b bad key"
run --key aas_sk_0123456789012345678901234567890123456789abc e2b; expect_rc 3 "e2b: a key the server does not know"
check "e2b prints nothing for an unknown key" test -z "$OUT"
run e2b; expect_rc 0 "aas e2b"
check "e2b prints three exports" test "$(grep -c '^export E2B_' <<<"$OUT")" = 3
E2B_KEY=$(sed -n "s/^export E2B_API_KEY='\(e2b_[0-9a-f]*\)'$/\1/p" <<<"$OUT")
check "e2b's key is the E2B spelling of ours" test "$E2B_KEY" = "$(printf '%s' "$KEY" | "$SERVER" e2b-key)"
check "e2b's API URL is the server's /e2b" grep -qx "export E2B_API_URL='${BASE}/e2b'" <<<"$OUT"
check "e2b's sandbox URL is the server's /e2b-sandbox" grep -qx "export E2B_SANDBOX_URL='${BASE}/e2b-sandbox'" <<<"$OUT"
# What it prints works: the E2B face takes the key.
check "the printed key lists sandboxes on the E2B face" \
	curl -sf -H "X-API-KEY: ${E2B_KEY}" "${BASE}/e2b/v2/sandboxes" -o /dev/null
run --key "$E2B_KEY" e2b --json; expect_rc 0 "e2b given a key already in E2B's shape"
expect_jq .E2B_API_KEY "$E2B_KEY" "e2b --json keeps an E2B-shaped key"
expect_jq .E2B_SANDBOX_URL "${BASE}/e2b-sandbox" "e2b --json sandbox URL"
run --url "http://127.0.0.1:${DEAD}" ls; expect_rc 5 "--url beats AAS_BASE_URL"

# ---- create, ls, get ----
run create --size small --timeout 15m; expect_rc 0 create
SB=$OUT
check "create prints only an id" grep -Eq '^sbx-[a-z0-9-]+$' <<<"$SB"
run create --json --timeout 90; expect_rc 0 "create --json"
SB2=$(jout .id); expect_jq .status ready "create --json status"
expect_jq .size small "create --json size"
run create --size enormous; expect_rc 2 "unknown size is rejected"; one_line_err "unknown size"
run ls; expect_rc 0 ls
check "ls has a header" grep -q '^ID *STATUS *SIZE *CREATED *EXPIRES *COST' <<<"$OUT"
check "ls lists newest first" test "$(sed -n 2p <<<"$OUT" | awk '{print $1}')" = "$SB2"
check "ls prints money" grep -Eq '\$[0-9]+\.[0-9]{6}( |$)' <<<"$OUT" # exact, six places; a second's billing may have passed
run ls --json; expect_rc 0 "ls --json"; expect_jq 'length' 2 "ls --json count"; expect_jq '.[0].id' "$SB2" "ls --json order"
run get "$SB"; expect_rc 0 get
check "get shows the id" grep -q "^id: *$SB" <<<"$OUT"
run get "$SB" --json; expect_jq .id "$SB" "get --json id"; expect_jq '.image | type' string "get --json image is text, as in REST"
# Money is exact: the decimal string is the integer micro-dollars, to the last digit
# (a real VM has run a few seconds by now; the fake's clock has not moved).
MICRO=$(jq -r .cost_usd_micro <<<"$OUT")
check "get --json cost is whole micro-dollars" grep -Eq '^[0-9]+$' <<<"$MICRO"
check "get --json cost string equals the micro-dollars" \
	test "$(jq -r .cost_usd <<<"$OUT")" = "$(printf '%d.%06d' $((MICRO / 1000000)) $((MICRO % 1000000)))"
run get sbx-doesnotexist; expect_rc 4 "unknown id"; one_line_err "unknown id"

# ---- exec ----
run exec "$SB" -- echo hello; expect_rc 0 exec; expect_out hello "exec stdout"
run exec "$SB" -- exit 7; expect_rc 7 "exec exits with the command's code"
run exec "$SB" -- no-such-command; expect_rc 127 "exec 127"
check "exec stderr goes to stderr" grep -q 'not found' <<<"$ERR"
run exec "$SB" --cwd /tmp -- pwd; expect_out /tmp "exec --cwd"
# A real guest's cd needs the directory (the fake driver's exec has no directories).
"$AAS" exec "$SB" -- mkdir -p /workspace/src >/dev/null 2>&1 || true
run exec "$SB" --cwd src -- pwd; expect_out /workspace/src "exec --cwd relative: under /workspace, as a terminal's"
run exec "$SB" -e GREETING=hi -e 'X=a b' -- env; expect_rc 0 "exec -e"
check "exec -e passes env" grep -qx 'X=a b' <<<"$OUT"
printf 'from stdin' | "$AAS" exec "$SB" -- cat >"${WORK}/out" 2>"${WORK}/err"; RC=$?
expect_rc 0 "exec stdin"; check "exec stdin passed" test "$(cat "${WORK}/out")" = "from stdin"
run exec "$SB" --json -- exit 7; expect_rc 7 "exec --json exit code"; expect_jq .exit_code 7 "exec --json"
expect_jq .status exited "exec --json status"
run exec sbx-doesnotexist -- echo hi; expect_rc 4 "exec unknown id"
run exec "$SB" --timeout 2 -- sleep 10; expect_rc 124 "exec timeout"
# Output as it comes: the command's first line is printed while it still runs (it runs until
# cancelled through the API, which only happens once that line is there). The wait is under the
# server's 15 s keepalive, which would let a held line out at last.
if [ -n "$IMAGES" ]; then TICK=(sh -c 'echo tick; sleep 600'); else TICK=(tick); fi
"$AAS" exec "$SB" -- "${TICK[@]}" </dev/null >"${WORK}/live.out" 2>"${WORK}/live.err" &
LIVE=$!
PIDS+=("$LIVE")
UNTIL=$((SECONDS + 10))
while ((SECONDS < UNTIL)); do grep -q tick "${WORK}/live.out" && break; sleep 0.1; done
check "exec prints while the command runs" grep -qx tick "${WORK}/live.out"
check "exec still runs" kill -0 "$LIVE"
for x in $(curl -s -H "Authorization: Bearer ${KEY}" "${BASE}/v1/sandboxes/${SB}/executions?running=true" | jq -r '.executions[].execution_id'); do
	curl -s -o /dev/null -X POST -H "Authorization: Bearer ${KEY}" "${BASE}/v1/executions/${x}/cancel"
done
wait "$LIVE"; RC=$?; ERR=$(cat "${WORK}/live.err")
expect_rc 5 "a cancelled exec could not run to its end"

# Ctrl-C: a real SIGINT to aas while the command runs. The first reaches the command's process
# group (a sleep dies of it: 128+2); one it ignores is followed by a second, which cancels it.
# SIGINT is set back to its default for aas: a shell without job control has it ignored in `&` jobs.
if [ -n "$IMAGES" ]; then SLEEP=(sleep 600); NOINT=(sh -c "trap '' INT; sleep 600"); else SLEEP=(wait); NOINT=(wait-noint); fi
running_exe() { # the id of the sandbox's one running execution, once there is one
	local x
	for _ in $(seq 1 600); do
		x=$(curl -s -H "Authorization: Bearer ${KEY}" "${BASE}/v1/sandboxes/${SB}/executions?running=true" | jq -r '.executions[0].execution_id // empty')
		[ -n "$x" ] && { echo "$x"; return; }
		sleep 0.1
	done
}
exe_get() { curl -s -H "Authorization: Bearer ${KEY}" "${BASE}/v1/executions/$1" | jq -r "$2"; }
env --default-signal=INT "$AAS" exec "$SB" -- "${SLEEP[@]}" </dev/null >"${WORK}/int.out" 2>"${WORK}/int.err" &
LIVE=$!; PIDS+=("$LIVE")
X=$(running_exe); check "the command runs before Ctrl-C" test -n "$X"
kill -INT "$LIVE"
wait "$LIVE"; RC=$?; ERR=$(cat "${WORK}/int.err")
expect_rc 130 "Ctrl-C: aas exits 130"
check "Ctrl-C: the command died of SIGINT" test "$(exe_get "$X" '.status + "/" + (.exit_code|tostring)')" = "exited/130"
env --default-signal=INT "$AAS" exec "$SB" -- "${NOINT[@]}" </dev/null >"${WORK}/int.out" 2>"${WORK}/int.err" &
LIVE=$!; PIDS+=("$LIVE")
X=$(running_exe); check "the INT-deaf command runs before Ctrl-C" test -n "$X"
# Signals do not queue: Ctrl-C again until aas says it cancels (a third would only make it leave sooner).
for _ in $(seq 1 100); do
	kill -INT "$LIVE" 2>/dev/null || break
	sleep 0.3
	grep -q cancelling "${WORK}/int.err" && break
done
wait "$LIVE"; RC=$?; ERR=$(cat "${WORK}/int.err")
for _ in $(seq 1 100); do [ "$(exe_get "$X" .status)" = running ] || break; sleep 0.1; done
expect_rc 130 "second Ctrl-C: aas exits 130"
check "second Ctrl-C cancelled the command" test "$(exe_get "$X" '.status + "/" + (.error | split(":")[0])')" = "failed/cancelled"
check "second Ctrl-C says so" grep -q "cancelling ${X}" <<<"$ERR"

# ---- history: the commands above, newest first ----
run history "$SB" -n 3; expect_rc 0 "history -n 3"
check "history: a header and three rows" test "$(printf '%s\n' "$OUT" | wc -l)" = 4
check "history: the newest first (the second Ctrl-C's, failed)" grep -q '^exe-[^ ]* *failed ' <<<"$(sed -n 2p <<<"$OUT")"
run history "$SB" --all --json; expect_rc 0 "history --all --json"
expect_jq '[.[] | select(.command == "echo hello")] | length' 1 "history --json: the first command, whole"
expect_jq '[.[] | select(.command == "exit 7")] | .[0].exit_code' 7 "history --json: its exit code"
check "history --all has every command run" test "$(jq length <<<"$OUT")" -ge 10
run history sbx-doesnotexist; expect_rc 4 "history: unknown sandbox"

# ---- metrics: the running sandbox's samples (at least the one taken on demand) ----
run metrics "$SB"; expect_rc 0 "metrics"
check "metrics: a header and at least one row" test "$(printf '%s\n' "$OUT" | wc -l)" -ge 2
check "metrics: the columns" grep -q '^TIME .*CPU .*MEMORY MiB' <<<"$OUT"
run metrics "$SB" --json; expect_rc 0 "metrics --json"
expect_jq '.metrics[-1].vcpus >= 1' true "metrics --json: vcpus"
expect_jq '.metrics[-1].memory_used <= .metrics[-1].memory_total' true "metrics --json: used within total"
run metrics "$SB" --from yesterday-ish; expect_rc 2 "metrics: bad time"
run metrics "$SB" -n 0; expect_rc 2 "metrics: -n 0"
run metrics sbx-doesnotexist; expect_rc 4 "metrics: unknown sandbox"

# ---- cp both ways, binary ----
head -c 300000 /dev/urandom >"${WORK}/bin"; printf '\0\0\377\0end' >>"${WORK}/bin"
run cp "${WORK}/bin" "${SB}:/workspace/data/blob.bin"; expect_rc 0 "cp up"
run cp "${SB}:/workspace/data/blob.bin" "${WORK}/back.bin"; expect_rc 0 "cp down"
check "cp round trip is byte-equal" cmp -s "${WORK}/bin" "${WORK}/back.bin"
"$AAS" cp - "${SB}:/workspace/data/stdin.bin" <"${WORK}/bin" 2>"${WORK}/err"; RC=$?; expect_rc 0 "cp from stdin"
"$AAS" cp "${SB}:/workspace/data/stdin.bin" - >"${WORK}/stdout.bin" 2>"${WORK}/err" </dev/null; RC=$?; expect_rc 0 "cp to stdout"
check "cp via stdin/stdout is byte-equal" cmp -s "${WORK}/bin" "${WORK}/stdout.bin"
mkdir -p "${WORK}/dir"
run cp "${WORK}/bin" "${SB}:/workspace/data/"; expect_rc 0 "cp into a directory"
run cp "${SB}:/workspace/data/bin" "${WORK}/dir"; expect_rc 0 "cp down into a directory"
check "cp into a local directory keeps the name" cmp -s "${WORK}/bin" "${WORK}/dir/bin"
run cp "${SB}:/workspace/nope" "${WORK}/nope"; expect_rc 4 "cp missing remote file"
check "failed cp leaves nothing" test ! -e "${WORK}/nope"
# Not found names what is missing: the path in a sandbox that exists, the id otherwise.
one_line_err "cp missing remote file"
check "cp missing remote file says the path is missing" grep -q "no such file or directory.*aas files" <<<"$ERR"
check "cp missing remote file does not blame the id" grep -vq "check the id" <<<"$ERR"
run cp "sbx-doesnotexist:/workspace/x" "${WORK}/nope"; expect_rc 4 "cp from an unknown id"
check "cp from an unknown id points at the id" grep -q "check the id" <<<"$ERR"
run cp "${WORK}/missing" "${SB}:/workspace/x"; expect_rc 4 "cp missing local file"
# The guest's unprivileged user: permission denied is exit 1 with what to do, not a server failure (5).
run cp "${WORK}/bin" "${SB}:/etc/x"; expect_rc 1 "cp into /etc"; one_line_err "cp into /etc"
check "cp into /etc says permission denied" grep -q "permission denied" <<<"$ERR"
run cp "${SB}:/etc/shadow" "${WORK}/shadow"; expect_rc 1 "cp from /etc/shadow"
check "cp from /etc/shadow says permission denied" grep -q "permission denied" <<<"$ERR"
run cp "${WORK}/bin" "${SB}:/workspace/$(printf 'n%.0s' $(seq 1 300))"; expect_rc 2 "cp to a 300-byte name"
check "a 300-byte name is named too long" grep -q "at most 255" <<<"$ERR"

# ---- files ----
run files "$SB"; expect_rc 0 files
check "files shows the root" grep -q '^/workspace' <<<"$OUT"
check "files shows a file" grep -q 'blob.bin' <<<"$OUT"
run files "$SB" /workspace --json; expect_rc 0 "files --json"; expect_jq .root /workspace "files --json root"
check "files --json has the file" test "$(jout '[.entries[] | select(.path == "/workspace/data/blob.bin")] | length')" = 1
# The REST FileList: octal text modes and modified_at, not 420 and "mtime".
expect_jq '[.entries[] | select(.path == "/workspace/data/blob.bin")][0] | (.mode | test("^[0-7]{4}$")) and has("modified_at")' true "files --json mode and modified_at as REST"

# ---- expose, extend ----
run expose "$SB" 8000; expect_rc 0 expose
check "expose prints a URL with the exposure's own name" grep -Eq '^https?://[a-z2-7]{26}\.' <<<"$OUT"
URL1=$OUT
run expose "$SB" 8000 --json; expect_jq .port 8000 "expose --json port"; expect_jq .url "$URL1" "expose again: the same URL"
run get "$SB" --json; expect_jq '.ports[0].port' 8000 "get shows the exposed port"
run unexpose "$SB" 8000; expect_rc 0 unexpose
check "unexpose says so" grep -q "port 8000 is not exposed" <<<"$OUT"
run get "$SB" --json; expect_jq '.ports | length' 0 "unexposed: get shows no port"
run unexpose "$SB" 8000 --json; expect_rc 0 "unexpose again"; expect_jq .exposed false "unexpose --json"
run unexpose sbx-doesnotexist 8000; expect_rc 4 "unexpose: unknown sandbox"
run expose "$SB" 8000; check "exposed again: a new URL" test "$OUT" != "$URL1"
run get "$SB" --json; expect_jq '.ports[0].port' 8000 "get shows the exposed port again"
EXP=$(jout .expires_at)
run extend "$SB" 10m; expect_rc 0 extend
check "extend prints the expiry" grep -q "^$SB expires at" <<<"$OUT"
run extend "$SB" 1m --json; expect_rc 0 "extend --json"
check "extend moved the expiry" test "$(jout .expires_at)" != "$EXP"
run extend "$SB" 400h; expect_rc 2 "extend past the limit is a bad argument"; one_line_err "extend limit"
run extend "$SB" soon; expect_rc 2 "extend bad duration"

# ---- network policies: on create, shown, changed at runtime ----
run get "$SB"; check "get shows the network" grep -Eq '^network: +(isolated|internet)$' <<<"$OUT"
check "get shows the denied counters" grep -Eq '^  denied: +0 connections, 0 lookups$' <<<"$OUT"
if [ -z "$IMAGES" ]; then
	run create --allow API.Example.com --allow 203.0.113.0/24 --deny '*.ads.example.com' --timeout 5m --json
	expect_rc 0 "create with --allow/--deny"
	NSB=$(jout .id)
	expect_jq '.network.mode' policy "create --allow makes a policy"
	expect_jq '.network.allow | join(" ")' "api.example.com 203.0.113.0/24" "allow rules normalised"
	run network "$NSB"; expect_rc 0 "network shows the policy"
	check "network: mode" grep -q '^network: *policy$' <<<"$OUT"
	check "network: allow" grep -q '^  allow: *api.example.com 203.0.113.0/24$' <<<"$OUT"
	check "network: deny" grep -q '^  deny: *\*.ads.example.com$' <<<"$OUT"
	run network "$NSB" --allow pypi.org --json; expect_rc 0 "network --allow changes it"
	expect_jq '.allow | join(" ")' pypi.org "the new allow list"; expect_jq '.deny | length' 0 "deny replaced, not merged"
	run network "$NSB" --isolated; expect_rc 0 "network --isolated"
	check "now isolated" grep -q '^network: *isolated$' <<<"$OUT"
	run network "$NSB" --allow 10.1.2.3/8; expect_rc 2 "a bad rule is a bad argument"; one_line_err "bad rule"
	check "the error names the rule" grep -q '10.1.2.3/8' <<<"$ERR"
	run rm "$NSB"; expect_rc 0 "rm the policy sandbox"
	run network "$NSB" --internet; expect_rc 1 "network of a destroyed sandbox"
	NET_SANDBOXES=1
else
	# The real server here runs every QEMU under one uid (its state directory is private to
	# this test), so it refuses a policy and says why; vm.egress enforces policies on real VMs.
	run create --allow api.example.com --timeout 5m; expect_rc 1 "a policy the server cannot enforce"
	one_line_err "policy refused"
	check "the refusal says why" grep -q 'network policies' <<<"$ERR"
	NET_SANDBOXES=0
fi
run create --network internet --allow example.com; expect_rc 2 "rules with internet"; one_line_err "rules with internet"
run create --network everywhere; expect_rc 2 "unknown --network"
run create $(for n in $(seq 1 65); do printf -- '--deny h%s.example ' "$n"; done); expect_rc 2 "65 --deny rules"
check "the bound is named" grep -q 'at most 64 --deny rules' <<<"$ERR"
run network; expect_rc 2 "network without id"
run network sbx-doesnotexist; expect_rc 4 "network: unknown sandbox"

# ---- account, usage ----
run account; expect_rc 0 account
check "account shows money exactly" grep -q '^credit: *\$5\.000000$' <<<"$OUT"
check "account shows the balance" grep -Eq '^balance: *\$[0-9]+\.[0-9]{6}$' <<<"$OUT"
run account --json; expect_jq .credit_usd_micro 5000000 "account --json credit"; expect_jq .credit_usd 5.000000 "account --json usd"
expect_jq '.balance_usd_micro + .spent_usd_micro == .credit_usd_micro' true "account --json balance = credit - spent"
expect_jq '.sizes[0].name' small "account --json sizes"
expect_jq '.limits.default_timeout > 0 and .limits.max_timeout > 0' true "account --json limits as REST names them"
run usage; expect_rc 0 usage; check "usage has a total" grep -q '^TOTAL' <<<"$OUT"
run usage --json --from 2020-01-01 --to 2100-01-01T00:00:00Z; expect_rc 0 "usage --json"
expect_jq '.sandboxes | length' $((2 + NET_SANDBOXES)) "usage --json sandboxes (as GET /v1/usage; the network one too)"; expect_jq '([.sandboxes[].cost_usd_micro] | add) == .total_usd_micro' true "usage --json total is the sum"
run usage --from yesterday; expect_rc 2 "usage bad time"
check "usage bad time says what a time is" grep -q "RFC 3339" <<<"$ERR"
run usage --json --from 2020-01-01 --to 2020-01-31; expect_rc 0 "usage with dates"
expect_jq .to 2020-02-01T00:00:00.000Z "usage --to DATE includes that day"
run usage --json --from 1577836800 --to 2020-01-01T01:00; expect_rc 0 "usage with seconds"
expect_jq .from 2020-01-01T00:00:00.000Z "usage --from unix seconds"
expect_jq .to 2020-01-01T01:00:00.000Z "usage --to without seconds or offset is UTC"

# ---- credit: a poor account cannot create ----
POOR=$(admin account create --name poor --credit 0 2>/dev/null)
run --key "$POOR" create; expect_rc 6 "no credit"; one_line_err "no credit"

# ---- rm ----
run rm "$SB" "$SB2"; expect_rc 0 rm
check "rm prints both" test "$(grep -c destroyed <<<"$OUT")" = 2
run ls; expect_rc 0 "ls after rm"; check "ls hides destroyed" test -z "$OUT"
run ls --all --json; expect_jq '[.[] | select(.status == "destroyed")] | length' $((2 + NET_SANDBOXES)) "ls --all shows destroyed (the network one too)"
run rm sbx-doesnotexist; expect_rc 4 "rm unknown id"
# A command that cannot run at all exits 5 (docs/cli.md), never the 1 a command returns for itself.
run exec "$SB" -- true; expect_rc 5 "exec on a destroyed sandbox"; one_line_err "exec on a destroyed sandbox"

# ---- fork, pause, resume (the fake driver's snapshots; server.fork.vm runs them on real VMs) ----
if [ -z "$IMAGES" ]; then
	run create --timeout 10m; expect_rc 0 "create a sandbox to fork"; FSB=$OUT
	run fork "$FSB" -n 2; expect_rc 0 "fork -n 2"
	check "fork prints two ids" test "$(printf '%s\n' "$OUT" | grep -c '^sbx-')" = 2
	KIDS=$OUT
	KID=$(printf '%s\n' "$KIDS" | head -n1)
	run get "$KID" --json; expect_jq .parent_id "$FSB" "a child names its parent"
	run fork "$FSB" --json; expect_rc 0 "fork --json"; expect_jq '.sandboxes | length' 1 "fork --json: one child"
	KIDS="$KIDS $(jout '.sandboxes[0].id')"
	run pause "$KID"; expect_rc 0 pause
	check "pause says paused" grep -q "^$KID paused, expires at" <<<"$OUT"
	run pause "$KID"; expect_rc 1 "pause a paused sandbox"; one_line_err "pause twice"
	check "pause twice says why" grep -q "paused" <<<"$ERR"
	run exec "$KID" -- echo hi; check "exec in a paused sandbox fails" test "$RC" != 0
	run fork "$KID"; expect_rc 1 "fork a paused sandbox"; one_line_err "fork paused"
	run resume "$KID" --json; expect_rc 0 "resume --json"; expect_jq .status ready "resumed: ready"
	run resume "$KID"; expect_rc 1 "resume a running sandbox"; one_line_err "resume running"
	# No room for it on the host (the fake's next restore refused for memory): busy, and when to try again.
	run exec "$KID" -- busy-restores 1; expect_rc 0 "the fake's next restore refused for room"
	run pause "$KID"; expect_rc 0 "pause for a busy resume"
	run resume "$KID"; expect_rc 5 "a busy resume"; one_line_err "busy resume"
	check "a busy resume says when to try again" grep -q "try again in 10 s" <<<"$ERR"
	check "and not that the server failed" bash -c "! grep -q 'server failed; try again later' <<<'$ERR'"
	run resume "$KID"; expect_rc 0 "resumed once there is room"
	run pause sbx-doesnotexist; expect_rc 4 "pause: unknown sandbox"
	# shellcheck disable=SC2086 # the ids, one word each
	run rm "$FSB" $KIDS; expect_rc 0 "rm the parent and its children"
fi

# ---- create's metadata and envs: shown by get, in every command and terminal (the fake's shell answers echo $NAME) ----
if [ -z "$IMAGES" ]; then
	run create --metadata team=blue --metadata 'run id=7' -e 'GREETING=hi there' --env LEVEL=3 --json
	expect_rc 0 "create --metadata --env"; MSB=$(jout .id)
	expect_jq '.metadata | tojson' '{"run id":"7","team":"blue"}' "create --metadata: the labels"
	expect_jq '.envs | tojson' '{"GREETING":"hi there","LEVEL":"3"}' "create --env: the variables"
	run exec "$MSB" -e LEVEL=4 -- env # the fake's env: the variables a command was given
	expect_out "$(printf 'GREETING=hi there\nLEVEL=4')" "a command starts with the sandbox's envs, exec -e winning"
	OUT=$(printf 'echo $GREETING\nexit\n' | "$AAS" shell "$MSB" 2>&1); RC=$?
	expect_rc 0 "aas shell, piped"
	check "a terminal starts with them too: $OUT" grep -q '^hi there' <<<"$(tr '\r' '\n' <<<"$OUT")"
	# shell --cwd and -e: a terminal's directory (relative: under /workspace) and variables over the sandbox's.
	OUT=$(printf 'pwd\necho $GREETING\necho $MODE\nexit 4\n' |
		"$AAS" shell "$MSB" --cwd src -e 'GREETING=hello' --env MODE=fast 2>&1); RC=$?
	expect_rc 4 "aas shell --cwd -e, piped: the shell's status"
	OUT=$(tr -d '\r' <<<"$OUT")
	check "shell --cwd relative is under /workspace: $OUT" grep -qx '/workspace/src' <<<"$OUT"
	check "shell -e wins over the sandbox's env: $OUT" grep -qx 'hello' <<<"$OUT"
	check "shell --env sets another: $OUT" grep -qx 'fast' <<<"$OUT"
	OUT=$(printf 'pwd\nexit\n' | "$AAS" shell "$MSB" --cwd /tmp 2>&1); RC=$?
	expect_rc 0 "aas shell --cwd absolute"
	check "shell --cwd absolute as given: $OUT" grep -qx '/tmp' <<<"$(tr -d '\r' <<<"$OUT")"
	run shell "$MSB" -e NOEQUALS; expect_rc 2 "shell -e without ="; one_line_err "shell -e without ="
	check "it says NAME=VALUE" grep -q 'NAME=VALUE' <<<"$ERR"
	run shell "$MSB" -e '1X=y'; expect_rc 2 "shell -e with a name no shell takes"; one_line_err "shell bad -e name"
	run shell "$MSB" --cwd; expect_rc 2 "shell --cwd without a value"
	run shell --help; expect_rc 0 "shell --help"
	check "shell --help names --cwd and --env" grep -q -- '--cwd DIR.*' <<<"$OUT"
	run create --env '1X=y'; expect_rc 2 "an --env name no shell takes"; one_line_err "bad --env name"
	check "it names the envs" grep -q 'envs' <<<"$ERR"
	run create --metadata "k=$(head -c 1025 /dev/zero | tr '\0' x)"; expect_rc 2 "a --metadata value over 1024 bytes"
	check "it says the bound" grep -q '1024' <<<"$ERR"
	run rm "$MSB"; expect_rc 0 "rm the sandbox with metadata"
fi

# ---- aas run: code in a code context (the guest's code server is code_guest.py's double) ----
if [ -z "$IMAGES" ]; then
	run create --json; expect_rc 0 "create for run"; CSB=$(jout .id)
	printf '1+1' >"${WORK}/value.py"
	run run "$CSB" "${WORK}/value.py"; expect_rc 0 "run a file"; expect_out "1+1" "run prints the main result's text"
	OUT=$(printf 'print hello' | "$AAS" run "$CSB" 2>"${WORK}/err"); RC=$?
	expect_rc 0 "run from stdin"; expect_out "hello" "run streams stdout (code from stdin)"
	OUT=$(printf 'x = 41' | "$AAS" run "$CSB" - 2>"${WORK}/err"); RC=$?; expect_rc 0 "run -: set a variable"
	OUT=$(printf 'x' | "$AAS" run "$CSB" --language javascript 2>"${WORK}/err"); RC=$?; ERR=$(cat "${WORK}/err")
	expect_rc 1 "run: an error exits 1"
	check "run: the error's name and value on stderr: $ERR" grep -q "NameError: name 'x' is not defined" <<<"$ERR"
	printf 'boom' >"${WORK}/boom.py"
	run run "$CSB" "${WORK}/boom.py"; expect_rc 1 "run: a raised error exits 1"
	check "run: stderr streamed" grep -q '^about to fail$' <<<"$ERR"
	check "run: the traceback on stderr" grep -q '^Traceback (most recent call last):' <<<"$ERR"
	check "run: its name and value" grep -q 'ValueError: boom' <<<"$ERR"
	mkdir -p "${WORK}/charts"; printf 'chart' >"${WORK}/chart.py"
	run run "$CSB" --out-dir "${WORK}/charts" "${WORK}/chart.py"; expect_rc 0 "run a chart"
	expect_out "${WORK}/charts/result-1.png" "run prints the path of the chart written"
	check "the chart is a PNG" test "$(head -c 8 "${WORK}/charts/result-1.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a
	run run "$CSB" --out-dir "${WORK}/charts" "${WORK}/chart.py"; expect_rc 0 "run a chart again"
	expect_out "${WORK}/charts/result-2.png" "a second chart takes the next number, the first kept"
	check "the first chart is still there" test -s "${WORK}/charts/result-1.png"
	run run "$CSB" --out-dir "${WORK}/nodir" "${WORK}/chart.py"; expect_rc 1 "run: an --out-dir that does not exist"
	check "it names the directory" grep -q 'nodir' <<<"$ERR"
	printf 'env' >"${WORK}/env.py"
	run run "$CSB" -e A=1 --env B=two "${WORK}/env.py"; expect_rc 0 "run -e"
	expect_out '{"A": "1", "B": "two"}' "run -e reaches the run"
	printf 'hang' >"${WORK}/hang.py"
	run run "$CSB" --timeout 1 "${WORK}/hang.py"; expect_rc 124 "run: a timeout exits 124"
	check "run: what came before the timeout" grep -qx tick <<<"$OUT"
	run run "$CSB" --context nosuch "${WORK}/value.py"; expect_rc 4 "run: an unknown context"
	# --json: the execution as one object (the REST API's shape); nothing streamed, no file written.
	run run "$CSB" --json "${WORK}/chart.py"; expect_rc 0 "run --json"
	expect_jq .status done "run --json: its status"
	expect_jq '.results | length' 1 "run --json: its one result"
	check "run --json: the chart in base64, a PNG" test "$(jout '.results[0].formats["image/png"]' | base64 -d | head -c 4 | tail -c 3)" = PNG
	check "run --json: no file written" test ! -e "${PWD}/result-1.png"
	run run "$CSB" --json "${WORK}/boom.py"; expect_rc 1 "run --json: a raised error exits 1"
	expect_jq .error.name ValueError "run --json: the error's name"
	expect_jq .stderr "about to fail" "run --json: stderr in the object"
	check "run --json: the traceback is in the object, not on stderr" test "$(grep -c Traceback <<<"$ERR")" = 0
	run run "$CSB" --json --timeout 1 "${WORK}/hang.py"; expect_rc 124 "run --json: a timeout exits 124"
	expect_jq .status timeout "run --json: timed out"
	run run "$CSB" --json --out-dir "${WORK}/charts" "${WORK}/chart.py"; expect_rc 2 "run: --json with --out-dir"
	one_line_err "run: --json with --out-dir"
	# Ctrl-C: a real SIGINT while the code prints; the run is cut (the double sees its connection close), the
	# context lives on, aas exits 130. SIGINT set back to its default, as for exec above.
	GUEST="http://127.0.0.1:$(cat "${WORK}/guest.port")"
	printf 'ticking' >"${WORK}/ticking.py"
	env --default-signal=INT "$AAS" run "$CSB" "${WORK}/ticking.py" </dev/null >"${WORK}/int.out" 2>"${WORK}/int.err" &
	LIVE=$!
	for _ in $(seq 1 300); do grep -q tick "${WORK}/int.out" && break; sleep 0.1; done
	kill -INT "$LIVE"
	wait "$LIVE"; RC=$?; ERR=$(cat "${WORK}/int.err")
	expect_rc 130 "run: Ctrl-C exits 130"
	check "run: Ctrl-C says the context lives on: $ERR" grep -q 'context and its variables live on' <<<"$ERR"
	for _ in $(seq 1 100); do [ "$(curl -s "${GUEST}/interrupts" | jq .ticking)" = 1 ] && break; sleep 0.1; done
	check "run: Ctrl-C cut the run in the guest" test "$(curl -s "${GUEST}/interrupts" | jq .ticking)" = 1
	# Ctrl-C in a run gone silent ("hang": one tick, then nothing): the remote client tells aas a tick
	# each second, so the cut does not wait for the run's next output or the server's keepalive (15 s).
	ALL=$(curl -s "${GUEST}/interrupts" | jq .all)
	env --default-signal=INT "$AAS" run "$CSB" "${WORK}/hang.py" </dev/null >"${WORK}/int.out" 2>"${WORK}/int.err" &
	LIVE=$!
	for _ in $(seq 1 300); do grep -q tick "${WORK}/int.out" && break; sleep 0.1; done
	kill -INT "$LIVE"
	wait "$LIVE"; RC=$?
	expect_rc 130 "run: Ctrl-C in a silent run exits 130"
	for _ in $(seq 1 100); do [ "$(curl -s "${GUEST}/interrupts" | jq .all)" = $((ALL + 1)) ] && break; sleep 0.1; done
	check "run: Ctrl-C cut the silent run in the guest" test "$(curl -s "${GUEST}/interrupts" | jq .all)" = $((ALL + 1))
	OUT=$(printf 'x' | "$AAS" run "$CSB" 2>"${WORK}/err"); RC=$?
	expect_rc 0 "run after Ctrl-C"; expect_out 41 "run: the context's variable outlived Ctrl-C"
	: >"${WORK}/empty.py"
	run run "$CSB" "${WORK}/empty.py"; expect_rc 2 "run: an empty file"; one_line_err "run: empty file"
	run run "$CSB" "${WORK}/missing.py"; expect_rc 2 "run: a file that cannot be read"; one_line_err "run: missing file"
	check "it names the file" grep -q 'missing.py' <<<"$ERR"
	run run "$CSB"; expect_rc 2 "run: nothing on stdin"
	run run sbx-nosuch "${WORK}/value.py"; expect_rc 4 "run: an unknown sandbox"
	run rm "$CSB"; expect_rc 0 "rm the sandbox code ran in"
fi

# ---- login: writes a 0600 config that later commands use ----
unset AAS_API_KEY AAS_BASE_URL
run login --key aas_sk_wrong --url "$BASE"; expect_rc 3 "login with a wrong key"
check "failed login writes nothing" test ! -e "${XDG_CONFIG_HOME}/aas/config"
printf '%s\n' "$KEY" | "$AAS" login --url "$BASE" >"${WORK}/out" 2>"${WORK}/err"; RC=$?
expect_rc 0 "login reading the key from stdin"
check "config written" test -f "${XDG_CONFIG_HOME}/aas/config"
check "config is 0600" test "$(stat -c %a "${XDG_CONFIG_HOME}/aas/config")" = 600
run account --json; expect_rc 0 "commands use the saved config"; expect_jq .name cli "saved config's account"
run login --key "$KEY" --url "$BASE" --json; expect_rc 0 "login --json"; expect_jq .url "$BASE" "login --json url"
AAS_API_KEY=aas_sk_wrong "$AAS" ls </dev/null >/dev/null 2>&1; RC=$?; expect_rc 3 "environment beats the config file"

finish
