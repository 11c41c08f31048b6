/*
 * Spares: a clone's QEMU started before the create that wants it.
 *
 * Under TCG the slowest part of a clone is starting its domain, before a byte
 * of the guest's state comes in: libvirt 9.0 reads the new QEMU's CPU model
 * one property at a time (some 400 QMP commands) and QEMU 7.2's monitor reads
 * its input one byte per main-loop turn, ~0.85 s in all of a 1.3-2 s clone. A
 * spare is that half done ahead (saas__lv_clone_start): its disk made, its
 * domain started paused with its template's RAM mapped, its uid, port and
 * egress rules taken, nothing of a guest running in it. A clone that loads
 * its memory instead (every clone on a VM host: a mapping needs the memory on
 * the machine that runs QEMU) gets its state poured in ahead too, the
 * longest part of it there (saas__lv_clone_restore; still paused). One of an
 * image with a code server also runs that server's run path once, its state
 * in, then is paused again (saas__lv_spare_code_warm): under TCG a clone's
 * QEMU translates each guest code path the first time it runs, which a
 * template cannot carry, and a first `1+1` paid for it. A create
 * without a network of its own takes one (lv_take: the spare's name becomes
 * the sandbox id) and finishes it (saas__lv_spare_create: the state in unless
 * it is, the guest let run, the fix-ups, the session). One that finds none
 * ready but one being made waits for it while it is due (lv_take says how
 * long), rather than making the same clone beside it.
 *
 * How many (spare_policy.c): spares=auto, the default, keeps as many as the
 * creates lately asked for want (the largest burst of the last ten minutes,
 * what a stream of creates uses up while one is made), at least one, at most
 * SPARES_AUTO_MAX; spares=N keeps N (0: none). Either way never more than the
 * memory budget holds (spare_memory_mb, auto: an eighth of the host's
 * memory within [256 MiB, 4 GiB], at SPARE_COST_MIB a spare and
 * SPARE_WARM_MIB more a warmed one) nor what the
 * host's available memory over min_free_memory_mb holds; spares over the
 * count (a burst forgotten, the host short) are destroyed. They go to the
 * templates creates asked for since the driver opened, or within the week
 * before it (remembered in the state directory: spare_asked.c), and still
 * current (of their image's build as it is now): each has one before any
 * has a second, the one asked for last first
 * (saas__lv_spare_wanted_locked). A template
 * replaced (its image rebuilt) or gone is forgotten: none is made for it
 * again.
 *
 * When: one per core at once (at most SPARE_MAKERS_MAX threads, each making
 * one at a time), woken at once by a take. After a lone create none is made
 * while it runs nor within SPARE_HOLD_MS after (its first commands need the
 * CPUs); when creates come faster than that hold and a make, the hold would
 * only make the next create wait, and spares are made at once. Never while
 * the host is short of memory for the guest's size nor with the last free
 * uid, and after a failure none of that template's again for a while that
 * doubles up to SPARE_BACKOFF_MAX_MS (other templates' go on). A spare costs
 * its QEMU's own memory (its guest's RAM is the template's, mapped, and
 * untouched until it runs), a uid and a port; no CPU. One loaded ahead holds
 * its template's state as well (or its whole RAM: spare_resident_mib): the
 * budget and the host's room reckon each at what the last one loaded held.
 *
 * A spare has no row: vm_list leaves spares out (the core's orphan sweep would
 * destroy them) until a create has taken one and makes it. A spare taken
 * still counts against `spares` until its create makes it or lets it go
 * (vm_destroy), so a caller that takes and never comes back cannot make the
 * driver start more. A spare whose template is no longer the current one
 * (its image rebuilt, the template broken or gone) is destroyed, never handed
 * out; all go at close. After a crash the next engine's orphan sweep destroys
 * them as VMs no sandbox owns.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libvirt/libvirt.h>

#include "driver/libvirt/domain.h"
#include "driver/libvirt/egress.h"
#include "driver/libvirt/egress_host.h"
#include "driver/libvirt/image.h"
#include "driver/libvirt/launch.h"
#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/memfile.h"
#include "driver/libvirt/spare_asked.h"
#include "driver/libvirt/spare_item.h"
#include "driver/libvirt/template.h"
#include "driver/libvirt/vm.h"

static struct spare *spare_unlink_locked(struct drv *d, struct spare *s)
{
	for (struct spare **p = &d->spare.list; *p; p = &(*p)->next)
		if (*p == s) {
			*p = s->next;
			s->next = NULL;
			break;
		}
	return s;
}

/*
 * A VM host's connection opened again since the spare was made (its
 * libvirtd restarted, or stopped answering for a while: host_remote.c) left
 * the spare's domain handle on the dead one: it is looked up again on the
 * current one, so that a take can use it and a destroy reaches it. NULL when
 * the domain is gone (or the host does not answer: the caller's next call
 * fails and says so).
 */
