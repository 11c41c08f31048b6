/*
 * The libvirt VM driver's table: open and close, the VM calls (create,
 * destroy, state, list) and the guest calls (exec, files, ports) over each
 * VM's SSH session; with what every room shares: libvirt's event loop, the
 * driver's log and error helpers, and the console keeper. libvirt_driver.h
 * says which file holds what.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/kvm.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libvirt/libvirt-qemu.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "driver/libvirt/console.h"
#include "driver/libvirt/libvirt_driver.h"

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

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void saas__lv_rm_tree(const char *path)
{
	nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

char *saas__lv_read_file(const char *path, size_t max)
{
	FILE *f = fopen(path, "re");
	saas__buf b = SAAS__BUF_INIT;
	char chunk[4096];
	size_t n;

	if (!f)
		return NULL;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0 && b.len < max)
		saas__buf_put(&b, chunk, n);
	fclose(f);
	return saas__buf_detach(&b, NULL);
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
 * KVM is worth trying when /dev/kvm can make a VM and the CPU says it has
 * hardware virtualisation. Some nested setups pass the first test with no
 * vmx/svm flag and then fail every guest start (refused MSR writes), which
 * cost each engine a failed start before it fell back to TCG.
 */
static bool cpu_has_virt(void)
{
	FILE *f = fopen("/proc/cpuinfo", "re");
	char line[4096];
	bool found = false;

	while (f && !found && fgets(line, sizeof(line), f))
		if (strncmp(line, "flags", 5) == 0 && (strstr(line, " vmx") || strstr(line, " svm")))
			found = true;
	if (f)
		fclose(f);
	return found;
}

static bool kvm_usable(void)
{
	int fd, vm;

	if (!cpu_has_virt())
		return false;
	if ((fd = open("/dev/kvm", O_RDWR | O_CLOEXEC)) < 0)
		return false;
	vm = ioctl(fd, KVM_CREATE_VM, 0);
	if (vm >= 0)
		close(vm);
	close(fd);
	return vm >= 0;
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
		pthread_mutex_lock(&d->mu);
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

static int lv_open(void **ctx, const saas_driver_env *env)
{
	struct drv *d = calloc(1, sizeof(*d));
	struct saas__lv_config cfg;
	char *root = NULL, *vms = NULL;
	int rc;

	if (!d)
		return saas__oom();
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->keeper_cond, NULL);
	d->log = env->log;
	d->log_userdata = env->log_userdata;
	if ((rc = saas__lv_config_parse(&cfg, env->config)) < 0)
		goto fail;
	d->uri = cfg.uri;
	d->images = cfg.images;
	d->accel = cfg.accel;
	d->network = cfg.network;
	d->templates = cfg.templates;
	d->boot_timeout_ms = cfg.boot_timeout_ms;
	if (!d->images && !(d->images = saas__lv_default_images_dir())) {
		rc = SAAS_ENOMEM;
		goto fail;
	}
	if (!(d->dir = saas__lv_path_join(env->state_dir, "libvirt")) || !(d->owner = saas__strdup(env->state_dir)) ||
	    !(vms = saas__lv_path_join(d->dir, "vms"))) {
		rc = SAAS_ENOMEM;
		goto fail;
	}
	if (saas__mkdir_p(vms, 0700) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot create %s", vms);
		goto fail;
	}
	if ((rc = saas__lv_ensure_key(d)) < 0 || (rc = saas__ssh_global_init()) < 0)
		goto fail;
	d->kvm = d->accel == ACCEL_KVM || (d->accel == ACCEL_AUTO && kvm_usable());
	if (d->accel == ACCEL_KVM && !kvm_usable()) {
		rc = saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "accel=kvm, but /dev/kvm is not usable");
		goto fail;
	}
	if (!d->uri) {
		if ((rc = saas__lv_embed_root(env->state_dir, &root)) < 0)
			goto fail;
		if ((rc = saas__lv_write_qemu_conf(root)) < 0)
			goto fail;
		if ((rc = saas__lv_network_setup(d, true)) < 0)
			goto fail;
		if (asprintf(&d->uri, "qemu:///embed?root=%s", root) < 0) {
			d->uri = NULL;
			rc = saas__oom();
			goto fail;
		}
	} else if ((rc = saas__lv_network_setup(d, false)) < 0) {
		goto fail;
	}
	if (asprintf(&libvirt_log_env, "3:file:%s/libvirt.log", d->dir) < 0)
		libvirt_log_env = NULL;
	pthread_once(&event_once, event_init);
	if (event_rc < 0) {
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "cannot start libvirt's event loop");
		goto fail;
	}
	if (!(d->conn = virConnectOpen(d->uri))) {
		rc = saas__lv_virt_error("cannot connect to libvirt");
		saas__error_wrap(rc, "%s", d->uri);
		goto fail;
	}
	saas__lv_templates_cleanup(d);
	if ((rc = pthread_create(&d->keeper, NULL, keeper_main, d)) != 0) {
		rc = saas__error(SAAS_ENOMEM, SAAS_ERRCLASS_OS, rc, "cannot start the console keeper thread");
		goto fail;
	}
	d->keeper_started = true;
	saas__lv_log(d, SAAS_LOG_INFO, "libvirt driver on %s, %s, images in %s, templates %s", d->uri,
	             d->kvm ? "KVM" : "TCG", d->images, d->templates ? "on" : "off");
	*ctx = d;
	free(root);
	free(vms);
	return SAAS_OK;
