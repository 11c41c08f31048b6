/*
 * Files over the connection's SFTP subsystem, started on first use and shared
 * by every file operation on the connection, one at a time (libssh2 keeps a
 * request's state in the SFTP handle).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <libssh2.h>

#include "transport/ssh.h"
#include "transport/ssh_session.h"
#include "util/error.h"
#include "util/util.h"

/*
 * How much of a file one libssh2 call moves, which is also how deep libssh2
 * pipelines SFTP requests (of ~30000 bytes each): a write keeps the whole
 * buffer in flight and waits for every acknowledgement before the next one
 * is filled; a read asks for up to four buffers ahead. Under TCG a request's
 * round trip through the guest's sshd is long, so a shallow pipeline leaves
 * the link idle between answers: 1 MiB puts ~35 write requests and ~140 read
 * requests in flight (OpenSSH's sftp keeps 64 of 32 KiB), for at most 1 MiB
 * here and 4 MiB buffered inside libssh2 per transfer (one at a time per
 * connection).
 */
#define SSH_FILE_CHUNK (1024 * 1024)

/* ---- files (SFTP) ---------------------------------------------------------------------------- */

/* Each SFTP request gets SSH_CALL_TIMEOUT_MS of its own: a large file takes many. */
#define SFTP_LOOP(op, rc, expr)                                                 \
	do {                                                                        \
		(op)->deadline = saas__now_ms() + SSH_CALL_TIMEOUT_MS;                  \
		SSH_LOOP(op, rc, expr);                                                 \
	} while (0)
#define SFTP_LOOP_PTR(op, ptr, rc, expr)                                        \
	do {                                                                        \
		(op)->deadline = saas__now_ms() + SSH_CALL_TIMEOUT_MS;                  \
		SSH_LOOP_PTR(op, ptr, rc, expr);                                        \
	} while (0)

/* The connection's SFTP subsystem, started on first use (sftp_mu and mu held). */
static int sftp_get(struct ssh_op *op, LIBSSH2_SFTP **out)
{
	saas__ssh *ssh = op->ssh;
	LIBSSH2_SFTP *sftp = NULL;
	int rc;

	if (ssh->sftp) {
		*out = ssh->sftp;
		return SAAS_OK;
	}
	/* It occupies a session channel for the connection's lifetime. */
	ssh->sessions++;
	pthread_mutex_unlock(&ssh->mu);
	pthread_mutex_lock(&ssh->open_mu);
	pthread_mutex_lock(&ssh->mu);
	SFTP_LOOP_PTR(op, sftp, rc, libssh2_sftp_init(ssh->session));
	pthread_mutex_unlock(&ssh->open_mu);
	if (!sftp) {
		ssh->sessions--;
		return saas__ssh_err(rc, "starting SFTP");
	}
	*out = ssh->sftp = sftp;
	return SAAS_OK;
}

/*
 * An SFTP failure as a saas error (mu held, right after the call). The guest's
 * sftp-server (OpenSSH's) sends ENOENT and ENOTDIR as NO_SUCH_FILE, EACCES and
 * EPERM as PERMISSION_DENIED, ENAMETOOLONG and EINVAL as BAD_MESSAGE: each is
 * the caller's mistake and says so, never a server failure.
 */
static int sftp_fail(struct ssh_op *op, int rc, const char *what, const char *path)
{
	unsigned long fx;

	if (rc != LIBSSH2_ERROR_SFTP_PROTOCOL)
		return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, rc, "%s %s: %s", what, path, saas__ssh_strerror(rc));
	fx = libssh2_sftp_last_error(op->ssh->sftp);
	switch (fx) {
	case LIBSSH2_FX_NO_SUCH_FILE:
	case LIBSSH2_FX_NO_SUCH_PATH:
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_GUEST, (long)fx, "%s %s: no such file or directory", what, path);
	case LIBSSH2_FX_PERMISSION_DENIED:
	case LIBSSH2_FX_WRITE_PROTECT:
		return saas__error(SAAS_EPERM, SAAS_ERRCLASS_GUEST, (long)fx, "%s %s: permission denied", what, path);
	case LIBSSH2_FX_BAD_MESSAGE:
		return saas__error(SAAS_EINVAL, SAAS_ERRCLASS_GUEST, (long)fx,
		                   "%s %s: the guest refused the path (a name too long, or invalid)", what, path);
	case LIBSSH2_FX_NO_SPACE_ON_FILESYSTEM:
	case LIBSSH2_FX_QUOTA_EXCEEDED:
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, (long)fx, "%s %s: no space left on the sandbox's disk",
		                   what, path);
	case 24: /* SSH_FX_FILE_IS_A_DIRECTORY (v6), which libssh2 1.10 does not name */
		return saas__error(SAAS_EISDIR, SAAS_ERRCLASS_GUEST, (long)fx, "%s %s: is a directory", what, path);
	case LIBSSH2_FX_NOT_A_DIRECTORY:
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_GUEST, (long)fx, "%s %s: a parent is not a directory",
		                   what, path);
	default:
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, (long)fx, "%s %s failed (SFTP status %lu)", what, path, fx);
	}
}

