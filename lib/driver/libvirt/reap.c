/*
 * The embedded driver reaps its own QEMUs: reap.h says why and what. One
 * thread per process polls an eventfd (additions, stop) and one pidfd per
 * registered QEMU; a pidfd turns readable when its process exits, and
 * waitid(P_PIDFD) reaps exactly that process. Idle, the thread sleeps in
 * poll with no timeout.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libvirt/virterror.h>

#include "driver/libvirt/cgroup.h"
#include "driver/libvirt/conf.h"
#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/reap.h"

#ifndef P_PIDFD
#define P_PIDFD 3 /* Linux 5.4; glibc's <sys/wait.h> names it from 2.36 on some targets only */
#endif

struct reapee {
	pid_t pid;
	int fd;
};

/*
 * life_mu orders acquire and release (a release joins the thread outside
 * mu, which the thread takes); mu guards the rest.
 */
static pthread_mutex_t life_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned int users;      /* under life_mu */
static bool running, stop;      /* under mu */
static bool subreaper_ours;     /* under life_mu: the first user set it */
static int efd = -1;            /* under mu while running */
static pthread_t thread;
static struct reapee *set;      /* under mu */
static size_t n_set, cap_set;
/* Directories of pidfiles watched (saas__lv_reap_watch): one inotify descriptor, a watch each. */
struct watched {
	int wd;
	char *dir;
	bool probes;   /* a directory whose new qmp-* directories are watched in turn (saas__lv_reap_watch_probes) */
	struct watched *next;
};
static int ifd = -1;            /* under mu while running */
static struct watched *watches; /* under mu */

static int pidfd_open(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static void wake(void)
{
	uint64_t one = 1;

	/* A full counter (never: one read empties it) still leaves the eventfd readable. */
	if (write(efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		return;
}

/* Forget fd's entry and close it (the thread's alone: no other closes a pidfd while running). */
static void forget(int fd)
{
	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < n_set; i++) {
		if (set[i].fd == fd) {
			set[i] = set[--n_set];
			break;
		}
	}
	pthread_mutex_unlock(&mu);
	close(fd);
}

/* fd turned readable: its process exited. Reaped if it is our child; ECHILD (not ours): just closed. */
static void reap_one(int fd)
{
	siginfo_t si;
	int r;

	memset(&si, 0, sizeof(si));
	r = waitid(P_PIDFD, (id_t)fd, &si, WEXITED | WNOHANG);
	if ((r == 0 && si.si_pid == 0) || (r < 0 && errno == EINTR))
		return; /* not exited after all, or interrupted: polled again */
	forget(fd);
}

/* The pid in a pidfile, 0 when there is none (yet: libvirt's is written after it is made). */
static pid_t pidfile_read(const char *dir, const char *name)
{
	char path[4096], text[32];
	ssize_t n = -1;
	long pid;
	int fd;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path) ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return 0;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	text[n] = '\0';
	pid = strtol(text, NULL, 10);
	return pid > 0 && pid <= INT32_MAX ? (pid_t)pid : 0;
}

static bool is_pidfile(const char *name)
{
	size_t len = strlen(name);

	return len > 4 && strcmp(name + len - 4, ".pid") == 0;
}

/* Every pidfile in dir registered (a start after the watch was lost: the queue overflowed). */
static void pidfiles_scan(const char *dir)
{
	DIR *dp = opendir(dir);
	struct dirent *de;
	pid_t pid;

	while (dp && (de = readdir(dp)))
		if (is_pidfile(de->d_name) && (pid = pidfile_read(dir, de->d_name)))
			saas__lv_reap_add(pid);
	if (dp)
		closedir(dp);
	saas__error_clear();
}

/*
 * A pidfile written in a watched directory: its process registered the
 * moment libvirt starts it, before virDomainCreateXML returns, so a QEMU
 * that dies during its start (libvirt then waits for it to go) is reaped
 * too. A pidfile is an authority here: libvirt writes it for the process it
 * has just made, a child of this process (or about to be).
 */
static void pidfiles_changed(int fd)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t len = read(fd, buf, sizeof(buf));

	for (ssize_t off = 0; len > 0 && off < len;) {
		const struct inotify_event *ev = (const struct inotify_event *)(buf + off);
		off += (ssize_t)(sizeof(*ev) + ev->len);
		if (ev->mask & IN_Q_OVERFLOW) {
			/* Events lost: every watched directory read again (copied: the list may change meanwhile). */
			char *dirs[64];
			size_t n = 0;
			pthread_mutex_lock(&mu);
			for (struct watched *w = watches; w && n < SAAS_ARRAY_SIZE(dirs); w = w->next)
				if ((dirs[n] = saas__strdup(w->dir)))
					n++;
			pthread_mutex_unlock(&mu);
			for (size_t i = 0; i < n; i++) {
				pidfiles_scan(dirs[i]);
				free(dirs[i]);
			}
			continue;
		}
		if (ev->mask & IN_IGNORED) {
			/* Its directory went (a probe's, once libvirt removed it): the entry goes too. */
			struct watched **p, *gone = NULL;
			pthread_mutex_lock(&mu);
			for (p = &watches; *p; p = &(*p)->next)
				if ((*p)->wd == ev->wd) {
					gone = *p;
					*p = gone->next;
					break;
				}
			pthread_mutex_unlock(&mu);
			if (gone) {
				free(gone->dir);
				free(gone);
			}
			continue;
		}
		if (ev->len && (ev->mask & IN_ISDIR) && strncmp(ev->name, "qmp-", 4) == 0) {
			/* A capabilities probe's directory: its QEMU's pidfile (qmp.pid) will be written there. */
			char *dir = NULL, *sub = NULL;
			int wd;
			pthread_mutex_lock(&mu);
			for (struct watched *w = watches; w && !dir; w = w->next)
				if (w->wd == ev->wd && w->probes)
					dir = saas__strdup(w->dir);
			pthread_mutex_unlock(&mu);
			if (dir && (sub = saas__lv_path_join(dir, ev->name)) && saas__lv_reap_watch(sub, &wd) == SAAS_OK)
				pidfiles_scan(sub); /* written before the watch was there */
			free(sub);
			free(dir);
			saas__error_clear();
			continue;
		}
		if (ev->len && is_pidfile(ev->name)) {
			char *dir = NULL;
			pid_t pid;
			pthread_mutex_lock(&mu);
			for (struct watched *w = watches; w && !dir; w = w->next)
				if (w->wd == ev->wd)
					dir = saas__strdup(w->dir);
			pthread_mutex_unlock(&mu);
			if (dir && (pid = pidfile_read(dir, ev->name)))
				saas__lv_reap_add(pid);
			free(dir);
			saas__error_clear();
		}
	}
}

