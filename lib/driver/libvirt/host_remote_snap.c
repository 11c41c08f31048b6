/*
 * Snapshots on a remote VM host (host_remote.h): a fork's or a pause's saved
 * state is a volume of the host's storage pool, written there by the host's
 * libvirtd, and VMs are restored from it on that host as a template's clones
 * are (host_remote_tpl.c). Split from snapshot.c, which keeps snapshots as
 * files of the state directory when QEMU runs on this machine, and shares
 * with this its description and its restore.
 *
 * Why libvirt writes the state. On one machine the engine hands QEMU a file
 * descriptor to migrate into; a remote host's QEMU can be given none (file
 * descriptors do not cross libvirt's network RPC), can open no path of its
 * own for a migration (QEMU 7.2 has no file: URI, and exec: is what the
 * host's seccomp sandbox forbids), and a migration to a TCP port of the
 * servers would need the hosts to reach them. libvirt's external memory
 * snapshot (virDomainSnapshotCreateXML, no metadata kept) does it on the
 * host: it pauses the VM, has QEMU migrate into a file of the pool through
 * its own helper, and resumes the VM (a fork). A pause pauses the VM first,
 * so that it stays paused, and then destroys it (libvirt ends no transient
 * domain for a snapshot). The file is libvirt's save image, as a remote
 * template's state is.
 *
 * A VM with a disk is paused by libvirt's save instead (virDomainSaveFlags:
 * the domain ends, its disk flushed and left as it is), and its disk volume
 * becomes the snapshot's, named in its description (disk_volume): libvirt's
 * storage API can neither rename nor link a volume, so the volume stays
 * where it is, and no delete of the driver's takes a volume a complete
 * snapshot names (saas__lv_vmhost_disk_kept). Its resume (snapshot.c) runs
 * on a new overlay of it, into which it is merged at once; the snapshot's
 * delete then takes it, once nothing backs onto it.
 *
 * A fork of a VM with a disk freezes the VM's top disk volume the same way,
 * and the parent runs on over a new overlay volume DISK_PREFIX SNAP-GEN of
 * it: one machine hard-links the frozen overlay into the snapshot and
 * switches the VM onto a new one over QMP, but a pool can link nothing, and
 * the switch must happen while the VM is paused for its memory, so that the
 * disk the snapshot keeps is the one that memory saw. libvirt does both in
 * one call: the memory snapshot above with an external disk snapshot of vda
 * onto the overlay this driver made first (a volume of the pool, named as a
 * resume's; VIR_DOMAIN_SNAPSHOT_CREATE_REUSE_EXT), while the VM is paused
 * once. The alternative, the pause's save and a resume of the parent on a
 * new overlay, would end the parent's domain, take it off its SSH forward and
 * load its whole memory back over the network. Then the frozen volume goes
 * as a pause's does: the parent merges it into its new overlay at once
 * (block-stream, waited for, as a resume does: a fork whose merge fails
 * fails), and each child, restored exactly as a resume on an overlay of its
 * own, merges it into that; so once the children are made nothing backs onto
 * it, and the snapshot's delete takes it. Until then every delete of the
 * driver's leaves it (a complete snapshot names it), and the delete leaves it
 * for as long as a volume backs onto it. The cost is a copy of what the guest
 * wrote on its disk into the parent and into each child, on the host, in
 * exchange for chains never deeper than a new VM's and no volume outliving
 * its snapshot. A fork whose merge failed leaves the frozen volume under the
 * parent, which runs on over it: the parent's destroy (or the delete of a
 * later pause's snapshot over it) takes it (saas__lv_vmhost_chain_drop).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "driver/libvirt/domain.h"
#include "driver/libvirt/host_remote.h"
#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/snapshot.h"

#define SNAP_JSON_MAX 65536
#define SNAP_STEM_MAX (sizeof(SNAP_PREFIX) + SNAPSHOT_NAME_MAX)

bool saas__lv_snap_volume(const char *name, const char *suffix, char snap[64])
{
	size_t pre = strlen(SNAP_PREFIX), n;
	const char *dot;

	if (strncmp(name, SNAP_PREFIX, pre) != 0 || !(dot = strrchr(name + pre, '.')) || strcmp(dot + 1, suffix) != 0)
		return false;
	n = (size_t)(dot - (name + pre));
	if (n < 1 || n > SNAPSHOT_NAME_MAX)
		return false;
	memcpy(snap, name + pre, n);
	snap[n] = '\0';
	return saas__lv_snapshot_name_ok(snap);
}

static void vol_name(char out[SNAP_STEM_MAX + 8], const char *snap, const char *suffix)
{
	snprintf(out, SNAP_STEM_MAX + 8, SNAP_PREFIX "%s%s%s", snap, suffix ? "." : "", suffix ? suffix : "");
}

/* rc, its error naming the host (a call that fails once the keepalive gave up says only what it was). */
static int on_host(struct drv *d, int rc)
{
	if (rc < 0 && !strstr(saas_error_last()->message, d->uri))
		saas__error_wrap(rc, "VM host %s", d->uri);
	return rc;
}

/* Every volume of snapshot snap deleted, its ready mark first: no restore starts from it any more. */
static void snap_volumes_delete(struct drv *d, const char *snap)
{
	static const char *const suffixes[] = { "ready", "state", "json" };
	char name[SNAP_STEM_MAX + 8];

	for (size_t i = 0; i < SAAS_ARRAY_SIZE(suffixes); i++) {
		vol_name(name, snap, suffixes[i]);
		saas__lv_vmhost_vol_delete(d, name);
	}
}

/* The pool's directory on the host, as its libvirtd has it (freed by the caller). */
static int pool_dir(struct drv *d, char **dir)
{
	virStoragePoolPtr pool;
	char *xml = NULL;
	const char *t, *p, *end;
	int rc;

	*dir = NULL;
	if ((rc = saas__lv_vmhost_pool(d, &pool)) < 0)
		return rc;
	if (!(xml = virStoragePoolGetXMLDesc(pool, 0)))
		return saas__lv_virt_error("reading the storage pool's description on the VM host");
	/* libvirt writes the target's path plain: a pool directory has no character XML escapes. */
	if (!(t = strstr(xml, "<target>")) || !(p = strstr(t, "<path>")) || !(end = strstr(p += 6, "</path>")) ||
	    p[0] != '/' || memchr(p, '&', (size_t)(end - p)))
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "the storage pool %s on VM host %s has no "
		                 "directory this driver can use", d->spool_name, d->uri);
	else if (!(*dir = strndup(p, (size_t)(end - p))))
		rc = saas__oom();
	free(xml);
	return rc;
}