static int sftp_stat(struct ssh_op *op, const char *path, int follow, LIBSSH2_SFTP_ATTRIBUTES *attrs)
{
	int rc;

	memset(attrs, 0, sizeof(*attrs));
	SFTP_LOOP(op, rc,
	          libssh2_sftp_stat_ex(op->ssh->sftp, path, (unsigned int)strlen(path),
	                               follow ? LIBSSH2_SFTP_STAT : LIBSSH2_SFTP_LSTAT, attrs));
	return rc;
}

static int attrs_is_dir(const LIBSSH2_SFTP_ATTRIBUTES *a)
{
	return (a->flags & LIBSSH2_SFTP_ATTR_PERMISSIONS) && LIBSSH2_SFTP_S_ISDIR(a->permissions);
}

/* mkdir -p over SFTP, 0755 (sftp_mu and mu held). */
static int sftp_mkdir_p(struct ssh_op *op, char *dir)
{
	LIBSSH2_SFTP_ATTRIBUTES a;
	char *slash;
	int rc;

	if (!*dir || !strcmp(dir, "/"))
		return SAAS_OK;
	if ((rc = sftp_stat(op, dir, 1, &a)) == 0) {
		if (attrs_is_dir(&a))
			return SAAS_OK;
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_GUEST, 0, "creating %s: it is a file, not a directory", dir);
	}
	if (rc != LIBSSH2_ERROR_SFTP_PROTOCOL || libssh2_sftp_last_error(op->ssh->sftp) != LIBSSH2_FX_NO_SUCH_FILE)
		return sftp_fail(op, rc, "looking at", dir);
	if ((slash = strrchr(dir, '/')) && slash != dir) {
		*slash = '\0';
		rc = sftp_mkdir_p(op, dir);
		*slash = '/';
		if (rc < 0)
			return rc;
	}
	SFTP_LOOP(op, rc, libssh2_sftp_mkdir_ex(op->ssh->sftp, dir, (unsigned int)strlen(dir), 0755));
	if (rc < 0) {
		int err = sftp_fail(op, rc, "creating directory", dir);
		/* Someone else made it meanwhile: fine. */
		if (sftp_stat(op, dir, 1, &a) == 0 && attrs_is_dir(&a)) {
			saas__error_clear();
			return SAAS_OK;
		}
		return err;
	}
	return SAAS_OK;
}

static void sftp_unlink(struct ssh_op *op, const char *path)
{
	int rc;

	SFTP_LOOP(op, rc, libssh2_sftp_unlink_ex(op->ssh->sftp, path, (unsigned int)strlen(path)));
	(void)rc;
}

static void sftp_close_handle(struct ssh_op *op, LIBSSH2_SFTP_HANDLE *h)
{
	int rc;

	if (op->ssh->dead) {
		/*
		 * Nothing reaches the guest any more, but libssh2 frees a handle only
		 * in its close call (not in the SFTP shutdown), which on a dead
		 * connection fails at once and frees it all the same.
		 */
		struct call_snap sn = call_enter(op);
		rc = libssh2_sftp_close_handle(h);
		saas__ssh_call_leave(op, sn, rc);
		return;
	}
	SFTP_LOOP(op, rc, libssh2_sftp_close_handle(h));
	(void)rc;
}

