/*
 * Internal: snapshots of running VMs: fork, pause, restore (snapshot.c).
 */
#ifndef SAAS_DRIVER_LIBVIRT_SNAPSHOT_H
#define SAAS_DRIVER_LIBVIRT_SNAPSHOT_H

#include "driver/libvirt/libvirt_driver.h"

/* ---- snapshots (snapshot.c) ------------------------------------------------------------------ */

/*
 * The format of a snapshot's description. 1: the first, whose ram_block
 * is not to be trusted (read from a column of HMP's `info ramblock`); its
 * stream may hold QEMU's own block "pc.ram", from before every VM's RAM was
 * the backend MEM_ID. 2: ram_block is the block its stream holds. Both are
 * read; a restore refuses a snapshot whose RAM block is not MEM_ID, reading
 * a format 1 stream for it (saas__lv_snapshot_check, saas__lv_state_ram_block).
 */
#define SNAPSHOT_FORMAT 2
#define SNAPSHOT_FORMAT_MIN 1
#define SNAPSHOT_NAME_MAX 63
#define SNAPSHOT_CHAIN_MAX 64            /* backing files followed from one disk, at most */
#define SNAPSHOT_VOLUME_MAX 127          /* a kept disk volume's name, at most (bytes) */

/* A snapshot's description (its snapshot.json). */
struct saas__lv_snapshot {
	unsigned int format;             /* as read (SNAPSHOT_FORMAT_MIN..SNAPSHOT_FORMAT); written: SNAPSHOT_FORMAT */
	char source[SAAS_ID_MAX + 1];    /* the VM it was taken of */
	char image[64];
	char *host_key;                  /* the guest's, as its memory holds it (a rebuilt image has another) */
	unsigned int vcpus, memory_mib;  /* memory as the domain had it */
	unsigned int disk_gb;            /* 0: no disk (an initramfs image) */
	char ram_block[64];              /* the guest RAM's block name in the migration stream */
	int64_t state_bytes, disk_bytes; /* on storage */
	char **chain;                    /* the frozen disk's backing files, nearest first (NULL-terminated; may be NULL) */
	bool control;                    /* the VM had the control port: its restores have it too ("control", absent: no) */
	/*
	 * Its state was saved with x-ignore-shared on, which its restores must set
	 * too ("ignore_shared", absent: no): a fork's, whose RAM is the file "ram"
	 * its children map, or was kept in the state when the split failed.
	 */
	bool ignore_shared;
	/*
	 * On a VM host: the pool's volume that is the paused or forked VM's
	 * disk, kept as it was when its memory was saved ("disk_volume", absent:
	 * none; a name saas__lv_disk_volume_ok takes). Its resume and a fork's
	 * children run on new overlays of it.
	 */
	char disk_volume[SNAPSHOT_VOLUME_MAX + 1];
};

/* Is name a disk volume a snapshot may keep (1 to SNAPSHOT_VOLUME_MAX of [a-z0-9._-], ending ".qcow2")? Pure. */
bool saas__lv_disk_volume_ok(const char *name);

/* Is name one the core may choose (1 to SNAPSHOT_NAME_MAX of [a-z0-9-])? */
bool saas__lv_snapshot_name_ok(const char *name);
/* The description as JSON text (free with free()), and read back (SAAS_EINVAL saying what is wrong). Pure. */
char *saas__lv_snapshot_json(const struct saas__lv_snapshot *s);
int saas__lv_snapshot_parse(const char *text, struct saas__lv_snapshot *s);
/*
 * The disk volume a description (text; NULL: none) names, read as
 * saas__lv_snapshot_parse reads it but alone, into out: "" for none, and
 * SAAS_EINVAL ("" too) for something other than a volume's name. A
 * description parse refuses (another cluster's of a format to come) still
 * says which disk it keeps. Pure.
 */
int saas__lv_snapshot_disk_volume(const char *text, char out[SNAPSHOT_VOLUME_MAX + 1]);
void saas__lv_snapshot_clear(struct saas__lv_snapshot *s);
/*
 * Can a VM of this driver load snapshot snap (described by s)? SAAS_OK, or
 * SAAS_ENOTSUP saying why not (one saved before every VM's RAM had the
 * block MEM_ID). Pure.
 */
int saas__lv_snapshot_check(const struct saas__lv_snapshot *s, const char *snap);
/* How much of a migration stream's head is searched for its RAM block's name. */
#define STATE_HEAD_MAX 65536
/*
 * The guest RAM's block that the migration stream at path holds: MEM_ID or
 * "pc.ram", found framed as QEMU writes it in the stream's first
 * STATE_HEAD_MAX bytes; "" when neither is there.
 */
void saas__lv_state_ram_block(const char *path, char *out, size_t len);
/* The same in the n bytes of a stream's head at head (a remote host's state, read through libvirt). Pure. */
void saas__lv_ram_block_in(const char *head, size_t n, char *out, size_t len);

/*
 * The sealed RAM of the fork's snapshot in dir, as a new descriptor the caller
 * closes (saas__lv_memfd_get): SAAS_ENOTFOUND when its RAM is in its state
 * (a pause's, or a fork's whose split failed). *pending: it is still being
 * split off the stream (the fork has just returned), and the descriptor is
 * of the memory being filled, not sealed yet: a VM may map it (privately)
 * and start, but its state goes in only after saas__lv_snapshot_split_wait.
 */
