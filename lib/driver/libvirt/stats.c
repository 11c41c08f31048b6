/*
 * vm_sample: a VM's CPU, memory and disk as libvirt sees them, for the
 * engine's metrics (lib/core/metrics.c). Three calls on the domain, the same
 * on this machine and on a VM host (they go over the connection, never to
 * files here), and none into the guest:
 *  - virDomainGetInfo: vCPUs, memory given, CPU time of the whole QEMU
 *    (under TCG that is the guest's work; the emulator's own threads count too);
 *  - virDomainMemoryStats: the QEMU's RSS. Our domains have no balloon
 *    (domain.c: memballoon none), so the guest reports nothing through it,
 *    which also means nothing a guest says reaches these numbers. RSS
 *    counts the translation cache and QEMU's own heap as well as the guest's
 *    pages it touched: an upper bound of what the guest uses, clamped to
 *    what it was given;
 *  - virDomainGetBlockInfo on vda: the overlay's capacity (the size's disk)
 *    and allocation, the bytes the VM wrote since its image (or template):
 *    not the guest filesystem's "used", which counts the image's own files.
 * A tenant who escaped into their QEMU may answer the monitor's queries
 * with anything: the numbers are about that VM only, and the engine clamps
 * each used to its total.
 */
#include <string.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "driver/libvirt/libvirt_driver.h"

int saas__lv_vm_sample(void *ctx, const char *name, saas_driver_sample *out)
{
	struct drv *d = ctx;
	virDomainPtr dom = NULL;
	virDomainInfo info;
	virDomainMemoryStatStruct st[VIR_DOMAIN_MEMORY_STAT_NR];
	virDomainBlockInfo bi;
	virErrorPtr err;
	int n, rc;

	memset(out, 0, sizeof(*out));
	if ((rc = d->host->check(d)) < 0)
		return rc;
	if (!(dom = virDomainLookupByName(saas__lv_conn(d), name))) {
		err = virGetLastError();
		if (err && err->code == VIR_ERR_NO_DOMAIN)
			return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_DRIVER, 0, "no VM %s is running", name);
		return saas__error_wrap(saas__lv_virt_error("looking the VM up"), "%s on %s", name, d->uri);
	}
	if (virDomainGetInfo(dom, &info) < 0) {
		rc = saas__lv_virt_error("reading the VM's CPU time");
		goto out;
	}
	if (info.state != VIR_DOMAIN_RUNNING && info.state != VIR_DOMAIN_PAUSED && info.state != VIR_DOMAIN_BLOCKED) {
		rc = saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_DRIVER, 0, "VM %s is not running", name);
		goto out;
	}
	out->vcpus = info.nrVirtCpu;
	out->cpu_time_ns = info.cpuTime;
	out->memory_total = (uint64_t)info.maxMem << 10; /* libvirt gives KiB */
	if ((n = virDomainMemoryStats(dom, st, VIR_DOMAIN_MEMORY_STAT_NR, 0)) < 0) {
		rc = saas__lv_virt_error("reading the VM's memory");
		goto out;
	}
	for (int i = 0; i < n; i++)
		if (st[i].tag == VIR_DOMAIN_MEMORY_STAT_RSS)
			out->memory_used = st[i].val << 10;
	if (out->memory_used > out->memory_total)
		out->memory_used = out->memory_total;
	if (virDomainGetBlockInfo(dom, "vda", &bi, 0) == 0) {
		out->disk_total = bi.capacity;
		out->disk_used = bi.allocation < bi.capacity ? bi.allocation : bi.capacity;
	} else if ((err = virGetLastError()) && err->code == VIR_ERR_INVALID_ARG) {
		/* An image booted from its initramfs alone has no disk: 0 of 0. */
		saas__error_clear();
	} else {
		rc = saas__lv_virt_error("reading the VM's disk");
		goto out;
	}
	rc = SAAS_OK;
out:
	if (rc < 0 && rc != SAAS_ENOTFOUND)
		saas__error_wrap(rc, "%s on %s", name, d->uri);
	virDomainFree(dom);
	return rc;
}
