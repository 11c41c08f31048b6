/*
 * The libvirt VM driver's table: open (its host's steps through d->host)
 * and close, one drv_free for both, and the VM calls (create, destroy,
 * state, list, network); the guest calls are guest.c's. With what every
 * room shares: libvirt's event loop, the driver's log and error helpers,
 * and the console keeper. libvirt_driver.h says which file holds what.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "driver/libvirt/channel.h"
#include "driver/libvirt/conf.h"
#include "driver/libvirt/console.h"
#include "driver/libvirt/domain.h"
#include "driver/libvirt/egress.h"
#include "driver/libvirt/egress_host.h"
#include "driver/libvirt/emulator.h"
#include "driver/libvirt/guard.h"
#include "driver/libvirt/guest.h"
#include "driver/libvirt/host.h"
#include "driver/libvirt/host_remote.h"
#include "driver/libvirt/image.h"
#include "driver/libvirt/launch.h"
#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/memfile.h"
#include "driver/libvirt/reap.h"
#include "driver/libvirt/snapshot.h"
#include "driver/libvirt/spare_asked.h"
#include "driver/libvirt/template.h"
#include "driver/libvirt/vm.h"
#include "transport/egress_mux.h"

/* ---- the event loop and shared helpers ------------------------------------------------------- */

/* libvirt wants one event loop per process, run by a thread of its own. */
static pthread_once_t event_once = PTHREAD_ONCE_INIT;
static int event_rc;

static void *event_main(void *arg)
{
	(void)arg;
	for (;;)
		virEventRunDefaultImpl();
	return NULL;
}

static void quiet_errors(void *ud, virErrorPtr err)
{
	(void)ud;
	(void)err;
}

static char *libvirt_log_env;
static pthread_mutex_t log_env_mu = PTHREAD_MUTEX_INITIALIZER;

static void event_init(void)
{
	pthread_t t;

	/*
	 * A library never prints: libvirt's errors are read back through
	 * virGetLastError, and the embedded driver's own log (which goes to stderr
	 * unless told otherwise) is sent to a file in the state directory. This
	 * runs once, before libvirt reads its environment.
	 */
	virSetErrorFunc(NULL, quiet_errors);
	if (libvirt_log_env && !getenv("LIBVIRT_LOG_OUTPUTS"))
		setenv("LIBVIRT_LOG_OUTPUTS", libvirt_log_env, 0);
	if (virInitialize() < 0 || virEventRegisterDefaultImpl() < 0 ||
	    pthread_create(&t, NULL, event_main, NULL) != 0) {
		event_rc = -1;
		return;
	}
	pthread_detach(t);
}

void saas__lv_log(struct drv *d, int level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	d->log(d->log_userdata, level, msg);
}

int saas__lv_virt_error(const char *what)
{
	virErrorPtr err = virGetLastError();

	return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, err ? err->code : 0, "%s: %s", what,
	                   err && err->message ? err->message : "unknown libvirt error");
}

char *saas__lv_path_join(const char *a, const char *b)
{
	char *p;

	if (asprintf(&p, "%s/%s", a, b) < 0) {
		saas__oom();
		return NULL;
	}
	return p;
}

char *saas__lv_drv_path(struct drv *d, const char *kind, const char *name)
{
	char *p;

	if (asprintf(&p, "%s/%s/%s", d->dir, kind, name) < 0) {
		saas__oom();
		return NULL;
	}
	return p;
}

/*
 * libvirt's domain capabilities, asked for once at open (the embedded driver)
 * and fed to the two that want them. Asking makes libvirt probe its QEMU now
 * if it has not (a root's first use, a new binary): the reaper wants that
 * probe run while it watches (its daemonized QEMU must be this process's to
 * reap, so this comes after saas__lv_reap_open: reap.c says why), and the
 * emulator alias wants the entry the probe writes and the binary the answer
 * names, before any domain names it (emulator.h). Neither: not asked.
 */
static void open_caps(struct drv *d)
{
	char *caps;
	bool kvm;

	if (!d->reaping && !d->cpu_words)
		return;
	pthread_mutex_lock(&d->mu);
	kvm = d->kvm;
	pthread_mutex_unlock(&d->mu);
	caps = virConnectGetDomainCapabilities(saas__lv_conn(d), NULL, "x86_64", "q35", kvm ? "kvm" : "qemu", 0);
	/* NULL: libvirt's error is still the last, for the alias to say why it has none. */
	saas__lv_emulator_setup(d, caps);
	free(caps);
	virResetLastError();
}

/* ---- console logs ---------------------------------------------------------------------------- */

/* One pass: cut every VM's console log that grew past CONSOLE_LOG_MAX. */
static void consoles_trim(struct drv *d)
{
	char *vms = saas__lv_path_join(d->dir, "vms");
	DIR *dir = vms ? opendir(vms) : NULL;
	struct dirent *de;

	while (dir && (de = readdir(dir))) {
		char *path;
		if (de->d_name[0] == '.')
			continue;
		if (asprintf(&path, "%s/%s/console.log", vms, de->d_name) < 0)
			break;
		if (saas__console_trim(path, CONSOLE_LOG_MAX, CONSOLE_LOG_KEEP) > 0)
			saas__lv_log(d, SAAS_LOG_DEBUG, "VM %s wrote over %d bytes to its console: kept the last %d", de->d_name,
			             CONSOLE_LOG_MAX, CONSOLE_LOG_KEEP);
		free(path);
	}
	if (dir)
		closedir(dir);
	free(vms);
}

