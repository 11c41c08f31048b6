/*
 * aas rm: destroy sandboxes.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <limits.h>

#include "common.h"

static const char help[] =
	"usage: aas rm ID... [--json]\n"
	"\n"
	"Destroy sandboxes and print each id with its final cost. Destroying a destroyed\n"
	"sandbox succeeds. On failures, the exit status is the first failure's.\n";

int aas_cmd_rm(aas_ctx *ctx, int argc, char **argv)
{
	saas_client *client = NULL;
	json_t *arr = NULL;
	int i, rc, code, n = 0, first = AAS_EXIT_OK;

	for (i = 1; i < argc; i++)
		if ((code = aas_arg(ctx, "rm", argc, argv, &i, NULL, INT_MAX, &n)) != AAS_EXIT_OK)
			return code;
	if ((code = aas_args_done(ctx, "rm", help, n, 1, "sandbox ID", NULL)) != AAS_GO)
		return code;
	if ((code = aas_open(ctx, &client)) != AAS_EXIT_OK)
		return code;
	if (ctx->json)
		arr = json_array();
	for (i = 1; i < argc; i++) {
		saas_sandbox *sb = NULL;

		if (argv[i][0] == '-') {
			if (aas_common_opt(ctx, "rm", argc, argv, &i) < 0)
				break;
			continue;
		}
		if ((rc = saas_sandbox_destroy(&sb, client, argv[i], 0)) != SAAS_OK) {
			code = aas_fail(rc, argv[i]);
			if (first == AAS_EXIT_OK)
				first = code;
		} else if (arr) {
			json_array_append_new(arr, saas__wire_sandbox(sb));
		} else {
			char usd[40];

			printf("%s destroyed (cost %s)\n", sb->id, aas_fmt_usd(usd, sizeof(usd), sb->cost_usd_micro));
		}
		saas_sandbox_free(sb);
	}
	if (arr)
		aas_json_print(arr);
	saas_client_free(client);
	return first;
}
