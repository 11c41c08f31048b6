/*
 * Admin commands, run beside a live server: the engine is opened store-only
 * (SAAS_ENGINE_STORE_ONLY), so no VM is touched and nothing is reconciled.
 *
 *   aas-server account create --name NAME [--credit USD]   prints the new API key, alone
 *   aas-server account list
 *   aas-server account credit --id ID --usd N [--note TEXT]
 *   aas-server account limits --id ID [--max-sandboxes N] [--max-executions N]
 *                             [--creates-per-minute N] [--requests-per-second N]
 *   aas-server key create --account ID [--name N]           prints the new API key, alone
 *   aas-server key list --account ID
 *   aas-server key revoke --id KEY_ID
 *   aas-server account disable|enable --id ID
 *   aas-server user create --email E [--account ID] [--credit USD] [--operator]   password on stdin
 *   aas-server user list
 *   aas-server user password --email E                    new password on stdin; ends the user's sessions
 *   aas-server user operator --email E [--off]
 *   aas-server user approve --email E [--usd N]            the sign-up credit (--signup-credit approval)
 *   aas-server invite create [--count N]                   prints the codes, one a line
 *   aas-server host add --name N --uri URI --address IP [--cpu-overcommit R] [--memory-overcommit R]
 *                       [--insecure-tcp] [--insecure-unverified]  prints the new host's id, alone
 *   aas-server host drain|activate|remove --id ID_OR_NAME
 *   aas-server host list
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/admin.h"
#include "config.h"
#include "server.h"
#include "web/web.h"

/* The limits `account limits` sets, in saas_limit_overrides order. */
enum { L_SANDBOXES, L_EXECUTIONS, L_CREATES, L_REQUESTS, NLIMITS };
static const char *const limit_names[NLIMITS] = { "max_sandboxes", "max_executions", "creates_per_minute",
	                                          "requests_per_second" };

struct args {
	const char *state_dir, *store, *name, *id, *account, *usd, *credit, *note, *email, *count;
	const char *limits[NLIMITS];     /* as given, or NULL */
	const char *uri, *address, *cpu_overcommit, *mem_overcommit;
	bool help, operator, off, insecure_tcp, insecure_unverified;
	bool store_argv; /* --store, not AAS_STORE_URL: readable in /proc */
};

static const char usage[] =
	"usage: aas-server account create --name NAME [--credit USD]   create an account and print its first API key\n"
	"       aas-server account list                                 list accounts with their balances\n"
	"       aas-server account credit --id ACCOUNT_ID --usd N [--note TEXT]   add credit\n"
	"       aas-server account limits --id ACCOUNT_ID [--max-sandboxes N] [--max-executions N]\n"
	"                                 [--creates-per-minute N] [--requests-per-second N]\n"
	"                                 show an account's own limits, or set those given (0: the server's default)\n"
	"       aas-server key create --account ACCOUNT_ID [--name N]   issue an API key and print it\n"
	"       aas-server key list --account ACCOUNT_ID                list an account's keys\n"
	"       aas-server key revoke --id KEY_ID                       revoke a key\n"
	"       aas-server account disable|enable --id ACCOUNT_ID       refuse (or accept again) its keys and log-ins\n"
	"       aas-server user create --email E [--account ACCOUNT_ID] [--credit USD] [--operator]\n"
	"                              a person who logs in to the dashboard; the password is read from stdin;\n"
	"                              without --account, a new account with the credit (default: the engine's)\n"
	"       aas-server user list                                    list users\n"
	"       aas-server user password --email E                      set the password (from stdin); logs the user out\n"
	"       aas-server user operator --email E [--off]              make the user an operator (or not)\n"
	"       aas-server user approve --email E [--usd N]             approve a sign-up: add N (default: the\n"
	"                              new-account credit, $5) to the user's account (--signup-credit approval)\n"
	"       aas-server invite create [--count N]                    print N (default 1) sign-up invite codes\n"
	"       aas-server host add --name NAME --uri LIBVIRT_URI --address IP [--cpu-overcommit R]\n"
	"                           [--memory-overcommit R] [--insecure-tcp] [--insecure-unverified]\n"
	"                           register a VM host (qemu+ssh:// or qemu+tls://; a libvirtd on this machine\n"
	"                           as qemu+unix:///system?socket=PATH; qemu+tcp:// only with\n"
	"                           --insecure-tcp, and a URI with no_verify=1 or known_hosts_verify=ignore\n"
	"                           only with --insecure-unverified, for test networks) and print its id;\n"
	"                           ratios like 4 or 1.5\n"
	"                           (defaults 4 and 1); servers take it up within a heartbeat\n"
	"       aas-server host drain|activate --id HOST            stop (or resume) placing sandboxes on it\n"
	"       aas-server host remove --id HOST                        forget a host with no sandboxes left\n"
	"       aas-server host list                                    hosts with their capacity, use and state\n"
	"common options: --state-dir DIR [AAS_STATE_DIR], --store URL [AAS_STORE_URL], --help\n"
	"Money is in dollars with up to six decimals (\"5\", \"0.25\"). Works beside a running server.\n";

