/*
 * aas e2b: the environment that points code written for E2B's SDKs at this
 * server (its E2B-compatible face, docs/e2b.md), for `eval "$(aas e2b)"`.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"

static const char help[] =
	"usage: aas e2b [--json]\n"
	"\n"
	"Print the three variables E2B's SDKs read, for the server and key aas uses:\n"
	"E2B_API_URL (the server's /e2b), E2B_SANDBOX_URL (its /e2b-sandbox) and\n"
	"E2B_API_KEY (your key in E2B's shape: the same secret, revoked with it).\n"
	"The key is checked with the server first. Then code written for E2B runs\n"
	"against this server unchanged:\n"
	"\n"
	"  eval \"$(aas e2b)\" && node agent.js\n"
	"\n"
	"The output holds your key: do not paste it where others read.\n";

/* One `export NAME='value'` line, the value quoted for a POSIX shell. */
static void print_export(const char *name, const char *prefix, const char *value)
{
	printf("export %s='", name);
	for (const char *s = prefix; *s; s++)
		*s == '\'' ? fputs("'\\''", stdout) : putchar(*s);
	for (const char *s = value; *s; s++)
		*s == '\'' ? fputs("'\\''", stdout) : putchar(*s);
	fputs("'\n", stdout);
}

int aas_cmd_e2b(aas_ctx *ctx, int argc, char **argv)
{
	saas_client *client = NULL;
	char *url = NULL, *key = NULL, e2b[SAAS_KEY_E2B_LEN + 1], check[SAAS_KEY_LEN + 1];
	size_t n;
	int i, code, nargs = 0;

	for (i = 1; i < argc; i++)
		if ((code = aas_arg(ctx, "e2b", argc, argv, &i, NULL, 0, &nargs)) != AAS_EXIT_OK)
			return code;
	if ((code = aas_args_done(ctx, "e2b", help, nargs, 0, NULL, NULL)) != AAS_GO)
		return code;
	if ((code = aas_credentials(ctx, &url, &key)) != AAS_EXIT_OK)
		return code;
	/* A key given already in E2B's shape is kept; anything else must be a key of ours. */
	if (saas_key_from_e2b(check, key) == SAAS_OK)
		snprintf(e2b, sizeof(e2b), "%s", key);
	else if (saas_key_to_e2b(e2b, key) != SAAS_OK) {
		code = aas_error(AAS_EXIT_AUTH, "the API key is not in a key's shape (aas_sk_ and 43 letters or digits): "
		                                "run `aas login` or set AAS_API_KEY");
		goto out;
	}
	/* Only a key the server knows is worth printing: the same check every command makes. */
	if ((code = aas_open(ctx, &client)) != AAS_EXIT_OK)
		goto out;
	n = strlen(url);
	while (n > 0 && url[n - 1] == '/')
		url[--n] = '\0';
	if (ctx->json) {
		code = aas_json_print(json_pack("{s:s+,s:s+,s:s}", "E2B_API_URL", url, "/e2b", "E2B_SANDBOX_URL", url,
		                                 "/e2b-sandbox", "E2B_API_KEY", e2b));
	} else {
		print_export("E2B_API_URL", url, "/e2b");
		print_export("E2B_SANDBOX_URL", url, "/e2b-sandbox");
		print_export("E2B_API_KEY", "", e2b);
	}
out:
	saas_client_free(client);
	free(url);
	free(key);
	return code;
}