static void spare_dom_refresh(struct drv *d, struct spare *s)
{
	virDomainPtr dom;

	if (!s->l.dom || !d->host->may_vanish || d->host->check(d) < 0 ||
	    virDomainGetConnect(s->l.dom) == saas__lv_conn(d)) {
		saas__error_clear();
		return;
	}
	dom = virDomainLookupByName(saas__lv_conn(d), s->name);
	saas__error_clear();
	virDomainFree(s->l.dom);
	s->l.dom = dom;
}

/* Everything of a spare goes: its domain, directory, egress rules and uid. */
static void spare_free(struct drv *d, struct spare *s)
{
	if (!s)
		return;
	spare_dom_refresh(d, s);
	if (s->l.dom || s->l.dir)
		saas__lv_launch_undo(&s->l);
	if (s->egress)
		saas__lv_egress_vm_remove(d, s->name);
	if (s->ehost)
		saas__lv_ehost_remove(d->ehost, s->name);
	if (s->l.uid) {
		pthread_mutex_lock(&d->mu);
		saas__lv_uids_put(&d->cf.uids, s->l.uid);
		pthread_mutex_unlock(&d->mu);
	}
	free(s->tdir);
	free(s->host_key);
	free(s);
}

/* The template of key, ready, or NULL. Under d->mu. */
static struct tmpl *spare_template_locked(struct drv *d, const char *key)
{
	for (struct tmpl *t = d->tmpls; t; t = t->next)
		if (strcmp(t->key, key) == 0)
			return t->state == TMPL_READY ? t : NULL;
	return NULL;
}

/*
 * Is key the template a create of image in shape's size would clone now: of
 * the image's current build (its manifest as it is now: a rebuilt image has
 * another key), and ready? Under d->mu.
 */
static bool spare_key_current_locked(struct drv *d, const char *image, const saas_vm_spec *shape, const char *key)
{
	struct image *im = NULL;
	char now[33] = "";

	if (saas__lv_image_get(d, image, &im) < 0) {
		saas__error_clear();
		return false;
	}
	saas__lv_template_key(d, shape, im, now);
	return strcmp(now, key) == 0 && spare_template_locked(d, key);
}

/* Is s still what a create of its shape would clone? Under d->mu. */
static bool spare_current_locked(struct drv *d, const struct spare *s)
{
	return spare_key_current_locked(d, s->image, &s->spec, s->key);
}

/* Is t what a create of its image and shape would clone now (its image not rebuilt since, t ready)? Under d->mu. */
static bool spare_tmpl_current_locked(struct drv *d, const struct tmpl *t)
{
	saas_vm_spec shape = { .image = t->image, .vcpus = t->vcpus, .memory_mb = t->memory_mb, .disk_gb = t->disk_gb };

	return t->image[0] && spare_key_current_locked(d, t->image, &shape, t->key);
}

/*
 * What a spare's QEMU holds now (its resident memory as the host reads it,
 * MiB), 0 if it cannot say. A spare loaded ahead holds its state and what
 * QEMU's load touched: on a kernel that maps no shared zero page for a read
 * of fresh memory, that is the guest's whole RAM (QEMU 7.2 reads each zero
 * page it is sent to see whether to write it), not the few hundred MiB the
 * state holds.
 */
static uint64_t spare_resident_mib(virDomainPtr dom)
{
	virDomainMemoryStatStruct st[VIR_DOMAIN_MEMORY_STAT_NR];
	uint64_t kib = 0;
	int n = virDomainMemoryStats(dom, st, VIR_DOMAIN_MEMORY_STAT_NR, 0);

	for (int i = 0; i < n; i++)
		if (st[i].tag == VIR_DOMAIN_MEMORY_STAT_RSS)
			kib = st[i].val;
	saas__error_clear();
	return kib >> 10;
}

/*
 * Does a create wait for a spare being made (saas__lv_take)? Then it is a
 * burst, or a stream faster than the makes, and the spare goes to that
 * create at once: a warm-up (its guest's, its code server's) would hold the
 * create for what its own first steps do anyway, on the same CPUs, and do
 * the fix-ups twice. Running the guest ahead only pays when nobody waits.
 */
static bool spare_awaited(struct drv *d)
{
	bool awaited;

	pthread_mutex_lock(&d->mu);
	awaited = d->spare.waiting > 0;
	pthread_mutex_unlock(&d->mu);
	return awaited;
}

/*
 * Make one spare of template t's shape. Called without d->mu; s is already
 * listed as SPARE_MAKING, so a destroy of its name meanwhile marks it
 * cancelled instead of touching it. Returns SAAS_OK with s ready, or an error
 * with s undone (the caller unlinks and frees it).
 */
