/*
 * The error table: every status code from SAAS_OK to the newest has its row
 * in every column and on every surface: its name, text and HTTP status (the
 * library and the REST server), the remote client reading the name and the
 * status back, the aas CLI's exit code and hint, and the MCP tools' hint.
 * A code appended to SAAS_STATUS_LIST and forgotten in one of them fails here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "saas.h"
#include "util/error.h"
#ifdef SAAS_WITH_REMOTE
#include "remote/http.h"
#endif
#ifdef AAS_TEST_CLI
#include "../cli/common.h"
#endif
#ifdef AAS_TEST_MCP
#include "mcp_internal.h"
#endif

#define LIST_CODE(code, name, text, http) code,
static const int all_codes[] = { SAAS_STATUS_LIST(LIST_CODE) };
#undef LIST_CODE
#define NCODES (sizeof(all_codes) / sizeof(all_codes[0]))

static void test_list_is_dense(void **state)
{
	(void)state;
	/* Codes are append-only and dense: the list holds 0, -1, ... in order, and the library agrees. */
	assert_int_equal(NCODES, SAAS_STATUS_COUNT);
	for (size_t i = 0; i < NCODES; i++)
		assert_int_equal(all_codes[i], -(int)i);
	assert_int_equal(saas__error_code_last(), all_codes[NCODES - 1]);
	/* The newest code: a code added to the enum and not to the list fails the build (error.c) and here. */
	assert_int_equal(saas__error_code_last(), SAAS_EPERM);
}

static void test_library_columns(void **state)
{
	int last = saas__error_code_last();

	(void)state;
	for (size_t i = 0; i < NCODES; i++) {
		int code = all_codes[i];

		assert_string_not_equal(saas_strerror(code), "unknown error");
		assert_string_not_equal(saas_error_name(code), "unknown");
		if (code == SAAS_OK)
			assert_int_equal(saas_error_http_status(code), 200);
		else
			assert_true(saas_error_http_status(code) >= 400 && saas_error_http_status(code) <= 599);
		for (size_t j = i + 1; j < NCODES; j++) {
			assert_string_not_equal(saas_strerror(code), saas_strerror(all_codes[j]));
			assert_string_not_equal(saas_error_name(code), saas_error_name(all_codes[j]));
		}
	}
	/* Past either end: the fixed answers for an unknown code. */
	assert_string_equal(saas_strerror(-1000), "unknown error");
	assert_string_equal(saas_strerror(last - 1), "unknown error");
	assert_string_equal(saas_strerror(5), "unknown error");
	assert_string_equal(saas_error_name(last - 1), "unknown");
	assert_int_equal(saas_error_http_status(last - 1), 500);
	/* A few rows spelled out, as docs/errors.md and docs/rest.md give them. */
	assert_string_equal(saas_error_name(SAAS_ENOTFOUND), "not_found");
	assert_int_equal(saas_error_http_status(SAAS_EPERM), 403);
	assert_string_equal(saas_error_name(SAAS_EPERM), "permission_denied");
	assert_int_equal(saas_error_http_status(SAAS_ESTATE), 409);
}

static void test_remote_round_trip(void **state)
{
	(void)state;
	for (size_t i = 1; i < NCODES; i++) {
		int code = all_codes[i], http = saas_error_http_status(code);
		int back = saas__error_from_status(http);

#ifdef SAAS_WITH_REMOTE
		/* An error body's "code" comes back as the code itself. */
		assert_int_equal(saas__error_from_name(saas_error_name(code)), code);
#endif
		/* A bare status comes back as a code that answers with that status. */
		assert_int_not_equal(back, SAAS_OK);
		assert_int_equal(saas_error_http_status(back), http);
	}
	/* Where codes share a status, the one a bare status means. */
	assert_int_equal(saas__error_from_status(409), SAAS_ESTATE);
	assert_int_equal(saas__error_from_status(500), SAAS_ERROR);
	assert_int_equal(saas__error_from_status(502), SAAS_EBACKEND);
	assert_int_equal(saas__error_from_status(503), SAAS_ESTORE);
	/* A status no code answers with. */
	assert_int_equal(saas__error_from_status(418), SAAS_EPROTOCOL);
	assert_int_equal(saas__error_from_status(599), SAAS_ERROR);
}

