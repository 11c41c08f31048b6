#!/bin/sh
# aas-nft with its capability, as the engine runs it: a copy given cap_net_admin with setcap,
# run by an unprivileged user, in a network namespace of this test's own (the host's ruleset is
# never touched). It loads the driver's rules and lists them, refuses what is not the engine's,
# and without its capability does nothing; the user itself cannot run nft.
# Usage: nft_helper.sh AAS_NFT FIXTURES_DIR. Exit 77: skipped (not root, or a tool missing).
set -eu
helper=$1
fixtures=$2

if [ "$(id -u)" != 0 ]; then
	echo "skipped: setcap and network namespaces need root"
	exit 77
fi
for tool in setcap setpriv unshare nft; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "skipped: $tool is not installed"
		exit 77
	fi
done

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
chmod 0755 "$dir"
cp "$helper" "$dir/aas-nft"
cp "$helper" "$dir/aas-nft-plain"
if ! setcap cap_net_admin+ep "$dir/aas-nft" 2>"$dir/setcap.err"; then
	echo "skipped: setcap failed here (no file capabilities on this filesystem?): $(cat "$dir/setcap.err")"
	exit 77
fi
cp "$fixtures/guard-resolvers.nft" "$fixtures/egress-table.nft" "$fixtures/egress-vm-policy.nft" "$dir/"
printf 'table inet filter {\n\tchain output { type filter hook output priority 0; policy drop; }\n}\n' >"$dir/other.nft"
chmod 0644 "$dir"/*.nft

# Everything below runs in a network namespace of its own, the helper as nobody.
unshare -n sh -eu -s "$dir" <<'SCRIPT'
dir=$1
as_nobody() { setpriv --reuid 65534 --regid 65534 --clear-groups "$@"; }
expect() { # expect STATUS DESCRIPTION COMMAND...
	want=$1 what=$2
	shift 2
	set +e
	"$@" >"$dir/out" 2>"$dir/err"
	got=$?
	set -e
	if [ "$got" != "$want" ]; then
		echo "FAIL: $what: exit $got, not $want"; cat "$dir/out" "$dir/err"; exit 1
	fi
	echo "ok: $what"
}
expect 0 "the helper holds CAP_NET_ADMIN" as_nobody "$dir/aas-nft" --check
expect 0 "it loads the guard" as_nobody "$dir/aas-nft" -f "$dir/guard-resolvers.nft"
expect 0 "it loads the egress table" as_nobody "$dir/aas-nft" -f "$dir/egress-table.nft"
expect 0 "it loads a VM's policy" as_nobody "$dir/aas-nft" -f "$dir/egress-vm-policy.nft"
expect 0 "it lists a VM's counter" as_nobody "$dir/aas-nft" list counter inet aas_egress_0123456789abcdef c_200001
grep -q 'packets 0' "$dir/out" || { echo "FAIL: the counter's listing: $(cat "$dir/out")"; exit 1; }
expect 2 "it refuses to flush the ruleset" as_nobody "$dir/aas-nft" flush ruleset
expect 2 "it refuses another table" as_nobody "$dir/aas-nft" -f "$dir/other.nft"
expect 2 "it refuses to list the ruleset" as_nobody "$dir/aas-nft" list ruleset
nft list tables >"$dir/tables"
grep -q 'table inet aas_guard' "$dir/tables" || { echo "FAIL: the guard is gone"; exit 1; }
if grep -q 'table inet filter' "$dir/tables"; then echo "FAIL: another table was loaded"; exit 1; fi
expect 0 "it deletes its own table" as_nobody "$dir/aas-nft" delete table inet aas_egress_0123456789abcdef
expect 1 "without the capability, the same program can do nothing" as_nobody "$dir/aas-nft-plain" --check
expect 1 "nor load anything" as_nobody "$dir/aas-nft-plain" -f "$dir/guard-resolvers.nft"
expect 1 "and the user cannot run nft itself" as_nobody nft list ruleset
SCRIPT
