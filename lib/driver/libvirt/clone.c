/*
 * Clones: a VM restored from a template's saved state instead of booted.
 * Its domain starts paused with -incoming defer, the state comes in through
 * QMP, and the guest's root then makes it its own machine: aas-control,
 * told over the control port (lib/transport/control.c), or over SSH in older images.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libvirt/libvirt.h>

#include "driver/libvirt/channel.h"
#include "driver/libvirt/domain.h"
#include "driver/libvirt/launch.h"
#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/memfile.h"
#include "driver/libvirt/qmp.h"
#include "driver/libvirt/snapshot.h"
#include "driver/libvirt/template.h"
#include "transport/control.h"

/*
 * Restore a template's or a snapshot's saved state into a clone's paused
 * domain; it stays paused. A mapped template's state holds no RAM: the
 * clone's backend maps it.
 */
static int clone_state_in(struct launch *l, const char *state_path, const struct timespec *t0, int64_t budget_ms)
{
	const char *what = l->snapshot ? "restoring the snapshot" : "restoring the template";
	int rc;

	if ((rc = l->d->host->state_in(l, what, state_path, t0, budget_ms)) < 0)
		return rc;
	/* The incoming side leaves "inmigrate" when the whole state is in; QEMU exits if it cannot load it. */
	for (;;) {
		json_t *r = NULL;
		const char *status;
		bool in;
		if ((rc = saas__lv_qmp(l->dom, "{\"execute\":\"query-status\"}", -1, &r)) < 0)
			return saas__error_wrap(rc, "%s", what);
		status = json_string_value(json_object_get(r, "status"));
		in = status && strcmp(status, "inmigrate") == 0;
		json_decref(r);
		if (!in)
			break;
		if (saas__ms_since(t0) > budget_ms || closing(l->d))
			return saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_DRIVER, 0, "%s took too long", what);
		saas__sleep_ms(2);
	}
	if ((rc = saas__lv_qmp_migration_wait(l->d, l->dom, 1000, -1, 0, NULL)) < 0)
		return saas__error_wrap(rc, "%s", what);
	return SAAS_OK;
}

int saas__lv_clone_restore(struct launch *l, const struct timespec *t0, int64_t budget_ms)
{
	char *state;
	int rc;

	if (!(state = saas__lv_path_join(l->tdir, "state")))
		return SAAS_ENOMEM;
	rc = clone_state_in(l, state, t0, budget_ms);
	free(state);
	if (rc < 0) {
		l->template_bad = !closing(l->d); /* QEMU could not load the saved state */
		return rc;
	}
	l->restored = true;
	return SAAS_OK;
}

/*
 * The fix-ups over SSH, for images without the control port: the guest's
 * root runs its one forced command (aas-control --restored, aas-restored in
 * older images) with the clone's hostname, the time now and seed_hex.
 */
static int clone_fixup_ssh(struct launch *l, const char *seed_hex, int64_t time_ms, bool *bad)
{
	struct drv *d = l->d;
	saas__ssh_config cfg;
	saas__ssh *root = NULL;
	char cmd[256], out[64];
	struct timespec now;
	int status = -1, rc;

	memset(&cfg, 0, sizeof(cfg));
	cfg.host = d->listen;
	cfg.port = l->port;
	cfg.user = FIXUP_USER;
	cfg.private_key = d->key;
	cfg.public_key = d->pub;
	cfg.host_key = l->host_key;
	cfg.connect_timeout_ms = (int)time_ms;
	if ((rc = saas__ssh_open(&root, &cfg)) < 0) {
		/* A guest that refuses root's key, or shows another host key, was not made from this image's build. */
		*bad = saas__ssh_key_refused(saas_error_last()) || saas__ssh_host_key_mismatch(saas_error_last());
		return saas__error_wrap(rc, "fix-ups of the clone");
	}
	clock_gettime(CLOCK_REALTIME, &now);
	/* The command takes whole seconds: round to the nearest. */
	snprintf(cmd, sizeof(cmd), "%s %lld %s", l->spec->name, (long long)now.tv_sec + (now.tv_nsec >= 500000000L),
	         seed_hex);
	rc = saas__ssh_run(root, cmd, 30000, out, sizeof(out), &status);
	saas__ssh_close(root);
	if (rc < 0)
		return saas__error_wrap(rc, "fix-ups of the clone");
	if (status != 0 || strncmp(out, "ok", 2) != 0) {
		*bad = true;
		return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, status,
		                   "fix-ups of the clone failed (exit %d): the image lacks its fix-ups command? rebuild it", status);
	}
	return SAAS_OK;
}

/*
 * Make a restored clone its own machine: its hostname, the time now and
 * fresh random bytes (the guest kernel reseeded its RNG already, from the new
 * VM generation id). Over the control port when the domain has one, with no
 * SSH login; over SSH as root when it has none, or when the port failed
 * (said in the log). *via says which way they went.
 */
