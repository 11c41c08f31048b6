/*
 * aas fork, aas pause, aas resume: a sandbox's state saved and made again.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"

static const char fork_help[] =
	"usage: aas fork ID [-n N] [--timeout DURATION] [--json]\n"
	"\n"
	"Make N (1 to 10, default 1) new sandboxes from a running one, each with its memory,\n"
	"processes and files as they are now, and print their ids, one a line. Each child is\n"
	"billed on its own from when it is ready and expires after DURATION (90, 90s, 15m, 2h;\n"
	"default the account's). The parent pauses only while its state is taken.\n";

static const char pause_help[] =
	"usage: aas pause ID [--json]\n"
	"\n"
	"Save a running sandbox's memory, processes and files and stop its VM. It then costs only\n"
	"its size's paused price (`aas account` shows it); its expiry keeps running.\n";

static const char resume_help[] =
	"usage: aas resume ID [--json]\n"
	"\n"
	"Bring a paused sandbox back on a new VM, with its processes, files and ports as they were.\n";

int aas_cmd_fork(aas_ctx *ctx, int argc, char **argv)
{
	saas_fork_options o = SAAS_FORK_OPTIONS_INIT;
	saas_client *client = NULL;
	saas_sandbox_list *kids = NULL;
	const char *id = NULL, *v;
	unsigned long count = 1;
	int i, r, rc, code, n = 0;

	for (i = 1; i < argc; i++) {
		if ((r = aas_opt("fork", argc, argv, &i, "--count", "-n", &v)) != 0) {
			if (r < 0)
				return AAS_EXIT_USAGE;
			if ((code = aas_count("fork", "-n", v, SAAS_FORK_MAX, &count)) != AAS_EXIT_OK)
				return code;
		} else if ((r = aas_opt("fork", argc, argv, &i, "--timeout", NULL, &v)) != 0) {
			if (r < 0)
				return AAS_EXIT_USAGE;
			if ((code = aas_duration("fork", v, &o.timeout_s)) != AAS_EXIT_OK)
				return code;
		} else if ((code = aas_arg(ctx, "fork", argc, argv, &i, &id, 1, &n)) != AAS_EXIT_OK) {
			return code;
		}
	}
	if ((code = aas_args_done(ctx, "fork", fork_help, n, 1, "sandbox ID", NULL)) != AAS_GO)
		return code;
	if ((code = aas_open(ctx, &client)) != AAS_EXIT_OK)
		return code;
	if ((rc = saas_sandbox_fork(&kids, client, id, (unsigned int)count, &o, 0)) != SAAS_OK) {
		code = aas_fail(rc, id);
	} else if (ctx->json) {
		code = aas_json_print(saas__wire_sandbox_list(kids));
	} else {
		for (size_t k = 0; k < kids->count; k++)
			printf("%s\n", kids->items[k]->id);
	}
	saas_sandbox_list_free(kids);
	saas_client_free(client);
	return code;
}

/* pause and resume: one ID, one call, the sandbox's new status. */
static int pause_or_resume(aas_ctx *ctx, int argc, char **argv, const char *cmd, const char *help,
                           int (*call)(saas_sandbox **, saas_client *, const char *, unsigned int))
{
	saas_client *client = NULL;
	saas_sandbox *sb = NULL;
	const char *id = NULL;
	int i, rc, code, n = 0;

	for (i = 1; i < argc; i++)
		if ((code = aas_arg(ctx, cmd, argc, argv, &i, &id, 1, &n)) != AAS_EXIT_OK)
			return code;
	if ((code = aas_args_done(ctx, cmd, help, n, 1, "sandbox ID", NULL)) != AAS_GO)
		return code;
	if ((code = aas_open(ctx, &client)) != AAS_EXIT_OK)
		return code;
	if ((rc = call(&sb, client, id, 0)) != SAAS_OK) {
		code = aas_fail(rc, id);
	} else if (ctx->json) {
		code = aas_json_print(saas__wire_sandbox(sb));
	} else {
		char t[32];

		printf("%s %s, expires at %s\n", sb->id, saas_sandbox_status_name(sb->status),
		       aas_fmt_time(t, sizeof(t), sb->expires_at_ms));
	}
	saas_sandbox_free(sb);
	saas_client_free(client);
	return code;
}

int aas_cmd_pause(aas_ctx *ctx, int argc, char **argv)
{
	return pause_or_resume(ctx, argc, argv, "pause", pause_help, saas_sandbox_pause);
}

int aas_cmd_resume(aas_ctx *ctx, int argc, char **argv)
{
	return pause_or_resume(ctx, argc, argv, "resume", resume_help, saas_sandbox_resume);
}