static void *reap_main(void *arg)
{
	struct pollfd *pfd = NULL, one[2];
	size_t cap = 0;

	(void)arg;
	for (;;) {
		struct pollfd *use;
		size_t n;
		pthread_mutex_lock(&mu);
		if (stop) {
			pthread_mutex_unlock(&mu);
			break;
		}
		if (n_set + 2 > cap) {
			struct pollfd *p = realloc(pfd, (n_set + 2) * sizeof(*p));
			if (p) {
				pfd = p;
				cap = n_set + 2;
			}
		}
		/* Out of memory, the entries past what fits wait for a turn with room (each exit or addition wakes it). */
		use = cap ? pfd : one;
		n = cap ? (n_set < cap - 2 ? n_set : cap - 2) : 0;
		use[0] = (struct pollfd){ .fd = efd, .events = POLLIN };
		use[1] = (struct pollfd){ .fd = ifd, .events = POLLIN };
		for (size_t i = 0; i < n; i++)
			use[i + 2] = (struct pollfd){ .fd = set[i].fd, .events = POLLIN };
		pthread_mutex_unlock(&mu);
		if (poll(use, n + 2, -1) < 0)
			continue; /* EINTR */
		if (use[0].revents) {
			uint64_t v;
			if (read(use[0].fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				continue;
		}
		if (use[1].revents)
			pidfiles_changed(use[1].fd);
		for (size_t i = 2; i < n + 2; i++)
			if (use[i].revents)
				reap_one(use[i].fd);
	}
	free(pfd);
	return NULL;
}

/* Can this kernel watch and reap by pidfd? pidfd_open is Linux 5.3, waitid's P_PIDFD 5.4. */
static int pidfd_usable(void)
{
	siginfo_t si;
	int fd = pidfd_open(getpid()), rc;

	if (fd < 0)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_OS, errno, "the kernel has no pidfd_open (Linux 5.3): %s",
		                   strerror(errno));
	/* Ourselves are not our child: ECHILD where P_PIDFD is known, EINVAL where it is not. */
	memset(&si, 0, sizeof(si));
	rc = waitid(P_PIDFD, (id_t)fd, &si, WEXITED | WNOHANG) < 0 && errno == EINVAL ? -1 : 0;
	close(fd);
	if (rc < 0)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_OS, EINVAL, "the kernel's waitid has no P_PIDFD (Linux 5.4)");
	return SAAS_OK;
}

