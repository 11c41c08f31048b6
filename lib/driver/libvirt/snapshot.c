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
 * written as SNAP.tmp and renamed into place once complete.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "driver/libvirt/libvirt_driver.h"
#include "util/spawn.h"

#define SNAPSHOT_JSON_MAX 65536

/* ---- names and descriptions (pure) ----------------------------------------------------------- */

bool saas__lv_snapshot_name_ok(const char *name)
{
	size_t n = name ? strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") : 0;

	return n >= 1 && n <= SNAPSHOT_NAME_MAX && name[n] == '\0';
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
	if (j)
		text = json_dumps(j, JSON_INDENT(2));
	json_decref(j);
	return text;
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
	if (format != SNAPSHOT_FORMAT) {
		rc = saas__inval("the snapshot is of format %lld, this driver reads %d", (long long)format, SNAPSHOT_FORMAT);
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
static int chain_of(const char *path, struct saas__lv_snapshot *s)
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

/* Write text to path, whole, or fail saying why. */
static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");
	size_t len = strlen(text);

	if (!f || fwrite(text, 1, len, f) != len || fflush(f) != 0 || fsync(fileno(f)) != 0) {
		int err = errno;
		if (f)
			fclose(f);
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, err, "%s: %s", path, strerror(err));
	}
	return fclose(f) == 0 ? SAAS_OK : saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "%s: %s", path, strerror(errno));
}

/* Read snapshot snap's description; SAAS_ENOTFOUND when it is missing, incomplete or deleted. */
static int snapshot_read(struct drv *d, const char *snap, struct saas__lv_snapshot *s)
{
	char *meta = snap_path(d, snap, "snapshot.json"), *gone = snap_path(d, snap, "deleted"), *text = NULL;
	int rc;

	memset(s, 0, sizeof(*s));
	if (!meta || !gone)
		rc = SAAS_ENOMEM;
	else if (exists(gone) || !(text = saas__lv_read_file(meta, SNAPSHOT_JSON_MAX)))
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

void saas__lv_snapshots_cleanup(struct drv *d)
{
	char *root = saas__lv_path_join(d->dir, "snapshots");
	DIR *dir;
	struct dirent *e;

	if (root && saas__mkdir_p(root, 0700) == 0 && (dir = opendir(root))) {
		while ((e = readdir(dir))) {
			size_t len = strlen(e->d_name);
			char *sub;
			if (len > 4 && strcmp(e->d_name + len - 4, ".tmp") == 0 && (sub = saas__lv_path_join(root, e->d_name))) {
				saas__lv_log(d, SAAS_LOG_INFO, "removing snapshot %.*s, left half-written", (int)(len - 4), e->d_name);
				saas__lv_rm_tree(sub);
				free(sub);
			}
		}
		closedir(dir);
	}
	free(root);
	saas__lv_snapshots_collect(d);
}

/* ---- QEMU ------------------------------------------------------------------------------------ */

/*
 * The file of a block node as query-block names it: its path, or, when the
 * node's backing is not the one its header names (a forked VM's overlay:
 * its header names the snapshot's path for the file QEMU opened under the
 * VM's), a "json:{...}" pseudo-filename whose "file" member holds the path.
 * NULL when neither (or out of memory).
 */
static char *node_file(const char *name)
{
	json_t *j;
	const char *path;
	char *out = NULL;

	if (strncmp(name, "json:", 5) != 0)
		return saas__strdup(name);
	if ((j = json_loads(name + 5, 0, NULL)) &&
	    (path = json_string_value(json_object_get(json_object_get(j, "file"), "filename"))) && path[0] == '/')
		out = saas__strdup(path);
	json_decref(j);
	return out;
}

/*
 * The VM's disk as QEMU has it: its top node's name, its file and its
 * virtual size. SAAS_ENOTFOUND for a VM without one (initramfs images).
 */
static int disk_top(virDomainPtr dom, char **node, char **file, uint64_t *size)
{
	json_t *r = NULL, *dev;
	size_t i;
	int rc;

	*node = *file = NULL;
	if ((rc = saas__lv_qmp(dom, "{\"execute\":\"query-block\"}", -1, &r)) < 0)
		return saas__error_wrap(rc, "reading the VM's disks");
	rc = SAAS_ENOTFOUND;
	json_array_foreach(r, i, dev) {
		json_t *in = json_object_get(dev, "inserted");
		const char *n = json_string_value(json_object_get(in, "node-name"));
		const char *f = json_string_value(json_object_get(in, "file"));
		if (!n || !f)
			continue;
		*size = (uint64_t)json_integer_value(json_object_get(json_object_get(in, "image"), "virtual-size"));
		if (!(*node = saas__strdup(n)) || !(*file = node_file(f))) {
			free(*node);
			*node = NULL;
			rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "the VM's disk has no file QEMU names: %s", f);
		} else {
			rc = SAAS_OK;
		}
		break;
	}
	json_decref(r);
	return rc;
}