/*
 * The pool read again, so that a file libvirt wrote in its directory is a
 * volume. libvirt refuses while a volume of the pool is being made (another
 * server's overlay, a second or so): tried again for a while.
 */
static int pool_refresh(struct drv *d)
{
	virStoragePoolPtr pool;
	int rc;

	for (int waited = 0;; waited += 100) {
		if ((rc = saas__lv_vmhost_pool(d, &pool)) < 0)
			return rc;
		if (virStoragePoolRefresh(pool, 0) == 0)
			return SAAS_OK;
		if (waited >= 10000 || closing(d) || saas__lv_vmhost_check(d) < 0)
			return saas__lv_virt_error("reading the storage pool again on the VM host");
		saas__sleep_ms(100);
	}
}

/* A volume's existence (the host's word); an error when the pool cannot be read. */
static int vol_exists(struct drv *d, const char *name, bool *yes)
{
	virStoragePoolPtr pool;
	virStorageVolPtr v;
	virErrorPtr e;
	int rc;

	*yes = false;
	if ((rc = saas__lv_vmhost_pool(d, &pool)) < 0)
		return rc;
	if ((v = virStorageVolLookupByName(pool, name))) {
		virStorageVolFree(v);
		*yes = true;
	} else if ((e = virGetLastError()) && e->code != VIR_ERR_NO_STORAGE_VOL) {
		return saas__lv_virt_error("looking for a volume on the VM host");
	}
	saas__error_clear();
	return SAAS_OK;
}

/*
 * The state file libvirt wrote, made a volume of the pool (a refresh: libvirt
 * learns of files in a directory pool by reading it), checked a complete,
 * raw save image with a QEMU stream, its size on storage and the RAM block
 * its stream holds into s.
 */
static int state_found(struct drv *d, const char *name, struct saas__lv_snapshot *s)
{
	unsigned char head[LV_SAVE_HEADER_BYTES];
	char *stream = NULL;
	virStorageVolPtr vol = NULL;
	virStorageVolInfo info;
	uint64_t offset;
	size_t got;
	int rc;

	if ((rc = pool_refresh(d)) < 0)
		return rc;
	if (!(vol = saas__lv_vmhost_vol_lookup(d, name)))
		return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "the VM's saved state %s is not in pool %s on "
		                   "VM host %s", name, d->spool_name, d->uri);
	if ((rc = saas__lv_vmhost_vol_get(d, name, 0, head, sizeof(head), &got)) < 0 ||
	    (rc = saas__lv_save_stream_offset(head, got, &offset)) < 0)
		goto out;
	if (!(stream = malloc(STATE_HEAD_MAX))) {
		rc = saas__oom();
		goto out;
	}
	if ((rc = saas__lv_vmhost_vol_get(d, name, offset, (unsigned char *)stream, STATE_HEAD_MAX, &got)) < 0)
		goto out;
	if (got < 4 || memcmp(stream, "QEVM", 4) != 0) {
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "the VM's saved state holds no QEMU stream");
		goto out;
	}
	saas__lv_ram_block_in(stream, got, s->ram_block, sizeof(s->ram_block));
	s->state_bytes = virStorageVolGetInfo(vol, &info) == 0 ? (int64_t)info.allocation : 0;
out:
	if (rc < 0)
		saas__error_wrap(rc, "%s on VM host %s", name, d->uri);
	free(stream);
	virStorageVolFree(vol);
	return rc;
}

/* The description with the cluster's owner, so that no other cluster sharing the pool takes it for its own. */
static int describe(struct drv *d, const char *snap, const struct saas__lv_snapshot *s)
{
	char name[SNAP_STEM_MAX + 8], *text = saas__lv_snapshot_json(s), *out = NULL;
	json_t *j = text ? json_loads(text, 0, NULL) : NULL;
	int rc;

	if (!j || json_object_set_new(j, "owner", json_string(d->owner)) < 0 || !(out = json_dumps(j, JSON_COMPACT))) {
		rc = saas__oom();
		goto out;
	}
	vol_name(name, snap, "json");
	if ((rc = saas__lv_vmhost_vol_put(d, name, out, strlen(out))) < 0)
		goto out;
	/* Last: its existence is what says the snapshot is complete. */
	vol_name(name, snap, "ready");
	rc = saas__lv_vmhost_vol_put(d, name, NULL, 0);
out:
	json_decref(j);
	free(out);
	free(text);
	return rc;
}

/*
 * The VM's memory and devices into path on the host, by libvirt there. A
 * running VM is paused for it and runs again; one paused already (a pause:
 * libvirt refuses to end a transient domain for its snapshot, so the caller
 * pauses it first and destroys it after) stays paused.
 */
static int state_save(struct drv *d, virDomainPtr dom, const char *path, const char *snap, const char *overlay)
{
	saas__buf b = SAAS__BUF_INIT;
	virDomainSnapshotPtr sp;
	char *xml;
	unsigned int flags = VIR_DOMAIN_SNAPSHOT_CREATE_NO_METADATA;

	/* The name and the paths are ours (a snapshot's name is [a-z0-9-], the pool's directory checked). */
	saas__buf_printf(&b, "<domainsnapshot><name>" SNAP_PREFIX "%s</name><memory snapshot='external' file='%s'/>",
	                 snap, path);
	/* A fork's disk: the VM onto overlay (made by the caller, backed by its top), in the same pause. */
	if (overlay) {
		saas__buf_printf(&b, "<disks><disk name='vda' snapshot='external' type='file'><driver type='qcow2'/>"
		                     "<source file='%s'/></disk></disks>", overlay);
		flags |= VIR_DOMAIN_SNAPSHOT_CREATE_REUSE_EXT;
	}
	saas__buf_puts(&b, "</domainsnapshot>");
	if (!(xml = saas__buf_detach(&b, NULL)))
		return saas__oom();
	sp = virDomainSnapshotCreateXML(dom, xml, flags);
	free(xml);
	if (!sp)
		return saas__error_wrap(saas__lv_virt_error("saving the VM's state on the VM host"), "%s", d->uri);
	virDomainSnapshotFree(sp);
	return SAAS_OK;
}

