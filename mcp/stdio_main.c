/*
 * aas-mcp: MCP over stdio, the transport only. The protocol and the tools are
 * mcp/ (aas_mcp), shared with aas-server's Streamable HTTP endpoint.
 *
 * One JSON-RPC message (or batch) per line on stdin, one response per line on
 * stdout, flushed after each; logs go to stderr only. Nothing but this loop
 * writes to stdout: the real stdout is kept on a private stream and fd 1 is
 * pointed at stderr, so a stray printf anywhere cannot corrupt the framing.
 * Messages are handled one at a time, in order (one client; a long
 * create_sandbox holds the loop, which stdio allows).
 *
 * The account's client is the remote one: saas_client_open_remote(AAS_BASE_URL,
 * AAS_API_KEY), opened at the first tools/call, so initialize and tools/list
 * work with no key or no server. Until it opens, tool calls answer an isError
 * result that says how to set AAS_API_KEY; an open that failed for want of a
 * network is tried again on the next call.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aas_mcp.h"

#define DEFAULT_BASE_URL "http://127.0.0.1:8080"

static const char key_hint[] =
	"the AAS_API_KEY environment variable of aas-mcp (\"env\": {\"AAS_API_KEY\": \"aas_sk_...\"} in this "
	"server's entry of the MCP client's configuration; restart the server after changing it)";

static const char usage[] =
	"usage: aas-mcp [--help | --version]\n"
	"\n"
	"The libsaas MCP server over stdio: newline-delimited JSON-RPC on stdin and\n"
	"stdout, logs on stderr. Start it from an MCP client (Claude Desktop, Claude\n"
	"Code, ...) rather than by hand.\n"
	"\n"
	"Environment:\n"
	"  AAS_API_KEY   required for tool calls: an \"aas_sk_...\" key\n"
	"  AAS_BASE_URL  the server's origin, without /v1 (default " DEFAULT_BASE_URL ")\n"
	"\n"
	"  --help        print this help\n"
	"  --version     print the version\n";

struct state {
	const char *base_url;
	const char *api_key;     /* NULL when unset or empty */
	saas_client *client;
	int client_status;       /* 0 or the saas_status of the last open */
};

/* Does the message (or a member of the batch) call a tool? */
static bool calls_tool(const json_t *msg)
{
	const json_t *m;
	size_t i;

	if (!json_is_array(msg)) {
		const char *method = json_string_value(json_object_get(msg, "method"));
		return method && strcmp(method, "tools/call") == 0;
	}
	json_array_foreach(msg, i, m)
		if (calls_tool(m))
			return true;
	return false;
}

/* Open the client if a tool is about to need it; failures stay in client_status. */
static void ensure_client(struct state *st)
{
	const saas_error *e;
	int rc;

	if (st->client || !st->api_key || st->client_status == SAAS_EAUTH || st->client_status == SAAS_EINVAL)
		return;
	rc = saas_client_open_remote(&st->client, st->base_url, st->api_key, NULL, 0);
	if (rc == SAAS_OK) {
		st->client_status = 0;
		fprintf(stderr, "aas-mcp: connected to %s as account %s\n", st->base_url,
		        saas_client_account_id(st->client));
		return;
	}
	st->client = NULL;
	st->client_status = rc;
	e = saas_error_last();
	fprintf(stderr, "aas-mcp: cannot open a client for %s: %s\n", st->base_url,
	        e->code == rc && e->message[0] ? e->message : saas_strerror(rc));
}

/* Write one message as one line and flush; false when stdout is gone. */
static bool send_line(FILE *out, json_t *msg)
{
	char *text = json_dumps(msg, JSON_COMPACT);
	bool ok;

	json_decref(msg);
	if (!text) {
		fprintf(stderr, "aas-mcp: out of memory\n");
		return true;
	}
	ok = fputs(text, out) >= 0 && fputc('\n', out) != EOF && fflush(out) == 0;
	free(text);
	if (!ok)
		fprintf(stderr, "aas-mcp: cannot write to stdout: %s\n", strerror(errno));
	return ok;
}

static bool blank(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
			return false;
	return true;
}

int main(int argc, char **argv)
{
	struct state st = { 0 };
	aas_mcp_ctx ctx = { NULL, 0, NULL, 0, key_hint, 0 };
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	FILE *out;
	int fd, rc = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(usage, stdout);
			return 0;
		}
		if (strcmp(argv[i], "--version") == 0) {
			printf("aas-mcp %s\n", saas_version());
			return 0;
		}
		fprintf(stderr, "aas-mcp: unknown argument \"%s\"\n%s", argv[i], usage);
		return 2;
	}

	/* Keep the real stdout for messages only; anything else printing to fd 1 lands on stderr. */
	signal(SIGPIPE, SIG_IGN);
	if ((fd = dup(STDOUT_FILENO)) < 0 || !(out = fdopen(fd, "w")) || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
		fprintf(stderr, "aas-mcp: cannot set up stdout: %s\n", strerror(errno));
		return 1;
	}

	st.base_url = getenv("AAS_BASE_URL");
	if (!st.base_url || !*st.base_url)
		st.base_url = DEFAULT_BASE_URL;
	st.api_key = getenv("AAS_API_KEY");
	if (st.api_key && !*st.api_key)
		st.api_key = NULL;
	if (!st.api_key)
		fprintf(stderr, "aas-mcp: AAS_API_KEY is not set; tool calls will say how to set it\n");

	while ((n = getline(&line, &cap, stdin)) >= 0) {
		json_t *msg, *resp = NULL;

		if (blank(line, (size_t)n))
			continue;
		if (!(msg = aas_mcp_parse(line, (size_t)n, &resp))) {
			if (resp && !send_line(out, resp)) {
				rc = 1;
				break;
			}
			continue;
		}
		if (calls_tool(msg))
			ensure_client(&st);
		ctx.client = st.client;
		ctx.client_status = st.client_status;
		resp = aas_mcp_handle(&ctx, msg);
		json_decref(msg);
		if (resp && !send_line(out, resp)) {
			rc = 1;
			break;
		}
	}
	free(line);
	saas_client_free(st.client);
	fclose(out);
	return rc;
}