/*
 * The name of the guest RAM's block, which a restore must give its own (the
 * largest block of HMP's `info ramblock`: its lines read "NAME PSIZE UNIT
 * OFFSET USED TOTAL"). Empty when QEMU does not say.
 */
static void ram_block(virDomainPtr dom, char *out, size_t len)
{
	json_t *r = NULL;
	const char *text;
	unsigned long long best = 0;

	out[0] = '\0';
	if (saas__lv_qmp(dom, "{\"execute\":\"human-monitor-command\",\"arguments\":{\"command-line\":\"info ramblock\"}}",
	                 -1, &r) < 0) {
		saas__error_clear();
		return;
	}
	for (text = json_string_value(r); text && *text;) {
		char name[64];
		unsigned long long used;
		if (sscanf(text, "%63s %*s %*s %*s 0x%llx", name, &used) == 2 && used > best) {
			best = used;
			saas__strlcpy(out, name, len);
		}
		text += strcspn(text, "\n");
		text += *text == '\n';
	}
	json_decref(r);
}

/* The image name in our metadata element ("" when it is not there or not a name). */
static void domain_image(virDomainPtr dom, char *out, size_t len)
{
	char *xml = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, META_NS, 0);
	const char *p = xml ? strstr(xml, "image>") : NULL;
	size_t n = p ? strcspn(p += 6, "<") : 0;

	out[0] = '\0';
	/* Image names are [a-z0-9._-]: nothing in them is escaped. */
	if (p && n > 0 && n < len && strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789._-") == n)
		snprintf(out, len, "%.*s", (int)n, p);
	free(xml);
}

/*
 * Freeze a running (paused) VM's top overlay `top` (QEMU's node `node`): the
 * VM goes on over a new overlay `next` whose backing file is `base`, the
 * snapshot's path for the frozen disk. QEMU opens `next` as it is
 * (mode existing), so its header keeps that name.
 */
static int disk_switch(struct drv *d, virDomainPtr dom, const char *node, const char *next, const char *base,
                       uint64_t size, unsigned int uid, const char *new_node)
{
	char bytes[32], *cmd = NULL;
	const char *argv[] = { "qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-u", "-b", base, next, bytes,
		               NULL };
	json_t *args;
	int rc;

	snprintf(bytes, sizeof(bytes), "%llu", (unsigned long long)size);
	if (saas__run(argv, NULL) < 0)
		return saas__error_wrap(SAAS_EBACKEND, "creating the VM's new disk overlay");
	if ((rc = saas__lv_confine_vm_file(d, next, uid)) < 0)
		goto out;
	args = json_pack("{s:s, s:{s:s, s:s, s:s, s:s, s:s}}", "execute", "blockdev-snapshot-sync", "arguments",
	                 "node-name", node, "snapshot-file", next, "snapshot-node-name", new_node, "format", "qcow2",
	                 "mode", "existing");
	if (!args || !(cmd = json_dumps(args, JSON_COMPACT))) {
		json_decref(args);
		rc = saas__oom();
		goto out;
	}
	json_decref(args);
	if ((rc = saas__lv_qmp(dom, cmd, -1, NULL)) < 0)
		saas__error_wrap(rc, "freezing the VM's disk");
out:
	free(cmd);
	if (rc < 0)
		unlink(next);
	return rc;
}