/*
 * A VM host's guest: its egress channel opened through libvirt and given to
 * this server's end, which holds it for the VM's life (its domain running).
 * Held by another server of the cluster (the one serving the VM's egress),
 * it is not taken from it: SAAS_EBUSY.
 */
int saas__lv_egress_attach(struct drv *d, const char *name)
{
	int fd, rc;

	if ((rc = saas__lv_channel_open_port(d, name, MUX_PORT_NAME, "egress", &fd)) < 0)
		return rc;
	return saas__lv_ehost_attach(d->ehost, name, fd);
}

/*
 * A VM host's guests whose egress channel ended (the host's libvirtd
 * restarted, or the guest's end broke): opened again, with backoff, while
 * the domain runs; a VM whose domain is gone (destroyed through another
 * server) is forgotten.
 */
static void egress_reattach(struct drv *d)
{
	char names[16][SAAS_ID_MAX + 1];
	size_t n = d->ehost ? saas__lv_ehost_lost(d->ehost, names, SAAS_ARRAY_SIZE(names)) : 0;

	for (size_t i = 0; i < n && d->host->check(d) == SAAS_OK; i++) {
		virDomainPtr dom = virDomainLookupByName(saas__lv_conn(d), names[i]);
		virErrorPtr e = dom ? NULL : virGetLastError();
		if (dom)
			virDomainFree(dom);
		if (!dom && e && e->code == VIR_ERR_NO_DOMAIN)
			saas__lv_ehost_remove(d->ehost, names[i]);
		else if (dom && saas__lv_egress_attach(d, names[i]) == SAAS_OK)
			saas__lv_log(d, SAAS_LOG_INFO, "VM %s: its egress channel is open again", names[i]);
		else
			saas__lv_log(d, SAAS_LOG_DEBUG, "VM %s: its egress channel cannot be opened again yet: %s", names[i],
			             dom ? saas_error_last()->message : virGetLastErrorMessage());
		saas__error_clear();
		virResetLastError();
	}
}

