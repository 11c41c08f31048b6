/*
 * Internal: the domain XML and the metadata read back (domain.c).
 */
#ifndef SAAS_DRIVER_LIBVIRT_DOMAIN_H
#define SAAS_DRIVER_LIBVIRT_DOMAIN_H

#include "driver/libvirt/libvirt_driver.h"

/* ---- domains (domain.c) ---------------------------------------------------------------------- */

/*
 * A VM's guest RAM: one QEMU memory backend whose id is MEM_ID in every VM,
 * given with -machine memory-backend=, so that its RAM block has one name
 * whether the VM was booted, cloned from a template or restored from a
 * snapshot (a migration stream names the blocks it carries). libvirt's own
 * backend (pc.ram) stays defined and unused, in every VM alike.
 */
#define MEM_ID "aas-mem"
enum saas__lv_mem {
	LV_MEM_RAM,                      /* anonymous memory: a cold boot, a VM restored from a snapshot */
	LV_MEM_SHARED,                   /* a template VM: the file at mem_path, its writes going to the file */
	LV_MEM_PRIVATE,                  /* a template's clone: the same file mapped copy-on-write (MAP_PRIVATE) */
};

/*
 * The <qemu:arg> elements of the memory backend of mode (enum saas__lv_mem):
 * mem_path (unused for LV_MEM_RAM) holds mib MiB. Never LV_MEM_SHARED for a
 * clone: its writes would change every other clone's memory.
 */
void saas__lv_domain_memory_args(saas__buf *b, int mode, const char *mem_path, unsigned int mib);

/* Everything a domain's XML depends on. */
struct saas__lv_domain {
	const saas_vm_spec *spec;        /* name, vcpus, memory_mb */
	const struct image *im;
	const char *owner;               /* the engine's state directory */
	const char *authkey_b64;         /* the engine's public key, for the kernel command line */
	const char *vmdir;               /* the VM's directory (console log); NULL: the console is a pty (remote) */
	const char *overlay;             /* the disk overlay, or NULL (initramfs images) */
	unsigned int port;               /* the SSH forward on the host's address listen */
	bool kvm;
	bool internet;
	bool incoming;                   /* a clone: -incoming defer, no kernel */
	unsigned int uid, gid;           /* QEMU's own uid and group (a static DAC label); uid 0: none */
	bool policy;                     /* internet, and the metadata says "policy" (egress.c decides) */
	unsigned int cpu_milli;          /* host CPU per vCPU in thousandths (<cputune>); 0: no limit */
	unsigned int io_weight;          /* <blkiotune> weight; 0: none */
	int mem;                         /* enum saas__lv_mem (0: LV_MEM_RAM) */
	const char *mem_path;            /* LV_MEM_SHARED, LV_MEM_PRIVATE: the file QEMU opens */
	/*
	 * The control port (lib/transport/control.h): a virtio-serial channel whose host end
	 * is the socket vmdir/CONTROL_SOCKET. A device like any other: a clone
	 * has it exactly when its template (or snapshot) has it.
	 */
	bool control;
	/*
	 * A VM host's domain: its guest's egress goes through the servers over
	 * the virtio-serial channel MUX_PORT_NAME (egress_host.h), before the
	 * control channel (the guest learns the ports' names in that order), and
	 * its slirp is restrict=on whatever its network: the host opens nothing
	 * for it. Like control, a device a clone has exactly when its template has it.
	 */
	bool egress;
	/*
	 * A spare on a host other engines share (spare.c): until this time
	 * (Unix ms) their listings leave it out, as they do a pooled VM; 0: not one.
	 */
	int64_t spare_until_ms;
	const char *listen;              /* the SSH forward's address; NULL: 127.0.0.1 */
	const char *kernel, *initrd;     /* as the host's QEMU sees them; NULL: the image's own */
	const char *emulator;            /* the QEMU binary's path (emulator.h); NULL: libvirt's choice */
};

/*
 * The domain XML. A clone's domain must equal its template's in every device
 * (QEMU's migration stream carries device state, not configuration): only the
 * name, genid, paths, SSH port and network restriction may differ. NULL when
 * out of memory.
 */
char *saas__lv_domain_xml(const struct saas__lv_domain *def);
/* The guest's memory in MiB, as the domain has it: the size's, or the image's minimum if more. */
unsigned int saas__lv_domain_memory(const saas_vm_spec *spec, const struct image *im);

/*
 * Our metadata element, as virDomainGetMetadata gives it: the SSH port, the
 * host key and the owner (both freed by the caller; NULL on failure).
 * SAAS_ENOTFOUND unless all three are there.
 */
int saas__lv_meta_parse(const char *xml, unsigned int *port, char **host_key, char **owner);
int saas__lv_domain_meta(virDomainPtr dom, unsigned int *port, char **host_key, char **owner);
/* Does our metadata element say the domain has the control port? */
bool saas__lv_meta_control(const char *xml);
/* The uid recorded in our metadata element (0: none, a VM not confined). */
unsigned int saas__lv_meta_uid(const char *xml);
unsigned int saas__lv_domain_uid(virDomainPtr dom);
/* The egress mode recorded in our metadata element (saas_vm_network_mode; isolated when unreadable). */
int saas__lv_meta_network(const char *xml);
/*
 * Our metadata element with its egress mode replaced by `mode` (internet or
 * policy), or NULL when it records none (or out of memory). Pure.
 */
char *saas__lv_meta_with_network(const char *xml, int mode);
/*
 * Record a runtime change of a running domain's egress mode in its live
 * metadata, so that an engine that adopts it after a restart loads the rules
 * of the mode it runs under now, not the one it was made with.
 */
int saas__lv_domain_meta_network_set(virDomainPtr dom, int mode);

/*
 * A spare's mark in its metadata (domain.h's spare_until_ms): the time it
 * stands until, or 0 (none, or not a number).
 */
int64_t saas__lv_meta_spare_until(const char *xml);
/* xml without the spare's mark: a copy, or NULL out of memory. */
char *saas__lv_meta_without_spare(const char *xml);
/*
 * Take a running domain's spare mark out of its live metadata: a create has
 * taken it, and every engine's listing must see it from now on.
 */
int saas__lv_domain_meta_spare_clear(virDomainPtr dom);

typedef int (*saas__lv_domain_fn)(struct drv *d, virDomainPtr dom, const char *name, void *ud);
/*
 * Call fn on every domain named prefix... that this state directory owns (its
 * metadata says so: other engines on the host have their own), until fn
 * returns non-zero.
 */
int saas__lv_own_domains(struct drv *d, const char *prefix, saas__lv_domain_fn fn, void *ud);

#endif
