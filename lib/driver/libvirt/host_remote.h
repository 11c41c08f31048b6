/*
 * Internal: a remote VM host's parts the rest of the driver reaches (host_remote.c).
 */
#ifndef SAAS_DRIVER_LIBVIRT_HOST_REMOTE_H
#define SAAS_DRIVER_LIBVIRT_HOST_REMOTE_H

#include "driver/libvirt/libvirt_driver.h"

struct saas__lv_snapshot;

/* ---- a remote VM host (host_remote.c, host_remote_tpl.c) ------------------------------------ */

/*
 * A dead host is told by libvirt's keepalive: a probe every INTERVAL
 * seconds, the connection closed (every call on it failing) after COUNT
 * unanswered, so within about INTERVAL * (COUNT + 1) seconds.
 */
#define KEEPALIVE_INTERVAL_S 2
#define KEEPALIVE_COUNT 2
#define REMOTE_CONNECT_TIMEOUT_MS 5000   /* opening a connection to a host */
#define UPLOAD_WAIT_MS (5 * 60 * 1000)   /* another engine's upload of one image build, at most */
/* A guest's SSH forward on a remote host: a port of this range (below Linux's ephemeral ports). */
#define REMOTE_PORT_FIRST 20000u
#define REMOTE_PORT_COUNT 12000u

/* Does a libvirt capabilities XML's host CPU have a vmx or svm feature (hardware virtualisation)? Pure. */
bool saas__lv_caps_cpu_virt(const char *caps);
/* Does uri name a host (qemu+tcp://HOST/system), i.e. a VM host that may not be this machine? Pure. */
bool saas__lv_uri_vmhost(const char *uri);
/*
 * Is the host's connection alive? If the keepalive closed it, open it again
 * (bounded). SAAS_EBACKEND, naming the host, when it does not answer.
 */
int saas__lv_vmhost_check(struct drv *d);
/* The volume called name in the host's storage pool, or NULL (no error kept). */
virStorageVolPtr saas__lv_vmhost_vol_lookup(struct drv *d, const char *name);
/* Open uri within REMOTE_CONNECT_TIMEOUT_MS, with libvirt's keepalive on. */
int saas__lv_vmhost_connect(const char *uri, virConnectPtr *out);
/* The driver table's host_info slot. */
int saas__lv_host_info(void *ctx, saas_driver_host *out);
/*
 * The host's storage pool (d->spool_name at d->spool_dir) on the connection
 * in use now, made and started if missing: SAAS_OK and *pool, a handle valid
 * until the driver closes; or an error naming the host.
 */
int saas__lv_vmhost_pool(struct drv *d, virStoragePoolPtr *pool);
/* im's files on the host (im->host_*), uploaded once per build by one engine of all that share the pool. */
int saas__lv_vmhost_image(struct drv *d, struct image *im);
/* VM vm's overlay volume on base (a host path) of disk_gb GiB; *path (freed by the caller) on the host. */
int saas__lv_vmhost_overlay(struct drv *d, const char *vm, const char *base, unsigned int disk_gb, char **path);
/* VM vm's overlay volume deleted, if there is one. */
void saas__lv_vmhost_overlay_delete(struct drv *d, const char *vm);
/* The names of the pool's volumes (*names freed with saas__lv_vmhost_names_free). */
int saas__lv_vmhost_vol_names(struct drv *d, char ***names, int *n);
void saas__lv_vmhost_names_free(char **names, int n);
/* A new volume of the pool holding len bytes of data (len 0: an empty mark), readable by root only. */
int saas__lv_vmhost_vol_put(struct drv *d, const char *name, const char *data, size_t len);
/* Up to cap bytes of volume name from offset into buf (*got of them); SAAS_ENOTFOUND when there is none. */
int saas__lv_vmhost_vol_get(struct drv *d, const char *name, uint64_t offset, unsigned char *buf, size_t cap,
                            size_t *got);
/* Volume name deleted if it is there; one that stays is logged. */
void saas__lv_vmhost_vol_delete(struct drv *d, const char *name);

