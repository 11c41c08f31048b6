/*
 * Making a VM: its directory and disk overlay, its domain started on a free
 * loopback port for the SSH forward, the wait for the engine's session, and
 * the cold boot (a clone, clone.c, shares all but the boot). A failed launch
 * says what the VM's console said last, and leaves nothing behind.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "driver/libvirt/conf.h"
#include "driver/libvirt/console.h"
#include "driver/libvirt/domain.h"
#include "driver/libvirt/launch.h"
#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/reap.h"
#include "driver/libvirt/vm.h"
#include "transport/control.h"
#include "util/spawn.h"

/* The end of a VM's console: what a failed boot says about itself. */
static char *console_tail(const char *vmdir)
{
	char *path = saas__lv_path_join(vmdir, "console.log"), *tail;

	if (!path)
		return NULL;
	tail = saas__console_tail(path, CONSOLE_TAIL);
	free(path);
	return tail;
}

void saas__lv_launch_undo(struct launch *l)
{
	saas__ssh_close(l->ssh);
	l->ssh = NULL;
	if (l->dom) {
		virDomainDestroy(l->dom);
		virDomainFree(l->dom);
		l->dom = NULL;
	}
	saas__lv_limits_release(l->d, l->spec->name);
	if (l->overlay)
		l->d->host->overlay_drop(l->d, l->vol ? l->vol : l->spec->name);
	if (l->dir)
		saas__lv_rm_tree(l->dir);
	free(l->dir);
	free(l->overlay);
	l->dir = l->overlay = NULL;
}

/* The VM's directory and, for disk images, its overlay: on the image's disk, or on the template's frozen one. */
int saas__lv_launch_prepare(struct launch *l)
{
	if (!(l->dir = saas__lv_drv_path(l->d, "vms", l->spec->name)))
		return SAAS_ENOMEM;
	/*
	 * VMs' names are all of one length (ids, templates' keys): a state
	 * directory too long for the socket's path has the port in none of them.
	 * A remote host's port is reached through libvirt, never by a path here:
	 * there, every VM of an image that serves it has it, whatever engine
	 * made it (their templates are shared).
	 */
	l->control = l->d->host->control_port && l->im->control && (l->d->host->control_open || saas__ctl_fits(l->dir));
	saas__lv_rm_tree(l->dir); /* a leftover of a failed attempt */
	if (saas__mkdir_p(l->dir, 0700) < 0)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot create %s: %s", l->dir, strerror(errno));
	return l->d->host->overlay_make(l);
}

bool saas__lv_virt_transient(const virError *err)
{
	if (!err)
		return false;
	/* A system call's errno is in int1 (virReportSystemError), over a remote connection too. */
	if (err->code == VIR_ERR_SYSTEM_ERROR && err->int1 == EAGAIN) /* EWOULDBLOCK here */
		return true;
	return err->message && strstr(err->message, "Resource temporarily unavailable");
}

/*
 * Define and start the domain (paused for a clone), on a free loopback port
 * for its SSH forward. A start that fails for the moment
 * (saas__lv_virt_transient) is tried again, LAUNCH_START_TRIES in all,
 * LAUNCH_START_RETRY_MS apart and twice that each time: a clone or a spare
 * that gave up at once would boot cold instead (ten times as long) or wait
 * out its template's backoff.
 */