static int fail(const char *what, int rc)
{
	const saas_error *e = saas_error_last();
	fprintf(stderr, "aas-server: %s: %s\n", what, e->code == rc && *e->message ? e->message : saas_strerror(rc));
	return 1;
}

static int parse(struct args *a, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "state-dir", required_argument, NULL, 's' }, { "store", required_argument, NULL, 'S' },
		{ "name", required_argument, NULL, 'n' },      { "id", required_argument, NULL, 'i' },
		{ "account", required_argument, NULL, 'a' },   { "usd", required_argument, NULL, 'u' },
		{ "credit", required_argument, NULL, 'c' },    { "note", required_argument, NULL, 'N' },
		{ "email", required_argument, NULL, 'e' },     { "count", required_argument, NULL, 'C' },
		{ "operator", no_argument, NULL, 'o' },        { "off", no_argument, NULL, 'O' },
		{ "uri", required_argument, NULL, 'U' },       { "address", required_argument, NULL, 'A' },
		{ "cpu-overcommit", required_argument, NULL, 'P' }, { "memory-overcommit", required_argument, NULL, 'M' },
		{ "insecure-tcp", no_argument, NULL, 'T' },    { "insecure-unverified", no_argument, NULL, 'V' },
		{ "max-sandboxes", required_argument, NULL, 1000 + L_SANDBOXES },
		{ "max-executions", required_argument, NULL, 1000 + L_EXECUTIONS },
		{ "creates-per-minute", required_argument, NULL, 1000 + L_CREATES },
		{ "requests-per-second", required_argument, NULL, 1000 + L_REQUESTS },
		{ "help", no_argument, NULL, 'h' },            { NULL, 0, NULL, 0 },
	};
	int c;

	memset(a, 0, sizeof(*a));
	a->state_dir = getenv("AAS_STATE_DIR");
	a->store = getenv("AAS_STORE_URL");
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's': a->state_dir = optarg; break;
		case 'S':
			a->store = optarg;
			a->store_argv = true;
			break;
		case 'n': a->name = optarg; break;
		case 'i': a->id = optarg; break;
		case 'a': a->account = optarg; break;
		case 'u': a->usd = optarg; break;
		case 'c': a->credit = optarg; break;
		case 'N': a->note = optarg; break;
		case 'e': a->email = optarg; break;
		case 'C': a->count = optarg; break;
		case 'o': a->operator = true; break;
		case 'O': a->off = true; break;
		case 'U': a->uri = optarg; break;
		case 'A': a->address = optarg; break;
		case 'P': a->cpu_overcommit = optarg; break;
		case 'M': a->mem_overcommit = optarg; break;
		case 'T': a->insecure_tcp = true; break;
		case 'V': a->insecure_unverified = true; break;
		case 'h': a->help = true; break;
		case 1000 + L_SANDBOXES:
		case 1000 + L_EXECUTIONS:
		case 1000 + L_CREATES:
		case 1000 + L_REQUESTS: a->limits[c - 1000] = optarg; break;
		default:
			fprintf(stderr, "aas-server: unknown or incomplete option \"%s\" (see --help)\n", argv[optind - 1]);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "aas-server: unexpected argument \"%s\" (see --help)\n", argv[optind]);
		return -1;
	}
	return 0;
}

