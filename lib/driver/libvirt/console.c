/*
 * A guest's serial console log, kept bounded. The guest is hostile and QEMU
 * appends whatever it writes to the serial port to console.log without limit,
 * so the driver cuts the file back from time to time and never reads more of
 * it than the end it quotes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "driver/libvirt/console.h"

int saas__console_trim(const char *path, int64_t max, size_t keep)
{
	struct stat st;
	char *buf = NULL;
	ssize_t n = 0;
	int fd, rc = 0;

	/* O_NOFOLLOW: the directory is the driver's, but a link there is never followed for a write. */
	if ((fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode) || st.st_size <= max)
		goto out;
	if ((int64_t)keep > st.st_size)
		keep = (size_t)st.st_size;
	if (!(buf = malloc(keep ? keep : 1))) {
		rc = -ENOMEM;
		goto out;
	}
	/* The end as it is now; what the guest appends from here on may be cut away with the rest. */
	if ((n = pread(fd, buf, keep, st.st_size - (off_t)keep)) < 0 || pwrite(fd, buf, (size_t)n, 0) != n ||
	    ftruncate(fd, n) < 0) {
		rc = -errno;
		goto out;
	}
	rc = 1;
out:
	free(buf);
	close(fd);
	return rc;
}

char *saas__console_tail(const char *path, size_t n)
{
	struct stat st;
	char *text = NULL;
	ssize_t got;
	off_t from;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !(text = malloc(n + 1)))
		goto fail;
	from = st.st_size > (off_t)n ? st.st_size - (off_t)n : 0;
	if ((got = pread(fd, text, n, from)) < 0)
		goto fail;
	text[got] = '\0';
	/* A NUL the guest wrote ends the text early: fine for a quote. */
	for (char *p = text; *p; p++)
		if ((unsigned char)*p < 0x20)
			*p = ' ';
	close(fd);
	return text;
fail:
	free(text);
	close(fd);
	return NULL;
}
