/*
 * Snapshots: a running VM's memory, device state and disk as they were at
 * one moment, for a fork (the VM runs on) and a pause (the VM is gone once
 * saved); and new VMs restored from them the way clones of a template are
 * (clone.c), any number of times.
 *
 * STATE/libvirt/snapshots/SNAP holds what a template's directory holds, so
 * that the clone path reads it unchanged:
 *   state          the migration stream: all of the guest's RAM (a VM's RAM
 *                  is its own, never a shared mapping), and its devices
 *   disk.qcow2     the VM's disk at that moment, frozen (disk images only)
 *   snapshot.json  its description (struct saas__lv_snapshot)
 * written as SNAP.tmp and renamed into place once complete; a fork whose
 * children the core begins meanwhile (snapshot_expect) is put in place
 * before its state is saved, marked (SNAPSHOT_SAVING) until it is, so that
 * the children's VMs start beside the save (fork_publish).
 *
 * The disk. The VM is paused, so its disk does not change: its top overlay
 * is frozen where it is and hard-linked into the snapshot. After a fork the
 * VM runs on over a new overlay whose backing file is the snapshot's disk
 * (QMP blockdev-snapshot-sync onto an overlay made here, so its header names
 * the snapshot's path); every VM restored from it gets an overlay of its own
 * on the same file. A disk's backing files are named by path in its qcow2
 * header, and that is how a snapshot knows it is in use: deleting one marks
 * it (a file "deleted" in its directory: it is no longer listed nor restored)
 * and its directory goes once no disk of a VM or of another snapshot backs
 * onto it, checked at each destroy and at open. A snapshot without a disk
 * goes at once: a VM restored from it holds all of it in its memory.
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

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "driver/libvirt/domain.h"
#include "driver/libvirt/egress.h"
#include "driver/libvirt/egress_host.h"
#include "driver/libvirt/host_remote.h"
#include "driver/libvirt/image.h"
#include "driver/libvirt/launch.h"
#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/memfile.h"
#include "driver/libvirt/migstream.h"
#include "driver/libvirt/snapshot.h"
#include "driver/libvirt/template.h"
#include "driver/libvirt/vm.h"
#include "driver/libvirt/vmfs.h"
#include "util/file.h"
#include "util/spawn.h"

#define SNAPSHOT_JSON_MAX 65536
/*
 * A fork's snapshot whose RAM is split off its stream after the parent runs
 * on, into the memory its children map, holds this file as long as its RAM
 * is whole only there: on storage the stream stays whole, and the split's
 * state beside it. An engine without that memory (the next one, after a
 * restart) makes the stream the state at its open (snapshot_unsplit), which
 * each child then loads. Writing the RAM to storage as well would cost a
 * fork's children CPU and I/O for a snapshot the core deletes once they are
 * made. A split that failed leaves the stream as the state, unmarked.
 */
#define SNAPSHOT_SPLITTING "splitting"
/*
 * A fork's snapshot put in place before its state was saved, so that the
 * children the core begins meanwhile (snapshot_expect) start their VMs on it,
 * holds this file until its description and state are written. One left
 * behind is undone at the next open as a half-written one is (snapshot_recover).
 */
#define SNAPSHOT_SAVING "saving"

/* ---- names and descriptions (pure) ----------------------------------------------------------- */

bool saas__lv_snapshot_name_ok(const char *name)
{
	size_t n = name ? strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") : 0;

	return n >= 1 && n <= SNAPSHOT_NAME_MAX && name[n] == '\0';
}

bool saas__lv_disk_volume_ok(const char *name)
{
	size_t n = name ? strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789._-") : 0;

	return n > 6 && n <= SNAPSHOT_VOLUME_MAX && name[n] == '\0' && name[0] != '.' && strcmp(name + n - 6, ".qcow2") == 0;
}

void saas__lv_snapshot_clear(struct saas__lv_snapshot *s)
{
	free(s->host_key);
	for (size_t i = 0; s->chain && s->chain[i]; i++)
		free(s->chain[i]);
	free(s->chain);
	memset(s, 0, sizeof(*s));
}

char *saas__lv_snapshot_json(const struct saas__lv_snapshot *s)
{
	json_t *j, *chain = json_array();
	char *text = NULL;

	for (size_t i = 0; chain && s->chain && s->chain[i]; i++)
		json_array_append_new(chain, json_string(s->chain[i]));
	j = json_pack("{s:i, s:s, s:s, s:s, s:I, s:I, s:I, s:s, s:I, s:I, s:o}", "format", SNAPSHOT_FORMAT, "source",
	              s->source, "image", s->image, "host_key", s->host_key ? s->host_key : "", "vcpus",
	              (json_int_t)s->vcpus, "memory_mib", (json_int_t)s->memory_mib, "disk_gb", (json_int_t)s->disk_gb,
	              "ram_block", s->ram_block, "state_bytes", (json_int_t)s->state_bytes, "disk_bytes",
	              (json_int_t)s->disk_bytes, "chain", chain);
	/* Only when there is one: a snapshot without the port reads the same to an older driver. */
	if (j && s->control)
		json_object_set_new(j, "control", json_true());
	if (j && s->ignore_shared)
		json_object_set_new(j, "ignore_shared", json_true());
	if (j && s->disk_volume[0])
		json_object_set_new(j, "disk_volume", json_string(s->disk_volume));
	if (j)
		text = json_dumps(j, JSON_INDENT(2));
	json_decref(j);
	return text;
}

/* The disk volume description j names into out ("" for none); SAAS_EINVAL when it names something else. */
static int disk_volume_of(const json_t *j, char out[SNAPSHOT_VOLUME_MAX + 1])
{
	const json_t *dv = json_object_get(j, "disk_volume");

	out[0] = '\0';
	if (dv && (!json_is_string(dv) || !saas__lv_disk_volume_ok(json_string_value(dv))))
		return saas__inval("the snapshot's disk volume is not a name this driver gives");
	if (dv)
		saas__strlcpy(out, json_string_value(dv), SNAPSHOT_VOLUME_MAX + 1);
	return SAAS_OK;
}

int saas__lv_snapshot_disk_volume(const char *text, char out[SNAPSHOT_VOLUME_MAX + 1])
{
	json_t *j = text ? json_loads(text, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
	int rc = disk_volume_of(j, out);

	json_decref(j);
	return rc;
}

int saas__lv_snapshot_parse(const char *text, struct saas__lv_snapshot *s)
{
	json_t *j = json_loads(text, 0, NULL), *chain = NULL;
	const char *source, *image, *host_key, *ram_block;
	json_int_t format, vcpus, memory, disk, state_bytes, disk_bytes;
	size_t n;
	int rc = SAAS_OK;

	memset(s, 0, sizeof(*s));
	if (!j || json_unpack(j, "{s:I, s:s, s:s, s:s, s:I, s:I, s:I, s:s, s:I, s:I, s:o}", "format", &format, "source",
	                      &source, "image", &image, "host_key", &host_key, "vcpus", &vcpus, "memory_mib", &memory,
	                      "disk_gb", &disk, "ram_block", &ram_block, "state_bytes", &state_bytes, "disk_bytes",
	                      &disk_bytes, "chain", &chain) < 0 ||
	    !json_is_array(chain)) {
		rc = saas__inval("the snapshot's description is not one this driver wrote");
		goto out;
	}
	if (format < SNAPSHOT_FORMAT_MIN || format > SNAPSHOT_FORMAT) {
		rc = saas__inval("the snapshot is of format %lld, this driver reads %d to %d", (long long)format,
		                 SNAPSHOT_FORMAT_MIN, SNAPSHOT_FORMAT);
		goto out;
	}
	if (!saas__strlcpy(s->source, source, sizeof(s->source)) || !saas__strlcpy(s->image, image, sizeof(s->image)) ||
	    !saas__strlcpy(s->ram_block, ram_block, sizeof(s->ram_block)) || !host_key[0] || vcpus < 1 ||
	    vcpus > 1024 || memory < 1 || memory > (1 << 24) || disk < 0 || disk > (1 << 20) || state_bytes < 0 ||
	    disk_bytes < 0 || (n = json_array_size(chain)) > SNAPSHOT_CHAIN_MAX) {
		rc = saas__inval("the snapshot's description holds a value out of bounds");
		goto out;
	}
	if (!(s->host_key = saas__strdup(host_key)) || !(s->chain = calloc(n + 1, sizeof(*s->chain)))) {
		rc = saas__oom();
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const char *p = json_string_value(json_array_get(chain, i));
		if (!p || p[0] != '/') {
			rc = saas__inval("the snapshot's disk chain holds something other than a path");
			goto out;
		}
		if (!(s->chain[i] = saas__strdup(p))) {
			rc = saas__oom();
			goto out;
		}
	}
	if ((rc = disk_volume_of(j, s->disk_volume)) < 0)
		goto out;
	s->format = (unsigned int)format;
	s->control = json_is_true(json_object_get(j, "control"));
	s->ignore_shared = json_is_true(json_object_get(j, "ignore_shared"));
	s->vcpus = (unsigned int)vcpus;
	s->memory_mib = (unsigned int)memory;
	s->disk_gb = (unsigned int)disk;
	s->state_bytes = state_bytes;
	s->disk_bytes = disk_bytes;
out:
	if (rc < 0)
		saas__lv_snapshot_clear(s);
	json_decref(j);
	return rc;
}

void saas__lv_ram_block_in(const char *head, size_t n, char *out, size_t len)
{
	/*
	 * The RAM section's setup comes first after the configuration: the
	 * total size, then each block as a length byte, its name and its size
	 * (QEMU's ram_save_setup). Two names are possible here, looked for as
	 * they are framed: a block of this driver's VMs, or QEMU's own.
	 */
	static const char *const names[] = { MEM_ID, "pc.ram" };
	char want[64];

	out[0] = '\0';
	for (size_t i = 0; n > 0 && i < SAAS_ARRAY_SIZE(names); i++) {
		size_t w = strlen(names[i]);
		want[0] = (char)w;
		memcpy(want + 1, names[i], w);
		if (memmem(head, n, want, w + 1)) {
			saas__strlcpy(out, names[i], len);
			return;
		}
	}
}

void saas__lv_state_ram_block(const char *path, char *out, size_t len)
{
	char head[STATE_HEAD_MAX];
	ssize_t n = -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		n = read(fd, head, sizeof(head));
		close(fd);
	}
	saas__lv_ram_block_in(head, n > 0 ? (size_t)n : 0, out, len);
}