static int need(const char *val, const char *opt)
{
	if (val && *val)
		return 0;
	fprintf(stderr, "aas-server: %s is required (see --help)\n", opt);
	return -1;
}

static int open_store(saas_engine **e, const struct args *a)
{
	saas_engine_options o = SAAS_ENGINE_OPTIONS_INIT;
	int rc;

	o.state_dir = a->state_dir && *a->state_dir ? a->state_dir : NULL;
	o.store_url = a->store && *a->store ? a->store : NULL;
	o.flags = SAAS_ENGINE_STORE_ONLY;
	if (a->store_argv && aas_store_url_has_password(a->store))
		fprintf(stderr, "aas-server: warning: %s\n", AAS_STORE_PASSWORD_WARNING);
	if ((rc = saas_engine_open(e, &o)) < 0)
		return fail("cannot open the store", rc);
	return 0;
}

static int account_create(saas_engine *e, const struct args *a)
{
	saas_account *acc = NULL;
	int64_t credit = SAAS_CREDIT_DEFAULT;
	char *key = NULL;
	int rc;

	if (need(a->name, "--name") < 0)
		return 2;
	if (a->credit && aas_parse_usd(&credit, a->credit) < 0) {
		fprintf(stderr, "aas-server: --credit: expected dollars like 5 or 0.25 (at most %lld), got \"%s\"\n",
		        AAS_USD_MAX, a->credit);
		return 2;
	}
	if ((rc = saas_account_create(&acc, e, a->name, credit, 0)) < 0)
		return fail("cannot create the account", rc);
	if ((rc = saas_key_create(&key, NULL, e, acc->id, "default", 0)) < 0) {
		saas_account_free(acc);
		return fail("cannot create a key", rc);
	}
	printf("%s\n", key);
	fprintf(stderr, "account %s (\"%s\") created; the key above is shown once\n", acc->id, acc->name);
	saas_free(key);
	saas_account_free(acc);
	return 0;
}

static int account_list(saas_engine *e)
{
	saas_account_list *l = NULL;
	char when[40], bal[40], cred[40];
	int rc;

	if ((rc = saas_account_list_get(&l, e)) < 0)
		return fail("cannot list accounts", rc);
	printf("%-28s %-24s %-16s %-16s %s\n", "ID", "NAME", "BALANCE_USD", "CREDIT_USD", "CREATED");
	for (size_t i = 0; i < l->count; i++) {
		const saas_account *acc = l->items[i];
		printf("%-28s %-24s %-16s %-16s %s\n", acc->id, acc->name, saas_usd_format(bal, sizeof(bal), acc->balance_usd_micro),
		       saas_usd_format(cred, sizeof(cred), acc->credit_usd_micro),
		       saas_time_format(when, sizeof(when), acc->created_at_ms));
	}
	saas_account_list_free(l);
	return 0;
}

