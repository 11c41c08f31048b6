/*
 * A snapshot's disk, through QEMU (snapshot.c says what a snapshot holds):
 * the VM's top overlay found and frozen, the switch of a forked VM onto a
 * new overlay and its undoing, and the chains of overlays flattened and
 * settled. Split from snapshot.c, which holds the descriptions, the files
 * and the driver's slots.
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
#include "driver/libvirt/launch.h"
#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/qmp.h"
#include "driver/libvirt/snapshot.h"
#include "driver/libvirt/vmfs.h"
#include "util/spawn.h"

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
int saas__lv_snapdisk_top(virDomainPtr dom, char **node, char **file, uint64_t *size)
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

/* The image name in our metadata element ("" when it is not there or not a name), and whether it has the control port. */
void saas__lv_snapdisk_image(virDomainPtr dom, char *out, size_t len, bool *control)
{
	char *xml = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, META_NS, 0);
	const char *p = xml ? strstr(xml, "image>") : NULL;
	size_t n = p ? strcspn(p += 6, "<") : 0;

	out[0] = '\0';
	*control = xml && saas__lv_meta_control(xml);
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
int saas__lv_snapdisk_switch(struct drv *d, virDomainPtr dom, const char *node, const char *vmdir, const char *next,
                             const char *base, uint64_t size, unsigned int uid, const char *new_node)
{
	char bytes[32], *cmd = NULL;
	const char *argv[] = { "qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-u", "-b", base, next, bytes,
		               NULL };
	json_t *args;
	int rc, fd = -1;

	/*
	 * The name is made first, by the engine, O_EXCL|O_NOFOLLOW in the VM's
	 * directory, which its QEMU cannot write (checked as it is opened): what
	 * qemu-img then writes and the engine gives to the VM's uid (on the fd)
	 * is that file and no other.
	 */
	if ((rc = saas__lv_vm_file_create(vmdir, strrchr(next, '/') + 1, &fd)) < 0)
		return saas__error_wrap(rc, "creating the VM's new disk overlay");
	snprintf(bytes, sizeof(bytes), "%llu", (unsigned long long)size);
	if (saas__run(argv, NULL) < 0) {
		rc = saas__error_wrap(SAAS_EBACKEND, "creating the VM's new disk overlay");
		goto out;
	}
	if ((rc = saas__lv_confine_vm_fd(d, fd, next, uid)) < 0)
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
	if (fd >= 0)
		close(fd);
	free(cmd);
	if (rc < 0)
		unlink(next);
	return rc;
}

/* Undo the name in the header of a switched VM's overlay: back onto its old top, when the snapshot failed. */
bool saas__lv_snapdisk_unswitch(struct drv *d, virDomainPtr dom, const char *name, const char *new_node, const char *top)
{
	bool done = true;

	json_t *args = json_pack("{s:s, s:{s:s, s:s, s:s}}", "execute", "change-backing-file", "arguments", "device",
	                         new_node, "image-node-name", new_node, "backing-file", top);
	char *cmd = args ? json_dumps(args, JSON_COMPACT) : NULL;

	if (!cmd || saas__lv_qmp(dom, cmd, -1, NULL) < 0) {
		saas__lv_log(d, SAAS_LOG_WARN, "VM %s runs on, but its disk's header names a snapshot that failed, whose "
		             "disk is kept: %s", name, cmd ? saas_error_last()->message : "out of memory");
		saas__error_clear();
		done = false;
	}
	free(cmd);
	json_decref(args);
	return done;
}

/*
 * The merge that keeps a VM's disk chain short. A fork leaves the parent
 * on a new overlay over the frozen disk, which itself backs onto the
 * previous fork's, and so on: each fork would add a file to the parent's
 * chain, which nothing else ever releases. So once the parent runs again,
 * QEMU streams into its top overlay the data of every snapshot's disk in its
 * chain (block-stream down to the first disk that is no snapshot's, the
 * image's), and the top then backs onto that disk: the parent's chain is as
 * deep as a new VM's again, and the snapshots' disks are held only by the
 * VMs restored from them, to be collected once those go. The frozen disks
 * are only read: what the children restore is untouched.
 *
 * The stream runs in QEMU while the VM runs, as one job of a name of ours,
 * kept when it ends (auto-dismiss off) so that its outcome can be read: the
 * next snapshot of the VM waits for it (the chain must hold still while it
 * is frozen) and dismisses it. A stream that fails leaves the chain as it
 * was, valid, only deeper. Done behind libvirt's back, like the switch onto
 * the new overlay, on node names QEMU reports.
 */
