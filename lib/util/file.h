/*
 * Internal: reading a small file whole, within a bound, and replacing one
 * whole or not at all. Both take a directory fd (or AT_FDCWD) and a path
 * relative to it, so a caller that holds its directory open (O_NOFOLLOW)
 * never resolves the directory's path again.
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
/* saas__file_write_atomic, saas__file_write_tmp: the data reaches the disk (fsync) before the file is renamed. */
#define SAAS__FILE_FSYNC 0x4u

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

/*
 * data (len bytes) as the file at path (relative to dirfd), whole or not at
 * all: written to a temporary beside it, then renamed over it. The temporary
 * is ".BASE.PID.TID.N", made O_CREAT|O_EXCL|O_NOFOLLOW with mode (less the
 * umask): a name already taken, a planted link included, is never opened or
 * removed, the next N is tried (8 in all). flags: SAAS__FILE_FSYNC. A link
 * at path itself is replaced, not followed (rename). On every failure the
 * temporary is gone and path is as it was.
 * Returns SAAS_OK; SAAS_EIO (the errno as the backend code, the message
 * naming the file); SAAS_EINVAL for an unknown flag; SAAS_ENOMEM.
 */
int saas__file_write_atomic(int dirfd, const char *path, const void *data, size_t len, unsigned int mode,
                            unsigned int flags);

/*
 * Its first half, for a caller that uses the file before it replaces path
 * (nft loads rules from it): the temporary, written and closed, its path
 * (relative to dirfd as path is) in *tmp (malloc'd). The caller then either
 * renames it with saas__file_commit or unlinks it. Returns as
 * saas__file_write_atomic; *tmp is NULL on failure and no temporary is left.
 */
int saas__file_write_tmp(char **tmp, int dirfd, const char *path, const void *data, size_t len, unsigned int mode,
                         unsigned int flags);

/* tmp renamed over path (both relative to dirfd); on failure tmp is unlinked. SAAS_OK or SAAS_EIO. */
int saas__file_commit(int dirfd, const char *tmp, const char *path);

#endif