/* Undo the name in the header of a switched VM's overlay: back onto its old top, when the snapshot failed. */
static void disk_unswitch(struct drv *d, virDomainPtr dom, const char *name, const char *new_node, const char *top)
{
	json_t *args = json_pack("{s:s, s:{s:s, s:s, s:s}}", "execute", "change-backing-file", "arguments", "device",
	                         new_node, "image-node-name", new_node, "backing-file", top);
	char *cmd = args ? json_dumps(args, JSON_COMPACT) : NULL;

	if (!cmd || saas__lv_qmp(dom, cmd, -1, NULL) < 0) {
		saas__lv_log(d, SAAS_LOG_WARN, "VM %s runs on, but its disk's header names a snapshot that failed: %s", name,
		             cmd ? saas_error_last()->message : "out of memory");
		saas__error_clear();
	}
	free(cmd);
	json_decref(args);
}

/* ---- the slots ------------------------------------------------------------------------------- */

/* A failure's error, kept across the calls that undo what came before it. */
struct kept_error {
	int rc, klass;
	long code;
	char message[512];
};

static void error_keep(struct kept_error *k, int rc)
{
	const saas_error *e = saas_error_last();

	k->rc = rc;
	k->klass = e->klass;
	k->code = e->backend_code;
	snprintf(k->message, sizeof(k->message), "%s", e->message);
}

static int error_restore(const struct kept_error *k)
{
	return saas__error(k->rc, k->klass, k->code, "%s", k->message);
}

/*
 * A snapshot's state and frozen disk are files QEMU writes and a restore
 * reads on one machine, kept in the engine's state directory: not on a
 * remote host yet.
 */
static int no_remote_snapshots(struct drv *d)
{
	return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0,
	                   "snapshots (fork, pause) are not available on remote VM host %s yet", d->uri);
}