static int seed_hex(char hex[65])
{
	unsigned char seed[32];
	int rc;

	if ((rc = saas__random(seed, sizeof(seed))) < 0)
		return rc;
	for (size_t i = 0; i < sizeof(seed); i++)
		snprintf(hex + 2 * i, 3, "%02x", seed[i]);
	return SAAS_OK;
}

static int clone_fixup(struct launch *l, int64_t time_ms, bool *bad, const char **via)
{
	char hex[65];
	int rc;

	if ((rc = seed_hex(hex)) < 0)
		return rc;
	if (l->control && l->d->control_port) {
		struct saas__lv_way w;
		*via = "the control port";
		if ((rc = saas__ctl_fixup(saas__lv_ctl_way(&w, l->d, l->spec->name, l->dir), l->spec->name, hex,
		                          CONTROL_TIMEOUT_MS)) == SAAS_OK)
			return SAAS_OK;
		saas__lv_log(l->d, SAAS_LOG_WARN, "VM %s: fix-ups over SSH instead: %s", l->spec->name,
		             saas_error_last()->message);
	}
	*via = "SSH";
	return clone_fixup_ssh(l, hex, time_ms, bad);
}

struct fixup_run {
	struct launch *l;
	int64_t time_ms;
	bool bad;
	const char *via;                 /* "the control port" or "SSH" */
	int rc;
	struct saas__kept_error error;   /* its thread's */
};

static void *fixup_main(void *arg)
{
	struct fixup_run *f = arg;

	if ((f->rc = clone_fixup(f->l, f->time_ms, &f->bad, &f->via)) < 0)
		saas__error_keep(&f->error, f->rc);
	return NULL;
}

/*
 * The first half of a clone, which needs nothing of the create but its spec:
 * its disk (an overlay of the template's frozen one) and its domain, started
 * paused for the state to come in, its template's RAM mapped. Times go into
 * at[0] (disk) and at[1] (domain), from t0. On failure the caller undoes l.
 */
int saas__lv_clone_start(struct launch *l, const struct timespec *t0, int64_t at[2])
{
	struct saas__lv_holder holder = { -1, -1, "" };
	uint64_t bytes = (uint64_t)saas__lv_domain_memory(l->spec, l->im) << 20;
	int rc, ram = -1;

	if ((rc = saas__lv_launch_prepare(l)) < 0)
		return rc;
	/* A mapped template or fork: the clone's QEMU maps its sealed RAM, opened through a holder of its own uid. */
	rc = !l->d->host->local_memory ? SAAS_ENOTFOUND /* always loaded there */
	     : l->snapshot ? saas__lv_snapshot_ram(l->d, l->tdir, bytes, &ram, &l->template_bad, &l->ram_pending)
	                   : saas__lv_template_ram(l->d, l->tdir, bytes, &ram, &l->template_bad);
	if (rc == SAAS_OK)
		rc = saas__lv_holder_start(&holder, ram, l->uid, l->d->cf.guest_gid ? l->d->cf.guest_gid : l->uid);
	if (rc == SAAS_OK) {
		l->mem = LV_MEM_PRIVATE;
		l->mem_path = holder.path;
	} else if (rc != SAAS_ENOTFOUND) {
		goto out;
	}
	at[0] = saas__ms_since(t0);
	rc = saas__lv_launch_start(l);
	at[1] = saas__ms_since(t0);
out:
	saas__lv_holder_stop(&holder); /* QEMU has the file open (or is gone) */
	l->mem_path = NULL;
	if (ram >= 0)
		close(ram);
	return rc;
}

/*
 * The second half: the state in, the guest running and made its own machine.
 * With the control port and control_exec (the default), that is all: the
 * fix-ups go over the port, the first commands too (lib/transport/control_exec.c), and the
 * engine's SSH session is connected when something first needs it
 * (l->session_later). Otherwise the engine's session connects while the
 * fix-ups go over the port (or, without one, a second SSH login as root,
 * side by side with the first). Times go into at[0] (restore) and at[1]
 * (fix-ups, and the session when waited for), from t0; budget counts from t0
 * too.
 */
int saas__lv_clone_warm(struct launch *l, const struct timespec *t0, int64_t budget_ms)
{
	struct drv *d = l->d;
	struct saas__lv_way w;
	struct saas__ctl *ctl = NULL;
	saas_driver_exec req;
	char hex[65];
	int serves = 0, execs = 0, status = -1, rc;

	if (!l->control || !d->control_port || !d->control_exec || !d->host->control_port)
		return 0;
	if (!l->restored && (rc = saas__lv_clone_restore(l, t0, budget_ms)) < 0)
		return rc;
	if (virDomainResume(l->dom) < 0) {
		l->template_bad = !closing(d); /* as a state QEMU could not load */
		return saas__lv_virt_error("resuming a VM started ahead to warm it");
	}
	if ((rc = seed_hex(hex)) == SAAS_OK)
		rc = saas__ctl_fixup(saas__lv_ctl_way(&w, d, l->spec->name, l->dir), l->spec->name, hex, CONTROL_TIMEOUT_MS);
	if (rc == SAAS_OK) {
		memset(&req, 0, sizeof(req));
		req.command = "true"; /* a plain command: the helper's `run`, no shell (exec_plain.c) */
		req.cwd = "/";
		req.timeout_ms = CONTROL_TIMEOUT_MS;
		req.output = saas__output_discard;
		req.cancel = &d->closing;
		rc = saas__ctl_exec(&ctl, saas__lv_ctl_way(&w, d, l->spec->name, l->dir), &serves, &execs, &req, &status);
		saas__ctl_close(ctl);
		if (rc == SAAS_OK && status != 0)
			rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, status, "its warming `true` exited %d", status);
	}
	if (virDomainSuspend(l->dom) < 0 && rc == SAAS_OK)
		rc = saas__lv_virt_error("pausing a VM started ahead after its warm-up");
	return rc < 0 ? saas__error_wrap(rc, "warming a VM started ahead") : 1;
}