fail:
	free(root);
	free(vms);
	if (d->conn)
		virConnectClose(d->conn);
	free(d->dir);
	free(d->uri);
	free(d->images);
	free(d->key);
	free(d->pub);
	free(d->authkey_b64);
	free(d->owner);
	pthread_cond_destroy(&d->keeper_cond);
	pthread_mutex_destroy(&d->mu);
	free(d);
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
	while (d->tmpls) {
		struct tmpl *t = d->tmpls;
		d->tmpls = t->next;
		free(t);
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
	virConnectClose(d->conn);
	free(d->dir);
	free(d->uri);
	free(d->images);
	free(d->key);
	free(d->pub);
	free(d->authkey_b64);
	free(d->owner);
	pthread_cond_destroy(&d->keeper_cond);
	pthread_mutex_destroy(&d->mu);
	free(d);
}

static int lv_destroy(void *ctx, const char *name)
{
	struct drv *d = ctx;
	virDomainPtr dom = virDomainLookupByName(d->conn, name);
	struct vm *v;
	char *dir;
	int rc = SAAS_OK;

	if (dom) {
		if (virDomainDestroy(dom) < 0) {
			int state = 0;
			/* Already gone between lookup and destroy is success. */
			if (virDomainGetState(dom, &state, NULL, 0) == 0 && state != VIR_DOMAIN_SHUTOFF)
				rc = saas__lv_virt_error("destroying the VM");
		}
		virDomainFree(dom);
	}
	if (rc < 0)
		return rc;
	if ((v = saas__lv_vm_unlink(d, name)))
		saas__lv_vm_put(d, v);
	if ((dir = saas__lv_drv_path(d, "vms", name))) {
		saas__lv_rm_tree(dir);
		free(dir);
	}
	return SAAS_OK;
}

static int lv_create(void *ctx, const saas_vm_spec *spec)
{
	struct drv *d = ctx;
	struct image *im = NULL;
	struct launch l;
	struct timespec t0;
	char key[33] = "", *tdir = NULL, *host_key = NULL;
	bool internet = spec->internet < 0 ? d->internet : spec->internet > 0, cloned = false;
	int rc;

	/* Never an internet guest without the guard. */
	if (internet && !d->guard)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "network policy internet is refused: %s",
		                   d->guard_why);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_mutex_lock(&d->mu);
	rc = saas__lv_image_get(d, spec->image, &im);
	if (rc == SAAS_OK && !(host_key = saas__strdup(im->host_key)))
		rc = SAAS_ENOMEM;
	if (rc == SAAS_OK && d->templates) {
		struct tmpl *t;
		saas__lv_template_key(d, spec, im, key);
		if (key[0] && (t = saas__lv_template_get_locked(d, key))) {
			if (t->state == TMPL_READY)
				tdir = saas__lv_drv_path(d, "templates", key);
			else
				saas__lv_template_request_locked(d, t, spec, im);
		}
	}
	pthread_mutex_unlock(&d->mu);
	if (rc < 0)
		return rc;
	memset(&l, 0, sizeof(l));
	l.d = d;
	l.spec = spec;
	l.im = im;
	l.host_key = host_key;
	l.internet = internet;
	if (tdir) {
		l.tdir = tdir;
		if ((rc = saas__lv_boot_clone(&l)) == SAAS_OK) {
			cloned = true;
		} else if (!closing(d)) {
			saas__lv_log(d, SAAS_LOG_WARN, "VM %s: cloning template %s failed (%s); booting it cold%s", spec->name, key,
			             saas_error_last()->message, l.template_bad ? ", and the template will be built again" : "");
			if (l.template_bad)
				saas__lv_template_break(d, key);
		}
		l.tdir = NULL;
	}
	if (!cloned && (rc = saas__lv_boot_cold(&l)) < 0)
		goto out;
	if ((rc = saas__lv_vm_add(d, spec->name, l.port, host_key, l.ssh)) < 0) {
		saas__lv_launch_undo(&l);
		goto out;
	}
	saas__lv_log(d, SAAS_LOG_INFO, "VM %s up in %lld ms (%s, %s, %u vCPU, %u MiB, %s, ssh 127.0.0.1:%u)", spec->name,
	             (long long)ms_since(&t0), cloned ? "clone" : "cold boot", spec->image, spec->vcpus, spec->memory_mb,
	             internet ? "internet" : "isolated", l.port);
	virDomainFree(l.dom);
	free(l.dir);
	free(l.overlay);