#ifdef SAAS_WITH_REMOTE
/* When to retry, as an answer says it: its Retry-After header, else its body's retry_after (seconds). */
static void test_remote_retry_after(void **state)
{
	static const char busy[] = "{\"error\":{\"code\":\"busy\",\"message\":\"no room\"}}";
	static const char busy_body[] = "{\"error\":{\"code\":\"busy\",\"message\":\"no room\",\"retry_after\":10}}";
	static const char limit[] = "{\"error\":{\"code\":\"limit_exceeded\",\"message\":\"m\",\"limit\":"
	                            "\"max_executions\",\"retry_after\":2}}";
	saas__buf b = { 0 };

	(void)state;
	b.data = (char *)busy_body;
	b.len = sizeof(busy_body) - 1;
	assert_int_equal(saas__http_error_from(503, &b, 0), SAAS_EBUSY);
	assert_int_equal(saas_error_last()->retry_after_ms, 10000);
	assert_string_equal(saas_error_last()->message, "no room");
	assert_int_equal(saas__http_error_from(503, &b, 7), SAAS_EBUSY);
	assert_int_equal(saas_error_last()->retry_after_ms, 7000);
	b.data = (char *)busy;
	b.len = sizeof(busy) - 1;
	assert_int_equal(saas__http_error_from(503, &b, 7), SAAS_EBUSY);
	assert_int_equal(saas_error_last()->retry_after_ms, 7000);
	/* None said, or past a day: none. */
	assert_int_equal(saas__http_error_from_body(503, &b), SAAS_EBUSY);
	assert_int_equal(saas_error_last()->retry_after_ms, 0);
	assert_int_equal(saas__http_error_from(503, &b, 86401), SAAS_EBUSY);
	assert_int_equal(saas_error_last()->retry_after_ms, 0);
	/* A limit names itself as well. */
	b.data = (char *)limit;
	b.len = sizeof(limit) - 1;
	assert_int_equal(saas__http_error_from_body(429, &b), SAAS_ELIMIT);
	assert_string_equal(saas_error_last()->limit, "max_executions");
	assert_int_equal(saas_error_last()->retry_after_ms, 2000);
}
#endif

#ifdef AAS_TEST_CLI
static void test_cli_columns(void **state)
{
	(void)state;
	saas__error_clear();
	for (size_t i = 0; i < NCODES; i++) {
		int code = all_codes[i];

		assert_true(aas_status_known(code));
		assert_int_equal(aas_exit_code(code) == AAS_EXIT_OK, code == SAAS_OK);
		/* A failure the user can act on says how (docs/cli.md's exit codes 2, 3, 4, 6). */
		if (aas_exit_code(code) != AAS_EXIT_OK && aas_exit_code(code) != AAS_EXIT_ERROR &&
		    aas_exit_code(code) != AAS_EXIT_SERVER)
			assert_non_null(aas_hint(code));
	}
	assert_false(aas_status_known(saas__error_code_last() - 1));
	assert_int_equal(aas_exit_code(saas__error_code_last() - 1), AAS_EXIT_ERROR);
	assert_int_equal(aas_exit_code(SAAS_ENOTFOUND), AAS_EXIT_NOTFOUND);
	assert_int_equal(aas_exit_code(SAAS_ELIMIT), AAS_EXIT_CREDIT);
	assert_int_equal(aas_exit_code(SAAS_EIO), AAS_EXIT_ERROR);
	/* The server's own 5xx is the server's failure. */
	saas__error(SAAS_EIO, SAAS_ERRCLASS_HTTP, 500, "remote");
	assert_int_equal(aas_exit_code(SAAS_EIO), AAS_EXIT_SERVER);
	saas__error_clear();
}
#endif

#ifdef AAS_TEST_MCP
static void test_mcp_column(void **state)
{
	(void)state;
	for (size_t i = 0; i < NCODES; i++) {
		assert_true(aas_mcp_status_known(all_codes[i]));
		assert_true(aas_mcp_error_hint(all_codes[i])[0] != '\0');
	}
	assert_false(aas_mcp_status_known(saas__error_code_last() - 1));
	assert_string_equal(aas_mcp_error_hint(saas__error_code_last() - 1), aas_mcp_error_hint(SAAS_ERROR));
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_list_is_dense),
		cmocka_unit_test(test_library_columns),
		cmocka_unit_test(test_remote_round_trip),
#ifdef SAAS_WITH_REMOTE
		cmocka_unit_test(test_remote_retry_after),
#endif
#ifdef AAS_TEST_CLI
		cmocka_unit_test(test_cli_columns),
#endif
#ifdef AAS_TEST_MCP
		cmocka_unit_test(test_mcp_column),
#endif
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