static int spare_make(struct drv *d, struct spare *s)
{
	saas_vm_network fallback;
	const saas_vm_network *net;
	struct image *im = NULL;
	struct timespec t0;
	int rc;

	if ((rc = saas__lv_net_admit(d, &s->spec, &fallback, &net)) < 0)
		return rc;
	pthread_mutex_lock(&d->mu);
	rc = saas__lv_image_get(d, s->image, &im);
	if (rc == SAAS_OK && !(s->host_key = saas__strdup(im->host_key)))
		rc = SAAS_ENOMEM;
	if (rc == SAAS_OK) {
		struct tmpl *t = spare_template_locked(d, s->key);
		/* Its directory here, or its volumes' stem on a VM host. */
		if (!t)
			rc = saas__error(SAAS_EBUSY, SAAS_ERRCLASS_DRIVER, 0, "template %s is not ready", s->key);
		else if (!(s->tdir = d->host->template_place(d, t)))
			rc = SAAS_ENOMEM;
	}
	/* A spare never takes the last free uid: a create with a network of its own needs one. */
	if (rc == SAAS_OK && d->cf.confined)
		rc = saas__lv_uids_free(&d->cf.uids) < 2
		             ? saas__error(SAAS_EBUSY, SAAS_ERRCLASS_DRIVER, 0, "one uid left: kept for a create")
		             : saas__lv_uid_take(d, &s->l.uid);
	pthread_mutex_unlock(&d->mu);
	if (rc < 0)
		return rc;
	/* Its rules in place before its QEMU opens a socket, as for any VM. */
	if (s->l.uid && d->egress) {
		if ((rc = saas__lv_egress_vm_set(d, s->name, s->l.uid, net, net->mode == SAAS_NET_ISOLATED)) < 0)
			return rc;
		s->egress = true;
	}
	/*
	 * A VM host's guest gets its policy in this server's end when taken
	 * (spare_create), before it runs: until then its egress is nobody's,
	 * and the keeper that reopens lost channels does not know it.
	 */
	/* Other engines list a shared host's VMs too: marked, theirs leave it out while it stands. */
	if (d->host->shared_templates)
		s->l.spare_until_ms = s->until_ms = saas__now_ms() + SPARE_LEASE_MS;
	s->l.d = d;
	s->l.spec = &s->spec;
	s->l.im = im;
	s->l.host_key = s->host_key;
	s->l.internet = net->mode != SAAS_NET_ISOLATED;
	s->l.policy = false;
	s->l.tdir = s->tdir;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = saas__lv_clone_start(&s->l, &t0, s->at);
	/*
	 * A clone that loads its memory (a VM host's, or one machine's without
	 * mapped templates) gets its state now, while no create waits: that
	 * is the longest part of such a clone (a host's template state crosses
	 * the network twice, saas__lv_vmhost_tpl_restore). It then holds that
	 * memory until taken, which its reckoning counts.
	 */
	if (rc == SAAS_OK && s->l.mem != LV_MEM_PRIVATE && (rc = saas__lv_clone_restore(&s->l, &t0, d->boot_timeout_ms)) == SAAS_OK) {
		uint64_t rss = spare_resident_mib(s->l.dom);
		s->hold_mib = SPARE_COST_MIB + (((uint64_t)s->l.state_bytes + (1u << 20) - 1) >> 20);
		if (rss > s->hold_mib)
			s->hold_mib = rss; /* what it holds, not what its state would need */
		s->loaded = true;
	}
	s->at[2] = saas__ms_since(&t0);
	/*
	 * Its guest let run once, paused again (saas__lv_clone_warm): its
	 * fix-ups and a first command, and an image with a code server its run
	 * path too (a clone's first `1+1` pays for it otherwise), in this QEMU,
	 * which under TCG translates each guest code path the first time it
	 * runs. Neither while a create waits for a spare (spare_awaited),
	 * asked again before the code server's: one may come meanwhile.
	 */
	if (rc == SAAS_OK && !spare_awaited(d) &&
	    (rc = d->spare_warm ? saas__lv_clone_warm(&s->l, &t0, d->boot_timeout_ms) : 0) >= 0) {
		bool warm = rc > 0;
		if ((rc = spare_awaited(d) ? 0 : saas__lv_spare_code_warm(&s->l, &t0, d->boot_timeout_ms)) > 0)
			warm = s->code_warm = true;
		if (warm && rc >= 0) {
			s->warm_ms = saas__ms_since(&t0) - s->at[2];
			s->at[2] += s->warm_ms;
			s->hold_mib = (s->loaded ? s->hold_mib : SPARE_COST_MIB) + SPARE_WARM_MIB;
		}
		if (rc > 0)
			rc = SAAS_OK;
	}
	if (rc < 0)
		saas__lv_clone_undo(&s->l, rc);
	return rc;
}

struct tmpl *saas__lv_spare_wanted_locked(struct drv *d, unsigned int target, int64_t now)
{
	struct tmpl *best = NULL;
	unsigned int live = 0, best_has = 0;

	for (struct spare *s = d->spare.list; s; s = s->next)
		live++;
	if (live >= target)
		return NULL;
	for (struct tmpl *t = d->tmpls; t; t = t->next) {
		unsigned int has = 0;
		if (t->state != TMPL_READY || !t->asked_ms || !t->image[0] || now < t->spare_retry_at_ms)
			continue;
		for (struct spare *s = d->spare.list; s; s = s->next)
			has += s->state != SPARE_TAKEN && strcmp(s->key, t->key) == 0;
		if (best && (has > best_has || (has == best_has && t->asked_ms <= best->asked_ms)))
			continue;
		/* A template its image's rebuild replaced: every spare of it would be destroyed as soon as made. */
		if (!spare_tmpl_current_locked(d, t))
			continue;
		best = t;
		best_has = has;
	}
	return best;
}