int saas__lv_launch_start(struct launch *l)
{
	struct drv *d = l->d;
	bool incoming = l->tdir != NULL;
	int rc = SAAS_EBACKEND, tries = 1;

	/* A port found free can be taken before QEMU binds it: try a few. */
	for (int attempt = 0; attempt < 5; attempt++) {
		struct saas__lv_domain def = { l->spec, l->im, d->owner, d->authkey_b64, l->dir, l->overlay, 0, false,
			                       l->internet, incoming };
		char *xml;
		if ((rc = d->host->domain_place(l, &def)) < 0)
			return rc;
		def.port = l->port;
		def.uid = l->uid;
		def.gid = d->cf.guest_gid ? (unsigned int)d->cf.guest_gid : l->uid;
		def.policy = l->policy;
		def.cpu_milli = d->lim_cpu ? d->cpu_milli : 0;
		def.io_weight = d->lim_io ? saas__lv_io_weight(l->spec->vcpus) : 0;
		def.mem = l->mem;
		def.mem_path = l->mem_path;
		def.control = l->control;
		def.spare_until_ms = l->spare_until_ms;
		def.emulator = d->emulator;
		pthread_mutex_lock(&d->mu); /* d->kvm changes when KVM turns out not to work */
		def.kvm = d->kvm;
		pthread_mutex_unlock(&d->mu);
		xml = saas__lv_domain_xml(&def);
		if (!xml)
			return saas__oom();
		l->dom = virDomainCreateXML(saas__lv_conn(d), xml, incoming ? VIR_DOMAIN_START_PAUSED : 0);
		free(xml);
		/*
		 * Every QEMU the driver starts starts here (virDomainCreateXML's only
		 * call: cold boots, clones, spares, template builds, forks' children
		 * and restores of snapshots all come through launch_start; the VM
		 * host's virDomainRestore is a remote daemon's child). Under the
		 * process's reaper it is our child: unregistered, its zombie would
		 * stay and its destroy wait 15 s and fail.
		 */
		if (l->dom)
			saas__lv_reap_vm(d, l->spec->name);
		/* A clone gets its limits before its state comes in: it never runs unlimited. */
		if (l->dom)
			return saas__lv_limits_apply(d, l->dom, l->spec->name, l->spec->vcpus,
			                             saas__lv_domain_memory(l->spec, l->im), def.kvm);
		rc = saas__lv_virt_error("starting the VM");
		if (saas__lv_virt_transient(virGetLastError()) && tries < LAUNCH_START_TRIES && !saas__lv_launch_quit(l)) {
			int64_t wait_ms = (int64_t)LAUNCH_START_RETRY_MS << (tries - 1);
			saas__lv_log(d, SAAS_LOG_WARN, "VM %s: its domain's start failed for the moment (%s); trying again in "
			             "%lld ms (try %d of %d)", l->spec->name, saas_error_last()->message, (long long)wait_ms,
			             tries + 1, LAUNCH_START_TRIES);
			saas__sleep_ms(wait_ms);
			tries++;
			attempt--;
			continue;
		}
		/*
		 * A remote host whose libvirtd has no cpu controller: as on a host
		 * without one here (cgroup.c), VMs run without the CPU limit, said
		 * once in the log.
		 */
		if (d->host->limits_learned && def.cpu_milli && strstr(saas_error_last()->message, "cgroup cpu")) {
			saas__lv_log(d, SAAS_LOG_WARN, "VM host %s gives libvirt no cpu cgroup controller: VMs run there "
			             "without their CPU limit (enable it in machine.slice, or set cpu_limit=off)", d->uri);
			pthread_mutex_lock(&d->mu);
			d->lim_cpu = false;
			pthread_mutex_unlock(&d->mu);
			attempt--;
			continue;
		}
		/*
		 * /dev/kvm can open and still not run a guest (nested virtualisation
		 * that lacks pieces): fall back to TCG for good, and say so once. A
		 * clone cannot: its template was saved under KVM.
		 */
		if (!incoming && d->kvm && d->accel == ACCEL_AUTO && strcasestr(saas_error_last()->message, "kvm")) {
			saas__lv_log(d, SAAS_LOG_WARN, "KVM does not work here (%s); using TCG", saas_error_last()->message);
			pthread_mutex_lock(&d->mu);
			d->kvm = false;
			pthread_mutex_unlock(&d->mu);
			attempt--;
			continue;
		}
		if (!strstr(saas_error_last()->message, "hostfwd") && !strstr(saas_error_last()->message, "address") &&
		    !strstr(saas_error_last()->message, "forwarding"))
			return rc;
	}
	return rc;
}