out:
	free(tdir);
	free(host_key);
	return rc;
}

static int lv_state(void *ctx, const char *name, int *state)
{
	struct drv *d = ctx;
	virDomainPtr dom = virDomainLookupByName(d->conn, name);
	int s = 0;

	*state = SAAS_VM_ABSENT;
	if (!dom)
		return SAAS_OK;
	if (virDomainGetState(dom, &s, NULL, 0) == 0)
		*state = s == VIR_DOMAIN_RUNNING || s == VIR_DOMAIN_PAUSED || s == VIR_DOMAIN_BLOCKED
		                 ? SAAS_VM_RUNNING
		                 : SAAS_VM_STOPPED;
	/* A running VM this driver has not seen yet (the engine restarted): adopt it. */
	if (*state == SAAS_VM_RUNNING) {
		unsigned int port = 0;
		char *host_key = NULL, *owner = NULL;
		struct vm *v = saas__lv_vm_get(d, name);
		if (v) {
			saas__lv_vm_put(d, v);
		} else if (saas__lv_domain_meta(dom, &port, &host_key, &owner) == SAAS_OK && strcmp(owner, d->owner) == 0) {
			saas__lv_vm_add(d, name, port, host_key, NULL);
		}
		free(host_key);
		free(owner);
	}
	virDomainFree(dom);
	return SAAS_OK;
}

struct list_call {
	saas_name_fn fn;
	void *ud;
};

static int list_one(struct drv *d, virDomainPtr dom, const char *name, void *ud)
{
	struct list_call *lc = ud;

	(void)d;
	(void)dom;
	return lc->fn(lc->ud, name);
}

/* Only ours: named like a sandbox and owned by this state directory. */
static int lv_list(void *ctx, saas_name_fn fn, void *ud)
{
	struct list_call lc = { fn, ud };

	return saas__lv_own_domains(ctx, VM_PREFIX, list_one, &lc);
}

static int lv_exec(void *ctx, const char *name, const saas_driver_exec *req, int *exit_code)
{
	struct drv *d = ctx;
	saas__ssh *ssh;
	int rc;

	if ((rc = saas__lv_vm_session(d, name, &ssh)) < 0)
		return rc;
	rc = saas__ssh_exec(ssh, req, exit_code);
	saas__ssh_close(ssh);
	return rc;
}

static int lv_file_write(void *ctx, const char *name, const char *path, unsigned int mode, saas_read_fn reader,
                         void *ud, int64_t size)
{
	struct drv *d = ctx;
	saas__ssh *ssh;
	int rc;

	if ((rc = saas__lv_vm_session(d, name, &ssh)) < 0)
		return rc;
	rc = saas__ssh_file_write(ssh, path, mode, reader, ud, size);
	saas__ssh_close(ssh);
	return rc;
}

static int lv_file_read(void *ctx, const char *name, const char *path, int64_t max, saas_write_fn writer,
                        void *ud, int64_t *size)
{
	struct drv *d = ctx;
	saas__ssh *ssh;
	int rc;

	if ((rc = saas__lv_vm_session(d, name, &ssh)) < 0)
		return rc;
	rc = saas__ssh_file_read(ssh, path, max, writer, ud, size);
	saas__ssh_close(ssh);
	return rc;
}

static int lv_file_list(void *ctx, const char *name, const char *path, unsigned int depth, saas_entry_fn fn,
                        void *ud)
{
	struct drv *d = ctx;
	saas__ssh *ssh;
	int rc;

	if ((rc = saas__lv_vm_session(d, name, &ssh)) < 0)
		return rc;
	/*
	 * The engine keeps at most SAAS_LIST_ENTRIES_MAX entries and flags the
	 * list truncated when one more comes: reading one more than that bounds
	 * what a guest's huge directory costs the host and still tells it so.
	 */
	rc = saas__ssh_file_list(ssh, path, depth, SAAS_LIST_ENTRIES_MAX + 1, fn, ud);
	saas__ssh_close(ssh);
	return rc;
}

static int lv_port_connect(void *ctx, const char *name, unsigned int port, int *fd)
{
	struct drv *d = ctx;
	saas__ssh *ssh;
	int rc;

	if ((rc = saas__lv_vm_session(d, name, &ssh)) < 0)
		return rc;
	rc = saas__ssh_port_connect(ssh, port, fd);
	saas__ssh_close(ssh);
	return rc;
}