int saas__ssh_file_write(saas__ssh *ssh, const char *path, unsigned int mode, saas_read_fn reader, void *ud,
                         int64_t size)
{
	struct ssh_op op = { ssh, 0 };
	LIBSSH2_SFTP *sftp;
	LIBSSH2_SFTP_HANDLE *h = NULL;
	LIBSSH2_SFTP_ATTRIBUTES a;
	saas__buf tmp = SAAS__BUF_INIT;
	char *dir = NULL, *buf = NULL, *slash;
	unsigned char rnd[8];
	int rc, lrc, created = 0;

	(void)size; /* the reader's end is what counts */
	if (!path || path[0] != '/')
		return saas__inval("the path must be absolute");
	if (!(dir = saas__strdup(path)) || !(buf = malloc(SSH_FILE_CHUNK))) {
		free(dir);
		return saas__oom();
	}
	slash = strrchr(dir, '/');
	slash[slash == dir ? 1 : 0] = '\0';
	if ((rc = saas__random(rnd, sizeof(rnd))) < 0)
		goto out_nolock;
	/* A temporary name in the same directory, renamed over the target at the end: no partial file is ever seen. */
	saas__buf_printf(&tmp, "%s/.aas-tmp-", strcmp(dir, "/") ? dir : "");
	for (size_t i = 0; i < sizeof(rnd); i++)
		saas__buf_printf(&tmp, "%02x", rnd[i]);
	if (!tmp.data) {
		rc = saas__oom();
		goto out_nolock;
	}

	pthread_mutex_lock(&ssh->sftp_mu);
	pthread_mutex_lock(&ssh->mu);
	if ((rc = sftp_get(&op, &sftp)) < 0)
		goto out;
	if ((lrc = sftp_stat(&op, path, 1, &a)) == 0 && attrs_is_dir(&a)) {
		rc = saas__error(SAAS_EISDIR, SAAS_ERRCLASS_GUEST, 0, "%s is a directory", path);
		goto out;
	}
	if ((rc = sftp_mkdir_p(&op, dir)) < 0)
		goto out;
	SFTP_LOOP_PTR(&op, h, lrc,
	              libssh2_sftp_open_ex(sftp, tmp.data, (unsigned int)tmp.len,
	                                   LIBSSH2_FXF_WRITE | LIBSSH2_FXF_CREAT | LIBSSH2_FXF_EXCL | LIBSSH2_FXF_TRUNC,
	                                   0600, LIBSSH2_SFTP_OPENFILE));
	if (!h) {
		rc = sftp_fail(&op, lrc, "writing", path);
		goto out;
	}
	created = 1;
	for (;;) {
		long n;
		size_t off = 0;

		/* The reader may be slow (a client upload): don't hold the connection meanwhile. */
		pthread_mutex_unlock(&ssh->mu);
		n = reader(ud, buf, SSH_FILE_CHUNK);
		pthread_mutex_lock(&ssh->mu);
		if (n < 0) {
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, n, "writing %s: the data source failed", path);
			goto out;
		}
		if (n == 0)
			break;
		if ((size_t)n > SSH_FILE_CHUNK)
			n = SSH_FILE_CHUNK;
		while (off < (size_t)n) {
			ssize_t w;
			/* libssh2 pipelines the write; it acknowledges a part, the rest comes again next call. */
			SFTP_LOOP(&op, w, libssh2_sftp_write(h, buf + off, (size_t)n - off));
			if (w < 0) {
				rc = sftp_fail(&op, (int)w, "writing", path);
				goto out;
			}
			off += (size_t)w;
		}
	}
	memset(&a, 0, sizeof(a));
	a.flags = LIBSSH2_SFTP_ATTR_PERMISSIONS;
	a.permissions = mode & 07777;
	/* Set after creation: the server's umask applied to the open. */
	SFTP_LOOP(&op, lrc, libssh2_sftp_fstat_ex(h, &a, 1));
	if (lrc < 0) {
		rc = sftp_fail(&op, lrc, "setting the mode of", path);
		goto out;
	}
	SFTP_LOOP(&op, lrc, libssh2_sftp_close_handle(h));
	h = NULL;
	if (lrc < 0) {
		rc = sftp_fail(&op, lrc, "writing", path);
		goto out;
	}
	/*
	 * SFTP v3's rename refuses an existing target and libssh2 1.10 has no
	 * posix-rename@openssh.com: unlink first. Only a failure in between
	 * could leave the path missing, never half-written.
	 */
	sftp_unlink(&op, path);
	SFTP_LOOP(&op, lrc,
	          libssh2_sftp_rename_ex(sftp, tmp.data, (unsigned int)tmp.len, path, (unsigned int)strlen(path),
	                                 LIBSSH2_SFTP_RENAME_OVERWRITE | LIBSSH2_SFTP_RENAME_ATOMIC |
	                                         LIBSSH2_SFTP_RENAME_NATIVE));
	if (lrc < 0) {
		rc = sftp_fail(&op, lrc, "writing", path);
		goto out;
	}
	created = 0;
	rc = SAAS_OK;
out:
	if (h)
		sftp_close_handle(&op, h);
	if (created && !ssh->dead)
		sftp_unlink(&op, tmp.data);
	pthread_mutex_unlock(&ssh->mu);
	pthread_mutex_unlock(&ssh->sftp_mu);
out_nolock:
	saas__buf_free(&tmp);
	free(dir);
	free(buf);
	return rc;
}

