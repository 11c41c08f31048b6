/*
 * Confinement: each VM's QEMU under a uid of its own. The embedded driver,
 * run by root, gives every domain a static DAC label (domain.c) with a uid
 * from the configured range and the group GUEST_GROUP (which the guard
 * matches); libvirt starts QEMU under it with no capabilities, no_new_privs
 * and QEMU's seccomp sandbox. A QEMU opens by path only what its label may
 * open: its own directory and overlay (given to its uid), the read-only
 * image and template files (readable by all), through directories it may
 * traverse but not list (0711). The engine's store and key stay the
 * engine's: its files in the state directory are made private at open.
 *
 * The allocator is pure (tests/unit/test_libvirt.c); the rest touches files.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

void saas__lv_uids_put(struct saas__lv_uids *u, unsigned int uid)
{
	if (uid >= u->first && uid - u->first < u->count)
		u->used[uid - u->first] = 0;
}

/*
 * A uid for a new VM: a free one of the range that no process on the host
 * runs as. Another engine on this host, given an overlapping range, knows
 * nothing of our VMs, nor we of its: two QEMUs under one uid could signal
 * and trace each other. The uids in use (the owner of /proc/PID is its
 * process's uid) are held while the allocator chooses, then let go again.
 * Caller holds d->mu.
 */
int saas__lv_uid_take(struct drv *d, unsigned int *uid)
{
	DIR *proc = opendir("/proc");
	struct dirent *e;
	unsigned int *held = NULL;
	size_t n = 0, cap = 0;
	int rc;

	while (proc && (e = readdir(proc))) {
		struct stat st;
		if (e->d_name[0] < '1' || e->d_name[0] > '9' || fstatat(dirfd(proc), e->d_name, &st, 0) < 0 ||
		    st.st_uid < d->uids.first || st.st_uid - d->uids.first >= d->uids.count ||
		    d->uids.used[st.st_uid - d->uids.first])
			continue;
		if (SAAS__ARRAY_RESERVE(held, cap, n + 1) < 0)
			break;
		held[n++] = (unsigned int)st.st_uid;
		saas__lv_uids_mark(&d->uids, (unsigned int)st.st_uid);
	}
	if (proc)
		closedir(proc);
	rc = saas__lv_uids_take(&d->uids, uid);
	for (size_t i = 0; i < n; i++)
		saas__lv_uids_put(&d->uids, held[i]);
	free(held);
	return rc;
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

int saas__lv_confine_template(struct drv *d, const char *tdir, const char *disk)
{
	(void)d;
	/* Every clone's QEMU reads the frozen disk by path; nobody may write it. */
	if (chmod(tdir, 0711) < 0 || (disk && (chown(disk, 0, 0) < 0 || chmod(disk, 0644) < 0)))
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot open the template %s to clones: %s", tdir,
		                   strerror(errno));
	return SAAS_OK;
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
	else if (!saas__lv_guest_gid(&d->guest_gid))
		snprintf(why, whylen, "the group " GUEST_GROUP " is missing (scripts/quickstart and scripts/test create it)");
	else if (traversable(state_dir, false, why, whylen))
		why[0] = '\0';
}

int saas__lv_confine_setup(struct drv *d, const char *state_dir, const char *root, bool required)
{
	char why[PATH_MAX + 128], *vms = NULL, *templates = NULL, *base = NULL, *slash;
	int rc = SAAS_OK;

	d->confined = false;
	confine_why(d, state_dir, why, sizeof(why));
	if (!why[0]) {
		/*
		 * The path to each VM's files: traversable, not listable. What else
		 * lives there (the store, the key, libvirt's log) is the engine's
		 * alone. The images may live in the state directory: they are checked
		 * once it is traversable, and it goes back to 0700 if they fail.
		 */
		files_private(state_dir);
		if ((rc = dir_traversable(state_dir)) < 0)
			return rc;
		if (!traversable(d->images, true, why, sizeof(why)))
			chmod(state_dir, 0700);
	}
	if (why[0]) {
		if (required)
			return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "uids: QEMU cannot run under uids of its own: %s",
			                   why);
		saas__lv_log(d, SAAS_LOG_INFO, "QEMU runs without a uid of its own per VM: %s", why);
		return SAAS_OK;
	}
	if (!(vms = saas__lv_path_join(d->dir, "vms")) || !(templates = saas__lv_path_join(d->dir, "templates")) ||
	    !(base = saas__strdup(root))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	files_private(d->dir);
	if ((slash = strrchr(base, '/')) && slash != base)
		*slash = '\0';
	if ((rc = dir_traversable(d->dir)) < 0 || (rc = dir_traversable(vms)) < 0 ||
	    (rc = dir_traversable(templates)) < 0 || (rc = dir_traversable(base)) < 0 ||
	    (rc = dir_traversable(root)) < 0)
		goto out;
	templates_open(d, templates);
	if ((rc = saas__lv_uids_init(&d->uids, d->uid_first, d->uid_count)) < 0)
		goto out;
	d->confined = true;
out:
	free(vms);
	free(templates);
	free(base);
	return rc;
}

int saas__lv_confine_vm_files(struct launch *l)
{
	if (!l->uid)
		return SAAS_OK;
	if (chown(l->dir, l->uid, l->d->guest_gid) < 0 || chmod(l->dir, 0700) < 0 ||
	    (l->overlay && (chown(l->overlay, l->uid, l->d->guest_gid) < 0 || chmod(l->overlay, 0600) < 0)))
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot give %s to QEMU's uid %u: %s", l->dir, l->uid,
		                   strerror(errno));
	return SAAS_OK;
}
