/*
 * libsaas: files in a sandbox.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef SAAS_FILES_H
#define SAAS_FILES_H

#include "common.h"

SAAS_BEGIN_DECLS

/** Largest file written or read, in bytes. */
#define SAAS_FILE_MAX ((int64_t)1 << 30)
/**
 * Longest path, in bytes: the guest's PATH_MAX, which counts the final NUL. A
 * path is at most SAAS_PATH_MAX - 1 bytes once made absolute (a relative path
 * is under /workspace/).
 */
#define SAAS_PATH_MAX 4096
/** Longest name of one path component (file or directory), in bytes: the guest's NAME_MAX. */
#define SAAS_NAME_MAX 255
/** Default and largest entry count of a listing. */
#define SAAS_LIST_ENTRIES_DEFAULT 1000
#define SAAS_LIST_ENTRIES_MAX 10000
/** Default and largest depth of a listing. */
#define SAAS_LIST_DEPTH_DEFAULT 3
#define SAAS_LIST_DEPTH_MAX 16

/**
 * Supplies the bytes of a file being written. Copy up to `size` bytes into
 * `buf` and return how many; 0 at the end; a negative value aborts the write
 * (the call then fails with SAAS_EIO and the partial file is removed).
 *
 * Since: 0.1.0
 */
typedef long (*saas_read_fn)(void *userdata, void *buf, size_t size);

/**
 * Receives the bytes of a file being read, in order. Return 0 to go on, non-zero
 * to stop (the call then fails with SAAS_EIO).
 *
 * Since: 0.1.0
 */
typedef int (*saas_write_fn)(void *userdata, const void *data, size_t size);

/** Version of saas_file_write_options this header describes. */
#define SAAS_FILE_WRITE_OPTIONS_VERSION 1

/**
 * Options for writing files. Initialise with SAAS_FILE_WRITE_OPTIONS_INIT.
 *
 * Since: 0.1.0
 */
typedef struct saas_file_write_options {
	unsigned int version;    /**< SAAS_FILE_WRITE_OPTIONS_VERSION */
	unsigned int mode;       /**< Permission bits; 0: 0644. At most 07777. */
} saas_file_write_options;

#define SAAS_FILE_WRITE_OPTIONS_INIT { SAAS_FILE_WRITE_OPTIONS_VERSION, 0 }

/**
 * Write a file in a sandbox, binary-safe, as its unprivileged user. Missing
 * parent directories are created. A relative path is relative to /workspace.
 *
 * @param path   less than SAAS_PATH_MAX bytes once absolute, each component at most
 *               SAAS_NAME_MAX bytes, no control character.
 * @param data   the bytes (may be NULL when len is 0).
 * @param len    at most SAAS_FILE_MAX.
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ETOOBIG, SAAS_ENOTFOUND (sandbox, or a parent that is
 *         a file), SAAS_ESTATE, SAAS_EISDIR, SAAS_EPERM (the sandbox user may not write
 *         there), SAAS_EIO (e.g. the guest's disk is full), SAAS_EBACKEND.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_file_write(saas_client *client, const char *sandbox_id, const char *path,
                                 const void *data, size_t len, const saas_file_write_options *options);

/**
 * Write a file from a stream: like saas_file_write(), reading the bytes from
 * `reader` so that no whole copy is held in memory.
 *
 * @param size the exact byte count the reader will supply, or -1 if unknown.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_file_write_stream(saas_client *client, const char *sandbox_id, const char *path,
                                        saas_read_fn reader, void *userdata, int64_t size,
                                        const saas_file_write_options *options);

/**
 * Read a whole file from a sandbox, binary-safe.
 *
 * @param data [out] the bytes, NUL-terminated for convenience; free with saas_free().
 * @param len  [out] the byte count.
 * @param max  refuse files larger than this (SAAS_ETOOBIG); 0: SAAS_FILE_MAX.
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND (sandbox or file), SAAS_EISDIR,
 *         SAAS_ETOOBIG, SAAS_ESTATE, SAAS_EPERM (the sandbox user may not read it),
 *         SAAS_EIO, SAAS_EBACKEND, SAAS_ENOMEM.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_file_read(void **data, size_t *len, saas_client *client, const char *sandbox_id,
                                const char *path, int64_t max);

/**
 * Read a file into a stream, without holding it whole in memory.
 *
 * @param size [out, optional] the file's size, known before the first byte is delivered; from a
 *             remote server's answer without a Content-Length (chunked through a proxy), set when
 *             the read ends, to the bytes delivered.
 * @return as saas_file_read().
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_file_read_stream(int64_t *size, saas_client *client, const char *sandbox_id, const char *path,
                                       saas_write_fn writer, void *userdata);

/**
 * Type of a listed entry.
 *
 * Since: 0.1.0
 */
typedef enum {
	SAAS_FILE_REGULAR = 1,
	SAAS_FILE_DIRECTORY = 2,
	SAAS_FILE_SYMLINK = 3,
	SAAS_FILE_OTHER = 4
} saas_file_type;

/**
 * One entry of a listing. Library-allocated; fields may be appended.
 *
 * Since: 0.1.0
 */
