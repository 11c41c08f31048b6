/*
 * Small files read whole within a bound (file.h).
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