static int account_credit(saas_engine *e, const struct args *a)
{
	saas_account *acc = NULL;
	char bal[40];
	int64_t micro;
	int rc;

	if (need(a->id, "--id") < 0 || need(a->usd, "--usd") < 0)
		return 2;
	if (aas_parse_usd(&micro, a->usd) < 0 || micro <= 0) {
		fprintf(stderr, "aas-server: --usd: expected a positive amount like 20 or 0.5 (at most %lld), got \"%s\"\n",
		        AAS_USD_MAX, a->usd);
		return 2;
	}
	if ((rc = saas_account_add_credit(e, a->id, micro, a->note, 0)) < 0)
		return fail("cannot add credit", rc);
	if (saas_account_get(&acc, e, a->id) == SAAS_OK)
		printf("%s balance %s\n", acc->id, saas_usd_format(bal, sizeof(bal), acc->balance_usd_micro));
	saas_account_free(acc);
	return 0;
}

static void limits_print(const char *account_id, const saas_limit_overrides *l)
{
	const unsigned int v[NLIMITS] = { l->max_sandboxes, l->max_executions, l->creates_per_minute,
		                          l->requests_per_second };

	printf("%s", account_id);
	for (int i = 0; i < NLIMITS; i++) {
		if (v[i])
			printf(" %s=%u", limit_names[i], v[i]);
		else
			printf(" %s=default", limit_names[i]);
	}
	printf("\n");
}

/* Show an account's own limits, or change those named and keep the others. */
static int account_limits(saas_engine *e, const struct args *a)
{
	saas_limit_overrides l = SAAS_LIMIT_OVERRIDES_INIT;
	unsigned int *field[NLIMITS] = { &l.max_sandboxes, &l.max_executions, &l.creates_per_minute,
		                         &l.requests_per_second };
	bool change = false;
	int rc;

	if (need(a->id, "--id") < 0)
		return 2;
	if ((rc = saas_account_limits_get(&l, e, a->id)) < 0)
		return fail("cannot read the account's limits", rc);
	for (int i = 0; i < NLIMITS; i++) {
		char *end;
		unsigned long v;

		if (!a->limits[i])
			continue;
		v = strtoul(a->limits[i], &end, 10);
		if (!*a->limits[i] || *end || a->limits[i][0] == '-' || v > SAAS_LIMIT_MAX) {
			fprintf(stderr, "aas-server: --%s: expected 0 (the default) to %u, got \"%s\"\n", limit_names[i],
			        SAAS_LIMIT_MAX, a->limits[i]);
			return 2;
		}
		*field[i] = (unsigned int)v;
		change = true;
	}
	if (change && (rc = saas_account_limits_set(e, a->id, &l)) < 0)
		return fail("cannot set the account's limits", rc);
	limits_print(a->id, &l);
	return 0;
}

static int key_create(saas_engine *e, const struct args *a)
{
	saas_key *info = NULL;
	char *key = NULL;
	int rc;

	if (need(a->account, "--account") < 0)
		return 2;
	if ((rc = saas_key_create(&key, &info, e, a->account, a->name, 0)) < 0)
		return fail("cannot create the key", rc);
	printf("%s\n", key);
	fprintf(stderr, "key %s for %s created; it is shown once\n", info->id, info->account_id);
	saas_free(key);
	saas_key_free(info);
	return 0;
}

static int key_list(saas_engine *e, const struct args *a)
{
	saas_key_list *l = NULL;
	char made[40], revoked[40];
	int rc;

	if (need(a->account, "--account") < 0)
		return 2;
	if ((rc = saas_key_list_get(&l, e, a->account)) < 0)
		return fail("cannot list keys", rc);
	printf("%-28s %-16s %-20s %-26s %s\n", "ID", "PREFIX", "NAME", "CREATED", "REVOKED");
	for (size_t i = 0; i < l->count; i++) {
		const saas_key *k = l->items[i];
		printf("%-28s %-16s %-20s %-26s %s\n", k->id, k->prefix, k->name ? k->name : "",
		       saas_time_format(made, sizeof(made), k->created_at_ms),
		       k->revoked_at_ms ? saas_time_format(revoked, sizeof(revoked), k->revoked_at_ms) : "-");
	}
	saas_key_list_free(l);
	return 0;
}