int saas__lv_snapshot_check(const struct saas__lv_snapshot *s, const char *snap)
{
	/*
	 * A migration stream names the RAM blocks it carries, and QEMU loads it
	 * only into a VM whose blocks have those names. Every VM this driver
	 * makes has one, MEM_ID; a snapshot of format 1 may be from before
	 * (QEMU's own, "pc.ram"), and what it recorded is not to be trusted (the
	 * restore reads its stream instead). Refused here, the sandbox stays
	 * paused and says why, rather than a VM that fails to load or runs broken.
	 */
	if (strcmp(s->ram_block, MEM_ID) == 0 || (s->format >= 2 && !s->ram_block[0]))
		return SAAS_OK;
	return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0,
	                   "snapshot %s was saved by an older version of this driver (format %u, its RAM block %s%s%s, "
	                   "not \"" MEM_ID "\"), whose memory layout this one no longer makes: it cannot be restored; "
	                   "destroy its sandbox", snap, s->format, s->ram_block[0] ? "\"" : "",
	                   s->ram_block[0] ? s->ram_block : "not found in its saved state", s->ram_block[0] ? "\"" : "");
}

/* ---- files ----------------------------------------------------------------------------------- */

/* DIR/snapshots/snap/file (file NULL: the directory); NULL when out of memory. */
static char *snap_path(struct drv *d, const char *snap, const char *file)
{
	char *p;

	if (asprintf(&p, "%s/snapshots/%s%s%s", d->dir, snap, file ? "/" : "", file ? file : "") < 0) {
		saas__oom();
		return NULL;
	}
	return p;
}

static bool exists(const char *path)
{
	struct stat st;

	return path && lstat(path, &st) == 0;
}

/* What a file holds on storage (its allocated blocks: overlays and streams are sparse or short). */
static int64_t stored_bytes(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (int64_t)st.st_blocks * 512 : 0;
}

/* The backing files of the disk at path, nearest first, as a NULL-terminated array into s->chain. */
int saas__lv_snapshot_chain(const char *path, struct saas__lv_snapshot *s)
{
	size_t n = 0, cap = 0;
	char *next = saas__lv_qcow2_backing(path);
	int rc = SAAS_OK;

	while (next && n < SNAPSHOT_CHAIN_MAX) {
		if (SAAS__ARRAY_RESERVE(s->chain, cap, n + 2) < 0) {
			rc = saas__oom();
			break;
		}
		s->chain[n++] = next;
		s->chain[n] = NULL;
		next = saas__lv_qcow2_backing(s->chain[n - 1]);
	}
	free(next);
	return rc;
}

/*
 * Write text to path, whole, or fail saying why. The files are the engine's,
 * in a snapshot's temporary directory (renamed into place whole): made
 * beside, synced, renamed, so nothing put at the name is written through.
 */
static int write_file(const char *path, const char *text)
{
	return saas__file_write_atomic(AT_FDCWD, path, text, strlen(text), 0644, SAAS__FILE_FSYNC);
}

/* Read snapshot snap's description; SAAS_ENOTFOUND when it is missing, incomplete or deleted. */
static int snapshot_read(struct drv *d, const char *snap, struct saas__lv_snapshot *s)
{
	char *meta = snap_path(d, snap, "snapshot.json"), *gone = snap_path(d, snap, "deleted"), *text = NULL;
	int rc;

	memset(s, 0, sizeof(*s));
	if (!meta || !gone)
		rc = SAAS_ENOMEM;
	else if (exists(gone))
		rc = saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_DRIVER, 0, "no snapshot %s", snap);
	/* The engine's own, under its state directory: never read through a link put there. */
	else if ((rc = saas__file_read(&text, NULL, AT_FDCWD, meta, SNAPSHOT_JSON_MAX,
	                               SAAS__FILE_NOFOLLOW | SAAS__FILE_QUIET)) == SAAS_ETOOBIG)
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "snapshot %s: its description is over %d bytes", snap,
		                 SNAPSHOT_JSON_MAX);
	else if (rc < 0)
		rc = saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_DRIVER, 0, "no snapshot %s", snap);
	else if (saas__lv_snapshot_parse(text, s) < 0)
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "snapshot %s: %s", snap, saas_error_last()->message);
	else
		rc = SAAS_OK;
	free(text);
	free(gone);
	free(meta);
	return rc;
}

/* Append the backing files of the qcow2 disk at path, nearest first, each as a "\n"-ended line, to *list. */
static void chain_add(const char *path, saas__buf *list)
{
	char *next = saas__lv_qcow2_backing(path);

	for (int depth = 0; next && depth < SNAPSHOT_CHAIN_MAX; depth++) {
		char *cur = next;
		saas__buf_puts(list, cur);
		saas__buf_puts(list, "\n");
		next = saas__lv_qcow2_backing(cur);
		free(cur);
	}
	free(next);
}

/* The disk chain of every VM (each qcow2 file in its directory) and every snapshot not deleted: who backs onto what. */
static void backings_all(struct drv *d, saas__buf *list)
{
	static const char *const kinds[] = { "vms", "snapshots" };

	for (size_t k = 0; k < SAAS_ARRAY_SIZE(kinds); k++) {
		char *parent = saas__lv_path_join(d->dir, kinds[k]);
		DIR *dh = parent ? opendir(parent) : NULL;
		struct dirent *e;
		while (dh && (e = readdir(dh))) {
			char *sub, *gone = NULL;
			DIR *files;
			struct dirent *f;
			if (e->d_name[0] == '.' || !(sub = saas__lv_path_join(parent, e->d_name)))
				continue;
			/* A deleted snapshot counts only through the disks that back onto it. */
			if (k == 1 && (!(gone = saas__lv_path_join(sub, "deleted")) || exists(gone))) {
				free(gone);
				free(sub);
				continue;
			}
			free(gone);
			for (files = opendir(sub); files && (f = readdir(files));) {
				size_t len = strlen(f->d_name);
				char *disk;
				if (len > 6 && strcmp(f->d_name + len - 6, ".qcow2") == 0 &&
				    (disk = saas__lv_path_join(sub, f->d_name))) {
					chain_add(disk, list);
					free(disk);
				}
			}
			if (files)
				closedir(files);
			free(sub);
		}
		if (dh)
			closedir(dh);
		free(parent);
	}
}