const saas_driver saas__driver_libvirt = {
	SAAS_DRIVER_VERSION,
	"libvirt",
	lv_open,
	lv_close,
	lv_create,
	lv_destroy,
	lv_state,
	lv_list,
	lv_exec,
	lv_file_write,
	lv_file_read,
	lv_file_list,
	lv_port_connect,
};

/* ---- qmp (to move to qmp.c) ---- */

/*
 * A QMP command on a domain, with an optional file descriptor passed along
 * (for getfd). *ret (may be NULL) gets the "return" member; a QEMU error
 * becomes SAAS_EBACKEND with its description.
 */
int saas__lv_qmp(virDomainPtr dom, const char *cmd, int fd, json_t **ret)
{
	char *out = NULL;
	json_t *root, *err;
	json_error_t jerr;
	int fds[1] = { fd };
	int rc = SAAS_OK;

	if (ret)
		*ret = NULL;
	if (virDomainQemuMonitorCommandWithFiles(dom, cmd, fd >= 0 ? 1 : 0, fd >= 0 ? fds : NULL, NULL, NULL, &out,
	                                         0) < 0)
		return saas__lv_virt_error("QEMU monitor");
	root = json_loads(out, 0, &jerr);
	free(out);
	if (!root)
		return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "QEMU monitor: unreadable answer (%s)", jerr.text);
	if ((err = json_object_get(root, "error"))) {
		const char *desc = json_string_value(json_object_get(err, "desc"));
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "QEMU: %s", desc ? desc : "error");
	} else if (ret) {
		*ret = json_incref(json_object_get(root, "return"));
	}
	json_decref(root);
	return rc;
}

/* Hand QEMU a file descriptor under a name (for an fd: migration URI). Ours stays ours. */
int saas__lv_qmp_getfd(virDomainPtr dom, const char *fdname, int fd)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "{\"execute\":\"getfd\",\"arguments\":{\"fdname\":\"%s\"}}", fdname);
	return saas__lv_qmp(dom, cmd, fd, NULL);
}

/* Poll query-migrate until the migration completed (SAAS_OK) or failed. */
int saas__lv_qmp_migration_wait(struct drv *d, virDomainPtr dom, int64_t timeout_ms, int64_t *bytes)
{
	int64_t deadline = saas__now_ms() + timeout_ms;

	for (;;) {
		json_t *r = NULL;
		const char *status;
		int rc = saas__lv_qmp(dom, "{\"execute\":\"query-migrate\"}", -1, &r);
		if (rc < 0)
			return rc;
		status = json_string_value(json_object_get(r, "status"));
		if (status && strcmp(status, "completed") == 0) {
			if (bytes)
				*bytes = json_integer_value(json_object_get(json_object_get(r, "ram"), "transferred"));
			json_decref(r);
			return SAAS_OK;
		}
		if (status && (strcmp(status, "failed") == 0 || strcmp(status, "cancelled") == 0)) {
			const char *why = json_string_value(json_object_get(r, "error-desc"));
			rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "migration %s: %s", status,
			                 why ? why : "no reason given");
			json_decref(r);
			return rc;
		}
		json_decref(r);
		if (saas__now_ms() > deadline || closing(d))
			return saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_DRIVER, 0, "migration did not finish in time");
		sleep_ms(5);
	}
}

/* ---- clone (to move to clone.c) ---- */

/* Restore a template's saved state into a clone's paused domain, then let it run. */
static int clone_restore(struct launch *l, const char *state_path, const struct timespec *t0, int64_t budget_ms)
{
	int fd = open(state_path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "%s: %s", state_path, strerror(errno));
	rc = saas__lv_qmp_getfd(l->dom, "aas-restore", fd);
	close(fd);
	if (rc < 0 ||
	    (rc = saas__lv_qmp(l->dom, "{\"execute\":\"migrate-incoming\",\"arguments\":{\"uri\":\"fd:aas-restore\"}}", -1,
	              NULL)) < 0)
		return saas__error_wrap(rc, "restoring the template");
	/* The incoming side leaves "inmigrate" when the whole state is in; QEMU exits if it cannot load it. */
	for (;;) {
		json_t *r = NULL;
		const char *status;
		bool in;
		if ((rc = saas__lv_qmp(l->dom, "{\"execute\":\"query-status\"}", -1, &r)) < 0)
			return saas__error_wrap(rc, "restoring the template");
		status = json_string_value(json_object_get(r, "status"));
		in = status && strcmp(status, "inmigrate") == 0;
		json_decref(r);
		if (!in)
			break;
		if (ms_since(t0) > budget_ms || closing(l->d))
			return saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_DRIVER, 0, "restoring the template took too long");
		sleep_ms(2);
	}
	if ((rc = saas__lv_qmp_migration_wait(l->d, l->dom, 1000, NULL)) < 0)
		return saas__error_wrap(rc, "restoring the template");
	if (virDomainResume(l->dom) < 0)
		return saas__lv_virt_error("resuming the restored VM");
	return SAAS_OK;
}

