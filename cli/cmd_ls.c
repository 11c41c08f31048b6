/*
 * aas ls: list sandboxes, newest first.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"

static const char help[] =
	"usage: aas ls [--all] [--json]\n"
	"\n"
	"List your sandboxes, newest first: id, status, size, created, expires, cost.\n"
	"Without --all only sandboxes not yet destroyed are shown.\n";

int aas_cmd_ls(aas_ctx *ctx, int argc, char **argv)
{
	saas_client *client = NULL;
	saas_sandbox_list *page = NULL;
	char *cursor = NULL;
	json_t *arr = NULL;
	int i, rc, code, n = 0, all = 0, header = 0;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--all") == 0 || strcmp(argv[i], "-a") == 0) {
			all = 1;
		} else if ((code = aas_arg(ctx, "ls", argc, argv, &i, NULL, 0, &n)) != AAS_EXIT_OK) {
			return code;
		}
	}
	if ((code = aas_args_done(ctx, "ls", help, n, 0, NULL, NULL)) != AAS_GO)
		return code;
	if ((code = aas_open(ctx, &client)) != AAS_EXIT_OK)
		return code;
	if (ctx->json)
		arr = json_array();
	for (;;) {
		size_t k;

		rc = saas_sandbox_list_get(&page, client, cursor, 100, all ? 0 : SAAS_LIST_ACTIVE);
		free(cursor);
		cursor = NULL;
		if (rc != SAAS_OK) {
			code = aas_fail(rc, "ls");
			goto out;
		}
		for (k = 0; k < page->count; k++) {
			const saas_sandbox *sb = page->items[k];
			char created[32], expires[32], cost[40];

			if (arr) {
				json_array_append_new(arr, saas__wire_sandbox(sb));
				continue;
			}
			if (!header++)
				printf("%-28s %-10s %-8s %-21s %-21s %s\n", "ID", "STATUS", "SIZE", "CREATED", "EXPIRES", "COST");
			printf("%-28s %-10s %-8s %-21s %-21s %s\n", sb->id, saas_sandbox_status_name(sb->status), sb->size,
			       aas_fmt_time(created, sizeof(created), sb->created_at_ms),
			       sb->status == SAAS_SANDBOX_DESTROYED ? "-" : aas_fmt_time(expires, sizeof(expires), sb->expires_at_ms),
			       aas_fmt_usd(cost, sizeof(cost), sb->cost_usd_micro));
		}
		if (page->next_cursor && !(cursor = strdup(page->next_cursor))) {
			code = aas_error(AAS_EXIT_ERROR, "out of memory");
			goto out;
		}
		saas_sandbox_list_free(page);
		page = NULL;
		if (!cursor)
			break;
	}
	if (arr) {
		code = aas_json_print(arr);
		arr = NULL;
	} else if (!header) {
		fprintf(stderr, "no sandboxes%s\n", all ? "" : " (use --all to include destroyed ones)");
	}
out:
	json_decref(arr);
	saas_sandbox_list_free(page);
	free(cursor);
	saas_client_free(client);
	return code;
}
