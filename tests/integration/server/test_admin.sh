#!/bin/bash
# The admin commands of the real aas-server binary, on a store of their own
# (store-only engine: no VM driver needed).
#
# usage: test_admin.sh AAS_SERVER
. "$(dirname "$0")/common.sh"
SERVER=$1
S=(--state-dir "${WORK}/state")

KEY=$("$SERVER" account create --name alice --credit 12.5 "${S[@]}" 2>/dev/null)
check "account create exits 0" test $? = 0
check "account create prints only the key" grep -Eq '^aas_sk_[A-Za-z0-9_-]+$' <<<"$KEY"
LIST=$("$SERVER" account list "${S[@]}")
check "account list shows alice" grep -q ' alice ' <<<"$LIST"
check "account list shows the exact credit" grep -q '12.500000' <<<"$LIST"
ACC=$(awk '$2 == "alice" {print $1}' <<<"$LIST")
OUT=$("$SERVER" account credit --id "$ACC" --usd 0.000001 "${S[@]}")
check "credit adds exactly one micro-dollar" grep -q 'balance 12.500001' <<<"$OUT"
K2=$("$SERVER" key create --account "$ACC" --name ci "${S[@]}" 2>"${WORK}/err")
check "key create prints the key" grep -Eq '^aas_sk_' <<<"$K2"
KID=$(grep -o 'key-[a-z0-9]*' "${WORK}/err" | head -1)
check "key list shows it" grep -q "$KID" <<<"$("$SERVER" key list --account "$ACC" "${S[@]}")"
check "key revoke" "$SERVER" key revoke --id "$KID" "${S[@]}"
check "revoked in list" bash -c "'$SERVER' key list --account '$ACC' --state-dir '${WORK}/state' | grep '$KID' | grep -vq ' -\$'"

for cmd in "account create" "account list" "account credit" "key create" "key revoke" "key list" "account" "key"; do
	# shellcheck disable=SC2086
	check "$cmd --help" bash -c "'$SERVER' $cmd --help | grep -q usage"
done
check "--help" bash -c "'$SERVER' --help | grep -q 'usage: aas-server'"

errs() { # errs DESCRIPTION ARGS...: non-zero exit, one line on stderr, nothing on stdout
	local what=$1; shift
	local out err rc
	out=$("$SERVER" "$@" 2>"${WORK}/stderr"); rc=$?
	err=$(cat "${WORK}/stderr")
	if [ $rc -ne 0 ] && [ -z "$out" ] && [ "$(wc -l <<<"$err")" = 1 ] && [ -n "$err" ]; then pass; else
		fail "$what: rc=$rc stdout='$out' stderr='$err'"; fi
}
errs "create without name" account create "${S[@]}"
errs "bad credit" account create --name x --credit -3 "${S[@]}"
errs "credit with float junk" account credit --id "$ACC" --usd 1e3 "${S[@]}"
# The largest amount the parser reads (AAS_USD_MAX) reaches the library, which has its own limit; a
# micro-dollar more is the parser's to refuse.
check "the parser reads the largest amount" bash -c "'$SERVER' account credit --id '$ACC' --usd 1000000000 \
	--state-dir '${WORK}/state' 2>&1 | grep -q 'cannot add credit'"
for usd in 1000000000.000001 8000808002; do
	errs "credit of $usd" account credit --id "$ACC" --usd "$usd" "${S[@]}"
	check "$usd is over what the parser reads" bash -c "'$SERVER' account credit --id '$ACC' --usd $usd \
		--state-dir '${WORK}/state' 2>&1 | grep -q 'at most 1000000000'"
done
errs "credit unknown account" account credit --id acc-nope --usd 1 "${S[@]}"
errs "key for unknown account" key create --account acc-nope "${S[@]}"
errs "revoke unknown key" key revoke --id key-nope "${S[@]}"
errs "unknown verb" account frobnicate "${S[@]}"
errs "unknown option" account list --bogus "${S[@]}"
errs "server bad option" --listen nowhere

# A store URL with a password on the command line: a warning at start, and the password never in a
# message, even where libpq quotes the URL it cannot read. Port 1 of loopback: nothing listens.
secret_not_shown() { # secret_not_shown DESCRIPTION WARNED(yes|no) OUTPUT
	if grep -q "s3cr" <<<"$3"; then fail "$1: the password was echoed: $3"
	elif [ "$2" = yes ] && ! grep -q "carries a password.*PGPASSFILE" <<<"$3"; then fail "$1: no warning: $3"
	elif [ "$2" = no ] && grep -q "carries a password" <<<"$3"; then fail "$1: warned: $3"
	else pass; fi
}
for url in 'postgresql://aas:s3cr3t@127.0.0.1:1/aas' 'postgresql://aas:s3cr%zz3t@127.0.0.1:1/aas' \
	'postgres://aas:s3cr3t@[::1/aas' 'postgresql://aas@127.0.0.1:1/aas?password=s3cr%7a3t' 'mysql://aas:s3cr3t@h/aas'; do
	secret_not_shown "admin --store $url" yes "$("$SERVER" account list --store "$url" "${S[@]}" 2>&1)"
done
secret_not_shown "server --store" yes "$("$SERVER" --listen 127.0.0.1:0 "${S[@]}" \
	--store 'postgres://aas:s3cr3t@[::1/aas' 2>&1)"
secret_not_shown "AAS_STORE_URL: not on the command line, no warning" no \
	"$(AAS_STORE_URL='postgresql://aas:s3cr3t@127.0.0.1:1/aas' "$SERVER" account list "${S[@]}" 2>&1)"
secret_not_shown "no password, no warning" no "$("$SERVER" account list --store 'postgresql://aas@127.0.0.1:1/aas' 2>&1)"
finish