int saas__lv_reap_acquire(void)
{
	sigset_t all, old;
	int on = 0, rc = SAAS_OK, err;

	pthread_mutex_lock(&life_mu);
	if (users > 0) {
		users++;
		goto out;
	}
	if ((rc = pidfd_usable()) < 0)
		goto out;
	if ((efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "eventfd: %s", strerror(errno));
		goto out;
	}
	if ((ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK)) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "inotify_init1: %s", strerror(errno));
		close(efd);
		efd = -1;
		goto out;
	}
	/* The host program's own setting stays: set only if unset, and then unset by the last release. */
	if (prctl(PR_GET_CHILD_SUBREAPER, &on, 0, 0, 0) < 0 || !on) {
		if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) {
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "prctl(PR_SET_CHILD_SUBREAPER): %s",
			                 strerror(errno));
			close(efd);
			close(ifd);
			efd = ifd = -1;
			goto out;
		}
		subreaper_ours = true;
	}
	pthread_mutex_lock(&mu);
	running = true;
	stop = false;
	pthread_mutex_unlock(&mu);
	/* The thread takes none of the host program's signals. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&thread, NULL, reap_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err != 0) {
		rc = saas__error(SAAS_ENOMEM, SAAS_ERRCLASS_OS, err, "cannot start the reaper thread");
		pthread_mutex_lock(&mu);
		running = false;
		pthread_mutex_unlock(&mu);
		if (subreaper_ours)
			prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
		subreaper_ours = false;
		close(efd);
		close(ifd);
		efd = ifd = -1;
		goto out;
	}
	users = 1;
out:
	pthread_mutex_unlock(&life_mu);
	return rc;
}

void saas__lv_reap_release(void)
{
	pthread_mutex_lock(&life_mu);
	if (users == 0 || --users > 0) {
		pthread_mutex_unlock(&life_mu);
		return;
	}
	pthread_mutex_lock(&mu);
	stop = true;
	wake();
	pthread_mutex_unlock(&mu);
	pthread_join(thread, NULL);
	/*
	 * QEMUs still running stay this process's children (unsetting the
	 * attribute moves nobody): the next engine's open registers them again.
	 */
	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < n_set; i++)
		close(set[i].fd);
	free(set);
	set = NULL;
	n_set = cap_set = 0;
	while (watches) {
		struct watched *w = watches;
		watches = w->next;
		free(w->dir);
		free(w);
	}
	close(efd);
	close(ifd);
	efd = ifd = -1;
	running = false;
	pthread_mutex_unlock(&mu);
	if (subreaper_ours)
		prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
	subreaper_ours = false;
	pthread_mutex_unlock(&life_mu);
}

/* Is fd's process still running? (A pidfd turns readable at exit.) */
static bool alive(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) == 0;
}

int saas__lv_reap_add(pid_t pid)
{
	int fd, rc = SAAS_OK;

	if (pid <= 0)
		return saas__inval("no process %ld to reap", (long)pid);
	if (!saas__lv_reap_active())
		return SAAS_OK;
	/* Already ours to reap (registered twice: open's sweep and a start) only while its process still runs. */
	if ((fd = pidfd_open(pid)) < 0)
		return saas__error(errno == EMFILE || errno == ENFILE ? SAAS_ELIMIT : SAAS_EIO, SAAS_ERRCLASS_OS, errno,
		                   "cannot watch process %ld: %s", (long)pid, strerror(errno));
	pthread_mutex_lock(&mu);
	if (!running) {
		close(fd);
		goto out;
	}
	for (size_t i = 0; i < n_set; i++) {
		if (set[i].pid == pid && alive(set[i].fd)) {
			close(fd);
			goto out;
		}
	}
	if (n_set == cap_set) {
		size_t cap = cap_set ? cap_set * 2 : 16;
		struct reapee *p = realloc(set, cap * sizeof(*p));
		if (!p) {
			close(fd);
			rc = saas__oom();
			goto out;
		}
		set = p;
		cap_set = cap;
	}
	set[n_set++] = (struct reapee){ .pid = pid, .fd = fd };
	wake();
out:
	pthread_mutex_unlock(&mu);
	return rc;
}

