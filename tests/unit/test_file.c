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
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
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

/* path (relative to dfd) reads as want, whole, within max. */
static void read_is(int dfd, const char *path, size_t max, unsigned int flags, const char *want)
{
	char *text = NULL;
	size_t len = 99;

	assert_int_equal(saas__file_read(&text, &len, dfd, path, max, flags), SAAS_OK);
	assert_int_equal(len, strlen(want));
	assert_string_equal(text, want);
	free(text);
}

/* The file at path holds want. */
static void holds(const char *path, const char *want)
{
	char *got = saas_test_slurp(path, NULL);

	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

/* A file of exactly its bound is read; one byte more is refused, whole, and says so. */
static void test_read_bound(void **state)
{
	char *text = (char *)1, *p = at("eight");
	size_t len = 99;
	int dfd;

	(void)state;
	put("eight", "12345678", 8);
	read_is(AT_FDCWD, p, 8, 0, "12345678");
	assert_int_equal(saas__file_read(&text, &len, AT_FDCWD, p, 7, 0), SAAS_ETOOBIG);
	assert_null(text);
	assert_int_equal(len, 0);
	assert_int_equal(saas_error_last()->code, SAAS_ETOOBIG);
	says("is over its bound of 7 bytes");
	/* Relative to a directory's fd, as the embedded root's readers take it. */
	assert_true((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0);
	read_is(dfd, "eight", 8, SAAS__FILE_NOFOLLOW, "12345678");
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
	char *p = at("empty");

	(void)state;
	put("empty", "", 0);
	read_is(AT_FDCWD, p, 0, 0, "");
	read_is(AT_FDCWD, p, 4096, SAAS__FILE_NOFOLLOW, "");
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
	read_is(AT_FDCWD, link, 64, 0, "secret");
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

/* How many names in dir start with "."+base (the temporaries of base), links included. */
static int temporaries(const char *base)
{
	char prefix[256];
	DIR *dh = opendir(dir);
	struct dirent *e;
	int n = 0;

	assert_non_null(dh);
	snprintf(prefix, sizeof(prefix), ".%s.", base);
	while ((e = readdir(dh)))
		n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
	closedir(dh);
	return n;
}

/* The n-th name saas__file_write_atomic tries for base's temporary in dir, from this thread. */
static char *tmp_name(const char *base, int n)
{
	char *p;

	assert_true(asprintf(&p, "%s/.%s.%ld.%ld.%d", dir, base, (long)getpid(), (long)gettid(), n) > 0);
	return p;
}

/* The file is replaced by a rename: a reader of the old one keeps it whole; no temporary stays. */
static void test_write_replaces(void **state)
{
	char *p = at("entry"), *target = at("kept"), *link = at("was-link");
	struct stat st;
	int old;

	(void)state;
	put("entry", "the old text", 12);
	assert_true((old = open(p, O_RDONLY | O_CLOEXEC)) >= 0);
	assert_int_equal(saas__file_write_atomic(AT_FDCWD, p, "new", 3, 0600, SAAS__FILE_FSYNC), SAAS_OK);
	holds(p, "new");
	{
		char buf[32] = { 0 };
		assert_int_equal(read(old, buf, sizeof(buf) - 1), 12);
		assert_string_equal(buf, "the old text");
	}
	close(old);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(temporaries("entry"), 0);
	/* Relative to a directory fd, and a new file. */
	{
		int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		assert_true(dfd >= 0);
		assert_int_equal(saas__file_write_atomic(dfd, "fresh", "", 0, 0600, 0), SAAS_OK);
		close(dfd);
		char *fresh = at("fresh");
		holds(fresh, "");
		free(fresh);
	}
	/* A link at the name itself is replaced, its target left alone. */
	put("kept", "target", 6);
	assert_int_equal(symlink(target, link), 0);
	assert_int_equal(saas__file_write_atomic(AT_FDCWD, link, "mine", 4, 0600, 0), SAAS_OK);
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	holds(target, "target");
	free(p);
	free(target);
	free(link);
}

/* A write or a rename that fails leaves the file as it was and no temporary. */
static void test_write_fails_clean(void **state)
{
	char *p = at("limited"), *d = at("adir"), *inner, big[4096];
	struct rlimit was, small;

	(void)state;
	/* The rename fails: the name is a directory that is not empty. */
	assert_int_equal(mkdir(d, 0700), 0);
	assert_true(asprintf(&inner, "%s/x", d) > 0);
	put("adir/x", "x", 1);
	assert_int_equal(saas__file_write_atomic(AT_FDCWD, d, "data", 4, 0600, 0), SAAS_EIO);
	says("cannot replace");
	assert_int_equal(temporaries("adir"), 0);
	assert_int_equal(access(inner, F_OK), 0);
	/* The write fails: a file size limit under the data (EFBIG, its signal ignored). */
	put("limited", "as it was", 9);
	memset(big, 'b', sizeof(big));
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &was), 0);
	small = was;
	small.rlim_cur = 1024;
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
	assert_int_equal(saas__file_write_atomic(AT_FDCWD, p, big, sizeof(big), 0600, SAAS__FILE_FSYNC), SAAS_EIO);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &was), 0);
	signal(SIGXFSZ, SIG_DFL);
	assert_int_equal(saas_error_last()->backend_code, EFBIG);
	says("cannot write");
	assert_int_equal(temporaries("limited"), 0);
	holds(p, "as it was");
	/* Nothing to name, or unknown flags. */
	assert_int_equal(saas__file_write_atomic(AT_FDCWD, "somewhere/", "x", 1, 0600, 0), SAAS_EINVAL);
	assert_int_equal(saas__file_write_atomic(AT_FDCWD, p, "x", 1, 0600, 0x100), SAAS_EINVAL);
	free(p);
	free(d);
	free(inner);
}

