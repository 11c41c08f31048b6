/*
 * The driver's guest calls: commands, files, ports and terminals, over each
 * VM's SSH session (lib/transport/ssh.h), or over its control port
 * (lib/transport/control.h) where the host has one and the guest's helper
 * serves the call, one user of the port at a time.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "driver/libvirt/channel.h"
#include "driver/libvirt/guest.h"
#include "driver/libvirt/launch.h"
#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/vm.h"
#include "transport/control.h"

/* ---- the guest ------------------------------------------------------------------------------- */

/*
 * How long a command, a transfer or a port connection waits for the port
 * held by another user while the VM has no SSH session, before it goes
 * over SSH: the fallback would start a login, 0.4-3 s of the guest's CPU
 * under TCG, and what holds the port is most often a code run's
 * connection whose caller already has the run's end and whose relay is
 * winding down (the guest's helper telling it the code server closed).
 */
#define PORT_WAIT_MS 500
/*
 * How long the port stays unused after a relayed connection before the
 * engine brings the VM's SSH session up in the background (relay_main):
 * longer than the pause between two runs of a notebook, a script or an
 * agent (its thinking time: seconds, tens of seconds), as the login takes
 * the guest's CPU from whatever run comes during it (a `1+1` 2.5x slower
 * under TCG when it came 1.5 s after the last with a second's quiet).
 */
#define SESSION_QUIET_MS 30000

/*
 * Whether its helper serves files was asked for the first time (by a
 * transfer, or by a command that opened the port first): said once per VM.
 */
static void port_files_said(struct drv *d, const char *name, int before, int now)
{
	if (before == 0 && now > 0)
		saas__lv_log(d, SAAS_LOG_INFO, "VM %s: its files go over the control port", name);
	else if (before == 0 && now < 0)
		saas__lv_log(d, SAAS_LOG_INFO, "VM %s: its files go over SFTP: %s", name, saas_error_last()->message);
}

/*
 * A remote VM's channel that could not be opened (its host briefly gone, or
 * another engine of the cluster holding it) is not asked for again before
 * PORT_RETRY_MS, doubled at each failure in a row up to PORT_RETRY_MAX_MS;
 * after PORT_RETRY_TRIES failures in a row the VM has no port for good, as
 * one without the channel (its calls go over SSH meanwhile and then).
 */
#define PORT_RETRY_MS 2000
#define PORT_RETRY_MAX_MS 60000
#define PORT_RETRY_TRIES 8

/* May the port be tried now? The port taken. */
static bool port_due(struct vm *v)
{
	return v->port_fails == 0 || saas__now_ms() >= v->port_retry_at;
}

/* What the channel's open (if one was asked for, through w) tells: the port taken. */
static void port_opened(struct vm *v, const struct saas__lv_way *w)
{
	int64_t wait = PORT_RETRY_MS;

	if (w->open_rc == 0)
		v->port_fails = 0;
	if (w->open_rc >= 0)
		return;
	if (++v->port_fails >= PORT_RETRY_TRIES) {
		v->files = -1; /* said by port_files_said, with the open's error */
		return;
	}
	for (int i = 1; i < v->port_fails && wait < PORT_RETRY_MAX_MS; i++)
		wait *= 2;
	v->port_retry_at = saas__now_ms() + (wait < PORT_RETRY_MAX_MS ? wait : PORT_RETRY_MAX_MS);
}

/* The command sent over the port runs in the guest (its "ready"): commands held for it go. */
static void port_started(void *ud)
{
	struct vm *v = ud;

	pthread_mutex_lock(&v->ctl_mu);
	v->ctl_starting = false;
	pthread_cond_broadcast(&v->ctl_cv);
	pthread_mutex_unlock(&v->ctl_mu);
}