/*
 * Make a restored clone its own machine: the guest's root runs aas-restored
 * (the one command the engine's key may run as root) with the clone's
 * hostname, the time now and fresh random bytes. The guest kernel reseeded
 * its RNG already, from the new VM generation id.
 */
static int clone_fixup(struct launch *l, int64_t time_ms, bool *bad)
{
	struct drv *d = l->d;
	saas__ssh_config cfg;
	saas__ssh *root = NULL;
	unsigned char seed[32];
	char cmd[256], out[64], hex[65];
	struct timespec now;
	int status = -1, rc;

	memset(&cfg, 0, sizeof(cfg));
	cfg.host = "127.0.0.1";
	cfg.port = l->port;
	cfg.user = FIXUP_USER;
	cfg.private_key = d->key;
	cfg.public_key = d->pub;
	cfg.host_key = l->host_key;
	cfg.connect_timeout_ms = (int)time_ms;
	if ((rc = saas__random(seed, sizeof(seed))) < 0)
		return rc;
	for (size_t i = 0; i < sizeof(seed); i++)
		snprintf(hex + 2 * i, 3, "%02x", seed[i]);
	if ((rc = saas__ssh_open(&root, &cfg)) < 0) {
		/* A guest that refuses root's key, or shows another host key, was not made from this image's build. */
		*bad = saas__ssh_key_refused(saas_error_last()) || saas__ssh_host_key_mismatch(saas_error_last());
		return saas__error_wrap(rc, "fix-ups of the clone");
	}
	clock_gettime(CLOCK_REALTIME, &now);
	/* date -s takes whole seconds: round to the nearest. */
	snprintf(cmd, sizeof(cmd), "%s %lld %s", l->spec->name, (long long)now.tv_sec + (now.tv_nsec >= 500000000L),
	         hex);
	rc = saas__ssh_run(root, cmd, 30000, out, sizeof(out), &status);
	saas__ssh_close(root);
	if (rc < 0)
		return saas__error_wrap(rc, "fix-ups of the clone");
	if (status != 0 || strncmp(out, "ok", 2) != 0) {
		*bad = true;
		return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, status,
		                   "fix-ups of the clone failed (exit %d): the image lacks aas-restored? rebuild it", status);
	}
	return SAAS_OK;
}

struct fixup_run {
	struct launch *l;
	int64_t time_ms;
	bool bad;
	int rc;
	int klass;
	long code;
	char message[512];            /* copied: the thread's own error lives in its thread-local storage */
};

static void *fixup_main(void *arg)
{
	struct fixup_run *f = arg;

	if ((f->rc = clone_fixup(f->l, f->time_ms, &f->bad)) < 0) {
		const saas_error *e = saas_error_last();
		f->klass = e->klass;
		f->code = e->backend_code;
		snprintf(f->message, sizeof(f->message), "%s", e->message);
	}
	return NULL;
}

/*
 * A clone of the template in tdir. Once it runs, the engine's session and
 * the root fix-ups connect at the same time (each is an SSH handshake, which
 * the guest's CPUs do side by side). Failures leave nothing behind; the
 * caller boots cold instead, and rebuilds the template when the failure
 * says it is broken (l->template_bad), not merely slow.
 */