static int key_revoke(saas_engine *e, const struct args *a)
{
	int rc;

	if (need(a->id, "--id") < 0)
		return 2;
	if ((rc = saas_key_revoke(e, a->id)) < 0)
		return fail("cannot revoke the key", rc);
	fprintf(stderr, "key %s revoked\n", a->id);
	return 0;
}

static int account_disable(saas_engine *e, const struct args *a, bool disable)
{
	int rc;

	if (need(a->id, "--id") < 0)
		return 2;
	if ((rc = saas_account_disable(e, a->id, disable)) < 0)
		return fail(disable ? "cannot disable the account" : "cannot enable the account", rc);
	fprintf(stderr, "account %s %s\n", a->id,
	        disable ? "disabled: its keys and log-ins are refused, and the running server destroys its sandboxes "
	                  "at its next sweep"
	                : "enabled");
	return 0;
}

/*
 * A password from stdin: its first line, without the newline. Read whole
 * before hashing; never echoed or logged. 0, or 2 after saying what is wrong.
 */
static int read_password(char *buf, size_t size)
{
	size_t n;

	if (!fgets(buf, (int)size, stdin)) {
		fprintf(stderr, "aas-server: give the password on stdin (one line)\n");
		return 2;
	}
	n = strcspn(buf, "\r\n");
	if (buf[n] == '\0' && n == size - 1) {
		fprintf(stderr, "aas-server: the password is longer than %d bytes\n", AAS_PASSWORD_MAX);
		return 2;
	}
	buf[n] = '\0';
	if (n < AAS_PASSWORD_MIN) {
		fprintf(stderr, "aas-server: the password must be at least %d characters\n", AAS_PASSWORD_MIN);
		return 2;
	}
	return 0;
}

/* The password on stdin, hashed into hash; 0, or an exit status. */
static int password_from_stdin(char hash[SAAS_PASSWORD_HASH_MAX + 1])
{
	char pw[AAS_PASSWORD_MAX + 2];
	int rc;

	if ((rc = read_password(pw, sizeof(pw))) != 0)
		return rc;
	if (aas_password_hash(hash, pw) < 0) {
		fprintf(stderr, "aas-server: cannot hash the password\n");
		rc = 1;
	}
	memset(pw, 0, sizeof(pw));
	return rc;
}

static int user_create(saas_engine *e, const struct args *a)
{
	char hash[SAAS_PASSWORD_HASH_MAX + 1];
	int64_t credit = SAAS_CREDIT_DEFAULT;
	saas_user *u = NULL;
	int rc;

	if (need(a->email, "--email") < 0)
		return 2;
	if (a->credit && aas_parse_usd(&credit, a->credit) < 0) {
		fprintf(stderr, "aas-server: --credit: expected dollars like 5 or 0.25 (at most %lld), got \"%s\"\n",
		        AAS_USD_MAX, a->credit);
		return 2;
	}
	if ((rc = password_from_stdin(hash)) != 0)
		return rc;
	if ((rc = saas_user_create(&u, e, a->email, hash, a->account, credit, NULL, a->operator ? SAAS_USER_OPERATOR : 0)) < 0)
		return fail("cannot create the user", rc);
	printf("%s %s\n", u->id, u->account_id);
	fprintf(stderr, "user %s (%s) created for account %s%s\n", u->id, u->email, u->account_id,
	        u->is_operator ? ", an operator" : "");
	saas_user_free(u);
	return 0;
}

static int user_list(saas_engine *e)
{
	saas_user_list *l = NULL;
	char when[40];
	int rc;

	if ((rc = saas_user_list_get(&l, e)) < 0)
		return fail("cannot list users", rc);
	printf("%-28s %-32s %-28s %-8s %-8s %s\n", "ID", "EMAIL", "ACCOUNT", "OPERATOR", "STATE", "CREATED");
	for (size_t i = 0; i < l->count; i++) {
		const saas_user *u = l->items[i];
		printf("%-28s %-32s %-28s %-8s %-8s %s\n", u->id, u->email, u->account_id, u->is_operator ? "yes" : "no",
		       u->disabled_at_ms ? "disabled" : "active", saas_time_format(when, sizeof(when), u->created_at_ms));
	}
	saas_user_list_free(l);
	return 0;
}

