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
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libvirt/virterror.h>

#include "driver/libvirt/cgroup.h"
#include "driver/libvirt/conf.h"
#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/reap.h"
#include "util/file.h"

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
/* Directories watched: one inotify descriptor, a watch each. */
enum wkind {
	W_PIDFILES, /* libvirt's pidfiles (saas__lv_reap_watch) */
	W_PROBES,   /* ROOT/lib/qemu: its new qmp-* directories are watched in turn (saas__lv_reap_watch_probes) */
	W_ROOTS,    /* the embedded roots' parent: each root's run/qemu is watched (saas__lv_reap_watch_roots) */
	W_ASCEND,   /* a root, or its run/, until its run/qemu is made */
};
struct watched {
	int wd;
	enum wkind kind;
	char *dir;
	char *root;    /* W_ASCEND: the root whose run/qemu is awaited */
	bool strict;   /* W_PIDFILES: only this user's files in this user's directory count (pidfile_register) */
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

static void watched_free(struct watched *w)
{
	if (w) {
		free(w->dir);
		free(w->root);
		free(w);
	}
}

/* A directory only this process's user can write (libvirt's run/qemu under a root it made), not a link. */
static bool dir_trusted(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
	       !(st.st_mode & (S_IWGRP | S_IWOTH));
}

/* pid's parent and start (clock ticks after boot), from /proc/PID/stat; false when it has none. */
static bool proc_stat(pid_t pid, pid_t *ppid, unsigned long long *start)
{
	char path[64], text[1024], *rp;
	ssize_t n;
	int fd, pp;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return false;
	text[n] = '\0';
	/* After the name (which may hold anything, ')' too): state (3), ppid (4), ..., starttime (22). */
	if (!(rp = strrchr(text, ')')) ||
	    sscanf(rp + 1, " %*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &pp,
	           start) != 2)
		return false;
	*ppid = (pid_t)pp;
	return true;
}

/*
 * May the process pid, named by a pidfile written at *written, be waited
 * for? Only a process below this one (a QEMU, ours or a child process's
 * engine's, which are ours once that engine dies; a process elsewhere never
 * becomes our child) that was running when the pidfile was written: a
 * stale pidfile's pid, taken since by a later process (maybe the host
 * program's own child, which it waits for by pid), started after it.
 */
static bool pidfile_names(pid_t pid, const struct timespec *written)
{
	pid_t ppid, self = getpid();
	unsigned long long start, ignored;
	struct timespec rt, bt;
	bool below = false;
	double started;

	if (pid == self || !proc_stat(pid, &ppid, &start))
		return false;
	/* Its ancestors, up to init or 16 levels (a QEMU is 1 or 2 below its engine's process). */
	for (int depth = 0; depth < 16 && ppid > 1 && !below; depth++)
		if (!(below = ppid == self) && !proc_stat(ppid, &ppid, &ignored))
			break;
	if (!below)
		return false;
	/* Its start on the wall clock, to a tick; the file's time is as coarse: a tenth of a second of room. */
	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_BOOTTIME, &bt);
	started = (double)(rt.tv_sec - bt.tv_sec) + (double)(rt.tv_nsec - bt.tv_nsec) / 1e9 +
	          (double)start / (double)sysconf(_SC_CLK_TCK);
	return started <= (double)written->tv_sec + (double)written->tv_nsec / 1e9 + 0.1;
}

static bool is_pidfile(const char *name)
{
	size_t len = strlen(name);

	/* libvirt's driver.pid there names the engine's process, not a QEMU. */
	return len > 4 && strcmp(name + len - 4, ".pid") == 0 && strcmp(name, "driver.pid") != 0;
}

/*
 * The process a pidfile in dir names, registered: a NAME.pid (not libvirt's
 * driver.pid), a process pidfile_names allows. strict (libvirt's run/qemu,
 * this root's or another's): the directory and the file are this process's
 * user's and writable by no one else (a probe's qmp.pid is QEMU's own, made
 * under the probe's uid in a directory libvirt made for it).
 */
static void pidfile_register(const char *dir, const char *name, bool strict)
{
	char path[4096], text[32], *end;
	struct stat st;
	ssize_t n = -1;
	long pid;
	int fd;

	if (!is_pidfile(name) || (strict && !dir_trusted(dir)) ||
	    (size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path) ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) < 0)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    (!strict || (st.st_uid == geteuid() && !(st.st_mode & (S_IWGRP | S_IWOTH)))))
		n = read(fd, text, sizeof(text) - 1);
	close(fd);
	/* None yet (libvirt writes it after making it): the write's own event comes. */
	if (n <= 0)
		return;
	text[n] = '\0';
	errno = 0;
	pid = strtol(text, &end, 10);
	if (errno || end == text || (*end && *end != '\n') || pid <= 1 || pid > INT32_MAX ||
	    !pidfile_names((pid_t)pid, &st.st_mtim))
		return;
	saas__lv_reap_add((pid_t)pid);
	saas__error_clear();
}