void saas__lv_snapshots_collect(struct drv *d)
{
	char *root = saas__lv_path_join(d->dir, "snapshots");
	saas__buf list = SAAS__BUF_INIT;
	bool listed = false;
	DIR *dh;
	struct dirent *e;

	if (!root)
		return;
	/* Most destroys find no deleted snapshot, and need not wait for restores. */
	for (dh = opendir(root); dh && (e = readdir(dh));) {
		char *gone = e->d_name[0] != '.' ? snap_path(d, e->d_name, "deleted") : NULL;
		listed = exists(gone);
		free(gone);
		if (listed)
			break;
	}
	if (dh)
		closedir(dh);
	if (!listed) {
		free(root);
		return;
	}
	listed = false;
	pthread_rwlock_wrlock(&d->snaps_lock);
	for (dh = opendir(root); dh && (e = readdir(dh));) {
		char *gone, *disk = NULL, *line = NULL;
		if (e->d_name[0] == '.' || !(gone = snap_path(d, e->d_name, "deleted")))
			continue;
		if (exists(gone) && (disk = snap_path(d, e->d_name, "disk.qcow2")) && asprintf(&line, "\n%s\n", disk) >= 0) {
			if (!listed) {
				/* Searched with a leading "\n" on every line. */
				saas__buf_puts(&list, "\n");
				backings_all(d, &list);
				listed = true;
			}
			if (!list.data || !strstr(list.data, line)) {
				char *dir = snap_path(d, e->d_name, NULL);
				saas__lv_log(d, SAAS_LOG_INFO, "snapshot %s deleted, and no disk backs onto it any more: removing it",
				             e->d_name);
				if (dir)
					saas__lv_rm_tree(dir);
				free(dir);
			}
		}
		free(line);
		free(disk);
		free(gone);
	}
	if (dh)
		closedir(dh);
	pthread_rwlock_unlock(&d->snaps_lock);
	saas__buf_free(&list);
	free(root);
}

/* ---- what a fork or pause cut short leaves ---------------------------------------------------- */

/*
 * A snapshot's directory is written as NAME.tmp and renamed once whole (or
 * put in place early, marked SNAPSHOT_SAVING, renamed back to NAME.tmp at
 * the next open), so an engine that dies while taking one leaves NAME.tmp. Its "vm" file, written
 * before the VM is paused, names the VM it was being taken of: that VM may be
 * left paused (resumed at the next open), and, for a fork, may already run
 * on its new overlay (DIR/vms/VM/disk-NAME.qcow2), whose header names the
 * frozen disk by its final path, DIR/snapshots/NAME/disk.qcow2.
 */
#define SNAPSHOT_VM_FILE "vm"

void saas__lv_snapshot_left(struct drv *d, const char *snap, const char *vm, bool on_overlay)
{
	char *tmp = NULL, *dir = snap_path(d, snap, NULL), *overlay = NULL, *gone = NULL;
	static const char *const useless[] = { "state", "stream", "ram", "snapshot.json", SNAPSHOT_VM_FILE,
		                               SNAPSHOT_SPLITTING, SNAPSHOT_SAVING };
	int fd;

	if (!dir || asprintf(&tmp, "%s.tmp", dir) < 0) {
		tmp = NULL;
		goto out;
	}
	if (!on_overlay) {
		/* Made, perhaps, but never switched to: nothing backs onto the snapshot, which goes whole. */
		if (vm && saas__lv_snapshot_name_ok(vm) && asprintf(&overlay, "%s/vms/%s/disk-%s.qcow2", d->dir, vm, snap) >= 0)
			unlink(overlay);
		else
			overlay = NULL;
		saas__lv_log(d, SAAS_LOG_INFO, "removing snapshot %s, left half-written", snap);
		saas__lv_rm_tree(tmp);
		goto out;
	}
	/*
	 * The VM reads its frozen disk under the snapshot's final name: that
	 * disk stays there, as a deleted snapshot's would, until no disk backs
	 * onto it. The rest is of no use: the snapshot was never whole.
	 */
	if (!exists(dir) && rename(tmp, dir) < 0) {
		saas__lv_log(d, SAAS_LOG_WARN, "snapshot %s, left half-written under VM %s's disk, cannot be kept: %s", snap,
		             vm, strerror(errno));
		goto out;
	}
	for (size_t i = 0; i < SAAS_ARRAY_SIZE(useless); i++) {
		char *p = snap_path(d, snap, useless[i]);
		if (p)
			unlink(p);
		free(p);
	}
	if ((gone = snap_path(d, snap, "deleted")) && (fd = open(gone, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) >= 0)
		close(fd);
	saas__lv_log(d, SAAS_LOG_INFO, "snapshot %s was left half-written by a fork; VM %s runs on over its disk, which "
	             "is kept until nothing backs onto it", snap, vm);
out:
	free(gone);
	free(overlay);
	free(tmp);
	free(dir);
}

/*
 * Decide what snapshot snap's half-written directory was cut short at, by
 * asking the VM it names (QEMU knows its own top overlay), and act on it.
 */
static void snapshot_recover(struct drv *d, const char *snap)
{
	char *tmp = snap_path(d, snap, NULL), *file = NULL, *vm = NULL, *next = NULL, *node = NULL, *top = NULL;
	virConnectPtr conn;
	virDomainPtr dom = NULL;
	uint64_t size = 0;
	bool on_overlay = false;
	int state = 0;

	if (!tmp || asprintf(&file, "%s.tmp/" SNAPSHOT_VM_FILE, tmp) < 0) {
		file = NULL;
		goto out;
	}
	/* Written by the engine (snapshot_take); read as it was made, never through a link, and checked as a name. */
	if (saas__file_read(&vm, NULL, AT_FDCWD, file, SNAPSHOT_NAME_MAX, SAAS__FILE_NOFOLLOW | SAAS__FILE_QUIET) == SAAS_OK &&
	    !saas__lv_snapshot_name_ok(vm)) {
		free(vm);
		vm = NULL;
	}
	if (vm && (conn = saas__lv_conn(d)) && (dom = virDomainLookupByName(conn, vm))) {
		if (virDomainGetState(dom, &state, NULL, 0) == 0 && state == VIR_DOMAIN_PAUSED) {
			if (virDomainResume(dom) < 0)
				saas__lv_log(d, SAAS_LOG_WARN, "VM %s, left paused by snapshot %s cut short, does not run again: %s",
				             vm, snap, virGetLastError() ? virGetLastError()->message : "unknown libvirt error");
			else
				saas__lv_log(d, SAAS_LOG_INFO, "VM %s, left paused by snapshot %s cut short, runs again", vm, snap);
		}
		if (asprintf(&next, "%s/vms/%s/disk-%s.qcow2", d->dir, vm, snap) < 0)
			next = NULL;
		else if (saas__lv_snapdisk_top(dom, &node, &top, &size) == 0)
			on_overlay = strcmp(top, next) == 0;
		saas__error_clear();
	}
	saas__lv_snapshot_left(d, snap, vm, on_overlay);
	/* Its chain goes through a snapshot now: merged as after any fork. */
	if (on_overlay)
		saas__lv_snapdisk_flatten(d, dom, vm, 0);
out:
	if (dom)
		virDomainFree(dom);
	free(top);
	free(node);
	free(next);
	free(vm);
	free(file);
	free(tmp);
}

/*
 * A fork's snapshot whose RAM was split off into memory of an engine that
 * ended (SNAPSHOT_SPLITTING): its stream, while there, is whole, and becomes
 * its state, which each child loads; without one (a split of an engine
 * before this one's, which removed it once its RAM file was whole), the RAM
 * and the state are whole as they are.
 */
static void snapshot_unsplit(struct drv *d, const char *snap)
{
	char *marker = snap_path(d, snap, SNAPSHOT_SPLITTING), *stream = snap_path(d, snap, "stream"),
	     *state = snap_path(d, snap, "state"), *ram = snap_path(d, snap, "ram");

	if (marker && stream && state && ram && exists(marker)) {
		if (exists(stream)) {
			/*
			 * The stream becomes the state first: a rename that fails leaves
			 * the snapshot as it was, marker included (no child maps a RAM
			 * half split; the next open tries again).
			 */
			if (rename(stream, state) < 0) {
				saas__lv_log(d, SAAS_LOG_WARN, "snapshot %s, its RAM's split cut short, cannot be kept whole: %s",
				             snap, strerror(errno));
				goto out;
			}
			unlink(ram);
			saas__lv_log(d, SAAS_LOG_INFO, "snapshot %s: its RAM's split was cut short; its children load its RAM",
			             snap);
		}
		unlink(marker);
	}
out:
	free(ram);
	free(state);
	free(stream);
	free(marker);
}

void saas__lv_snapshots_cleanup(struct drv *d)
{
	char *root = saas__lv_path_join(d->dir, "snapshots");
	DIR *dir;
	struct dirent *e;

	if (root && saas__mkdir_p(root, 0700) == 0 && (dir = opendir(root))) {
		while ((e = readdir(dir))) {
			size_t len = strlen(e->d_name);
			char snap[SNAPSHOT_NAME_MAX + 1];
			if (len > 4 && len - 4 <= SNAPSHOT_NAME_MAX && strcmp(e->d_name + len - 4, ".tmp") == 0) {
				snprintf(snap, sizeof(snap), "%.*s", (int)(len - 4), e->d_name);
				if (saas__lv_snapshot_name_ok(snap))
					snapshot_recover(d, snap);
			} else if (saas__lv_snapshot_name_ok(e->d_name)) {
				char *saving = snap_path(d, e->d_name, SNAPSHOT_SAVING), *sdir = snap_path(d, e->d_name, NULL),
				     *tmp = NULL;
				/* Put in place before it was whole: cut short as a half-written one is, and undone so. */
				if (saving && sdir && exists(saving) && asprintf(&tmp, "%s.tmp", sdir) >= 0) {
					if (!exists(tmp) && rename(sdir, tmp) == 0)
						snapshot_recover(d, e->d_name);
					else
						saas__lv_log(d, SAAS_LOG_WARN, "snapshot %s, left half-written, cannot be undone: %s",
						             e->d_name, exists(tmp) ? "a half-written one of its name is there too"
						                                    : strerror(errno));
				} else {
					snapshot_unsplit(d, e->d_name);
				}
				free(tmp);
				free(sdir);
				free(saving);
			}
		}
		closedir(dir);
	}
	free(root);
	saas__lv_snapshots_collect(d);
}

/* ---- a fork's RAM, mapped by its children ---------------------------------------------------- */

/* The slot of snapshot snap's RAM, or NULL (d->mu held). */
static struct snapram *snapshot_find(struct drv *d, const char *snap)
{
	struct snapram *m;

	for (m = d->snaprams; m && strcmp(m->name, snap) != 0; m = m->next)
		;
	return m;
}

/* A snapshot's slot for its sealed RAM (d->mu held), made on first sight: one an earlier engine made is loaded from its file. */
static int *snapshot_slot(struct drv *d, const char *snap)
{
	struct snapram *m = snapshot_find(d, snap);

	if (m)
		return &m->memfd;
	if (!(m = calloc(1, sizeof(*m))))
		return NULL;
	saas__strlcpy(m->name, snap, sizeof(m->name));
	m->memfd = -1;
	m->next = d->snaprams;
	d->snaprams = m;
	return &m->memfd;
}

int saas__lv_snapshot_ram(struct drv *d, const char *dir, uint64_t bytes, int *fd, bool *broken, bool *pending)
{
	const char *snap = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
	char *marker = NULL;
	struct snapram *m;
	bool held;
	int rc = SAAS_OK;

	*fd = -1;
	*broken = *pending = false;
	pthread_mutex_lock(&d->mu);
	/*
	 * Being split (mapped privately: the pages it has not written follow the
	 * memory as the split fills it), or split: the memory this driver holds,
	 * the snapshot's RAM's one whole form (SNAPSHOT_SPLITTING).
	 */
	if ((m = snapshot_find(d, snap)) && m->memfd >= 0) {
		if ((*fd = fcntl(m->memfd, F_DUPFD_CLOEXEC, 3)) < 0)
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "dup: %s", strerror(errno));
		*pending = rc == SAAS_OK && m->splitting;
		held = true;
	} else {
		held = false;
	}
	pthread_mutex_unlock(&d->mu);
	if (rc < 0 || *pending)
		return rc;
	if (held) {
		if (!saas__lv_memfd_sealed(*fd)) {
			close(*fd);
			*fd = -1;
			*broken = true;
			return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "snapshot %s's memory is not sealed", snap);
		}
		return SAAS_OK;
	}
	/* Marked, and no memory of it here: its RAM is whole only in another engine's memory, or in its stream. */
	if (!(marker = saas__lv_path_join(dir, SNAPSHOT_SPLITTING)))
		return SAAS_ENOMEM;
	rc = exists(marker) ? saas__error(SAAS_EBUSY, SAAS_ERRCLASS_DRIVER, 0, "snapshot %s's RAM is whole only in the "
	                                  "memory of the engine that took it", snap)
	                    : SAAS_OK;
	free(marker);
	return rc < 0 ? rc : saas__lv_memfd_get(d, dir, MEMFD_SNAPSHOT, bytes, snapshot_slot, snap, "snapshot", fd, broken);
}

