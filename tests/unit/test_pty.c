/*
 * Terminals: the public calls over a local engine with the fake driver (whose
 * shell greets, echoes, reports resizes and ends at "exit N"), bad input to
 * each, a version 2 driver table (no terminals), a version 11 one (no cwd or
 * env), and the WebSocket framing of lib/wire at its bounds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/core.h"
#include "fake/fake_driver.h"
#include "fixture.h"
#include "testutil.h"
#include "wire/ws.h"

/* The sandbox each test's terminals open in: alice's, made by the setup. */
static char sb_id[SAAS_ID_MAX + 1];

static int open_with(void **state, const saas_driver *driver)
{
	struct saas_test_fixture *f = saas_test_fixture_new(driver, SAAS_TEST_BOB);
	saas_sandbox *sb = NULL;

	saas_test_fixture_open(f);
	assert_int_equal(saas_sandbox_create(&sb, f->a, NULL, 0), SAAS_OK);
	snprintf(sb_id, sizeof(sb_id), "%s", sb->id);
	saas_sandbox_free(sb);
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return open_with(state, &saas_fake_driver);
}

static int setup_v2(void **state)
{
	static saas_driver v2;     /* the fake driver as a version 2 table: no terminals */

	v2 = saas_fake_driver;
	v2.version = 2;
	return open_with(state, &v2);
}

static int setup_v11(void **state)
{
	static saas_driver v11;    /* the fake driver as a version 11 table: terminals without cwd and env */

	v11 = saas_fake_driver;
	v11.version = 11;
	return open_with(state, &v11);
}

static int teardown(void **state)
{
	saas_test_fixture_free(*state);
	return 0;
}

/* Read until `want` is in what came, or the end; the output so far (static). */
static const char *read_until(saas_pty *t, const char *want, int *ended)
{
	static char acc[8192];
	static size_t n;
	char buf[1024];
	size_t got;

	if (!want) {
		n = 0;
		acc[0] = '\0';
		return acc;
	}
	*ended = 0;
	while (!strstr(acc, want)) {
		assert_int_equal(saas_pty_read(t, buf, sizeof(buf), &got, -1), SAAS_OK);
		if (!got) {
			*ended = 1;
			break;
		}
		if (got > sizeof(acc) - 1 - n)
			got = sizeof(acc) - 1 - n;
		memcpy(acc + n, buf, got);
		n += got;
		acc[n] = '\0';
	}
	return acc;
}

static void test_session(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_pty_options o = SAAS_PTY_OPTIONS_INIT;
	saas_pty *t = NULL;
	int ended, status = 0;

	o.term = "vt100";
	o.cols = 132;
	o.rows = 43;
	assert_int_equal(saas_pty_open(&t, f->a, sb_id, &o, 0), SAAS_OK);
	assert_true(saas_pty_fd(t) >= 0);
	read_until(NULL, NULL, NULL);
	assert_non_null(strstr(read_until(t, "\r\n", &ended), "fake-shell vt100 132x43 tty"));
	assert_int_equal(saas_pty_write(t, "hello\r", 6), SAAS_OK);
	read_until(t, "hello", &ended);
	assert_false(ended);
	assert_int_equal(saas_pty_resize(t, 100, 50), SAAS_OK);
	read_until(t, "resize 100x50", &ended);
	assert_false(ended);
	assert_int_equal(saas_pty_write(t, "exit 9\r", 7), SAAS_OK);
	read_until(t, "\x01never", &ended);
	assert_true(ended);
	/* The end stays the end. */
	{
		char b[8];
		size_t got = 1;
		assert_int_equal(saas_pty_read(t, b, sizeof(b), &got, 0), SAAS_OK);
		assert_int_equal(got, 0);
	}
	saas_pty_close(t, &status);
	assert_int_equal(status, 9);
}

static void test_notty_and_hangup(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_pty *t = NULL;
	char b[64];
	size_t got;
	int ended, status = 0;

	assert_int_equal(saas_pty_open(&t, f->a, sb_id, NULL, SAAS_PTY_NOTTY), SAAS_OK);
	read_until(NULL, NULL, NULL);
	assert_non_null(strstr(read_until(t, "\r\n", &ended), "fake-shell xterm-256color 80x24 notty"));
	assert_int_equal(saas_pty_send_eof(t), SAAS_OK);
	assert_int_equal(saas_pty_write(t, "x", 1), SAAS_ESTATE);
	read_until(t, "\x01never", &ended);
	assert_true(ended);
	saas_pty_close(t, &status);
	assert_int_equal(status, 0);

	/* Hung up before the end: no status; nothing waiting is a timeout, not an end. */
	assert_int_equal(saas_pty_open(&t, f->a, sb_id, NULL, 0), SAAS_OK);
	read_until(NULL, NULL, NULL);
	read_until(t, "\r\n", &ended);
	assert_int_equal(saas_pty_read(t, b, sizeof(b), &got, 0), SAAS_ETIMEOUT);
	assert_int_equal(got, 0);
	saas_pty_close(t, &status);
	assert_int_equal(status, -1);
	saas_pty_close(NULL, &status);
	assert_int_equal(status, -1);
}