bool saas__lv_reap_active(void)
{
	bool on;

	pthread_mutex_lock(&mu);
	on = running;
	pthread_mutex_unlock(&mu);
	return on;
}

size_t saas__lv_reap_count(void)
{
	size_t n;

	pthread_mutex_lock(&mu);
	n = n_set;
	pthread_mutex_unlock(&mu);
	return n;
}

int saas__lv_reap_watch(const char *dir, int *wd)
{
	struct watched *w = calloc(1, sizeof(*w));
	int rc = SAAS_OK;

	*wd = -1;
	if (!w || !(w->dir = saas__strdup(dir))) {
		free(w);
		return saas__oom();
	}
	pthread_mutex_lock(&mu);
	if (!running) {
		rc = saas__error(SAAS_ESTATE, SAAS_ERRCLASS_DRIVER, 0, "the reaper is not running");
	} else if ((w->wd = inotify_add_watch(ifd, dir, IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_ONLYDIR)) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot watch %s: %s", dir, strerror(errno));
	} else {
		/* One directory watched twice (two engines on one root: refused by libvirt) shares its wd. */
		*wd = w->wd;
		w->next = watches;
		watches = w;
		w = NULL;
	}
	pthread_mutex_unlock(&mu);
	if (w) {
		free(w->dir);
		free(w);
	}
	return rc;
}

int saas__lv_reap_watch_probes(const char *dir, int *wd)
{
	struct watched *w = calloc(1, sizeof(*w));
	int rc = SAAS_OK;

	*wd = -1;
	if (!w || !(w->dir = saas__strdup(dir))) {
		free(w);
		return saas__oom();
	}
	w->probes = true;
	pthread_mutex_lock(&mu);
	if (!running) {
		rc = saas__error(SAAS_ESTATE, SAAS_ERRCLASS_DRIVER, 0, "the reaper is not running");
	} else if ((w->wd = inotify_add_watch(ifd, dir, IN_CREATE | IN_ONLYDIR)) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot watch %s: %s", dir, strerror(errno));
	} else {
		*wd = w->wd;
		w->next = watches;
		watches = w;
		w = NULL;
	}
	pthread_mutex_unlock(&mu);
	if (w) {
		free(w->dir);
		free(w);
	}
	return rc;
}

void saas__lv_reap_unwatch(int wd)
{
	struct watched **p, *gone = NULL;

	if (wd < 0)
		return;
	pthread_mutex_lock(&mu);
	for (p = &watches; *p; p = &(*p)->next) {
		if ((*p)->wd == wd) {
			gone = *p;
			*p = gone->next;
			break;
		}
	}
	for (struct watched *w = watches; w && gone; w = w->next)
		if (w->wd == wd)
			gone->wd = -1; /* the same directory watched for another: its watch stays */
	if (gone && gone->wd >= 0 && running)
		inotify_rm_watch(ifd, wd);
	pthread_mutex_unlock(&mu);
	if (gone) {
		free(gone->dir);
		free(gone);
	}
}

/* ---- the driver's side ------------------------------------------------------------------------ */

/*
 * The QEMU of name, registered: its pid from libvirt's pidfile, and only a
 * process that is a QEMU (a stale pidfile's pid, taken since by a child of
 * the host program, must never be waited for).
 */
static void reap_qemu(struct drv *d, const char *name)
{
	long pid = saas__lv_qemu_pid(d, name);
	char path[64], *comm;
	bool qemu;

	if (!pid)
		return;
	snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
	comm = saas__lv_read_file(path, 64);
	qemu = comm && strncmp(comm, "qemu", 4) == 0;
	free(comm);
	if (qemu && saas__lv_reap_add((pid_t)pid) < 0) {
		saas__lv_log(d, SAAS_LOG_WARN, "VM %s: its QEMU is not reaped by the engine (a destroy then waits for "
		             "it about 15 s): %s", name, saas_error_last()->message);
		saas__error_clear();
	}
}

