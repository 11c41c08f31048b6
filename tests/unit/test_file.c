/*
 * lib/util/file.c: a small file read whole within its bound, links refused
 * when asked; a file replaced whole or not at all.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "saas.h"
#include "testutil.h"
#include "util/error.h"
#include "util/file.h"

static char *dir;

static int setup(void **state)
{
	(void)state;
	return (dir = saas_test_tmpdir()) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	saas_test_rmdir(dir);
	return 0;
}

/* dir/name, a string of the test's. */
static char *at(const char *name)
{
	char *p;

	assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

static void put(const char *name, const char *text, size_t len)
{
	char *p = at(name);
	FILE *f = fopen(p, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
	free(p);
}

static void says(const char *what)
{
	if (!strstr(saas_error_last()->message, what))
		fail_msg("'%s' does not say '%s'", saas_error_last()->message, what);
}

/* A file of exactly its bound is read; one byte more is refused, whole, and says so. */
static void test_read_bound(void **state)
{
	char *text = (char *)1, *p = at("eight");
	size_t len = 99;
	int dfd;

	(void)state;
	put("eight", "12345678", 8);
	assert_int_equal(saas__file_read(&text, &len, AT_FDCWD, p, 8, 0), SAAS_OK);
	assert_int_equal(len, 8);
	assert_string_equal(text, "12345678");
	free(text);
	assert_int_equal(saas__file_read(&text, &len, AT_FDCWD, p, 7, 0), SAAS_ETOOBIG);
	assert_null(text);
	assert_int_equal(len, 0);
	assert_int_equal(saas_error_last()->code, SAAS_ETOOBIG);
	says("is over its bound of 7 bytes");
	/* Relative to a directory's fd, as the embedded root's readers take it. */
	assert_true((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0);
	assert_int_equal(saas__file_read(&text, NULL, dfd, "eight", 8, SAAS__FILE_NOFOLLOW), SAAS_OK);
	assert_string_equal(text, "12345678");
	free(text);
	close(dfd);
	free(p);
}

/* A file that reports no size (/proc) is read to its end, and held to the bound all the same. */
static void test_read_sizeless(void **state)
{
	char *text;
	size_t len, small;

	(void)state;
	assert_int_equal(saas__file_read(&text, &len, AT_FDCWD, "/proc/self/status", 1 << 20, 0), SAAS_OK);
	assert_true(len > 100);
	assert_int_equal(strlen(text), len);
	assert_non_null(strstr(text, "Pid:"));
	free(text);
	small = 100;
	assert_int_equal(saas__file_read(&text, &len, AT_FDCWD, "/proc/self/status", small, 0), SAAS_ETOOBIG);
	assert_null(text);
	/* Quiet: the failure is only the answer, nothing recorded. */
	saas__error_clear();
	assert_int_equal(saas__file_read(&text, &len, AT_FDCWD, "/proc/self/status", small, SAAS__FILE_QUIET),
	                 SAAS_ETOOBIG);
	assert_int_equal(saas_error_last()->code, SAAS_OK);
}

/* An empty file is "" of length 0, within any bound, 0 included. */
static void test_read_empty(void **state)
{
	char *text, *p = at("empty");
	size_t len = 99;

	(void)state;
	put("empty", "", 0);
	assert_int_equal(saas__file_read(&text, &len, AT_FDCWD, p, 0, 0), SAAS_OK);
	assert_int_equal(len, 0);
	assert_string_equal(text, "");
	free(text);
	free(p);
}

/* With SAAS__FILE_NOFOLLOW a link is refused, saying so; without, it is followed. Nothing but a file is read. */
static void test_read_link(void **state)
{
	char *text, *target = at("target"), *link = at("link"), *fifo = at("fifo");
	size_t len;

	(void)state;
	put("target", "secret", 6);
	assert_int_equal(symlink(target, link), 0);
	assert_int_equal(saas__file_read(&text, &len, AT_FDCWD, link, 64, SAAS__FILE_NOFOLLOW), SAAS_EIO);
	assert_null(text);
	assert_int_equal(saas_error_last()->backend_code, ELOOP);
	says("it is a link, which is not followed here");
	assert_int_equal(saas__file_read(&text, &len, AT_FDCWD, link, 64, 0), SAAS_OK);
	assert_string_equal(text, "secret");
	free(text);
	/* A FIFO is refused at once, never waited on; a directory is refused. */
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(saas__file_read(&text, &len, AT_FDCWD, fifo, 64, 0), SAAS_EIO);
	says("not a regular file");
	assert_int_equal(saas__file_read(&text, &len, AT_FDCWD, dir, 64, 0), SAAS_EIO);
	/* Missing: EIO with the errno, and the path named. */
	assert_int_equal(saas__file_read(&text, &len, AT_FDCWD, "/nonexistent/file", 64, 0), SAAS_EIO);
	assert_int_equal(saas_error_last()->backend_code, ENOENT);
	says("cannot open /nonexistent/file");
	/* Bad calls. */
	assert_int_equal(saas__file_read(&text, &len, AT_FDCWD, target, 64, 0x100), SAAS_EINVAL);
	assert_int_equal(saas__file_read(&text, &len, AT_FDCWD, target, (size_t)-1, 0), SAAS_EINVAL);
	free(target);
	free(link);
	free(fifo);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_read_bound),
		cmocka_unit_test(test_read_sizeless),
		cmocka_unit_test(test_read_empty),
		cmocka_unit_test(test_read_link),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