/*
 * The VM's disk as a volume of the pool, into s: its top overlay as QEMU
 * has it (the VM's NAME.qcow2, or the overlay a resume or a fork made),
 * which must be a volume of this driver's pool; its size (the restores'
 * shape). Its path into *at (freed by the caller).
 */
static int disk_volume(struct drv *d, virDomainPtr dom, struct saas__lv_snapshot *s, char **at)
{
	virStorageVolPtr vol = NULL;
	virStorageVolInfo info;
	char *node = NULL, *top = NULL, *path = NULL;
	const char *vname;
	uint64_t size = 0;
	int rc;

	if ((rc = saas__lv_snapdisk_top(dom, &node, &top, &size)) < 0)
		goto out;
	/* The pool's volume of that file's name, at that very path. */
	vname = strrchr(top, '/') + 1;
	if (!saas__lv_disk_volume_ok(vname) || !(vol = saas__lv_vmhost_vol_lookup(d, vname)) ||
	    !(path = virStorageVolGetPath(vol)) || strcmp(path, top) != 0) {
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "the VM's disk %s is not a volume of pool %s on VM "
		                 "host %s that a snapshot can keep", top, d->spool_name, d->uri);
		goto out;
	}
	saas__strlcpy(s->disk_volume, vname, sizeof(s->disk_volume));
	s->disk_gb = (unsigned int)(size >> 30);
	s->disk_bytes = virStorageVolGetInfo(vol, &info) == 0 ? (int64_t)info.allocation : 0;
	*at = path;
	path = NULL;
out:
	if (vol)
		virStorageVolFree(vol);
	free(path);
	free(top);
	free(node);
	return rc;
}

int saas__lv_vmhost_disk_base(struct drv *d, const char *name, char **path)
{
	virStorageVolPtr v = saas__lv_vmhost_vol_lookup(d, name);
	char *xml = v ? virStorageVolGetXMLDesc(v, 0) : NULL;
	const char *bs = xml ? strstr(xml, "<backingStore>") : NULL, *p = bs ? strstr(bs, "<path>") : NULL;
	size_t n = p ? strcspn(p += 6, "<&") : 0;
	int rc = SAAS_OK;

	*path = NULL;
	if (!v)
		rc = saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_DRIVER, 0, "the snapshot's disk %s is not on VM host %s",
		                 name, d->uri);
	else if (!p || p[n] != '<' || p[0] != '/')
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "the snapshot's disk %s on VM host %s backs onto "
		                 "no disk this driver made", name, d->uri);
	else if (!(*path = strndup(p, n)))
		rc = saas__oom();
	free(xml);
	if (v)
		virStorageVolFree(v);
	return rc;
}

/*
 * A fork's new overlay for the parent: volume DISK_PREFIX SNAP-GEN.qcow2
 * (its name into vol) backed by the frozen disk at frozen, its path into *at.
 */
static int fork_overlay(struct drv *d, const char *snap, const char *frozen, unsigned int disk_gb,
                        char vol[SNAP_STEM_MAX + 24], char **at)
{
	char stem[SNAP_STEM_MAX + 16];
	uint32_t gen;
	int rc;

	if ((rc = saas__random(&gen, sizeof(gen))) < 0)
		return rc;
	snprintf(stem, sizeof(stem), DISK_PREFIX "%s-%08x", snap, gen);
	snprintf(vol, SNAP_STEM_MAX + 24, "%s.qcow2", stem);
	if ((rc = saas__lv_vmhost_overlay(d, stem, frozen, disk_gb, at)) < 0)
		saas__error_wrap(rc, "the VM's new disk overlay %s", vol);
	return rc;
}

/* The frozen disk volume (name) merged into the forked VM's new overlay, down to what that disk backs onto. */
static int fork_merge(struct drv *d, virDomainPtr dom, const char *vm, const char *name)
{
	char *base = NULL;
	int rc;

	if ((rc = saas__lv_vmhost_disk_base(d, name, &base)) == SAAS_OK)
		rc = saas__lv_snapdisk_pull(d, dom, vm, base);
	free(base);
	return rc;
}

static void kept_disk_delete(struct drv *d, const char *snap, const char *name);

