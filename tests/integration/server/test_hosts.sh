#!/bin/bash
# VM hosts through the real server binary with the fake VM driver: the
# `aas-server host` commands (their errors included), a running server taking
# a host up within a heartbeat, creates placed on it, 503 when no host takes
# sandboxes (drained), remove refused while a sandbox lives there, the
# per-host metrics (load, pooled VMs, templates), and the operator page's host
# table with each host's page of its sandboxes. The fake driver ignores the host's uri= and listen=: its
# VMs are records in memory wherever they are "placed".
#
# usage: test_hosts.sh AAS_SERVER_FAKE
. "$(dirname "$0")/common.sh"
SERVER=$1
S=(--state-dir "${WORK}/state")
admin() { "$SERVER" "$@" "${S[@]}"; }

errs() { # errs DESCRIPTION PATTERN ARGS...: non-zero exit, one line on stderr matching PATTERN, nothing on stdout
	local what=$1 pattern=$2; shift 2
	local out err rc
	out=$("$SERVER" "$@" "${S[@]}" 2>"${WORK}/stderr"); rc=$?
	err=$(cat "${WORK}/stderr")
	if [ $rc -ne 0 ] && [ -z "$out" ] && [ "$(wc -l <<<"$err")" = 1 ] && grep -q -- "$pattern" <<<"$err"; then pass; else
		fail "$what: rc=$rc stdout='$out' stderr='$err'"; fi
}
errs "name not a DNS label" "DNS label" host add --name Bad_Name --uri qemu+ssh://h/system --address 10.0.0.2
errs "no uri" "--uri is required" host add --name vm1 --address 10.0.0.2
errs "unknown scheme" "not one of" host add --name vm1 --uri xen://h/ --address 10.0.0.2
errs "tcp needs --insecure-tcp" "qemu+tcp" host add --name vm1 --uri qemu+tcp://h/system --address 10.0.0.2
errs "no_verify=1 needs --insecure-unverified" "turns off the check of the host's identity" host add --name vm1 \
	--uri 'qemu+tls://h/system?no_verify=1' --address 10.0.0.2
errs "known_hosts_verify=ignore needs --insecure-unverified" "known_hosts_verify=ignore" host add --name vm1 \
	--uri 'qemu+ssh://h/system?known_hosts_verify=ignore' --address 10.0.0.2
errs "--insecure-tcp is no consent to an unverified host" "identity" host add --name vm1 \
	--uri 'qemu+tcp://h/system?no_verify=1' --address 10.0.0.2 --insecure-tcp
errs "address not an IP" "not an IPv4 literal" host add --name vm1 --uri qemu+ssh://h/system --address vm1.example
errs "address IPv6" "IPv6: the guests' SSH forwards" host add --name vm1 --uri qemu+ssh://h/system --address fd00::2
errs "uri with a comma" "commas" host add --name vm1 --uri 'qemu+ssh://h/system?keyfile=/k,x' --address 10.0.0.2
errs "bad overcommit" "--cpu-overcommit" host add --name vm1 --uri qemu+ssh://h/system --address 10.0.0.2 \
	--cpu-overcommit 4x
errs "overcommit out of range" "--memory-overcommit" host add --name vm1 --uri qemu+ssh://h/system \
	--address 10.0.0.2 --memory-overcommit 65
errs "drain unknown" "no VM host 'nope'" host drain --id nope
errs "remove without --id" "--id is required" host remove
errs "unknown verb" "unknown command" host frobnicate
check "host --help" bash -c "'$SERVER' host --help | grep -q 'host add --name'"
check "no hosts: an empty list" test "$(admin host list | wc -l)" = 1

start_server "$SERVER" --host-heartbeat 1 --key-cache-ttl 60
KEY=$(admin account create --name alice 2>/dev/null)
# A single machine until a host is registered.
auth POST /v1/sandboxes -d '{}'; expect_status 201 "create on the server's own driver"
LOCAL=$(jqr .id)

HOST=$(admin host add --name vm1 --uri qemu+ssh://aas@10.0.0.2/system --address 10.0.0.2 --cpu-overcommit 2.5 \
	2>"${WORK}/add.err")
check "host add prints the id alone" grep -Eq '^host-[a-z0-9]+$' <<<"$HOST"
check "host add says what it did" grep -q "registered" "${WORK}/add.err"
errs "duplicate name" "registered already" host add --name vm1 --uri qemu+ssh://other/system --address 10.0.0.3
check "--insecure-tcp takes qemu+tcp" admin host add --name vm2 --uri qemu+tcp://10.0.0.3/system \
	--address 10.0.0.3 --insecure-tcp
check "remove the tcp one" admin host remove --id vm2
check "--insecure-unverified takes known_hosts_verify=ignore" admin host add --name vm3 \
	--uri 'qemu+ssh://10.0.0.4/system?known_hosts_verify=ignore' --address 10.0.0.4 --insecure-unverified
check "remove the unverified one" admin host remove --id vm3
# The server reaches it within a heartbeat or so (polled, no time asserted).
for _ in $(seq 1 100); do
	admin host list | awk '$2 == "vm1"' | grep -qv never && break
	sleep 0.1
done
LIST=$(admin host list)
check "the server reached the host" bash -c "awk '\$2 == \"vm1\"' <<<'$LIST' | grep -qv never"
check "host list shows it active" bash -c "awk '\$2 == \"vm1\" {print \$3}' <<<'$LIST' | grep -qx active"

