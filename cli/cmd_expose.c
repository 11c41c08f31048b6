/*
 * aas expose / aas unexpose: a sandbox's ports on preview URLs.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdlib.h>

#include "common.h"

static const char expose_help[] =
	"usage: aas expose ID PORT [--json]\n"
	"\n"
	"Expose a TCP port of a sandbox and print its preview URL. Each exposure has its own\n"
	"unguessable URL: sharing it opens no other port. Exposing again prints the same URL.\n";

static const char unexpose_help[] =
	"usage: aas unexpose ID PORT [--json]\n"
	"\n"
	"Stop exposing a port: its preview URL stops working at once, open connections\n"
	"included. Exposing it again gives a new URL. A port that is not exposed is fine.\n";

/* ID and PORT of `aas expose|unexpose`: AAS_GO, or the exit status after saying why (or printing help). */
static int port_args(aas_ctx *ctx, const char *cmd, const char *help, int argc, char **argv, const char **id,
                     unsigned int *port)
{
	const char *pos[2] = { NULL, NULL };
	char *end;
	int i, code, n = 0;
	long p;

	for (i = 1; i < argc; i++)
		if ((code = aas_arg(ctx, cmd, argc, argv, &i, pos, 2, &n)) != AAS_EXIT_OK)
			return code;
	if ((code = aas_args_done(ctx, cmd, help, n, 2, "sandbox ID", "PORT")) != AAS_GO)
		return code;
	p = strtol(pos[1], &end, 10);
	if (*end || end == pos[1] || p < 1 || p > 65535)
		return aas_usage_error(cmd, "bad port '%s' (1-65535)", pos[1]);
	*id = pos[0];
	*port = (unsigned int)p;
	return AAS_GO;
}

int aas_cmd_expose(aas_ctx *ctx, int argc, char **argv)
{
	saas_client *client = NULL;
	const char *id = NULL;
	unsigned int port = 0;
	char *url = NULL;
	int rc, code;

	if ((code = port_args(ctx, "expose", expose_help, argc, argv, &id, &port)) != AAS_GO)
		return code;
	if ((code = aas_open(ctx, &client)) != AAS_EXIT_OK)
		return code;
	if ((rc = saas_port_expose(&url, client, id, port, 0)) != SAAS_OK)
		code = aas_fail(rc, id);
	else if (ctx->json)
		code = aas_json_print(saas__wire_port(id, (unsigned int)port, url));
	else
		printf("%s\n", url);
	saas_free(url);
	saas_client_free(client);
	return code;
}

int aas_cmd_unexpose(aas_ctx *ctx, int argc, char **argv)
{
	saas_client *client = NULL;
	const char *id = NULL;
	unsigned int port = 0;
	int rc, code;

	if ((code = port_args(ctx, "unexpose", unexpose_help, argc, argv, &id, &port)) != AAS_GO)
		return code;
	if ((code = aas_open(ctx, &client)) != AAS_EXIT_OK)
		return code;
	if ((rc = saas_port_unexpose(client, id, port)) != SAAS_OK)
		code = aas_fail(rc, id);
	else if (ctx->json)
		code = aas_json_print(json_pack("{s:s,s:i,s:b}", "sandbox_id", id, "port", (int)port, "exposed", 0));
	else
		printf("%s: port %u is not exposed\n", id, port);
	saas_client_free(client);
	return code;
}