int saas__ssh_file_read(saas__ssh *ssh, const char *path, int64_t max, saas_write_fn writer, void *ud,
                        int64_t *size)
{
	struct ssh_op op = { ssh, 0 };
	LIBSSH2_SFTP *sftp;
	LIBSSH2_SFTP_HANDLE *h = NULL;
	LIBSSH2_SFTP_ATTRIBUTES a;
	char *buf = malloc(SSH_FILE_CHUNK);
	int64_t left;
	int rc, lrc;

	if (!buf)
		return saas__oom();
	pthread_mutex_lock(&ssh->sftp_mu);
	pthread_mutex_lock(&ssh->mu);
	if ((rc = sftp_get(&op, &sftp)) < 0)
		goto out;
	if ((lrc = sftp_stat(&op, path, 1, &a)) < 0) {
		rc = sftp_fail(&op, lrc, "reading", path);
		goto out;
	}
	if (attrs_is_dir(&a)) {
		rc = saas__error(SAAS_EISDIR, SAAS_ERRCLASS_GUEST, 0, "%s is a directory", path);
		goto out;
	}
	left = (a.flags & LIBSSH2_SFTP_ATTR_SIZE) ? (int64_t)a.filesize : 0;
	if (max > 0 && left > max) {
		rc = saas__error(SAAS_ETOOBIG, SAAS_ERRCLASS_GUEST, 0, "%s is %lld bytes, more than %lld", path,
		                 (long long)left, (long long)max);
		goto out;
	}
	if (size)
		*size = left;
	SFTP_LOOP_PTR(&op, h, lrc,
	              libssh2_sftp_open_ex(sftp, path, (unsigned int)strlen(path), LIBSSH2_FXF_READ, 0,
	                                   LIBSSH2_SFTP_OPENFILE));
	if (!h) {
		rc = sftp_fail(&op, lrc, "reading", path);
		goto out;
	}
	/* Deliver exactly the size announced, even if the file grows meanwhile. */
	while (left > 0) {
		ssize_t n;
		int stop;
		SFTP_LOOP(&op, n, libssh2_sftp_read(h, buf, left < SSH_FILE_CHUNK ? (size_t)left : SSH_FILE_CHUNK));
		if (n < 0) {
			rc = sftp_fail(&op, (int)n, "reading", path);
			goto out;
		}
		if (n == 0) {
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, 0, "reading %s: the file shrank while being read", path);
			goto out;
		}
		left -= n;
		pthread_mutex_unlock(&ssh->mu);
		stop = writer(ud, buf, (size_t)n);
		pthread_mutex_lock(&ssh->mu);
		if (stop) {
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, stop, "reading %s: the receiver stopped", path);
			goto out;
		}
	}
	rc = SAAS_OK;
out:
	if (h)
		sftp_close_handle(&op, h);
	pthread_mutex_unlock(&ssh->mu);
	pthread_mutex_unlock(&ssh->sftp_mu);
	free(buf);
	return rc;
}

struct dirent_rec {
	char *name;
	LIBSSH2_SFTP_ATTRIBUTES attrs;
};

static int dirent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct dirent_rec *)a)->name, ((const struct dirent_rec *)b)->name);
}

static void entry_from_attrs(saas_file_entry *e, const LIBSSH2_SFTP_ATTRIBUTES *a)
{
	unsigned long fmt = a->permissions & LIBSSH2_SFTP_S_IFMT;

	e->type = fmt == LIBSSH2_SFTP_S_IFREG   ? SAAS_FILE_REGULAR
	          : fmt == LIBSSH2_SFTP_S_IFDIR ? SAAS_FILE_DIRECTORY
	          : fmt == LIBSSH2_SFTP_S_IFLNK ? SAAS_FILE_SYMLINK
	                                        : SAAS_FILE_OTHER;
	e->size = (a->flags & LIBSSH2_SFTP_ATTR_SIZE) ? (int64_t)a->filesize : 0;
	e->mode = (unsigned int)(a->permissions & 07777);
	e->mtime_ms = (a->flags & LIBSSH2_SFTP_ATTR_ACMODTIME) ? (int64_t)a->mtime * 1000 : 0;
}

/* Emit an entry without holding mu. Returns the callback's verdict. */
static int emit_entry(struct ssh_op *op, saas_entry_fn fn, void *ud, const char *path,
                      const LIBSSH2_SFTP_ATTRIBUTES *a)
{
	saas_file_entry e;
	int stop;

	memset(&e, 0, sizeof(e));
	e.path = (char *)path;
	entry_from_attrs(&e, a);
	pthread_mutex_unlock(&op->ssh->mu);
	stop = fn(ud, &e);
	pthread_mutex_lock(&op->ssh->mu);
	return stop;
}

/* One listing's walk: where entries go, how deep, and how many more may be read. */
struct list_walk {
	struct ssh_op *op;
	unsigned int max_depth;
	saas_entry_fn fn;
	void *ud;
	size_t left;              /* entries still allowed into host memory; 0: the walk reads no more */
};

/*
 * The next entry of open directory h but "." and "..": its name into name
 * (size bytes, NUL-terminated) and its attributes into *a. 1, 0 at the end,
 * or an error saying what was being done (doing) to which directory.
 */
