/*
 * Internal: reading a small file whole, within a bound. It takes a directory
 * fd (or AT_FDCWD) and a path relative to it, so a caller that holds its
 * directory open (O_NOFOLLOW) never resolves the directory's path again.
 */
#ifndef SAAS_UTIL_FILE_H
#define SAAS_UTIL_FILE_H

#include <fcntl.h> /* AT_FDCWD */
#include <stddef.h>

/* saas__file_read: a link at path's last component is refused (O_NOFOLLOW), never followed. */
#define SAAS__FILE_NOFOLLOW 0x1u
/*
 * saas__file_read: a failure is an answer the caller acts on (no such file,
 * none readable), not an error of its call: nothing is recorded for the
 * thread (errno still says what happened), as libvirt's virFileReadAllQuiet.
 */
#define SAAS__FILE_QUIET 0x2u

/*
 * The regular file at path (relative to dirfd) read whole, when it holds at
 * most max bytes: *out (malloc'd, NUL-terminated; free with free()) and its
 * length in *len (len may be NULL). It is opened O_NONBLOCK, so a FIFO put
 * in its place is refused, never waited on; anything but a regular file is
 * refused. A file that reports no size (/proc, cgroupfs) is read to its end.
 * flags: SAAS__FILE_NOFOLLOW, SAAS__FILE_QUIET.
 * Returns SAAS_OK; SAAS_ETOOBIG when it holds more than max bytes (nothing
 * of it is returned); SAAS_EIO when it cannot be opened or read or is no
 * regular file (the errno as the backend code); SAAS_EINVAL for an unknown
 * flag or a max of SIZE_MAX / 2 or more; SAAS_ENOMEM. *out is NULL on failure.
 */
int saas__file_read(char **out, size_t *len, int dirfd, const char *path, size_t max, unsigned int flags);

#endif