bool saas__lv_spare_failed_locked(struct drv *d, const char *key, const char *why, int64_t now)
{
	struct tmpl *t;
	unsigned int backoff_ms;
	char said[512];

	/* A copy: why may be the thread's last error, which the image's look-up below may replace. */
	saas__strlcpy(said, why, sizeof(said));
	why = said;
	for (t = d->tmpls; t; t = t->next)
		if (strcmp(t->key, key) == 0)
			break;
	if (!t || !spare_tmpl_current_locked(d, t)) {
		/* Until a create asks for it again (one can only if it is current again, rebuilt or found). */
		if (t)
			t->asked_ms = 0;
		saas__lv_log(d, SAAS_LOG_INFO, "no more VMs are started ahead for template %s: it is no longer current (its "
		             "image rebuilt, or the template replaced, broken or gone; its last start ahead: %s)", key, why);
		return true;
	}
	backoff_ms = t->spare_backoff_ms ? t->spare_backoff_ms : SPARE_BACKOFF_FIRST_MS;
	saas__lv_log(d, SAAS_LOG_WARN, "starting a VM ahead for template %s failed (%s); next try for it in %u s", key, why,
	             backoff_ms / 1000);
	t->spare_retry_at_ms = now + backoff_ms;
	t->spare_backoff_ms = backoff_ms * 2 > SPARE_BACKOFF_MAX_MS ? SPARE_BACKOFF_MAX_MS : backoff_ms * 2;
	return false;
}

/*
 * What the next spare is reckoned to hold: its QEMU, the state the last one
 * loaded ahead (if so), and what a warm-up adds (if the last was warmed). Under d->mu.
 */
static uint64_t spare_cost_locked(struct drv *d)
{
	return SPARE_COST_MIB + d->spare.loaded_mib + d->spare.warm_mib;
}

/*
 * The plan for now (spare_policy.c), from the creates asked lately and the
 * bounds; room_mib: the host's available memory over what it keeps, read by
 * the caller without the lock (UINT64_MAX: not known). Logs the target when
 * it changes. Under d->mu.
 */
static void spare_plan_locked(struct drv *d, uint64_t room_mib, struct saas__lv_spare_plan *plan)
{
	uint64_t held = 0;
	struct saas__lv_spare_bounds b = {
		.floor = d->spare.floor,
		.quiet_floor = d->spare.quiet_floor,
		.quiet_ms = d->spare.quiet_ms,
		.quiet_seen = d->spare.quiet_seen,
		.quiet_from = d->spare.quiet_from,
		.ceiling = d->spare.ceiling,
		.budget_mib = d->spare.budget_mib,
		.spare_mib = spare_cost_locked(d),
		.room_mib = room_mib,
		.make_ms = d->spare.make_ms,
		.hold_ms = SPARE_HOLD_MS,
	};

	/* What the spares listed hold is theirs to keep: the room is what is available and that. */
	for (struct spare *s = d->spare.list; s; s = s->next)
		held += s->hold_mib;
	if (room_mib != UINT64_MAX)
		b.room_mib = room_mib + held;
	saas__lv_spare_plan(plan, &b, d->spare.asks, d->spare.nasks, saas__now_ms());
	if (plan->quiet && !d->spare.quiet_seen) {
		d->spare.quiet_seen = true;
		if (d->spare.quiet_floor > d->spare.floor)
			saas__lv_log(d, SAAS_LOG_INFO, "no create for %lld s: at least %u VMs started ahead from now on, for the "
			             "next burst (spare_idle, spare_idle_count)", (long long)(d->spare.quiet_ms / 1000),
			             d->spare.quiet_floor);
	}
	if (plan->target != d->spare.target) {
		saas__lv_log(d, SAAS_LOG_INFO, "VMs started ahead: %u wanted (was %u; the last ten minutes' largest burst %u, "
		             "%u for the last minute's rate, at least %u%s, at most %u, %llu MiB budget at %u MiB each)",
		             plan->target, d->spare.target, plan->burst, plan->rate_need, plan->floor,
		             plan->floor != d->spare.floor ? " since a quiet spell" : "", d->spare.ceiling,
		             (unsigned long long)d->spare.budget_mib, (unsigned int)b.spare_mib);
		d->spare.target = plan->target;
	}
}

/* A spare over the target, ready and no create's: the one of the template with the most. Under d->mu. */
static struct spare *spare_extra_locked(struct drv *d, unsigned int target)
{
	struct spare *extra = NULL;
	unsigned int live = 0, extra_has = 0;