int saas__lv_vmhost_snap_take(struct drv *d, const char *name, const char *snap, int keep, int64_t *bytes)
{
	struct saas__lv_snapshot s;
	struct timespec t0;
	virDomainPtr dom = NULL;
	virDomainInfo info;
	virDomainBlockInfo disk;
	char vname[SNAP_STEM_MAX + 8], nvol[SNAP_STEM_MAX + 24] = "", *dir = NULL, *path = NULL, *owner = NULL;
	char *frozen = NULL, *next = NULL;
	const char *doing = keep ? "forked" : "paused";
	unsigned int port = 0;
	bool exists = false, written = false, saved = false, switched = false, merge_tried = false, merged = false;
	int state = 0, rc;

	memset(&s, 0, sizeof(s));
	if (!saas__lv_snapshot_name_ok(snap))
		return saas__inval("a snapshot's name is 1 to %d of a-z, 0-9 and '-'", SNAPSHOT_NAME_MAX);
	/* A host that does not answer: nothing is done, the VM (if it runs there) is as it was. */
	if ((rc = saas__lv_vmhost_check(d)) < 0)
		return saas__error_wrap(rc, "VM %s cannot be %s", name, doing);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (!(dom = virDomainLookupByName(saas__lv_conn(d), name)) && virGetLastError() &&
	    virGetLastError()->code != VIR_ERR_NO_DOMAIN) {
		rc = saas__lv_virt_error("looking the VM up");
		goto out;
	}
	if (!dom || saas__lv_domain_meta(dom, &port, &s.host_key, &owner) < 0 || strcmp(owner, d->owner) != 0) {
		rc = saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_DRIVER, 0, "no VM %s on VM host %s", name, d->uri);
		goto out;
	}
	if (virDomainGetState(dom, &state, NULL, 0) < 0 || state != VIR_DOMAIN_RUNNING || virDomainGetInfo(dom, &info) < 0) {
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, state, "VM %s is not running", name);
		goto out;
	}
	/* Every disk of the driver's VMs is vda (domain.c). */
	if (virDomainGetBlockInfo(dom, "vda", &disk, 0) == 0 && (rc = disk_volume(d, dom, &s, &frozen)) < 0)
		goto out;
	saas__error_clear();
	vol_name(vname, snap, "ready");
	if ((rc = vol_exists(d, vname, &exists)) < 0)
		goto out;
	if (exists) {
		rc = saas__inval("snapshot %s exists", snap);
		goto out;
	}
	saas__strlcpy(s.source, name, sizeof(s.source));
	saas__lv_snapdisk_image(dom, s.image, sizeof(s.image), &s.control);
	s.vcpus = info.nrVirtCpu;
	s.memory_mib = (unsigned int)(info.maxMem >> 10);
	vol_name(vname, snap, "state");
	if ((rc = pool_dir(d, &dir)) < 0 || !(path = saas__lv_path_join(dir, vname))) {
		rc = rc < 0 ? rc : SAAS_ENOMEM;
		goto out;
	}
	/* A leftover of an attempt cut short (libvirt writes only a file that is not there). */
	snap_volumes_delete(d, snap);
	written = true;
	if (!keep && virDomainSuspend(dom) < 0) {
		rc = saas__error_wrap(saas__lv_virt_error("pausing the VM"), "%s", d->uri);
		goto out;
	}
	/*
	 * A paused VM with a disk is saved (libvirt's save ends its domain,
	 * QEMU's writes flushed, the disk left as it is): its disk volume is then
	 * the snapshot's, which the VM's forget below keeps (its description
	 * names it). A memory snapshot alone would move it onto a new overlay of
	 * libvirt's naming first: a fork names that overlay itself.
	 */
	if (s.disk_volume[0] && !keep) {
		if (virDomainSaveFlags(dom, path, NULL, 0) < 0) {
			rc = saas__error_wrap(saas__lv_virt_error("saving the VM on the VM host"), "%s", d->uri);
			goto out;
		}
		virDomainFree(dom);
		dom = NULL;
		saved = true;
	} else if (s.disk_volume[0]) {
		/* A fork of a VM with a disk (the head of this file): the parent onto a new overlay as its memory is saved. */
		if ((rc = fork_overlay(d, snap, frozen, s.disk_gb, nvol, &next)) < 0)
			goto out;
		rc = state_save(d, dom, path, snap, next);
		/* libvirt undoes the switch of a snapshot that failed; the domain's word is what counts all the same. */
		if (!(switched = rc == SAAS_OK)) {
			char *now = saas__lv_vmhost_domain_disk(dom);
			switched = now && strcmp(now, next) == 0;
			free(now);
		}
		if (rc < 0)
			goto out;
	} else if ((rc = state_save(d, dom, path, snap, NULL)) < 0) {
		goto out;
	}
	if ((rc = state_found(d, vname, &s)) < 0 || (rc = describe(d, snap, &s)) < 0)
		goto out;
	/* The parent's chain as short as before, and the frozen disk backed onto by the children alone (waited for). */
	if (switched) {
		merge_tried = true;
		if ((rc = fork_merge(d, dom, name, s.disk_volume)) < 0)
			goto out;
		merged = true;
	}
	if (!keep) {
		if (dom)
			virDomainFree(dom);
		dom = NULL;
		/* Its domain ended with the save: what the driver keeps of the VM goes as at a destroy. */
		if (saas__lv_vm_destroy(d, name) < 0) {
			saas__lv_log(d, SAAS_LOG_WARN, "VM %s saved as snapshot %s on VM host %s, but not forgotten: %s", name,
			             snap, d->uri, saas_error_last()->message);
			saas__error_clear();
		}
	}
	if (bytes)
		*bytes = s.state_bytes + s.disk_bytes;
	saas__lv_log(d, SAAS_LOG_INFO, "VM %s %s as snapshot %s on VM host %s in %lld ms (%lld MiB of state in its "
	             "pool, loaded by %s%s%s%s%s)", name, doing, snap, d->uri, (long long)saas__ms_since(&t0),
	             (long long)(s.state_bytes >> 20), keep ? "each child" : "its resume",
	             s.disk_volume[0] ? "; its disk kept: volume " : "", s.disk_volume,
	             nvol[0] ? "; the VM runs on over volume " : "", nvol);
	rc = SAAS_OK;
out:
	if (rc < 0 && written) {
		char msg[512];
		int st = 0;
		/* The cleanup's calls clear the error: what failed is said again after it. */
		snprintf(msg, sizeof(msg), "%s", saas_error_last()->message);
		/* A VM paused for its snapshot (by libvirt, or for a pause) runs on, as the contract says. */
		if (dom && virDomainGetState(dom, &st, NULL, 0) == 0 && st == VIR_DOMAIN_PAUSED && virDomainResume(dom) < 0)
			saas__lv_log(d, SAAS_LOG_WARN, "VM %s stays paused after its failed snapshot: %s", name,
			             virGetLastErrorMessage());
		/* Saved, and then the snapshot failed: the VM is brought back from what libvirt wrote, on its disk. */
		if (saved && virDomainRestore(saas__lv_conn(d), path) < 0)
			saas__lv_log(d, SAAS_LOG_WARN, "VM %s was saved for its pause, which then failed, and cannot be "
			             "restored: %s", name, virGetLastErrorMessage());
		/* The state libvirt may have begun: a volume once the pool is read again. */
		pool_refresh(d);
		snap_volumes_delete(d, snap);
		/* A fork's new overlay the VM never ran on goes; once it does, the frozen disk goes when merged into it. */
		if (nvol[0] && !switched)
			saas__lv_vmhost_vol_delete(d, nvol);
		if (switched && !merge_tried)
			merged = fork_merge(d, dom, name, s.disk_volume) == SAAS_OK;
		if (switched && merged)
			kept_disk_delete(d, snap, s.disk_volume);
		else if (switched)
			saas__lv_log(d, SAAS_LOG_WARN, "VM %s runs on over its disk %s, frozen by its failed fork and not merged "
			             "back: the volume stays under it (deleted with the VM if it bears its name)", name,
			             s.disk_volume);
		saas__error_clear();
		rc = saas__error(rc, SAAS_ERRCLASS_DRIVER, 0, "%s", msg);
	}
	on_host(d, rc < 0 ? saas__error_wrap(rc, "VM %s cannot be %s", name, doing) : rc);
	if (dom)
		virDomainFree(dom);
	saas__lv_snapshot_clear(&s);
	free(frozen);
	free(next);
	free(owner);
	free(path);
	free(dir);
	return rc;
}