static int sftp_readdir_next(struct ssh_op *op, LIBSSH2_SFTP_HANDLE *h, char *name, size_t size,
                             LIBSSH2_SFTP_ATTRIBUTES *a, const char *doing, const char *dir)
{
	ssize_t len;

	for (;;) {
		memset(a, 0, sizeof(*a));
		SFTP_LOOP(op, len, libssh2_sftp_readdir(h, name, size - 1, a));
		if (len < 0)
			return sftp_fail(op, (int)len, doing, dir);
		if (len == 0)
			return 0;
		name[len] = '\0';
		if (strcmp(name, ".") != 0 && strcmp(name, "..") != 0)
			return 1;
	}
}

/*
 * One directory, depth first (sftp_mu and mu held). Returns SAAS_OK, 1 when
 * the callback stopped the walk, or an error. Unreadable directories below
 * the top are skipped. A directory is read whole before any of it is emitted
 * (entries come sorted), so the walk's budget is what bounds the memory a
 * guest with a huge directory can make the host spend: once it is spent,
 * reading stops and what was read is still emitted, in order.
 */
static int list_dir(struct list_walk *w, const char *dir, unsigned int level)
{
	struct ssh_op *op = w->op;
	LIBSSH2_SFTP_HANDLE *h = NULL;
	struct dirent_rec *ents = NULL;
	size_t n = 0, cap = 0;
	char name[1024];
	saas__buf child = SAAS__BUF_INIT;
	int rc, lrc;

	if (!w->left)
		return SAAS_OK;
	SFTP_LOOP_PTR(op, h, lrc,
	              libssh2_sftp_open_ex(op->ssh->sftp, dir, (unsigned int)strlen(dir), 0, 0, LIBSSH2_SFTP_OPENDIR));
	if (!h) {
		if (level > 1 && lrc == LIBSSH2_ERROR_SFTP_PROTOCOL)
			return SAAS_OK;
		return sftp_fail(op, lrc, "listing", dir);
	}
	while (w->left) {
		LIBSSH2_SFTP_ATTRIBUTES a;

		if ((rc = sftp_readdir_next(op, h, name, sizeof(name), &a, "listing", dir)) < 0)
			goto out;
		if (rc == 0)
			break;
		if ((rc = SAAS__ARRAY_RESERVE(ents, cap, n + 1)) < 0)
			goto out;
		if (!(ents[n].name = strdup(name))) {
			rc = saas__oom();
			goto out;
		}
		ents[n++].attrs = a;
		w->left--;
	}
	/* Close before descending: a deep tree must not pile up open handles. */
	sftp_close_handle(op, h);
	h = NULL;
	if (n)
		qsort(ents, n, sizeof(*ents), dirent_cmp);
	rc = SAAS_OK;
	for (size_t i = 0; i < n; i++) {
		child.len = 0;
		saas__buf_printf(&child, "%s/%s", strcmp(dir, "/") ? dir : "", ents[i].name);
		if (!child.data) {
			rc = saas__oom();
			goto out;
		}
		if (emit_entry(op, w->fn, w->ud, child.data, &ents[i].attrs)) {
			rc = 1;
			goto out;
		}
		if (level < w->max_depth && (ents[i].attrs.flags & LIBSSH2_SFTP_ATTR_PERMISSIONS) &&
		    LIBSSH2_SFTP_S_ISDIR(ents[i].attrs.permissions)) {
			if ((rc = list_dir(w, child.data, level + 1)) != SAAS_OK)
				goto out;
		}
	}
out:
	if (h)
		sftp_close_handle(op, h);
	for (size_t i = 0; i < n; i++)
		free(ents[i].name);
	free(ents);
	saas__buf_free(&child);
	return rc;
}

int saas__ssh_file_list(saas__ssh *ssh, const char *path, unsigned int max_depth, unsigned int max_entries,
                        saas_entry_fn fn, void *ud)
{
	struct ssh_op op = { ssh, 0 };
	struct list_walk w = { &op, max_depth ? max_depth : 1, fn, ud, max_entries };
	LIBSSH2_SFTP *sftp;
	LIBSSH2_SFTP_ATTRIBUTES a;
	char *root = NULL;
	size_t len;
	int rc, lrc;

	if (!path || path[0] != '/')
		return saas__inval("the path must be absolute");
	if (!max_entries)
		return saas__inval("a listing needs room for one entry at least");
	if (!(root = saas__strdup(path)))
		return SAAS_ENOMEM;
	/* "/workspace/" lists as "/workspace": children get exactly one slash. */
	for (len = strlen(root); len > 1 && root[len - 1] == '/'; len--)
		root[len - 1] = '\0';
	pthread_mutex_lock(&ssh->sftp_mu);
	pthread_mutex_lock(&ssh->mu);
	if ((rc = sftp_get(&op, &sftp)) < 0)
		goto out;
	if ((lrc = sftp_stat(&op, root, 1, &a)) < 0 && (lrc = sftp_stat(&op, root, 0, &a)) < 0) {
		rc = sftp_fail(&op, lrc, "listing", root);
		goto out;
	}
	if (attrs_is_dir(&a)) {
		rc = list_dir(&w, root, 1);
	} else {
		/* A file lists as itself; a symlink as the link. */
		if ((lrc = sftp_stat(&op, root, 0, &a)) < 0) {
			rc = sftp_fail(&op, lrc, "listing", root);
			goto out;
		}
		rc = emit_entry(&op, fn, ud, root, &a) ? 1 : SAAS_OK;
	}
	if (rc == 1)
		rc = SAAS_OK;
out:
	pthread_mutex_unlock(&ssh->mu);
	pthread_mutex_unlock(&ssh->sftp_mu);
	free(root);
	return rc;
}


