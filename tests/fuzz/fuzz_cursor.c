/*
 * The two list cursors: saas_sandbox_list_get's ("<created_at_ms>.<id>", on
 * a local engine with the fake driver) and MCP tools/list's ("t<index>").
 * Each is accepted exactly when it has the documented form: digits (at most
 * 18 of them, no sign, no space) and then the rest; a cursor the list gave
 * out, passed back, gives the next page.
 */
#include <stdlib.h>
#include <string.h>

#include "aas_mcp.h"
#include "fuzz.h"
#include "mcp_internal.h"
#include "util/util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fuzz_tenant tenant;
static saas_engine *engine;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox_list *list = NULL;

	(void)argc;
	(void)argv;
	engine = fuzz_engine_open(fuzz_driver(NULL), &tenant);
	/* A second sandbox, so that a page of one has a next page. */
	if (saas_sandbox_create(NULL, tenant.client, &o, 0) != SAAS_OK)
		abort();
	/* The cursor the list gives out leads to the other sandbox. */
	if (saas_sandbox_list_get(&list, tenant.client, NULL, 1, 0) != SAAS_OK || list->count != 1 ||
	    !list->next_cursor)
		abort();
	{
		char *cursor = strdup(list->next_cursor), *first = strdup(list->items[0]->id);
		saas_sandbox_list_free(list);
		if (saas_sandbox_list_get(&list, tenant.client, cursor, 1, 0) != SAAS_OK || list->count != 1 ||
		    strcmp(list->items[0]->id, first) == 0 || list->next_cursor)
			abort();
		saas_sandbox_list_free(list);
		free(cursor);
		free(first);
	}
	return 0;
}

/* n > 0 digits, at most 18 (no overflow), then what the caller checks. */
static size_t digits(const char *s)
{
	size_t n = strspn(s, "0123456789");

	return n <= 18 ? n : 0;
}

static bool sandbox_cursor_ok(const char *s)
{
	size_t n = digits(s);

	return n > 0 && s[n] == '.' && saas__valid_text(s + n + 1, SAAS_ID_MAX) && strlen(s) <= 128;
}

static bool tools_cursor_ok(const char *s)
{
	size_t n = s[0] == 't' ? digits(s + 1) : 0;

	return n > 0 && !s[1 + n] && strtoull(s + 1, NULL, 10) <= aas_mcp_ntools();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	saas_sandbox_list *list = NULL;
	aas_mcp_ctx ctx;
	char text[200];
	json_t *req, *res;
	int rc;

	if (size >= sizeof(text))
		size = sizeof(text) - 1;
	memcpy(text, data, size);
	text[size] = '\0';
	if (strlen(text) != size || !*text)
		return 0; /* a NUL cannot reach either parser */

	rc = saas_sandbox_list_get(&list, tenant.client, text, 10, 0);
	if ((rc == SAAS_OK) != sandbox_cursor_ok(text) || (rc != SAAS_OK && rc != SAAS_EINVAL))
		abort();
	saas_sandbox_list_free(list);

	memset(&ctx, 0, sizeof(ctx));
	ctx.client = tenant.client;
	ctx.page_size = 2;
	req = json_pack("{s:s,s:i,s:s,s:{s:s}}", "jsonrpc", "2.0", "id", 1, "method", "tools/list", "params", "cursor",
	                text);
	if (!req)
		return 0; /* not UTF-8: JSON cannot carry it */
	res = aas_mcp_handle(&ctx, req);
	if (!res || (json_object_get(res, "result") != NULL) != tools_cursor_ok(text))
		abort();
	json_decref(res);
	json_decref(req);
	return 0;
}
