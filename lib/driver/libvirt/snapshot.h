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
};

/* Is name one the core may choose (1 to SNAPSHOT_NAME_MAX of [a-z0-9-])? */
bool saas__lv_snapshot_name_ok(const char *name);
/* The description as JSON text (free with free()), and read back (SAAS_EINVAL saying what is wrong). Pure. */
char *saas__lv_snapshot_json(const struct saas__lv_snapshot *s);
int saas__lv_snapshot_parse(const char *text, struct saas__lv_snapshot *s);
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

/* The driver table's version 4 slots. */
int saas__lv_vm_snapshot(void *ctx, const char *name, const char *snap, int keep, int64_t *bytes);
int saas__lv_vm_restore(void *ctx, const saas_vm_spec *spec, const char *snap);
int saas__lv_snapshot_delete(void *ctx, const char *snap);
int saas__lv_snapshot_list(void *ctx, saas_name_fn fn, void *userdata);
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

#endif