/* Wait until the engine's SSH session is up; a VM that dies meanwhile fails fast. */
int saas__lv_launch_wait_ssh(struct launch *l, const struct timespec *t0, int64_t budget_ms)
{
	int64_t knock_ms = 2000, before;

	for (;;) {
		int state = 0;
		if (saas__ms_since(t0) > budget_ms)
			return saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_DRIVER, 0, "the VM did not become reachable in %lld s",
			                   (long long)(budget_ms / 1000));
		if (saas__lv_launch_quit(l))
			return saas__error(SAAS_EIO, SAAS_ERRCLASS_DRIVER, 0, "the engine is shutting down");
		if (virDomainGetState(l->dom, &state, NULL, 0) < 0 || state != VIR_DOMAIN_RUNNING) {
			l->died = true;
			return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, state, "the VM stopped while booting");
		}
		/*
		 * A booting guest is knocked at every 2 s; a restored clone already
		 * runs sshd, and a handshake cut short (under load one takes over a
		 * second) is work thrown away and leaks in libssh2: give it the time.
		 */
		before = saas__ms_since(t0);
		if (saas__lv_ssh_connect(l->d, l->background, l->port, l->host_key,
		                         l->tdir ? (int)(budget_ms - before) + 1 : (int)knock_ms, &l->ssh) == SAAS_OK)
			return SAAS_OK;
		if (saas__ssh_host_key_mismatch(saas_error_last()))
			return SAAS_EBACKEND;
		/*
		 * A knock that used all its time met an sshd that answers, only too
		 * slowly for it: OpenSSH 10 (Debian 13) executes a new sshd-session
		 * for every connection, which takes a 1-vCPU TCG guest over 2 s, so
		 * every knock was cut short and the guest never became reachable.
		 * Each such knock waits twice as long as the last.
		 */
		if (saas__ms_since(t0) - before >= knock_ms && knock_ms < budget_ms)
			knock_ms *= 2;
	}
}

/* What a VM's console said last, added to the error of a failed launch. */
void saas__lv_launch_blame_console(struct launch *l, int rc)
{
	char *tail;

	if (!l->dir || !(tail = console_tail(l->dir)))
		return;
	saas__error_wrap(rc, "%s (console: %s%s)", saas_error_last()->message, *tail ? "..." : "nothing",
	                 tail);
	free(tail);
}

/* One cold boot, given budget_ms to come up. */
static int boot_cold_once(struct launch *l, int64_t budget_ms)
{
	struct timespec t0;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	if ((rc = saas__lv_launch_prepare(l)) < 0 || (rc = saas__lv_launch_start(l)) < 0 ||
	    (rc = saas__lv_launch_wait_ssh(l, &t0, budget_ms)) < 0) {
		saas__lv_launch_blame_console(l, rc);
		saas__lv_launch_undo(l);
		return rc < 0 ? rc : SAAS_EBACKEND;
	}
	return SAAS_OK;
}

/*
 * A cold boot. A guest that stalls in boot, or dies in it (both seen rarely
 * under TCG on a loaded host, with nothing on the console), gets one fresh VM
 * more; each try has half the boot timeout.
 */
int saas__lv_boot_cold(struct launch *l)
{
	struct drv *d = l->d;
	int rc = SAAS_OK;

	for (int attempt = 0; attempt < 2; attempt++) {
		l->died = false;
		if ((rc = boot_cold_once(l, d->boot_timeout_ms / 2)) == SAAS_OK || saas__lv_launch_quit(l) ||
		    (rc != SAAS_ETIMEOUT && !l->died))
			break;
		if (attempt == 0)
			saas__lv_log(d, SAAS_LOG_WARN, "VM %s: %s; trying a fresh VM once more", l->spec->name,
			             saas_error_last()->message);
	}
	return rc;
}