/*
 * Snapshot snap's description volume, read: its text in *text (freed by the
 * caller) and whether it is this cluster's; SAAS_ENOTFOUND when there is none.
 */
static int snap_json(struct drv *d, const char *snap, char **text, bool *ours)
{
	char name[SNAP_STEM_MAX + 8];
	const char *owner;
	json_t *j;
	size_t got = 0;
	int rc;

	*ours = false;
	vol_name(name, snap, "json");
	if (!(*text = malloc(SNAP_JSON_MAX + 1)))
		return saas__oom();
	if ((rc = saas__lv_vmhost_vol_get(d, name, 0, (unsigned char *)*text, SNAP_JSON_MAX, &got)) < 0) {
		free(*text);
		*text = NULL;
		return rc;
	}
	(*text)[got] = '\0';
	j = json_loads(*text, JSON_DISABLE_EOF_CHECK, NULL);
	owner = json_string_value(json_object_get(j, "owner"));
	*ours = owner && strcmp(owner, d->owner) == 0;
	json_decref(j);
	return SAAS_OK;
}

/* Snapshot snap's description, when it is complete and this cluster's; SAAS_ENOTFOUND otherwise. */
static int snap_describe(struct drv *d, const char *snap, struct saas__lv_snapshot *s)
{
	char name[SNAP_STEM_MAX + 8], *text = NULL;
	bool ready = false, ours = false;
	int rc;

	memset(s, 0, sizeof(*s));
	vol_name(name, snap, "ready");
	if ((rc = vol_exists(d, name, &ready)) < 0)
		return saas__error_wrap(on_host(d, rc), "snapshot %s", snap);
	if (!ready || (rc = snap_json(d, snap, &text, &ours)) == SAAS_ENOTFOUND || (rc == SAAS_OK && !ours)) {
		free(text);
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_DRIVER, 0, "no snapshot %s of this cluster on VM host %s",
		                   snap, d->uri);
	}
	if (rc < 0)
		return saas__error_wrap(on_host(d, rc), "snapshot %s", snap);
	if ((rc = saas__lv_snapshot_parse(text, s)) < 0)
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "snapshot %s on VM host %s: %s", snap, d->uri,
		                 saas_error_last()->message);
	free(text);
	return rc;
}

int saas__lv_vmhost_snap_read(struct drv *d, const char *snap, struct saas__lv_snapshot *s, char **place)
{
	char stem[SNAP_STEM_MAX + 8];
	int rc;

	*place = NULL;
	/* A paused sandbox whose host does not answer stays paused: said as the host's failure, never as "no snapshot". */
	if ((rc = saas__lv_vmhost_check(d)) < 0)
		return saas__error_wrap(rc, "snapshot %s", snap);
	if ((rc = snap_describe(d, snap, s)) < 0)
		return rc;
	/* Restored as a template's clone: its state is the volume STEM.state (saas__lv_vmhost_tpl_restore). */
	vol_name(stem, snap, NULL);
	if (!(*place = saas__strdup(stem))) {
		saas__lv_snapshot_clear(s);
		return SAAS_ENOMEM;
	}
	return SAAS_OK;
}

/* Snapshot snap kept to delete once its host answers (d->mu taken here); said when the list is full. */
static void gone_later(struct drv *d, const char *snap)
{
	bool kept = false;

	pthread_mutex_lock(&d->mu);
	for (size_t i = 0; i < d->n_snaps_gone && !kept; i++)
		kept = strcmp(d->snaps_gone[i], snap) == 0;
	if (!kept && d->n_snaps_gone < SNAPSHOTS_GONE_MAX) {
		void *grown = realloc(d->snaps_gone, (d->n_snaps_gone + 1) * sizeof(*d->snaps_gone));
		if (grown) {
			d->snaps_gone = grown;
			saas__strlcpy(d->snaps_gone[d->n_snaps_gone++], snap, sizeof(d->snaps_gone[0]));
			kept = true;
		}
	}
	pthread_mutex_unlock(&d->mu);
	if (!kept)
		saas__lv_log(d, SAAS_LOG_WARN, "snapshot %s on VM host %s is not kept to delete later: its volumes "
		             "stay (virsh vol-delete)", snap, d->uri);
}

static int domains_text(struct drv *d, char **all);

void saas__lv_vmhost_chain_drop(struct drv *d, const char *below, const char *whose)
{
	size_t pre = strlen(DISK_PREFIX);
	char *at = below ? strdup(below) : NULL, *doms = NULL;

	for (int depth = 0; at && depth < CHAIN_DROP_MAX; depth++) {
		const char *name = strrchr(at, '/') ? strrchr(at, '/') + 1 : at;
		virStorageVolPtr v = NULL;
		char *vpath = NULL, *next = NULL;
		bool used;

		/* Only the driver's own disks of snapshots and forks: never an image's or a template's, never a VM's NAME.qcow2. */
		if (strncmp(name, DISK_PREFIX, pre) != 0 || !saas__lv_disk_volume_ok(name) ||
		    !(v = saas__lv_vmhost_vol_lookup(d, name)))
			break;
		vpath = virStorageVolGetPath(v);
		virStorageVolFree(v);
		/* Read once, and only here: a disk some VM of the host runs on (or over) is in its domain's description. */
		if (!doms && domains_text(d, &doms) < 0)
			break;
		used = !vpath || strcmp(vpath, at) != 0 || strstr(doms, at) || saas__lv_vmhost_vol_backs(d, at) ||
		       saas__lv_vmhost_disk_kept(d, name);
		free(vpath);
		if (used) {
			saas__lv_log(d, SAAS_LOG_DEBUG, "disk volume %s on VM host %s (under %s) stays: a VM, a volume or a "
			             "snapshot uses it", name, d->uri, whose);
			break;
		}
		/* What it backs onto, read before it goes: the next to look at. */
		if (saas__lv_vmhost_disk_base(d, name, &next) < 0)
			next = NULL;
		saas__lv_log(d, SAAS_LOG_INFO, "disk volume %s on VM host %s, left under %s by a fork whose merge failed and "
		             "used by nothing else, deleted with it", name, d->uri, whose);
		saas__lv_vmhost_vol_delete(d, name);
		free(at);
		at = next;
	}
	free(at);
	free(doms);
	saas__error_clear();
}