/* The keeper: a guest writes to its serial console as fast as it likes, and QEMU keeps it all. */
static void *keeper_main(void *arg)
{
	struct drv *d = arg;
	struct timespec ts;

	pthread_mutex_lock(&d->mu);
	while (!__atomic_load_n(&d->closing, __ATOMIC_ACQUIRE)) {
		saas__deadline(&ts, CLOCK_REALTIME, CONSOLE_TRIM_MS);
		pthread_cond_timedwait(&d->keeper_cond, &d->mu, &ts);
		if (__atomic_load_n(&d->closing, __ATOMIC_ACQUIRE))
			break;
		pthread_mutex_unlock(&d->mu);
		consoles_trim(d);
		egress_reattach(d);
		saas__lv_vmhost_snaps_retry(d);
		pthread_mutex_lock(&d->mu);
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

/* ---- open and close -------------------------------------------------------------------------- */

/* The egress mode a running domain was made with (its metadata). */
static int domain_network(virDomainPtr dom)
{
	char *xml = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, META_NS, 0);
	int mode = xml ? saas__lv_meta_network(xml) : SAAS_NET_ISOLATED;

	free(xml);
	return mode;
}

/*
 * A VM a previous engine started keeps its uid: no new VM may get it. Its
 * egress is loaded again at once: internet as it was, isolated as it was;
 * a policy VM refuses everything until the engine gives it its policy back
 * (vm_network_set), as it does right after open.
 */
static int adopt_uid(struct drv *d, virDomainPtr dom, const char *name, void *ud)
{
	unsigned int uid = saas__lv_domain_uid(dom);
	/* No account yet: the engine gives it back with the VM's policy (vm_network_set). */
	saas_vm_network net = { .mode = domain_network(dom) };

	(void)ud;
	if (uid && !saas__lv_uids_mark(&d->cf.uids, uid))
		saas__lv_log(d, SAAS_LOG_WARN, "VM %s runs under uid %u, outside the range uids=%u-%u", name, uid,
		             d->cf.uids.first, d->cf.uids.first + d->cf.uids.count - 1);
	if (uid && d->egress) {
		bool restricted = net.mode == SAAS_NET_ISOLATED;
		if (net.mode == SAAS_NET_POLICY)
			net.mode = SAAS_NET_ISOLATED;
		if (saas__lv_egress_vm_set(d, name, uid, &net, restricted) < 0) {
			saas__lv_log(d, SAAS_LOG_WARN, "VM %s: %s", name, saas_error_last()->message);
			saas__error_clear();
		}
	}
	return 0;
}

/*
 * Everything d holds, whatever point of open it reached: every exit of open
 * that fails, and close once its threads have stopped.
 */
static void drv_free(struct drv *d)
{
	/* The egress table stays while VMs do (it goes with none left); the resolver stops until the next open. */
	saas__lv_egress_close(d);
	while (d->tmpls) {
		struct tmpl *t = d->tmpls;
		d->tmpls = t->next;
		if (t->memfd >= 0)
			close(t->memfd);
		free(t);
	}
	free(d->snaps_gone);
	saas__lv_snapshot_splits_join(d, NULL);
	while (d->forkings) {
		struct forking *f = d->forkings;
		d->forkings = f->next;
		free(f);
	}
	while (d->snaprams) {
		struct snapram *m = d->snaprams;
		d->snaprams = m->next;
		if (m->memfd >= 0)
			close(m->memfd);
		free(m);
	}
	/*
	 * The guard table stays: other engines on this host may share it, and it
	 * touches nothing but QEMU's sockets (the next open replaces it).
	 */
	while (d->vms) {
		struct vm *v = d->vms;
		d->vms = v->next;
		saas__lv_vm_put(d, v);
	}
	while (d->old_imgs) {
		struct image *im = d->old_imgs;
		d->old_imgs = im->next;
		saas__lv_image_free(im);
	}
	while (d->imgs) {
		struct image *im = d->imgs;
		d->imgs = im->next;
		saas__lv_image_free(im);
	}
	/* Its guests' egress channels closed with it. */
	saas__lv_ehost_stop(d->ehost);
	d->ehost = NULL;
	/* The VMs' control channels on a remote host, closed above, let their streams go first. */
	if (d->host && d->host->control_open)
		saas__lv_channels_drain();
	if (d->spool)
		virStoragePoolFree(d->spool);
	virConnectClose(saas__lv_conn(d)); /* NULL-safe (rpc.h) */
	/* A pool holds its connection: the pools go first, so that a connection's close is its last reference's. */
	for (size_t i = 0; i < d->n_retired; i++)
		if (d->retired[i].spool)
			virStoragePoolFree(d->retired[i].spool);
	for (size_t i = 0; i < d->n_retired; i++)
		if (d->retired[i].conn)
			virConnectClose(d->retired[i].conn);
	free(d->retired);
	free(d->listen);
	free(d->spool_name);
	free(d->spool_dir);
	pthread_mutex_destroy(&d->upload_mu);
	pthread_mutex_destroy(&d->conn_mu);
	free(d->dir);
	free(d->uri);
	free(d->images);
	free(d->key);
	free(d->pub);
	free(d->authkey_b64);
	free(d->owner);
	free(d->dns_upstream);
	free(d->nft_helper);
	free(d->emulator);
	free(d->root);
	saas__lv_cg_clear(&d->cg);
	saas__lv_uids_clear(&d->cf.uids);
	/* Last: every destroy of this engine (spares, a template's VM, a failed open's) is over. */
	saas__lv_reap_close(d);
	pthread_cond_destroy(&d->keeper_cond);
	pthread_cond_destroy(&d->spare.cond);
	pthread_rwlock_destroy(&d->snaps_lock);
	pthread_cond_destroy(&d->snaps_cond);
	pthread_mutex_destroy(&d->mu);
	free(d);
}

/* The driver's options, owned by d from here (cfg's copies go with cfg). */
static void drv_config(struct drv *d, const struct saas__lv_config *cfg)
{
	d->uri = cfg->uri;
	d->images = cfg->images;
	d->accel = cfg->accel;
	d->network = cfg->network;
	d->templates = cfg->templates;
	d->control_port = cfg->control_port;
	d->control_files = cfg->control_files;
	d->control_exec = cfg->control_exec;
	d->spare_warm = cfg->spare_warm;
	d->cpu_words = cfg->cpu_words;
	d->boot_timeout_ms = cfg->boot_timeout_ms;
	d->disk_sweep_grace_ms = cfg->disk_sweep_grace_ms;
	d->cf.uids_mode = cfg->uids;
	d->cf.uid_first = cfg->uid_first;
	d->cf.uid_count = cfg->uid_count;
	d->dns_upstream = cfg->dns_upstream;
	d->nft_helper = cfg->nft_helper;
	d->cpu_milli = cfg->cpu_milli;
	d->min_free_memory_mb = cfg->min_free_memory_mb;
	d->spare.floor = cfg->spares_auto ? SPARES_AUTO_FLOOR : cfg->spares;
	d->spare.ceiling = cfg->spares_auto ? SPARES_AUTO_MAX : cfg->spares;
	d->spare.quiet_floor = cfg->spares_auto ? cfg->spare_idle_count : 0;
	d->spare.quiet_ms = cfg->spare_idle_ms;
	d->spare.budget_mib = cfg->spare_memory_mb;
	d->mapped = cfg->template_memory == TMPL_MEM_MAPPED;
	d->reap = cfg->reap;
	d->host = cfg->remote == REMOTE_ON || (cfg->remote == REMOTE_AUTO && saas__lv_uri_vmhost(d->uri))
	                  ? &saas__lv_host_remote
	                  : &saas__lv_host_local;
	/* The cluster's options. */
	d->listen = cfg->listen;
	d->owner = cfg->owner;
	d->spool_name = cfg->pool;
	d->spool_dir = cfg->pool_dir;
}

static int lv_open(void **ctx, const saas_driver_env *env)
{
	struct drv *d = calloc(1, sizeof(*d));
	struct saas__lv_config cfg;
	char *vms = NULL, *ssh_key = NULL;
	int rc;

	if (!d)
		return saas__oom();
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->keeper_cond, NULL);
	/* The spare thread waits on the monotonic clock: a clock step must not stall it, nor make it spin. */
	saas__cond_init_monotonic(&d->spare.cond);
	pthread_rwlock_init(&d->snaps_lock, NULL);
	pthread_cond_init(&d->snaps_cond, NULL);
	pthread_mutex_init(&d->upload_mu, NULL);
	pthread_mutex_init(&d->conn_mu, NULL);
	d->reap_wd = -1;
	d->reap_probe_wd = -1;
	d->log = env->log;
	d->log_userdata = env->log_userdata;
	d->lease = env->lease;
	d->lease_userdata = env->lease_userdata;
	d->stopping = env->stopping ? env->stopping : &d->closing;
	if ((rc = saas__lv_config_parse(&cfg, env->config)) < 0)
		goto fail;
	drv_config(d, &cfg);
	ssh_key = cfg.ssh_key;
	if (cfg.remote == REMOTE_ON && !d->uri) {
		rc = saas__inval("remote=on needs uri=, the VM host's libvirt URI");
		goto fail;
	}
	if ((!d->images && !(d->images = saas__lv_default_images_dir())) || (!d->listen && !(d->listen = saas__strdup("127.0.0.1"))) ||
	    (!d->spool_name && !(d->spool_name = saas__strdup(POOL_DEFAULT))) ||
	    (!d->spool_dir && !(d->spool_dir = saas__strdup(POOL_DIR_DEFAULT)))) {
		rc = SAAS_ENOMEM;
		goto fail;
	}
	if (!(d->dir = saas__lv_path_join(env->state_dir, "libvirt")) ||
	    (!d->owner && !(d->owner = saas__strdup(env->state_dir))) || !(vms = saas__lv_path_join(d->dir, "vms"))) {
		rc = SAAS_ENOMEM;
		goto fail;
	}
	if (saas__mkdir_p(vms, 0700) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot create %s", vms);
		goto fail;
	}
	if ((rc = saas__lv_ensure_key(d, ssh_key)) < 0 || (rc = saas__ssh_global_init()) < 0)
		goto fail;
	if ((rc = d->host->prepare(d, env)) < 0)
		goto fail;
	/* Read once, by the first open's event_init: later opens keep the first value (not a leak each). */
	pthread_mutex_lock(&log_env_mu);
	if (!libvirt_log_env && asprintf(&libvirt_log_env, "3:file:%s/libvirt.log", d->dir) < 0)
		libvirt_log_env = NULL;
	pthread_mutex_unlock(&log_env_mu);
	pthread_once(&event_once, event_init);
	if (event_rc < 0) {
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "cannot start libvirt's event loop");
		goto fail;
	}
	{
		/* Our pids cgroups are named after the state directory, as the embedded root is. */
		char hash[65];
		saas__sha256_hex(hash, env->state_dir, strlen(env->state_dir));
		snprintf(d->cg_group, sizeof(d->cg_group), "aas-%.16s", hash);
	}
	if ((rc = d->host->connect(d, env)) < 0)
		goto fail;
	/*
	 * After the connection: libvirt's capability probe (a daemonized QEMU it
	 * kills and never waits for) runs at the first connection to a root,
	 * and must not become a zombie of ours.
	 */
	saas__lv_reap_open(d);
	if (d->root)
		open_caps(d);
	saas__lv_templates_cleanup(d);
	/* Said once: every template and fork of this engine is then a loaded one. */
	if (d->mapped && !saas__lv_mapped_possible(d, d->mapped_why, sizeof(d->mapped_why))) {
		d->mapped = false;
		saas__lv_log(d, SAAS_LOG_INFO, "%s memory is loaded by each %s, not mapped: %s",
		             d->templates ? "templates' and forks'" : "forks'", d->templates ? "clone and child" : "child",
		             d->mapped_why);
	}
	saas__lv_snapshots_cleanup(d);
	if (d->cf.confined) {
		saas__lv_own_domains(d, VM_PREFIX, adopt_uid, NULL);
		saas__lv_images_prune(d);
	}
	if ((rc = pthread_create(&d->keeper, NULL, keeper_main, d)) != 0) {
		rc = saas__error(SAAS_ENOMEM, SAAS_ERRCLASS_OS, rc, "cannot start the console keeper thread");
		goto fail;
	}
	d->keeper_started = true;
	/* The templates creates asked for before this start: spares go to them from now on. */
	saas__lv_asked_load(d);
	if ((rc = saas__lv_spares_start(d)) < 0) {
		__atomic_store_n(&d->closing, 1, __ATOMIC_RELEASE);
		pthread_mutex_lock(&d->mu);
		pthread_cond_broadcast(&d->keeper_cond);
		pthread_mutex_unlock(&d->mu);
		pthread_join(d->keeper, NULL);
		goto fail;
	}
	saas__lv_log(d, SAAS_LOG_INFO, "libvirt driver on %s%s, %s, images in %s, templates %s, QEMU uids %s, owner %s",
	             d->uri, d->host->said, d->kvm ? "KVM" : "TCG", d->images, d->templates ? "on" : "off",
	             d->host->uids_said ? d->host->uids_said : d->cf.confined ? "per VM" : "shared", d->owner);
	*ctx = d;
	d = NULL;
	rc = SAAS_OK;
