/*
 * aas get: show one sandbox.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include "common.h"

static const char help[] =
	"usage: aas get ID [--json]\n"
	"\n"
	"Show a sandbox: status, size, image, times, cost, exposed ports and network policy.\n";

int aas_cmd_get(aas_ctx *ctx, int argc, char **argv)
{
	saas_client *client = NULL;
	saas_sandbox *sb = NULL;
	const char *id = NULL;
	int i, rc, code, n = 0;
	size_t k;

	for (i = 1; i < argc; i++)
		if ((code = aas_arg(ctx, "get", argc, argv, &i, &id, 1, &n)) != AAS_EXIT_OK)
			return code;
	if ((code = aas_args_done(ctx, "get", help, n, 1, "sandbox ID", NULL)) != AAS_GO)
		return code;
	if ((code = aas_open(ctx, &client)) != AAS_EXIT_OK)
		return code;
	if ((rc = saas_sandbox_get(&sb, client, id)) != SAAS_OK) {
		code = aas_fail(rc, id);
	} else if (ctx->json) {
		code = aas_json_print(saas__wire_sandbox(sb));
	} else {
		char t[32], usd[40];

		printf("id:         %s\n", sb->id);
		printf("status:     %s", saas_sandbox_status_name(sb->status));
		if (sb->end_reason)
			printf(" (%s)", saas_end_reason_name(sb->end_reason));
		putchar('\n');
		printf("size:       %s (%u vCPU, %u MB memory, %u GB disk)\n", sb->size, sb->vcpus, sb->memory_mb, sb->disk_gb);
		printf("image:      %s\n", sb->image ? sb->image : "-");
		printf("created:    %s\n", aas_fmt_time(t, sizeof(t), sb->created_at_ms));
		printf("ready:      %s\n", aas_fmt_time(t, sizeof(t), sb->ready_at_ms));
		printf("expires:    %s\n", aas_fmt_time(t, sizeof(t), sb->expires_at_ms));
		if (sb->destroyed_at_ms)
			printf("destroyed:  %s\n", aas_fmt_time(t, sizeof(t), sb->destroyed_at_ms));
		printf("cost:       %s\n", aas_fmt_usd(usd, sizeof(usd), sb->cost_usd_micro));
		for (k = 0; k < sb->nports; k++)
			printf("port %-5u  %s\n", sb->ports[k]->port, sb->ports[k]->url ? sb->ports[k]->url : "");
		aas_print_network(sb->network);
	}
	saas_sandbox_free(sb);
	saas_client_free(client);
	return code;
}