int saas__lv_boot_clone(struct launch *l)
{
	/* A clone waits as long as a cold boot would: on a loaded host it is slow too, and still the faster way. */
	int64_t budget = l->d->boot_timeout_ms, at[4] = { 0 };
	struct fixup_run fix = { l, budget, false, SAAS_OK, 0, 0, "" };
	struct timespec t0;
	pthread_t thread;
	bool threaded;
	char *state = NULL;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (!(state = saas__lv_path_join(l->tdir, "state"))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	if ((rc = saas__lv_launch_prepare(l)) < 0)
		goto out;
	at[0] = ms_since(&t0);
	if ((rc = saas__lv_launch_start(l)) < 0)
		goto out;
	at[1] = ms_since(&t0);
	if ((rc = clone_restore(l, state, &t0, budget)) < 0) {
		l->template_bad = !closing(l->d); /* QEMU could not load the saved state */
		goto out;
	}
	at[2] = ms_since(&t0);
	if (!(threaded = pthread_create(&thread, NULL, fixup_main, &fix) == 0))
		fixup_main(&fix);
	rc = saas__lv_launch_wait_ssh(l, &t0, budget);
	if (threaded)
		pthread_join(thread, NULL);
	if (rc == SAAS_OK && fix.rc < 0) {
		rc = fix.rc;
		l->template_bad = fix.bad;
		saas__error(rc, fix.klass, fix.code, "%s", fix.message);
	}
	at[3] = ms_since(&t0);
	/* Where a clone's time goes, for whoever tunes it. */
	if (rc == SAAS_OK)
		saas__lv_log(l->d, SAAS_LOG_DEBUG, "VM %s cloned: disk %lld ms, domain %lld ms, restore %lld ms, "
		             "SSH and fix-ups %lld ms", l->spec->name, (long long)at[0], (long long)(at[1] - at[0]),
		             (long long)(at[2] - at[1]), (long long)(at[3] - at[2]));
out:
	free(state);
	if (rc < 0) {
		saas__lv_launch_blame_console(l, rc);
		saas__lv_launch_undo(l);
	}
	return rc;
}

/* ---- template (to move to template.c) ---- */

/* What the template builder makes: a template VM of this shape. */
struct tmpl_job {
	struct drv *d;
	char key[33];
	char image[64];
	unsigned int vcpus, memory_mb, disk_gb;
};

static int destroy_template_vm(struct drv *d, virDomainPtr dom, const char *name, void *ud)
{
	char *vmdir;

	(void)ud;
	saas__lv_log(d, SAAS_LOG_INFO, "destroying template VM %s, left over from an interrupted build", name);
	virDomainDestroy(dom);
	if ((vmdir = saas__lv_drv_path(d, "vms", name)))
		saas__lv_rm_tree(vmdir);
	free(vmdir);
	return 0;
}

/* A template VM still running, half-written template directories: what an interrupted build left. */
void saas__lv_templates_cleanup(struct drv *d)
{
	char *root = saas__lv_path_join(d->dir, "templates");
	DIR *dir;
	struct dirent *e;

	saas__lv_own_domains(d, TPL_PREFIX, destroy_template_vm, NULL);
	if (root && saas__mkdir_p(root, 0700) == 0 && (dir = opendir(root))) {
		while ((e = readdir(dir))) {
			size_t len = strlen(e->d_name);
			char *sub;
			if (len > 4 && strcmp(e->d_name + len - 4, ".tmp") == 0 && (sub = saas__lv_path_join(root, e->d_name))) {
				saas__lv_rm_tree(sub);
				free(sub);
			}
		}
		closedir(dir);
	}
	free(root);
}

/*
 * A template is keyed by everything its saved state depends on: the format,
 * the accelerator, the image build, the VM's shape and the engine's key (the
 * guest holds it). A rebuilt image or a new size gets a new key, so a new
 * template; the old one is deleted once the new one is ready.
 */
void saas__lv_template_key(struct drv *d, const saas_vm_spec *spec, const struct image *im, char key[33])
{
	char *text = NULL, hash[65];
	unsigned int mem = spec->memory_mb;

	if (im->min_memory_mib && mem < im->min_memory_mib)
		mem = im->min_memory_mib;
	if (asprintf(&text, "%d|%s|%s|%s|%s|%u|%u|%u|%s", TEMPLATE_FORMAT, d->kvm ? "kvm" : "tcg", im->name, im->recipe,
	             im->boot_args, spec->vcpus, mem, im->disk ? spec->disk_gb : 0, d->pub) < 0) {
		key[0] = '\0';
		return;
	}
	saas__sha256_hex(hash, text, strlen(text));
	free(text);
	memcpy(key, hash, 32);
	key[32] = '\0';
}

/* The template entry of a key, made on first sight (ready if its directory is complete). Caller holds d->mu. */
struct tmpl *saas__lv_template_get_locked(struct drv *d, const char *key)
{
	struct tmpl *t;
	char *dir, *meta;
	struct stat st;

	for (t = d->tmpls; t; t = t->next)
		if (strcmp(t->key, key) == 0)
			return t;
	if (!(t = calloc(1, sizeof(*t))))
		return NULL;
	saas__strlcpy(t->key, key, sizeof(t->key));
	if ((dir = saas__lv_drv_path(d, "templates", key)) && (meta = saas__lv_path_join(dir, "template.json"))) {
		if (stat(meta, &st) == 0)
			t->state = TMPL_READY;
		free(meta);
	}
	free(dir);
	t->next = d->tmpls;
	d->tmpls = t;
	return t;
}

/* Delete the other templates of the same image and shape: a newer build of it replaced them. */
static void template_prune(struct drv *d, const struct tmpl_job *job)
{
	char *root = saas__lv_path_join(d->dir, "templates");
	DIR *dir = root ? opendir(root) : NULL;
	struct dirent *e;

	while (dir && (e = readdir(dir))) {
		char *sub, *meta;
		json_t *j;
		if (e->d_name[0] == '.' || strcmp(e->d_name, job->key) == 0)
			continue;
		if (!(sub = saas__lv_path_join(root, e->d_name)))
			break;
		if ((meta = saas__lv_path_join(sub, "template.json")) && (j = json_load_file(meta, 0, NULL))) {
			const char *image = json_string_value(json_object_get(j, "image"));
			if (image && strcmp(image, job->image) == 0 &&
			    json_integer_value(json_object_get(j, "vcpus")) == job->vcpus &&
			    json_integer_value(json_object_get(j, "memory_mb")) == job->memory_mb &&
			    json_integer_value(json_object_get(j, "disk_gb")) == job->disk_gb) {
				saas__lv_log(d, SAAS_LOG_INFO, "template %s replaced by %s; deleting it", e->d_name, job->key);
				saas__lv_rm_tree(sub);
			}
			json_decref(j);
		}
		free(meta);
		free(sub);
	}
	if (dir)
		closedir(dir);
	free(root);
}

/* Save a paused template VM's memory and device state to path (QMP migrate to an fd). */
static int template_save(struct drv *d, virDomainPtr dom, const char *path, int64_t *bytes)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600), rc;

	if (fd < 0)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "%s: %s", path, strerror(errno));
	/* QEMU caps migration bandwidth by default (128 MiB/s); a file takes what it gets. */
	rc = saas__lv_qmp(dom, "{\"execute\":\"migrate-set-parameters\",\"arguments\":{\"max-bandwidth\":1099511627776}}", -1,
	         NULL);
	if (rc == SAAS_OK)
		rc = saas__lv_qmp_getfd(dom, "aas-save", fd);
	close(fd);
	if (rc == SAAS_OK)
		rc = saas__lv_qmp(dom, "{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"fd:aas-save\"}}", -1, NULL);
	if (rc == SAAS_OK)
		rc = saas__lv_qmp_migration_wait(d, dom, TEMPLATE_SAVE_TIMEOUT_MS, bytes);
	return rc < 0 ? saas__error_wrap(rc, "saving the template") : SAAS_OK;
}

