/*
 * Internal: the per-VM uid allocator (uid.c); its state is d->cf.
 */
#ifndef SAAS_DRIVER_LIBVIRT_UID_H
#define SAAS_DRIVER_LIBVIRT_UID_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <libvirt/libvirt.h>

struct drv;

/* ---- per-VM uids (uid.c) --------------------------------------------------------------------- */

/* The uids of a range that VMs hold. Callers serialise (d->mu). */
struct saas__lv_uids {
	unsigned int first, count;
	unsigned int next;               /* where the next search starts: a uid just freed is the last reused */
	unsigned char *used;             /* count flags */
};

/* Confinement's part of the driver's state (d->cf): set at open, but uids (under d->mu). */
struct saas__lv_confine {
	bool confined;                   /* each VM's QEMU runs under its own uid (uids) */
	bool stage_images;               /* confined, and QEMU's uids cannot reach d->images (image.c) */
	struct saas__lv_uids uids;       /* under mu */
	gid_t guest_gid;                 /* confined: every VM's QEMU group (0: each VM's uid as its gid) */
	int uids_mode;                   /* enum uidcfg, from driver_config */
	unsigned int uid_first, uid_count;
};

int saas__lv_uids_init(struct saas__lv_uids *u, unsigned int first, unsigned int count);
void saas__lv_uids_clear(struct saas__lv_uids *u);
/* A free uid of the range; SAAS_EBUSY when every one is held. */
int saas__lv_uids_take(struct saas__lv_uids *u, unsigned int *uid);
/* Hold a uid a running VM already has (adoption); false when it is outside the range. */
bool saas__lv_uids_mark(struct saas__lv_uids *u, unsigned int uid);
/* How many uids of the range are free. */
unsigned int saas__lv_uids_free(const struct saas__lv_uids *u);
/* Let a uid go (0 and uids outside the range are ignored). */
void saas__lv_uids_put(struct saas__lv_uids *u, unsigned int uid);
/*
 * A free uid of the range that no process runs as: the owners of proc's
 * numeric entries (a /proc tree; a fake one in the tests) are skipped, not
 * held. SAAS_EBUSY when none is left.
 */
int saas__lv_uids_take_unused(struct saas__lv_uids *u, const char *proc, unsigned int *uid);

#endif