/* ---- directories, removal and renames -------------------------------------------------------- */

/* "/a/b/" names "/a/b": strip trailing slashes in place, keeping "/". */
static void strip_slashes(char *path)
{
	for (size_t len = strlen(path); len > 1 && path[len - 1] == '/'; len--)
		path[len - 1] = '\0';
}

/* Is the SFTP failure rc the guest's "no such file" (mu held, right after the call)? */
static int sftp_missing(struct ssh_op *op, int rc)
{
	return rc == LIBSSH2_ERROR_SFTP_PROTOCOL && libssh2_sftp_last_error(op->ssh->sftp) == LIBSSH2_FX_NO_SUCH_FILE;
}

int saas__ssh_file_mkdir(saas__ssh *ssh, const char *path, int *created)
{
	struct ssh_op op = { ssh, 0 };
	LIBSSH2_SFTP *sftp;
	LIBSSH2_SFTP_ATTRIBUTES a;
	char *dir;
	int rc;

	*created = 0;
	if (!path || path[0] != '/')
		return saas__inval("the path must be absolute");
	if (!(dir = saas__strdup(path)))
		return SAAS_ENOMEM;
	strip_slashes(dir);
	pthread_mutex_lock(&ssh->sftp_mu);
	pthread_mutex_lock(&ssh->mu);
	if ((rc = sftp_get(&op, &sftp)) < 0)
		goto out;
	/* Asked first so that "already there" is told apart from "made", which sftp_mkdir_p does not. */
	if (sftp_stat(&op, dir, 1, &a) == 0) {
		rc = attrs_is_dir(&a) ? SAAS_OK
		                      : saas__error(SAAS_EEXISTS, SAAS_ERRCLASS_GUEST, 0,
		                                    "making directory %s: something that is not a directory is there", dir);
		goto out;
	}
	if ((rc = sftp_mkdir_p(&op, dir)) == SAAS_OK)
		*created = 1;
out:
	pthread_mutex_unlock(&ssh->mu);
	pthread_mutex_unlock(&ssh->sftp_mu);
	free(dir);
	return rc;
}

/*
 * How many names of a directory a remove reads before it removes them: the
 * host memory one level of the walk holds (at most this many names of
 * SAAS_NAME_MAX bytes), times SAAS_FILE_REMOVE_DEPTH_MAX levels at worst.
 */
#define RM_BATCH 64

/* One remove's walk: the entries it may still remove, and the path it was asked for (for messages). */
struct rm_walk {
	struct ssh_op *op;
	size_t left;
	const char *root;
};

/* Remove one entry, an empty directory if dir (sftp_mu and mu held), counting it against the walk's budget. */
static int rm_one(struct rm_walk *w, const char *path, int dir)
{
	int rc;

	if (!w->left)
		return saas__error(SAAS_ELIMIT, SAAS_ERRCLASS_GUEST, 0,
		                   "removing %s: over %d entries; what was reached is gone, call again to go on", w->root,
		                   SAAS_FILE_REMOVE_ENTRIES_MAX);
	w->left--;
	if (dir)
		SFTP_LOOP(w->op, rc, libssh2_sftp_rmdir_ex(w->op->ssh->sftp, path, (unsigned int)strlen(path)));
	else
		SFTP_LOOP(w->op, rc, libssh2_sftp_unlink_ex(w->op->ssh->sftp, path, (unsigned int)strlen(path)));
	/* Gone meanwhile is what was asked. */
	if (rc < 0 && !sftp_missing(w->op, rc))
		return sftp_fail(w->op, rc, "removing", path);
	return SAAS_OK;
}

/*
 * Empty directory `path` (a buffer this level appends names to and then
 * restores) and remove it, depth first (sftp_mu and mu held). The directory
 * is read RM_BATCH names at a time, closed, and those names removed before
 * it is read again: no handle stays open across the descent, and each pass
 * either removes what it read or fails, so the walk ends.
 */