/* Snapshot snap's kept disk volume name deleted, unless a volume of the pool backs onto it (then said). */
static void kept_disk_delete(struct drv *d, const char *snap, const char *name)
{
	virStorageVolPtr v;
	char *path, *below = NULL, whose[SNAP_STEM_MAX + 64];

	/* Every volume's header read again: a merge rewrote the backing file a resume's overlay names. */
	if (pool_refresh(d) < 0)
		saas__error_clear();
	v = saas__lv_vmhost_vol_lookup(d, name);
	path = v ? virStorageVolGetPath(v) : NULL;

	if (v)
		virStorageVolFree(v);
	if (!v)
		return;
	if (!path || saas__lv_vmhost_vol_backs(d, path)) {
		saas__lv_log(d, SAAS_LOG_WARN, "snapshot %s deleted, but its disk volume %s on VM host %s stays: a volume "
		             "backs onto it", snap, name, d->uri);
	} else {
		/* What it backs onto goes after it if nothing else uses it (a failed fork's frozen disk). */
		if (saas__lv_vmhost_disk_base(d, name, &below) < 0)
			below = NULL;
		saas__lv_vmhost_vol_delete(d, name);
		snprintf(whose, sizeof(whose), "snapshot %s's disk %s", snap, name);
		saas__lv_vmhost_chain_drop(d, below, whose);
	}
	saas__error_clear();
	free(below);
	free(path);
}

bool saas__lv_vmhost_disk_kept(struct drv *d, const char *name)
{
	char **names, snap[64], *text = NULL, disk[SNAPSHOT_VOLUME_MAX + 1];
	bool kept = false, ours = false;
	int n;

	/* A pool that cannot be read keeps everything. */
	if (saas__lv_vmhost_vol_names(d, &names, &n) < 0) {
		saas__error_clear();
		return true;
	}
	for (int i = 0; i < n && !kept; i++) {
		if (!saas__lv_snap_volume(names[i], "ready", snap))
			continue;
		/* Any cluster's: another's pause keeps its disk from this one's deletes too. */
		int rc = snap_json(d, snap, &text, &ours);
		if (rc == SAAS_OK) {
			/* One naming no volume of ours keeps none (its error cleared below). */
			saas__lv_snapshot_disk_volume(text, disk);
			kept = strcmp(disk, name) == 0;
		} else {
			kept = rc != SAAS_ENOTFOUND; /* unreadable: kept */
		}
		free(text);
		text = NULL;
	}
	saas__lv_vmhost_names_free(names, n);
	saas__error_clear();
	return kept;
}

/* Delete snapshot snap's volumes, if they are this cluster's (or no description says whose). */
static int snap_delete(struct drv *d, const char *snap)
{
	char *text = NULL;
	bool ours = false;
	int rc;

	/* Under the lock a restore here holds while it reads it: it read it whole before, or finds it gone. */
	pthread_rwlock_wrlock(&d->snaps_lock);
	/*
	 * This cluster's, or what a take cut short left before its description
	 * (never another cluster's). No disk: the VMs restored from it hold all
	 * of it in their memory, so all of it goes now.
	 */
	if ((rc = snap_json(d, snap, &text, &ours)) == SAAS_ENOTFOUND || (rc == SAAS_OK && ours)) {
		char disk[SNAPSHOT_VOLUME_MAX + 1];
		saas__lv_snapshot_disk_volume(text, disk);
		saas__error_clear();
		snap_volumes_delete(d, snap);
		/* A pause's disk: once nothing backs onto it any more (a resume's overlay merges it in at once). */
		if (disk[0])
			kept_disk_delete(d, snap, disk);
		rc = SAAS_OK;
	} else if (rc == SAAS_OK) {
		saas__lv_log(d, SAAS_LOG_WARN, "snapshot %s on VM host %s is another cluster's: not deleted", snap, d->uri);
	}
	pthread_rwlock_unlock(&d->snaps_lock);
	free(text);
	return rc;
}

int saas__lv_vmhost_snap_delete(struct drv *d, const char *snap)
{
	int rc;

	/* A host that does not answer: deleted once it does (by this server; forgotten if it stops). */
	if ((rc = saas__lv_vmhost_check(d)) < 0 || (rc = snap_delete(d, snap)) < 0) {
		rc = saas__error_wrap(on_host(d, rc), "deleting snapshot %s (done once the host answers)", snap);
		gone_later(d, snap);
	}
	return rc;
}

void saas__lv_vmhost_snaps_retry(struct drv *d)
{
	char (*gone)[SNAPSHOT_GONE_NAME];
	size_t n;

	pthread_mutex_lock(&d->mu);
	if (saas__now_ms() < d->snaps_gone_next_ms) {
		pthread_mutex_unlock(&d->mu);
		return;
	}
	gone = d->snaps_gone;
	n = d->n_snaps_gone;
	d->snaps_gone = NULL;
	d->n_snaps_gone = 0;
	d->snaps_gone_next_ms = saas__now_ms() + SNAPSHOTS_GONE_RETRY_MS;
	pthread_mutex_unlock(&d->mu);
	if (!n)
		return;
	for (size_t i = 0; i < n; i++) {
		if (d->host->check(d) == SAAS_OK && snap_delete(d, gone[i]) == SAAS_OK) {
			saas__lv_log(d, SAAS_LOG_INFO, "snapshot %s on VM host %s deleted, now that the host answers",
			             gone[i], d->uri);
			continue;
		}
		saas__error_clear();
		gone_later(d, gone[i]);
	}
	free(gone);
}

int saas__lv_vmhost_snap_list(struct drv *d, saas_name_fn fn, void *userdata)
{
	char **names, snap[64];
	int n, rc, stop = 0;

	if ((rc = saas__lv_vmhost_check(d)) < 0 || (rc = saas__lv_vmhost_vol_names(d, &names, &n)) < 0)
		return rc;
	for (int i = 0; i < n && !stop; i++) {
		struct saas__lv_snapshot s;
		if (!saas__lv_snap_volume(names[i], "ready", snap))
			continue;
		/* A host that stops answering cuts the listing short: an error, never a shorter list. */
		if ((rc = snap_describe(d, snap, &s)) == SAAS_OK)
			stop = fn(userdata, snap);
		saas__lv_snapshot_clear(&s);
		if (rc < 0 && rc != SAAS_ENOTFOUND)
			break;
		saas__error_clear();
		rc = SAAS_OK;
	}
	saas__lv_vmhost_names_free(names, n);
	return rc;
}

