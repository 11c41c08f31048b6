/*
 * aas expose: expose a port of a sandbox and print its preview URL.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdlib.h>

#include "common.h"

static const char help[] =
	"usage: aas expose ID PORT [--json]\n"
	"\n"
	"Expose a TCP port of a sandbox and print its preview URL.\n";

int aas_cmd_expose(aas_ctx *ctx, int argc, char **argv)
{
	saas_client *client = NULL;
	const char *pos[2] = { NULL, NULL };
	char *url = NULL, *end;
	int i, r, rc, code, n = 0;
	long port;

	for (i = 1; i < argc; i++) {
		if ((r = aas_common_opt(ctx, "expose", argc, argv, &i)) != 0) {
			if (r < 0)
				return AAS_EXIT_USAGE;
		} else if (argv[i][0] == '-' || n >= 2) {
			return aas_usage_error("expose", "unexpected argument '%s'", argv[i]);
		} else {
			pos[n++] = argv[i];
		}
	}
	if (aas_help(ctx, help))
		return AAS_EXIT_OK;
	if (n != 2)
		return aas_usage_error("expose", "need a sandbox ID and a PORT");
	port = strtol(pos[1], &end, 10);
	if (*end || end == pos[1] || port < 1 || port > 65535)
		return aas_usage_error("expose", "bad port '%s' (1-65535)", pos[1]);
	if ((code = aas_open(ctx, &client)) != AAS_EXIT_OK)
		return code;
	if ((rc = saas_port_expose(&url, client, pos[0], (unsigned int)port)) != SAAS_OK)
		code = aas_fail(rc, pos[0]);
	else if (ctx->json)
		code = aas_json_print(json_pack("{s:s,s:i,s:s}", "sandbox_id", pos[0], "port", (int)port, "url", url));
	else
		printf("%s\n", url);
	saas_free(url);
	saas_client_free(client);
	return code;
}