void saas__lv_reap_vm(struct drv *d, const char *name)
{
	/*
	 * The embedded driver's only: a daemon's QEMUs are its children. Also
	 * under reap=off when another engine of this process holds the reaper:
	 * the attribute is the process's, so this engine's QEMUs are its
	 * children too.
	 */
	if (d->root && saas__lv_reap_active())
		reap_qemu(d, name);
}

void saas__lv_reap_open(struct drv *d)
{
	char *run, *caps;
	DIR *dir;
	struct dirent *de;

	if (!d->root)
		return;
	if (d->reap == REAP_OFF) {
		saas__lv_log(d, SAAS_LOG_INFO, "QEMUs are reaped by the host's init (reap=off): each destroy waits for it");
		return;
	}
	/*
	 * libvirt probes QEMU's capabilities with a QEMU that daemonizes itself
	 * (-daemonize: two processes re-parented to the nearest subreaper), kills
	 * it and then polls it as a domain's, and it probes a new root at its
	 * first use. The attribute is set and ROOT/lib/qemu watched before the
	 * capabilities are asked for below, so the probe's QEMU is this process's
	 * and registered by its qmp.pid (its intermediate process stays a zombie:
	 * reap.h). Probing first instead sent it to an ancestor that is a
	 * subreaper (a test program holding an engine of its own), where nothing
	 * reaped it and libvirt waited 15 s.
	 */
	if (saas__lv_reap_acquire() < 0) {
		saas__lv_log(d, SAAS_LOG_WARN, "QEMUs are reaped by the host's init, not the engine (each destroy waits "
		             "for it): %s", saas_error_last()->message);
		saas__error_clear();
		return;
	}
	d->reaping = true;
	/* Watched, then asked for: libvirt's wait for the killed probe ends at once instead of after its 15 s. */
	if ((caps = saas__lv_path_join(d->root, "lib/qemu")) && saas__mkdir_p(caps, 0700) == 0 &&
	    saas__lv_reap_watch_probes(caps, &d->reap_probe_wd) < 0)
		saas__error_clear();
	free(caps);
	caps = virConnectGetDomainCapabilities(saas__lv_conn(d), NULL, "x86_64", "q35", d->kvm ? "kvm" : "qemu", 0);
	free(caps);
	virResetLastError();
	/*
	 * The common point of every start: libvirt writes ROOT/run/qemu/NAME.pid
	 * for each QEMU it makes (a domain's, whatever call made it), so the
	 * watch registers it before the start returns, a start that fails
	 * included. launch_start registers again (a lost event).
	 */
	if (!(run = saas__lv_path_join(d->root, "run/qemu")))
		saas__lv_log(d, SAAS_LOG_WARN, "QEMUs whose start fails may not be reaped (their zombies stay): out of memory");
	else if (saas__mkdir_p(run, 0700) < 0)
		saas__lv_log(d, SAAS_LOG_WARN, "QEMUs whose start fails may not be reaped (their zombies stay): cannot create "
		             "%s: %s", run, strerror(errno));
	else if (saas__lv_reap_watch(run, &d->reap_wd) < 0)
		saas__lv_log(d, SAAS_LOG_WARN, "QEMUs whose start fails may not be reaped (their zombies stay): %s",
		             saas_error_last()->message);
	/* The QEMUs running now (libvirt keeps a pidfile per running domain): ours are reaped, others get ECHILD. */
	if (run && (dir = opendir(run))) {
		while ((de = readdir(dir))) {
			size_t len = strlen(de->d_name);
			if (len > 4 && strcmp(de->d_name + len - 4, ".pid") == 0) {
				de->d_name[len - 4] = '\0';
				reap_qemu(d, de->d_name);
			}
		}
		closedir(dir);
	}
	free(run);
	saas__error_clear();
	saas__lv_log(d, SAAS_LOG_INFO, "QEMUs are reaped by the engine as they exit (%zu running watched)",
	             saas__lv_reap_count());
}

void saas__lv_reap_close(struct drv *d)
{
	if (d->reaping) {
		saas__lv_reap_unwatch(d->reap_probe_wd);
		saas__lv_reap_unwatch(d->reap_wd);
		saas__lv_reap_release();
	}
	d->reap_wd = -1;
	d->reap_probe_wd = -1;
	d->reaping = false;
}