/*
 * Templates on a remote host. A template's saved state (libvirt's save
 * image, virDomainSaveFlags), its frozen disk and its description are
 * volumes of the pool named STEM.state, STEM.qcow2 and STEM.json, where STEM
 * is TPL_PREFIX KEY "-" GEN (GEN: random, per build, so that a build never
 * writes over a template clones may use); STEM.ready, made last, says the
 * template is complete. Clones are restored on the host: QEMU listens for
 * the migration stream on the host's address and the engine pours the
 * state volume's stream into it.
 */

/* libvirt's save image header (qemu_saveimage.h), as it is on disk. */
#define LV_SAVE_HEADER_BYTES 92u
/*
 * Where QEMU's migration stream starts in a save image whose first bytes
 * are head (n of them, at least LV_SAVE_HEADER_BYTES): SAAS_OK and *offset;
 * SAAS_EINVAL saying why it is not a complete, uncompressed save image of
 * a version this code reads. Pure.
 */
int saas__lv_save_stream_offset(const unsigned char *head, size_t n, uint64_t *offset);
/*
 * The length of the domain description that follows a save image's header
 * (head: n bytes, at least LV_SAVE_HEADER_BYTES), of a complete image or one
 * libvirt is still writing: SAAS_OK and *len, or SAAS_EINVAL. Pure.
 */
int saas__lv_save_xml_len(const unsigned char *head, size_t n, uint32_t *len);
/* Is name one of a remote template's volumes of key (TPL_PREFIX KEY "-" GEN ".suffix")? Its stem in stem. Pure. */
bool saas__lv_tpl_volume(const char *name, const char *key, const char *suffix, char stem[TPL_STEM_MAX]);
/* The lease name of the template of key on the host tagged host ("template:HOST:KEY"); false if too long. Pure. */
bool saas__lv_tpl_lease_name(char *out, size_t len, const char *host, const char *key);
/* The complete template of key on the host: 1 (its stem in stem), 0 none, or an error. */
int saas__lv_vmhost_tpl_find(struct drv *d, const char *key, char stem[TPL_STEM_MAX]);
/* Build the template of key on the host (template.c's builder for a remote host): see template.c. */
struct saas__lv_tpl_job {
	char key[33];
	char image[64];
	unsigned int vcpus, memory_mb, disk_gb;
};
/*
 * SAAS_OK and *stem when it is ready (built here, or found built);
 * SAAS_EBUSY when another engine holds its lease (it builds it).
 */
int saas__lv_vmhost_tpl_build(struct drv *d, const struct saas__lv_tpl_job *job, char stem[TPL_STEM_MAX]);
/* The template VM of a job's shape (template.c): its spec, isolated, and its name (64 bytes) after the key. */
void saas__lv_tpl_spec(const struct saas__lv_tpl_job *job, saas_vm_spec *spec, char name[64]);
/* A remote template that failed its clones: its ready mark goes (its volumes are pruned once nothing uses them). */
void saas__lv_vmhost_tpl_break(struct drv *d, const char *key);
/* The template's disk volume's path on the host (freed by the caller). */
int saas__lv_vmhost_tpl_disk(struct drv *d, const char *stem, char **path);
/* Pour the template's state into the clone's QEMU, paused with -incoming defer; then it runs. */
int saas__lv_vmhost_tpl_restore(struct launch *l, const struct timespec *t0, int64_t budget_ms);
/* template_list's part of a remote host: its complete templates of this owner. */
int saas__lv_vmhost_tpl_list(struct drv *d, saas_template_fn fn, void *userdata, int *stop);

/*
 * Snapshots on a remote host (host_remote_snap.c): the host table's snap_*
 * slots. A snapshot's volumes are SNAP_PREFIX SNAP ".state" (libvirt's save
 * image of its memory and devices, written by the host's libvirtd),
 * ".json" (its description, with the cluster's owner) and ".ready" (made
 * last: it is complete exactly when this is there); SNAP is the core's name
 * for it, never the guest's or a client's.
 */
