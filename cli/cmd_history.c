/*
 * aas history: a sandbox's executions, newest first.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* How much of a command a line of the table shows. */
#define COMMAND_SHOWN 60

static const char help[] =
	"usage: aas history ID [-n N] [--all] [--json]\n"
	"\n"
	"List a sandbox's commands, newest first: execution id, status, exit code, duration,\n"
	"start and the command (cut to fit a line; `--json` has it whole). Shows the latest N\n"
	"(default 20, at most 500), or every one the server still keeps with --all.\n"
	"A destroyed sandbox's history stays until the server prunes it.\n";

/* One line of the table; the command's control characters shown as '?', cut at COMMAND_SHOWN. */
static void print_row(const saas_execution *x)
{
	char started[32], took[32] = "-", code[16] = "-", cmd[COMMAND_SHOWN + 4];
	const char *c = x->command ? x->command : "";
	size_t n = 0;

	for (; c[n] && n < COMMAND_SHOWN; n++)
		cmd[n] = (unsigned char)c[n] < 0x20 || c[n] == 0x7f ? '?' : c[n];
	strcpy(cmd + n, c[n] ? "..." : "");
	if (x->status != SAAS_EXEC_RUNNING) {
		snprintf(took, sizeof(took), "%.1fs", (double)x->duration_ms / 1000.0);
		if (x->exit_code >= 0)
			snprintf(code, sizeof(code), "%d", x->exit_code);
	}
	printf("%-28s %-8s %-4s %-9s %-21s %s\n", x->id, saas_exec_status_name(x->status), code, took,
	       aas_fmt_time(started, sizeof(started), x->started_at_ms), cmd);
}

int aas_cmd_history(aas_ctx *ctx, int argc, char **argv)
{
	saas_client *client = NULL;
	saas_execution_list *page = NULL;
	const char *id = NULL, *v;
	char *cursor = NULL;
	json_t *arr = NULL;
	unsigned long want = 20;
	size_t shown = 0;
	int i, r, rc, code, n = 0, all = 0;

	for (i = 1; i < argc; i++) {
		if ((r = aas_opt("history", argc, argv, &i, "--limit", "-n", &v)) != 0) {
			if (r < 0)
				return AAS_EXIT_USAGE;
			if ((code = aas_count("history", "-n", v, SAAS_EXECUTION_LIST_MAX, &want)) != AAS_EXIT_OK)
				return code;
		} else if (strcmp(argv[i], "--all") == 0 || strcmp(argv[i], "-a") == 0) {
			all = 1;
		} else if ((code = aas_arg(ctx, "history", argc, argv, &i, &id, 1, &n)) != AAS_EXIT_OK) {
			return code;
		}
	}
	if ((code = aas_args_done(ctx, "history", help, n, 1, "sandbox ID", NULL)) != AAS_GO)
		return code;
	if ((code = aas_open(ctx, &client)) != AAS_EXIT_OK)
		return code;
	if (ctx->json && !(arr = json_array())) {
		code = aas_error(AAS_EXIT_ERROR, "out of memory");
		goto out;
	}
	for (;;) {
		unsigned int limit = all ? SAAS_EXECUTION_LIST_MAX : (unsigned int)(want - shown);

		rc = saas_execution_list_get(&page, client, id, cursor, limit, 0);
		free(cursor);
		cursor = NULL;
		if (rc != SAAS_OK) {
			code = aas_fail(rc, id);
			goto out;
		}
		for (size_t k = 0; k < page->count; k++, shown++) {
			if (arr) {
				json_array_append_new(arr, saas__wire_execution_brief(page->items[k]));
				continue;
			}
			if (!shown)
				printf("%-28s %-8s %-4s %-9s %-21s %s\n", "ID", "STATUS", "EXIT", "DURATION", "STARTED",
				       "COMMAND");
			print_row(page->items[k]);
		}
		if (page->next_cursor && (all || shown < want) && !(cursor = strdup(page->next_cursor))) {
			code = aas_error(AAS_EXIT_ERROR, "out of memory");
			goto out;
		}
		saas_execution_list_free(page);
		page = NULL;
		if (!cursor)
			break;
	}
	if (arr) {
		code = aas_json_print(arr);
		arr = NULL;
	} else if (!shown) {
		fprintf(stderr, "no commands have run in %s\n", id);
	}
out:
	json_decref(arr);
	saas_execution_list_free(page);
	free(cursor);
	saas_client_free(client);
	return code;
}
