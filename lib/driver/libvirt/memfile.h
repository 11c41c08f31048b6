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

/* A new memfd of bytes (holes), sealable, for a template VM's RAM. */
int saas__lv_memfd_new(uint64_t bytes, int *out);
/* Seal it for good: no write, no shared writable mapping, no hole punched, no resize, no unsealing. */
int saas__lv_memfd_seal(int fd);
/* Does fd carry every one of those seals? */
bool saas__lv_memfd_sealed(int fd);
/* The memfd's bytes into a new file at path (0600, sparse where the memory is). */
int saas__lv_memfd_save(int fd, uint64_t bytes, const char *path);
/* A sealed memfd of the file at path, which must hold exactly bytes. */
int saas__lv_memfd_load(const char *path, uint64_t bytes, int *out);
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