/*
 * Build one template: boot a VM of the job's shape to ready (isolated: it
 * makes no connection), let it settle, pause it, save its state, and freeze
 * its disk overlay as the base of every clone's. Written under KEY.tmp and
 * renamed into place when complete, so a half-built template is never used.
 */
static int template_build(struct tmpl_job *job)
{
	struct drv *d = job->d;
	struct image *im;
	saas_vm_spec spec;
	struct launch l;
	char name[64], *tdir = NULL, *tmp = NULL, *path = NULL, *host_key = NULL;
	struct timespec t0;
	int64_t bytes = 0;
	json_t *meta = NULL;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	snprintf(name, sizeof(name), TPL_PREFIX "%.16s", job->key);
	memset(&spec, 0, sizeof(spec));
	spec.name = name;
	spec.image = job->image;
	spec.vcpus = job->vcpus;
	spec.memory_mb = job->memory_mb;
	spec.disk_gb = job->disk_gb;
	spec.internet = 0;
	pthread_mutex_lock(&d->mu);
	rc = saas__lv_image_get(d, job->image, &im);
	if (rc == SAAS_OK && !(host_key = saas__strdup(im->host_key)))
		rc = SAAS_ENOMEM;
	pthread_mutex_unlock(&d->mu);
	if (rc < 0)
		return rc;
	memset(&l, 0, sizeof(l));
	l.d = d;
	l.spec = &spec;
	l.im = im;
	l.host_key = host_key;
	if (!(tdir = saas__lv_drv_path(d, "templates", job->key)) || asprintf(&tmp, "%s.tmp", tdir) < 0) {
		tmp = NULL;
		rc = saas__oom();
		goto out;
	}
	if ((rc = saas__lv_boot_cold(&l)) < 0)
		goto out;
	/* The engine's session must not live on in every clone, half open. */
	saas__ssh_close(l.ssh);
	l.ssh = NULL;
	for (int waited = 0; waited < TEMPLATE_SETTLE_MS && !closing(d); waited += 50)
		sleep_ms(50);
	saas__lv_rm_tree(tmp);
	if (saas__mkdir_p(tmp, 0700) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot create %s: %s", tmp, strerror(errno));
		goto out;
	}
	if (virDomainSuspend(l.dom) < 0) {
		rc = saas__lv_virt_error("pausing the template VM");
		goto out;
	}
	if (!(path = saas__lv_path_join(tmp, "state"))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	if ((rc = template_save(d, l.dom, path, &bytes)) < 0)
		goto out;
	virDomainDestroy(l.dom);
	virDomainFree(l.dom);
	l.dom = NULL;
	free(path);
	path = NULL;
	if (l.overlay) {
		if (!(path = saas__lv_path_join(tmp, "disk.qcow2"))) {
			rc = SAAS_ENOMEM;
			goto out;
		}
		if (rename(l.overlay, path) < 0) {
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "freezing the template's disk: %s", strerror(errno));
			goto out;
		}
		free(path);
		path = NULL;
	}
	meta = json_pack("{s:i, s:s, s:s, s:I, s:I, s:I, s:s, s:I, s:I}", "format", TEMPLATE_FORMAT, "image", im->name,
	                 "recipe", im->recipe, "vcpus", (json_int_t)job->vcpus, "memory_mb", (json_int_t)job->memory_mb,
	                 "disk_gb", (json_int_t)job->disk_gb, "accel", d->kvm ? "kvm" : "tcg", "state_bytes",
	                 (json_int_t)bytes, "build_ms", (json_int_t)ms_since(&t0));
	if (!meta || !(path = saas__lv_path_join(tmp, "template.json")) || json_dump_file(meta, path, JSON_INDENT(2)) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "writing the template's description");
		goto out;
	}
	saas__lv_rm_tree(tdir);
	if (rename(tmp, tdir) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "%s: %s", tdir, strerror(errno));
		goto out;
	}
	saas__lv_log(d, SAAS_LOG_INFO, "template %s ready in %lld ms (%s, %u vCPU, %u MiB, %lld MiB of state)", job->key,
	             (long long)ms_since(&t0), im->name, job->vcpus, job->memory_mb, (long long)(bytes >> 20));
	template_prune(d, job);