static int user_password(saas_engine *e, const struct args *a)
{
	char hash[SAAS_PASSWORD_HASH_MAX + 1];
	int rc;

	if (need(a->email, "--email") < 0)
		return 2;
	if ((rc = password_from_stdin(hash)) != 0)
		return rc;
	if ((rc = saas_user_password_set(e, a->email, hash)) < 0)
		return fail("cannot set the password", rc);
	fprintf(stderr, "password of %s replaced; the user's sessions ended\n", a->email);
	return 0;
}

static int user_operator(saas_engine *e, const struct args *a)
{
	int rc;

	if (need(a->email, "--email") < 0)
		return 2;
	if ((rc = saas_user_operator_set(e, a->email, !a->off)) < 0)
		return fail("cannot change the user", rc);
	fprintf(stderr, "%s %s an operator\n", a->email, a->off ? "is no longer" : "is now");
	return 0;
}

/*
 * Approve an account made on /signup under --signup-credit approval: it gets
 * the credit an invite would have given. Each run adds it (the ledger notes
 * "sign-up approved"): approve once.
 */
static int user_approve(saas_engine *e, const struct args *a)
{
	saas_engine_info *info = NULL;
	saas_account *acc = NULL;
	saas_user *u = NULL;
	char bal[40], amount[40];
	int64_t micro = 0;
	int rc, status = 1;

	if (need(a->email, "--email") < 0)
		return 2;
	if (a->usd && (aas_parse_usd(&micro, a->usd) < 0 || micro <= 0)) {
		fprintf(stderr, "aas-server: --usd: expected a positive amount like 5 or 0.5 (at most %lld), got \"%s\"\n",
		        AAS_USD_MAX, a->usd);
		return 2;
	}
	if ((rc = saas_user_get(&u, e, a->email)) < 0) {
		status = fail("cannot find the user", rc);
		goto out;
	}
	if (!a->usd) {
		if ((rc = saas_engine_info_get(&info, e)) < 0) {
			status = fail("cannot read the new-account credit", rc);
			goto out;
		}
		micro = info->new_account_credit_usd_micro;
	}
	if ((rc = saas_account_add_credit(e, u->account_id, micro, "sign-up approved", 0)) < 0) {
		status = fail("cannot add credit", rc);
		goto out;
	}
	if (saas_account_get(&acc, e, u->account_id) == SAAS_OK)
		printf("%s balance %s\n", acc->id, saas_usd_format(bal, sizeof(bal), acc->balance_usd_micro));
	fprintf(stderr, "sign-up of %s approved: %s added to account %s\n", u->email,
	        saas_usd_format(amount, sizeof(amount), micro), u->account_id);
	status = 0;
out:
	saas_account_free(acc);
	saas_engine_info_free(info);
	saas_user_free(u);
	return status;
}

static int invite_create(saas_engine *e, const struct args *a)
{
	unsigned long count = 1;
	char *end, *code = NULL;
	int rc;

	if (a->count) {
		count = strtoul(a->count, &end, 10);
		if (!*a->count || *end || a->count[0] == '-' || count < 1 || count > 1000) {
			fprintf(stderr, "aas-server: --count: expected 1 to 1000, got \"%s\"\n", a->count);
			return 2;
		}
	}
	for (unsigned long i = 0; i < count; i++) {
		if ((rc = saas_invite_create(&code, e, 0)) < 0)
			return fail("cannot make an invite code", rc);
		printf("%s\n", code);
		saas_free(code);
	}
	fprintf(stderr, "%lu invite code%s made; each signs up one account (aas-server --signup invite)\n", count,
	        count == 1 ? "" : "s");
	return 0;
}