typedef struct saas_file_entry {
	char *path;           /**< Absolute path. */
	int type;             /**< saas_file_type */
	int64_t size;
	unsigned int mode;    /**< Permission bits (07777). */
	int64_t mtime_ms;
} saas_file_entry;

/**
 * A listing; library-allocated.
 *
 * Since: 0.1.0
 */
typedef struct saas_file_list {
	char *root;                   /**< The absolute path listed. */
	size_t count;
	saas_file_entry **entries;     /**< Depth first, each directory's entries sorted by name. */
	int truncated;                /**< Non-zero if max_entries cut it short. */
} saas_file_list;

/**
 * List a directory tree in a sandbox.
 *
 * @param path        NULL or "": /workspace. A file lists as itself.
 * @param max_depth   1 lists only the directory's own entries; 0: SAAS_LIST_DEPTH_DEFAULT.
 * @param max_entries 0: SAAS_LIST_ENTRIES_DEFAULT.
 * @param flags       0.
 * @param out         [out] free with saas_file_list_free().
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND (sandbox or path), SAAS_ESTATE, SAAS_EPERM,
 *         SAAS_EIO, SAAS_EBACKEND, SAAS_ENOMEM.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(int) saas_file_list_get(saas_file_list **out, saas_client *client, const char *sandbox_id,
                                    const char *path, unsigned int max_depth, unsigned int max_entries,
                                    unsigned int flags);

/**
 * Free a listing; NULL is ignored.
 *
 * Since: 0.1.0
 */
SAAS_EXTERN(void) saas_file_list_free(saas_file_list *list);

/**
 * Most entries one saas_file_remove() deletes. A tree with more is removed
 * up to that count and the call fails with SAAS_ELIMIT: call it again to go
 * on. The engine walks the tree itself (one guest request per entry), so
 * this bounds how long one call holds it.
 */
#define SAAS_FILE_REMOVE_ENTRIES_MAX 100000
/** Deepest tree saas_file_remove() descends; deeper: SAAS_ELIMIT, with what it reached removed. */
#define SAAS_FILE_REMOVE_DEPTH_MAX 256

/**
 * Make a directory in a sandbox, with its missing parents (mode 0755), as the
 * sandbox's unprivileged user. A relative path is relative to /workspace.
 *
 * @param created [out, optional] 1 if the call made the directory, 0 if one
 *                was already there (which is success).
 * @param path    as saas_file_write()'s.
 * @param flags   0.
 * @return SAAS_OK, SAAS_EINVAL, SAAS_EEXISTS (something not a directory is at
 *         path), SAAS_ENOTFOUND (sandbox, or a parent that is a file),
 *         SAAS_ESTATE, SAAS_EPERM, SAAS_EIO, SAAS_EBACKEND, SAAS_ENOTSUP (the
 *         VM driver cannot).
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_file_mkdir(int *created, saas_client *client, const char *sandbox_id, const char *path,
                                 unsigned int flags);

/**
 * Remove a file, a symbolic link (not what it points to) or a directory with
 * everything in it, as the sandbox's unprivileged user. Entries are removed
 * as they are met: a call that fails part-way leaves the rest.
 *
 * @param path  as saas_file_write()'s; not "/".
 * @param flags 0.
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND (sandbox or path),
 *         SAAS_ESTATE, SAAS_EPERM (something in the tree may not be
 *         removed by the sandbox user), SAAS_ELIMIT (over
 *         SAAS_FILE_REMOVE_ENTRIES_MAX entries or SAAS_FILE_REMOVE_DEPTH_MAX
 *         levels), SAAS_EIO, SAAS_EBACKEND, SAAS_ENOTSUP.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_file_remove(saas_client *client, const char *sandbox_id, const char *path,
                                  unsigned int flags);

/** saas_file_rename(): a file (not a directory) at the destination is replaced. */
#define SAAS_FILE_RENAME_REPLACE (1u << 0)

/**
 * Rename or move a file or directory in a sandbox, as the sandbox's
 * unprivileged user; the destination's missing parents are made (0755).
 * Within one filesystem of the guest the move is the guest's rename: the
 * entry is never copied. Without SAAS_FILE_RENAME_REPLACE an existing
 * destination is refused; with it a file there is replaced (renamed aside,
 * the source renamed onto its name, then the old file removed; put back if
 * the rename fails). A directory at the destination is never replaced. A
 * rename of a path onto itself does nothing.
 *
 * @param from  as saas_file_write()'s path.
 * @param to    likewise; not inside `from`.
 * @param flags 0 or SAAS_FILE_RENAME_REPLACE.
 * @return SAAS_OK, SAAS_EINVAL, SAAS_ENOTFOUND (sandbox or from), SAAS_EEXISTS
 *         (the destination exists), SAAS_ESTATE, SAAS_EPERM, SAAS_EIO (e.g.
 *         across filesystems), SAAS_EBACKEND, SAAS_ENOTSUP.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_file_rename(saas_client *client, const char *sandbox_id, const char *from, const char *to,
                                  unsigned int flags);

SAAS_END_DECLS

#endif
