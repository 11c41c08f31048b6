/*
 * Confinement: each VM's QEMU under a uid of its own. The embedded driver,
 * run by root, gives every domain a static DAC label (domain.c) with a uid
 * from the configured range and the group GUEST_GROUP (which the guard
 * matches); libvirt starts QEMU under it with no capabilities, no_new_privs
 * and QEMU's seccomp sandbox. A QEMU opens by path only what its label may
 * open: its own directory and overlay (given to its uid), the read-only
 * image and template files (readable by all), through directories it may
 * traverse but not list (0711). A VM's own directory stays the engine's
 * (0711): its QEMU opens its overlay and console in it by name, but cannot
 * add, rename or remove a name there, so nothing the engine later finds in
 * it by name is the VM's choice (the rule in libvirt_driver.h). The
 * engine's store and key stay the engine's: its files in the state
 * directory are made private at open.
 *
 * Under a system libvirtd (uri=qemu:///system) the engine is an unprivileged
 * user and libvirtd (root) starts QEMU under the same static labels. The
 * engine cannot chown, so it grants each VM's uid its directory and overlay
 * with POSIX ACL entries instead (the files stay the engine's), and checks at
 * open what it can of the daemon's side.
 *
 * The allocator is pure (tests/unit/test_libvirt.c); the rest touches files.
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "driver/libvirt/guard.h"
#include "driver/libvirt/launch.h"
#include "driver/libvirt/libvirt_driver.h"

/* ---- the allocator --------------------------------------------------------------------------- */

int saas__lv_uids_init(struct saas__lv_uids *u, unsigned int first, unsigned int count)
{
	memset(u, 0, sizeof(*u));
	if (!(u->used = calloc(count ? count : 1, 1)))
		return saas__oom();
	u->first = first;
	u->count = count;
	return SAAS_OK;
}

void saas__lv_uids_clear(struct saas__lv_uids *u)
{
	free(u->used);
	memset(u, 0, sizeof(*u));
}

int saas__lv_uids_take(struct saas__lv_uids *u, unsigned int *uid)
{
	/* Next fit: a uid just let go is reused last, after its QEMU is long gone. */
	for (unsigned int n = 0; n < u->count; n++) {
		unsigned int i = (u->next + n) % u->count;
		if (!u->used[i]) {
			u->used[i] = 1;
			u->next = (i + 1) % u->count;
			*uid = u->first + i;
			return SAAS_OK;
		}
	}
	return saas__error(SAAS_EBUSY, SAAS_ERRCLASS_DRIVER, 0,
	                   "every QEMU uid of the range %u-%u is in use (%u VMs): raise the driver option uids",
	                   u->first, u->first + u->count - 1, u->count);
}

bool saas__lv_uids_mark(struct saas__lv_uids *u, unsigned int uid)
{
	if (uid < u->first || uid - u->first >= u->count)
		return false;
	u->used[uid - u->first] = 1;
	return true;
}

unsigned int saas__lv_uids_free(const struct saas__lv_uids *u)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < u->count; i++)
		n += !u->used[i];
	return n;
}

void saas__lv_uids_put(struct saas__lv_uids *u, unsigned int uid)
{
	if (uid >= u->first && uid - u->first < u->count)
		u->used[uid - u->first] = 0;
}

/*
 * A uid for a new VM: a free one of the range that no process on the host
 * runs as. Another engine on this host, given an overlapping range, knows
 * nothing of our VMs, nor we of its: two QEMUs under one uid could signal
 * and trace each other. The uids in use (the owner of PROC/PID is its
 * process's uid) are held while the allocator chooses, then let go again.
 */
int saas__lv_uids_take_unused(struct saas__lv_uids *u, const char *proc, unsigned int *uid)
{
	DIR *dh = opendir(proc);
	struct dirent *e;
	unsigned int *held = NULL;
	size_t n = 0, cap = 0;
	int rc;

	while (dh && (e = readdir(dh))) {
		struct stat st;
		if (e->d_name[0] < '1' || e->d_name[0] > '9' || fstatat(dirfd(dh), e->d_name, &st, 0) < 0 ||
		    st.st_uid < u->first || st.st_uid - u->first >= u->count || u->used[st.st_uid - u->first])
			continue;
		if (SAAS__ARRAY_RESERVE(held, cap, n + 1) < 0)
			break;
		held[n++] = (unsigned int)st.st_uid;
		saas__lv_uids_mark(u, (unsigned int)st.st_uid);
	}
	if (dh)
		closedir(dh);
	rc = saas__lv_uids_take(u, uid);
	for (size_t i = 0; i < n; i++)
		saas__lv_uids_put(u, held[i]);
	free(held);
	return rc;
}

