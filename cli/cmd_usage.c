/*
 * aas usage: usage and cost over a period.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include "common.h"

static const char help[] =
	"usage: aas usage [--from TIME] [--to TIME] [--json]\n"
	"\n"
	"Usage and cost of your account over [from, to). TIME is RFC 3339 (2025-06-01T12:00:00Z;\n"
	"UTC when it has no offset), a date (2025-06-01; as --to it includes that day) or unix\n"
	"seconds. Defaults: the last 30 days up to now.\n";

int aas_cmd_usage(aas_ctx *ctx, int argc, char **argv)
{
	saas_client *client = NULL;
	saas_usage *u = NULL;
	int64_t from = 0, to = 0;
	int i, r, rc, code, n = 0;
	const char *v;
	size_t k;
	char a[32], b[40];

	for (i = 1; i < argc; i++) {
		if ((r = aas_opt("usage", argc, argv, &i, "--from", NULL, &v)) != 0) {
			if (r < 0 || saas_time_parse(&from, v, 0) < 0)
				return r < 0 ? AAS_EXIT_USAGE : aas_usage_error("usage", "%s", saas_error_last()->message);
		} else if ((r = aas_opt("usage", argc, argv, &i, "--to", NULL, &v)) != 0) {
			if (r < 0 || saas_time_parse(&to, v, SAAS_TIME_DAY_END) < 0)
				return r < 0 ? AAS_EXIT_USAGE : aas_usage_error("usage", "%s", saas_error_last()->message);
		} else if ((code = aas_arg(ctx, "usage", argc, argv, &i, NULL, 0, &n)) != AAS_EXIT_OK) {
			return code;
		}
	}
	if ((code = aas_args_done(ctx, "usage", help, n, 0, NULL, NULL)) != AAS_GO)
		return code;
	if ((code = aas_open(ctx, &client)) != AAS_EXIT_OK)
		return code;
	if ((rc = saas_usage_get(&u, client, from, to, 0)) != SAAS_OK) {
		code = aas_fail(rc, "usage");
	} else if (ctx->json) {
		code = aas_json_print(saas__wire_usage(u));
	} else {
		printf("period %s", aas_fmt_time(a, sizeof(a), u->from_ms));
		printf(" to %s\n", aas_fmt_time(a, sizeof(a), u->to_ms));
		printf("%-28s %-8s %10s %14s\n", "SANDBOX", "SIZE", "SECONDS", "COST");
		for (k = 0; k < u->count; k++) {
			const saas_usage_line *l = u->lines[k];

			printf("%-28s %-8s %10lld %14s%s\n", l->sandbox_id, l->size, (long long)l->seconds,
			       aas_fmt_usd(b, sizeof(b), l->cost_usd_micro), l->running ? "  (running)" : "");
		}
		printf("%-28s %-8s %10lld %14s\n", "TOTAL", "", (long long)u->total_seconds,
		       aas_fmt_usd(b, sizeof(b), u->total_usd_micro));
	}
	saas_usage_free(u);
	saas_client_free(client);
	return code;
}