int saas__lv_snapshot_split_wait(struct drv *d, const char *dir)
{
	const char *snap = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
	struct snapram *m;
	int rc;

	pthread_mutex_lock(&d->mu);
	while ((m = snapshot_find(d, snap)) && m->splitting && !closing(d))
		pthread_cond_wait(&d->snaps_cond, &d->mu);
	if (m && m->splitting)
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "the driver is closing");
	else
		rc = m && m->memfd >= 0 && saas__lv_memfd_sealed(m->memfd) ? SAAS_OK : 1;
	pthread_mutex_unlock(&d->mu);
	return rc;
}

void saas__lv_snapshot_splits_join(struct drv *d, const char *snap)
{
	for (;;) {
		struct snapram *m;
		pthread_t thread;
		bool found = false;

		pthread_mutex_lock(&d->mu);
		for (m = d->snaprams; m && !found; m = m->next)
			if (m->joinable && (!snap || strcmp(m->name, snap) == 0)) {
				thread = m->thread;
				m->joinable = false;
				found = true;
			}
		pthread_mutex_unlock(&d->mu);
		if (!found)
			break;
		pthread_join(thread, NULL);
	}
}

/* Hold memfd as snapshot snap's RAM (-1: let go of what is held); the VMs that map it keep theirs. */
static void snapshot_ram_hold(struct drv *d, const char *snap, int memfd)
{
	struct snapram **at, *m;

	pthread_mutex_lock(&d->mu);
	for (at = &d->snaprams; *at && strcmp((*at)->name, snap) != 0; at = &(*at)->next)
		;
	if ((m = *at) && m->memfd >= 0)
		close(m->memfd);
	if (m && memfd < 0) {
		*at = m->next;
		free(m);
	} else if (m) {
		m->memfd = memfd;
	} else if (memfd >= 0 && (m = calloc(1, sizeof(*m)))) {
		saas__strlcpy(m->name, snap, sizeof(m->name));
		m->memfd = memfd;
		m->next = d->snaprams;
		d->snaprams = m;
	} else if (memfd >= 0) {
		close(memfd); /* out of memory: children load it from its file */
	}
	pthread_mutex_unlock(&d->mu);
}

/*
 * A fork's saved stream (dir/stream) split in two (migstream.c): its RAM
 * into memfd fd, then sealed, which the children map copy-on-write, and the
 * rest as dir/state; the stream stays (SNAPSHOT_SPLITTING). SAAS_OK when so.
 * A stream the split does not know (another QEMU), or a write that fails,
 * leaves the whole stream as the state, which each child loads as before: 1,
 * said in the log, never the fork's failure. An error only when even that
 * could not be done.
 */
static int fork_ram_split(struct drv *d, const char *dir, const char *snap, uint64_t bytes, int fd)
{
	char *stream = saas__lv_path_join(dir, "stream"), *state = saas__lv_path_join(dir, "state");
	struct saas__lv_split_stats st;
	int in = -1, out = -1, rc;

	if (!stream || !state)
		rc = SAAS_ENOMEM;
	else if ((in = open(stream, O_RDONLY | O_CLOEXEC)) < 0 ||
	         (out = open(state, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0)
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "the fork's files: %s", strerror(errno));
	else if ((rc = saas__lv_stream_split(in, out, fd, MEM_ID, bytes, &st)) == SAAS_OK)
		rc = saas__lv_memfd_seal(fd);
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	if (rc == SAAS_OK) {
		saas__lv_log(d, SAAS_LOG_DEBUG, "snapshot %s: %llu pages of RAM mapped by its children (%llu zero), %llu KiB "
		             "of state left", snap, (unsigned long long)st.pages, (unsigned long long)st.zero_pages,
		             (unsigned long long)(st.out_bytes >> 10));
	} else if (stream && state) {
		saas__lv_log(d, SAAS_LOG_WARN, "snapshot %s: its RAM is loaded by each child of the fork, not mapped: %s", snap,
		             saas_error_last()->message);
		saas__error_clear();
		rc = rename(stream, state) == 0 ? 1
		                                : saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "%s: %s", state, strerror(errno));
	}
	free(state);
	free(stream);
	return rc;
}

/* A split of a fork's RAM that runs once the parent runs on (saas__lv_vm_snapshot). */
struct split_job {
	struct drv *d;
	char *dir;                       /* the snapshot's, whole but for its RAM */
	char snap[SNAPSHOT_NAME_MAX + 1];
	uint64_t bytes;
	int memfd;                       /* the job's own descriptor of the memory it fills */
};

static void *split_main(void *arg)
{
	struct split_job *j = arg;
	struct drv *d = j->d;
	struct snapram *m;
	struct timespec t0;
	char *marker = saas__lv_path_join(j->dir, SNAPSHOT_SPLITTING);
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = fork_ram_split(d, j->dir, j->snap, j->bytes, j->memfd);
	if (rc < 0) {
		/* Neither form: its children fail to load it, and the fork with them. */
		saas__lv_log(d, SAAS_LOG_WARN, "snapshot %s: %s", j->snap, saas_error_last()->message);
		saas__error_clear();
	}
	/* The stream the state (or neither form): whole on storage, no longer marked, before anyone looks again. */
	if (marker && rc != SAAS_OK)
		unlink(marker);
	/* The children go on now: the memory is whole and sealed, or it is not theirs to map. */
	pthread_mutex_lock(&d->mu);
	if ((m = snapshot_find(d, j->snap))) {
		if (rc != SAAS_OK && m->memfd >= 0) {
			close(m->memfd);
			m->memfd = -1;
		}
		m->splitting = false;
	}
	pthread_cond_broadcast(&d->snaps_cond);
	pthread_mutex_unlock(&d->mu);
	saas__lv_log(d, SAAS_LOG_DEBUG, "snapshot %s: its RAM split off %lld ms after the parent ran on", j->snap,
	             (long long)saas__ms_since(&t0));
	close(j->memfd);
	free(marker);
	free(j->dir);
	free(j);
	return NULL;
}