/* Caller holds d->mu. */
int saas__lv_uid_take(struct drv *d, unsigned int *uid)
{
	return saas__lv_uids_take_unused(&d->cf.uids, "/proc", uid);
}

/* ---- files ----------------------------------------------------------------------------------- */

/*
 * Can any uid reach path: x for others on every directory from / down to
 * path's parent (and path itself when self)? On failure *why says where not.
 */
static bool traversable(const char *path, bool self, char *why, size_t whylen)
{
	char real[PATH_MAX], *slash;
	struct stat st;

	if (!realpath(path, real)) {
		snprintf(why, whylen, "%s: %s", path, strerror(errno));
		return false;
	}
	if (!self && (slash = strrchr(real, '/')))
		slash[slash == real ? 1 : 0] = '\0';
	for (char *p = real;;) {
		char *next = strchr(p + 1, '/');
		if (next)
			*next = '\0';
		if (stat(real, &st) < 0) {
			snprintf(why, whylen, "%s: %s", real, strerror(errno));
			return false;
		}
		if (!(st.st_mode & S_IXOTH)) {
			snprintf(why, whylen, "QEMU's uids cannot traverse %s (mode %03o)", real, (unsigned)(st.st_mode & 0777));
			return false;
		}
		if (!next)
			return true;
		*next = '/';
		p = next;
	}
}

/*
 * Give uid perm (ACL_* bits: 4 r, 2 w, 1 x) on the file open as fd, which
 * the engine owns, besides the owner's own rights: a POSIX access ACL,
 * written as the kernel's xattr (linux/posix_acl_xattr.h) so no library is
 * needed. The group and others get nothing.
 */
static int acl_grant(int fd, unsigned int uid, unsigned int owner_perm, unsigned int perm)
{
	enum { USER_OBJ = 0x01, USER = 0x02, GROUP_OBJ = 0x04, MASK = 0x10, OTHER = 0x20 };
	const struct {
		uint16_t tag, perm;
		uint32_t id;
	} ent[] = {
		{ USER_OBJ, (uint16_t)owner_perm, UINT32_MAX }, { USER, (uint16_t)perm, uid },
		{ GROUP_OBJ, 0, UINT32_MAX }, { MASK, (uint16_t)perm, UINT32_MAX }, { OTHER, 0, UINT32_MAX },
	};
	unsigned char buf[4 + sizeof(ent) / sizeof(ent[0]) * 8], *p = buf;
	uint32_t version = htole32(2);

	memcpy(p, &version, 4);
	p += 4;
	for (size_t i = 0; i < SAAS_ARRAY_SIZE(ent); i++) {
		uint16_t tag = htole16(ent[i].tag), pm = htole16(ent[i].perm);
		uint32_t id = htole32(ent[i].id);
		memcpy(p, &tag, 2);
		memcpy(p + 2, &pm, 2);
		memcpy(p + 4, &id, 4);
		p += 8;
	}
	return fsetxattr(fd, "system.posix_acl_access", buf, sizeof(buf), 0);
}

/* The regular files of dir made private to their owner (the store, its journal, the key, the logs). */
static void files_private(const char *dir)
{
	DIR *dh = opendir(dir);
	struct dirent *e;

	while (dh && (e = readdir(dh))) {
		struct stat st;
		if (fstatat(dirfd(dh), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
		    (st.st_mode & 077))
			fchmodat(dirfd(dh), e->d_name, st.st_mode & 0700, 0);
	}
	if (dh)
		closedir(dh);
}

/* A directory QEMU may pass through but not list: created if missing, then 0711. */
static int dir_traversable(const char *dir)
{
	if (saas__mkdir_p(dir, 0711) < 0 || chmod(dir, 0711) < 0)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot open %s to QEMU's uids: %s", dir,
		                   strerror(errno));
	return SAAS_OK;
}

unsigned int saas__lv_disk_owner(struct drv *d, unsigned int uid)
{
	return d->cf.confined && uid && geteuid() == 0 ? uid : (unsigned int)geteuid();
}

