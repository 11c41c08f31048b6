/*
 * aas: the command-line tool for libsaas, over <saas.h> and a remote client.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"

static const char usage_text[] =
	"usage: aas [--url URL] [--key KEY] [--json] COMMAND [ARGS...]\n"
	"\n"
	"Sandboxes as a service, from the command line.\n"
	"\n"
	"Commands:\n"
	"  create [--size S] [--timeout 15m] [--image I] [--network isolated|internet]\n"
	"         [--allow RULE]... [--deny RULE]... [--metadata K=V]... [-e NAME=VALUE]...\n"
	"                          create a sandbox and print its id\n"
	"  ls [--all]              list sandboxes, newest first\n"
	"  get ID                  show one sandbox\n"
	"  exec ID -- CMD...       run a command; exits with its exit code\n"
	"  run ID [FILE|-]         run code (Python, JavaScript, bash) in a code context, as a notebook cell\n"
	"  shell ID                open a terminal in a sandbox (as ssh); exits with the shell's status\n"
	"  cp SRC DST              copy a file in or out (ID:/path like scp, - for stdin/stdout)\n"
	"  files ID [PATH]         show a directory tree\n"
	"  expose ID PORT          expose a port and print its preview URL\n"
	"  unexpose ID PORT        stop exposing a port (its URL stops working)\n"
	"  extend ID DURATION      push the expiry out (90, 90s, 15m, 2h)\n"
	"  fork ID [-n N]          make N sandboxes from a running one's state; prints their ids\n"
	"  pause ID                save a sandbox and stop its VM (billed its paused price)\n"
	"  resume ID               bring a paused sandbox back\n"
	"  history ID [-n N]       a sandbox's commands, newest first\n"
	"  metrics ID [-n N]       a running sandbox's CPU, memory and disk over time\n"
	"  network ID [--isolated|--internet|--allow RULE... --deny RULE...]\n"
	"                          show or change a sandbox's network policy\n"
	"  rm ID...                destroy sandboxes\n"
	"  usage [--from T] [--to T]  usage and cost over a period\n"
	"  account                 balance, limits and prices\n"
	"  login [--key K] [--url U]  verify and save credentials\n"
	"  e2b                     print the environment for E2B's SDKs: eval \"$(aas e2b)\"\n"
	"\n"
	"Options (global, or after any command):\n"
	"  --url URL     server origin (default: AAS_BASE_URL, the config file, " AAS_DEFAULT_URL ")\n"
	"  --key KEY     API key (default: AAS_API_KEY, then the config file)\n"
	"  --json        machine-readable JSON output\n"
	"  -h, --help    help (`aas COMMAND --help` for a command's)\n"
	"  --version     print the version\n"
	"\n"
	"Configuration: $XDG_CONFIG_HOME/aas/config (~/.config/aas/config), written by `aas login`.\n"
	"\n"
	"Exit status:\n"
	"  0  success\n"
	"  1  any other failure\n"
	"  2  usage error\n"
	"  3  missing or invalid API key\n"
	"  4  not found\n"
	"  5  server or network failure\n"
	"  6  insufficient credit or account limit\n"
	"  `aas exec` exits with the command's own exit code (124 if it timed out, 130 if cancelled),\n"
	"  `aas run` with 1 if the code raised, 124 if it timed out; `aas shell` with the shell's;\n"
	"  when the command could not run at all, 2, 3, 4 or 6 as above and 5 otherwise.\n";

static const struct {
	const char *name;
	aas_cmd_fn fn;
} commands[] = {
	{ "create", aas_cmd_create }, { "ls", aas_cmd_ls },         { "list", aas_cmd_ls },
	{ "get", aas_cmd_get },       { "exec", aas_cmd_exec },     { "cp", aas_cmd_cp },
	{ "files", aas_cmd_files },   { "expose", aas_cmd_expose }, { "extend", aas_cmd_extend },
	{ "rm", aas_cmd_rm },         { "usage", aas_cmd_usage },   { "account", aas_cmd_account },
	{ "login", aas_cmd_login },   { "unexpose", aas_cmd_unexpose }, { "network", aas_cmd_network },
	{ "shell", aas_cmd_shell },   { "fork", aas_cmd_fork },     { "pause", aas_cmd_pause },
	{ "resume", aas_cmd_resume }, { "history", aas_cmd_history }, { "e2b", aas_cmd_e2b },
	{ "metrics", aas_cmd_metrics }, { "run", aas_cmd_run },
};

int main(int argc, char **argv)
{
	aas_ctx ctx;
	int i, r;
	size_t k;

	memset(&ctx, 0, sizeof(ctx));
	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--version") == 0) {
			printf("aas %s\n", saas_version());
			return AAS_EXIT_OK;
		}
		r = aas_common_opt(&ctx, NULL, argc, argv, &i);
		if (r < 0)
			return AAS_EXIT_USAGE;
		if (r == 0)
			return aas_usage_error(NULL, "unknown option '%s'", argv[i]);
	}
	if (i >= argc) {
		if (ctx.help) {
			fputs(usage_text, stdout);
			return AAS_EXIT_OK;
		}
		fputs(usage_text, stderr);
		return AAS_EXIT_USAGE;
	}
	if (strcmp(argv[i], "help") == 0) {
		if (i + 1 >= argc) {
			fputs(usage_text, stdout);
			return AAS_EXIT_OK;
		}
		i++;
		ctx.help = 1;
	}
	for (k = 0; k < sizeof(commands) / sizeof(commands[0]); k++)
		if (strcmp(argv[i], commands[k].name) == 0)
			return commands[k].fn(&ctx, argc - i, argv + i);
	return aas_usage_error(NULL, "unknown command '%s'", argv[i]);
}