/*
 * Split job j's RAM into memfd, which this takes, held as the snapshot's RAM
 * from now: in a thread of its own, which children that map the memory
 * meanwhile wait for (saas__lv_snapshot_split_wait), and the snapshot's
 * delete and the driver's close join; here when no thread can be started.
 * With no slot for it (out of memory) the split runs here too, and children
 * load the sealed memory from its file.
 */
static void split_start(struct drv *d, struct split_job *j, int memfd)
{
	struct snapram *m = NULL;

	pthread_mutex_lock(&d->mu);
	if (snapshot_slot(d, j->snap) && (m = snapshot_find(d, j->snap))) {
		if (m->memfd >= 0)
			close(m->memfd);
		m->memfd = memfd;
		memfd = -1;
		m->splitting = true;
		if (pthread_create(&m->thread, NULL, split_main, j) == 0) {
			m->joinable = true;
			j = NULL;
		}
	}
	pthread_mutex_unlock(&d->mu);
	if (memfd >= 0)
		close(memfd);
	if (j)
		split_main(j);
}

/*
 * The memory a fork's RAM will be split into (*memfd) and the job that will
 * do it (*job), once the snapshot in tmp is renamed to dir, its marker
 * written. Where no memory can be made, *job is NULL (said in the log): the
 * stream is to be the state, which each child loads (stream_as_state). An
 * error only when out of memory or the marker cannot be written.
 */
static int split_prepare(struct drv *d, const char *tmp, const char *dir, const char *snap, uint64_t bytes,
                         struct split_job **job, int *memfd)
{
	char *path = NULL;
	int rc;

	*job = NULL;
	if ((rc = saas__lv_memfd_new(MEMFD_SNAPSHOT, bytes, memfd)) < 0) {
		saas__lv_log(d, SAAS_LOG_WARN, "snapshot %s: its RAM is loaded by each child of the fork, not mapped: %s", snap,
		             saas_error_last()->message);
		saas__error_clear();
		return SAAS_OK;
	}
	if (!(*job = calloc(1, sizeof(**job))) || !((*job)->dir = saas__strdup(dir)) ||
	    !(path = saas__lv_path_join(tmp, SNAPSHOT_SPLITTING))) {
		rc = saas__oom();
		goto out;
	}
	(*job)->memfd = -1;
	if (((*job)->memfd = fcntl(*memfd, F_DUPFD_CLOEXEC, 3)) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "dup: %s", strerror(errno));
		goto out;
	}
	(*job)->d = d;
	saas__strlcpy((*job)->snap, snap, sizeof((*job)->snap));
	(*job)->bytes = bytes;
	rc = write_file(path, "");
out:
	if (rc < 0 && *job) {
		if ((*job)->memfd >= 0)
			close((*job)->memfd);
		free((*job)->dir);
		free(*job);
		*job = NULL;
	}
	if (rc < 0 && *memfd >= 0) {
		close(*memfd);
		*memfd = -1;
	}
	free(path);
	return rc;
}

/* A mapped save's stream, with no memory to split its RAM into: the state, which each child loads. */
static int stream_as_state(const char *dir)
{
	char *stream = saas__lv_path_join(dir, "stream"), *state = saas__lv_path_join(dir, "state");
	int rc = !stream || !state ? SAAS_ENOMEM
	         : rename(stream, state) == 0
	                 ? SAAS_OK
	                 : saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "%s: %s", state, strerror(errno));

	free(state);
	free(stream);
	return rc;
}

/* ---- a fork's children begun while its snapshot is taken ------------------------------------ */

static struct forking **forking_at(struct drv *d, const char *snap)
{
	struct forking **at;

	for (at = &d->forkings; *at && strcmp((*at)->name, snap) != 0; at = &(*at)->next)
		;
	return at;
}

/* The fork of snap is over (or will not be), however it went: its restores still waiting go on. */
static void fork_over(struct drv *d, const char *snap)
{
	struct forking **at, *f;

	pthread_mutex_lock(&d->mu);
	if ((f = *(at = forking_at(d, snap)))) {
		*at = f->next;
		free(f);
	}
	pthread_cond_broadcast(&d->snaps_cond);
	pthread_mutex_unlock(&d->mu);
}

int saas__lv_snapshot_expect(void *ctx, const char *snap, int on)
{
	struct drv *d = ctx;
	struct forking *f;
	int rc = SAAS_OK;

	if (!saas__lv_snapshot_name_ok(snap))
		return saas__inval("a snapshot's name is 1 to %d of a-z, 0-9 and '-'", SNAPSHOT_NAME_MAX);
	/* A VM host's snapshot is read from its pool once whole (host_remote_snap.c). */
	if (d->host->snap_take)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "a VM host's snapshot is restored once taken");
	if (!on) {
		fork_over(d, snap);
		return SAAS_OK;
	}
	pthread_mutex_lock(&d->mu);
	if (*forking_at(d, snap))
		rc = saas__inval("snapshot %s is already coming", snap);
	else if (!(f = calloc(1, sizeof(*f))))
		rc = saas__oom();
	else {
		saas__strlcpy(f->name, snap, sizeof(f->name));
		f->next = d->forkings;
		d->forkings = f;
	}
	pthread_mutex_unlock(&d->mu);
	return rc;
}

static bool fork_expected(struct drv *d, const char *snap)
{
	bool found;

	pthread_mutex_lock(&d->mu);
	found = *forking_at(d, snap) != NULL;
	pthread_mutex_unlock(&d->mu);
	return found;
}

bool saas__lv_snapshot_fork_wait(struct drv *d, const char *snap)
{
	struct forking *f;
	bool published;

	pthread_mutex_lock(&d->mu);
	while ((f = *forking_at(d, snap)) && !f->published && !closing(d))
		pthread_cond_wait(&d->snaps_cond, &d->mu);
	published = f && f->published;
	pthread_mutex_unlock(&d->mu);
	return published;
}

/*
 * A fork whose children the core begins meanwhile (snapshot_expect): the
 * snapshot in tmp, its disk frozen there and the VM paused, is put in place
 * before its state is saved, with what a child's VM starts on: its
 * description (of the RAM block every VM of this driver has, MEM_ID; the
 * real one and the sizes follow once saved), the frozen disk opened to the
 * children's QEMUs, and the memory its RAM will be split into, held as the
 * snapshot's and marked as being filled; marked as being saved too. Then
 * the waiting restores go on, start their VMs on the memory beside the save,
 * and wait for the RAM (saas__lv_snapshot_split_wait). *job NULL (no memory
 * could be made): nothing is done, and the restores wait for the whole.
 */
static int fork_publish(struct drv *d, struct saas__lv_snapshot *s, const char *tmp, const char *dir, const char *snap,
                        const char *frozen, int topfd, struct split_job **job, int *memfd)
{
	char *text = NULL, *path = NULL;
	int held = -1, rc;

	if ((rc = split_prepare(d, tmp, dir, snap, (uint64_t)s->memory_mib << 20, job, memfd)) < 0 || !*job)
		return rc;
	s->ignore_shared = true;
	saas__strlcpy(s->ram_block, MEM_ID, sizeof(s->ram_block));
	if ((frozen && (rc = saas__lv_snapshot_chain(frozen, s)) < 0) ||
	    (d->cf.confined && (rc = saas__lv_confine_template_fd(d, tmp, topfd)) < 0))
		return rc;
	if (!(text = saas__lv_snapshot_json(s)) || !(path = saas__lv_path_join(tmp, "snapshot.json"))) {
		rc = saas__oom();
		goto out;
	}
	if ((rc = write_file(path, text)) < 0)
		goto out;
	free(path);
	if (!(path = saas__lv_path_join(tmp, SNAPSHOT_SAVING))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	if ((rc = write_file(path, "")) < 0)
		goto out;
	if ((held = fcntl(*memfd, F_DUPFD_CLOEXEC, 3)) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "dup: %s", strerror(errno));
		goto out;
	}
	if (rename(tmp, dir) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "%s: %s", dir, strerror(errno));
		goto out;
	}
	pthread_mutex_lock(&d->mu);
	{
		struct snapram *m = snapshot_slot(d, snap) ? snapshot_find(d, snap) : NULL;
		struct forking *f = *forking_at(d, snap);
		if (m) {
			if (m->memfd >= 0)
				close(m->memfd);
			m->memfd = held;
			held = -1;
			m->splitting = true;
		}
		if (f && m)
			f->published = true;
	}
	pthread_cond_broadcast(&d->snaps_cond);
	pthread_mutex_unlock(&d->mu);
	rc = SAAS_OK;
