/*
 * Internal: making one VM: struct launch, the cold boot (boot.c) and the clone (clone.c).
 */
#ifndef SAAS_DRIVER_LIBVIRT_LAUNCH_H
#define SAAS_DRIVER_LIBVIRT_LAUNCH_H

#include <libvirt/virterror.h>

#include "driver/libvirt/libvirt_driver.h"

/* ---- making VMs (boot.c, clone.c) ------------------------------------------------------------ */

/*
 * One VM being made. A cold boot starts its domain from the image's kernel; a
 * clone starts its domain paused with -incoming defer and restores a template's
 * saved state into it. Either way the VM is ready once the engine's SSH session
 * is up. saas__lv_launch_undo() leaves nothing behind.
 */
struct launch {
	struct drv *d;
	const saas_vm_spec *spec;
	const struct image *im;
	const char *host_key;
	bool internet;                   /* a way out (no restrict=on): internet or a policy */
	bool policy;
	const char *tdir;                /* clone: the template's directory (or the snapshot's); remote: its volumes' stem */
	const char *vol;                 /* remote: its overlay volume's stem (NULL: the VM's name) */
	const char *base_vol;            /* remote: the volume its overlay backs onto (a paused VM's kept disk), or NULL */
	/*
	 * A restore of the snapshot in tdir: a fork's maps its RAM as a mapped
	 * template's clone does (the snapshot's "ram", saas__lv_snapshot_ram); a
	 * pause's comes whole in the stream (memory-backend-ram).
	 */
	bool snapshot;
	bool ignore_shared;              /* a snapshot saved with x-ignore-shared on: set on the incoming side too */
	bool ram_pending;                /* its snapshot's RAM mapped while still being split: wait before the state */
	bool template_bad;               /* clone: failed in a way that says the template is broken */
	bool restored;                   /* clone: its state is in (saas__lv_clone_restore), its domain still paused */
	int64_t state_bytes;             /* clone: the bytes of saved state its domain read (state_in), 0: not said */
	bool died;                       /* the VM stopped before it answered (a guest dead in early boot) */
	unsigned int uid;                /* its QEMU's own uid (0: not confined), held by the caller */
	char *dir, *overlay;
	virDomainPtr dom;
	unsigned int port;
	saas__ssh *ssh;
	int mem;                         /* enum saas__lv_mem of its domain */
	const char *mem_path;            /* LV_MEM_SHARED, LV_MEM_PRIVATE: the file its QEMU opens */
	bool control;                    /* its domain has the control port (set by saas__lv_launch_prepare) */
	const char *fixups;              /* a clone: which way its fix-ups went, for the log ("the control port", "SSH") */
	bool session_later;              /* a clone made without the engine's SSH session: ssh is NULL, connected on first need */
	bool background;                 /* a template's VM: its waits give up once the engine stops, not at close */
	int64_t spare_until_ms;          /* a spare on a shared host: its mark (domain.h), 0: none */
};

/* Should l's launch give up now? The driver closing, or (a template's) the engine stopping. */
static inline bool saas__lv_launch_quit(struct launch *l)
{
	return l->background ? stopping(l->d) : closing(l->d);
}

int saas__lv_launch_prepare(struct launch *l);
int saas__lv_launch_start(struct launch *l);
/*
 * Did a domain's start fail for a moment's want of something, so that the
 * same start a little later may work (saas__lv_launch_start tries it again)?
 * libvirt's error for a system call's EAGAIN (VIR_ERR_SYSTEM_ERROR, the errno
 * in int1), as "failed to load cgroup BPF prog: Resource temporarily
 * unavailable" from the device filter of the domain's cgroup v2 right after
 * many VMs ended (the kernel frees their BPF programs later), or a fork at the
 * process limit; or an error that says so in words only (QEMU's own, passed
 * on as text). Any other error is not: the start fails as it did.
 */
bool saas__lv_virt_transient(const virError *err);
int saas__lv_launch_wait_ssh(struct launch *l, const struct timespec *t0, int64_t budget_ms);
void saas__lv_launch_blame_console(struct launch *l, int rc);
void saas__lv_launch_undo(struct launch *l);
/* A cold boot, tried twice if the guest stalls or dies in boot. */
int saas__lv_boot_cold(struct launch *l);
/* A clone of the template in l->tdir; on failure l->template_bad says whether to rebuild it. */
int saas__lv_boot_clone(struct launch *l);
/*
 * Its two halves (clone.c): disk and paused domain; then state, fix-ups and
 * session. at[]: ms since t0. Between them, saas__lv_clone_restore may pour
 * the state in ahead (a spare whose memory is loaded, spare.c): the domain
 * stays paused, and clone_finish only lets it run.
 */
int saas__lv_clone_start(struct launch *l, const struct timespec *t0, int64_t at[2]);
int saas__lv_clone_restore(struct launch *l, const struct timespec *t0, int64_t budget_ms);
int saas__lv_clone_finish(struct launch *l, const struct timespec *t0, int64_t budget, int64_t at[2]);
/*
 * A spare's guest let run once before a create takes it (spare.c), its
 * state poured in first if it is not: the fix-ups (the spare's name is the
 * sandbox id a take gives) and a plain `true` over the control port, then
 * paused again. Under TCG a clone's QEMU translates each guest code path the
 * first time it runs, and a clone's clock, the template's until its
 * fix-ups, jumps over all the time since the template was saved, so every
 * guest timer due meanwhile runs at once: both would otherwise fall between
 * a create and its first command. clone_finish does the fix-ups again (the
 * clock). 1 when warmed, 0 without a control port to do it by (nothing
 * done), or an error (the spare is given up).
 */
int saas__lv_clone_warm(struct launch *l, const struct timespec *t0, int64_t budget_ms);
/* Undo a clone that failed in either half (its console's last words added to the error). */
void saas__lv_clone_undo(struct launch *l, int rc);

/*
 * Confinement's files (uid.c): the directories QEMU must traverse (0711) and
 * the engine's own files made private, at open; a VM's directory and overlay
 * given to its uid; a template's frozen disk made readable by every clone.
 */
int saas__lv_confine_setup(struct drv *d, const char *state_dir, const char *root, bool required);
/*
 * The same under a system libvirtd (d->conn open): checks what the daemon's
 * side shows (a privileged daemon with its DAC driver) and what ours needs (a
 * traversable state directory on a filesystem with ACLs). Not possible: an
 * error when required (uids=FIRST-LAST), else the reason logged.
 */
int saas__lv_confine_system(struct drv *d, const char *state_dir, bool required);
/* A free uid of d->cf.uids that no process on the host runs as (another engine's VMs); caller holds d->mu. */
int saas__lv_uid_take(struct drv *d, unsigned int *uid);
int saas__lv_confine_vm_files(struct launch *l);
/* One more file of a VM's (a disk overlay made while it runs, open as fd) given to its uid; path for errors. */
int saas__lv_confine_vm_fd(struct drv *d, int fd, const char *path, unsigned int uid);
int saas__lv_confine_template(struct drv *d, const char *tdir, const char *disk);
/* The same for a frozen disk the engine holds open (fd): no path is resolved again. */
int saas__lv_confine_template_fd(struct drv *d, const char *tdir, int fd);
/* Who owns a VM's disks: its QEMU's uid under a root engine that confines it, else the engine. */
unsigned int saas__lv_disk_owner(struct drv *d, unsigned int uid);

#endif