fail:
	if (d)
		drv_free(d);
	free(vms);
	free(ssh_key);
	return rc;
}

static void lv_close(void *ctx)
{
	struct drv *d = ctx;
	bool join;

	/* A template build in progress gives up (its VM is destroyed) and is joined. */
	__atomic_store_n(&d->closing, 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&d->mu);
	join = d->builder_started;
	d->builder_started = false;
	pthread_cond_broadcast(&d->keeper_cond);
	pthread_mutex_unlock(&d->mu);
	if (join)
		pthread_join(d->builder, NULL);
	if (d->keeper_started)
		pthread_join(d->keeper, NULL);
	/* Port connections relayed over control ports end at closing (their cancel): waited for. */
	pthread_mutex_lock(&d->mu);
	while (d->relays > 0)
		pthread_cond_wait(&d->keeper_cond, &d->mu);
	pthread_mutex_unlock(&d->mu);
	/* VMs started ahead are nobody's: they go, before their egress rules can. */
	saas__lv_spares_stop(d);
	drv_free(d);
}

/* ---- VMs ------------------------------------------------------------------------------------- */

/*
 * A domain looked up by name: NULL with SAAS_OK when there is none, NULL
 * with an error when libvirt could not tell (a host that does not answer is
 * never taken for a host without the VM).
 */
