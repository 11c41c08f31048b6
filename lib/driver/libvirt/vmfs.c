/*
 * The engine's hands in a VM's files. The threat is the one
 * docs/security.md states: a tenant who escaped into their QEMU runs as that
 * VM's uid, and everything that uid can write, or say over QMP, is the
 * attacker's. The rule (libvirt_driver.h) is that the engine never resolves
 * a path through a directory a VM's uid can write, and never acts on a path
 * QEMU reports without checking it names the file the engine made:
 *
 *  - a VM's directory is the engine's (root's, or an unprivileged engine's
 *    with an ACL entry), 0711 and never writable by its QEMU, so nothing in
 *    it can be swapped for a symlink, a hard link or another socket between
 *    the engine's look and its act (uid.c gives it out);
 *  - a file the engine makes there for QEMU is made O_CREAT|O_EXCL|O_NOFOLLOW
 *    and given to the VM's uid through its fd;
 *  - a disk QEMU names (query-block) must be one of the VM's own disk names
 *    in its directory, and is then opened O_NOFOLLOW and checked on the fd
 *    (a regular file of the expected owner) before it is linked or chowned;
 *  - trees are removed through directory fds, each opened O_NOFOLLOW, so a
 *    directory swapped for a symlink mid-walk is not followed.
 *
 * The checks on names and stat results are pure (tests/unit/test_libvirt.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/snapshot.h"
#include "driver/libvirt/vmfs.h"

/* A tree's depth the removal follows at most: the engine's own trees are two levels deep. */
#define RM_DEPTH_MAX 16

/* Remove what dirfd holds, then nothing more: each subdirectory opened O_NOFOLLOW below it. */
static int rm_children(int dirfd, int depth)
{
	DIR *dh;
	struct dirent *e;
	int rc = 0, fd = dup(dirfd);

	if (fd < 0)
		return -1;
	if (!(dh = fdopendir(fd))) {
		close(fd);
		return -1;
	}
	while ((e = readdir(dh))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (saas__lv_rm_tree_at(dirfd, e->d_name, depth + 1) < 0)
			rc = -1;
	}
	closedir(dh);
	return rc;
}

int saas__lv_rm_tree_at(int parent, const char *name, int depth)
{
	int fd, rc;

	/* A symlink, a socket or a file goes as a name: unlinkat never follows. */
	if (unlinkat(parent, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -1;
	if (depth > RM_DEPTH_MAX)
		return -1;
	/* A directory: opened without following, so one swapped for a symlink since is refused (ELOOP/ENOTDIR). */
	if ((fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return errno == ENOENT ? 0 : -1;
	rc = rm_children(fd, depth);
	close(fd);
	/* Swapped for a link (or a file) meanwhile: that name goes, as a name. */
	if (unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT &&
	    (errno != ENOTDIR || (unlinkat(parent, name, 0) < 0 && errno != ENOENT)))
		rc = -1;
	return rc;
}

void saas__lv_rm_tree(const char *path)
{
	char *dir = saas__strdup(path), *slash;
	int fd;

	if (!dir) {
		saas__error_clear();
		return;
	}
	/*
	 * The path's parent is one of the driver's own directories, which no
	 * QEMU can write: resolving it by name is safe, the rest goes by fds.
	 */
	if (!(slash = strrchr(dir, '/'))) {
		saas__lv_rm_tree_at(AT_FDCWD, dir, 0);
	} else if (slash[1]) {
		*slash = '\0';
		if ((fd = open(slash == dir ? "/" : dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
			saas__lv_rm_tree_at(fd, slash + 1, 0);
			close(fd);
		}
	}
	free(dir);
}

bool saas__lv_vm_disk_name(const char *vmdir, const char *path, char *name, size_t cap)
{
	size_t n = strlen(vmdir), len;
	const char *base;

	if (strncmp(path, vmdir, n) != 0 || path[n] != '/')
		return false;
	base = path + n + 1;
	len = strlen(base);
	if (len >= cap || len < strlen("disk.qcow2"))
		return false;
	if (strcmp(base, "disk.qcow2") != 0) {
		/* disk-SNAP.qcow2: the overlay a fork or pause switched the VM onto (snapshot.c). */
		char snap[SNAPSHOT_NAME_MAX + 1];
		size_t sl;
		if (len <= strlen("disk-.qcow2") || strncmp(base, "disk-", 5) != 0 || strcmp(base + len - 6, ".qcow2") != 0)
			return false;
		if ((sl = len - strlen("disk-.qcow2")) > SNAPSHOT_NAME_MAX)
			return false;
		memcpy(snap, base + 5, sl);
		snap[sl] = '\0';
		if (!saas__lv_snapshot_name_ok(snap))
			return false;
	}
	memcpy(name, base, len + 1);
	return true;
}

bool saas__lv_vm_disk_stat_ok(const struct stat *st, unsigned int owner)
{
	return S_ISREG(st->st_mode) && st->st_uid == owner;
}

int saas__lv_vm_disk_open(const char *vmdir, const char *path, unsigned int owner, int *out)
{
	char name[NAME_MAX + 1];
	struct stat st;
	int dfd = -1, fd = -1, rc;

	*out = -1;
	if (!saas__lv_vm_disk_name(vmdir, path, name, sizeof(name)))
		return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0,
		                   "QEMU names %s as the VM's disk, which is none of the VM's own: refused", path);
	if ((rc = saas__vmdir_open(vmdir, &dfd)) < 0)
		return rc;
	/* O_NONBLOCK: a FIFO put in its place must not hang the engine before fstat refuses it. */
	if ((fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) < 0) {
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_OS, errno, "the VM's disk %s cannot be opened as a file: %s", path,
		                 strerror(errno));
		goto out;
	}
	if (fstat(fd, &st) < 0 || !saas__lv_vm_disk_stat_ok(&st, owner)) {
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0,
		                 "the VM's disk %s is not a file of its QEMU's (owner %u, expected %u): refused", path,
		                 (unsigned)st.st_uid, owner);
		goto out;
	}
	*out = fd;
	fd = -1;
	rc = SAAS_OK;
out:
	if (fd >= 0)
		close(fd);
	close(dfd);
	return rc;
}

int saas__lv_link_fd(int fd, const char *to)
{
	char proc[64];

	/*
	 * linkat(AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH, which an unprivileged
	 * engine lacks; the /proc link names the same inode, not a path.
	 */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (linkat(AT_FDCWD, proc, AT_FDCWD, to, AT_SYMLINK_FOLLOW) < 0)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot link the VM's disk to %s: %s", to,
		                   strerror(errno));
	return SAAS_OK;
}

int saas__lv_vm_file_create(const char *vmdir, const char *name, int *out)
{
	int dfd = -1, fd, rc;

	*out = -1;
	if ((rc = saas__vmdir_open(vmdir, &dfd)) < 0)
		return rc;
	if ((fd = openat(dfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot create %s/%s: %s", vmdir, name, strerror(errno));
	else
		*out = fd;
	close(dfd);
	return rc;
}
