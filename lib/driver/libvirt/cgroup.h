/*
 * Internal: the host's cgroup hierarchies and each VM's limits (cgroup.c); its state is d->cg and d->lim_*.
 */
#ifndef SAAS_DRIVER_LIBVIRT_CGROUP_H
#define SAAS_DRIVER_LIBVIRT_CGROUP_H

#include <stdbool.h>
#include <stdint.h>

#include <libvirt/libvirt.h>

struct drv;

/* ---- host limits (cgroup.c) ----------------------------------------------------------------- */

enum cg_ctl { CG_CPU, CG_MEMORY, CG_PIDS, CG_IO, CG_NCTL };

/* The host's cgroup hierarchies, from /proc/self/mounts. */
struct saas__lv_cg {
	char *v1[CG_NCTL];               /* where each v1 controller is mounted, or NULL */
	char *v2;                        /* where the cgroup2 hierarchy is mounted, or NULL */
	bool v2_has[CG_NCTL];            /* controllers v2 offers (those no v1 hierarchy holds) */
};

/* Read the hierarchies from mounts (the text of /proc/self/mounts) and v2's cgroup.controllers. */
int saas__lv_cg_detect(struct saas__lv_cg *cg, const char *mounts);
void saas__lv_cg_clear(struct saas__lv_cg *cg);
/* Make the v1 cpuset hierarchy's PARTITION (libvirt's "machine") with the root's CPUs and memory nodes, if empty. */
int saas__lv_cg_cpuset_prime(const char *mounts, const char *partition);
bool saas__lv_cg_has(const struct saas__lv_cg *cg, int ctl);

/* Per size: the pids limit, the memory hard limit (MiB; memory_mib as the domain has it), the I/O weight. */
unsigned int saas__lv_pids_max(unsigned int vcpus);
unsigned int saas__lv_memory_limit_mib(unsigned int memory_mib, bool kvm);
unsigned int saas__lv_io_weight(unsigned int vcpus);

/*
 * The directory whose pids.max limits a VM's QEMU, from its /proc/PID/cgroup
 * text: on v2, the domain's own cgroup; on v1, the domain's pids cgroup when
 * libvirt made one, else ours (*own): V1_PIDS/group/name. *dir freed by the
 * caller. SAAS_ENOTSUP (saying why) when the host offers none.
 */
int saas__lv_cg_pids_dir(const struct saas__lv_cg *cg, const char *proc_cgroup, const char *group, const char *name,
                         char **dir, bool *own);
/* Write max into dir's pids.max; own: make dir first and move pid (every thread of it) in. */
int saas__lv_cg_pids_limit(const char *dir, bool own, long pid, unsigned int max);
/* Remove our pids cgroup of name (nothing on v2 or when there is none). */
int saas__lv_cg_pids_remove(const struct saas__lv_cg *cg, const char *group, const char *name);
/* Remove every one of group's pids cgroups that no process is left in (VMs gone while no engine ran). */
void saas__lv_cg_pids_sweep(const struct saas__lv_cg *cg, const char *group);

/* ---- host limits, the driver's side (cgroup.c) ----------------------------------------------- */

/* Which limits this host can give (d->lim_*), said once in the log; removes pids cgroups left behind. */
void saas__lv_limits_setup(struct drv *d, bool embedded);
/* A running domain's limits that are not in its XML: memory (live) and pids. */
int saas__lv_limits_apply(struct drv *d, virDomainPtr dom, const char *name, unsigned int vcpus, unsigned int memory_mib,
                          bool kvm);
/* QEMU's pid, from the embedded driver's pidfile (ROOT/run/qemu/NAME.pid); 0 when unknown. */
long saas__lv_qemu_pid(struct drv *d, const char *name);
/* At destroy: the VM's pids cgroup goes (its QEMU is gone). */
void saas__lv_limits_release(struct drv *d, const char *name);

#endif
