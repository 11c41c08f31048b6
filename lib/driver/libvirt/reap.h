/*
 * Internal: the embedded driver reaps its own QEMUs (reap.c).
 *
 * libvirt daemonizes QEMU, so its parent is the nearest child subreaper, or
 * PID 1, and virDomainDestroy polls kill(pid, 0) until the process is gone:
 * a zombie answers "alive" until its parent reaps it. With the process a
 * child subreaper (prctl PR_SET_CHILD_SUBREAPER) the QEMUs become its
 * children, and one thread reaps each registered QEMU the moment it exits.
 *
 * Only registered pids are ever waited for, each through its own pidfd
 * (never waitpid(-1) or P_ALL, which would take the exit status of the host
 * program's own children and of the library's, which are waited for by
 * pid). A pidfd whose process is not this process's child (a QEMU started
 * before the engine, parented elsewhere) gets ECHILD and is just closed.
 *
 * libvirt's capability probe (a QEMU run with -daemonize, killed, then
 * waited for by the same kill(pid, 0) poll): each engine sets the
 * attribute and watches ROOT/lib/qemu for the probe's qmp-XXXXXX directory
 * before it asks for the capabilities at open, so the probe's qmp.pid
 * registers its QEMU (saas__lv_reap_open, saas__lv_reap_watch_probes).
 *
 * An engine in a child process (a test program's, a host program's
 * workers') is a subreaper too: its QEMUs are its children, re-parented to
 * this process when it dies. Every root beside this engine's is watched as
 * this one's is (saas__lv_reap_watch_roots), so those QEMUs are registered
 * and reaped here; while their engine lives they are not our children, and
 * their exit gets ECHILD here.
 *
 * The reaper is process-wide: engines share it through a count. The
 * subreaper attribute is set by the first engine that finds it unset, and
 * unset when the last engine closes, if it was ours to set. The set holds
 * one pidfd per registered QEMU still running: bounded by the VMs the
 * process's engines hold; an entry leaves when its process exits.
 */
#ifndef SAAS_DRIVER_LIBVIRT_REAP_H
#define SAAS_DRIVER_LIBVIRT_REAP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct drv;

/* ---- the process-wide reaper ------------------------------------------------------------------ */

/*
 * One more user of the reaper: the first starts its thread and makes the
 * process a child subreaper (unless it already is). SAAS_OK; SAAS_ENOTSUP
 * (saying why) where the kernel has no pidfds (Linux before 5.4): then
 * nothing is changed; SAAS_ENOMEM, SAAS_EIO.
 */
int saas__lv_reap_acquire(void);
/* One user less: the last stops the thread, closes every pidfd, and unsets the subreaper if it set it. */
void saas__lv_reap_release(void);
/*
 * Reap pid when it exits (it should be a child of this process by then).
 * SAAS_OK also when no user holds the reaper (nothing to do). An error
 * (the pid is gone, no descriptor left) says so; pid is then not watched.
 */
int saas__lv_reap_add(pid_t pid);
/*
 * Watch dir, a directory of pidfiles (NAME.pid, a decimal pid): each one
 * written is registered at once. *wd for saas__lv_reap_unwatch. SAAS_ESTATE
 * when the reaper does not run, SAAS_EIO, SAAS_ENOMEM.
 */
int saas__lv_reap_watch(const char *dir, int *wd);
/*
 * Watch dir (libvirt's ROOT/lib/qemu) for the directories its capabilities
 * probes make (qmp-XXXXXX): each is watched as saas__lv_reap_watch does, so
 * a probe's QEMU (a -daemonize'd process, killed, then waited for by
 * libvirt with the same poll as a domain's) is reaped when it runs while
 * another engine of the process holds the attribute. *wd as there.
 */
int saas__lv_reap_watch_probes(const char *dir, int *wd);
/*
 * Watch base, the embedded roots' parent directory, for good: every root in
 * it, there now or made later, has its run/qemu watched as
 * saas__lv_reap_watch does (once made), so the QEMUs of engines in child
 * processes are registered and reaped when their engine's process dies and
 * they are re-parented here. Once per base; until the last release.
 * SAAS_ESTATE, SAAS_EIO, SAAS_ENOMEM as there.
 */
int saas__lv_reap_watch_roots(const char *base);
/* The watch of saas__lv_reap_watch let go (-1: none); done by the last release too. */
void saas__lv_reap_unwatch(int wd);
/* Whether the reaper runs (some user holds it). */
bool saas__lv_reap_active(void);
/* The pidfds held now (for tests and the log). */
size_t saas__lv_reap_count(void);

/* ---- the driver's side ------------------------------------------------------------------------ */

/*
 * At open, after the embedded connection: reap=auto holds the reaper (said
 * in the log, as is why not), and every QEMU already running under the
 * root is registered: one an earlier engine of this process started is its
 * child and is reaped; one an earlier process started gets ECHILD.
 */
void saas__lv_reap_open(struct drv *d);
/* A domain of name just started (its QEMU's pidfile written): registered with the reaper if it runs. */
void saas__lv_reap_vm(struct drv *d, const char *name);
/* At close: the engine's hold let go. */
void saas__lv_reap_close(struct drv *d);

#endif