static virDomainPtr domain_lookup(struct drv *d, const char *name, int *rc)
{
	virDomainPtr dom = virDomainLookupByName(saas__lv_conn(d), name);
	virErrorPtr e;

	*rc = SAAS_OK;
	if (!dom && (e = virGetLastError()) && e->code != VIR_ERR_NO_DOMAIN) {
		*rc = saas__lv_virt_error("looking the VM up");
		saas__error_wrap(*rc, "%s on %s", name, d->uri);
	}
	return dom;
}

int saas__lv_vm_destroy(void *ctx, const char *name)
{
	struct drv *d = ctx;
	virDomainPtr dom;
	struct vm *v;
	char *dir, *disk = NULL;
	unsigned int uid = 0;
	int rc;

	if ((rc = d->host->check(d)) < 0)
		return rc;
	/* A VM started ahead that a create took and then did not make. */
	if (saas__lv_spare_destroy(d, name))
		return SAAS_OK;
	/* Not known to be gone is not gone: nothing of it is forgotten here then. */
	if (!(dom = domain_lookup(d, name, &rc)) && rc < 0)
		return rc;
	/* No background login starts for it from now on (one would wait for a guest going away). */
	saas__lv_vm_going(d, name);
	if (dom) {
		uid = saas__lv_domain_uid(dom);
		disk = d->host->domain_disk ? d->host->domain_disk(dom) : NULL;
		if (virDomainDestroy(dom) < 0) {
			int state = 0;
			/* Already gone between lookup and destroy is success. */
			if (virDomainGetState(dom, &state, NULL, 0) == 0 && state != VIR_DOMAIN_SHUTOFF)
				rc = saas__lv_virt_error("destroying the VM");
		}
		virDomainFree(dom);
	}
	if (rc < 0) {
		free(disk);
		return rc;
	}
	if ((v = saas__lv_vm_unlink(d, name))) {
		if (!uid)
			uid = v->uid; /* its domain went away by itself (the guest powered off) */
		saas__lv_vm_put(d, v);
	}
	saas__lv_limits_release(d, name);
	/* Its own disk, whatever its name; then one of the VM's name, unless a paused VM's snapshot keeps it. */
	if (disk)
		d->host->disk_drop(d, disk);
	free(disk);
	d->host->overlay_drop(d, name);
	if ((dir = saas__lv_drv_path(d, "vms", name))) {
		saas__lv_rm_tree(dir);
		free(dir);
	}
	/* Its disk may have been the last user of a deleted snapshot's. */
	saas__lv_snapshots_collect(d);
	/* Before its uid can serve another VM: that one starts from its own rules. */
	saas__lv_egress_vm_remove(d, name);
	if (d->ehost)
		saas__lv_ehost_remove(d->ehost, name);
	/* Its QEMU is gone (virDomainDestroy waits for it): the uid may serve another VM. */
	if (d->cf.confined && uid) {
		pthread_mutex_lock(&d->mu);
		saas__lv_uids_put(&d->cf.uids, uid);
		pthread_mutex_unlock(&d->mu);
	}
	return SAAS_OK;
}

int saas__lv_net_admit(struct drv *d, const saas_vm_spec *spec, saas_vm_network *fallback,
                       const saas_vm_network **net)
{
	int rc;

	fallback->mode = d->internet ? SAAS_NET_INTERNET : SAAS_NET_ISOLATED;
	fallback->allow = fallback->deny = NULL;
	fallback->account = NULL; /* whose it is: not said with the default network, so the VM counts as its own */
	*net = spec->network ? spec->network : fallback;
	if ((rc = saas__lv_egress_check(*net)) < 0)
		return rc;
	/* A VM host's guests: every mode is this server's end of their egress channel to decide. */
	if (d->ehost)
		return SAAS_OK;
	if ((*net)->mode == SAAS_NET_POLICY && !d->egress)
		return saas__lv_egress_refused("network policies");
	/* Never an internet guest without the guard, nor after something flushed it. */
	if ((*net)->mode != SAAS_NET_ISOLATED &&
	    ((rc = saas__lv_guard_ensure(d)) < 0 || (rc = saas__lv_egress_ensure(d)) < 0))
		return rc;
	return SAAS_OK;
}

static int create(struct drv *d, const saas_vm_spec *spec);

/* A create: from a VM started ahead when it took one (spare.c), else made here. No spare is made meanwhile. */
static int lv_create(void *ctx, const saas_vm_spec *spec)
{
	struct drv *d = ctx;
	int rc;

	saas__lv_spares_busy(d, true);
	if ((rc = saas__lv_memory_check(d, spec)) == SAAS_OK && (rc = saas__lv_spare_create(d, spec)) < 0 && !closing(d)) {
		saas__lv_log(d, SAAS_LOG_WARN, "VM %s: its clone started ahead failed (%s); making it anew", spec->name,
		             saas_error_last()->message);
		saas__error_clear();
		rc = 1;
	}
	if (rc == 1)
		rc = create(d, spec);
	saas__lv_spares_busy(d, false);
	return rc;
}