int saas__lv_confine_template_fd(struct drv *d, const char *tdir, int fd)
{
	(void)d;
	/*
	 * Every clone's QEMU reads the frozen disk by path; nobody may write it.
	 * It was the template VM's overlay: its owner (root) or ACL entry (an
	 * unprivileged engine) gave that VM's uid write access, which a clone
	 * given the same uid later must not have. Done on the fd the engine
	 * checked: whatever a path names by now is not what was checked.
	 */
	if (fd >= 0)
		fremovexattr(fd, "system.posix_acl_access");
	if (chmod(tdir, 0711) < 0 ||
	    (fd >= 0 && ((geteuid() == 0 && fchown(fd, 0, 0) < 0) || fchmod(fd, 0644) < 0)))
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot open the template %s to clones: %s", tdir,
		                   strerror(errno));
	return SAAS_OK;
}

int saas__lv_confine_template(struct drv *d, const char *tdir, const char *disk)
{
	int fd = -1, rc;

	/* The disk is in the engine's own directory (tdir); a link there is not followed all the same. */
	if (disk && (fd = open(disk, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) < 0)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot open the template's disk %s: %s", disk,
		                   strerror(errno));
	if (fd >= 0) {
		struct stat st;
		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			close(fd);
			return saas__error(SAAS_EIO, SAAS_ERRCLASS_DRIVER, 0, "the template's disk %s is not a file", disk);
		}
	}
	rc = saas__lv_confine_template_fd(d, tdir, fd);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Templates built before confinement was on: their directories and disks opened to every clone. */
static void templates_open(struct drv *d, const char *templates)
{
	DIR *dh = opendir(templates);
	struct dirent *e;

	while (dh && (e = readdir(dh))) {
		char *tdir, *disk = NULL;
		struct stat st;
		if (e->d_name[0] == '.' || !(tdir = saas__lv_path_join(templates, e->d_name)))
			continue;
		if ((disk = saas__lv_path_join(tdir, "disk.qcow2")) && stat(disk, &st) < 0) {
			free(disk);
			disk = NULL;
		}
		saas__lv_confine_template(d, tdir, disk);
		free(disk);
		free(tdir);
	}
	if (dh)
		closedir(dh);
}

/*
 * VMs' directories from before they stayed the engine's (given to the VM's
 * uid, 0700), of VMs still running: taken back, so that no QEMU of theirs
 * can rename anything in them from now on. Their files stay the VMs'.
 */
