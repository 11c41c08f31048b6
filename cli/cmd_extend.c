/*
 * aas extend: push a sandbox's expiry out.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include "common.h"

static const char help[] =
	"usage: aas extend ID DURATION [--json]\n"
	"\n"
	"Push a sandbox's expiry out by DURATION (90, 90s, 15m, 2h) and print the new expiry.\n";

int aas_cmd_extend(aas_ctx *ctx, int argc, char **argv)
{
	saas_client *client = NULL;
	saas_sandbox *sb = NULL;
	const char *pos[2] = { NULL, NULL };
	int i, r, rc, code, n = 0;
	int64_t secs;

	for (i = 1; i < argc; i++) {
		if ((r = aas_common_opt(ctx, "extend", argc, argv, &i)) != 0) {
			if (r < 0)
				return AAS_EXIT_USAGE;
		} else if (argv[i][0] == '-' || n >= 2) {
			return aas_usage_error("extend", "unexpected argument '%s'", argv[i]);
		} else {
			pos[n++] = argv[i];
		}
	}
	if (aas_help(ctx, help))
		return AAS_EXIT_OK;
	if (n != 2)
		return aas_usage_error("extend", "need a sandbox ID and a DURATION");
	if (aas_parse_duration(pos[1], &secs) < 0)
		return aas_usage_error("extend", "bad duration '%s' (use 90, 90s, 15m or 2h)", pos[1]);
	if ((code = aas_open(ctx, &client)) != AAS_EXIT_OK)
		return code;
	if ((rc = saas_sandbox_extend(&sb, client, pos[0], secs, 0)) != SAAS_OK) {
		code = aas_fail(rc, pos[0]);
	} else if (ctx->json) {
		code = aas_json_print(saas__wire_sandbox(sb));
	} else {
		char t[32];

		printf("%s expires at %s\n", sb->id, aas_fmt_time(t, sizeof(t), sb->expires_at_ms));
	}
	saas_sandbox_free(sb);
	saas_client_free(client);
	return code;
}