/*
 * Before a command goes over SSH: one sent over the port before it (which
 * holds the port, so this one could not take it) starts first, as two sent
 * one after the other on one SSH connection do. A background `sleep` on the
 * port and a `pgrep sleep` sent right after over the VM's up SSH session
 * would race otherwise (the API says a command was started before the guest
 * runs it), and the pgrep could win. Waited for up to CONTROL_TIMEOUT_MS: a
 * guest that never starts it holds no one for longer.
 */
static void port_started_wait(struct drv *d, const char *name)
{
	struct timespec until;
	struct vm *v;

	if (!(v = saas__lv_vm_get(d, name)))
		return;
	/* ctl_cv waits on the monotonic clock (vm.c). */
	saas__deadline(&until, CLOCK_MONOTONIC, CONTROL_TIMEOUT_MS);
	pthread_mutex_lock(&v->ctl_mu);
	while (v->ctl_starting && pthread_cond_timedwait(&v->ctl_cv, &v->ctl_mu, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&v->ctl_mu);
	saas__lv_vm_put(d, v);
}

/* Is the VM's SSH session up (not being connected, not dead)? */
static bool session_up(struct vm *v)
{
	bool up;

	if (pthread_mutex_trylock(&v->mu) != 0)
		return false; /* being connected */
	up = v->ssh && saas__ssh_alive(v->ssh);
	pthread_mutex_unlock(&v->mu);
	return up;
}

/*
 * A command over the control port (lib/transport/control_exec.c) while the VM has no SSH
 * session: a clone's first commands need no login. With the session up, a
 * plain command still goes over the port when it is free
 * (saas__exec_port_first): no SSH channel, no bash start; so a VM that booted
 * cold, or one whose session came up since, runs `true` as fast as a clone.
 * SAAS_ENOTSUP, with nothing run, where it goes over SSH: a session is up
 * and the command needs the shell, the port is in use or cannot run it.
 */
static int exec_over_port(struct drv *d, const char *name, const saas_driver_exec *req, int *exit_code)
{
	struct vm *v;
	struct saas__lv_way w;
	char *dir = NULL;
	int rc = SAAS_ENOTSUP, execs, files;
	bool up;

	if (!d->host->control_port || !d->control_exec || !(v = saas__lv_vm_get(d, name)))
		return SAAS_ENOTSUP;
	/* Waited for only while a fallback would mean a login. */
	if (!saas__lv_port_take(v, PORT_EXEC, session_up(v) ? 0 : PORT_WAIT_MS))
		goto out;
	up = session_up(v);
	if (!saas__exec_port_first(req, v->execs, up) || v->execs < 0 || !port_due(v)) {
		/*
		 * A command for the shell, the session up. Or its helper predates
		 * commands: asked once. Or its channel failed a moment ago.
		 */
	} else if (!(dir = saas__lv_drv_path(d, "vms", name))) {
		rc = saas__oom();
	} else {
		const struct saas__ctl_way *way = saas__lv_ctl_way(&w, d, name, dir);
		execs = v->execs;
		files = v->files;
		/* Until it runs in the guest, commands that find the port taken wait before they go over SSH. */
		w.way.ready = port_started;
		w.way.ready_ud = v;
		pthread_mutex_lock(&v->ctl_mu);
		v->ctl_starting = true;
		pthread_mutex_unlock(&v->ctl_mu);
		rc = saas__ctl_exec(&v->ctl, way, &v->files, &v->execs, req, exit_code);
		port_opened(v, &w);
		if (d->control_files)
			port_files_said(d, name, files, v->files);
		if (execs == 0 && v->execs < 0)
			saas__lv_log(d, SAAS_LOG_INFO, "VM %s: its commands go over SSH: %s", name,
			             saas_error_last()->message);
		/* Said once per VM, as the other way is: which way a clone's first commands went, for whoever checks. */
		else if (execs == 0 && v->execs > 0 && !up)
			saas__lv_log(d, SAAS_LOG_INFO, "VM %s: its commands go over the control port until its SSH session is up",
			             name);
		else if (execs == 0 && v->execs > 0)
			saas__lv_log(d, SAAS_LOG_INFO, "VM %s: its plain commands go over the control port beside its SSH session",
			             name);
	}
	saas__lv_port_give(v);
out:
	saas__lv_vm_put(d, v);
	free(dir);
	return rc;
}

int saas__lv_guest_exec(void *ctx, const char *name, const saas_driver_exec *req, int *exit_code)
{
	struct drv *d = ctx;
	saas__ssh *ssh;
	int rc;

	if ((rc = exec_over_port(d, name, req, exit_code)) != SAAS_ENOTSUP)
		return rc;
	saas__error_clear();
	port_started_wait(d, name);
	if ((rc = saas__lv_vm_session(d, name, &ssh)) < 0)
		return rc;
	rc = saas__ssh_exec(ssh, req, exit_code);
	saas__ssh_close(ssh);
	return rc;
}

/* A file transfer over the control port (lib/transport/control_files.c), or over SFTP where the port cannot take it. */
struct file_call {
	const char *path;
	unsigned int mode;
	saas_read_fn reader;
	saas_write_fn writer;
	void *ud;
	int64_t max, size, *sizep;
};

/*
 * Over the VM's control port where its guest's helper serves files (asked
 * once per VM, then remembered): SAAS_ENOTSUP, with nothing of the file
 * moved, where it cannot be used and SFTP must do it.
 */
static int file_over_port(struct drv *d, const char *name, struct file_call *fc)
{
	struct vm *v;
	struct saas__lv_way w;
	char *dir;
	int rc, files;

	if (!d->host->control_port || !d->control_files || !(v = saas__lv_vm_get(d, name)))
		return SAAS_ENOTSUP;
	if (!(dir = saas__lv_drv_path(d, "vms", name))) {
		saas__lv_vm_put(d, v);
		return saas__oom();
	}
	if (!saas__lv_port_take(v, PORT_FILES, session_up(v) ? 0 : PORT_WAIT_MS)) {
		/* Another user has the port (past PORT_WAIT_MS without a session): SFTP, not a wait of unknown length. */
		saas__lv_vm_put(d, v);
		free(dir);
		return SAAS_ENOTSUP;
	}
	if (!port_due(v)) {
		/* Its channel failed a moment ago: SFTP. */
		saas__lv_port_give(v);
		saas__lv_vm_put(d, v);
		free(dir);
		return SAAS_ENOTSUP;
	}
	files = v->files;
	saas__lv_ctl_way(&w, d, name, dir);
	if (fc->reader)
		rc = saas__ctl_files_write(&v->ctl, &w.way, &v->files, fc->path, fc->mode, fc->reader, fc->ud, &d->closing);
	else
		rc = saas__ctl_files_read(&v->ctl, &w.way, &v->files, fc->path, fc->max, fc->writer, fc->ud, fc->sizep,
		                          &d->closing);
	port_opened(v, &w);
	port_files_said(d, name, files, v->files);
	saas__lv_port_give(v);
	saas__lv_vm_put(d, v);
	free(dir);
	return rc;
}

static int file_call(struct drv *d, const char *name, struct file_call *fc)
{
	saas__ssh *ssh;
	int rc;

	if ((rc = file_over_port(d, name, fc)) != SAAS_ENOTSUP)
		return rc;
	saas__error_clear();
	if ((rc = saas__lv_vm_session(d, name, &ssh)) < 0)
		return rc;
	if (fc->reader)
		rc = saas__ssh_file_write(ssh, fc->path, fc->mode, fc->reader, fc->ud, fc->size);
	else
		rc = saas__ssh_file_read(ssh, fc->path, fc->max, fc->writer, fc->ud, fc->sizep);
	saas__ssh_close(ssh);
	return rc;
}

int saas__lv_guest_file_write(void *ctx, const char *name, const char *path, unsigned int mode, saas_read_fn reader,
                              void *ud, int64_t size)
{
	struct file_call fc = { .path = path, .mode = mode, .reader = reader, .ud = ud, .size = size };

	return file_call(ctx, name, &fc);
}

int saas__lv_guest_file_read(void *ctx, const char *name, const char *path, int64_t max, saas_write_fn writer,
                             void *ud, int64_t *size)
{
	struct file_call fc = { .path = path, .writer = writer, .ud = ud, .max = max, .sizep = size };

	return file_call(ctx, name, &fc);
}

int saas__lv_guest_file_list(void *ctx, const char *name, const char *path, unsigned int depth, saas_entry_fn fn,
                             void *ud)
{
	struct drv *d = ctx;
	saas__ssh *ssh;
	int rc;

	if ((rc = saas__lv_vm_session(d, name, &ssh)) < 0)
		return rc;
	/*
	 * The engine keeps at most SAAS_LIST_ENTRIES_MAX entries and flags the
	 * list truncated when one more comes: reading one more than that bounds
	 * what a guest's huge directory costs the host and still tells it so.
	 */
	rc = saas__ssh_file_list(ssh, path, depth, SAAS_LIST_ENTRIES_MAX + 1, fn, ud);
	saas__ssh_close(ssh);
	return rc;
}

/*
 * Directories, removal and renames go over SFTP, as listings do, never over
 * the control port: the guest's sftp-server already runs each request as
 * the sandbox user with the guest kernel's own checks, so no operation is
 * added to the guest's helper (images/guest/aas-control.c) and the images,
 * whose hash covers it, stay as they are. These calls carry no bulk bytes,
 * so the port's speed would buy little.
 */
int saas__lv_guest_file_mkdir(void *ctx, const char *name, const char *path, int *created)
{
	saas__ssh *ssh;
	int rc;

	if ((rc = saas__lv_vm_session(ctx, name, &ssh)) < 0)
		return rc;
	rc = saas__ssh_file_mkdir(ssh, path, created);
	saas__ssh_close(ssh);
	return rc;
}

int saas__lv_guest_file_remove(void *ctx, const char *name, const char *path)
{
	saas__ssh *ssh;
	int rc;

	if ((rc = saas__lv_vm_session(ctx, name, &ssh)) < 0)
		return rc;
	rc = saas__ssh_file_remove(ssh, path);
	saas__ssh_close(ssh);
	return rc;
}

int saas__lv_guest_file_rename(void *ctx, const char *name, const char *from, const char *to, unsigned int flags)
{
	saas__ssh *ssh;
	int rc;

	if ((rc = saas__lv_vm_session(ctx, name, &ssh)) < 0)
		return rc;
	rc = saas__ssh_file_rename(ssh, from, to, flags);
	saas__ssh_close(ssh);
	return rc;
}

/*
 * A port connection over the control port, while the VM has no SSH session:
 * a clone's first connection to a guest port (its code server's, above all)
 * needs no login then, which under TCG is most of a second or two. The
 * guest's helper opens 127.0.0.1:PORT itself (lib/transport/control_conn.c,
 * no shell), and a thread of ours carries the bytes between the caller's
 * end of a socket pair and the port's frames. The connection holds the port
 * until it ends, as a command does: one connection is relayed at once per
 * VM, and the next ones, while it lasts, take the SSH session (which their
 * first makes). A helper that predates connections (an image built before
 * them) is asked once; its VM's connections go over SSH.
 */
struct relay {
	struct drv *d;
	struct vm *v;                    /* its reference, and the port, are the thread's */
	char name[SAAS_ID_MAX + 1];
	int fd;                          /* the relay's end of the socket pair */
};

static void relay_done(struct drv *d)
{
	pthread_mutex_lock(&d->mu);
	if (--d->relays == 0)
		pthread_cond_broadcast(&d->keeper_cond);
	pthread_mutex_unlock(&d->mu);
}

static void relay_end(struct relay *r)
{
	if (saas__ctl_conn_pump(&r->v->ctl, r->fd, &r->d->closing) < 0)
		saas__lv_log(r->d, SAAS_LOG_INFO, "VM %s: a port connection over the control port ended: %s", r->name,
		             saas_error_last()->message);
	saas__error_clear();
	shutdown(r->fd, SHUT_RDWR);
	close(r->fd);
	saas__lv_port_give(r->v);
	saas__lv_vm_put(r->d, r->v);
}

/*
 * The thread that waits for the port's quiet and then brings the session up
 * (one per VM at once: the relays that end meanwhile leave it to that one).
 */
static void session_when_quiet(struct drv *d, struct vm *v)
{
	struct vm *now = NULL;
	bool due = saas__lv_port_quiet(d, v, SESSION_QUIET_MS) && !session_up(v) &&
	           !__atomic_load_n(&v->gone, __ATOMIC_ACQUIRE);

	__atomic_store_n(&v->quiet_wait, false, __ATOMIC_RELEASE);
	/* Still the registry's VM of that name (not destroyed meanwhile, nor being destroyed, nor made again)? */
	if (due && (now = saas__lv_vm_get(d, v->name)) == v) {
		saas__ssh *ssh = NULL;
		saas__lv_log(d, SAAS_LOG_INFO, "VM %s: its SSH session comes up in the background, its control port "
		             "unused for %d ms", v->name, SESSION_QUIET_MS);
		if (saas__lv_vm_session(d, v->name, &ssh) == SAAS_OK)
			saas__ssh_close(ssh);
		saas__error_clear();
	}
	if (now)
		saas__lv_vm_put(d, now);
}

static void *relay_main(void *arg)
{
	struct relay *r = arg;
	struct drv *d = r->d;
	struct vm *v;

	relay_end(r);
	/*
	 * A sandbox that reached a port once will again, and a later need of
	 * its SSH session (a terminal, a listing, a second connection at once)
	 * should find it up: it comes up in the background, but only once the
	 * port has stayed unused for SESSION_QUIET_MS. Not at once: the login
	 * takes the guest's CPU for a second or more under TCG, and the next run,
	 * which most often comes right after (a notebook's next cell, a script's
	 * next call), would share the guest with it; runs meanwhile are relayed,
	 * one after the other, each one's end starting the wait again.
	 */
	if (!closing(d) && (v = saas__lv_vm_get(d, r->name))) {
		if (!__atomic_exchange_n(&v->quiet_wait, true, __ATOMIC_ACQ_REL))
			session_when_quiet(d, v);
		saas__lv_vm_put(d, v);
	}
	free(r);
	relay_done(d);
	return NULL;
}

/* Over the control port: SAAS_OK and *fd, SAAS_ENOTSUP where it goes over SSH, or an error. */
static int port_over_port(struct drv *d, const char *name, unsigned int port, int *fd)
{
	struct saas__lv_way w;
	struct relay *r = NULL;
	struct vm *v;
	pthread_attr_t attr;
	pthread_t thread;
	char *dir = NULL;
	int64_t t0, waited;
	int sp[2] = { -1, -1 }, rc = SAAS_ENOTSUP, conns, files, n;

	if (!d->host->control_port || !d->control_exec || !(v = saas__lv_vm_get(d, name)))
		return SAAS_ENOTSUP;
	if (closing(d) || session_up(v)) {
		saas__lv_vm_put(d, v);
		return SAAS_ENOTSUP;
	}
	t0 = saas__now_ms();
	if (!saas__lv_port_take(v, PORT_EXEC, PORT_WAIT_MS)) {
		/* Rare (a long connection holds the port): said, as the login it starts is most of a second under TCG. */
		saas__lv_log(d, SAAS_LOG_INFO, "VM %s: a port connection goes over SSH, the control port held for %d ms",
		             name, PORT_WAIT_MS);
		saas__lv_vm_put(d, v);
		return SAAS_ENOTSUP;
	}
	if ((waited = saas__now_ms() - t0) > 0)
		saas__lv_log(d, SAAS_LOG_DEBUG, "VM %s: a port connection waited %lld ms for the control port", name,
		             (long long)waited);
	if (v->conns < 0 || !port_due(v))
		goto give; /* its helper predates connections, or its channel failed a moment ago */
	if (!(dir = saas__lv_drv_path(d, "vms", name)) || !(r = calloc(1, sizeof(*r)))) {
		rc = saas__oom();
		goto give;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "socketpair: %s", strerror(errno));
		goto give;
	}
	conns = v->conns;
	files = v->files;
	rc = saas__ctl_conn_open(&v->ctl, saas__lv_ctl_way(&w, d, name, dir), &v->files, &v->conns, port, &d->closing);
	port_opened(v, &w);
	if (d->control_files)
		port_files_said(d, name, files, v->files);
	if (conns == 0 && v->conns < 0)
		saas__lv_log(d, SAAS_LOG_INFO, "VM %s: its port connections go over SSH: %s", name,
		             saas_error_last()->message);
	if (rc < 0)
		goto give;
	/* Said once per VM, as its commands' way is: for whoever checks where a clone's first connections went. */
	if (!__atomic_exchange_n(&v->relayed, true, __ATOMIC_ACQ_REL))
		saas__lv_log(d, SAAS_LOG_INFO, "VM %s: its port connections go over the control port until its "
		             "SSH session is up", name);
	r->d = d;
	r->v = v;
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->fd = sp[1];
	pthread_mutex_lock(&d->mu);
	d->relays++;
	pthread_mutex_unlock(&d->mu);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	n = pthread_create(&thread, &attr, relay_main, r);
	pthread_attr_destroy(&attr);
	if (n != 0) {
		/* The guest's connection is open: closed at once (the pump sees the caller's end gone). */
		close(sp[0]);
		relay_end(r);
		free(r);
		relay_done(d);
		free(dir);
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, n, "starting the port's relay: %s", strerror(n));
	}
	free(dir);
	*fd = sp[0];
	return SAAS_OK;