static int rm_dir(struct rm_walk *w, saas__buf *path, unsigned int level)
{
	struct ssh_op *op = w->op;
	LIBSSH2_SFTP_HANDLE *h = NULL;
	struct dirent_rec *ents;
	size_t n = 0, base = path->len;
	char name[SAAS_NAME_MAX + 2];
	int rc = SAAS_OK, lrc;

	if (level > SAAS_FILE_REMOVE_DEPTH_MAX)
		return saas__error(SAAS_ELIMIT, SAAS_ERRCLASS_GUEST, 0, "removing %s: the tree is deeper than %d levels",
		                   w->root, SAAS_FILE_REMOVE_DEPTH_MAX);
	/* On the heap: SAAS_FILE_REMOVE_DEPTH_MAX levels of it would not fit a thread's stack. */
	if (!(ents = calloc(RM_BATCH, sizeof(*ents))))
		return saas__oom();
	for (;;) {
		SFTP_LOOP_PTR(op, h, lrc,
		              libssh2_sftp_open_ex(op->ssh->sftp, path->data, (unsigned int)path->len, 0, 0,
		                                   LIBSSH2_SFTP_OPENDIR));
		if (!h) {
			rc = sftp_fail(op, lrc, "removing", path->data);
			goto out;
		}
		while (n < RM_BATCH) {
			LIBSSH2_SFTP_ATTRIBUTES a;

			if ((rc = sftp_readdir_next(op, h, name, sizeof(name), &a, "removing", path->data)) < 0)
				goto out;
			if (rc == 0)
				break;
			if (!(ents[n].name = strdup(name))) {
				rc = saas__oom();
				goto out;
			}
			ents[n++].attrs = a;
		}
		sftp_close_handle(op, h);
		h = NULL;
		if (!n)
			break;
		for (size_t i = 0; i < n; i++) {
			path->len = base;
			if (saas__buf_printf(path, "/%s", ents[i].name) < 0) {
				rc = SAAS_ENOMEM;
				goto out;
			}
			/* The guest's readdir reports lstat's attributes: a link to a directory is removed as a link. */
			rc = attrs_is_dir(&ents[i].attrs) ? rm_dir(w, path, level + 1) : rm_one(w, path->data, 0);
			if (rc < 0)
				goto out;
		}
		for (size_t i = 0; i < n; i++)
			free(ents[i].name);
		n = 0;
		/* Read it again by its own name, not the last child's. */
		path->len = base;
		path->data[base] = '\0';
	}
	rc = rm_one(w, path->data, 1);
out:
	if (h)
		sftp_close_handle(op, h);
	for (size_t i = 0; i < n; i++)
		free(ents[i].name);
	free(ents);
	path->len = base;
	path->data[base] = '\0';
	return rc;
}

int saas__ssh_file_remove(saas__ssh *ssh, const char *path)
{
	struct ssh_op op = { ssh, 0 };
	struct rm_walk w = { &op, SAAS_FILE_REMOVE_ENTRIES_MAX, path };
	saas__buf buf = SAAS__BUF_INIT;
	LIBSSH2_SFTP *sftp;
	LIBSSH2_SFTP_ATTRIBUTES a;
	int rc, lrc;

	if (!path || path[0] != '/')
		return saas__inval("the path must be absolute");
	if (saas__buf_puts(&buf, path) < 0)
		return SAAS_ENOMEM;
	strip_slashes(buf.data);
	buf.len = strlen(buf.data);
	if (!strcmp(buf.data, "/")) {
		saas__buf_free(&buf);
		return saas__inval("removing / is refused");
	}
	pthread_mutex_lock(&ssh->sftp_mu);
	pthread_mutex_lock(&ssh->mu);
	if ((rc = sftp_get(&op, &sftp)) < 0)
		goto out;
	if ((lrc = sftp_stat(&op, buf.data, 0, &a)) < 0) {
		rc = sftp_fail(&op, lrc, "removing", buf.data);
		goto out;
	}
	rc = attrs_is_dir(&a) ? rm_dir(&w, &buf, 1) : rm_one(&w, buf.data, 0);
out:
	pthread_mutex_unlock(&ssh->mu);
	pthread_mutex_unlock(&ssh->sftp_mu);
	saas__buf_free(&buf);
	return rc;
}

/* One SFTP rename (mu held); the libssh2 status as it came. */
static int sftp_rename_raw(struct ssh_op *op, const char *from, const char *to)
{
	int rc;

	SFTP_LOOP(op, rc,
	          libssh2_sftp_rename_ex(op->ssh->sftp, from, (unsigned int)strlen(from), to, (unsigned int)strlen(to),
	                                 LIBSSH2_SFTP_RENAME_ATOMIC | LIBSSH2_SFTP_RENAME_NATIVE));
	return rc;
}