	for (struct spare *s = d->spare.list; s; s = s->next)
		live++;
	if (live <= target)
		return NULL;
	for (struct spare *s = d->spare.list; s; s = s->next) {
		unsigned int has = 0;
		if (s->state != SPARE_READY)
			continue;
		for (struct spare *o = d->spare.list; o; o = o->next)
			has += o->state != SPARE_TAKEN && strcmp(o->key, s->key) == 0;
		if (!extra || has > extra_has) {
			extra = s;
			extra_has = has;
		}
	}
	return extra;
}

static void *spare_main(void *arg)
{
	struct drv *d = arg;

	pthread_mutex_lock(&d->mu);
	while (!closing(d)) {
		struct spare *stale = NULL, *s, *next;
		struct saas__lv_spare_plan plan;
		struct tmpl *t = NULL;
		struct timespec ts;
		uint64_t avail, room = UINT64_MAX;
		int64_t now, wait_ms = SPARE_CHECK_MS;
		bool freed;

		pthread_mutex_unlock(&d->mu);
		/* 0: the host could not say (saas__lv_memory_room takes it so too). */
		if ((avail = d->host->mem_available_mib(d)) != 0)
			room = avail > d->min_free_memory_mb ? avail - d->min_free_memory_mb : 0;
		pthread_mutex_lock(&d->mu);
		if (closing(d))
			break;
		/* The templates asked for changed: written for the next start, the lock let go meanwhile. */
		if (d->spare.asked_dirty && !d->spare.asked_writing) {
			saas__lv_asked_write_locked(d);
			if (closing(d))
				break;
		}
		now = saas__now_ms();
		spare_plan_locked(d, room, &plan);

		/* Spares no create may have any more: out of the list here, destroyed below without the lock. */
		for (s = d->spare.list; s; s = next) {
			next = s->next;
			if (s->state == SPARE_READY && !spare_current_locked(d, s)) {
				saas__lv_log(d, SAAS_LOG_INFO, "VM %s, started ahead, is of an outdated template; destroying it",
				             s->name);
				spare_unlink_locked(d, s)->next = stale;
				stale = s;
			} else if (s->state == SPARE_READY && s->until_ms && now > s->until_ms - SPARE_LEASE_MARGIN_MS) {
				/* Its mark ends soon: another engine's sweep would then take it for an orphan. */
				saas__lv_log(d, SAAS_LOG_INFO, "VM %s, started ahead, has stood its %d minutes; replacing it",
				             s->name, SPARE_LEASE_MS / 60000);
				spare_unlink_locked(d, s)->next = stale;
				stale = s;
			}
		}
		/* Over the plan's count: one goes per turn (the lock is let go for its destroy). */
		if (!stale && (s = spare_extra_locked(d, plan.target)) != NULL) {
			saas__lv_log(d, SAAS_LOG_INFO, "VM %s, started ahead, is one more than the %u wanted; destroying it",
			             s->name, plan.target);
			stale = spare_unlink_locked(d, s);
		}
		if (!stale && now >= d->spare.retry_at_ms) {
			if (saas__lv_spare_may_begin(&plan, d->spare.creating, d->spare.nthreads, now, d->spare.hold_until_ms))
				t = saas__lv_spare_wanted_locked(d, plan.target, now);
			else if (!d->spare.creating && d->spare.hold_until_ms - now < wait_ms)
				wait_ms = d->spare.hold_until_ms - now; /* not a second late after the hold */
		}
		s = t ? calloc(1, sizeof(*s)) : NULL;
		if (s && saas__id_new(s->name, "sbx-", 20) < 0) {
			free(s);
			s = NULL;
		}
		if (s) {
			saas__strlcpy(s->key, t->key, sizeof(s->key));
			saas__strlcpy(s->image, t->image, sizeof(s->image));
			s->spec.name = s->name;
			s->spec.image = s->image;
			s->spec.vcpus = t->vcpus;
			s->spec.memory_mb = t->memory_mb;
			s->spec.disk_gb = t->disk_gb;
			s->state = SPARE_MAKING;
			s->begun_ms = now;
			s->hold_mib = spare_cost_locked(d);
			s->next = d->spare.list;
			d->spare.list = s;
		}
		pthread_mutex_unlock(&d->mu);
		freed = stale != NULL;
		while (stale) {
			next = stale->next;
			spare_free(d, stale);
			stale = next;
		}
		if (s) {
			/* The host short of memory for it is no failure: the next turn looks again. */
			char loaded[96] = "", warmed[64] = "", key[33] = "";
			int rc = saas__lv_memory_check(d, &s->spec);
			if (rc == SAAS_OK)
				rc = spare_make(d, s);
			pthread_mutex_lock(&d->mu);
			if (rc == SAAS_OK && !s->cancelled && !closing(d)) {
				/* Said once it can be taken: whoever reads the line may create at once. */
				s->state = SPARE_READY;
				for (struct tmpl *o = d->tmpls; o; o = o->next)
					if (strcmp(o->key, s->key) == 0)
						o->spare_backoff_ms = 0;
				/* The rate's need is counted in makes: a moving mean of the last few. */
				d->spare.make_ms = (unsigned int)((3 * (int64_t)d->spare.make_ms + s->at[2]) / 4);
				d->spare.warm_mib = s->warm_ms ? SPARE_WARM_MIB : 0;
				if (s->warm_ms)
					snprintf(warmed, sizeof(warmed), ", its %s warmed in %lld ms", s->code_warm ? "code server" : "guest",
					         (long long)s->warm_ms);
				if (s->loaded) {
					d->spare.loaded_mib = s->hold_mib - SPARE_COST_MIB - (s->warm_ms ? SPARE_WARM_MIB : 0);
					snprintf(loaded, sizeof(loaded), ", state %lld ms: %llu MiB loaded ahead, %llu MiB held",
					         (long long)(s->at[2] - s->at[1] - s->warm_ms),
					         (unsigned long long)(s->l.state_bytes >> 20), (unsigned long long)s->hold_mib);
				}
				saas__lv_log(d, SAAS_LOG_INFO, "VM %s started ahead for template %s (%s, %u vCPU, %u MiB) in %lld ms "
				             "(disk %lld ms, domain %lld ms%s%s)", s->name, s->key, s->image, s->spec.vcpus,
				             s->spec.memory_mb, (long long)s->at[2], (long long)s->at[0],
				             (long long)(s->at[1] - s->at[0]), loaded, warmed);
				s = NULL;
			} else {
				/*
				 * A failure holds back its own template's spares, not
				 * another's; one of a template no longer current
				 * forgets it. One that says the template is bad (its
				 * state or RAM not loaded) has the host look whether
				 * its files are still there (template_lost).
				 */
				if (rc < 0 && rc != SAAS_EBUSY && !closing(d)) {
					if (!saas__lv_spare_failed_locked(d, s->key, saas_error_last()->message, saas__now_ms()) &&
					    s->l.template_bad)
						saas__strlcpy(key, s->key, sizeof(key));
				} else if (rc == SAAS_EBUSY) {
					d->spare.retry_at_ms = saas__now_ms() + SPARE_BACKOFF_FIRST_MS;
				}
				spare_unlink_locked(d, s);
			}
			pthread_cond_broadcast(&d->spare.cond); /* a create waiting for it (lv_take) looks again */
			pthread_mutex_unlock(&d->mu);
			saas__error_clear();
			spare_free(d, s); /* NULL when it is ready */
			if (key[0])
				d->host->template_lost(d, key);
			pthread_mutex_lock(&d->mu);
			continue;
		}
		pthread_mutex_lock(&d->mu);
		if (closing(d))
			break;
		if (freed)
			continue; /* the next turn at once: more may be over the count, or one wanted */
		saas__deadline(&ts, CLOCK_MONOTONIC, wait_ms > 0 ? wait_ms : 1);
		pthread_cond_timedwait(&d->spare.cond, &d->mu, &ts);
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

void saas__lv_spares_busy(struct drv *d, bool begin)
{
	pthread_mutex_lock(&d->mu);
	if (begin) {
		d->spare.creating++;
	} else {
		d->spare.creating--;
		d->spare.hold_until_ms = saas__now_ms() + SPARE_HOLD_MS;
		pthread_cond_broadcast(&d->spare.cond); /* the makers wait for the hold's end, not a turn more */
	}
	pthread_mutex_unlock(&d->mu);
}

int saas__lv_spares_start(struct drv *d)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	unsigned int makers = saas__lv_spare_makers(sysconf(_SC_NPROCESSORS_ONLN));
	int rc;

	if (!d->spare.ceiling || !d->templates || !d->host->spares)
		return SAAS_OK;
	if (!d->spare.budget_mib) {
		/* An eighth of the memory of the host they run on: a VM host's as its libvirtd says, if it answers. */
		uint64_t mib = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page >> 20 : 0;
		virNodeInfo info;
		if (!d->host->local_memory && d->host->check(d) == SAAS_OK &&
		    virNodeGetInfo(saas__lv_conn(d), &info) == 0 && info.memory)
			mib = info.memory >> 10; /* libvirt gives KiB */
		saas__error_clear();
		d->spare.budget_mib = saas__lv_spare_budget_auto(mib);
	}
	d->spare.make_ms = SPARE_MAKE_MS_FIRST;
	for (unsigned int i = 0; i < makers; i++) {
		if ((rc = pthread_create(&d->spare.threads[i], NULL, spare_main, d)) != 0) {
			/* Those started are joined at close (spares_stop), which the failed open runs too. */
			if (d->spare.nthreads)
				break;
			return saas__error(SAAS_ENOMEM, SAAS_ERRCLASS_OS, rc, "cannot start the thread that starts VMs ahead");
		}
		d->spare.nthreads++;
	}
	return SAAS_OK;
}

/* At close (d->closing set): the thread joined, then every spare destroyed, taken or not. */
void saas__lv_spares_stop(struct drv *d)
{
	pthread_mutex_lock(&d->mu);
	pthread_cond_broadcast(&d->spare.cond);
	pthread_mutex_unlock(&d->mu);
	for (unsigned int i = 0; i < d->spare.nthreads; i++)
		pthread_join(d->spare.threads[i], NULL);
	d->spare.nthreads = 0;
	/* A change to the templates asked for that no thread wrote yet. */
	pthread_mutex_lock(&d->mu);
	saas__lv_asked_write_locked(d);
	pthread_mutex_unlock(&d->mu);
	while (d->spare.list) {
		struct spare *s = d->spare.list;
		d->spare.list = s->next;
		spare_free(d, s);
	}
}

/* Is s of the shape spec asks for (image, vCPUs, memory, disk)? */
static bool spare_fits(const struct spare *s, const saas_vm_spec *spec)
{
	return strcmp(s->image, spec->image) == 0 && s->spec.vcpus == spec->vcpus &&
	       s->spec.memory_mb == spec->memory_mb && s->spec.disk_gb == spec->disk_gb;
}

/*
 * The spare a create of spec may take now (READY), or else the one of its
 * shape furthest on in its make (*making). Under d->mu.
 */
static struct spare *spare_find_locked(struct drv *d, const saas_vm_spec *spec, struct spare **making)
{
	struct spare *s;

	*making = NULL;
	for (s = d->spare.list; s; s = s->next) {
		if (s->state == SPARE_READY && spare_fits(s, spec) && spare_current_locked(d, s))
			break;
		if (s->state == SPARE_MAKING && !s->cancelled && spare_fits(s, spec) &&
		    (!*making || s->begun_ms < (*making)->begun_ms))
			*making = s;
	}
	return s;
}

int saas__lv_take(void *ctx, const saas_vm_spec *spec, char *name, size_t size)
{
	struct drv *d = ctx;
	struct spare *s, *making = NULL;
	int64_t t0 = saas__now_ms(), until = 0;
	char waited[SAAS_ID_MAX + 1] = "";

	if (spec->network || size <= strlen("sbx-") + 20)
		return 0;
	pthread_mutex_lock(&d->mu);
	/* Every create that could take one is a demand the plan counts, whether one is ready or not. */
	if (d->spare.nasks == SPARE_ASKS_MAX)
		memmove(d->spare.asks, d->spare.asks + 1, sizeof(d->spare.asks[0]) * --d->spare.nasks);
	d->spare.asks[d->spare.nasks++] = t0;
	pthread_cond_broadcast(&d->spare.cond); /* a replacement, or more for a burst, now if the plan says so */
	/*
	 * None ready, one being made: it is further on than this create's own
	 * clone would be, which does the same work from its start (the domain,
	 * and a loaded clone's state: on a VM host the longest part, poured in
	 * over the network), on the same CPUs beside it. So the create waits for
	 * it, while it is due: until its make's usual time (d->spare.make_ms, a
	 * moving mean) and a quarter more from its start, never longer than that
	 * time from now (what the create's own clone would take). One late past
	 * that, or undone meanwhile, leaves the create to make its own.
	 */
	while (!(s = spare_find_locked(d, spec, &making)) && making && !closing(d)) {
		int64_t now = saas__now_ms();
		struct timespec ts;

		if (!until) {
			until = making->begun_ms + d->spare.make_ms + d->spare.make_ms / 4;
			if (until > now + d->spare.make_ms)
				until = now + d->spare.make_ms;
			saas__strlcpy(waited, making->name, sizeof(waited));
			saas__lv_log(d, SAAS_LOG_INFO, "a create of %s finds no VM started ahead ready: %s is being made, %lld ms "
			             "in; waiting for it up to %lld ms (a make takes ~%u ms)", spec->image, making->name,
			             (long long)(now - making->begun_ms), (long long)(until > now ? until - now : 0),
			             d->spare.make_ms);
		}
		if (now >= until)
			break;
		saas__deadline(&ts, CLOCK_MONOTONIC, until - now);
		d->spare.waiting++;
		pthread_cond_timedwait(&d->spare.cond, &d->mu, &ts);
		d->spare.waiting--;
	}
	if (s) {
		s->state = SPARE_TAKEN;
		saas__strlcpy(name, s->name, size);
		/* Its replacement waits, unless creates stream: the create's own start is due now (lv_create holds it from there). */
		d->spare.hold_until_ms = saas__now_ms() + SPARE_HOLD_MS;
	}
	pthread_mutex_unlock(&d->mu);
	if (waited[0])
		saas__lv_log(d, SAAS_LOG_INFO, "a create of %s %s after %lld ms of waiting", spec->image,
		             s ? (strcmp(name, waited) == 0 ? "takes the VM it waited for" : "takes another VM started ahead")
		               : "makes its own VM: none started ahead was ready", (long long)(saas__now_ms() - t0));
	return s != NULL;
}

bool saas__lv_spare_listed(struct drv *d, const char *name)
{
	bool found = false;

	pthread_mutex_lock(&d->mu);
	for (struct spare *s = d->spare.list; s && !found; s = s->next)
		found = strcmp(s->name, name) == 0;
	pthread_mutex_unlock(&d->mu);
	return found;
}

uint64_t saas__lv_spare_held_mib(struct drv *d, const char *name)
{
	uint64_t mib;
	struct spare *s;

	pthread_mutex_lock(&d->mu);
	for (s = d->spare.list; s; s = s->next)
		if (strcmp(s->name, name) == 0)
			break;
	mib = s ? s->hold_mib : spare_cost_locked(d);
	pthread_mutex_unlock(&d->mu);
	return mib;
}

bool saas__lv_spare_domain(struct drv *d, virDomainPtr dom, const char *name)
{
	char *xml;
	bool marked;

	if (saas__lv_spare_listed(d, name))
		return true;
	if (!d->host->shared_templates)
		return false;
	xml = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, META_NS, 0);
	marked = xml && saas__lv_meta_spare_until(xml) > saas__now_ms();
	free(xml);
	saas__error_clear();
	return marked;
}

