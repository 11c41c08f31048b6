#!/bin/bash
# A server stopped while it builds a template, with the tiny
# image. SIGTERM abandons the build at once and destroys its VM, while a
# create in flight still finishes within the grace; the server then exits.
# SIGKILL mid-build leaves the template's QEMU running, and the next start on
# the same state directory destroys it (or, the domain caught still starting,
# libvirt does, and the engine removes its files) and says so. "Under way" is read from
# the server's log and the template VM's QEMU, never from a sleep. Every QEMU
# of this run is killed afterwards, pass or fail.
#
# usage: test_template_stop.sh AAS_SERVER IMAGE_DIR
. "$(dirname "$0")/common.sh"
SERVER=$1
IMAGES=$2
STATE="${WORK}/state"
admin() { "$SERVER" "$@" --state-dir "${STATE}"; }
before_stop() {
	local ids
	ids=$(curl -s -H "Authorization: Bearer ${KEY:-}" "${BASE}/v1/sandboxes?status=active" | jq -r '.sandboxes[]?.id')
	for id in $ids; do curl -s -o /dev/null -X DELETE -H "Authorization: Bearer ${KEY}" "${BASE}/v1/sandboxes/${id}"; done
}
after_stop() { "$(dirname "$0")/../vm-cleanup" "${STATE}" >/dev/null 2>&1; mkdir -p "${WORK}"; }

[ -d "${IMAGES}/tiny" ] || { echo "no tiny image in ${IMAGES} (run the vmimage fixture)"; exit 1; }

# The pids of this state directory's template VMs (domains named aas-tpl-KEY): a QEMU whose command
# line names the state directory or its embedded libvirt root (as vm-cleanup finds them).
HASH=$(printf '%s' "${STATE}" | sha256sum | cut -c1-16)
tpl_qemus() {
	local f cmd
	# One grep over every command line first: a scan forking per process is slower than a build.
	for f in $(grep -lsa -- 'guest=aas-tpl-' /proc/[0-9]*/cmdline 2>/dev/null); do
		cmd=$( (tr '\0' ' ' <"$f") 2>/dev/null) || continue
		case "$cmd" in *qemu-system*) ;; *) continue ;; esac
		case "$cmd" in *"${STATE}/"* | *"/aas-libvirt/${HASH}/"* | *"/aas-libvirt-"*"/${HASH}/"*) f=${f#/proc/}; echo "${f%/cmdline}" ;; esac
	done
}
# wait_for WHAT SECONDS COMMAND...: poll until COMMAND succeeds; fails the check at the bound.
wait_for() {
	local what=$1 bound=$2; shift 2
	for _ in $(seq 1 $((bound * 5))); do "$@" && { pass; return 0; }; sleep 0.2; done
	fail "$what (not within ${bound} s)"
	return 1
}
building() { grep -q "building template" "${WORK}/server.log" && [ -n "$(tpl_qemus)" ]; }
create_async() { # a create in the background: its status lands in WORK/create.status
	rm -f "${WORK}/create.status"
	curl -sS -o "${WORK}/create.json" -w '%{http_code}' -X POST -H "Authorization: Bearer ${KEY}" \
		-H 'Content-Type: application/json' -d '{"size":"small","timeout":900}' "${BASE}/v1/sandboxes" \
		>"${WORK}/create.status" 2>/dev/null &
	CREATE_PID=$!
}
server_gone() { ! kill -0 "${SERVER_PID}" 2>/dev/null; }
tpl_gone() { [ -z "$(tpl_qemus)" ]; }

# ---- SIGTERM while a create and the template's build are both under way ----
start_server "$SERVER" --images "$IMAGES" --image tiny --shutdown-grace 600
KEY=$(admin account create --name stop 2>/dev/null)
create_async
wait_for "the template's build under way" 300 building || exit 1
check "the create is still in flight when the stop comes" kill -0 "${CREATE_PID}"
LOG_AT=$(wc -l <"${WORK}/server.log")
kill -TERM "${SERVER_PID}"
# The build is abandoned at once: its QEMU is gone while the create it came with is still booting.
gone_first=
while kill -0 "${CREATE_PID}" 2>/dev/null; do
	tpl_gone && { gone_first=1; break; }
	sleep 0.2
done
check "SIGTERM: the template's VM is destroyed before the create in flight ends" test -n "${gone_first}"
wait "${CREATE_PID}"
check "the create in flight still finishes (the grace): $(cat "${WORK}/create.status" 2>/dev/null)" \
	test "$(cat "${WORK}/create.status" 2>/dev/null)" = 201
wait_for "the server exits after SIGTERM" 300 server_gone
wait "${SERVER_PID}"; rc=$?
SERVER_PID=
check "the server exits 0 (rc ${rc})" test "$rc" -eq 0
check "no template VM of this state directory is left" tpl_gone
check "the log says the build was abandoned" \
	bash -c "tail -n +${LOG_AT} '${WORK}/server.log' | grep -q 'build abandoned, the engine is stopping'"
check "no template was made ready after the stop" \
	bash -c "! tail -n +${LOG_AT} '${WORK}/server.log' | grep -q 'template [0-9a-f]* ready in'"

# ---- SIGKILL mid-build: the next start destroys the leftover and says so ----
# The same shape: its template was abandoned above, so this create builds it again.
start_server "$SERVER" --images "$IMAGES" --image tiny
LOG_AT=$(wc -l <"${WORK}/server.log")
create_async
building_now() { tail -n +"${LOG_AT}" "${WORK}/server.log" | grep -q "building template" && [ -n "$(tpl_qemus)" ]; }
wait_for "the template's build under way again" 300 building_now || exit 1
kill -KILL "${SERVER_PID}"
wait "${SERVER_PID}" 2>/dev/null
SERVER_PID=
wait "${CREATE_PID}" 2>/dev/null
check "SIGKILL leaves the template's QEMU running (the case to clean up)" test -n "$(tpl_qemus)"
LOG_AT=$(wc -l <"${WORK}/server.log")
start_server "$SERVER" --images "$IMAGES" --image tiny
wait_for "the restarted server removes the template VM left over" 120 tpl_gone
# Destroyed by the engine, or (killed while its domain was still starting) by libvirt as it reconnects,
# in which case the engine removes its files: either way the engine says so, and nothing of it is left.
check "and logs it" bash -c "tail -n +${LOG_AT} '${WORK}/server.log' | grep -q 'template VM aas-tpl-.*left over from an interrupted build'"
check "no template VM's directory is left: $(find "${STATE}" -path '*/vms/aas-tpl-*' -prune 2>/dev/null)" \
	test -z "$(find "${STATE}" -path '*/vms/aas-tpl-*' -prune 2>/dev/null)"
finish
