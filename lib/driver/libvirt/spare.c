/*
 * Spares: a clone's QEMU started before the create that wants it.
 *
 * Under TCG the slowest part of a clone is starting its domain, before a byte
 * of the guest's state comes in: libvirt 9.0 reads the new QEMU's CPU model
 * one property at a time (some 400 QMP commands) and QEMU 7.2's monitor reads
 * its input one byte per main-loop turn, ~0.85 s in all of a 1.3-2 s clone. A
 * spare is that half done ahead (saas__lv_clone_start): its disk made, its
 * domain started paused with its template's RAM mapped, its uid, port and
 * egress rules taken, nothing of a guest running in it. A create without a
 * network of its own takes one (lv_take: the spare's name becomes the sandbox
 * id) and finishes it (saas__lv_spare_create: the state in, the fix-ups, the
 * session).
 *
 * Bounds: at most d->spare.max at once (driver option spares=N, default 1, 0:
 * none), spread over the templates creates asked for (none for a template
 * nobody asked for since the driver opened): each has one before any has a
 * second, the one asked for last first (spare_wanted_locked); one made at
 * a time, never while a create runs nor within SPARE_HOLD_MS after one (the
 * creates' first commands need the CPUs), never while the host is short of
 * memory for its size nor with the last free uid, and after a failure not
 * again for a while that doubles up to SPARE_BACKOFF_MAX_MS. A spare costs its QEMU's own memory
 * (its guest's RAM is the template's, mapped, and untouched until it runs), a
 * uid and a port; no CPU.
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
#include <stdlib.h>
#include <string.h>

#include <libvirt/libvirt.h>

#include "driver/libvirt/egress.h"
#include "driver/libvirt/image.h"
#include "driver/libvirt/launch.h"
#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/memfile.h"
#include "driver/libvirt/template.h"
#include "driver/libvirt/vm.h"

enum { SPARE_MAKING, SPARE_READY, SPARE_TAKEN };

struct spare {
	char name[SAAS_ID_MAX + 1];      /* a sandbox id, made here: the create that takes it gets it */
	char key[33];                    /* its template */
	char image[64];
	int state;
	bool cancelled;                  /* SPARE_MAKING: destroyed meanwhile; its maker undoes it */
	bool egress;                     /* its egress rules are set */
	int64_t at[2];                   /* ms to its disk, to its domain (for the log) */
	saas_vm_spec spec;               /* its shape; network NULL: the driver's default */
	struct launch l;                 /* its half-made clone: l.dom paused, l.uid, l.port, l.dir, l.tdir */
	char *tdir, *host_key;
	struct spare *next;
};

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

/* Everything of a spare goes: its domain, directory, egress rules and uid. */
static void spare_free(struct drv *d, struct spare *s)
{
	if (!s)
		return;
	if (s->l.dom || s->l.dir)
		saas__lv_launch_undo(&s->l);
	if (s->egress)
		saas__lv_egress_vm_remove(d, s->name);
	if (s->l.uid) {
		pthread_mutex_lock(&d->mu);
		saas__lv_uids_put(&d->cf.uids, s->l.uid);
		pthread_mutex_unlock(&d->mu);
	}
	free(s->tdir);
	free(s->host_key);
	free(s);
}

/* Is s still what a create of its shape would clone: its template ready, of its image's current build? */
static bool spare_current_locked(struct drv *d, const struct spare *s)
{
	struct image *im = NULL;
	struct tmpl *t;
	char key[33] = "";

	if (saas__lv_image_get(d, s->image, &im) < 0) {
		saas__error_clear();
		return false;
	}
	saas__lv_template_key(d, &s->spec, im, key);
	if (strcmp(key, s->key) != 0)
		return false;
	for (t = d->tmpls; t; t = t->next)
		if (strcmp(t->key, s->key) == 0)
			return t->state == TMPL_READY;
	return false;
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
	if (rc == SAAS_OK && !(s->tdir = saas__lv_drv_path(d, "templates", s->key)))
		rc = SAAS_ENOMEM;
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
	s->l.d = d;
	s->l.spec = &s->spec;
	s->l.im = im;
	s->l.host_key = s->host_key;
	s->l.internet = net->mode != SAAS_NET_ISOLATED;
	s->l.policy = false;
	s->l.tdir = s->tdir;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if ((rc = saas__lv_clone_start(&s->l, &t0, s->at)) < 0)
		saas__lv_clone_undo(&s->l, rc);
	return rc;
}

