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

#include "driver/libvirt/console.h"
#include "transport/control.h"
#include "driver/libvirt/libvirt_driver.h"
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

static int free_port(unsigned int *port)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "socket: %s", strerror(errno));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
		int err = errno;
		close(fd);
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, err, "no free loopback port: %s", strerror(err));
	}
	*port = ntohs(sa.sin_port);
	close(fd);
	return SAAS_OK;
}

/*
 * A port for the guest's SSH forward on a remote host, which the engine
 * cannot probe: one at random from a range, tried again (launch_start) when
 * QEMU finds it taken.
 */
static unsigned int remote_port(void)
{
	uint32_t r;

	if (saas__random(&r, sizeof(r)) < 0)
		r = (uint32_t)rand();
	return REMOTE_PORT_FIRST + r % REMOTE_PORT_COUNT;
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
	if (l->d->remote && l->overlay)
		saas__lv_overlay_remote_delete(l->d, l->vol ? l->vol : l->spec->name);
	if (l->dir)
		saas__lv_rm_tree(l->dir);
	free(l->dir);
	free(l->overlay);
	l->dir = l->overlay = NULL;
}

/* The VM's directory and, for disk images, its overlay: on the image's disk, or on the template's frozen one. */
int saas__lv_launch_prepare(struct launch *l)
{
	const char *base = l->im->disk;
	char *tbase = NULL;
	int rc = SAAS_OK;

	if (!(l->dir = saas__lv_drv_path(l->d, "vms", l->spec->name)))
		return SAAS_ENOMEM;
	/*
	 * VMs' names are all of one length (ids, templates' keys): a state
	 * directory too long for the socket's path has the port in none of them.
	 */
	l->control = l->im->control && saas__ctl_fits(l->dir);
	saas__lv_rm_tree(l->dir); /* a leftover of a failed attempt */
	if (saas__mkdir_p(l->dir, 0700) < 0)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot create %s: %s", l->dir, strerror(errno));
	/*
	 * Remote: the overlay is a volume on the host, on the image's disk there
	 * (lv_create uploaded it) or a template's frozen one. The control port is
	 * a socket on the host, out of the engine's reach: none there, in
	 * templates and clones alike.
	 */
	if (l->d->remote) {
		l->control = false;
		if (!base)
			return SAAS_OK;
		if (l->tdir && (rc = saas__lv_tpl_remote_disk(l->d, l->tdir, &tbase)) < 0)
			return rc;
		rc = saas__lv_overlay_remote(l->d, l->vol ? l->vol : l->spec->name, tbase ? tbase : l->im->host_disk,
		                             l->spec->disk_gb, &l->overlay);
		free(tbase);
		return rc;
	}
	if (!base)
		return saas__lv_confine_vm_files(l);
	if (l->tdir && !(base = tbase = saas__lv_path_join(l->tdir, "disk.qcow2")))
		return SAAS_ENOMEM;
	if (!(l->overlay = saas__lv_path_join(l->dir, "disk.qcow2"))) {
		rc = SAAS_ENOMEM;
	} else {
		char size[32];
		const char *argv[] = { "qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", base,
			               l->overlay, size, NULL };
		snprintf(size, sizeof(size), "%uG", l->spec->disk_gb);
		if ((rc = saas__run(argv, NULL)) < 0)
			rc = saas__error_wrap(SAAS_EBACKEND, "creating the disk overlay");
		else
			rc = saas__lv_confine_vm_files(l);
	}
	free(tbase);
	return rc;
}

/* Define and start the domain (paused for a clone), on a free loopback port for its SSH forward. */
int saas__lv_launch_start(struct launch *l)
{
	struct drv *d = l->d;
	bool incoming = l->tdir != NULL;
	int rc = SAAS_EBACKEND;

	/* A port found free can be taken before QEMU binds it: try a few. */
	for (int attempt = 0; attempt < 5; attempt++) {
		struct saas__lv_domain def = { l->spec, l->im, d->owner, d->authkey_b64, l->dir, l->overlay, 0, false,
			                       l->internet, incoming };
		char *xml;
		if (d->remote)
			l->port = remote_port();
		else if ((rc = free_port(&l->port)) < 0)
			return rc;
		if (d->remote) {
			def.vmdir = NULL;
			def.listen = d->listen;
			def.kernel = l->im->host_kernel;
			def.initrd = l->im->host_initrd;
		}
		def.port = l->port;
		def.uid = l->uid;
		def.gid = d->guest_gid ? (unsigned int)d->guest_gid : l->uid;
		def.policy = l->policy;
		def.cpu_milli = d->lim_cpu ? d->cpu_milli : 0;
		def.io_weight = d->lim_io ? saas__lv_io_weight(l->spec->vcpus) : 0;
		def.mem = l->mem;
		def.mem_path = l->mem_path;
		def.control = l->control;
		pthread_mutex_lock(&d->mu); /* d->kvm changes when KVM turns out not to work */
		def.kvm = d->kvm;
		pthread_mutex_unlock(&d->mu);
		xml = saas__lv_domain_xml(&def);
		if (!xml)
			return saas__oom();
		l->dom = virDomainCreateXML(d->conn, xml, incoming ? VIR_DOMAIN_START_PAUSED : 0);
		free(xml);
		/* A clone gets its limits before its state comes in: it never runs unlimited. */
		if (l->dom)
			return saas__lv_limits_apply(d, l->dom, l->spec->name, l->spec->vcpus,
			                             saas__lv_domain_memory(l->spec, l->im), def.kvm);
		rc = saas__lv_virt_error("starting the VM");
		/*
		 * A remote host whose libvirtd has no cpu controller: as on a host
		 * without one here (cgroup.c), VMs run without the CPU limit, said
		 * once in the log.
		 */
		if (d->remote && def.cpu_milli && strstr(saas_error_last()->message, "cgroup cpu")) {
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

