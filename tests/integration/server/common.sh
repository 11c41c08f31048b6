# Shared helpers for the aas-server tests: start the real server binary on a
# free loopback port with its own state directory, talk to it with curl,
# and clean up (the server, helpers we started, temp files) whatever happens.
set -u
# The servers and helpers a test starts get stdin, stdout and stderr only (tests/fds.sh).
. "$(dirname "${BASH_SOURCE[0]}")/../../fds.sh"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/aas-server-test.XXXXXX")
PIDS=()
SERVER_PID=
FAILS=0
CHECKS=0

cleanup() {
	local rc=$?
	if [ -n "${SERVER_PID}" ] && declare -F before_stop >/dev/null; then before_stop; fi
	[ -n "${SERVER_PID}" ] && kill -TERM "${SERVER_PID}" 2>/dev/null && wait "${SERVER_PID}" 2>/dev/null
	for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done
	if [ "${FAILS}" -ne 0 ] || [ "$rc" -ne 0 ]; then
		echo "---- server log (tail) ----"; tail -n 150 "${WORK}/server.log" 2>/dev/null
	fi
	if declare -F after_stop >/dev/null; then after_stop; fi
	[ -n "${KEEP_WORK:-}" ] || rm -rf "${WORK}"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
pass() { CHECKS=$((CHECKS + 1)); }
check() { # check DESCRIPTION COMMAND...
	local what=$1; shift
	if "$@"; then pass; else fail "$what"; fi
}

# start_server BINARY [ARGS...]: starts it, sets BASE and PORT.
start_server() {
	local bin=$1; shift
	rm -f "${WORK}/port"
	"$bin" --listen 127.0.0.1:0 --port-file "${WORK}/port" --state-dir "${WORK}/state" "$@" \
		>>"${WORK}/server.log" 2>&1 &
	SERVER_PID=$!
	for _ in $(seq 1 300); do
		[ -s "${WORK}/port" ] && break
		kill -0 "${SERVER_PID}" 2>/dev/null || { echo "server exited early"; cat "${WORK}/server.log"; exit 1; }
		sleep 0.1
	done
	PORT=$(cat "${WORK}/port")
	BASE="http://127.0.0.1:${PORT}"
}

stop_server() {
	kill -TERM "${SERVER_PID}"
	wait "${SERVER_PID}"
	local rc=$?
	SERVER_PID=
	return $rc
}

# req METHOD PATH [curl args...]: sets STATUS, BODY (and HEADERS).
req() {
	local method=$1 path=$2; shift 2
	local out
	out=$(curl -sS -X "$method" -o "${WORK}/body" -D "${WORK}/headers" -w '%{http_code}' "$@" "${BASE}${path}")
	STATUS=$out
	BODY=$(cat "${WORK}/body")
	HEADERS=$(cat "${WORK}/headers")
	record_response "$method" "$path" "$@"
}

# With AAS_TEST_OPENAPI (server/openapi.json), every response req() gets from the
# API is kept, and finish() checks each body against the schema its operation
# documents. A request with a Host of its own went to a preview, not the API.
RESPONSES=0
record_response() { # record_response METHOD PATH [curl args...]
	[ -n "${AAS_TEST_OPENAPI:-}" ] || return 0
	local ctype= a line
	for a in "${@:3}"; do
		case "$a" in [Hh]ost:*) return 0 ;; esac
	done
	# Builtins but cp: tests poll with req(), and forks would slow their loops.
	while IFS= read -r line; do
		case "$line" in [Cc]ontent-[Tt]ype:*) ctype=${line#*:} ;; esac
	done <<<"$HEADERS"
	ctype=${ctype//[[:space:]]/}
	[ -d "${WORK}/responses" ] || mkdir -p "${WORK}/responses"
	# Named by the shell too: a req() in $(...) counts in a subshell of its own.
	RESPONSES=$((RESPONSES + 1))
	local n="${WORK}/responses/${BASHPID}-${RESPONSES}"
	printf '%s %s %s %s' "$1" "$2" "$STATUS" "$ctype" >"$n.meta"
	cp "${WORK}/body" "$n.body" 2>/dev/null || : >"$n.body"
}
check_responses() {
	[ -n "${AAS_TEST_OPENAPI:-}" ] && [ -d "${WORK}/responses" ] || return 0
	check "response bodies match openapi.json" \
		python3 "$(dirname "${BASH_SOURCE[0]}")/check_openapi.py" "${AAS_TEST_OPENAPI}" "${WORK}/responses"
}
# auth METHOD PATH [curl args...]: req with the current KEY.
auth() { local m=$1 p=$2; shift 2; req "$m" "$p" -H "Authorization: Bearer ${KEY}" "$@"; }

jqr() { printf '%s' "$BODY" | jq -r "$1"; }
expect_status() { # expect_status WANT DESCRIPTION
	if [ "$STATUS" = "$1" ]; then pass; else fail "$2: status $STATUS, want $1: $BODY"; fi
}
expect_json() { # expect_json JQ_EXPR WANT DESCRIPTION
	local got; got=$(jqr "$1")
	if [ "$got" = "$2" ]; then pass; else fail "$3: $1 = '$got', want '$2' (body: ${BODY:0:400})"; fi
}

finish() {
	check_responses
	echo "${CHECKS} checks passed, ${FAILS} failed"
	[ "${FAILS}" -eq 0 ]
}