/*
 * The template to make a spare for: of those ready, local and asked for since
 * the driver opened, the one with the fewest spares not taken yet, and of
 * those the one asked for last. Every such template has one before any has
 * two, so spares=1 keeps one for the template asked for last, and a larger
 * count covers a burst of creates of one template. Under d->mu.
 */
static struct tmpl *spare_wanted_locked(struct drv *d)
{
	struct tmpl *best = NULL;
	unsigned int live = 0, best_has = 0;

	for (struct spare *s = d->spare.list; s; s = s->next)
		live++;
	if (live >= d->spare.max)
		return NULL;
	for (struct tmpl *t = d->tmpls; t; t = t->next) {
		unsigned int has = 0;
		if (t->state != TMPL_READY || !t->asked_ms || !t->image[0])
			continue;
		for (struct spare *s = d->spare.list; s; s = s->next)
			has += s->state != SPARE_TAKEN && strcmp(s->key, t->key) == 0;
		if (!best || has < best_has || (has == best_has && t->asked_ms > best->asked_ms)) {
			best = t;
			best_has = has;
		}
	}
	return best;
}

static void *spare_main(void *arg)
{
	struct drv *d = arg;
	unsigned int backoff_ms = SPARE_BACKOFF_FIRST_MS;

	pthread_mutex_lock(&d->mu);
	while (!closing(d)) {
		struct spare *stale = NULL, *s, *next;
		struct tmpl *t;
		struct timespec ts;
		int64_t now = saas__now_ms();

		/* Spares no create may have any more: out of the list here, destroyed below without the lock. */
		for (s = d->spare.list; s; s = next) {
			next = s->next;
			if (s->state == SPARE_READY && !spare_current_locked(d, s)) {
				saas__lv_log(d, SAAS_LOG_INFO, "VM %s, started ahead, is of an outdated template; destroying it",
				             s->name);
				spare_unlink_locked(d, s)->next = stale;
				stale = s;
			}
		}
		t = !stale && !d->spare.creating && now >= d->spare.hold_until_ms && now >= d->spare.retry_at_ms
		            ? spare_wanted_locked(d)
		            : NULL;
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
			s->next = d->spare.list;
			d->spare.list = s;
		}
		pthread_mutex_unlock(&d->mu);
		while (stale) {
			next = stale->next;
			spare_free(d, stale);
			stale = next;
		}
		if (s) {
			/* The host short of memory for it is no failure: the next turn looks again. */
			int rc = saas__lv_memory_check(d, &s->spec);
			if (rc == SAAS_OK)
				rc = spare_make(d, s);
			pthread_mutex_lock(&d->mu);
			if (rc == SAAS_OK && !s->cancelled && !closing(d)) {
				/* Said once it can be taken: whoever reads the line may create at once. */
				s->state = SPARE_READY;
				backoff_ms = SPARE_BACKOFF_FIRST_MS;
				saas__lv_log(d, SAAS_LOG_INFO, "VM %s started ahead for template %s (%s, %u vCPU, %u MiB) in %lld ms "
				             "(disk %lld ms, domain %lld ms)", s->name, s->key, s->image, s->spec.vcpus,
				             s->spec.memory_mb, (long long)s->at[1], (long long)s->at[0],
				             (long long)(s->at[1] - s->at[0]));
				s = NULL;
			} else {
				if (rc < 0 && rc != SAAS_EBUSY && !closing(d)) {
					saas__lv_log(d, SAAS_LOG_WARN, "starting a VM ahead for template %s failed (%s); next try in %u s",
					             s->key, saas_error_last()->message, backoff_ms / 1000);
					d->spare.retry_at_ms = saas__now_ms() + backoff_ms;
					backoff_ms = backoff_ms * 2 > SPARE_BACKOFF_MAX_MS ? SPARE_BACKOFF_MAX_MS : backoff_ms * 2;
				} else if (rc == SAAS_EBUSY) {
					d->spare.retry_at_ms = saas__now_ms() + SPARE_BACKOFF_FIRST_MS;
				}
				spare_unlink_locked(d, s);
			}
			pthread_mutex_unlock(&d->mu);
			saas__error_clear();
			spare_free(d, s); /* NULL when it is ready */
			pthread_mutex_lock(&d->mu);
			continue;
		}
		pthread_mutex_lock(&d->mu);
		if (closing(d))
			break;
		saas__deadline(&ts, CLOCK_MONOTONIC, SPARE_CHECK_MS);
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
	}
	pthread_mutex_unlock(&d->mu);
}