/* ---- the core's sweep: every snapshot of this cluster in the pool, complete or not ---- */

static const char *const scan_suffixes[] = { "ready", "json", "state" };

/* A volume's time in a volume's description: "<TAG>SECONDS.NANOSECONDS</TAG>" as Unix ms, 0 when absent. */
static int64_t xml_time_ms(const char *xml, const char *tag)
{
	char open_tag[16];
	const char *p;
	char *end;
	long long s, ns = 0;

	snprintf(open_tag, sizeof(open_tag), "<%s>", tag);
	if (!(p = strstr(xml, open_tag)))
		return 0;
	s = strtoll(p + strlen(open_tag), &end, 10);
	if (*end == '.') {
		char digits[10] = "000000000";
		for (int i = 0; i < 9 && end[1 + i] >= '0' && end[1 + i] <= '9'; i++)
			digits[i] = end[1 + i];
		ns = strtoll(digits, NULL, 10);
	}
	return s > 0 ? (int64_t)s * 1000 + ns / 1000000 : 0;
}

/*
 * When volume name was last written or changed (its file's mtime or ctime,
 * the newer, as the host's libvirtd stats it for the description): Unix ms
 * into *ms, never lowered; a volume not there leaves it as it was.
 */
static int vol_written(struct drv *d, const char *name, int64_t *ms)
{
	virStoragePoolPtr pool;
	virStorageVolPtr v;
	virErrorPtr e;
	char *xml;
	int64_t m, c;
	int rc;

	if ((rc = saas__lv_vmhost_pool(d, &pool)) < 0)
		return rc;
	if (!(v = virStorageVolLookupByName(pool, name))) {
		if ((e = virGetLastError()) && e->code != VIR_ERR_NO_STORAGE_VOL)
			return saas__lv_virt_error("looking for a volume on the VM host");
		saas__error_clear();
		return SAAS_OK;
	}
	xml = virStorageVolGetXMLDesc(v, 0);
	virStorageVolFree(v);
	if (!xml) {
		/* Deleted between the lookup and its description: as if not there. */
		if ((e = virGetLastError()) && e->code == VIR_ERR_NO_STORAGE_VOL) {
			saas__error_clear();
			return SAAS_OK;
		}
		return saas__lv_virt_error("reading a volume's description on the VM host");
	}
	m = xml_time_ms(xml, "mtime");
	c = xml_time_ms(xml, "ctime");
	free(xml);
	if (m > *ms)
		*ms = m;
	if (c > *ms)
		*ms = c;
	return SAAS_OK;
}

/*
 * Whose a snapshot without a description is: the owner in the domain
 * description libvirt wrote at the head of its state (a take cut short after
 * the state was begun). *ours false when it cannot tell (no state, or too
 * little of it written yet).
 */
static int state_owner_ours(struct drv *d, const char *snap, bool *ours)
{
	unsigned char head[LV_SAVE_HEADER_BYTES];
	char name[SNAP_STEM_MAX + 8], *xml = NULL, *owner = NULL, *key = NULL;
	uint32_t len;
	unsigned int port;
	size_t got = 0;
	int rc;

	*ours = false;
	vol_name(name, snap, "state");
	if ((rc = saas__lv_vmhost_vol_get(d, name, 0, head, sizeof(head), &got)) < 0) {
		if (rc == SAAS_ENOTFOUND)
			saas__error_clear();
		return rc == SAAS_ENOTFOUND ? SAAS_OK : rc;
	}
	if (saas__lv_save_xml_len(head, got, &len) < 0) {
		saas__error_clear();
		return SAAS_OK;
	}
	if (!(xml = malloc((size_t)len + 1)))
		return saas__oom();
	if ((rc = saas__lv_vmhost_vol_get(d, name, LV_SAVE_HEADER_BYTES, (unsigned char *)xml, len, &got)) == SAAS_OK) {
		xml[got] = '\0';
		/* Our metadata's owner: the domain description is libvirt's, from the domain XML this driver made. */
		if (saas__lv_meta_parse(xml, &port, &key, &owner) == SAAS_OK)
			*ours = strcmp(owner, d->owner) == 0;
	}
	saas__error_clear();
	free(key);
	free(owner);
	free(xml);
	return rc == SAAS_ENOTFOUND ? SAAS_OK : rc;
}

/* The snapshots' names (each once) that the pool's volume names hold; *n of them, freed by the caller. */
static int snap_stems(char **names, int n, char (**stems)[64], size_t *count)
{
	size_t cap = 0;

	*stems = NULL;
	*count = 0;
	for (int i = 0; i < n; i++) {
		char snap[64];
		bool is = false, seen = false;

		for (size_t k = 0; k < SAAS_ARRAY_SIZE(scan_suffixes) && !is; k++)
			is = saas__lv_snap_volume(names[i], scan_suffixes[k], snap);
		for (size_t j = 0; is && j < *count && !seen; j++)
			seen = strcmp((*stems)[j], snap) == 0;
		if (!is || seen)
			continue;
		if (SAAS__ARRAY_RESERVE(*stems, cap, *count + 1) < 0)
			return SAAS_ENOMEM;
		saas__strlcpy((*stems)[(*count)++], snap, sizeof((*stems)[0]));
	}
	return SAAS_OK;
}

/* ---- the same sweep: the disk volumes a resume, a fork or a fork's child cut short left ---- */

/*
 * Every domain's description on the host (any cluster's), one after the
 * other in *all (freed by the caller): the paths of their disks and of the
 * backing files libvirt knows of are in it.
 */