/* A shell that reads no input: a bounded write gives up (and says so) rather than block for ever. */
static void test_write_timeout(void **state)
{
	struct saas_test_fixture *f = *state;
	size_t big = (size_t)8 << 20;
	char *flood = calloc(1, big);
	saas_pty *t = NULL;
	int ended;

	assert_non_null(flood);
	memset(flood, 'x', big);
	assert_int_equal(saas_pty_open(&t, f->a, sb_id, NULL, 0), SAAS_OK);
	assert_int_equal(saas_pty_set_write_timeout(NULL, 100), SAAS_EINVAL);
	read_until(NULL, NULL, NULL);
	read_until(t, "\r\n", &ended);
	assert_int_equal(saas_pty_write(t, "hold\r", 5), SAAS_OK);
	read_until(t, "hold", &ended);
	assert_false(ended);
	assert_int_equal(saas_pty_set_write_timeout(t, 100), SAAS_OK);
	assert_int_equal(saas_pty_write(t, flood, big), SAAS_ETIMEOUT);
	assert_non_null(strstr(saas_error_last()->message, "took no input"));
	/* The session is still whole: it ends as any does. */
	saas_pty_close(t, NULL);
	free(flood);
}

static void test_bad_input(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_pty_options o = SAAS_PTY_OPTIONS_INIT;
	saas_pty *t = (saas_pty *)1;
	char term[SAAS_PTY_TERM_MAX + 2];

	assert_int_equal(saas_pty_open(NULL, f->a, sb_id, NULL, 0), SAAS_EINVAL);
	assert_int_equal(saas_pty_open(&t, NULL, sb_id, NULL, 0), SAAS_EINVAL);
	assert_null(t);
	assert_int_equal(saas_pty_open(&t, f->a, NULL, NULL, 0), SAAS_EINVAL);
	assert_int_equal(saas_pty_open(&t, f->a, sb_id, NULL, 1u << 5), SAAS_EINVAL);
	assert_int_equal(saas_pty_open(&t, f->a, "sbx-nope", NULL, 0), SAAS_ENOTFOUND);
	assert_int_equal(saas_pty_open(&t, f->b, sb_id, NULL, 0), SAAS_ENOTFOUND);
	o.version = 0;
	assert_int_equal(saas_pty_open(&t, f->a, sb_id, &o, 0), SAAS_EINVAL);
	o.version = SAAS_PTY_OPTIONS_VERSION + 1;
	assert_int_equal(saas_pty_open(&t, f->a, sb_id, &o, 0), SAAS_EINVAL);
	o.version = SAAS_PTY_OPTIONS_VERSION;
	o.cols = SAAS_PTY_SIZE_MAX + 1;
	assert_int_equal(saas_pty_open(&t, f->a, sb_id, &o, 0), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "4096"));
	o.cols = 0;
	o.rows = SAAS_PTY_SIZE_MAX + 1;
	assert_int_equal(saas_pty_open(&t, f->a, sb_id, &o, 0), SAAS_EINVAL);
	o.rows = 0;
	for (const char *const *bad = (const char *const[]){ "", "a b", "x;y", "../x", ".hidden", "a/b", NULL }; *bad; bad++) {
		o.term = *bad;
		assert_int_equal(saas_pty_open(&t, f->a, sb_id, &o, 0), SAAS_EINVAL);
	}
	memset(term, 'x', sizeof(term) - 1);
	term[sizeof(term) - 1] = '\0';
	o.term = term;
	assert_int_equal(saas_pty_open(&t, f->a, sb_id, &o, 0), SAAS_EINVAL);
	term[SAAS_PTY_TERM_MAX] = '\0'; /* at the bound: taken */
	assert_int_equal(saas_pty_open(&t, f->a, sb_id, &o, 0), SAAS_OK);
	assert_int_equal(saas_pty_resize(t, 0, 10), SAAS_EINVAL);
	assert_int_equal(saas_pty_resize(t, 10, SAAS_PTY_SIZE_MAX + 1), SAAS_EINVAL);
	assert_int_equal(saas_pty_resize(t, SAAS_PTY_SIZE_MAX, SAAS_PTY_SIZE_MAX), SAAS_OK);
	assert_int_equal(saas_pty_write(t, NULL, 1), SAAS_EINVAL);
	assert_int_equal(saas_pty_write(t, NULL, 0), SAAS_OK);
	saas_pty_close(t, NULL);
	assert_int_equal(saas_pty_resize(NULL, 10, 10), SAAS_EINVAL);
	assert_int_equal(saas_pty_send_eof(NULL), SAAS_EINVAL);
	assert_int_equal(saas_pty_fd(NULL), -1);
	{
		size_t got;
		char b[4];
		assert_int_equal(saas_pty_read(NULL, b, sizeof(b), &got, 0), SAAS_EINVAL);
	}
}

