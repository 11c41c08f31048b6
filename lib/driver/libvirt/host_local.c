/*
 * The local VM host (host.h): libvirt on this machine, embedded in the engine
 * (its root in the state directory) or a libvirtd reached by a local URI.
 * QEMU's files are the engine's own: each VM's directory, its overlay made
 * with qemu-img on the image's disk or a template's frozen one, templates'
 * and snapshots' directories in the state directory; the network guard,
 * per-VM egress and QEMU's uids are this machine's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libvirt/libvirt.h>

#include "driver/libvirt/conf.h"
#include "driver/libvirt/domain.h"
#include "driver/libvirt/egress.h"
#include "driver/libvirt/guard.h"
#include "driver/libvirt/host.h"
#include "driver/libvirt/launch.h"
#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/memfile.h"
#include "driver/libvirt/qmp.h"
#include "driver/libvirt/template.h"
#include "util/spawn.h"

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

/*
 * Before the connection: the accelerator, and what confines QEMU here. The
 * embedded driver gets its root, the guard, per-VM uids, qemu.conf and
 * per-VM egress; another local URI the guard only when it is not the system
 * libvirtd (whose confinement the connection shows: local_connect).
 */
static int local_prepare(struct drv *d, const saas_driver_env *env)
{
	char *root = NULL;
	int rc = SAAS_OK;

	d->kvm = d->accel == ACCEL_KVM || (d->accel == ACCEL_AUTO && kvm_usable());
	if (d->accel == ACCEL_KVM && !kvm_usable())
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "accel=kvm, but /dev/kvm is not usable");
	if (d->uri) {
		/* Not the system libvirtd: no per-VM labels, so no guard; network=internet fails before connecting. */
		if (!strstr(d->uri, ":///system"))
			rc = saas__lv_network_setup(d, false);
		return rc;
	}
	if ((rc = saas__lv_embed_root(env->state_dir, &root)) < 0)
		goto out;
	/* Confinement last: the guard's files are among those it makes private. */
	if ((rc = saas__lv_network_setup(d, true)) < 0)
		goto out;
	if (d->cf.uids_mode != UIDS_OFF &&
	    (rc = saas__lv_confine_setup(d, env->state_dir, root, d->cf.uids_mode == UIDS_ON)) < 0)
		goto out;
	if ((rc = saas__lv_write_qemu_conf(root, d->cf.confined)) < 0)
		goto out;
	/* Per-VM egress needs both: each QEMU under its own uid, and the guard. */
	if ((rc = saas__lv_egress_open(d, env->state_dir)) < 0)
		goto out;
	if (asprintf(&d->uri, "qemu:///embed?root=%s", root) < 0) {
		d->uri = NULL;
		rc = saas__oom();
		goto out;
	}
	d->root = root;
	root = NULL;
out:
	free(root);
	return rc;
}

static int local_connect(struct drv *d, const saas_driver_env *env)
{
	int rc;

	if (!(d->conn = virConnectOpen(d->uri))) {
		rc = saas__lv_virt_error("cannot connect to libvirt");
		return saas__error_wrap(rc, "%s", d->uri);
	}
	/*
	 * A system libvirtd: confined by its DAC driver, which the connection
	 * shows. The guard and per-VM egress follow, as in the embedded mode:
	 * both match what only confinement decides (QEMU's group and uid).
	 */
	if (!d->root) {
		if (d->cf.uids_mode != UIDS_OFF &&
		    (rc = saas__lv_confine_system(d, env->state_dir, d->cf.uids_mode == UIDS_ON)) < 0)
			return rc;
		if ((strstr(d->uri, ":///system") && (rc = saas__lv_network_setup(d, false)) < 0) ||
		    (rc = saas__lv_egress_open(d, env->state_dir)) < 0)
			return rc;
	}
	saas__lv_limits_setup(d, d->root != NULL);
	return SAAS_OK;
}

/* libvirt on this machine does not go away under the engine. */
static int local_check(struct drv *d)
{
	(void)d;
	return SAAS_OK;
}

/* QEMU reads the image's files where they are (or where image.c staged them). */
static int local_image_place(struct drv *d, struct image *im)
{
	(void)d;
	(void)im;
	return SAAS_OK;
}

/* A qcow2 overlay in the VM's directory, given to its uid, on the image's disk or the template's frozen one. */
static int local_overlay_make(struct launch *l)
{
	const char *base = l->im->disk;
	char *tbase = NULL;
	int rc;

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

/* The overlay is in the VM's directory, which goes with it. */
static void local_overlay_drop(struct drv *d, const char *vol)
{
	(void)d;
	(void)vol;
}

/* A loopback port free now for the guest's SSH forward; the VM's files are where the engine made them. */
static int local_domain_place(struct launch *l, struct saas__lv_domain *def)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	(void)def;
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
	l->port = ntohs(sa.sin_port);
	close(fd);
	return SAAS_OK;
}

/*
 * The saved state's file handed to the clone's QEMU and read as an incoming
 * migration; a private clone of a mapped template or fork first told that
 * its RAM is not in the stream (and a fork's child whose RAM is, that its
 * stream was saved so).
 */
static int local_state_in(struct launch *l, const char *what, const char *state_path, const struct timespec *t0,
                          int64_t budget_ms)
{
	struct stat st;
	int fd, rc = SAAS_OK;

	(void)t0;
	(void)budget_ms;
	if ((fd = open(state_path, O_RDONLY | O_CLOEXEC)) < 0)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "%s: %s", state_path, strerror(errno));
	if (fstat(fd, &st) == 0)
		l->state_bytes = (int64_t)st.st_size;
	if (l->mem == LV_MEM_PRIVATE || l->ignore_shared)
		rc = saas__lv_qmp(l->dom, IGNORE_SHARED_ON, -1, NULL);
	if (rc == SAAS_OK)
		rc = saas__lv_qmp_getfd(l->dom, "aas-restore", fd);
	close(fd);
	if (rc < 0 || (rc = saas__lv_qmp(l->dom, "{\"execute\":\"migrate-incoming\",\"arguments\":{\"uri\":"
	                                 "\"fd:aas-restore\"}}", -1, NULL)) < 0)
		return saas__error_wrap(rc, "%s", what);
	return SAAS_OK;
}

/* Nothing was lost: a local template is found by its directory, which a clone's failure would have broken. */
static uint64_t local_mem_available_mib(struct drv *d)
{
	(void)d;
	return saas__lv_mem_available_mib();
}

/* No other engine builds this host's templates. */
static int local_template_find(struct drv *d, const char *key, char **place)
{
	(void)d;
	(void)key;
	*place = NULL;
	return 0;
}

const struct saas__lv_host saas__lv_host_local = {
	.prepare = local_prepare,
	.connect = local_connect,
	.check = local_check,
	.image_place = local_image_place,
	.overlay_make = local_overlay_make,
	.overlay_drop = local_overlay_drop,
	.domain_place = local_domain_place,
	.state_in = local_state_in,
	.templates_cleanup = saas__lv_template_vms_destroy,
	.template_known = saas__lv_template_known_local,
	.template_place = saas__lv_template_place_local,
	.template_build = saas__lv_template_build_local,
	.template_break = saas__lv_template_break_local,
	.template_lost = saas__lv_template_lost_local,
	.template_find = local_template_find,
	.template_list = saas__lv_template_list_local,
	.mem_available_mib = local_mem_available_mib,
	.control_port = true,
	.local_memory = true,
	.spares = true,
	.shared_templates = false,
	.may_vanish = false,
	.limits_learned = false,
	.said = "",
	.uids_said = NULL,
};