int saas__lv_clone_finish(struct launch *l, const struct timespec *t0, int64_t budget, int64_t at[2])
{
	struct fixup_run fix = { .l = l, .time_ms = budget, .via = "SSH", .rc = SAAS_OK };
	pthread_t thread;
	bool threaded;
	int rc;

	/* A spare's state may be in already (spare.c): then this only lets it run. */
	if (!l->restored && (rc = saas__lv_clone_restore(l, t0, budget)) < 0)
		return rc;
	if (virDomainResume(l->dom) < 0) {
		l->template_bad = !closing(l->d); /* as a state QEMU could not load */
		return saas__lv_virt_error("resuming the restored VM");
	}
	at[0] = saas__ms_since(t0);
	if (l->control && l->d->control_port && l->d->control_exec && l->d->host->control_port) {
		fixup_main(&fix);
		l->fixups = fix.via;
		if (fix.rc == SAAS_OK && strcmp(fix.via, "SSH") != 0) {
			l->session_later = true;
			at[1] = saas__ms_since(t0);
			return SAAS_OK;
		}
		/* The port failed them (and SSH did them, or not): the session is waited for, as without the port. */
		rc = saas__lv_launch_wait_ssh(l, t0, budget);
	} else {
		if (!(threaded = pthread_create(&thread, NULL, fixup_main, &fix) == 0))
			fixup_main(&fix);
		rc = saas__lv_launch_wait_ssh(l, t0, budget);
		if (threaded)
			pthread_join(thread, NULL);
		l->fixups = fix.via;
	}
	if (rc == SAAS_OK && fix.rc < 0) {
		l->template_bad = fix.bad;
		rc = saas__error_raise(&fix.error);
	}
	at[1] = saas__ms_since(t0);
	return rc;
}

/*
 * A clone of the template in tdir (or of the snapshot there: l->snapshot,
 * whose directory holds the same state and disk.qcow2). Failures leave
 * nothing behind; the caller boots cold instead, and rebuilds the template
 * when the failure says it is broken (l->template_bad), not merely slow.
 */
int saas__lv_boot_clone(struct launch *l)
{
	/* A clone waits as long as a cold boot would: on a loaded host it is slow too, and still the faster way. */
	int64_t budget = l->d->boot_timeout_ms, at[4] = { 0 };
	struct timespec t0;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = saas__lv_clone_start(l, &t0, at);
	/*
	 * A fork's child whose QEMU started while the snapshot's RAM was split
	 * off its stream (snapshot.c): its state goes in once the memory is
	 * whole and sealed. Should the split fail, the RAM is in the state, and
	 * this QEMU maps a memory that is no one's: it starts again, loading.
	 */
	if (rc == SAAS_OK && l->ram_pending && (rc = saas__lv_snapshot_split_wait(l->d, l->tdir)) > 0) {
		saas__lv_launch_undo(l);
		l->mem = LV_MEM_RAM;
		l->ram_pending = false;
		rc = saas__lv_clone_start(l, &t0, at);
	}
	if (rc == SAAS_OK)
		rc = saas__lv_clone_finish(l, &t0, budget, at + 2);
	/* Where a clone's time goes, for whoever tunes it. */
	if (rc == SAAS_OK)
		saas__lv_log(l->d, SAAS_LOG_DEBUG, "VM %s cloned (memory %s, fix-ups over %s): disk %lld ms, domain %lld ms, "
		             "restore %lld ms, %s %lld ms", l->spec->name,
		             l->mem == LV_MEM_PRIVATE ? "mapped" : "loaded", l->fixups, (long long)at[0],
		             (long long)(at[1] - at[0]), (long long)(at[2] - at[1]),
		             l->session_later ? "fix-ups (the session on first need)" : "SSH and fix-ups",
		             (long long)(at[3] - at[2]));
	else
		saas__lv_clone_undo(l, rc);
	return rc;
}

/* A clone that failed at any point: everything of it goes (a cold boot may follow). */
void saas__lv_clone_undo(struct launch *l, int rc)
{
	saas__lv_launch_blame_console(l, rc);
	saas__lv_launch_undo(l);
	l->mem = LV_MEM_RAM;
}