/* A link planted at the temporary's name is never written through nor removed: the next name is taken, and when all are planted the write is refused. */
static void test_write_planted_link(void **state)
{
	char *p = at("target-file"), *victim = at("victim"), *links[8];

	(void)state;
	put("victim", "untouched", 9);
	for (int i = 0; i < 8; i++) {
		links[i] = tmp_name("target-file", i);
		assert_int_equal(symlink(victim, links[i]), 0);
	}
	assert_int_equal(saas__file_write_atomic(AT_FDCWD, p, "evil", 4, 0600, 0), SAAS_EIO);
	assert_int_equal(saas_error_last()->backend_code, EEXIST);
	says("are taken");
	assert_int_equal(access(p, F_OK), -1);
	/* One name free: it is used, and the links stay as they were. */
	assert_int_equal(unlink(links[5]), 0);
	assert_int_equal(saas__file_write_atomic(AT_FDCWD, p, "mine", 4, 0600, 0), SAAS_OK);
	holds(p, "mine");
	holds(victim, "untouched");
	assert_int_equal(temporaries("target-file"), 7);
	for (int i = 0; i < 8; i++) {
		if (i != 5)
			assert_int_equal(unlink(links[i]), 0);
		free(links[i]);
	}
	free(p);
	free(victim);
}

/* The two halves: the temporary is there to be used, then renamed over the name, or unlinked by its caller. */
static void test_write_tmp_commit(void **state)
{
	char *p = at("rules"), *tmp;

	(void)state;
	put("rules", "loaded before", 13);
	assert_int_equal(saas__file_write_tmp(&tmp, AT_FDCWD, p, "next", 4, 0600, 0), SAAS_OK);
	holds(tmp, "next");
	holds(p, "loaded before");
	assert_int_equal(saas__file_commit(AT_FDCWD, tmp, p), SAAS_OK);
	free(tmp);
	holds(p, "next");
	assert_int_equal(temporaries("rules"), 0);
	/* A commit that fails unlinks the temporary. */
	assert_int_equal(saas__file_write_tmp(&tmp, AT_FDCWD, p, "x", 1, 0600, 0), SAAS_OK);
	assert_int_equal(saas__file_commit(AT_FDCWD, tmp, "/nonexistent/rules"), SAAS_EIO);
	assert_int_equal(temporaries("rules"), 0);
	free(tmp);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_read_bound),
		cmocka_unit_test(test_read_sizeless),
		cmocka_unit_test(test_read_empty),
		cmocka_unit_test(test_read_link),
		cmocka_unit_test(test_write_replaces),
		cmocka_unit_test(test_write_fails_clean),
		cmocka_unit_test(test_write_planted_link),
		cmocka_unit_test(test_write_tmp_commit),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