static int create(struct drv *d, const saas_vm_spec *spec)
{
	struct image *im = NULL;
	struct launch l;
	struct timespec t0;
	char key[33] = "", *tdir = NULL, *host_key = NULL;
	unsigned int uid = 0;
	saas_vm_network fallback;
	const saas_vm_network *net;
	bool internet, cloned = false, egress = false, probe = false;
	const char *cold = NULL; /* with templates on, why this VM boots cold */
	int rc, cold_level = SAAS_LOG_WARN;

	if ((rc = saas__lv_net_admit(d, spec, &fallback, &net)) < 0)
		return rc;
	internet = net->mode != SAAS_NET_ISOLATED;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_mutex_lock(&d->mu);
	rc = saas__lv_image_get(d, spec->image, &im);
	/*
	 * The overlay is the size's disk, and the guest's filesystem grows to
	 * fill it at boot (it is never shrunk): on a smaller disk than the
	 * image's own the guest would meet I/O errors where it should find its
	 * disk full.
	 */
	if (rc == SAAS_OK && im->disk_bytes > (uint64_t)spec->disk_gb << 30)
		rc = saas__inval("the size's disk (%u GiB) is smaller than image %s's filesystem (%llu MiB): "
		                 "choose a size with a disk of at least %llu GiB",
		                 spec->disk_gb, im->name, (unsigned long long)(im->disk_bytes >> 20),
		                 (unsigned long long)((im->disk_bytes + (1u << 30) - 1) >> 30));
	if (rc == SAAS_OK && !(host_key = saas__strdup(im->host_key)))
		rc = SAAS_ENOMEM;
	if (rc == SAAS_OK && d->cf.confined)
		rc = saas__lv_uid_take(d, &uid);
	if (rc == SAAS_OK && d->templates) {
		struct tmpl *t;
		saas__lv_template_key(d, spec, im, key);
		t = key[0] ? saas__lv_template_get_locked(d, key) : NULL;
		/* Spares go to the templates asked for last, of the shape asked for (spare.c), remembered for the next start. */
		if (t)
			saas__lv_asked_note_locked(d, t, spec, saas__now_ms());
		if (!t)
			cold = "out of memory for its template";
		else if (t->state == TMPL_READY) {
			if (!(tdir = d->host->template_place(d, t)))
				cold = "out of memory for its template";
		} else if (d->host->shared_templates && t->state != TMPL_BUILDING)
			probe = true;    /* finished on the host by another engine? looked for below, outside the lock */
		else
			cold = saas__lv_template_request_locked(d, t, spec, im, &cold_level);
	}
	pthread_mutex_unlock(&d->mu);
	if (probe) {
		char *place = NULL;
		if (d->host->template_find(d, key, &place) == 1) {
			if (!(tdir = place))
				cold = "out of memory for its template";
		} else {
			struct tmpl *t;
			saas__error_clear();
			pthread_mutex_lock(&d->mu);
			if (!(t = saas__lv_template_get_locked(d, key)))
				cold = "out of memory for its template";
			else
				cold = saas__lv_template_request_locked(d, t, spec, im, &cold_level);
			pthread_mutex_unlock(&d->mu);
		}
	}
	/* A remote host gets the image's files once per build (the image stays valid until close). */
	if (rc == SAAS_OK && (rc = d->host->image_place(d, im)) < 0)
		goto out;
	if (rc < 0)
		return rc;
	/* Its rules in place before its QEMU opens a socket: under its uid, nothing is ever unruled. */
	if (uid && d->egress) {
		if ((rc = saas__lv_egress_vm_set(d, spec->name, uid, net, !internet)) < 0)
			goto out;
		egress = true;
	}
	/* On a VM host, its policy here before its channel is (the guest's first lookup may come at once). */
	if (d->ehost) {
		if ((rc = saas__lv_ehost_set(d->ehost, spec->name, net)) < 0)
			goto out;
		egress = true;
	}
	memset(&l, 0, sizeof(l));
	l.d = d;
	l.spec = spec;
	l.im = im;
	l.host_key = host_key;
	l.internet = internet;
	l.policy = net->mode == SAAS_NET_POLICY;
	l.uid = uid;
	if (tdir) {
		l.tdir = tdir;
		if ((rc = saas__lv_boot_clone(&l)) == SAAS_OK) {
			cloned = true;
		} else if (!closing(d)) {
			saas__lv_log(d, SAAS_LOG_WARN, "VM %s: cloning template %s failed (%s); booting it cold%s", spec->name, key,
			             saas_error_last()->message, l.template_bad ? ", and the template will be built again" : "");
			if (l.template_bad)
				saas__lv_template_break(d, key);
			else
				d->host->template_lost(d, key); /* pruned meanwhile? looked for again */
		}
		l.tdir = NULL;
	} else if (cold) {
		/* Every cold boot where a clone was possible says why: a clone that never happens is otherwise silent. */
		saas__lv_log(d, cold_level, "VM %s boots cold: %s (template %s)", spec->name, cold, key[0] ? key : "unknown");
	}
	if (!cloned && (rc = saas__lv_boot_cold(&l)) < 0)
		goto out;
	if ((d->ehost && (rc = saas__lv_egress_attach(d, spec->name)) < 0) ||
	    (rc = saas__lv_vm_add(d, spec->name, im, l.port, uid, host_key, l.ssh)) < 0) {
		saas__lv_launch_undo(&l);
		goto out;
	}
	saas__lv_log(d, SAAS_LOG_INFO, "VM %s up in %lld ms (%s%s, %s, %u vCPU, %u MiB, %s, ssh %s:%u)", spec->name,
	             (long long)saas__ms_since(&t0), cloned ? "clone, fix-ups over " : "cold boot", cloned ? l.fixups : "",
	             spec->image, spec->vcpus, spec->memory_mb,
	             net->mode == SAAS_NET_POLICY ? "policy" : internet ? "internet" : "isolated", d->listen, l.port);
	virDomainFree(l.dom);
	free(l.dir);
	free(l.overlay);
	uid = 0; /* the VM's now: let go at destroy */
	egress = false;
out:
	if (egress && d->egress)
		saas__lv_egress_vm_remove(d, spec->name);
	if (egress && d->ehost)
		saas__lv_ehost_remove(d->ehost, spec->name);
	if (uid) {
		pthread_mutex_lock(&d->mu);
		saas__lv_uids_put(&d->cf.uids, uid);
		pthread_mutex_unlock(&d->mu);
	}
	free(tdir);
	free(host_key);
	return rc;
}

