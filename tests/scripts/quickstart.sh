#!/usr/bin/env bash
# The quick start's promises, checked without a Release build, root or a change
# to this machine (scripts/quickstart builds, installs packages and edits
# /etc/nsswitch.conf; none of that is done here):
#
#   programs  every program the script builds (its --target line) is where the
#             script says it is (build/release/PATH), in this build's tree, and
#             runs: `--help` exits 0.
#   names     the script's own nsswitch edit (nsswitch_add_myhostname of
#             scripts/lib/common.sh) on copies: myhostname lands after "files"
#             on the hosts line, once, other lines untouched; a file it cannot
#             edit is refused, unchanged.
#   preview   a preview URL http://NAME.localhost:PORT/ of aas-server-fake (its
#             sandbox's port is a server of this test's) answers getent,
#             Python's urllib and Node's fetch. Where this machine resolves
#             *.localhost already, as they are; else, when libnss-myhostname is
#             installed and a mount namespace can be made, in one of this
#             test's own with a copy of /etc/nsswitch.conf edited as above
#             bound over it (the machine's file is never written); else SKIP,
#             saying why, once the two checks above passed.
#
# usage: quickstart.sh SOURCE_DIR BUILD_DIR AAS_SERVER_FAKE
set -euo pipefail
# The servers get stdin, stdout and stderr only (tests/fds.sh).
. "$(dirname "$0")/../fds.sh"
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
fake=$3
# shellcheck source=../../scripts/lib/common.sh
. "$src/scripts/lib/common.sh"

failures=0
check() { # check WHAT COMMAND...: run it; a failure is counted and named.
	local what=$1; shift
	if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; failures=$((failures + 1)); fi
}