static void vms_take_back(const char *vms)
{
	DIR *dh = opendir(vms);
	struct dirent *e;

	while (dh && (e = readdir(dh))) {
		struct stat st;
		int fd;
		if (e->d_name[0] == '.' ||
		    (fd = openat(dirfd(dh), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
			continue;
		/*
		 * Root's first, so that its QEMU can no longer add a name; then the
		 * engine's record of its uid (the owner it had), for the control port.
		 */
		if (fstat(fd, &st) == 0 && st.st_uid != 0 && fchown(fd, 0, 0) == 0 && fchmod(fd, 0711) == 0 &&
		    saas__vmdir_uid_write(fd, (unsigned int)st.st_uid) < 0)
			saas__error_clear();
		close(fd);
	}
	if (dh)
		closedir(dh);
}

/* The driver's directories QEMU passes through (0711), its files private, old templates opened, the allocator. */
static int confine_dirs(struct drv *d)
{
	static const char *const kinds[] = { "vms", "templates", "images", "snapshots" };
	char *dir = NULL;
	int rc;

	files_private(d->dir);
	if ((rc = dir_traversable(d->dir)) < 0)
		return rc;
	for (size_t i = 0; i < SAAS_ARRAY_SIZE(kinds); i++) {
		if (!(dir = saas__lv_path_join(d->dir, kinds[i])))
			return SAAS_ENOMEM;
		if ((rc = dir_traversable(dir)) < 0)
			goto out;
		if (strcmp(kinds[i], "templates") == 0)
			templates_open(d, dir);
		if (strcmp(kinds[i], "vms") == 0 && geteuid() == 0)
			vms_take_back(dir);
		free(dir);
		dir = NULL;
	}
	rc = saas__lv_uids_init(&d->cf.uids, d->cf.uid_first, d->cf.uid_count);
out:
	free(dir);
	return rc;
}

/* Why QEMU cannot run under uids of its own here ("" when it can), before anything is changed. */
static void confine_why(struct drv *d, const char *state_dir, char *why, size_t whylen)
{
	struct passwd pw, *res = NULL;
	char buf[4096];

	why[0] = '\0';
	if (geteuid() != 0)
		snprintf(why, whylen, "the engine does not run as root (a uid of its own per QEMU needs "
		         "CAP_SETUID and CAP_CHOWN)");
	else if (getpwnam_r(QEMU_USER, &pw, buf, sizeof(buf), &res) != 0 || !res)
		snprintf(why, whylen, "the account " QEMU_USER " is missing (scripts/quickstart and scripts/test create it)");
	else if (!saas__lv_guest_gid(&d->cf.guest_gid))
		snprintf(why, whylen, "the group " GUEST_GROUP " is missing (scripts/quickstart and scripts/test create it)");
	else if (traversable(state_dir, false, why, whylen))
		why[0] = '\0';
}

int saas__lv_confine_setup(struct drv *d, const char *state_dir, const char *root, bool required)
{
	char why[PATH_MAX + 128], *base = NULL, *slash;
	int rc = SAAS_OK;

	d->cf.confined = false;
	confine_why(d, state_dir, why, sizeof(why));
	if (!why[0]) {
		/*
		 * The path to each VM's files: traversable, not listable. What else
		 * lives there (the store, the key, libvirt's log) is the engine's
		 * alone. The images may live in the state directory: they are checked
		 * once it is traversable; QEMU gets staged copies of those it cannot
		 * reach (image.c).
		 */
		files_private(state_dir);
		if ((rc = dir_traversable(state_dir)) < 0)
			return rc;
		d->cf.stage_images = !traversable(d->images, true, why, sizeof(why));
		why[0] = '\0';
	}
	if (why[0]) {
		if (required)
			return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "uids: QEMU cannot run under uids of its own: %s",
			                   why);
		saas__lv_log(d, SAAS_LOG_INFO, "QEMU runs without a uid of its own per VM: %s", why);
		return SAAS_OK;
	}
	if (!(base = saas__strdup(root))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	if ((slash = strrchr(base, '/')) && slash != base)
		*slash = '\0';
	if ((rc = confine_dirs(d)) < 0 || (rc = dir_traversable(base)) < 0 || (rc = dir_traversable(root)) < 0)
		goto out;
	d->cf.confined = true;
out:
	free(base);
	return rc;
}

int saas__lv_confine_vm_fd(struct drv *d, int fd, const char *path, unsigned int uid)
{
	if (!uid)
		return SAAS_OK;
	if (geteuid() == 0 ? fchown(fd, uid, d->cf.guest_gid) < 0 || fchmod(fd, 0600) < 0 : acl_grant(fd, uid, 6, 6) < 0)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot give %s to QEMU's uid %u: %s", path, uid,
		                   strerror(errno));
	return SAAS_OK;
}

/* The VM's file name in its directory dfd, open without following (made when flags say O_CREAT), given to its uid when give. */
static int vm_file_give(struct launch *l, int dfd, const char *name, int flags, bool give)
{
	int fd = openat(dfd, name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | flags, 0600), rc = SAAS_OK;
	struct stat st;

	if (fd < 0)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot give %s/%s to QEMU's uid %u: %s", l->dir, name,
		                   l->uid, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_DRIVER, 0, "%s/%s is not a file", l->dir, name);
	else if (give)
		rc = saas__lv_confine_vm_fd(l->d, fd, name, l->uid);
	close(fd);
	return rc;
}

int saas__lv_confine_vm_files(struct launch *l)
{
	const char *overlay = l->overlay ? strrchr(l->overlay, '/') : NULL;
	int rc, dfd = -1;

	if (!l->uid)
		return SAAS_OK;
	/*
	 * The directory stays the engine's: its QEMU may pass through it to its
	 * files (x for others; its name is known), and write those files, but
	 * never add, rename or remove a name in it. Other VMs' QEMUs pass too and
	 * find nothing of theirs: the files are 0600, the control socket root's
	 * and writable by no other (libvirt makes it, 0775, and hands QEMU the
	 * listening fd; a connect needs write access). An
	 * unprivileged engine (a system libvirtd) grants the VM's uid r-x on the
	 * directory instead, the same in effect.
	 */
	if ((dfd = open(l->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		goto fail;
	if (geteuid() == 0 ? fchmod(dfd, 0711) < 0 : acl_grant(dfd, l->uid, 7, 5) < 0)
		goto fail;
	/*
	 * The console log is made here, the engine's: libvirt opens it and hands
	 * QEMU the fd, so the VM's uid needs no name made in the directory, nor
	 * access to the file. An unprivileged engine reads it back (a failed
	 * boot's last words) and cuts it down (console.h), which libvirtd's
	 * root-made file would not let it.
	 */
	if ((rc = vm_file_give(l, dfd, "console.log", O_CREAT | O_EXCL, false)) < 0 ||
	    (overlay && (rc = vm_file_give(l, dfd, overlay + 1, 0, true)) < 0) ||
	    (rc = saas__vmdir_uid_write(dfd, l->uid)) < 0)
		goto out;
	rc = SAAS_OK;
	goto out;
fail:
	rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot give %s to QEMU's uid %u: %s", l->dir, l->uid,
	                 strerror(errno));
out:
	if (dfd >= 0)
		close(dfd);
	return rc;
}

/*
 * Under a system libvirtd: per-VM uids when the daemon applies our labels
 * (it is the privileged one, with its DAC driver), QEMU's uids can reach the
 * state directory, and its filesystem takes ACLs. The daemon's qemu.conf is
 * the operator's: what it decides that the API shows is checked here, the
 * rest is docs/operations.md.
 */
int saas__lv_confine_system(struct drv *d, const char *state_dir, bool required)
{
	char why[PATH_MAX + 256] = "", *uri = virConnectGetURI(saas__lv_conn(d)), *caps = NULL, *probe = NULL;
	const char *dac, *end;
	int rc = SAAS_OK, fd;

	d->cf.confined = false;
	if (!uri || !strstr(uri, ":///system"))
		snprintf(why, sizeof(why), "%s is not the system libvirtd (qemu:///system): a session daemon runs QEMU "
		         "as the engine's own user", uri ? uri : d->uri);
	else if (!(caps = virConnectGetCapabilities(saas__lv_conn(d))) || !strstr(caps, "<model>dac</model>"))
		snprintf(why, sizeof(why), "libvirtd has no DAC security driver, which applies each VM's uid");
	else if (traversable(state_dir, false, why, sizeof(why)))
		why[0] = '\0';
	if (!why[0] && !(probe = saas__lv_path_join(d->dir, ".acl-probe"))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	if (!why[0]) {
		if ((fd = open(probe, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0 ||
		    acl_grant(fd, d->cf.uid_first, 6, 4) < 0)
			snprintf(why, sizeof(why), "the state directory's filesystem takes no POSIX ACLs (%s), which give each "
			         "VM's uid its files", strerror(errno));
		if (fd >= 0)
			close(fd);
		unlink(probe);
	}
	if (why[0]) {
		if (required)
			rc = saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "uids: QEMU cannot run under uids of its own: %s",
			                 why);
		else
			saas__lv_log(d, SAAS_LOG_INFO, "QEMU runs without a uid of its own per VM: %s", why);
		goto out;
	}
	/* libvirt's own probes (and any VM without our label) run as qemu.conf's user: not root. */
	if ((dac = strstr(caps, "<model>dac</model>")) && (end = strstr(dac, "</secmodel>")) &&
	    memmem(dac, (size_t)(end - dac), ">+0:", 4))
		saas__lv_log(d, SAAS_LOG_WARN, "libvirtd's qemu.conf runs QEMU as root by default (user = \"root\"): "
		             "set user and group to an unprivileged account (docs/operations.md)");
	/* Each VM's group: GUEST_GROUP when the host has it (the guard's), else its own uid as a gid. */
	if (!saas__lv_guest_gid(&d->cf.guest_gid))
		d->cf.guest_gid = 0;
	files_private(state_dir);
	if ((rc = dir_traversable(state_dir)) < 0)
		goto out;
	d->cf.stage_images = !traversable(d->images, true, why, sizeof(why));
	if ((rc = confine_dirs(d)) < 0)
		goto out;
	d->cf.confined = true;
out:
	free(probe);
	free(caps);
	free(uri);
	return rc;
}
