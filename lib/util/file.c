/*
 * Small files read whole within a bound, and replaced whole or not at all
 * (file.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"
#include "util/file.h"

/* How many names the temporary tries before it gives up (file.h). */
#define TMP_TRIES 8

/* A failure of saas__file_read: recorded unless the caller asked for quiet, errno kept either way. */
static int read_fail(unsigned int flags, int code, int err, const char *fmt, ...) SAAS_PRINTF(4, 5);
static int read_fail(unsigned int flags, int code, int err, const char *fmt, ...)
{
	char why[512];
	va_list ap;

	if (!(flags & SAAS__FILE_QUIET)) {
		va_start(ap, fmt);
		vsnprintf(why, sizeof(why), fmt, ap);
		va_end(ap);
		saas__error(code, SAAS_ERRCLASS_OS, err, "%s", why);
	}
	errno = err;
	return code;
}

int saas__file_read(char **out, size_t *len, int dirfd, const char *path, size_t max, unsigned int flags)
{
	struct stat st;
	char *buf = NULL, *grown;
	size_t got = 0, cap;
	int fd, rc = SAAS_OK;

	*out = NULL;
	if (len)
		*len = 0;
	if (flags & ~(SAAS__FILE_NOFOLLOW | SAAS__FILE_QUIET))
		return saas__inval("unknown flags 0x%x reading %s", flags, path);
	if (max >= SIZE_MAX / 2)
		return saas__inval("no bound reading %s", path);
	fd = openat(dirfd, path,
	            O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (flags & SAAS__FILE_NOFOLLOW ? O_NOFOLLOW : 0));
	if (fd < 0 && errno == ELOOP && (flags & SAAS__FILE_NOFOLLOW))
		return read_fail(flags, SAAS_EIO, ELOOP, "cannot open %s: it is a link, which is not followed here", path);
	if (fd < 0)
		return read_fail(flags, SAAS_EIO, errno, "cannot open %s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0) {
		rc = read_fail(flags, SAAS_EIO, errno, "cannot read %s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = read_fail(flags, SAAS_EIO, 0, "cannot read %s: it is not a regular file", path);
		goto out;
	}
	if (st.st_size > 0 && (uint64_t)st.st_size > max) {
		rc = read_fail(flags, SAAS_ETOOBIG, EFBIG, "%s is over its bound of %zu bytes", path, max);
		goto out;
	}
	/*
	 * Room for one byte past the bound (a file of exactly max bytes is told
	 * from a longer one) and the NUL. A file that reports no size (/proc)
	 * starts small and grows, never past that.
	 */
	cap = st.st_size > 0 ? (size_t)st.st_size + 2 : (max + 2 < 4096 ? max + 2 : 4096);
	if (!(buf = malloc(cap))) {
		rc = read_fail(flags, SAAS_ENOMEM, ENOMEM, "out of memory");
		goto out;
	}
	for (;;) {
		ssize_t n;
		if (got + 1 == cap) {
			/* got <= max here, so cap < max + 2: it grows. */
			size_t want = cap < (max + 2) / 2 ? cap * 2 : max + 2;
			if (!(grown = realloc(buf, want))) {
				rc = read_fail(flags, SAAS_ENOMEM, ENOMEM, "out of memory");
				goto out;
			}
			buf = grown;
			cap = want;
		}
		n = read(fd, buf + got, cap - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = read_fail(flags, SAAS_EIO, errno, "cannot read %s: %s", path, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
		if (got > max) {
			rc = read_fail(flags, SAAS_ETOOBIG, EFBIG, "%s is over its bound of %zu bytes", path, max);
			goto out;
		}
	}
	buf[got] = '\0';
	*out = buf;
	buf = NULL;
	if (len)
		*len = got;
out:
	free(buf);
	close(fd);
	return rc;
}

/* EIO naming what could not be done to which file, with errno. */
static int io_error(int err, const char *what, const char *path)
{
	return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, err, "cannot %s %s: %s", what, path, strerror(err));
}

int saas__file_write_tmp(char **tmp, int dirfd, const char *path, const void *data, size_t len, unsigned int mode,
                         unsigned int flags)
{
	const char *base = strrchr(path, '/');
	size_t put = 0;
	int fd = -1, rc = SAAS_OK;

	*tmp = NULL;
	if (flags & ~SAAS__FILE_FSYNC)
		return saas__inval("unknown flags 0x%x writing %s", flags, path);
	base = base ? base + 1 : path;
	if (!*base)
		return saas__inval("cannot write %s: it names no file", path);
	/*
	 * Beside path, so that the rename stays in one directory (one file
	 * system). The name is per process and thread, so two writers never
	 * share one; O_EXCL|O_NOFOLLOW, so whatever already holds it (a crash's
	 * leftover, a planted link) is neither opened nor removed: the next
	 * name is tried.
	 */
	for (int n = 0; n < TMP_TRIES && fd < 0; n++) {
		free(*tmp);
		if (asprintf(tmp, "%.*s.%s.%ld.%ld.%d", (int)(base - path), path, base, (long)getpid(), (long)gettid(),
		             n) < 0) {
			*tmp = NULL;
			return saas__oom();
		}
		fd = openat(dirfd, *tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, mode);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	if (fd < 0) {
		int err = errno;
		if (err == EEXIST)
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, err,
			                 "cannot write %s: the names of its temporary (%s and the %d before it) are taken", path,
			                 *tmp, TMP_TRIES - 1);
		else
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, err, "cannot write %s (by its temporary %s): %s", path, *tmp,
			                 strerror(err));
		free(*tmp);
		*tmp = NULL;
		return rc;
	}
	while (put < len) {
		ssize_t n = write(fd, (const char *)data + put, len - put);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = io_error(errno, "write", *tmp);
			break;
		}
		put += (size_t)n;
	}
	if (rc == SAAS_OK && (flags & SAAS__FILE_FSYNC) && fsync(fd) < 0)
		rc = io_error(errno, "sync", *tmp);
	if (close(fd) < 0 && rc == SAAS_OK)
		rc = io_error(errno, "write", *tmp);
	if (rc < 0) {
		(void)unlinkat(dirfd, *tmp, 0);
		free(*tmp);
		*tmp = NULL;
	}
	return rc;
}

int saas__file_commit(int dirfd, const char *tmp, const char *path)
{
	int err;

	if (renameat(dirfd, tmp, dirfd, path) == 0)
		return SAAS_OK;
	err = errno;
	(void)unlinkat(dirfd, tmp, 0);
	return io_error(err, "replace", path);
}

int saas__file_write_atomic(int dirfd, const char *path, const void *data, size_t len, unsigned int mode,
                            unsigned int flags)
{
	char *tmp;
	int rc;

	if ((rc = saas__file_write_tmp(&tmp, dirfd, path, data, len, mode, flags)) < 0)
		return rc;
	rc = saas__file_commit(dirfd, tmp, path);
	free(tmp);
	return rc;
}