int saas__ssh_file_rename(saas__ssh *ssh, const char *from, const char *to, unsigned int flags)
{
	struct ssh_op op = { ssh, 0 };
	LIBSSH2_SFTP *sftp;
	LIBSSH2_SFTP_ATTRIBUTES fa, ta;
	saas__buf old = SAAS__BUF_INIT;
	unsigned char rnd[8];
	char *src = NULL, *dst = NULL, *slash;
	int rc, lrc;

	if (!from || from[0] != '/' || !to || to[0] != '/')
		return saas__inval("the paths must be absolute");
	if (!(src = saas__strdup(from)) || !(dst = saas__strdup(to))) {
		free(src);
		return SAAS_ENOMEM;
	}
	strip_slashes(src);
	strip_slashes(dst);
	if ((rc = saas__random(rnd, sizeof(rnd))) < 0) {
		free(src);
		free(dst);
		return rc;
	}
	pthread_mutex_lock(&ssh->sftp_mu);
	pthread_mutex_lock(&ssh->mu);
	if ((rc = sftp_get(&op, &sftp)) < 0)
		goto out;
	if ((lrc = sftp_stat(&op, src, 0, &fa)) < 0) {
		rc = sftp_fail(&op, lrc, "renaming", src);
		goto out;
	}
	/* rename(2) of a name onto itself does nothing, and succeeds. */
	if (!strcmp(src, dst)) {
		rc = SAAS_OK;
		goto out;
	}
	/*
	 * OpenSSH's sftp-server refuses an existing destination with a bare
	 * FAILURE, and libssh2 1.10 has no posix-rename@openssh.com to replace
	 * it: look first, so that the answer says why. The server's own check
	 * still stands against a destination made meanwhile.
	 */
	if ((lrc = sftp_stat(&op, dst, 0, &ta)) == 0) {
		if (!(flags & SAAS_FILE_RENAME_REPLACE) || attrs_is_dir(&ta) || attrs_is_dir(&fa)) {
			rc = saas__error(SAAS_EEXISTS, SAAS_ERRCLASS_GUEST, 0, "renaming %s: %s already exists%s", src, dst,
			                 (flags & SAAS_FILE_RENAME_REPLACE) ? " (a directory is never replaced)" : "");
			goto out;
		}
		/*
		 * Replace: the file in the way is renamed aside (a hidden name in its
		 * directory), the source renamed onto its name, then the old one
		 * removed. Were the two names one file (the same path spelt two
		 * ways, or through a link), the source goes aside with it, its
		 * rename then fails and the file is put back: nothing is lost.
		 */
		slash = strrchr(dst, '/');
		*slash = '\0';
		saas__buf_printf(&old, "%s/.aas-old-", dst);
		*slash = '/';
		for (size_t i = 0; i < sizeof(rnd); i++)
			saas__buf_printf(&old, "%02x", rnd[i]);
		if (!old.data) {
			rc = saas__oom();
			goto out;
		}
		if ((lrc = sftp_rename_raw(&op, dst, old.data)) < 0) {
			rc = sftp_fail(&op, lrc, "replacing", dst);
			goto out;
		}
		if ((lrc = sftp_rename_raw(&op, src, dst)) < 0) {
			rc = sftp_fail(&op, lrc, "renaming", src);
			if (sftp_rename_raw(&op, old.data, dst) < 0)
				saas__error(rc, SAAS_ERRCLASS_GUEST, 0, "renaming %s failed, and %s is left at %s", src, dst,
				            old.data);
			goto out;
		}
		sftp_unlink(&op, old.data);
		rc = SAAS_OK;
		goto out;
	}
	if (!sftp_missing(&op, lrc)) {
		rc = sftp_fail(&op, lrc, "renaming to", dst);
		goto out;
	}
	if ((slash = strrchr(dst, '/')) && slash != dst) {
		*slash = '\0';
		rc = sftp_mkdir_p(&op, dst);
		*slash = '/';
		if (rc < 0)
			goto out;
	}
	if ((lrc = sftp_rename_raw(&op, src, dst)) < 0) {
		rc = sftp_fail(&op, lrc, "renaming", src);
		if (rc == SAAS_EIO && sftp_stat(&op, dst, 0, &ta) == 0)
			rc = saas__error(SAAS_EEXISTS, SAAS_ERRCLASS_GUEST, 0, "renaming %s: %s already exists", src, dst);
		goto out;
	}
	rc = SAAS_OK;
out:
	pthread_mutex_unlock(&ssh->mu);
	pthread_mutex_unlock(&ssh->sftp_mu);
	saas__buf_free(&old);
	free(src);
	free(dst);
	return rc;
}
