/*
 * Internal: one spare, an entry of d->spare.list (spare.h): spare.c's, and
 * its unit test's (unit.libvirt puts spares in a driver's list by hand).
 */
#ifndef SAAS_DRIVER_LIBVIRT_SPARE_ITEM_H
#define SAAS_DRIVER_LIBVIRT_SPARE_ITEM_H

#include <stdbool.h>
#include <stdint.h>

#include "driver/libvirt/launch.h"

enum { SPARE_MAKING, SPARE_READY, SPARE_TAKEN };

struct spare {
	char name[SAAS_ID_MAX + 1];      /* a sandbox id, made here: the create that takes it gets it */
	char key[33];                    /* its template */
	char image[64];
	int state;
	bool cancelled;                  /* SPARE_MAKING: destroyed meanwhile; its maker undoes it */
	bool egress;                     /* its egress rules are set */
	bool ehost;                      /* a VM host's: its policy is set in this server's egress end */
	bool loaded;                     /* its template's state loaded ahead (a clone that loads its memory) */
	int64_t warm_ms;                 /* its guest warmed ahead in that many ms (saas__lv_clone_warm); 0: not */
	bool code_warm;                  /* its code server among it (template_code.c) */
	int64_t until_ms;                /* a shared host's: its mark's end (SPARE_LEASE_MS), 0: unmarked */
	int64_t at[3];                   /* ms to its disk, to its domain, to its state in and warm-up (for the log) */
	uint64_t hold_mib;               /* what it is reckoned to hold: SPARE_COST_MIB, and its state when loaded ahead */
	int64_t begun_ms;                /* when its make began (saas__now_ms) */
	saas_vm_spec spec;               /* its shape; network NULL: the driver's default */
	struct launch l;                 /* its half-made clone: l.dom paused, l.uid, l.port, l.dir, l.tdir */
	char *tdir, *host_key;
	struct spare *next;
};
#endif
