/*
 * The registry of running VMs: each VM's SSH forward, pinned host key and
 * session, reference-counted so that a destroy never frees a VM another
 * thread is using. A VM the registry has not seen (the engine restarted) is
 * adopted from its domain's metadata by the driver's vm_state.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver/libvirt/domain.h"
#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/vm.h"
#include "transport/control.h"

void saas__lv_vm_put(struct drv *d, struct vm *v)
{
	bool last;

	pthread_mutex_lock(&d->mu);
	last = --v->refs == 0;
	pthread_mutex_unlock(&d->mu);
	if (!last)
		return;
	saas__ssh_close(v->ssh);
	saas__ctl_close(v->ctl);
	free(v->host_key);
	pthread_mutex_destroy(&v->mu);
	pthread_mutex_destroy(&v->ctl_mu);
	pthread_cond_destroy(&v->ctl_cv);
	free(v);
}

/* Caller holds d->mu. */
static struct vm *vm_find_locked(struct drv *d, const char *name)
{
	for (struct vm *v = d->vms; v; v = v->next)
		if (strcmp(v->name, name) == 0)
			return v;
	return NULL;
}

struct vm *saas__lv_vm_get(struct drv *d, const char *name)
{
	struct vm *v;

	pthread_mutex_lock(&d->mu);
	if ((v = vm_find_locked(d, name)))
		v->refs++;
	pthread_mutex_unlock(&d->mu);
	return v;
}

/* Take a VM out of the table; the table's reference is dropped by the caller. */
struct vm *saas__lv_vm_unlink(struct drv *d, const char *name)
{
	struct vm **pp, *v = NULL;

	pthread_mutex_lock(&d->mu);
	for (pp = &d->vms; *pp; pp = &(*pp)->next)
		if (strcmp((*pp)->name, name) == 0) {
			v = *pp;
			*pp = v->next;
			break;
		}
	pthread_mutex_unlock(&d->mu);
	return v;
}

int saas__lv_vm_add(struct drv *d, const char *name, const struct image *im, unsigned int port, unsigned int uid,
                    const char *host_key, saas__ssh *ssh)
{
	struct vm *v = calloc(1, sizeof(*v));

	if (!v || !(v->host_key = saas__strdup(host_key))) {
		free(v);
		return saas__oom();
	}
	saas__strlcpy(v->name, name, sizeof(v->name));
	v->im = im;
	v->port = port;
	v->uid = uid;
	v->ssh = ssh;
	v->refs = 1;
	pthread_mutex_init(&v->mu, NULL);
	pthread_mutex_init(&v->ctl_mu, NULL);
	if (saas__cond_init_monotonic(&v->ctl_cv) != 0) {
		pthread_mutex_destroy(&v->mu);
		pthread_mutex_destroy(&v->ctl_mu);
		free(v->host_key);
		free(v);
		return saas__oom();
	}
	pthread_mutex_lock(&d->mu);
	v->next = d->vms;
	d->vms = v;
	pthread_mutex_unlock(&d->mu);
	return SAAS_OK;
}

/* ---- the control port's one user ------------------------------------------------------------ */

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait on the port's condition until it is signalled or until (mono_ms); ctl_mu held. */
static void port_wait_until(struct vm *v, int64_t until)
{
	struct timespec ts;
	int64_t left = until - mono_ms();

	saas__deadline(&ts, CLOCK_MONOTONIC, left > 0 ? left : 0);
	pthread_cond_timedwait(&v->ctl_cv, &v->ctl_mu, &ts);
}

bool saas__lv_port_take(struct vm *v, int user, int wait_ms)
{
	int64_t until = mono_ms() + (wait_ms > 0 ? wait_ms : 0);
	bool got;

	pthread_mutex_lock(&v->ctl_mu);
	for (;;) {
		if ((got = v->ctl_user == PORT_FREE))
			break;
		if (user == PORT_FILES && v->ctl_user == PORT_FILES)
			pthread_cond_wait(&v->ctl_cv, &v->ctl_mu);
		else if (mono_ms() < until)
			port_wait_until(v, until);
		else
			break;
	}
	if (got)
		v->ctl_user = user;
	pthread_mutex_unlock(&v->ctl_mu);
	return got;
}

void saas__lv_port_give(struct vm *v)
{
	pthread_mutex_lock(&v->ctl_mu);
	v->ctl_user = PORT_FREE;
	v->ctl_starting = false;
	v->ctl_free_at = mono_ms();
	pthread_cond_broadcast(&v->ctl_cv);
	pthread_mutex_unlock(&v->ctl_mu);
}