/*
 * A VM a previous engine started is held to its size as a new one is: its
 * pids cgroup (left in place when its QEMU still ran in it) is made again if
 * it is missing, and the memory limit set again. A failure is logged: the VM
 * runs on as it did.
 */
static void adopt_limits(struct drv *d, virDomainPtr dom, const char *name)
{
	virDomainInfo info;
	bool kvm;

	pthread_mutex_lock(&d->mu);
	kvm = d->kvm;
	pthread_mutex_unlock(&d->mu);
	if (virDomainGetInfo(dom, &info) < 0 ||
	    saas__lv_limits_apply(d, dom, name, info.nrVirtCpu, (unsigned int)(info.maxMem >> 10), kvm) < 0)
		saas__lv_log(d, SAAS_LOG_WARN, "VM %s adopted without its limits: %s", name, saas_error_last()->message);
}

int saas__lv_vm_adopt(struct drv *d, const char *name, int *state)
{
	virDomainPtr dom;
	int s = 0, rc;

	*state = SAAS_VM_ABSENT;
	if (!(dom = domain_lookup(d, name, &rc)))
		return rc;
	if (virDomainGetState(dom, &s, NULL, 0) == 0)
		*state = s == VIR_DOMAIN_RUNNING || s == VIR_DOMAIN_PAUSED || s == VIR_DOMAIN_BLOCKED
		                 ? SAAS_VM_RUNNING
		                 : SAAS_VM_STOPPED;
	else if (d->host->may_vanish)
		rc = saas__lv_virt_error("reading the VM's state");
	/* A running VM this driver has not seen yet (the engine restarted, or another of the cluster made it). */
	if (*state == SAAS_VM_RUNNING) {
		unsigned int port = 0;
		char *host_key = NULL, *owner = NULL;
		struct vm *v = saas__lv_vm_get(d, name);
		if (v) {
			saas__lv_vm_put(d, v);
		} else if (saas__lv_domain_meta(dom, &port, &host_key, &owner) == SAAS_OK && strcmp(owner, d->owner) == 0) {
			unsigned int uid = saas__lv_domain_uid(dom);
			if (d->cf.confined && uid) {
				pthread_mutex_lock(&d->mu);
				saas__lv_uids_mark(&d->cf.uids, uid);
				pthread_mutex_unlock(&d->mu);
			}
			saas__lv_vm_add(d, name, NULL, port, uid, host_key, NULL);
			adopt_limits(d, dom, name);
		}
		free(host_key);
		free(owner);
	}
	virDomainFree(dom);
	return rc;
}

static int lv_state(void *ctx, const char *name, int *state)
{
	struct drv *d = ctx;
	int rc;

	if ((rc = d->host->check(d)) < 0)
		return rc;
	return saas__lv_vm_adopt(d, name, state);
}

struct list_call {
	saas_name_fn fn;
	void *ud;
};

static int list_one(struct drv *d, virDomainPtr dom, const char *name, void *ud)
{
	struct list_call *lc = ud;

	/* VMs started ahead have no sandbox until a create takes one (spare.c), this engine's or another's. */
	if (saas__lv_spare_domain(d, dom, name))
		return 0;
	return lc->fn(lc->ud, name);
}

/* Only ours: named like a sandbox and owned by this state directory. */
static int lv_list(void *ctx, saas_name_fn fn, void *ud)
{
	struct drv *d = ctx;
	struct list_call lc = { fn, ud };
	int rc;

	if ((rc = d->host->check(d)) < 0)
		return rc;
	return saas__lv_own_domains(d, VM_PREFIX, list_one, &lc);
}

/* ---- egress ---------------------------------------------------------------------------------- */

static int lv_network_default(void *ctx)
{
	struct drv *d = ctx;

	return d->internet ? SAAS_NET_INTERNET : SAAS_NET_ISOLATED;
}

/*
 * A running VM host guest's network: its policy swapped in this server's
 * end, its channel opened when this server has none (the VM was made
 * through another, or adopted), and its metadata saying the mode for the
 * next server that adopts it. The guest always has the channel, so any
 * mode may follow any other. SAAS_EBUSY: another server holds the channel
 * and serves the VM with the policy it was given (the engine's reconcile
 * leaves such a VM to it; a change asked of this server is refused).
 */
static int ehost_network_set(struct drv *d, const char *name, const saas_vm_network *network)
{
	virDomainPtr dom;
	int had, rc;

	if ((rc = d->host->check(d)) < 0)
		return rc;
	if (!(dom = virDomainLookupByName(saas__lv_conn(d), name)))
		return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "no VM %s is running on VM host %s", name,
		                   d->uri);
	had = saas__lv_ehost_channel(d->ehost, name);
	if ((rc = saas__lv_ehost_set(d->ehost, name, network)) == SAAS_OK && had < 1 &&
	    (rc = saas__lv_egress_attach(d, name)) < 0) {
		saas__error_wrap(rc, "its network cannot change through this server while another serves its egress");
		/* Never served here: not kept (a VM this server served keeps its policy for the channel's return). */
		if (had < 0)
			saas__lv_ehost_remove(d->ehost, name);
	}
	if (rc == SAAS_OK &&
	    saas__lv_domain_meta_network_set(dom, network ? network->mode : SAAS_NET_ISOLATED) < 0) {
		saas__lv_log(d, SAAS_LOG_WARN, "VM %s: %s; a server that adopts it takes it as isolated", name,
		             saas_error_last()->message);
		saas__error_clear();
	}
	virDomainFree(dom);
	return rc;
}