/* An overcommit ratio ("4", "1.5", "0.25") in thousandths; 0 when absent; -1 (said) when bad. */
static long parse_ratio(const char *s, const char *opt)
{
	unsigned long whole = 0, frac = 0, scale = 1000;
	const char *p = s;

	if (!s)
		return 0;
	if (*p < '0' || *p > '9')
		goto bad;
	for (; *p >= '0' && *p <= '9'; p++)
		if ((whole = whole * 10 + (unsigned long)(*p - '0')) > SAAS_HOST_OVERCOMMIT_MAX / 1000)
			goto bad;
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++) {
			if (scale == 1)
				goto bad;
			scale /= 10;
			frac += (unsigned long)(*p - '0') * scale;
		}
	}
	if (*p || whole * 1000 + frac < 100 || whole * 1000 + frac > SAAS_HOST_OVERCOMMIT_MAX)
		goto bad;
	return (long)(whole * 1000 + frac);
bad:
	fprintf(stderr, "aas-server: %s: expected a ratio from 0.1 to %d with up to three decimals (like 4 or 1.5), "
	        "got \"%s\"\n", opt, SAAS_HOST_OVERCOMMIT_MAX / 1000, s);
	return -1;
}

static int host_add(saas_engine *e, const struct args *a)
{
	saas_host_options o = SAAS_HOST_OPTIONS_INIT;
	saas_host *h = NULL;
	long cpu, mem;
	int rc;

	if (need(a->name, "--name") < 0 || need(a->uri, "--uri") < 0 || need(a->address, "--address") < 0)
		return 2;
	if ((cpu = parse_ratio(a->cpu_overcommit, "--cpu-overcommit")) < 0 ||
	    (mem = parse_ratio(a->mem_overcommit, "--memory-overcommit")) < 0)
		return 2;
	o.cpu_overcommit_milli = (unsigned int)cpu;
	o.mem_overcommit_milli = (unsigned int)mem;
	if ((rc = saas_host_add(&h, e, a->name, a->uri, a->address, &o,
	                        (a->insecure_tcp ? SAAS_HOST_ALLOW_TCP : 0) |
	                            (a->insecure_unverified ? SAAS_HOST_ALLOW_UNVERIFIED : 0))) < 0)
		return fail("cannot register the host", rc);
	printf("%s\n", h->id);
	fprintf(stderr, "VM host %s (%s) registered; servers place sandboxes on it once they reach it\n", h->name, h->id);
	saas_host_free(h);
	return 0;
}

static int host_change(saas_engine *e, const struct args *a, const char *verb)
{
	int rc;

	if (need(a->id, "--id") < 0)
		return 2;
	rc = strcmp(verb, "drain") == 0      ? saas_host_drain(e, a->id)
	     : strcmp(verb, "activate") == 0 ? saas_host_activate(e, a->id)
	                                     : saas_host_remove(e, a->id);
	if (rc < 0)
		return fail(strcmp(verb, "drain") == 0      ? "cannot drain the host"
		            : strcmp(verb, "activate") == 0 ? "cannot activate the host"
		                                            : "cannot remove the host",
		            rc);
	fprintf(stderr, "VM host %s %s\n", a->id,
	        strcmp(verb, "drain") == 0      ? "is draining: no new sandboxes; those on it live out their time"
	        : strcmp(verb, "activate") == 0 ? "takes new sandboxes"
	                                        : "removed");
	return 0;
}