bool saas__lv_port_quiet(struct drv *d, struct vm *v, int quiet_ms)
{
	bool quiet = false;

	pthread_mutex_lock(&v->ctl_mu);
	while (!closing(d) && !__atomic_load_n(&v->gone, __ATOMIC_ACQUIRE)) {
		int64_t until = v->ctl_free_at + quiet_ms;
		if (v->ctl_user == PORT_FREE && mono_ms() >= until) {
			quiet = true;
			break;
		}
		/* Looked at again at least every PORT_QUIET_POLL_MS: the driver's closing signals no port (a destroy does). */
		if (v->ctl_user != PORT_FREE || until - mono_ms() > PORT_QUIET_POLL_MS)
			until = mono_ms() + PORT_QUIET_POLL_MS;
		port_wait_until(v, until);
	}
	pthread_mutex_unlock(&v->ctl_mu);
	return quiet;
}

void saas__lv_vm_going(struct drv *d, const char *name)
{
	struct vm *v = saas__lv_vm_get(d, name);

	if (!v)
		return;
	__atomic_store_n(&v->gone, true, __ATOMIC_RELEASE);
	/* A wait for the port's quiet ends now (saas__lv_port_quiet), not at its next look. */
	pthread_mutex_lock(&v->ctl_mu);
	pthread_cond_broadcast(&v->ctl_cv);
	pthread_mutex_unlock(&v->ctl_mu);
	saas__lv_vm_put(d, v);
}

/* A booting guest's knock can last many seconds under TCG: the driver closing does not wait for it... */
static int ssh_cancelled(void *ud)
{
	return closing(ud);
}

/* ...nor, for a template's VM, the engine stopping. */
static int ssh_abandoned(void *ud)
{
	return stopping(ud);
}

int saas__lv_ssh_connect(struct drv *d, bool background, unsigned int port, const char *host_key, int timeout_ms,
                         saas__ssh **out)
{
	saas__ssh_config cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.host = d->listen;
	cfg.port = port;
	cfg.user = SSH_USER;
	cfg.private_key = d->key;
	cfg.public_key = d->pub;
	cfg.host_key = host_key;
	cfg.connect_timeout_ms = timeout_ms;
	cfg.cancelled = background ? ssh_abandoned : ssh_cancelled;
	cfg.cancelled_ud = d;
	return saas__ssh_open(out, &cfg);
}

/*
 * The VM's SSH forward as its domain's metadata has it now, when that is not
 * the one the registry knows (v->mu held): another server of the cluster made
 * the domain anew under the same name (a paused sandbox resumed there), on
 * another port. The host key is the same (the snapshot's).
 */
static void vm_moved(struct drv *d, struct vm *v)
{
	virDomainPtr dom = virDomainLookupByName(saas__lv_conn(d), v->name);
	char *key = NULL, *owner = NULL;
	unsigned int port = 0;

	if (dom && saas__lv_domain_meta(dom, &port, &key, &owner) == 0 && strcmp(owner, d->owner) == 0 && port &&
	    port != v->port) {
		saas__lv_log(d, SAAS_LOG_INFO, "VM %s was made again (its SSH forward moved from port %u to %u)", v->name,
		             v->port, port);
		v->port = port;
	}
	if (dom)
		virDomainFree(dom);
	free(key);
	free(owner);
	saas__error_clear();
}

/*
 * The VM's SSH connection, reopened if it died, with a reference the caller
 * lets go with saas__ssh_close. A dead connection is only replaced here:
 * threads still in an operation on it hold their own references, and it is
 * freed when the last of them returns (its operations fail meanwhile).
 */
int saas__lv_vm_session(struct drv *d, const char *name, saas__ssh **out)
{
	struct vm *v;
	int rc;

	/* A dead host fails here at once, not at the end of an SSH timeout. */
	if ((rc = d->host->check(d)) < 0)
		return rc;
	/* Another engine of the cluster may have made it: adopted at first use, as after a restart. */
	if (!(v = saas__lv_vm_get(d, name))) {
		int state;
		if ((rc = saas__lv_vm_adopt(d, name, &state)) < 0)
			return rc;
		v = saas__lv_vm_get(d, name);
	}
	if (!v)
		return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "no VM %s is running", name);
	pthread_mutex_lock(&v->mu);
	if (!v->ssh || !saas__ssh_alive(v->ssh)) {
		saas__ssh_close(v->ssh);
		v->ssh = NULL;
		vm_moved(d, v);
		if ((rc = saas__lv_ssh_connect(d, false, v->port, v->host_key, 15000, &v->ssh)) < 0)
			saas__error_wrap(rc, "reconnecting to %s", name);
	}
	if (rc == SAAS_OK)
		*out = saas__ssh_ref(v->ssh);
	pthread_mutex_unlock(&v->mu);
	saas__lv_vm_put(d, v);
	return rc;
}