static void test_driver_v2(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_pty *t = NULL;

	assert_int_equal(saas_pty_open(&t, f->a, sb_id, NULL, 0), SAAS_ENOTSUP);
	assert_null(t);
	assert_non_null(strstr(saas_error_last()->message, "cannot open terminals"));
}

/* A table older than version 12 cannot read a terminal's cwd and env: refused when asked, never dropped. */
static void test_driver_v11(void **state)
{
	struct saas_test_fixture *f = *state;
	static const char *const env[] = { "A=b", NULL };
	saas_pty_options o = SAAS_PTY_OPTIONS_INIT;
	saas_pty *t = NULL;

	o.cwd = "/tmp";
	assert_int_equal(saas_pty_open(&t, f->a, sb_id, &o, 0), SAAS_ENOTSUP);
	assert_null(t);
	assert_non_null(strstr(saas_error_last()->message, "version 11"));
	o.cwd = NULL;
	o.env = env;
	assert_int_equal(saas_pty_open(&t, f->a, sb_id, &o, 0), SAAS_ENOTSUP);
	/* Neither asked: a terminal as before. */
	o.env = NULL;
	assert_int_equal(saas_pty_open(&t, f->a, sb_id, &o, 0), SAAS_OK);
	saas_pty_close(t, NULL);
}

/* ---- the WebSocket framing ---- */

static void test_ws_accept(void **state)
{
	char out[29];

	(void)state;
	/* RFC 6455 1.3's example. */
	saas__ws_accept("dGhlIHNhbXBsZSBub25jZQ==", out);
	assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

static void test_ws_heads(void **state)
{
	static const struct {
		uint64_t len;
		size_t head;
	} cases[] = { { 0, 2 }, { 125, 2 }, { 126, 4 }, { 65535, 4 }, { 65536, 10 }, { 1ull << 40, 10 } };
	unsigned char h[SAAS_WS_HEAD_MAX], mask[4] = { 1, 2, 3, 4 };
	struct saas__ws_frame f;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (int masked = 0; masked < 2; masked++) {
			size_t n = saas__ws_head(h, SAAS_WS_BINARY, cases[i].len, masked ? mask : NULL);
			assert_int_equal(n, cases[i].head + (masked ? 4 : 0));
			/* One byte short of the head is "more", the whole head parses back. */
			assert_int_equal(saas__ws_frame_parse(h, n - 1, &f), 0);
			assert_int_equal(saas__ws_frame_parse(h, n, &f), 1);
			assert_int_equal(f.len, cases[i].len);
			assert_int_equal(f.head, n);
			assert_int_equal(f.masked, masked);
			assert_int_equal(f.fin, 1);
			assert_int_equal(f.opcode, SAAS_WS_BINARY);
		}
	}
}

static void test_ws_refusals(void **state)
{
	struct saas__ws_frame f;
	unsigned char h[SAAS_WS_HEAD_MAX];
	unsigned char data[6] = { 'h' ^ 1, 'e' ^ 2, 'l' ^ 3, 'l' ^ 4, 'o' ^ 1, '!' ^ 2 }, mask[4] = { 1, 2, 3, 4 };

	(void)state;
	h[0] = 0xc2; /* RSV1 */
	h[1] = 0;
	assert_int_equal(saas__ws_frame_parse(h, 2, &f), -1);
	h[0] = 0x83; /* opcode 3: reserved */
	assert_int_equal(saas__ws_frame_parse(h, 2, &f), -1);
	h[0] = 0x08; /* a fragmented close */
	assert_int_equal(saas__ws_frame_parse(h, 2, &f), -1);
	h[0] = 0x89; /* a ping of 126 */
	h[1] = 126;
	assert_int_equal(saas__ws_frame_parse(h, 2, &f), -1);
	h[1] = 125;
	assert_int_equal(saas__ws_frame_parse(h, 2, &f), 1);
	h[0] = 0x82; /* a 64-bit length with its top bit set */
	h[1] = 127;
	memset(h + 2, 0xff, 8);
	assert_int_equal(saas__ws_frame_parse(h, 10, &f), -1);
	assert_int_equal(saas__ws_frame_parse(h, 1, &f), 0);
	/* Unmasking from an offset continues the mask's cycle. */
	saas__ws_unmask(data, 4, mask, 0);
	saas__ws_unmask(data + 4, 2, mask, 4);
	assert_memory_equal(data, "hello!", 6);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_session, setup, teardown),
		cmocka_unit_test_setup_teardown(test_notty_and_hangup, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_timeout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
		cmocka_unit_test_setup_teardown(test_driver_v2, setup_v2, teardown),
		cmocka_unit_test_setup_teardown(test_driver_v11, setup_v11, teardown),
		cmocka_unit_test(test_ws_accept),
		cmocka_unit_test(test_ws_heads),
		cmocka_unit_test(test_ws_refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