#define SNAP_PREFIX "aas-snap-"
/* Is name snapshot volume ".suffix" (SNAP_PREFIX SNAP "." suffix, SNAP a snapshot's name)? SNAP in snap. Pure. */
bool saas__lv_snap_volume(const char *name, const char *suffix, char snap[64]);
int saas__lv_vmhost_snap_take(struct drv *d, const char *name, const char *snap, int keep, int64_t *bytes);
/*
 * Is volume name the disk a complete snapshot (of any cluster sharing the
 * pool) keeps, a paused VM's? Each such snapshot's description is read;
 * true when the pool cannot be read.
 */
bool saas__lv_vmhost_disk_kept(struct drv *d, const char *name);
/* Does a volume of the pool back onto the disk at path? True when the pool cannot be read. */
bool saas__lv_vmhost_vol_backs(struct drv *d, const char *path);
/*
 * What a snapshot's disk volume name backs onto (the image's disk, or a
 * template's): the path a resume or a fork merges it down to, into *path
 * (freed by the caller), as the pool last read its header.
 */
int saas__lv_vmhost_disk_base(struct drv *d, const char *name, char **path);
/* The path of domain dom's disk (its top file), or NULL; freed by the caller. */
char *saas__lv_vmhost_domain_disk(virDomainPtr dom);
/* A destroyed VM's own disk volume at path deleted: one of the pool's, and no complete snapshot's. */
void saas__lv_vmhost_disk_drop(struct drv *d, const char *path);
/*
 * A paused VM's resume and a fork's child run on a new overlay volume
 * DISK_PREFIX SNAP "-" GEN ".qcow2" (GEN: random) of the snapshot's kept
 * disk, into which that disk is then merged (saas__lv_snapdisk_pull); so
 * does a forked VM, its overlay made by the fork.
 */
#define DISK_PREFIX "aas-disk-"
/*
 * Once a disk that backed onto below is deleted (a destroyed VM's, a deleted
 * snapshot's kept one): below deleted too when it is a DISK_PREFIX volume
 * that no domain of the host names, no volume backs onto and no complete
 * snapshot keeps, and so on down its chain (at most CHAIN_DROP_MAX deep),
 * stopping at the first disk of another kind (an image's, a template's, a
 * VM's NAME.qcow2) or one in use. What it finds there is a fork's frozen disk
 * whose merge into the parent's new overlay failed: left under the parent
 * while it runs, it is of use to nobody once the parent's disk goes. whose
 * names the deleted disk for the log. below may be NULL: nothing is done.
 */
#define CHAIN_DROP_MAX 16
void saas__lv_vmhost_chain_drop(struct drv *d, const char *below, const char *whose);

int saas__lv_vmhost_snap_read(struct drv *d, const char *snap, struct saas__lv_snapshot *s, char **place);
int saas__lv_vmhost_snap_delete(struct drv *d, const char *snap);
int saas__lv_vmhost_snap_list(struct drv *d, saas_name_fn fn, void *userdata);
/*
 * This cluster's snapshots in the pool, complete or not (the pool read again
 * first, so that a state file a take cut short left is seen): whose a
 * snapshot is, its description says, or, when a take was cut short before
 * it, the domain description in its state's save image; one of no known
 * owner is not reported. When each was last written: the newest modification
 * or change time of its volumes, by the host's clock. Then, the whole pool
 * scanned, the DISK_PREFIX volumes nothing uses are deleted (host_remote_snap.c
 * says when): this is the core's sweep's one call on each host, once a
 * minute by one server, and the driver table has no slot of its own for it.
 */
int saas__lv_vmhost_snap_scan(struct drv *d, saas_snapshot_fn fn, void *userdata);
/*
 * The snapshots whose delete the host did not answer (d->snaps_gone),
 * deleted once it answers; none kept (any other host): nothing done. The
 * keeper's, every second.
 */
void saas__lv_vmhost_snaps_retry(struct drv *d);

#endif