static int lv_network_set(void *ctx, const char *name, const saas_vm_network *network)
{
	struct drv *d = ctx;
	struct vm *v;
	virDomainPtr dom;
	unsigned int uid;
	bool restricted;
	int rc;

	if (d->ehost)
		return ehost_network_set(d, name, network);
	v = saas__lv_vm_get(d, name);
	uid = v ? v->uid : 0;
	if (v)
		saas__lv_vm_put(d, v);
	if (!d->egress)
		return saas__lv_egress_refused("changes to a running sandbox's network");
	if (!(dom = virDomainLookupByName(saas__lv_conn(d), name)))
		return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "no VM %s is running", name);
	if (!uid)
		uid = saas__lv_domain_uid(dom);
	restricted = domain_network(dom) == SAAS_NET_ISOLATED;
	if (!uid) {
		rc = saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "VM %s has no QEMU uid of its own: its network "
		                 "cannot change while it runs", name);
		goto out;
	}
	if (network && network->mode != SAAS_NET_ISOLATED &&
	    ((rc = saas__lv_guard_ensure(d)) < 0 || (rc = saas__lv_egress_ensure(d)) < 0))
		goto out;
	/*
	 * The metadata says which rules an engine loads for this VM when it adopts
	 * it after a restart, before it is given its policy again. Toward a policy
	 * it is written first, so that no failure on the way leaves a record of
	 * internet behind; toward internet, only once the rules say so.
	 */
	if (!restricted && network && network->mode == SAAS_NET_POLICY &&
	    (rc = saas__lv_domain_meta_network_set(dom, SAAS_NET_POLICY)) < 0)
		goto out;
	if ((rc = saas__lv_egress_vm_set(d, name, uid, network, restricted)) < 0)
		goto out;
	if (!restricted && network && network->mode == SAAS_NET_INTERNET &&
	    (rc = saas__lv_domain_meta_network_set(dom, SAAS_NET_INTERNET)) < 0)
		saas__lv_log(d, SAAS_LOG_WARN, "VM %s: %s; after a restart it refuses everything until the engine gives "
		             "it its network again", name, saas_error_last()->message);
	rc = SAAS_OK;
out:
	virDomainFree(dom);
	return rc;
}

static int lv_network_stats(void *ctx, const char *name, saas_vm_network_stats *out)
{
	struct drv *d = ctx;

	if (d->ehost)
		return saas__lv_ehost_stats(d->ehost, name, out, NULL);
	return saas__lv_egress_vm_stats(d, name, out);
}

/*
 * A VM is outdated when its image's build is no longer the one a create
 * would use: images are reloaded when their manifest changes (a rebuild),
 * and a replaced build is retired, never freed, so its address says which
 * build a VM came from. An image gone altogether outdates its VMs too.
 */
static int lv_vm_outdated(void *ctx, const char *name, int *outdated)
{
	struct drv *d = ctx;
	struct vm *v = saas__lv_vm_get(d, name);
	struct image *im;

	*outdated = 0;
	if (!v)
		return SAAS_OK;
	pthread_mutex_lock(&d->mu);
	if (v->im)
		*outdated = saas__lv_image_get(d, v->im->name, &im) < 0 || im != v->im;
	pthread_mutex_unlock(&d->mu);
	saas__lv_vm_put(d, v);
	saas__error_clear();
	return SAAS_OK;
}

const saas_driver saas__driver_libvirt = {
	.version = SAAS_DRIVER_VERSION,
	.name = "libvirt",
	.open = lv_open,
	.close = lv_close,
	.vm_create = lv_create,
	.vm_destroy = saas__lv_vm_destroy,
	.vm_state = lv_state,
	.vm_list = lv_list,
	.exec = saas__lv_guest_exec,
	.file_write = saas__lv_guest_file_write,
	.file_read = saas__lv_guest_file_read,
	.file_list = saas__lv_guest_file_list,
	.port_connect = saas__lv_guest_port_connect,
	.network_default = lv_network_default,
	.vm_network_set = lv_network_set,
	.vm_network_stats = lv_network_stats,
	.pty_open = saas__lv_guest_pty_open,
	.pty_resize = saas__lv_guest_pty_resize,
	.pty_close = saas__lv_guest_pty_close,
	.vm_snapshot = saas__lv_vm_snapshot,
	.vm_restore = saas__lv_vm_restore,
	.snapshot_delete = saas__lv_snapshot_delete,
	.snapshot_list = saas__lv_snapshot_list,
	.vm_outdated = lv_vm_outdated,
	.template_list = saas__lv_template_list,
	.host_info = saas__lv_host_info,
	.vm_take = saas__lv_take,
	.vm_sample = saas__lv_vm_sample,
	.file_mkdir = saas__lv_guest_file_mkdir,
	.file_remove = saas__lv_guest_file_remove,
	.file_rename = saas__lv_guest_file_rename,
	.snapshot_scan = saas__lv_snapshot_scan,
	.snapshot_expect = saas__lv_snapshot_expect,
};