auth POST /v1/sandboxes -d '{}'; expect_status 201 "create placed on the host"
SB=$(jqr .id)
check "host list counts it" bash -c "'$SERVER' host list --state-dir '${WORK}/state' | awk '\$2 == \"vm1\" {print \$6}' | grep -qx 1"
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"echo routed"}'; expect_status 200 "exec on the host's sandbox"
expect_json .stdout "routed" "exec output"
auth POST "/v1/sandboxes/${LOCAL}/exec" -d '{"command":"echo local"}'; expect_status 200 "exec on the local one still"

req GET /metrics
check "aas_host_up for vm1" grep -q '^aas_host_up{host="vm1"} 1$' <<<"$BODY"
check "aas_host_sandboxes for vm1" grep -q '^aas_host_sandboxes{host="vm1"} 1$' <<<"$BODY"
check "aas_host_state for vm1" grep -q '^aas_host_state{host="vm1"} 0$' <<<"$BODY"
# What this server keeps there: no pool, so no pooled VM; the fake driver's templates (one per shape made).
check "aas_host_pool_vms for vm1" grep -q '^aas_host_pool_vms{host="vm1"} 0$' <<<"$BODY"
check "aas_host_templates ready for vm1" grep -Eq '^aas_host_templates\{host="vm1",state="ready"\} [1-9]' <<<"$BODY"
check "aas_host_templates failed for vm1, 0 written" grep -q '^aas_host_templates{host="vm1",state="failed"} 0$' <<<"$BODY"
check "aas_host_template_state_bytes for vm1" grep -Eq '^aas_host_template_state_bytes\{host="vm1"\} [1-9]' <<<"$BODY"

# The operator page: the host table, and the host's sandboxes one click away (every account's).
printf 'operator password 1\n' | admin user create --email op@example.org --operator >/dev/null 2>&1
JAR="${WORK}/jar"
page() { curl -sS -b "$JAR" -c "$JAR" -o "${WORK}/page" -w '%{http_code}' "$@"; }
page "${BASE}/login" >/dev/null
CSRF=$(grep -o 'name="csrf" value="[0-9a-f]*"' "${WORK}/page" | head -1 | cut -d'"' -f4)
check "operator logs in" test "$(page -H "Origin: ${BASE}" --data-urlencode "csrf=${CSRF}" \
	--data-urlencode "email=op@example.org" --data-urlencode "password=operator password 1" "${BASE}/login")" = 303
check "operator page" test "$(page "${BASE}/dashboard/operator")" = 200
ROW=$(grep -o '<tr id="host-vm1"[^>]*>.*' "${WORK}/page" | sed 's|</tr>.*||')
check "the host's row: state" grep -q '<td class="status">active</td>' <<<"$ROW"
check "the host's row: load" grep -q '<td>1</td><td>[0-9]* of [0-9]*</td><td>[0-9]* of [0-9]*</td>' <<<"$ROW"
check "the host's row: pooled VMs and a ready template" grep -q '<td>0</td><td><ul class="host-templates"><li data-state="ready">' <<<"$ROW"
check "the host's row: last seen" bash -c "! grep -q '<td>never</td>' <<<'$ROW'"
check "the host's row links its sandboxes" grep -q 'href="/dashboard/operator/hosts/vm1"' <<<"$ROW"
check "the host's page" test "$(page "${BASE}/dashboard/operator/hosts/vm1")" = 200
check "the host's page lists its sandbox" grep -q "<tr id=\"sandbox-${SB}\">" "${WORK}/page"
check "... with its account" grep -q "<tr id=\"sandbox-${SB}\"><td>${SB}</td><td><a href=\"/dashboard/operator#account-acc-" "${WORK}/page"
check "... and not the server's own one" bash -c "! grep -q '${LOCAL}' '${WORK}/page'"
check "the host's page by its id" test "$(page "${BASE}/dashboard/operator/hosts/${HOST}")" = 200
check "an unknown host: 404" test "$(page "${BASE}/dashboard/operator/hosts/nope")" = 404
check "a host name out of shape: 404" test "$(page "${BASE}/dashboard/operator/hosts/Bad_Name")" = 404
check "a tenant's key is no session: to /login" test "$(curl -sS -o /dev/null -w '%{http_code}' \
	-H "Authorization: Bearer ${KEY}" "${BASE}/dashboard/operator/hosts/vm1")" = 303

check "drain" admin host drain --id vm1
auth POST /v1/sandboxes -d '{}'; expect_status 503 "no host takes sandboxes"
expect_json .error.code busy "503's code"
check "503 says why" grep -q "no VM host has room for a small sandbox" <<<"$(jqr .error.message)"
check "503 says when: Retry-After" grep -qi $'^Retry-After: 10\r\\?$' <<<"$HEADERS"
expect_json .error.retry_after 10 "503's body repeats it"
check "drained host listed so" bash -c "'$SERVER' host list --state-dir '${WORK}/state' | awk '\$2 == \"vm1\" {print \$3}' | grep -qx draining"
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"echo still"}'; expect_status 200 "its sandbox lives on"
errs "remove refused while it has a sandbox" "still has 1 sandboxes" host remove --id vm1
auth DELETE "/v1/sandboxes/${SB}"; expect_status 200 "destroy the host's sandbox"
check "remove once empty" admin host remove --id "$HOST"
check "list empty again" test "$(admin host list | wc -l)" = 1
# Back to a single machine once the server has seen the host go.
for _ in $(seq 1 100); do
	auth POST /v1/sandboxes -d '{}'
	[ "$STATUS" = 201 ] && break
	sleep 0.1
done
expect_status 201 "creates go to the server's own driver again"
stop_server
check "server stopped cleanly" true
finish