int saas__lv_vm_snapshot(void *ctx, const char *name, const char *snap, int keep, int64_t *bytes)
{
	struct drv *d = ctx;
	struct saas__lv_snapshot s;
	struct kept_error failed;
	virDomainPtr dom = NULL;
	virDomainInfo info;
	char *dir = NULL, *tmp = NULL, *path = NULL, *node = NULL, *top = NULL, *next = NULL, *frozen = NULL,
	     *base = NULL, *text = NULL, *owner = NULL, new_node[32] = "", hash[65];
	unsigned int port = 0, uid = 0;
	uint64_t size = 0;
	struct timespec t0;
	int64_t paused_ms, ram = 0, at[2] = { 0, 0 };
	bool paused = false, switched = false;
	int state = 0, rc;

	memset(&s, 0, sizeof(s));
	if (d->remote)
		return no_remote_snapshots(d);
	if (!saas__lv_snapshot_name_ok(snap))
		return saas__inval("a snapshot's name is 1 to %d of a-z, 0-9 and '-'", SNAPSHOT_NAME_MAX);
	if (!(dom = virDomainLookupByName(d->conn, name)) || saas__lv_domain_meta(dom, &port, &s.host_key, &owner) < 0 ||
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
	if (exists(dir)) {
		rc = saas__inval("snapshot %s exists", snap);
		goto out;
	}
	uid = saas__lv_domain_uid(dom);
	saas__strlcpy(s.source, name, sizeof(s.source));
	domain_image(dom, s.image, sizeof(s.image));
	s.vcpus = info.nrVirtCpu;
	s.memory_mib = (unsigned int)(info.maxMem >> 10);
	ram_block(dom, s.ram_block, sizeof(s.ram_block));
	if ((rc = disk_top(dom, &node, &top, &size)) < 0 && rc != SAAS_ENOTFOUND)
		goto out;
	s.disk_gb = top ? (unsigned int)(size >> 30) : 0;
	saas__lv_rm_tree(tmp);
	if (saas__mkdir_p(tmp, 0700) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot create %s: %s", tmp, strerror(errno));
		goto out;
	}

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
		if (link(top, frozen) < 0) {
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "freezing the VM's disk %s: %s", top, strerror(errno));
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
			if ((rc = disk_switch(d, dom, node, next, base, size, uid, new_node)) < 0)
				goto out;
			switched = true;
		}
	}
	if (!(path = saas__lv_path_join(tmp, "state"))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	at[0] = ms_since(&t0);
	/* Never x-ignore-shared: a VM's RAM is its own, and the whole of it goes into the stream. */
	if ((rc = saas__lv_state_save(d, dom, path, false, &ram)) < 0)
		goto out;
	at[1] = ms_since(&t0);
	s.state_bytes = stored_bytes(path);
	if (frozen) {
		s.disk_bytes = stored_bytes(frozen);
		if ((rc = chain_of(frozen, &s)) < 0)
			goto out;
	}
	/* Every restored VM's QEMU, each under a uid of its own, reads the frozen disk by path; none writes it. */
	if (d->confined && (rc = saas__lv_confine_template(d, tmp, frozen)) < 0)
		goto out;
	free(path);
	if (!(text = saas__lv_snapshot_json(&s)) || !(path = saas__lv_path_join(tmp, "snapshot.json"))) {
		rc = saas__oom();
		goto out;
	}
	if ((rc = write_file(path, text)) < 0)
		goto out;
	if (rename(tmp, dir) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "%s: %s", dir, strerror(errno));
		goto out;
	}
	if (keep && virDomainResume(dom) < 0) {
		/* A VM that does not run again fails its snapshot, which goes: the contract says none is left. */
		rc = saas__lv_virt_error("resuming the VM after its snapshot");
		error_keep(&failed, rc);
		saas__lv_rm_tree(dir);
		error_restore(&failed);
		paused = false;
		goto out;
	}
	paused = false;
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
	paused_ms = ms_since(&t0);
	/* Where a snapshot's time goes, for whoever tunes it. */
	saas__lv_log(d, SAAS_LOG_DEBUG, "VM %s snapshot %s: pause and disk %lld ms, state %lld ms, files and %s %lld ms",
	             name, snap, (long long)at[0], (long long)(at[1] - at[0]), keep ? "resume" : "destroy",
	             (long long)(paused_ms - at[1]));
	if (bytes)
		*bytes = s.state_bytes + s.disk_bytes;
	saas__lv_log(d, SAAS_LOG_INFO, "VM %s %s as snapshot %s in %lld ms, %lld MiB of RAM saved, "
	             "%lld MiB state and %lld MiB disk on storage",
	             name, keep ? "forked" : "paused", snap, (long long)paused_ms, (long long)(ram >> 20),
	             (long long)(s.state_bytes >> 20), (long long)(s.disk_bytes >> 20));
	rc = SAAS_OK;
out:
	if (rc < 0) {
		error_keep(&failed, rc);
		if (tmp)
			saas__lv_rm_tree(tmp);
		/* cont also makes the disks active again after a failed migration. */
		if (paused && virDomainResume(dom) < 0)
			saas__lv_log(d, SAAS_LOG_WARN, "VM %s stays paused after its failed snapshot: %s", name,
			             virGetLastError() ? virGetLastError()->message : "unknown libvirt error");
		else if (switched)
			disk_unswitch(d, dom, name, new_node, top);
		error_restore(&failed);
	}
	if (dom)
		virDomainFree(dom);
	saas__lv_snapshot_clear(&s);
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