int saas__lv_snapshot_ram(struct drv *d, const char *dir, uint64_t bytes, int *fd, bool *broken, bool *pending);
/*
 * Wait until the split of the RAM of the fork's snapshot in dir has ended:
 * SAAS_OK when its memory is whole and sealed (what a VM that mapped it while
 * pending has now), 1 when the split failed and the RAM is in the state (such
 * a VM must be started again, loading it), an error when the driver closes.
 */
int saas__lv_snapshot_split_wait(struct drv *d, const char *dir);
/* Wait for the splits of a fork's RAM still running to end: snapshot snap's, or every one (snap NULL, at close). */
void saas__lv_snapshot_splits_join(struct drv *d, const char *snap);

/* The driver table's snapshot_expect (version 16): a fork's snapshot is coming (on 1), or not after all (on 0). */
int saas__lv_snapshot_expect(void *ctx, const char *snap, int on);
/*
 * Before a restore of snap: wait while a fork said it is coming
 * (snapshot_expect) and has not put it in place. true: it is in place, put
 * there by this driver's fork still under way, whose files are not all
 * written yet (its "saving" mark); false: no fork of it is under way here.
 */
bool saas__lv_snapshot_fork_wait(struct drv *d, const char *snap);

/* The driver table's version 4 slots. */
int saas__lv_vm_snapshot(void *ctx, const char *name, const char *snap, int keep, int64_t *bytes);
int saas__lv_vm_restore(void *ctx, const saas_vm_spec *spec, const char *snap);
int saas__lv_snapshot_delete(void *ctx, const char *snap);
int saas__lv_snapshot_list(void *ctx, saas_name_fn fn, void *userdata);
/* The driver's snapshot_scan: a VM host's (host table's snap_scan); SAAS_ENOTSUP on this machine. */
int saas__lv_snapshot_scan(void *ctx, saas_snapshot_fn fn, void *userdata);
/*
 * What a fork or a pause cut short left of snapshot snap (its directory
 * snap.tmp), of VM vm (NULL: not known): with on_overlay (the VM runs on the
 * overlay the fork made, whose header names the snapshot's disk) the disk is
 * kept under the snapshot's name, marked deleted, to be collected once
 * nothing backs onto it; otherwise the directory and that overlay go.
 */
void saas__lv_snapshot_left(struct drv *d, const char *snap, const char *vm, bool on_overlay);
/*
 * At open: half-written snapshots recovered (their VM resumed if they left it
 * paused; see saas__lv_snapshot_left); deleted ones nobody uses any more collected.
 */
void saas__lv_snapshots_cleanup(struct drv *d);
/* Remove the snapshots whose deletion was asked and whose disk no VM or snapshot backs onto any more. */
void saas__lv_snapshots_collect(struct drv *d);

/* The backing files of the disk at path, nearest first, as a NULL-terminated array into s->chain. */
int saas__lv_snapshot_chain(const char *path, struct saas__lv_snapshot *s);

/* ---- the disk through QEMU (snapshot_disk.c) ---- */

/*
 * The VM's disk as QEMU has it: its top node's name, its file and its
 * virtual size. SAAS_ENOTFOUND for a VM without one (initramfs images).
 */
int saas__lv_snapdisk_top(virDomainPtr dom, char **node, char **file, uint64_t *size);
/* The image name in our metadata element ("" when it is not there or not a name), and whether it has the control port. */
void saas__lv_snapdisk_image(virDomainPtr dom, char *out, size_t len, bool *control);
/*
 * Freeze a running (paused) VM's top overlay `top` (QEMU's node `node`): the
 * VM goes on over a new overlay `next` whose backing file is `base`, the
 * snapshot's path for the frozen disk. QEMU opens `next` as it is
 * (mode existing), so its header keeps that name.
 */
int saas__lv_snapdisk_switch(struct drv *d, virDomainPtr dom, const char *node, const char *vmdir, const char *next,
                             const char *base, uint64_t size, unsigned int uid, const char *new_node);
/* Undo the name in the header of a switched VM's overlay: back onto its old top, when the snapshot failed. */
bool saas__lv_snapdisk_unswitch(struct drv *d, virDomainPtr dom, const char *name, const char *new_node, const char *top);
/*
 * Start merging into VM name's top overlay the snapshots' disks its chain
 * goes through, when there are more than `allowed` of them. Never fails the
 * caller: a chain left as it is stays valid, and the failure is logged.
 */
void saas__lv_snapdisk_flatten(struct drv *d, virDomainPtr dom, const char *name, size_t allowed);
/*
 * Wait for the VM's merge (disk_flatten) to end, and dismiss its job. A
 * merge that failed is logged: the chain it leaves is whole.
 */
int saas__lv_snapdisk_settle(struct drv *d, virDomainPtr dom, const char *name);
/*
 * Merge into VM name's top overlay every file of its chain above base (a
 * path of its chain), and wait for it: after it, the top backs onto base
 * and nothing between is read. A failure is an error (the chain stays whole).
 */
int saas__lv_snapdisk_pull(struct drv *d, virDomainPtr dom, const char *name, const char *base);

#endif
