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
	int i, rc, code, n = 0;
	int64_t secs;

	for (i = 1; i < argc; i++)
		if ((code = aas_arg(ctx, "extend", argc, argv, &i, pos, 2, &n)) != AAS_EXIT_OK)
			return code;
	if ((code = aas_args_done(ctx, "extend", help, n, 2, "sandbox ID", "DURATION")) != AAS_GO)
		return code;
	if ((code = aas_duration("extend", pos[1], &secs)) != AAS_EXIT_OK)
		return code;
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