int saas__lv_vm_restore(void *ctx, const saas_vm_spec *spec, const char *snap)
{
	struct drv *d = ctx;
	struct saas__lv_snapshot s;
	struct image im;
	struct launch l;
	struct timespec t0;
	saas_vm_network fallback;
	const saas_vm_network *net;
	char *dir = NULL, *disk = NULL;
	unsigned int uid = 0;
	bool locked = false, egress = false;
	int rc;

	memset(&s, 0, sizeof(s));
	memset(&l, 0, sizeof(l));
	if (d->remote)
		return no_remote_snapshots(d);
	if (!saas__lv_snapshot_name_ok(snap))
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_DRIVER, 0, "no snapshot %s", snap);
	if ((rc = saas__lv_net_admit(d, spec, &fallback, &net)) < 0)
		return rc;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* Held while the snapshot's files are read: a delete waits, and then the new VM's disk holds it. */
	pthread_rwlock_rdlock(&d->snaps_lock);
	locked = true;
	if ((rc = snapshot_read(d, snap, &s)) < 0)
		goto out;
	/* The stream holds devices and RAM of the source's shape: a restore cannot change it. */
	if (spec->vcpus != s.vcpus || spec->memory_mb > s.memory_mib || (s.disk_gb && spec->disk_gb != s.disk_gb)) {
		rc = saas__inval("snapshot %s is of a VM of %u vCPU, %u MiB, %u GiB of disk: it restores into that shape only",
		                 snap, s.vcpus, s.memory_mib, s.disk_gb);
		goto out;
	}
	if (!(dir = snap_path(d, snap, NULL)) || (s.disk_gb && !(disk = snap_path(d, snap, "disk.qcow2")))) {
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
	if (d->confined) {
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
	l.d = d;
	l.spec = spec;
	l.im = &im;
	l.host_key = s.host_key;
	l.internet = net->mode != SAAS_NET_ISOLATED;
	l.policy = net->mode == SAAS_NET_POLICY;
	l.uid = uid;
	l.tdir = dir;
	l.snapshot = true;
	if ((rc = saas__lv_boot_clone(&l)) < 0) {
		saas__error_wrap(rc, "snapshot %s (its RAM block: %s)", snap, s.ram_block[0] ? s.ram_block : "unknown");
		goto out;
	}
	pthread_rwlock_unlock(&d->snaps_lock);
	locked = false;
	if ((rc = saas__lv_vm_add(d, spec->name, NULL, l.port, uid, s.host_key, l.ssh)) < 0) {
		saas__lv_launch_undo(&l);
		goto out;
	}
	saas__lv_log(d, SAAS_LOG_INFO, "VM %s up in %lld ms (restored from snapshot %s of %s, %s, %u vCPU, %u MiB, %s, "
	             "ssh 127.0.0.1:%u)", spec->name, (long long)ms_since(&t0), snap, s.source, s.image, s.vcpus,
	             s.memory_mib, l.policy ? "policy" : l.internet ? "internet" : "isolated", l.port);
	virDomainFree(l.dom);
	free(l.dir);
	free(l.overlay);
	uid = 0; /* the VM's now */
	egress = false;
out:
	if (locked)
		pthread_rwlock_unlock(&d->snaps_lock);
	if (egress)
		saas__lv_egress_vm_remove(d, spec->name);
	if (uid) {
		pthread_mutex_lock(&d->mu);
		saas__lv_uids_put(&d->uids, uid);
		pthread_mutex_unlock(&d->mu);
	}
	saas__lv_snapshot_clear(&s);
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
	if (!(dir = snap_path(d, snap, NULL)) || !(gone = snap_path(d, snap, "deleted"))) {
		free(dir);
		return SAAS_ENOMEM;
	}
	/* Marked under the lock: a restore either read it whole before, or finds it gone. */
	pthread_rwlock_wrlock(&d->snaps_lock);
	if (exists(dir) && (fd = open(gone, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) >= 0)
		close(fd);
	else if (exists(dir))
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "deleting snapshot %s: %s", snap, strerror(errno));
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
	char *root = saas__lv_path_join(d->dir, "snapshots");
	DIR *dh;
	struct dirent *e;
	int stop = 0;

	if (!root)
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