#define STREAM_JOB "aas-stream"
#define STREAM_WAIT_MS (10 * 60 * 1000)   /* a snapshot waits this long for a merge still running */

/* Is path a snapshot's disk (DIR/snapshots/NAME/disk.qcow2)? */
static bool in_snapshots(struct drv *d, const char *path)
{
	size_t n = strlen(d->dir);

	return strncmp(path, d->dir, n) == 0 && strncmp(path + n, "/snapshots/", 11) == 0;
}

/* The name of the format node (not the protocol one) whose file is path; NULL when QEMU has none. */
static char *format_node(virDomainPtr dom, const char *path)
{
	json_t *r = NULL, *n;
	char *out = NULL;
	size_t i;

	if (saas__lv_qmp(dom, "{\"execute\":\"query-named-block-nodes\",\"arguments\":{\"flat\":true}}", -1, &r) < 0) {
		saas__error_clear();
		return NULL;
	}
	json_array_foreach(r, i, n) {
		const char *drv = json_string_value(json_object_get(n, "drv"));
		const char *name = json_string_value(json_object_get(n, "node-name"));
		const char *file = json_string_value(json_object_get(n, "file"));
		char *path_of = drv && name && file && strcmp(drv, "file") != 0 ? node_file(file) : NULL;
		bool match = path_of && strcmp(path_of, path) == 0;

		free(path_of);
		if (match) {
			out = saas__strdup(name);
			break;
		}
	}
	json_decref(r);
	return out;
}

/* Start STREAM_JOB: the data of every file between the top node and base (a path of its chain) into the top. */
static int stream_start(virDomainPtr dom, const char *node, const char *base)
{
	char *base_node = format_node(dom, base), *cmd = NULL;
	json_t *args;
	int rc;

	args = json_pack("{s:s, s:{s:s, s:s, s:s, s:s, s:b}}", "execute", "block-stream", "arguments", "job-id", STREAM_JOB,
	                 "device", node, base_node ? "base-node" : "base", base_node ? base_node : base, "backing-file",
	                 base, "auto-dismiss", 0);
	if (!args || !(cmd = json_dumps(args, JSON_COMPACT)))
		rc = saas__oom();
	else
		rc = saas__lv_qmp(dom, cmd, -1, NULL);
	json_decref(args);
	free(cmd);
	free(base_node);
	return rc;
}

/*
 * Start merging into VM name's top overlay the snapshots' disks its chain
 * goes through, when there are more than `allowed` of them. Never fails the
 * caller: a chain left as it is stays valid, and the failure is logged.
 */
void saas__lv_snapdisk_flatten(struct drv *d, virDomainPtr dom, const char *name, size_t allowed)
{
	struct saas__lv_snapshot c;
	char *node = NULL, *top = NULL, *vmdir = NULL, disk[NAME_MAX + 1];
	const char *base = NULL;
	uint64_t size = 0;
	size_t snaps = 0, depth = 0;
	int rc;

	memset(&c, 0, sizeof(c));
	if ((rc = saas__lv_snapdisk_top(dom, &node, &top, &size)) < 0)
		goto out;
	/* Its chain is read from its top's header as root: only if QEMU names one of the VM's own disks. */
	if (!(vmdir = saas__lv_drv_path(d, "vms", name))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	if (!saas__lv_vm_disk_name(vmdir, top, disk, sizeof(disk))) {
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "QEMU names %s as the VM's disk, which is none of "
		                 "the VM's own: refused", top);
		goto out;
	}
	if ((rc = saas__lv_snapshot_chain(top, &c)) < 0)
		goto out;
	for (; c.chain && c.chain[depth]; depth++) {
		if (in_snapshots(d, c.chain[depth]))
			snaps++;
		else if (!base)
			base = c.chain[depth];
	}
	/* A chain of snapshots only (none is made so): merging would copy the whole disk. */
	if (snaps <= allowed || !base)
		goto out;
	if ((rc = stream_start(dom, node, base)) < 0)
		goto out;
	saas__lv_log(d, SAAS_LOG_INFO, "VM %s: merging %zu snapshot disks back into its own (its chain was %zu deep)", name,
	             snaps, depth + 1);
out:
	if (rc < 0 && rc != SAAS_ENOTFOUND) /* ENOTFOUND: a VM without a disk */
		saas__lv_log(d, SAAS_LOG_WARN, "VM %s: its disk chain stays %zu deep, not merged: %s", name, depth + 1,
		             saas_error_last()->message);
	saas__error_clear();
	saas__lv_snapshot_clear(&c);
	free(vmdir);
	free(top);
	free(node);
}