work=$(mktemp -d "${TMPDIR:-/tmp}/aas-quickstart.XXXXXX")
pids=()
cleanup() {
	local p
	# A server stopped by TERM is waited for; its status (143) is no failure of the test's (set -e).
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- programs ----
script="$src/scripts/quickstart"
targets=$(sed -n 's/.*--target \(.*\) -- .*/\1/p' "$script")
check "the quick start builds aas-server, aas and aas-mcp (--target $targets)" \
	bash -c '[[ " $1 " == *" aas-server "* && " $1 " == *" aas "* && " $1 " == *" aas-mcp "* ]]' _ "$targets"
mapfile -t paths < <(grep -o 'build/release/[A-Za-z0-9_./-]*' "$script" | sort -u)
for t in $targets; do
	rel=
	for p in "${paths[@]}"; do [ "$(basename "$p")" = "$t" ] && rel=${p#build/release/}; done
	check "the quick start names where $t is" test -n "$rel"
	[ -n "$rel" ] || continue
	check "$rel is built (as $build/$rel)" test -x "$build/$rel"
	check "$rel --help runs" bash -c '"$1" --help >/dev/null' _ "$build/$rel"
done

# ---- names: the nsswitch edit, on copies ----
edit() { # edit BEFORE AFTER: the edit turns a file holding BEFORE into AFTER
	printf 'passwd:         files\n%s\nnetworks:       files\n' "$1" >"$work/ns"
	nsswitch_add_myhostname "$work/ns" >"$work/said" &&
		[ "$(cat "$work/ns")" = "$(printf 'passwd:         files\n%s\nnetworks:       files\n' "$2")" ] &&
		[ "$(cat "$work/said")" = added ]
}
check "myhostname after files" edit 'hosts:          files dns' 'hosts:          files myhostname dns'
check "after files at the end of the line" edit 'hosts: files' 'hosts: files myhostname'
check "after files, before mdns's action" edit 'hosts: files mdns4_minimal [NOTFOUND=return] dns' \
	'hosts: files myhostname mdns4_minimal [NOTFOUND=return] dns'
once() {
	printf 'hosts: files myhostname dns\n' >"$work/ns"
	[ -z "$(nsswitch_add_myhostname "$work/ns")" ] && [ "$(cat "$work/ns")" = 'hosts: files myhostname dns' ]
}
check "once: a file that has it is left as it is" once
refused() {
	printf 'hosts: dns\n' >"$work/ns"
	! nsswitch_add_myhostname "$work/ns" 2>"$work/err" >/dev/null && [ "$(cat "$work/ns")" = 'hosts: dns' ] &&
		grep -q 'by hand' "$work/err"
}
check "a hosts line without files is refused, unchanged, saying what to do" refused
if [ -r /etc/nsswitch.conf ]; then
	cp /etc/nsswitch.conf "$work/nsswitch.conf"
	check "this machine's nsswitch.conf, copied, gets myhostname" \
		bash -c '. "$1" && nsswitch_add_myhostname "$2" >/dev/null && grep -Eq "^hosts:.*[[:space:]]myhostname" "$2"' \
		_ "$src/scripts/lib/common.sh" "$work/nsswitch.conf"
fi

if [ "$failures" -ne 0 ]; then
	echo "$failures failed"
	exit 1
fi

# ---- preview: a preview URL answers every client ----
# Where this machine resolves the names already, run the clients as they are;
# else in a mount namespace of ours with the edited copy over /etc/nsswitch.conf.
run_clients=()
if getent hosts aas-quickstart-probe.localhost >/dev/null; then
	echo "this machine resolves *.localhost (myhostname is in its nsswitch.conf)"
elif ! python3 -c 'import ctypes; ctypes.CDLL("libnss_myhostname.so.2")' 2>/dev/null; then
	echo "SKIP: preview names: this machine does not resolve *.localhost and libnss-myhostname is not installed" \
		"(the quick start installs it: apt-get install libnss-myhostname); the programs and the nsswitch edit passed"
	exit 0
elif ! unshare --mount --map-root-user true 2>/dev/null; then
	echo "SKIP: preview names: this machine does not resolve *.localhost and no mount namespace can be made" \
		"here to try the edited nsswitch.conf in; the programs and the nsswitch edit passed"
	exit 0
else
	echo "this machine does not resolve *.localhost: the clients run with the edited copy of its nsswitch.conf"
	run_clients=(unshare --mount --map-root-user bash -c 'mount --bind "$1" /etc/nsswitch.conf && shift && exec "$@"'
		_ "$work/nsswitch.conf")
fi

# The sandbox's server: the fake driver's sandbox port N is this machine's 127.0.0.1:N.
mkdir -p "$work/site"
echo "quickstart preview $$" >"$work/site/index.html"
python3 - "$work/site" "$work/site-port" <<'PY' >"$work/site.log" 2>&1 &
import functools, http.server, sys
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
with open(sys.argv[2] + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
server.serve_forever()
PY
pids+=($!)
"$fake" --listen 127.0.0.1:0 --port-file "$work/port" --state-dir "$work/state" --preview-domain localhost \
	>"$work/server.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do
	[ -s "$work/port" ] && [ -s "$work/site-port" ] && break
	sleep 0.1
done
if ! [ -s "$work/port" ] || ! [ -s "$work/site-port" ]; then
	echo "FAIL: the server or the sandbox's server did not start"
	tail -n 20 "$work/server.log" "$work/site.log"
	exit 1
fi
base="http://127.0.0.1:$(cat "$work/port")"
# The quick start's own account step ([4/4]): a key printed by `account create`.
key=$("$fake" account create --state-dir "$work/state" --name quickstart --credit 5 2>>"$work/server.log")
api() { curl -sS -f -H "Authorization: Bearer $key" -H 'Content-Type: application/json' "$@"; }
id=$(api -X POST -d '{}' "$base/v1/sandboxes" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
url=$(api -X POST -d "{\"port\": $(cat "$work/site-port")}" "$base/v1/sandboxes/$id/ports" |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["url"])')
host=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.urlsplit(sys.argv[1]).hostname)' "$url")
check "the preview URL is a name under localhost ($url)" bash -c '[[ "$1" == *.localhost ]]' _ "$host"
want="quickstart preview $$"
check "getent resolves $host to loopback" \
	bash -c '"${@:2}" getent hosts "$1" | grep -Eq "^(127\.|::1 )"' _ "$host" "${run_clients[@]}"
check "Python's urllib reads the preview" bash -c '[ "$("${@:3}" python3 -c "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=20).read().decode().strip())" "$1")" = "$2" ]' \
	_ "$url" "$want" "${run_clients[@]}"
check "Node's fetch reads the preview" bash -c '[ "$("${@:3}" node -e "fetch(process.argv[1]).then((r) => r.text()).then((t) => console.log(t.trim()))" "$1")" = "$2" ]' \
	_ "$url" "$want" "${run_clients[@]}"
if [ "$failures" -ne 0 ]; then
	echo "$failures failed"
	tail -n 20 "$work/server.log"
	exit 1
fi
echo "all passed"
