/*
 * The whole HTTP front end: the input is what a client sends on one
 * connection to aas-server (running in-process on the fake driver), so
 * libmicrohttpd's parsing, the router, authentication, query and body
 * parsing, every handler and MCP at /v1/mcp all see it. "@KEY@" in the input
 * becomes a valid API key and "@SB@" the id of a running sandbox with port
 * 8000 exposed (fuzz.h).
 *
 * Oracle: the sanitizers. With FUZZ_STRICT=1 set, a 500 answer aborts too:
 * bad input should never get one.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fuzz_tenant tenant;
static int strict;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	strict = getenv("FUZZ_STRICT") && strcmp(getenv("FUZZ_STRICT"), "1") == 0;
	fuzz_server_start(fuzz_driver(NULL), &tenant);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char answer[64];
	size_t len = size, got;
	char *req = fuzz_substitute(data, &len, &tenant);

	got = fuzz_server_exchange(req, len, answer, sizeof(answer) - 1);
	answer[got] = '\0';
	if (strict && strncmp(answer, "HTTP/1.", 7) == 0 && strncmp(answer + 8, " 500 ", 5) == 0)
		abort();
	free(req);
	return 0;
}
