/*
 * aas network: show or change a sandbox's egress policy; and the --allow,
 * --deny and --network options that aas create shares.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <string.h>

#include "common.h"

static const char help[] =
	"usage: aas network ID [--isolated | --internet | --allow RULE... [--deny RULE...]] [--json]\n"
	"\n"
	"Without options, show a sandbox's network policy and how many connections and name\n"
	"lookups it refused. With them, replace the policy while the sandbox runs:\n"
	"  --isolated      no connection out at all\n"
	"  --internet      the internet (never the host's own services or private networks)\n"
	"  --allow RULE    only what the allow rules name, less what the deny rules name\n"
	"  --deny RULE     (each may be repeated, at most 64 of each)\n"
	"A RULE is a domain name (example.com), every name below one (*.example.com), an\n"
	"address or CIDR (203.0.113.0/24, 2001:db8::/32), or * (everything --internet allows).\n";

int aas_net_opt(const char *cmd, int argc, char **argv, int *i, aas_net_opts *n)
{
	const char *v;
	int r;

	if (strcmp(argv[*i], "--isolated") == 0 || strcmp(argv[*i], "--internet") == 0) {
		n->mode = argv[*i] + 2;
		return 1;
	}
	if ((r = aas_opt(cmd, argc, argv, i, "--network", NULL, &v)) != 0) {
		if (r < 0)
			return -1;
		if (strcmp(v, "isolated") != 0 && strcmp(v, "internet") != 0 && strcmp(v, "policy") != 0) {
			aas_usage_error(cmd, "--network must be isolated, internet or policy, not '%s'", v);
			return -1;
		}
		n->mode = v;
		return 1;
	}
	for (int list = 0; list < 2; list++) {
		const char **rules = list ? n->deny : n->allow;
		size_t *count = list ? &n->ndeny : &n->nallow;

		if ((r = aas_opt(cmd, argc, argv, i, list ? "--deny" : "--allow", NULL, &v)) == 0)
			continue;
		if (r < 0)
			return -1;
		/* The same bound as the library's, said before anything is sent. */
		if (*count >= SAAS_NETWORK_RULES_MAX) {
			aas_usage_error(cmd, "at most %d %s rules", SAAS_NETWORK_RULES_MAX, list ? "--deny" : "--allow");
			return -1;
		}
		rules[(*count)++] = v;
		rules[*count] = NULL;
		return 1;
	}
	return 0;
}

bool aas_net_spec(aas_net_opts *n, saas_network_spec *spec)
{
	if (!n->mode && !n->nallow && !n->ndeny)
		return false;
	spec->version = SAAS_NETWORK_SPEC_VERSION;
	/* Rules make a policy; a mode named with them is the library's to refuse, in its words. */
	spec->mode = !n->mode || strcmp(n->mode, "policy") == 0 ? SAAS_NETWORK_POLICY
	             : strcmp(n->mode, "internet") == 0         ? SAAS_NETWORK_INTERNET
	                                                        : SAAS_NETWORK_ISOLATED;
	spec->allow = n->allow;
	spec->deny = n->deny;
	return true;
}

static void print_rules(const char *label, char *const *rules)
{
	printf("%s", label);
	if (!rules || !rules[0])
		fputs(" -", stdout);
	for (size_t i = 0; rules && rules[i]; i++)
		printf(" %s", rules[i]);
	putchar('\n');
}

void aas_print_network(const saas_network_info *ni)
{
	if (!ni) {
		printf("network:    (not reported by this server)\n");
		return;
	}
	printf("network:    %s\n", saas_network_mode_name(ni->mode));
	if (ni->mode == SAAS_NETWORK_POLICY) {
		print_rules("  allow:   ", ni->allow);
		print_rules("  deny:    ", ni->deny);
	}
	printf("  denied:   %lld connections, %lld lookups\n", (long long)ni->denied_connections,
	       (long long)ni->denied_lookups);
}

int aas_cmd_network(aas_ctx *ctx, int argc, char **argv)
{
	aas_net_opts n = { 0 };
	saas_network_spec spec = SAAS_NETWORK_SPEC_INIT;
	saas_client *client = NULL;
	saas_sandbox *sb = NULL;
	const char *id = NULL;
	int i, r, rc, code, nid = 0;

	for (i = 1; i < argc; i++) {
		if ((r = aas_net_opt("network", argc, argv, &i, &n)) != 0) {
			if (r < 0)
				return AAS_EXIT_USAGE;
		} else if ((code = aas_arg(ctx, "network", argc, argv, &i, &id, 1, &nid)) != AAS_EXIT_OK) {
			return code;
		}
	}
	if ((code = aas_args_done(ctx, "network", help, nid, 1, "sandbox ID", NULL)) != AAS_GO)
		return code;
	if ((code = aas_open(ctx, &client)) != AAS_EXIT_OK)
		return code;
	rc = aas_net_spec(&n, &spec) ? saas_sandbox_network_set(&sb, client, id, &spec, 0)
	                             : saas_sandbox_get(&sb, client, id);
	if (rc != SAAS_OK)
		code = aas_fail(rc, id);
	else if (ctx->json)
		code = aas_json_print(sb->network ? saas__wire_network(sb->network) : json_null());
	else
		aas_print_network(sb->network);
	saas_sandbox_free(sb);
	saas_client_free(client);
	return code;
}
