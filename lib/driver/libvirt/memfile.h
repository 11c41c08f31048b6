/*
 * Internal: template memory mapped by clones (memfile.c).
 */
#ifndef SAAS_DRIVER_LIBVIRT_MEMFILE_H
#define SAAS_DRIVER_LIBVIRT_MEMFILE_H

#include "driver/libvirt/libvirt_driver.h"

/* ---- template memory mapped by clones (memfile.c) -------------------------------------------- */

/* A process holding a memfd as the VM's QEMU uid, so that QEMU can open it by path. */
struct saas__lv_holder {
	pid_t pid;
	int go;                          /* closing it ends the holder */
	char path[48];                   /* /proc/PID/fd/3 */
};

/* Names of the memfds (/proc/PID/fd shows memfd:NAME): a template's RAM, a fork's snapshot's. */
#define MEMFD_TEMPLATE "aas-template-ram"
#define MEMFD_SNAPSHOT "aas-snapshot-ram"
/* A new memfd named name of bytes (holes), sealable, for a template VM's RAM or a snapshot's. */
int saas__lv_memfd_new(const char *name, uint64_t bytes, int *out);
/* Seal it for good: no write, no shared writable mapping, no hole punched, no resize, no unsealing. */
int saas__lv_memfd_seal(int fd);
/* Does fd carry every one of those seals? */
bool saas__lv_memfd_sealed(int fd);
/* The memfd's bytes into a new file at path (0600, sparse where the memory is). */
int saas__lv_memfd_save(int fd, uint64_t bytes, const char *path);
/* A sealed memfd named name of the file at path, which must hold exactly bytes. */
int saas__lv_memfd_load(const char *name, const char *path, uint64_t bytes, int *out);
/*
 * Where the driver holds one sealed memory, found under d->mu: the slot of
 * key (*slot -1: not loaded yet), or NULL when the driver knows no such thing.
 */
typedef int *(*saas__lv_memfd_slot_fn)(struct drv *d, const char *key);
/*
 * The sealed RAM kept as the file "ram" in dir (a mapped template's, a fork's
 * snapshot's), as a new descriptor the caller closes: the one the driver holds
 * in its slot, loaded from the file (as a memfd named name) on first use.
 * SAAS_ENOTFOUND when dir has no "ram" (its RAM is loaded from its state); an
 * error otherwise (*broken: the file is bad). what names it in errors.
 */
int saas__lv_memfd_get(struct drv *d, const char *dir, const char *name, uint64_t bytes, saas__lv_memfd_slot_fn slot,
                       const char *key, const char *what, int *fd, bool *broken);
/*
 * Start a holder of memfd running as uid:gid (uid 0: the engine's own), with
 * nothing else of the engine's; h->path is where QEMU of that uid opens it.
 * Stop it once QEMU has started. saas__lv_holder_stop is idempotent.
 */
int saas__lv_holder_start(struct saas__lv_holder *h, int memfd, uid_t uid, gid_t gid);
void saas__lv_holder_stop(struct saas__lv_holder *h);
/* Can this engine hand QEMU a memfd under QEMU's uid? Why not, in why. */
bool saas__lv_mapped_possible(const struct drv *d, char *why, size_t why_len);
/* The host's MemAvailable in MiB (0 when unknown). */
uint64_t saas__lv_mem_available_mib(void);

/* Default and largest min_free_memory_mb (driver_config). */
#define MIN_FREE_MEMORY_MB_DEFAULT 1024u
#define MIN_FREE_MEMORY_MB_MAX (16u << 20)

/*
 * May a VM of need_mb start on a host with avail_mib available, keeping
 * reserve_mb? SAAS_OK, or SAAS_EBUSY saying so. avail_mib 0 (unknown) passes.
 */
int saas__lv_memory_room(uint64_t avail_mib, unsigned int need_mb, unsigned int reserve_mb);

/*
 * The same for a VM of spec's shape about to start on this driver's host:
 * checked on the machine the engine runs on only (a remote host's memory is
 * its placement's business, saas/hosts.h).
 */
int saas__lv_memory_check(struct drv *d, const saas_vm_spec *spec);

#endif