/* Every pidfile in dir registered (one written before the watch was there, or while events were lost). */
static void pidfiles_scan(const char *dir, bool strict)
{
	DIR *dp = opendir(dir);
	struct dirent *de;

	while (dp && (de = readdir(dp)))
		pidfile_register(dir, de->d_name, strict);
	if (dp)
		closedir(dp);
}

enum {
	WA_UNIQUE = 1, /* none added where one of that directory and kind is there: 1 then */
	WA_LAX = 2,    /* W_PIDFILES: a probe's, whose pidfile QEMU writes itself (not strict) */
};

/* A watch of dir of its kind (flags WA_*): SAAS_OK, 1 (WA_UNIQUE: there already), or an error. */
static int watch_add(const char *dir, enum wkind kind, const char *root, int flags, int *wd)
{
	static const uint32_t masks[] = {
		[W_PIDFILES] = IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_ONLYDIR,
		[W_PROBES] = IN_CREATE | IN_ONLYDIR,
		[W_ROOTS] = IN_CREATE | IN_MOVED_TO | IN_ONLYDIR,
		[W_ASCEND] = IN_CREATE | IN_MOVED_TO | IN_ONLYDIR,
	};
	struct watched *w = calloc(1, sizeof(*w));
	int rc = SAAS_OK;

	if (wd)
		*wd = -1;
	if (!w || !(w->dir = saas__strdup(dir)) || (root && !(w->root = saas__strdup(root)))) {
		watched_free(w);
		return saas__oom();
	}
	w->kind = kind;
	w->strict = !(flags & WA_LAX);
	pthread_mutex_lock(&mu);
	for (struct watched *o = watches; (flags & WA_UNIQUE) && o && rc == SAAS_OK; o = o->next)
		if (o->kind == kind && strcmp(o->dir, dir) == 0)
			rc = 1;
	if (rc == 1) {
		/* already watched */
	} else if (!running) {
		rc = saas__error(SAAS_ESTATE, SAAS_ERRCLASS_DRIVER, 0, "the reaper is not running");
	} else if ((w->wd = inotify_add_watch(ifd, dir, masks[kind])) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot watch %s: %s", dir, strerror(errno));
	} else {
		/* One directory watched twice (an engine's own root, also beside another's) shares its wd. */
		if (wd)
			*wd = w->wd;
		w->next = watches;
		watches = w;
		w = NULL;
	}
	pthread_mutex_unlock(&mu);
	watched_free(w);
	return rc;
}

/*
 * An embedded root beside this engine's (another engine's: one in a child
 * process whose QEMUs become ours if it dies): its run/qemu watched and
 * read, or, not made yet, the directory on the way to it (the root, or its
 * run/), whose watch brings us back here.
 */
static void root_adopt(const char *root)
{
	char *run = saas__lv_path_join(root, "run"), *qemu = run ? saas__lv_path_join(run, "qemu") : NULL;

	/* At most three turns: each one a level deeper, as long as the next level was made meanwhile. */
	while (qemu) {
		const char *at, *next;
		if (dir_trusted(qemu)) {
			if (watch_add(qemu, W_PIDFILES, NULL, WA_UNIQUE, NULL) == SAAS_OK)
				pidfiles_scan(qemu, true);
			break;
		}
		at = dir_trusted(run) ? run : dir_trusted(root) ? root : NULL;
		next = at == run ? qemu : run;
		if (!at || watch_add(at, W_ASCEND, root, WA_UNIQUE, NULL) < 0 || !dir_trusted(next))
			break;
	}
	saas__error_clear();
	free(qemu);
	free(run);
}

/* Every root in base (the embedded roots' parent directory) adopted. */
static void roots_walk(const char *base)
{
	DIR *dp = opendir(base);
	struct dirent *de;
	char *root;

	while (dp && (de = readdir(dp))) {
		if (de->d_name[0] == '.' || !(root = saas__lv_path_join(base, de->d_name)))
			continue;
		root_adopt(root);
		free(root);
	}
	if (dp)
		closedir(dp);
}

/* What a watch is, copied out of the list (which may change while it is acted on). */
struct wcopy {
	enum wkind kind;
	bool strict;
	char *dir, *root;
};

static bool wcopy_of(int wd, struct wcopy *c)
{
	bool found = false;

	memset(c, 0, sizeof(*c));
	pthread_mutex_lock(&mu);
	for (struct watched *w = watches; w && !found; w = w->next) {
		if (w->wd != wd)
			continue;
		c->kind = w->kind;
		c->strict = w->strict;
		c->dir = saas__strdup(w->dir);
		c->root = w->root ? saas__strdup(w->root) : NULL;
		found = c->dir && (!w->root || c->root);
	}
	pthread_mutex_unlock(&mu);
	if (!found) {
		free(c->dir);
		free(c->root);
	}
	return found;
}