static int host_list(saas_engine *e)
{
	saas_host_list *l = NULL;
	char seen[40];
	int rc;

	if ((rc = saas_host_list_get(&l, e)) < 0)
		return fail("cannot list the VM hosts", rc);
	printf("%-26s %-16s %-9s %-9s %-17s %-9s %-24s %s\n", "ID", "NAME", "STATE", "VCPUS", "MEMORY_MB", "SANDBOXES",
	       "LAST_SEEN", "URI");
	for (size_t i = 0; i < l->count; i++) {
		const saas_host *h = l->items[i];
		char vcpus[24], mem[40];

		snprintf(vcpus, sizeof(vcpus), "%u/%u", h->vcpus_used, h->vcpus_capacity);
		snprintf(mem, sizeof(mem), "%llu/%llu", (unsigned long long)h->memory_mb_used,
		         (unsigned long long)h->memory_mb_capacity);
		printf("%-26s %-16s %-9s %-9s %-17s %-9u %-24s %s\n", h->id, h->name, saas_host_state_name(h->state), vcpus, mem,
		       h->sandboxes, h->last_seen_ms ? saas_time_format(seen, sizeof(seen), h->last_seen_ms) : "never",
		       h->uri);
	}
	saas_host_list_free(l);
	return 0;
}

/* Is "noun verb" a command of ours? */
static bool known_command(const char *noun, const char *verb)
{
	static const char *const commands[][2] = {
		{ "account", "create" }, { "account", "list" },   { "account", "credit" },   { "account", "limits" },
		{ "account", "disable" }, { "account", "enable" }, { "key", "create" },      { "key", "list" },
		{ "key", "revoke" },      { "user", "create" },    { "user", "list" },        { "user", "password" },
		{ "user", "operator" },   { "user", "approve" },   { "invite", "create" },    { "host", "add" },
		{ "host", "drain" },      { "host", "activate" },  { "host", "remove" },      { "host", "list" },
	};

	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(noun, commands[i][0]) == 0 && strcmp(verb, commands[i][1]) == 0)
			return true;
	return false;
}

int aas_admin_main(int argc, char **argv)
{
	const char *noun = argv[1], *verb = argc > 2 ? argv[2] : NULL;
	saas_engine *e = NULL;
	struct args a;
	int rc;

	if (!verb || strcmp(verb, "--help") == 0 || strcmp(verb, "-h") == 0) {
		fputs(usage, verb ? stdout : stderr);
		return verb ? 0 : 2;
	}
	if (parse(&a, argc - 2, argv + 2) < 0)
		return 2;
	if (a.help) {
		fputs(usage, stdout);
		return 0;
	}
	if (!known_command(noun, verb)) {
		fprintf(stderr, "aas-server: unknown command \"%s %s\" (see aas-server %s --help)\n", noun, verb, noun);
		return 2;
	}
	if (open_store(&e, &a) != 0)
		return 1;
	if (strcmp(noun, "account") == 0)
		rc = strcmp(verb, "create") == 0    ? account_create(e, &a)
		     : strcmp(verb, "list") == 0    ? account_list(e)
		     : strcmp(verb, "limits") == 0  ? account_limits(e, &a)
		     : strcmp(verb, "disable") == 0 ? account_disable(e, &a, true)
		     : strcmp(verb, "enable") == 0  ? account_disable(e, &a, false)
		                                    : account_credit(e, &a);
	else if (strcmp(noun, "key") == 0)
		rc = strcmp(verb, "create") == 0 ? key_create(e, &a)
		     : strcmp(verb, "list") == 0 ? key_list(e, &a) : key_revoke(e, &a);
	else if (strcmp(noun, "user") == 0)
		rc = strcmp(verb, "create") == 0     ? user_create(e, &a)
		     : strcmp(verb, "list") == 0     ? user_list(e)
		     : strcmp(verb, "password") == 0 ? user_password(e, &a)
		     : strcmp(verb, "approve") == 0  ? user_approve(e, &a)
		                                     : user_operator(e, &a);
	else if (strcmp(noun, "host") == 0)
		rc = strcmp(verb, "add") == 0 ? host_add(e, &a) : strcmp(verb, "list") == 0 ? host_list(e) : host_change(e, &a, verb);
	else
		rc = invite_create(e, &a);
	saas_engine_free(e);
	return rc;
}