int saas__lv_spares_start(struct drv *d)
{
	int rc;

	if (!d->spare.max || !d->templates || !d->host->spares)
		return SAAS_OK;
	if ((rc = pthread_create(&d->spare.thread, NULL, spare_main, d)) != 0)
		return saas__error(SAAS_ENOMEM, SAAS_ERRCLASS_OS, rc, "cannot start the thread that starts VMs ahead");
	d->spare.started = true;
	return SAAS_OK;
}

/* At close (d->closing set): the thread joined, then every spare destroyed, taken or not. */
void saas__lv_spares_stop(struct drv *d)
{
	pthread_mutex_lock(&d->mu);
	pthread_cond_broadcast(&d->spare.cond);
	pthread_mutex_unlock(&d->mu);
	if (d->spare.started)
		pthread_join(d->spare.thread, NULL);
	d->spare.started = false;
	while (d->spare.list) {
		struct spare *s = d->spare.list;
		d->spare.list = s->next;
		spare_free(d, s);
	}
}

int saas__lv_take(void *ctx, const saas_vm_spec *spec, char *name, size_t size)
{
	struct drv *d = ctx;
	struct spare *s;

	if (spec->network || size <= strlen("sbx-") + 20)
		return 0;
	pthread_mutex_lock(&d->mu);
	for (s = d->spare.list; s; s = s->next)
		if (s->state == SPARE_READY && strcmp(s->image, spec->image) == 0 && s->spec.vcpus == spec->vcpus &&
		    s->spec.memory_mb == spec->memory_mb && s->spec.disk_gb == spec->disk_gb && spare_current_locked(d, s))
			break;
	if (s) {
		s->state = SPARE_TAKEN;
		saas__strlcpy(name, s->name, size);
		/* Its replacement waits: the create's own start is due now (lv_create holds it from there). */
		d->spare.hold_until_ms = saas__now_ms() + SPARE_HOLD_MS;
	}
	pthread_mutex_unlock(&d->mu);
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
	s->l.spec = spec;
	rc = saas__lv_clone_finish(&s->l, &t0, d->boot_timeout_ms, at);
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
	saas__lv_log(d, SAAS_LOG_DEBUG, "VM %s cloned from its start ahead (fix-ups over %s): restore %lld ms, "
	             "%s %lld ms", spec->name, s->l.fixups, (long long)at[0],
	             s->l.session_later ? "fix-ups (the session on first need)" : "SSH and fix-ups",
	             (long long)(at[1] - at[0]));
	saas__lv_log(d, SAAS_LOG_INFO, "VM %s up in %lld ms (clone, fix-ups over %s, started ahead, %s, %u vCPU, %u MiB, "
	             "%s, ssh %s:%u)", spec->name, (long long)saas__ms_since(&t0), s->l.fixups, spec->image, spec->vcpus,
	             spec->memory_mb, s->l.internet ? "internet" : "isolated", d->listen, s->l.port);
	/* The VM's now: its uid, rules and session go with it at destroy. */
	virDomainFree(s->l.dom);
	free(s->l.dir);
	free(s->l.overlay);
	free(s->tdir);
	free(s->host_key);
	free(s);
	return SAAS_OK;
}
