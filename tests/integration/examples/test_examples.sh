#!/bin/bash
# The examples, run for real: the C quickstart (built in-tree) and the Python
# ctypes quickstart (through libsaas.so), each against a real aas-server with
# real VMs (the tiny image). Everything started here is stopped, pass or fail.
#
# usage: test_examples.sh AAS_SERVER EXAMPLE_BINARY LIBSAAS_SO PY_EXAMPLE|- IMAGE_DIR
. "$(dirname "$0")/../server/common.sh"
SERVER=$1 EXAMPLE=$2 LIBSAAS=$3 PYEXAMPLE=$4 IMAGES=$5
admin() { "$SERVER" "$@" --state-dir "${WORK}/state"; }
before_stop() {
	local ids
	ids=$(curl -s -H "Authorization: Bearer ${KEY:-}" "${BASE}/v1/sandboxes?status=active" | jq -r '.sandboxes[]?.id')
	for id in $ids; do curl -s -o /dev/null -X DELETE -H "Authorization: Bearer ${KEY}" "${BASE}/v1/sandboxes/${id}"; done
}
after_stop() { "$(dirname "$0")/../vm-cleanup" "${WORK}/state" >/dev/null 2>&1; mkdir -p "${WORK}"; }

[ -d "${IMAGES}/tiny" ] || { echo "no tiny image in ${IMAGES} (run the vmimage fixture)"; exit 1; }
# Templates off: each example makes one sandbox, and a template built in the background would be
# one more boot beside them (the sanitizer build runs one example only: a boot for nothing).
start_server "$SERVER" --images "$IMAGES" --image tiny --templates off
KEY=$(admin account create --name examples 2>/dev/null)
export AAS_API_KEY=$KEY AAS_BASE_URL=$BASE

out=$("$EXAMPLE" 2>&1); rc=$?
echo "$out"
check "C example exits 0" test "$rc" = 0
check "C example ran a command as the sandbox user" grep -q "stdout: I am sandbox" <<<"$out"
check "C example read its file back" grep -q "read back 20 bytes: hello from the host" <<<"$out"
check "C example got a preview URL" grep -Eq "port 8000 would be served at http://[a-z2-7]{26}\.localhost:[0-9]+/" <<<"$out"
check "C example destroyed its sandbox" grep -q "^destroyed; it cost" <<<"$out"

# PY_EXAMPLE "-": a sanitizer build, whose library an uninstrumented python3 cannot load.
if [ "$PYEXAMPLE" != - ]; then
	out=$(LIBSAAS=$LIBSAAS python3 "$PYEXAMPLE" 2>&1); rc=$?
	echo "$out"
	check "Python example exits 0" test "$rc" = 0
	check "Python example: command output" grep -q "stdout b'hi from sandbox\\\\n'" <<<"$out"
	check "Python example: binary file byte-equal" grep -q "file round trip: byte-equal" <<<"$out"
fi

auth GET "/v1/sandboxes?status=active"; expect_status 200 "list at the end"
check "no sandbox left running" test "$(jqr '.sandboxes | length')" = 0
finish