bool saas__lv_spare_destroy(struct drv *d, const char *name)
{
	struct spare *s;
	bool found;

	pthread_mutex_lock(&d->mu);
	for (s = d->spare.list; s; s = s->next)
		if (strcmp(s->name, name) == 0)
			break;
	found = s != NULL;
	if (s && s->state == SPARE_MAKING) {
		s->cancelled = true; /* its maker undoes it */
		s = NULL;
	} else if (s) {
		spare_unlink_locked(d, s);
	}
	pthread_mutex_unlock(&d->mu);
	spare_free(d, s);
	return found;
}

int saas__lv_spare_create(struct drv *d, const saas_vm_spec *spec)
{
	struct spare *s;
	struct timespec t0;
	int64_t at[2];
	bool ahead, loaded;
	int rc;

	pthread_mutex_lock(&d->mu);
	for (s = d->spare.list; s; s = s->next)
		if (s->state == SPARE_TAKEN && strcmp(s->name, spec->name) == 0)
			break;
	if (s)
		spare_unlink_locked(d, s);
	pthread_mutex_unlock(&d->mu);
	if (!s)
		return 1;
	/* Taken for a create of the default network (lv_take); any other gets a VM made for it. */
	if (spec->network) {
		spare_free(d, s);
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	spare_dom_refresh(d, s);
	if (!s->l.dom) {
		spare_free(d, s);
		return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "VM %s, started ahead, is gone from VM host %s",
		                   spec->name, d->uri);
	}
	s->l.spec = spec;
	/* A sandbox's VM from now: every engine's listing sees it (its row is in the store already). */
	rc = s->until_ms ? saas__lv_domain_meta_spare_clear(s->l.dom) : SAAS_OK;
	/* A VM host's guest: its policy here before it runs (its first lookup may come at once). */
	if (rc == SAAS_OK && d->ehost) {
		saas_vm_network fallback;
		const saas_vm_network *net;
		if ((rc = saas__lv_net_admit(d, spec, &fallback, &net)) == SAAS_OK &&
		    (rc = saas__lv_ehost_set(d->ehost, spec->name, net)) == SAAS_OK)
			s->ehost = true;
	}
	ahead = s->l.restored;
	loaded = s->loaded;
	if (rc == SAAS_OK)
		rc = saas__lv_clone_finish(&s->l, &t0, d->boot_timeout_ms, at);
	/* A VM host's guest: its egress channel to this server's end, once it runs. */
	if (rc == SAAS_OK && s->ehost)
		rc = saas__lv_egress_attach(d, spec->name);
	if (rc == SAAS_OK)
		rc = saas__lv_vm_add(d, spec->name, s->l.im, s->l.port, s->l.uid, s->host_key, s->l.ssh);
	if (rc < 0) {
		if (s->l.template_bad && !closing(d))
			saas__lv_template_break(d, s->key);
		saas__lv_clone_undo(&s->l, rc);
		s->l.spec = &s->spec;
		spare_free(d, s);
		return rc;
	}
	saas__lv_log(d, SAAS_LOG_DEBUG, "VM %s cloned from its start ahead (fix-ups over %s): %s %lld ms, "
	             "%s %lld ms", spec->name, s->l.fixups, ahead ? "resume (its state in ahead)" : "restore",
	             (long long)at[0], s->l.session_later ? "fix-ups (the session on first need)" : "SSH and fix-ups",
	             (long long)(at[1] - at[0]));
	saas__lv_log(d, SAAS_LOG_INFO, "VM %s up in %lld ms (clone, fix-ups over %s, started ahead%s%s, %s, %u vCPU, "
	             "%u MiB, %s, ssh %s:%u)", spec->name, (long long)saas__ms_since(&t0), s->l.fixups,
	             loaded ? ", its memory loaded ahead" : "",
	             s->code_warm ? ", its code server warmed ahead" : s->warm_ms ? ", its guest warmed ahead" : "",
	             spec->image, spec->vcpus, spec->memory_mb,
	             s->l.internet ? "internet" : "isolated", d->listen, s->l.port);
	/* The VM's now: its uid, rules and session go with it at destroy. */
	virDomainFree(s->l.dom);
	free(s->l.dir);
	free(s->l.overlay);
	free(s->tdir);
	free(s->host_key);
	free(s);
	return SAAS_OK;
}