out:
	if (held >= 0)
		close(held);
	free(path);
	free(text);
	return rc;
}

/* A fork put in place early that failed: no child maps its memory any more, and its files go back to tmp. */
static void fork_unpublish(struct drv *d, const char *tmp, const char *dir, const char *snap)
{
	snapshot_ram_hold(d, snap, -1);
	pthread_mutex_lock(&d->mu);
	pthread_cond_broadcast(&d->snaps_cond);
	pthread_mutex_unlock(&d->mu);
	/* Gone already when it was whole and its VM would not run again. */
	if (exists(dir) && rename(dir, tmp) < 0)
		saas__lv_log(d, SAAS_LOG_WARN, "snapshot %s, which failed, cannot be taken out of place: %s", snap,
		             strerror(errno));
}

/* ---- the slots ------------------------------------------------------------------------------- */

static int snapshot_take(struct drv *d, const char *name, const char *snap, int keep, int64_t *bytes);

int saas__lv_vm_snapshot(void *ctx, const char *name, const char *snap, int keep, int64_t *bytes)
{
	int rc = snapshot_take(ctx, name, snap, keep, bytes);

	fork_over(ctx, snap);
	return rc;
}

static int snapshot_take(struct drv *d, const char *name, const char *snap, int keep, int64_t *bytes)
{
	struct saas__lv_snapshot s;
	struct saas__kept_error failed;
	virDomainPtr dom = NULL;
	virDomainInfo info;
	char *dir = NULL, *tmp = NULL, *path = NULL, *node = NULL, *top = NULL, *next = NULL, *frozen = NULL,
	     *base = NULL, *text = NULL, *owner = NULL, *vmdir = NULL, new_node[32] = "", hash[65];
	unsigned int port = 0, uid = 0;
	uint64_t size = 0;
	struct timespec t0;
	int64_t paused_ms, ram = 0, at[3] = { 0, 0, 0 };
	bool paused = false, switched = false, published = false;
	/*
	 * A fork's RAM is kept as a file its children map, as a template's
	 * (migstream.c); a pause's stays in its state: a paused sandbox's
	 * snapshot outlives its VM, and mapped its RAM would have to stay in the
	 * host's memory all that time, or be loaded whole at the resume into a
	 * file its one VM maps, with nothing to share.
	 */
	bool mapped = keep && d->mapped && d->host->local_memory, ram_mapped = false;
	struct split_job *job = NULL;
	const char *work;                /* where its files are written: tmp, or dir once put in place early */
	int state = 0, rc, topfd = -1, memfd = -1;

	/* A VM host keeps its snapshots in its pool (host_remote_snap.c). */
	if (d->host->snap_take)
		return d->host->snap_take(d, name, snap, keep, bytes);
	memset(&s, 0, sizeof(s));
	if (!saas__lv_snapshot_name_ok(snap))
		return saas__inval("a snapshot's name is 1 to %d of a-z, 0-9 and '-'", SNAPSHOT_NAME_MAX);
	if (!(dom = virDomainLookupByName(saas__lv_conn(d), name)) || saas__lv_domain_meta(dom, &port, &s.host_key, &owner) < 0 ||
	    strcmp(owner, d->owner) != 0) {
		rc = saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_DRIVER, 0, "no VM %s", name);
		goto out;
	}
	if (virDomainGetState(dom, &state, NULL, 0) < 0 || state != VIR_DOMAIN_RUNNING || virDomainGetInfo(dom, &info) < 0) {
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, state, "VM %s is not running", name);
		goto out;
	}
	if (!(dir = snap_path(d, snap, NULL)) || asprintf(&tmp, "%s.tmp", dir) < 0) {
		tmp = NULL;
		rc = saas__oom();
		goto out;
	}
	work = tmp;
	if (exists(dir)) {
		rc = saas__inval("snapshot %s exists", snap);
		goto out;
	}
	uid = saas__lv_domain_uid(dom);
	saas__strlcpy(s.source, name, sizeof(s.source));
	saas__lv_snapdisk_image(dom, s.image, sizeof(s.image), &s.control);
	s.vcpus = info.nrVirtCpu;
	s.memory_mib = (unsigned int)(info.maxMem >> 10);
	/* Its RAM stays in memory until the children are made, up to all of it: as a mapped template's, only with room. */
	if (mapped && saas__lv_mem_available_mib() < (uint64_t)s.memory_mib + MAPPED_RESERVE_MIB) {
		saas__lv_log(d, SAAS_LOG_WARN, "snapshot %s: its RAM is loaded by each child of the fork, not mapped: the "
		             "host has less than its %u MiB and %u MiB to spare available", snap, s.memory_mib,
		             MAPPED_RESERVE_MIB);
		mapped = false;
	}
	if ((rc = saas__lv_snapdisk_top(dom, &node, &top, &size)) < 0 && rc != SAAS_ENOTFOUND)
		goto out;
	/*
	 * QEMU's word for its disk is checked before anything is done with it:
	 * one of the VM's own disks, in its directory, a file of its uid (a
	 * QEMU that names the engine's key would have it linked and opened to
	 * all). From here on the file is the fd, never the name.
	 */
	if (top && (!(vmdir = saas__lv_drv_path(d, "vms", name)) ||
	            (rc = saas__lv_vm_disk_open(vmdir, top, saas__lv_disk_owner(d, uid), &topfd)) < 0)) {
		rc = vmdir ? saas__error_wrap(rc, "VM %s", name) : SAAS_ENOMEM;
		goto out;
	}
	s.disk_gb = top ? (unsigned int)(size >> 30) : 0;
	saas__lv_rm_tree(tmp);
	if (saas__mkdir_p(tmp, 0700) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot create %s: %s", tmp, strerror(errno));
		goto out;
	}
	/* Before the VM is paused: an engine that dies from here on leaves it named for the next (snapshot_recover). */
	if (!(path = saas__lv_path_join(tmp, SNAPSHOT_VM_FILE))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	if ((rc = write_file(path, name)) < 0)
		goto out;
	free(path);
	path = NULL;

	/* The chain as it will stay: a merge of the last fork's still running must end first. */
	if (top && (rc = saas__lv_snapdisk_settle(d, dom, name)) < 0)
		goto out;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (virDomainSuspend(dom) < 0) {
		rc = saas__lv_virt_error("pausing the VM");
		goto out;
	}
	paused = true;
	/*
	 * The disk first: the guest is stopped and QEMU flushed its writes, and
	 * a completed migration leaves the disks inactive (no graph change)
	 * until the VM runs again. The frozen overlay keeps its name in the VM's
	 * directory (the VM's own chain goes through it) and gets the
	 * snapshot's, a hard link: no copy, and it lives while either does.
	 */
	if (top) {
		if (!(frozen = saas__lv_path_join(tmp, "disk.qcow2")) || !(base = snap_path(d, snap, "disk.qcow2"))) {
			rc = SAAS_ENOMEM;
			goto out;
		}
		if ((rc = saas__lv_link_fd(topfd, frozen)) < 0) {
			saas__error_wrap(rc, "freezing the VM's disk %s", top);
			goto out;
		}
		if (keep) {
			/* QEMU's node names are at most 31 characters. */
			saas__sha256_hex(hash, snap, strlen(snap));
			snprintf(new_node, sizeof(new_node), "aas-%.16s", hash);
			if (asprintf(&next, "%s/vms/%s/disk-%s.qcow2", d->dir, name, snap) < 0) {
				next = NULL;
				rc = saas__oom();
				goto out;
			}
			if ((rc = saas__lv_snapdisk_switch(d, dom, node, vmdir, next, base, size, uid, new_node)) < 0)
				goto out;
			switched = true;
		}
	}
	/*
	 * A fork whose children the core begins meanwhile (snapshot_expect): in
	 * place now, the state saved into it, and the children's VMs started
	 * beside the save (fork_publish).
	 */
	if (mapped && fork_expected(d, snap)) {
		if ((rc = fork_publish(d, &s, tmp, dir, snap, frozen, topfd, &job, &memfd)) < 0)
			goto out;
		if ((published = job != NULL)) {
			work = dir;
			free(frozen);
			frozen = NULL;
			if (top && !(frozen = saas__strdup(base))) {
				rc = SAAS_ENOMEM;
				goto out;
			}
		}
	}
	if (!(path = saas__lv_path_join(work, mapped ? "stream" : "state"))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	at[0] = saas__ms_since(&t0);
	/*
	 * The whole of the VM's RAM goes into the stream: no block of it is
	 * shared. A fork's is saved with x-ignore-shared on all the same, which
	 * its children's QEMU sets to leave their mapped RAM as the file has it.
	 */
	if ((rc = saas__lv_state_save(d, dom, path, mapped, &ram)) < 0)
		goto out;
	s.ignore_shared = mapped;
	at[1] = saas__ms_since(&t0);
	/*
	 * A fork's RAM is split off the stream once the parent runs on
	 * (split_start), into a memory made now: the first children start their
	 * QEMU on it meanwhile (saas__lv_snapshot_ram). Without one, the stream
	 * is the state, which each child loads.
	 */
	if (mapped && !published && (rc = split_prepare(d, tmp, dir, snap, (uint64_t)s.memory_mib << 20, &job, &memfd)) < 0)
		goto out;
	if (mapped && !job && (rc = stream_as_state(work)) < 0)
		goto out;
	ram_mapped = job != NULL;
	at[2] = saas__ms_since(&t0);
	free(path);
	if (!(path = saas__lv_path_join(work, "ram"))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	s.state_bytes = stored_bytes(path);
	free(path);
	/* The stream until the split: its head is the state's (the split takes out RAM pages only). */
	if (!(path = saas__lv_path_join(work, job ? "stream" : "state"))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	s.state_bytes += stored_bytes(path);
	saas__lv_state_ram_block(path, s.ram_block, sizeof(s.ram_block));
	if (frozen) {
		s.disk_bytes = stored_bytes(frozen);
		if (!s.chain && (rc = saas__lv_snapshot_chain(frozen, &s)) < 0)
			goto out;
	}
	/* Every restored VM's QEMU, each under a uid of its own, reads the frozen disk by path; none writes it. */
	if (d->cf.confined && (rc = saas__lv_confine_template_fd(d, work, topfd)) < 0)
		goto out;
	free(path);
	if (!(text = saas__lv_snapshot_json(&s)) || !(path = saas__lv_path_join(work, "snapshot.json"))) {
		rc = saas__oom();
		goto out;
	}
	if ((rc = write_file(path, text)) < 0)
		goto out;
	/* Whole: in place, or no longer marked as being saved (a restore of another engine's may read it now). */
	if (published) {
		free(path);
		if (!(path = saas__lv_path_join(dir, SNAPSHOT_SAVING))) {
			rc = SAAS_ENOMEM;
			goto out;
		}
		if (unlink(path) < 0) {
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "%s: %s", path, strerror(errno));
			goto out;
		}
	} else if (rename(tmp, dir) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "%s: %s", dir, strerror(errno));
		goto out;
	}
	if (keep && virDomainResume(dom) < 0) {
		/* A VM that does not run again fails its snapshot, which goes: the contract says none is left. */
		rc = saas__lv_virt_error("resuming the VM after its snapshot");
		saas__error_keep(&failed, rc);
		saas__lv_rm_tree(dir);
		saas__error_raise(&failed);
		paused = false;
		goto out;
	}
	paused = false;
	if (job) {
		split_start(d, job, memfd);
		job = NULL;
		memfd = -1;
	}
	if (switched)
		saas__lv_snapdisk_flatten(d, dom, name, 0);
	if (!keep) {
		virDomainFree(dom);
		dom = NULL;
		/* The snapshot is whole: a VM that lingers is reaped as any other, so this is not a failure. */
		if (saas__lv_vm_destroy(d, name) < 0) {
			saas__lv_log(d, SAAS_LOG_WARN, "VM %s saved as snapshot %s, but not destroyed: %s", name, snap,
			             saas_error_last()->message);
			saas__error_clear();
		}
	}
	paused_ms = saas__ms_since(&t0);
	/* Where a snapshot's time goes, for whoever tunes it. */
	saas__lv_log(d, SAAS_LOG_DEBUG, "VM %s snapshot %s: pause and disk %lld ms, state %lld ms, %s %lld ms, files "
	             "and %s %lld ms", name, snap, (long long)at[0], (long long)(at[1] - at[0]),
	             ram_mapped ? "its RAM's memory made (split off once it runs on)" : "nothing split",
	             (long long)(at[2] - at[1]), keep ? "resume" : "destroy", (long long)(paused_ms - at[2]));
	if (bytes)
		*bytes = s.state_bytes + s.disk_bytes;
	saas__lv_log(d, SAAS_LOG_INFO, "VM %s %s as snapshot %s in %lld ms, %lld MiB of RAM saved (%s), "
	             "%lld MiB state and %lld MiB disk on storage",
	             name, keep ? "forked" : "paused", snap, (long long)paused_ms, (long long)(ram >> 20),
	             !keep ? "loaded by its resume" : ram_mapped ? "mapped by its children" : "loaded by each child",
	             (long long)(s.state_bytes >> 20), (long long)(s.disk_bytes >> 20));
	rc = SAAS_OK;
out:
	if (rc < 0) {
		bool named = false;   /* the VM's overlay still names the snapshot's disk */
		saas__error_keep(&failed, rc);
		/* Back to tmp (unless gone), and its children told (none is made yet: they wait for its RAM). */
		if (published)
			fork_unpublish(d, tmp, dir, snap);
		/* cont also makes the disks active again after a failed migration. */
		if (paused && virDomainResume(dom) < 0)
			saas__lv_log(d, SAAS_LOG_WARN, "VM %s stays paused after its failed snapshot: %s", name,
			             virGetLastError() ? virGetLastError()->message : "unknown libvirt error");
		if (switched)
			named = !saas__lv_snapdisk_unswitch(d, dom, name, new_node, top);
		/*
		 * Its disk kept under the name the overlay gives it, as after a
		 * crash; otherwise all of it goes (a switched VM's new overlay is
		 * its disk now: never removed here).
		 */
		if (named)
			saas__lv_snapshot_left(d, snap, name, true);
		else if (tmp)
			saas__lv_rm_tree(tmp);
		saas__error_raise(&failed);
	}
	if (dom)
		virDomainFree(dom);
	if (topfd >= 0)
		close(topfd);
	if (memfd >= 0)
		close(memfd);
	if (job) {
		close(job->memfd);
		free(job->dir);
		free(job);
	}
	saas__lv_snapshot_clear(&s);
	free(vmdir);
	free(text);
	free(base);
	free(frozen);
	free(next);
	free(top);
	free(node);
	free(path);
	free(tmp);
	free(dir);
	free(owner);
	return rc;
}

static int restore(struct drv *d, const saas_vm_spec *spec, const char *snap);

/* A fork's child or a resume: no clone is started ahead meanwhile (spare.c), its CPUs are this one's. */
int saas__lv_vm_restore(void *ctx, const saas_vm_spec *spec, const char *snap)
{
	struct drv *d = ctx;
	int rc;

	saas__lv_spares_busy(d, true);
	rc = restore(d, spec, snap);
	saas__lv_spares_busy(d, false);
	return rc;
}

static int restore(struct drv *d, const saas_vm_spec *spec, const char *snap)
{
	struct saas__lv_snapshot s;
	struct image im;
	struct launch l;
	struct timespec t0;
	saas_vm_network fallback;
	const saas_vm_network *net;
	char *dir = NULL, *disk = NULL, *kept_base_path = NULL, vol[sizeof(DISK_PREFIX) + SNAPSHOT_NAME_MAX + 16];
	unsigned int uid = 0;
	bool locked = false, egress = false, early;
	int rc;

	memset(&s, 0, sizeof(s));
	memset(&l, 0, sizeof(l));
	if (!saas__lv_snapshot_name_ok(snap))
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_DRIVER, 0, "no snapshot %s", snap);
	/* A fork's child begun while its snapshot is taken: started once it is in place, beside the save. */
	early = saas__lv_snapshot_fork_wait(d, snap);
	if ((rc = saas__lv_memory_check(d, spec)) < 0 || (rc = saas__lv_net_admit(d, spec, &fallback, &net)) < 0)
		return rc;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* Held while the snapshot's files are read: a delete waits, and then the new VM's disk holds it. */
	pthread_rwlock_rdlock(&d->snaps_lock);
	locked = true;
	/* A VM host's: its place there (dir) is where a clone of it reads its state from. */
	if ((rc = d->host->snap_read ? d->host->snap_read(d, snap, &s, &dir) : snapshot_read(d, snap, &s)) < 0)
		goto out;
	/* Put in place early by a fork not of this driver's, or no longer under way: not whole yet. */
	if (!early && !d->host->snap_read) {
		char *saving = snap_path(d, snap, SNAPSHOT_SAVING);
		rc = !saving ? SAAS_ENOMEM
		     : exists(saving) ? saas__error(SAAS_EBUSY, SAAS_ERRCLASS_DRIVER, 0, "snapshot %s is still being written", snap)
		                      : SAAS_OK;
		free(saving);
		if (rc < 0)
			goto out;
	}
	/* Format 1 recorded a wrong name (an HMP column): its stream says which block it holds. */
	if (s.format < 2) {
		char *state = snap_path(d, snap, "state");
		if (state)
			saas__lv_state_ram_block(state, s.ram_block, sizeof(s.ram_block));
		free(state);
	}
	if ((rc = saas__lv_snapshot_check(&s, snap)) < 0)
		goto out;
	/* The stream holds devices and RAM of the source's shape: a restore cannot change it. */
	if (spec->vcpus != s.vcpus || spec->memory_mb > s.memory_mib || (s.disk_gb && spec->disk_gb != s.disk_gb)) {
		rc = saas__inval("snapshot %s is of a VM of %u vCPU, %u MiB, %u GiB of disk: it restores into that shape only",
		                 snap, s.vcpus, s.memory_mib, s.disk_gb);
		goto out;
	}
	if ((!dir && !(dir = snap_path(d, snap, NULL))) || (s.disk_gb && !(disk = snap_path(d, snap, "disk.qcow2")))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	/*
	 * The image as the snapshot has it (a rebuilt image has another host
	 * key, while the guest's memory holds its own): a restore loads no
	 * kernel, and its disk's base is the snapshot's frozen disk.
	 */
	memset(&im, 0, sizeof(im));
	saas__strlcpy(im.name, s.image, sizeof(im.name));
	im.host_key = s.host_key;
	im.disk = disk;
	im.min_memory_mib = s.memory_mib;
	im.control = s.control;
	if (d->cf.confined) {
		pthread_mutex_lock(&d->mu);
		rc = saas__lv_uid_take(d, &uid);
		pthread_mutex_unlock(&d->mu);
		if (rc < 0)
			goto out;
	}
	if (uid && d->egress) {
		if ((rc = saas__lv_egress_vm_set(d, spec->name, uid, net, net->mode == SAAS_NET_ISOLATED)) < 0)
			goto out;
		egress = true;
	}
	/* On a VM host, its policy here before its channel is, as a create's (libvirt.c). */
	if (d->ehost) {
		if ((rc = saas__lv_ehost_set(d->ehost, spec->name, net)) < 0)
			goto out;
		egress = true;
	}
	l.d = d;
	l.spec = spec;
	l.im = &im;
	l.host_key = s.host_key;
	l.internet = net->mode != SAAS_NET_ISOLATED;
	l.policy = net->mode == SAAS_NET_POLICY;
	l.uid = uid;
	l.tdir = dir;
	l.snapshot = true;
	l.ignore_shared = s.ignore_shared;
	/*
	 * A paused or forked VM's disk on a VM host: a new overlay of the volume
	 * its snapshot kept, named for this resume or child (libvirt's pool
	 * renames nothing, and the kept volume may bear the VM's name).
	 */
	if (s.disk_volume[0]) {
		uint32_t gen;
		if ((rc = saas__random(&gen, sizeof(gen))) < 0)
			goto out;
		snprintf(vol, sizeof(vol), DISK_PREFIX "%s-%08x", snap, gen);
		l.vol = vol;
		l.base_vol = s.disk_volume;
		if ((rc = saas__lv_vmhost_disk_base(d, s.disk_volume, &kept_base_path)) < 0)
			goto out;
	}
	if ((rc = saas__lv_boot_clone(&l)) < 0) {
		saas__error_wrap(rc, "snapshot %s (its RAM block: %s)", snap, s.ram_block[0] ? s.ram_block : "unknown");
		goto out;
	}
	pthread_rwlock_unlock(&d->snaps_lock);
	locked = false;
	/*
	 * A snapshot of a VM that was itself restored (a pause after a resume)
	 * backs onto the one before: one snapshot's disk under this VM's is
	 * what a restore needs, more are merged away.
	 */
	if (s.disk_gb && !s.disk_volume[0])
		saas__lv_snapdisk_flatten(d, l.dom, spec->name, 1);
	/*
	 * On a VM host the kept disk is merged into the new overlay before the
	 * resume (or the fork's child) returns, so that nothing backs onto it
	 * once it did: the snapshot's delete then takes it, and a later pause
	 * keeps the new overlay alone. A merge that fails fails the restore (a
	 * paused VM stays paused).
	 */
	if (s.disk_volume[0] && (rc = saas__lv_snapdisk_pull(d, l.dom, spec->name, kept_base_path)) < 0) {
		saas__lv_launch_undo(&l);
		goto out;
	}
	if ((d->ehost && (rc = saas__lv_egress_attach(d, spec->name)) < 0) ||
	    (rc = saas__lv_vm_add(d, spec->name, NULL, l.port, uid, s.host_key, l.ssh)) < 0) {
		saas__lv_launch_undo(&l);
		goto out;
	}
	saas__lv_log(d, SAAS_LOG_INFO, "VM %s up in %lld ms (restored from snapshot %s of %s%s, fix-ups over %s, %s, %u "
	             "vCPU, %u MiB, %s, ssh %s:%u)", spec->name, (long long)saas__ms_since(&t0), snap, s.source,
	             early ? ", begun while it was saved" : "", l.fixups, s.image,
	             s.vcpus, s.memory_mib, l.policy ? "policy" : l.internet ? "internet" : "isolated", d->listen, l.port);
	virDomainFree(l.dom);
	free(l.dir);
	free(l.overlay);
	uid = 0; /* the VM's now */
	egress = false;
out:
	if (locked)
		pthread_rwlock_unlock(&d->snaps_lock);
	if (egress && d->ehost)
		saas__lv_ehost_remove(d->ehost, spec->name);
	else if (egress)
		saas__lv_egress_vm_remove(d, spec->name);
	if (uid) {
		pthread_mutex_lock(&d->mu);
		saas__lv_uids_put(&d->cf.uids, uid);
		pthread_mutex_unlock(&d->mu);
	}
	saas__lv_snapshot_clear(&s);
	free(kept_base_path);
	free(disk);
	free(dir);
	return rc;
}

int saas__lv_snapshot_delete(void *ctx, const char *snap)
{
	struct drv *d = ctx;
	char *dir, *gone = NULL;
	int rc = SAAS_OK, fd;

	if (!saas__lv_snapshot_name_ok(snap))
		return SAAS_OK; /* no snapshot has such a name */
	if (d->host->snap_delete)
		return d->host->snap_delete(d, snap);
	if (!(dir = snap_path(d, snap, NULL)) || !(gone = snap_path(d, snap, "deleted"))) {
		free(dir);
		return SAAS_ENOMEM;
	}
	/* A split of its RAM still running (a fork that failed before its children waited for it) ends first. */
	saas__lv_snapshot_splits_join(d, snap);
	/* Marked under the lock: a restore either read it whole before, or finds it gone. */
	pthread_rwlock_wrlock(&d->snaps_lock);
	if (exists(dir) && (fd = open(gone, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) >= 0)
		close(fd);
	else if (exists(dir))
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "deleting snapshot %s: %s", snap, strerror(errno));
	/* No restore reads it any more: the children that map its RAM keep it until they end. */
	if (rc == SAAS_OK)
		snapshot_ram_hold(d, snap, -1);
	pthread_rwlock_unlock(&d->snaps_lock);
	if (rc == SAAS_OK)
		saas__lv_snapshots_collect(d);
	free(gone);
	free(dir);
	return rc;
}

int saas__lv_snapshot_list(void *ctx, saas_name_fn fn, void *userdata)
{
	struct drv *d = ctx;
	char *root;
	DIR *dh;
	struct dirent *e;
	int stop = 0;

	if (d->host->snap_list)
		return d->host->snap_list(d, fn, userdata);
	if (!(root = saas__lv_path_join(d->dir, "snapshots")))
		return SAAS_ENOMEM;
	pthread_rwlock_rdlock(&d->snaps_lock);
	for (dh = opendir(root); !stop && dh && (e = readdir(dh));) {
		char *meta, *gone = NULL;
		if (!saas__lv_snapshot_name_ok(e->d_name)) /* ".", "..", NAME.tmp */
			continue;
		if ((meta = snap_path(d, e->d_name, "snapshot.json")) && (gone = snap_path(d, e->d_name, "deleted")) &&
		    exists(meta) && !exists(gone))
			stop = fn(userdata, e->d_name);
		free(gone);
		free(meta);
	}
	if (dh)
		closedir(dh);
	pthread_rwlock_unlock(&d->snaps_lock);
	free(root);
	return SAAS_OK;
}

int saas__lv_snapshot_scan(void *ctx, saas_snapshot_fn fn, void *userdata)
{
	struct drv *d = ctx;

	/* This machine's snapshots are files of the engine's own state directory: snapshot_list covers them. */
	if (!d->host->snap_scan)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "this driver's snapshots are its engine's alone");
	return d->host->snap_scan(d, fn, userdata);
}