give:
	if (sp[0] >= 0) {
		close(sp[0]);
		close(sp[1]);
	}
	free(r);
	free(dir);
	saas__lv_port_give(v);
	saas__lv_vm_put(d, v);
	return rc;
}

int saas__lv_guest_port_connect(void *ctx, const char *name, unsigned int port, int *fd)
{
	struct drv *d = ctx;
	saas__ssh *ssh;
	int rc;

	if ((rc = port_over_port(d, name, port, fd)) != SAAS_ENOTSUP)
		return rc;
	saas__error_clear();
	if ((rc = saas__lv_vm_session(d, name, &ssh)) < 0)
		return rc;
	rc = saas__ssh_port_connect(ssh, port, fd);
	saas__ssh_close(ssh);
	return rc;
}

/* ---- terminals ------------------------------------------------------------------------------- */

int saas__lv_guest_pty_open(void *ctx, const char *name, const saas_driver_pty *req, int *fd, void **pty)
{
	struct drv *d = ctx;
	saas__ssh_pty *t = NULL;
	saas__ssh *ssh;
	int rc;

	if ((rc = saas__lv_vm_session(d, name, &ssh)) < 0)
		return rc;
	rc = saas__ssh_pty_open(ssh, req, fd, &t);
	saas__ssh_close(ssh);
	*pty = t;
	return rc;
}

int saas__lv_guest_pty_resize(void *ctx, void *pty, unsigned int cols, unsigned int rows)
{
	(void)ctx;
	return saas__ssh_pty_resize(pty, cols, rows);
}

void saas__lv_guest_pty_close(void *ctx, void *pty, int *exit_status)
{
	(void)ctx;
	saas__ssh_pty_close(pty, exit_status);
}