/*
 * Wait for STREAM_JOB to end and dismiss it; its error (none: "") into err.
 * `waiting` says who waits for which merge, for the error of a wait too long.
 */
static int stream_wait(struct drv *d, virDomainPtr dom, const char *name, const char *waiting, char *err, size_t len)
{
	int64_t deadline = saas__now_ms() + STREAM_WAIT_MS;

	err[0] = '\0';

	for (;;) {
		json_t *r = NULL, *job, *found = NULL;
		const char *status;
		size_t i;
		int rc;

		if ((rc = saas__lv_qmp(dom, "{\"execute\":\"query-jobs\"}", -1, &r)) < 0)
			return saas__error_wrap(rc, "reading the VM's block jobs");
		json_array_foreach(r, i, job) {
			const char *id = json_string_value(json_object_get(job, "id"));
			if (id && strcmp(id, STREAM_JOB) == 0)
				found = job;
		}
		status = json_string_value(json_object_get(found, "status"));
		if (!found || (status && strcmp(status, "concluded") == 0)) {
			const char *e = json_string_value(json_object_get(found, "error"));
			if (e)
				snprintf(err, len, "%s", e);
			json_decref(r);
			if (found && (rc = saas__lv_qmp(dom, "{\"execute\":\"job-dismiss\",\"arguments\":{\"id\":\"" STREAM_JOB
			                                     "\"}}", -1, NULL)) < 0)
				return saas__error_wrap(rc, "dismissing the VM's disk merge");
			return SAAS_OK;
		}
		json_decref(r);
		if (closing(d) || saas__now_ms() > deadline)
			return saas__error(SAAS_EBUSY, SAAS_ERRCLASS_DRIVER, 0,
			                   "VM %s: %s, which is still running after %d min; try again later", name, waiting,
			                   STREAM_WAIT_MS / 60000);
		usleep(50 * 1000);
	}
}

int saas__lv_snapdisk_settle(struct drv *d, virDomainPtr dom, const char *name)
{
	char err[512];
	/* A fork or a pause that keeps the VM running, or a resume, began it (disk_flatten). */
	int rc = stream_wait(d, dom, name, "its snapshot waits for the merge of its disk that its last fork or resume began",
	                     err, sizeof(err));

	if (rc == SAAS_OK && err[0])
		saas__lv_log(d, SAAS_LOG_WARN, "VM %s: merging its disk chain failed, which stays as it was: %s", name, err);
	return rc;
}

int saas__lv_snapdisk_pull(struct drv *d, virDomainPtr dom, const char *name, const char *base)
{
	char *node = NULL, *top = NULL, err[512];
	uint64_t size = 0;
	int rc;

	if ((rc = saas__lv_snapdisk_top(dom, &node, &top, &size)) < 0 || (rc = stream_start(dom, node, base)) < 0 ||
	    (rc = stream_wait(d, dom, name, "it waits for the merge of its snapshot's disk into its new overlay (a fork "
	                      "or a resume)", err, sizeof(err))) < 0)
		saas__error_wrap(rc, "merging the snapshot's disk into the VM's new overlay");
	else if (err[0])
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "merging the snapshot's disk into the VM's new "
		                 "overlay failed: %s", err);
	free(top);
	free(node);
	return rc;
}