/* Events were lost: every watched directory read again. */
static void watches_rescan(void)
{
	struct wcopy *all = NULL;
	size_t n = 0, cap = 0;

	pthread_mutex_lock(&mu);
	for (struct watched *w = watches; w; w = w->next)
		cap++;
	if (cap && (all = calloc(cap, sizeof(*all)))) {
		for (struct watched *w = watches; w && n < cap; w = w->next) {
			all[n] = (struct wcopy){ .kind = w->kind, .strict = w->strict, .dir = saas__strdup(w->dir),
			                         .root = w->root ? saas__strdup(w->root) : NULL };
			if (all[n].dir && (!w->root || all[n].root))
				n++;
			else
				free(all[n].dir);
		}
	}
	pthread_mutex_unlock(&mu);
	for (size_t i = 0; i < n; i++) {
		if (all[i].kind == W_PIDFILES)
			pidfiles_scan(all[i].dir, all[i].strict);
		else if (all[i].kind == W_ROOTS)
			roots_walk(all[i].dir);
		else if (all[i].kind == W_ASCEND)
			root_adopt(all[i].root);
		free(all[i].dir);
		free(all[i].root);
	}
	free(all);
}

/*
 * An event in a watched directory. A pidfile written in run/qemu: its
 * process registered the moment libvirt starts it, before
 * virDomainCreateXML returns, so a QEMU that dies during its start (libvirt
 * then waits for it to go) is reaped too. A pidfile is an authority here:
 * libvirt writes it for the process it has just made, below this process
 * (pidfile_register says what is checked).
 */
static void watch_event(const struct inotify_event *ev)
{
	struct wcopy c;
	char *sub = NULL;
	int wd;

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
		watched_free(gone);
		return;
	}
	if (!ev->len || !wcopy_of(ev->wd, &c))
		return;
	if (c.kind == W_PIDFILES) {
		pidfile_register(c.dir, ev->name, c.strict);
	} else if (!(ev->mask & IN_ISDIR)) {
		/* only directories are awaited elsewhere */
	} else if (c.kind == W_PROBES && strncmp(ev->name, "qmp-", 4) == 0) {
		/* A capabilities probe's directory: its QEMU's pidfile (qmp.pid) will be written there. */
		if ((sub = saas__lv_path_join(c.dir, ev->name)) && watch_add(sub, W_PIDFILES, NULL, WA_LAX, &wd) == SAAS_OK)
			pidfiles_scan(sub, false); /* written before the watch was there */
	} else if (c.kind == W_ROOTS) {
		if ((sub = saas__lv_path_join(c.dir, ev->name)))
			root_adopt(sub);
	} else if (c.kind == W_ASCEND) {
		root_adopt(c.root);
	}
	free(sub);
	free(c.dir);
	free(c.root);
	saas__error_clear();
}

static void watch_events(int fd)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t len = read(fd, buf, sizeof(buf));

	for (ssize_t off = 0; len > 0 && off < len;) {
		const struct inotify_event *ev = (const struct inotify_event *)(buf + off);
		off += (ssize_t)(sizeof(*ev) + ev->len);
		if (ev->mask & IN_Q_OVERFLOW)
			watches_rescan();
		else
			watch_event(ev);
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
			watch_events(use[1].fd);
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
		watched_free(w);
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
	return watch_add(dir, W_PIDFILES, NULL, 0, wd);
}

int saas__lv_reap_watch_probes(const char *dir, int *wd)
{
	return watch_add(dir, W_PROBES, NULL, 0, wd);
}

int saas__lv_reap_watch_roots(const char *base)
{
	int rc = watch_add(base, W_ROOTS, NULL, WA_UNIQUE, NULL);

	if (rc == SAAS_OK)
		roots_walk(base);
	return rc < 0 ? rc : SAAS_OK;
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
	watched_free(gone);
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
	/* Gone, or not readable: not one to wait for. */
	qemu = saas__file_read(&comm, NULL, AT_FDCWD, path, 64, SAAS__FILE_QUIET) == SAAS_OK &&
	       strncmp(comm, "qemu", 4) == 0;
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
	char *run, *caps, *base, *slash;
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
	 * first use. The attribute is set and ROOT/lib/qemu watched here, before
	 * lv_open asks for the domain capabilities (once, after this returns:
	 * open_caps in libvirt.c), so the probe's QEMU is this process's and
	 * registered by its qmp.pid (its intermediate process stays a zombie:
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
	/* Watched before the probe runs: libvirt's wait for the killed probe ends at once instead of after its 15 s. */
	if ((caps = saas__lv_path_join(d->root, "lib/qemu")) && saas__mkdir_p(caps, 0700) == 0 &&
	    saas__lv_reap_watch_probes(caps, &d->reap_probe_wd) < 0)
		saas__error_clear();
	free(caps);
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
	/*
	 * The other roots beside this one (the engines of this process's child
	 * processes): their QEMUs are registered too, and reaped if they become
	 * ours, which they do when their engine's process dies (a child
	 * subreaper's orphans go to the nearest subreaper above).
	 */
	if ((base = saas__strdup(d->root)) && (slash = strrchr(base, '/')) && slash != base) {
		*slash = '\0';
		if (saas__lv_reap_watch_roots(base) < 0)
			saas__lv_log(d, SAAS_LOG_WARN, "the QEMUs of engines in child processes are not reaped by the engine "
			             "if their process dies (their destroys then wait about 15 s): %s",
			             saas_error_last()->message);
	}
	free(base);
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
