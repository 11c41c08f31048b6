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
 * The VM's control port for one user (true), or false: a file transfer
 * waits for another transfer to end, but nothing waits for a command (which
 * may run for an hour), and a command takes the port only when it is free;
 * what does not get it goes over SFTP or SSH.
 */
static bool port_take(struct vm *v, int user)
{
	bool got;

	pthread_mutex_lock(&v->ctl_mu);
	while (user == PORT_FILES && v->ctl_user == PORT_FILES)
		pthread_cond_wait(&v->ctl_cv, &v->ctl_mu);
	if ((got = v->ctl_user == PORT_FREE))
		v->ctl_user = user;
	pthread_mutex_unlock(&v->ctl_mu);
	return got;
}

static void port_give(struct vm *v)
{
	pthread_mutex_lock(&v->ctl_mu);
	v->ctl_user = PORT_FREE;
	pthread_cond_broadcast(&v->ctl_cv);
	pthread_mutex_unlock(&v->ctl_mu);
}

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
 * session: a clone's first commands need no login. SAAS_ENOTSUP, with
 * nothing run, where it goes over SSH: a session is up, the port is in use
 * or cannot run it.
 */
static int exec_over_port(struct drv *d, const char *name, const saas_driver_exec *req, int *exit_code)
{
	struct vm *v;
	struct saas__lv_way w;
	char *dir = NULL;
	int rc = SAAS_ENOTSUP, execs, files;

	if (!d->host->control_port || !d->control_exec || !(v = saas__lv_vm_get(d, name)))
		return SAAS_ENOTSUP;
	if (session_up(v) || !port_take(v, PORT_EXEC))
		goto out;
	if (v->execs < 0 || !port_due(v)) {
		/* Its helper predates commands: asked once. Or its channel failed a moment ago. */
	} else if (!(dir = saas__lv_drv_path(d, "vms", name))) {
		rc = saas__oom();
	} else {
		execs = v->execs;
		files = v->files;
		rc = saas__ctl_exec(&v->ctl, saas__lv_ctl_way(&w, d, name, dir), &v->files, &v->execs, req, exit_code);
		port_opened(v, &w);
		if (d->control_files)
			port_files_said(d, name, files, v->files);
		if (execs == 0 && v->execs < 0)
			saas__lv_log(d, SAAS_LOG_INFO, "VM %s: its commands go over SSH: %s", name,
			             saas_error_last()->message);
		/* Said once per VM, as the other way is: which way a clone's first commands went, for whoever checks. */
		else if (execs == 0 && v->execs > 0)
			saas__lv_log(d, SAAS_LOG_INFO, "VM %s: its commands go over the control port until its SSH session is up",
			             name);
	}
	port_give(v);
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
	if (!port_take(v, PORT_FILES)) {
		/* A command has the port: SFTP, not a wait of unknown length. */
		saas__lv_vm_put(d, v);
		free(dir);
		return SAAS_ENOTSUP;
	}
	if (!port_due(v)) {
		/* Its channel failed a moment ago: SFTP. */
		port_give(v);
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
	port_give(v);
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
 * needs no login then, which under TCG is most of a second or two. The port
 * runs commands only, so the connection is one: the guest's bash opens
 * 127.0.0.1:PORT (its /dev/tcp) and two cats carry the bytes (the one in the
 * background given the command's stdin as fd 4: bash gives an asynchronous
 * command /dev/null), its stdin and stdout those of the caller's end of a
 * socket pair, which a thread of ours
 * relays (exec_over_port: the port's framing, its window). RELAY_OPEN on
 * stdout says the connection is open (what came before it, a ~/.bashrc's
 * words, is dropped); exit status 111 that it was refused, 112 that
 * the shell is not bash (the connection goes over SSH then). The caller's
 * end closed, or half-closed (a cat cannot half-close a socket), ends it
 * all: the command and what it started are killed, which closes the guest
 * side. The guest side closed ends the command, and the caller reads EOF.
 */
#define RELAY_OPEN_MS 15000 /* what an SSH login to the same guest is given */
#define RELAY_REFUSED 111
#define RELAY_NO_BASH 112
#define RELAY_OPEN "\036aas-relay-open\036" /* on stdout: the connection is open, its bytes follow */
#define RELAY_OPEN_PRINTF "\\036aas-relay-open\\036" /* what printf makes it of */

struct relay {
	struct drv *d;
	char name[SAAS_ID_MAX + 1];
	char cmd[256];
	int fd;                  /* the relay's end of the socket pair */
	int said;                /* our end of the pair the outcome goes through, -1 once told */
	size_t matched;          /* bytes of RELAY_OPEN seen so far on stdout */
	bool ended;              /* the caller's end closed: the command is killed */
};

/* Tell the caller the outcome once: SAAS_OK (open), SAAS_ENOTSUP (go over SSH), or an error. */
static void relay_tell(struct relay *r, int rc)
{
	if (r->said < 0)
		return;
	if (send(r->said, &rc, sizeof(rc), MSG_NOSIGNAL) < 0) {
		/* the caller gave up (RELAY_OPEN_MS) and closed its end: nobody to tell */
	}
	close(r->said);
	r->said = -1;
}

static long relay_input(void *ud, void *buf, size_t cap)
{
	struct relay *r = ud;
	ssize_t n;

	if (r->ended)
		return -1;
	while ((n = recv(r->fd, buf, cap, MSG_DONTWAIT)) < 0 && errno == EINTR)
		;
	if (n > 0)
		return (long)n;
	if (n < 0 && errno == EAGAIN)
		return 0;
	r->ended = true;
	return -1;
}

static int relay_control(void *ud, int *group)
{
	struct relay *r = ud;

	*group = 1;
	return r->ended ? -1 : 0;
}

static int relay_output(void *ud, int stream, const void *data, size_t len)
{
	struct relay *r = ud;
	const char *p = data;

	if (stream == SAAS_STREAM_STDERR)
		return 0;
	/* What the user's ~/.bashrc may print comes first: dropped up to the mark (its one border is its first byte). */
	while (len && r->matched < strlen(RELAY_OPEN)) {
		if (*p == RELAY_OPEN[r->matched])
			r->matched++;
		else
			r->matched = *p == RELAY_OPEN[0];
		p++;
		len--;
		if (r->matched == strlen(RELAY_OPEN))
			relay_tell(r, SAAS_OK);
	}
	while (len && !r->ended) {
		ssize_t w = send(r->fd, p, len, MSG_NOSIGNAL);
		if (w > 0) {
			p += w;
			len -= (size_t)w;
		} else if (w < 0 && errno != EINTR) {
			r->ended = true; /* the caller is gone: what comes is dropped, the command killed */
		}
	}
	return 0;
}

static void relay_done(struct drv *d)
{
	pthread_mutex_lock(&d->mu);
	if (--d->relays == 0)
		pthread_cond_broadcast(&d->keeper_cond);
	pthread_mutex_unlock(&d->mu);
}

static void *relay_main(void *arg)
{
	struct relay *r = arg;
	struct drv *d = r->d;
	saas_driver_exec req;
	int rc, status = -1;
	bool opened;

	memset(&req, 0, sizeof(req));
	req.command = r->cmd;
	req.cwd = "/";
	req.output = relay_output;
	req.output_userdata = r;
	req.cancel = &d->closing;
	req.input = relay_input;
	req.control = relay_control;
	req.control_userdata = r;
	rc = exec_over_port(d, r->name, &req, &status);
	opened = r->said < 0; /* it said RELAY_OPEN */
	if (rc == SAAS_ENOTSUP || (rc == SAAS_OK && status == RELAY_NO_BASH))
		relay_tell(r, SAAS_ENOTSUP);
	else if (rc == SAAS_OK && status == RELAY_REFUSED)
		relay_tell(r, saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, 0, "the guest refused the connection"));
	else
		relay_tell(r, rc < 0 ? rc : saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, status,
		                                        "the guest's relay ended at once (status %d)", status));
	shutdown(r->fd, SHUT_RDWR);
	close(r->fd);
	/*
	 * A sandbox that reached a port once will again: its session comes up
	 * now, once the connection is over (not beside it: the login would take
	 * the guest's time from it), and the next connections take it, cheaper
	 * than a relay's shell and cats each. Those before it is up are relayed.
	 */
	if (opened && !closing(d)) {
		saas__ssh *ssh = NULL;
		if (saas__lv_vm_session(d, r->name, &ssh) == SAAS_OK)
			saas__ssh_close(ssh);
		saas__error_clear();
	}
	free(r);
	relay_done(d);
	return NULL;
}

/* Over the control port: SAAS_OK and *fd, SAAS_ENOTSUP where it goes over SSH, or an error. */
static int port_over_port(struct drv *d, const char *name, unsigned int port, int *fd)
{
	struct vm *v;
	struct relay *r;
	struct pollfd p;
	pthread_attr_t attr;
	pthread_t thread;
	int sp[2], said[2] = { -1, -1 }, rc = SAAS_ENOTSUP, n;
	bool up;

	if (!d->host->control_port || !d->control_exec || !(v = saas__lv_vm_get(d, name)))
		return SAAS_ENOTSUP;
	up = session_up(v) || v->execs < 0;
	saas__lv_vm_put(d, v);
	if (up || closing(d))
		return SAAS_ENOTSUP;
	if (!(r = calloc(1, sizeof(*r))))
		return saas__oom();
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
		free(r);
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "socketpair: %s", strerror(errno));
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, said) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "socketpair: %s", strerror(errno));
		goto fail;
	}
	r->d = d;
	snprintf(r->name, sizeof(r->name), "%s", name);
	snprintf(r->cmd, sizeof(r->cmd),
	         "[ -n \"$BASH_VERSION\" ] || exit %d; exec 3<>/dev/tcp/127.0.0.1/%u 4<&0 || exit %d; "
	         "printf '%s'; cat <&4 >&3 4<&- 2>/dev/null & exec cat <&3 4<&-",
	         RELAY_NO_BASH, port, RELAY_REFUSED, RELAY_OPEN_PRINTF);
	r->fd = sp[1];
	r->said = said[1];
	pthread_mutex_lock(&d->mu);
	d->relays++;
	pthread_mutex_unlock(&d->mu);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	n = pthread_create(&thread, &attr, relay_main, r);
	pthread_attr_destroy(&attr);
	if (n != 0) {
		relay_done(d);
		close(said[0]);
		close(said[1]);
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, n, "starting the port's relay: %s", strerror(n));
		goto fail;
	}
	/* From here the thread owns r and sp[1]; it tells once, whatever happens. */
	p = (struct pollfd){ said[0], POLLIN, 0 };
	while ((n = poll(&p, 1, RELAY_OPEN_MS)) < 0 && errno == EINTR)
		;
	if (n <= 0 || read(said[0], &rc, sizeof(rc)) != (ssize_t)sizeof(rc))
		rc = saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_GUEST, 0, "the guest did not open port %u within %d s", port,
		                 RELAY_OPEN_MS / 1000);
	close(said[0]);
	if (rc == SAAS_OK) {
		/* Said once per VM, as its commands' way is: for whoever checks where a clone's first connections went. */
		if ((v = saas__lv_vm_get(d, name))) {
			if (!__atomic_exchange_n(&v->relayed, true, __ATOMIC_ACQ_REL))
				saas__lv_log(d, SAAS_LOG_INFO, "VM %s: its port connections go over the control port until its "
				             "SSH session is up", name);
			saas__lv_vm_put(d, v);
		}
		*fd = sp[0];
		return SAAS_OK;
	}
	close(sp[0]); /* the relay, if it still runs, sees the end and stops */
	return rc;
fail:
	close(sp[0]);
	close(sp[1]);
	free(r);
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