static int domains_text(struct drv *d, char **all)
{
	saas__buf b = SAAS__BUF_INIT;
	virDomainPtr *doms = NULL;
	virErrorPtr e;
	int n = virConnectListAllDomains(saas__lv_conn(d), &doms, 0), rc = SAAS_OK;

	*all = NULL;
	if (n < 0)
		return saas__lv_virt_error("listing the VM host's domains");
	for (int i = 0; i < n; i++) {
		char *xml = rc == SAAS_OK ? virDomainGetXMLDesc(doms[i], 0) : NULL;
		if (xml)
			saas__buf_puts(&b, xml);
		/* One gone between the listing and its description uses nothing any more. */
		else if (rc == SAAS_OK && (!(e = virGetLastError()) || e->code != VIR_ERR_NO_DOMAIN))
			rc = saas__lv_virt_error("reading a domain's description on the VM host");
		free(xml);
		virDomainFree(doms[i]);
	}
	free(doms);
	if (!(*all = saas__buf_detach(&b, NULL)) && rc == SAAS_OK)
		rc = saas__oom();
	if (rc < 0) {
		free(*all);
		*all = NULL;
	}
	return rc;
}

/*
 * Delete the pool's DISK_PREFIX volumes nothing uses: what a resume, a fork
 * or a fork's child cut short by a server's end left (made, and no domain
 * ever ran on it), or a failed fork's frozen disk the parent no longer backs
 * onto. One goes only when all of these hold:
 *   - it was last written (mtime or ctime, the host's clock) more than
 *     the grace ago (driver option disk_sweep_grace, an hour: the grace a
 *     snapshot cut short has, SAAS_HOST_SNAPSHOT_GRACE_MS, for the same
 *     reasons): a restore or a fork under way made its own just now;
 *   - no domain of the host names its path (doms: read before the pool's
 *     volumes were listed, so that a VM whose domain a pause ends after that
 *     was seen using it, and one ended before has its snapshot's state in the
 *     listing);
 *   - no snapshot of the pool is incomplete and young (busy: a pause between
 *     its save and its description, whose disk is no domain's and no
 *     complete snapshot's for those seconds);
 *   - no complete snapshot names it (a paused VM's disk, a fork's frozen one:
 *     any cluster's), and no volume backs onto it.
 * Any cluster's: a volume no domain, snapshot or volume of the host uses is
 * of use to nobody. Failures are logged, never the scan's.
 */
static void disks_sweep(struct drv *d, char **names, int n, const char *doms, bool busy)
{
	size_t pre = strlen(DISK_PREFIX);
	int64_t now = saas__now_ms();

	if (busy) {
		saas__lv_log(d, SAAS_LOG_DEBUG, "VM host %s: a snapshot is being taken; its unused disk volumes are swept "
		             "later", d->uri);
		return;
	}
	for (int i = 0; i < n; i++) {
		size_t len = strlen(names[i]);
		virStorageVolPtr v;
		int64_t written = 0;
		char *path;

		if (strncmp(names[i], DISK_PREFIX, pre) != 0 || !saas__lv_disk_volume_ok(names[i]) ||
		    len <= pre + strlen(".qcow2") || vol_written(d, names[i], &written) < 0 || written <= 0 ||
		    now - written < d->disk_sweep_grace_ms) {
			saas__error_clear();
			continue;
		}
		if (!(v = saas__lv_vmhost_vol_lookup(d, names[i])))
			continue;
		path = virStorageVolGetPath(v);
		virStorageVolFree(v);
		if (path && !strstr(doms, path) && !saas__lv_vmhost_disk_kept(d, names[i]) &&
		    !saas__lv_vmhost_vol_backs(d, path)) {
			saas__lv_log(d, SAAS_LOG_WARN, "disk volume %s on VM host %s is used by no VM, snapshot or volume (last "
			             "written %lld s ago): deleting it", names[i], d->uri, (long long)((now - written) / 1000));
			saas__lv_vmhost_vol_delete(d, names[i]);
		}
		saas__error_clear();
		free(path);
	}
}

int saas__lv_vmhost_snap_scan(struct drv *d, saas_snapshot_fn fn, void *userdata)
{
	char **names = NULL, (*stems)[64] = NULL, *doms = NULL;
	size_t count = 0;
	bool busy = false;
	int n = 0, rc, stop = 0;

	if ((rc = saas__lv_vmhost_check(d)) < 0)
		goto out;
	/* Before the pool is read (disks_sweep): a host whose domains cannot be read has no disk swept. */
	if (domains_text(d, &doms) < 0) {
		saas__lv_log(d, SAAS_LOG_WARN, "VM host %s: its unused disk volumes are not swept: %s", d->uri,
		             saas_error_last()->message);
		saas__error_clear();
	}
	/* A state file libvirt wrote for a take cut short is a volume once the pool is read again. */
	if ((rc = pool_refresh(d)) < 0 || (rc = saas__lv_vmhost_vol_names(d, &names, &n)) < 0 ||
	    (rc = snap_stems(names, n, &stems, &count)) < 0)
		goto out;
	for (size_t i = 0; i < count && !stop; i++) {
		saas_driver_snapshot s = { stems[i], 0, 0 };
		char vname[SNAP_STEM_MAX + 8], *text = NULL;
		bool ours = false, ready = false;

		vol_name(vname, stems[i], "ready");
		if ((rc = vol_exists(d, vname, &ready)) < 0)
			break;
		for (size_t k = 0; k < SAAS_ARRAY_SIZE(scan_suffixes) && rc == SAAS_OK; k++) {
			vol_name(vname, stems[i], scan_suffixes[k]);
			rc = vol_written(d, vname, &s.written_ms);
		}
		if (rc < 0)
			break;
		/* A host that stops answering cuts the scan short: an error, never a shorter list. */
		if ((rc = snap_json(d, stems[i], &text, &ours)) == SAAS_ENOTFOUND) {
			saas__error_clear();
			rc = state_owner_ours(d, stems[i], &ours);
		}
		free(text);
		if (rc < 0)
			break;
		s.complete = ready;
		/* Any cluster's take under way (or cut short within the grace) holds the disk sweep back. */
		busy = busy || (!ready && saas__now_ms() - s.written_ms < d->disk_sweep_grace_ms);
		if (ours)
			stop = fn(userdata, &s);
	}
	/*
	 * Only after a whole scan: a listing cut short is the caller's error,
	 * and one its caller stopped has not seen every take under way (busy).
	 */
	if (rc == SAAS_OK && !stop && doms)
		disks_sweep(d, names, n, doms, busy);
out:
	free(doms);
	free(stems);
	saas__lv_vmhost_names_free(names, n);
	return rc < 0 ? on_host(d, saas__error_wrap(rc, "listing the snapshots in the pool")) : SAAS_OK;
}
