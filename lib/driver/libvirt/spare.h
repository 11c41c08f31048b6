/*
 * Internal: spares (spare.c), clones' QEMUs started ahead by a thread of
 * their own so that a create finds its clone's first half done; and the
 * part of the driver's state that is theirs (d->spare).
 */
#ifndef SAAS_DRIVER_LIBVIRT_SPARE_H
#define SAAS_DRIVER_LIBVIRT_SPARE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "saas/sys/driver.h"
#include "driver/libvirt/spare_policy.h"

struct drv;
struct spare;

/* The spares' state in struct drv, under d->mu. */
struct saas__lv_spares {
	struct spare *list;
	unsigned int floor, ceiling;     /* spares=auto: SPARES_AUTO_FLOOR, SPARES_AUTO_MAX; spares=N: N, N */
	unsigned int quiet_floor;        /* spares=auto: spare_idle_count, from a quiet spell on; spares=N: 0 */
	int64_t quiet_ms;                /* spare_idle (0: off) */
	bool quiet_seen;                 /* a quiet spell was seen: quiet_floor holds */
	uint64_t budget_mib;             /* spare_memory_mb; 0 until spares_start works out auto */
	unsigned int creating;           /* creates and restores running: no spare is made meanwhile, */
	int64_t hold_until_ms;           /* nor before this (after one), unless creates come faster (plan.now) */
	int64_t retry_at_ms;             /* nor before this (after one found no uid or template for it: SAAS_EBUSY) */
	unsigned int make_ms;            /* how long a spare took to make, lately */
	uint64_t loaded_mib;             /* the state the last spare loaded ahead held (spare.c), 0: none loaded */
	uint64_t warm_mib;               /* SPARE_WARM_MIB when the last spare made was warmed, 0: not */
	unsigned int target;             /* the plan's last target (logged when it changes) */
	unsigned int waiting;            /* creates waiting in vm_take for a spare being made: none is warmed meanwhile */
	int64_t asks[SPARE_ASKS_MAX];    /* when creates asked for a spare (vm_take), oldest first */
	int64_t quiet_from;              /* the open, when it remembered templates asked for before it (spare_asked.c): */
	                                 /* a quiet spell counts from it until a create comes (0: none) */
	bool asked_dirty;                /* the templates asked for changed: asked.json to be written (spare_asked.c) */
	bool asked_writing;              /* a thread writes it (without mu) */
	size_t nasks;
	pthread_t threads[SPARE_MAKERS_MAX]; /* makers: one spare each at a time */
	unsigned int nthreads;
	pthread_cond_t cond;             /* with mu: signalled at a take, a create's end and close */
};

/*
 * Spares (spare.c): clones' QEMUs started ahead. saas__lv_take is the driver's
 * vm_take; saas__lv_spare_create makes VM spec->name from the spare a create
 * took under that name (SAAS_OK), or says there is none (1), or fails with
 * everything of it undone (the caller makes the VM the ordinary way).
 * saas__lv_spare_listed: a spare of that name exists (vm_list leaves it out);
 * saas__lv_spare_destroy: destroys it if so (true).
 */
int saas__lv_spares_start(struct drv *d);
void saas__lv_spares_stop(struct drv *d);
/* A VM being made (begin true) or made: no spare started meanwhile nor SPARE_HOLD_MS after (unless creates stream). */
void saas__lv_spares_busy(struct drv *d, bool begin);
int saas__lv_take(void *ctx, const saas_vm_spec *spec, char *name, size_t size);
int saas__lv_spare_create(struct drv *d, const saas_vm_spec *spec);
bool saas__lv_spare_listed(struct drv *d, const char *name);
/*
 * Is domain dom (named name) a spare, this driver's or, on a host other
 * engines share, another's whose mark stands (domain.h)? Listings and counts
 * leave spares out: no sandbox owns one yet, and it holds little memory (its
 * QEMU, and on a VM host its template's loaded state, within spare_memory_mb).
 */
bool saas__lv_spare_domain(struct drv *d, virDomainPtr dom, const char *name);
/*
 * What the spare named name is reckoned to hold (MiB): this driver's own as
 * its reckoning has it (its QEMU, and its loaded state), another engine's
 * (marked on a shared host) as this driver's next one would be.
 */
uint64_t saas__lv_spare_held_mib(struct drv *d, const char *name);
bool saas__lv_spare_destroy(struct drv *d, const char *name);

/* The maker's choices (spare.c's; unit.libvirt drives them on a driver made by hand). Under d->mu. */
struct tmpl;
/*
 * The template to make a spare for: of those ready, local, current (of their
 * image's build as it is now) and asked for since the driver opened (or
 * remembered from before it: spare_asked.c), and not
 * held back by a failure of their own (spare_retry_at_ms), the one with the
 * fewest spares not taken yet, and of those the one asked for last; none
 * once target are listed (taken ones count). Every such template has one
 * before any has two, so a target of 1 keeps one for the template asked for
 * last, and a larger one covers a burst of creates of one template.
 */
struct tmpl *saas__lv_spare_wanted_locked(struct drv *d, unsigned int target, int64_t now);
/*
 * A spare of template key failed (why: the error's message) at now: a
 * template no longer current is forgotten (no spare is made for it until a
 * create asks for it again) and true returned; a current one gets no spare
 * before its own backoff has passed (SPARE_BACKOFF_FIRST_MS, doubling up to
 * SPARE_BACKOFF_MAX_MS), which leaves the other templates' alone. Logged.
 */
bool saas__lv_spare_failed_locked(struct drv *d, const char *key, const char *why, int64_t now);
#endif
