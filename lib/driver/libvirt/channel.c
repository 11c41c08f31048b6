/*
 * The control port of a VM on a remote host. Its domain has the same
 * virtio-serial channel as on this machine, its host end a socket libvirt
 * makes in the domain's own channel directory there; the engine reaches it
 * with virDomainOpenChannel, as a stream over the connection it already has
 * to the host's libvirtd. No listener is added on the host's network: the
 * bytes go where libvirt's calls go, authenticated and encrypted as the
 * connection is (TLS or SSH; plain TCP only where the operator accepted
 * that for everything with --insecure-tcp). The control protocol has no
 * authentication of its own (on this machine, who may reach the socket is
 * the guard), so a TCP listener on the host's address would have let
 * anyone on that network run commands in every guest: it is not done.
 *
 * The transport (lib/transport/control*.c) polls a socket: the engine gets
 * one end of a socket pair, and libvirt's event loop pumps the other end
 * to and from the stream, a bounded buffer each way, each side read only
 * while the other can take what was read. What the guest sends is passed
 * through as it is; the transport reads it as hostile, as it reads the
 * local socket.
 *
 * A pump lives in the event loop's thread. Its end is said at once (the
 * engine's socket shut down), and its parts are let go by a zero-length
 * timeout of its own: never inside the stream's callback, whose dispatch
 * still holds the stream. The stream is opened under the connection's lock
 * (rpc.h), and every call that goes to the host is made under it too:
 * libvirt sends a stream's data with its blocking send (VIR_STREAM_NONBLOCK
 * spares only receives the wait), so a send made beside a caller's call
 * would wait inside libvirt behind it, the very thing rpc.h forbids, and
 * stall the event loop, every host's pumps and keepalives, meanwhile. The
 * pump never waits for the lock: it tries it, and when a caller has it the
 * bytes wait in the pump's buffer and a timer of CHANNEL_RETRY_MS tries
 * again. Receives (they only take what the stream has queued), the event
 * callbacks and virStreamFree never go to the host and need no lock. The
 * stream's finish or abort waits for the host's answer: a thread of its
 * own makes it, under the lock (rpc.h's saas__lv_rpc_channel_close).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "driver/libvirt/channel.h"
#include "driver/libvirt/host.h"
#include "driver/libvirt/libvirt_driver.h"

/* Pumps whose parts are not let go yet, across drivers (channels_drain waits for none). */
static int pumps_live;

struct pump {
	pthread_mutex_t mu; /* the opener holds it while it registers; the callbacks take it */
	virStreamPtr st;
	virConnectPtr conn;        /* the stream's: whose lock its sends take */
	int sock;                  /* the pump's end of the pair */
	int watch;                 /* its handle in the event loop, -1: none */
	int retry;                 /* its timer for a send the lock put off, -1: none */
	bool st_cb;                /* the stream's callback is registered */
	bool dead;                 /* ended: nothing more is moved, the reaper is due */
	bool clean;                /* ended by the engine closing its end, everything sent */
	size_t up_off, up_len;     /* from the engine, not yet in the stream */
	size_t down_off, down_len; /* from the stream, not yet taken by the engine */
	char up[CHANNEL_BUF_BYTES];
	char down[CHANNEL_BUF_BYTES];
};

