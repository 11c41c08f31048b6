/*
 * A guest's console log, kept bounded: the cut at the bound (and not below
 * it), a writer that goes on appending across a cut, the quoted tail, and a
 * log that is not a plain file.
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

#include "driver/libvirt/console.h"
#include "testutil.h"

static char *tmpdir;
static char logpath[1024];

/* A file of n bytes whose byte i is 'a' + i % 26, written through an O_APPEND descriptor as QEMU's is. */
static int write_log(size_t n)
{
	char buf[4096];
	int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	for (size_t off = 0; off < n;) {
		size_t k = n - off < sizeof(buf) ? n - off : sizeof(buf);
		for (size_t i = 0; i < k; i++)
			buf[i] = (char)('a' + (off + i) % 26);
		assert_int_equal(write(fd, buf, k), (ssize_t)k);
		off += k;
	}
	return fd;
}

static off_t file_size(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return st.st_size;
}

static int setup(void **state)
{
	(void)state;
	if (!(tmpdir = saas_test_tmpdir()))
		return -1;
	snprintf(logpath, sizeof(logpath), "%s/console.log", tmpdir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	saas_test_rmdir(tmpdir);
	return 0;
}

static void test_trim_bound(void **state)
{
	size_t len;
	char *data;
	int fd;

	(void)state;
	/* No log yet: nothing to do. */
	assert_int_equal(saas__console_trim(logpath, CONSOLE_LOG_MAX, CONSOLE_LOG_KEEP), 0);

	/* At the bound: kept whole. */
	close(write_log(CONSOLE_LOG_MAX));
	assert_int_equal(saas__console_trim(logpath, CONSOLE_LOG_MAX, CONSOLE_LOG_KEEP), 0);
	assert_int_equal(file_size(logpath), CONSOLE_LOG_MAX);

	/* One byte over: only the last CONSOLE_LOG_KEEP bytes stay, in order. */
	fd = write_log(CONSOLE_LOG_MAX + 1);
	assert_int_equal(saas__console_trim(logpath, CONSOLE_LOG_MAX, CONSOLE_LOG_KEEP), 1);
	assert_non_null(data = saas_test_slurp(logpath, &len));
	assert_int_equal(len, CONSOLE_LOG_KEEP);
	for (size_t i = 0; i < len; i++)
		assert_int_equal(data[i], 'a' + (CONSOLE_LOG_MAX + 1 - CONSOLE_LOG_KEEP + i) % 26);
	free(data);

	/* The writer goes on appending after what was kept: no hole, no growth from the old end. */
	assert_int_equal(write(fd, "END", 3), 3);
	close(fd);
	assert_non_null(data = saas_test_slurp(logpath, &len));
	assert_int_equal(len, CONSOLE_LOG_KEEP + 3);
	assert_memory_equal(data + CONSOLE_LOG_KEEP, "END", 3);
	free(data);
	unlink(logpath);
}

static void test_trim_not_a_file(void **state)
{
	char target[1100];

	(void)state;
	/* A symlink is never written through. */
	snprintf(target, sizeof(target), "%s/elsewhere", tmpdir);
	close(open(target, O_WRONLY | O_CREAT, 0600));
	assert_int_equal(truncate(target, CONSOLE_LOG_MAX + 10), 0);
	assert_int_equal(symlink(target, logpath), 0);
	assert_int_equal(saas__console_trim(logpath, CONSOLE_LOG_MAX, CONSOLE_LOG_KEEP), -ELOOP);
	assert_int_equal(file_size(target), CONSOLE_LOG_MAX + 10);
	unlink(logpath);
	unlink(target);
	/* A directory is left alone. */
	assert_int_equal(mkdir(logpath, 0700), 0);
	assert_true(saas__console_trim(logpath, CONSOLE_LOG_MAX, CONSOLE_LOG_KEEP) <= 0);
	rmdir(logpath);
}

static void test_tail(void **state)
{
	char *tail;
	int fd;

	(void)state;
	assert_null(saas__console_tail(logpath, CONSOLE_TAIL));
	close(write_log(0));
	assert_non_null(tail = saas__console_tail(logpath, CONSOLE_TAIL));
	assert_string_equal(tail, "");
	free(tail);

	/* The end of a long log, control characters as spaces. */
	fd = write_log(3u << 20);
	assert_int_equal(write(fd, "boot\r\nfailed\n", 13), 13);
	close(fd);
	assert_non_null(tail = saas__console_tail(logpath, CONSOLE_TAIL));
	assert_int_equal(strlen(tail), CONSOLE_TAIL);
	assert_string_equal(tail + CONSOLE_TAIL - 13, "boot  failed ");
	free(tail);

	/* Shorter than the tail: all of it. */
	close(write_log(5));
	assert_non_null(tail = saas__console_tail(logpath, CONSOLE_TAIL));
	assert_string_equal(tail, "abcde");
	free(tail);
	unlink(logpath);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trim_bound),
		cmocka_unit_test(test_trim_not_a_file),
		cmocka_unit_test(test_tail),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