out:
	saas__lv_launch_undo(&l);
	if (rc < 0 && tmp)
		saas__lv_rm_tree(tmp);
	json_decref(meta);
	free(path);
	free(tmp);
	free(tdir);
	free(host_key);
	return rc;
}

static void *builder_main(void *arg)
{
	struct tmpl_job *job = arg;
	struct drv *d = job->d;
	int rc = template_build(job);
	struct tmpl *t;

	if (rc < 0 && !closing(d))
		saas__lv_log(d, SAAS_LOG_WARN, "template %s (%s, %u vCPU, %u MiB) failed: %s; sandboxes boot cold, next try in %d s",
		             job->key, job->image, job->vcpus, job->memory_mb, saas_error_last()->message, TEMPLATE_RETRY_MS / 1000);
	pthread_mutex_lock(&d->mu);
	for (t = d->tmpls; t; t = t->next)
		if (strcmp(t->key, job->key) == 0) {
			t->state = rc == SAAS_OK ? TMPL_READY : TMPL_BROKEN;
			t->retry_at_ms = saas__now_ms() + TEMPLATE_RETRY_MS;
		}
	d->builder_busy = false;
	pthread_mutex_unlock(&d->mu);
	free(job);
	return NULL;
}

/* Start building the template of key (if no build runs and it is due). Caller holds d->mu. */
void saas__lv_template_request_locked(struct drv *d, struct tmpl *t, const saas_vm_spec *spec, const struct image *im)
{
	struct tmpl_job *job;

	if (d->builder_busy || closing(d) || t->state == TMPL_BUILDING || t->state == TMPL_READY ||
	    (t->state == TMPL_BROKEN && saas__now_ms() < t->retry_at_ms))
		return;
	if (d->builder_started) {
		pthread_join(d->builder, NULL); /* finished: builder_busy is false */
		d->builder_started = false;
	}
	if (!(job = calloc(1, sizeof(*job))))
		return;
	job->d = d;
	saas__strlcpy(job->key, t->key, sizeof(job->key));
	saas__strlcpy(job->image, im->name, sizeof(job->image));
	job->vcpus = spec->vcpus;
	job->memory_mb = spec->memory_mb;
	job->disk_gb = spec->disk_gb;
	if (pthread_create(&d->builder, NULL, builder_main, job) != 0) {
		free(job);
		return;
	}
	d->builder_started = d->builder_busy = true;
	t->state = TMPL_BUILDING;
	saas__lv_log(d, SAAS_LOG_INFO, "building template %s (%s, %u vCPU, %u MiB) in the background", t->key, im->name,
	             spec->vcpus, spec->memory_mb);
}

/* A template that failed to clone: delete it and build it again later. */
void saas__lv_template_break(struct drv *d, const char *key)
{
	char *dir = saas__lv_drv_path(d, "templates", key);
	struct tmpl *t;

	pthread_mutex_lock(&d->mu);
	for (t = d->tmpls; t; t = t->next)
		if (strcmp(t->key, key) == 0) {
			t->state = TMPL_BROKEN;
			t->retry_at_ms = saas__now_ms() + TEMPLATE_RETRY_MS;
		}
	pthread_mutex_unlock(&d->mu);
	if (dir)
		saas__lv_rm_tree(dir);
	free(dir);
}