/* The stream ended and freed, the pump with it: in a thread of its own, out of the event loop's (its call waits on the host). */
static void *pump_close(void *opaque)
{
	struct pump *p = opaque;

	saas__lv_rpc_channel_close(p->conn, p->st, p->clean);
	pthread_mutex_destroy(&p->mu);
	free(p);
	__atomic_sub_fetch(&pumps_live, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void pump_reap(int timer, void *opaque)
{
	struct pump *p = opaque;
	pthread_attr_t attr;
	pthread_t tid;
	int err;

	virEventRemoveTimeout(timer);
	pthread_mutex_lock(&p->mu); /* an opener still registering lets go first */
	if (p->watch >= 0)
		virEventRemoveHandle(p->watch);
	if (p->retry >= 0)
		virEventRemoveTimeout(p->retry);
	if (p->st_cb)
		virStreamEventRemoveCallback(p->st);
	close(p->sock);
	pthread_mutex_unlock(&p->mu);
	if ((err = pthread_attr_init(&attr)) == 0) {
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		err = pthread_create(&tid, &attr, pump_close, p);
		pthread_attr_destroy(&attr);
	}
	/* No thread to be had: here, the event loop stalled for the call (under the lock all the same), rather than never. */
	if (err)
		pump_close(p);
}

/*
 * The pump stops: the engine sees its socket end at once; the rest goes in
 * the reaper. p->mu held. Without a timer for it (out of memory) the pump's
 * parts stay, inert, rather than be freed under a callback.
 */
static void pump_end(struct pump *p, bool clean)
{
	if (p->dead)
		return;
	p->dead = true;
	p->clean = clean;
	shutdown(p->sock, SHUT_RDWR);
	if (p->watch >= 0)
		virEventUpdateHandle(p->watch, 0);
	if (p->retry >= 0)
		virEventUpdateTimeout(p->retry, -1);
	if (p->st_cb)
		virStreamEventUpdateCallback(p->st, 0);
	if (virEventAddTimeout(0, pump_reap, p, NULL) < 0)
		virResetLastError();
}

/* Move what can be moved each way without blocking; then ask for the events that let the rest move. p->mu held. */
static void pump_run(struct pump *p)
{
	bool moved = true, put_off = false;

	while (moved && !p->dead) {
		ssize_t n;
		int k;
		moved = false;
		if (p->up_len == 0) {
			n = recv(p->sock, p->up, sizeof(p->up), MSG_DONTWAIT);
			if (n == 0) {
				pump_end(p, true); /* the engine closed the connection */
				return;
			}
			if (n < 0 && errno != EAGAIN && errno != EINTR) {
				pump_end(p, false);
				return;
			}
			if (n > 0) {
				p->up_off = 0;
				p->up_len = (size_t)n;
				moved = true;
			}
		}
		if (p->up_off < p->up_len && !put_off) {
			pthread_mutex_t *held;
			if (!saas__lv_rpc_try_enter(p->conn, &held)) {
				put_off = true; /* a caller's call has the host: the retry timer's turn */
				k = -2;
			} else {
				k = virStreamSend(p->st, p->up + p->up_off, p->up_len - p->up_off);
				saas__lv_rpc_leave(held);
			}
			if (k == -1) {
				pump_end(p, false);
				return;
			}
			if (k > 0) {
				p->up_off += (size_t)k;
				if (p->up_off == p->up_len)
					p->up_off = p->up_len = 0;
				moved = true;
			}
		}
		if (p->down_len == 0) {
			k = virStreamRecv(p->st, p->down, sizeof(p->down));
			if (k == 0 || k == -1) {
				pump_end(p, false); /* the channel closed: QEMU is gone, or the host */
				return;
			}
			if (k > 0) {
				p->down_off = 0;
				p->down_len = (size_t)k;
				moved = true;
			}
		}
		if (p->down_off < p->down_len) {
			n = send(p->sock, p->down + p->down_off, p->down_len - p->down_off,
			         MSG_DONTWAIT | MSG_NOSIGNAL);
			if (n < 0 && errno != EAGAIN && errno != EINTR) {
				pump_end(p, false);
				return;
			}
			if (n > 0) {
				p->down_off += (size_t)n;
				if (p->down_off == p->down_len)
					p->down_off = p->down_len = 0;
				moved = true;
			}
		}
	}
	if (p->dead)
		return;
	virResetLastError(); /* a stream that would block says so as an error too */
	if (p->retry >= 0)
		virEventUpdateTimeout(p->retry, put_off ? CHANNEL_RETRY_MS : -1);
	if (p->watch >= 0)
		virEventUpdateHandle(p->watch,
		                     (p->up_len == 0 ? VIR_EVENT_HANDLE_READABLE : 0) |
		                             (p->down_off < p->down_len ? VIR_EVENT_HANDLE_WRITABLE : 0));
	/*
	 * The stream's end is asked for with its data: while the engine has not
	 * taken what came, a hangup would be told again and again for nothing
	 * (the Recv that reads it waits for room).
	 */
	if (p->st_cb) {
		/* Not while a put-off send waits for the lock: a writable stream would call back without end. */
		int want = p->up_off < p->up_len && !put_off ? VIR_STREAM_EVENT_WRITABLE : 0;
		if (p->down_len == 0)
			want |= VIR_STREAM_EVENT_READABLE | VIR_STREAM_EVENT_ERROR | VIR_STREAM_EVENT_HANGUP;
		virStreamEventUpdateCallback(p->st, want);
	}
}

static void on_stream(virStreamPtr st, int events, void *opaque)
{
	struct pump *p = opaque;

	(void)st;
	(void)events;
	pthread_mutex_lock(&p->mu);
	pump_run(p);
	pthread_mutex_unlock(&p->mu);
}

static void on_retry(int timer, void *opaque)
{
	struct pump *p = opaque;

	(void)timer;
	pthread_mutex_lock(&p->mu);
	pump_run(p);
	pthread_mutex_unlock(&p->mu);
}

static void on_sock(int watch, int fd, int events, void *opaque)
{
	struct pump *p = opaque;

	(void)watch;
	(void)fd;
	(void)events;
	pthread_mutex_lock(&p->mu);
	pump_run(p);
	pthread_mutex_unlock(&p->mu);
}

/*
 * The channel's stream, opened: SAAS_OK and *out; an error naming the VM.
 * A channel in use is asked for again for CHANNEL_BUSY_WAIT_MS (the
 * engine's own last connection being torn down), never taken from its
 * holder by force: another engine may be in a command on it.
 */
static int stream_open(struct drv *d, virDomainPtr dom, const char *name, const char *port, const char *what,
                       virStreamPtr *out)
{
	int64_t t0 = saas__now_ms();
	int rc;

	for (;;) {
		virStreamPtr st = NULL;
		virErrorPtr e;
		bool busy;
		/* Not virStreamNew here: rpc.h's would remember the stream in this thread, which does not free it. */
		if (saas__lv_rpc_channel_open(dom, port, &st) == 0) {
			*out = st;
			return SAAS_OK;
		}
		/* Read before virStreamFree, which (as every libvirt call) resets the thread's last error. */
		e = virGetLastError();
		busy = e && e->code == VIR_ERR_OPERATION_FAILED;
		rc = saas__lv_virt_error("opening the channel");
		saas__error_wrap(rc, "VM %s's %s channel on VM host %s", name, what, d->uri);
		if (st)
			virStreamFree(st);
		if (busy && saas__now_ms() - t0 >= CHANNEL_BUSY_WAIT_MS) {
			/* Held by another engine: said as such (egress: that engine serves the VM). */
			char why[512];
			snprintf(why, sizeof(why), "%s", saas_error_last()->message);
			return saas__error(SAAS_EBUSY, SAAS_ERRCLASS_DRIVER, 0, "%s", why);
		}
		if (!busy || closing(d))
			return rc;
		saas__sleep_ms(50);
	}
}

int saas__lv_channel_open(struct drv *d, const char *name, int *fd)
{
	return saas__lv_channel_open_port(d, name, CONTROL_PORT_NAME, "control", fd);
}

int saas__lv_channel_open_port(struct drv *d, const char *name, const char *port, const char *what, int *fd)
{
	virConnectPtr conn;
	virDomainPtr dom = NULL;
	virStreamPtr st = NULL;
	struct pump *p = NULL;
	int sv[2] = { -1, -1 }, rc;

	*fd = -1;
	/*
	 * The connection checked first, as every guest call does: one the
	 * keepalive closed (the host came back since) is opened again, not
	 * taken for a VM without a channel, which the transport would then
	 * remember for the VM's life.
	 */
	if ((rc = d->host->check(d)) < 0)
		return rc;
	conn = saas__lv_conn(d);
	if (!(dom = virDomainLookupByName(conn, name))) {
		rc = saas__lv_virt_error("looking the VM up for its channel");
		saas__error_wrap(rc, "%s's %s channel on %s", name, what, d->uri);
		goto out;
	}
	if ((rc = stream_open(d, dom, name, port, what, &st)) < 0)
		goto out;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "socketpair: %s", strerror(errno));
		goto out;
	}
	if (!(p = calloc(1, sizeof(*p)))) {
		rc = saas__oom();
		goto out;
	}
	pthread_mutex_init(&p->mu, NULL);
	p->st = st;
	p->conn = virDomainGetConnect(dom);
	p->sock = sv[1];
	p->watch = -1;
	p->retry = -1;
	st = NULL;
	sv[1] = -1;
	__atomic_add_fetch(&pumps_live, 1, __ATOMIC_ACQUIRE);
	/*
	 * Registered under the pump's lock: a callback that comes at once waits
	 * until both are there (or the pump is ended, and the reaper has it).
	 */
	pthread_mutex_lock(&p->mu);
	if (virStreamEventAddCallback(p->st,
	                              VIR_STREAM_EVENT_READABLE | VIR_STREAM_EVENT_ERROR | VIR_STREAM_EVENT_HANGUP,
	                              on_stream, p, NULL) < 0) {
		rc = saas__lv_virt_error("watching the channel");
	} else {
		p->st_cb = true;
		if ((p->watch = virEventAddHandle(p->sock, VIR_EVENT_HANDLE_READABLE, on_sock, p, NULL)) < 0)
			rc = saas__lv_virt_error("watching the channel's socket");
		else if ((p->retry = virEventAddTimeout(-1, on_retry, p, NULL)) < 0)
			rc = saas__lv_virt_error("a timer for the channel");
		else
			rc = SAAS_OK;
	}
	if (rc < 0)
		pump_end(p, false);
	pthread_mutex_unlock(&p->mu);
	if (rc == SAAS_OK) {
		*fd = sv[0];
		sv[0] = -1;
	} else {
		saas__error_wrap(rc, "VM %s's %s channel on VM host %s", name, what, d->uri);
	}
out:
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	if (st)
		saas__lv_rpc_channel_close(virDomainGetConnect(dom), st, false);
	if (dom)
		virDomainFree(dom);
	return rc;
}

static int way_open(void *ud, int *fd)
{
	struct saas__lv_way *w = ud;

	return w->open_rc = w->d->host->control_open(w->d, w->name, fd);
}

const struct saas__ctl_way *saas__lv_ctl_way(struct saas__lv_way *w, struct drv *d, const char *name, const char *dir)
{
	memset(w, 0, sizeof(*w));
	w->d = d;
	w->name = name;
	w->open_rc = 1;
	w->way.vmdir = dir;
	if (d->host->control_open) {
		w->way.open = way_open;
		w->way.ud = w;
	}
	return &w->way;
}

void saas__lv_channels_drain(void)
{
	for (int waited = 0; waited < 1000 && __atomic_load_n(&pumps_live, __ATOMIC_ACQUIRE) > 0; waited += 10)
		saas__sleep_ms(10);
}
