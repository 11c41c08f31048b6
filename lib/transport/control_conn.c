/*
 * Port connections over the control port. A clone's first connection to a
 * guest port (its code server's, a preview's) comes before the engine's SSH
 * session, whose login is most of a second or two under TCG: the guest's
 * helper (images/guest/aas-control.c) opens 127.0.0.1:PORT itself, with no
 * shell run for it, and the connection's bytes go both ways in the exec's
 * frames (control_proto.h): the caller's as IN within the exec's window, the
 * port's as OUT. The port carries one request at a time, so a connection
 * holds it until it ends.
 *
 * The caller's end is a socket pair's: its close (POLLHUP) closes the
 * guest's connection (END), its half-close half-closes it (EOF), as an SSH
 * tunnel's would; the port's side ending its bytes (EXIT) ends it all, and
 * the caller reads what came before it, then EOF. What comes from the guest
 * is read as the exec's is (saas__ctl_exec_take: every frame within the
 * protocol's bounds, output only once what came before went to the caller,
 * so that a caller that does not read holds the guest, never the engine's
 * memory).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "transport/control.h"
#include "saas/errors.h"
#include "util/error.h"
#include "util/util.h"

/* How often the cancel flag is looked at while nothing moves. */
#define CONN_POLL_MS 100

int saas__ctl_conn_open(struct saas__ctl **ctl, const struct saas__ctl_way *way, int *serves, int *conns,
                        unsigned int port, const int *cancel)
{
	char nonce[CONTROL_NONCE_LEN + 1], line[64];
	struct files_reply r;
	struct iovec v;
	int rc;

	if (*conns < 0)
		return SAAS_ENOTSUP;
	if (port < 1 || port > 65535)
		return saas__inval("port %u is out of range", port);
	if ((rc = saas__ctl_get(ctl, way, serves)) < 0)
		return rc;
	/* The guest gives a port CONTROL_CONNECT_MS to accept: its answer comes within that, and the round trip. */
	saas__ctl_begin(*ctl, saas__now_ms() + CONTROL_CONNECT_MS + CONTROL_TIMEOUT_MS, cancel);
	if (*conns == 0 && (rc = saas__ctl_probe(*ctl, "connect", conns, "port connections")) < 0) {
		if (rc != SAAS_ENOTSUP) {
			saas__ctl_close(*ctl);
			*ctl = NULL;
			rc = saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_GUEST, 0, "%s", saas_error_last()->message);
		}
		return rc;
	}
	if ((rc = saas__ctl_nonce(nonce)) < 0)
		return rc;
	v.iov_base = line;
	v.iov_len = (size_t)snprintf(line, sizeof(line), "connect %s %u\n", nonce, port);
	if ((rc = saas__ctl_send(*ctl, &v, 1)) < 0 || (rc = saas__ctl_line(*ctl, nonce, &r)) < 0) {
		/* Lost in the exchange: the next use brings the stream back. */
		saas__ctl_close(*ctl);
		*ctl = NULL;
		if (rc == SAAS_ETIMEOUT)
			rc = saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_GUEST, 0, "the guest did not open port %u within %d s", port,
			                 (CONTROL_CONNECT_MS + CONTROL_TIMEOUT_MS) / 1000);
		return rc;
	}
	if (r.kind == FILES_SAID_READY)
		return SAAS_OK;
	if (r.kind != FILES_SAID_ERROR) {
		saas__ctl_close(*ctl);
		*ctl = NULL;
		return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, 0, "the guest's helper answered a connect out of turn");
	}
	/* The connection was never made: the port is free for the next request. */
	if (r.err == ECONNREFUSED)
		return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, r.err, "nothing listens on port %u in the sandbox", port);
	return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, r.err, "the guest could not open port %u: %s", port,
	                   r.what[0] ? r.what : "no reason given");
}

/* The pump's state: frames to the guest in obuf, the port's bytes for the caller in down. */
struct pump {
	struct saas__ctl *c;
	int fd;
	unsigned char obuf[4 + CONTROL_EXEC_FRAME_MAX];
	size_t ooff, olen;
	char *down;                    /* sizeof(c->buf): what one read of the port's can give */
	size_t doff, dlen;
	bool caller_eof, caller_gone;  /* the caller half-closed; closed (or stopped taking bytes) */
	struct saas__ctl_xread r;
};

static void queue(struct pump *p, unsigned int type, size_t len)
{
	saas__ctl_be32_put(p->obuf, (uint32_t)type << 24 | (uint32_t)len);
	p->ooff = 0;
	p->olen = 4 + len;
}

/* OUT frames' bytes, kept for the caller (take is called only when down is empty, so they fit). */
static int keep_down(void *ud, int stream, const void *data, size_t len)
{
	struct pump *p = ud;

	(void)stream;
	if (p->caller_gone)
		return 0;
	memcpy(p->down + p->dlen, data, len);
	p->dlen += len;
	return 0;
}

static int lost(const char *what)
{
	return saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, 0, "the connection's stream on the control port broke: %s", what);
}

/* The guest's bytes: read while nothing waits for the caller, taken as frames. */
static int from_guest(struct pump *p)
{
	struct saas__ctl *c = p->c;
	long used;
	ssize_t n;

	if (c->off == c->len)
		c->off = c->len = 0;
	else if (c->off) {
		memmove(c->buf, c->buf + c->off, c->len - c->off);
		c->len -= c->off;
		c->off = 0;
	}
	while ((n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, MSG_DONTWAIT)) < 0 && errno == EINTR)
		;
	if (n == 0)
		return lost("the port closed");
	if (n < 0)
		return errno == EAGAIN ? SAAS_OK
		                       : saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "reading the control port: %s",
		                                     strerror(errno));
	c->len += (size_t)n;
	p->doff = p->dlen = 0;
	if ((used = saas__ctl_exec_take(&p->r, c->buf + c->off, c->len - c->off, keep_down, p)) < 0)
		return (int)used;
	c->off += (size_t)used;
	return SAAS_OK;
}

/* The caller's bytes as an IN frame (within the window), its half-close as EOF, its loss noted. */
static void from_caller(struct pump *p)
{
	size_t room = CONTROL_EXEC_WINDOW - p->r.ahead;
	ssize_t n;

	if (room > CONTROL_EXEC_FRAME_MAX)
		room = CONTROL_EXEC_FRAME_MAX;
	while ((n = recv(p->fd, p->obuf + 4, room, MSG_DONTWAIT)) < 0 && errno == EINTR)
		;
	if (n > 0) {
		queue(p, CTL_X_IN, (size_t)n);
		p->r.ahead += (size_t)n;
	} else if (n == 0) {
		queue(p, CTL_X_EOF, 0);
		p->caller_eof = true;
	} else if (errno != EAGAIN) {
		p->caller_gone = true;
	}
}

static void to_caller(struct pump *p)
{
	ssize_t w;

	while ((w = send(p->fd, p->down + p->doff, p->dlen - p->doff, MSG_NOSIGNAL | MSG_DONTWAIT)) < 0 && errno == EINTR)
		;
	if (w > 0)
		p->doff += (size_t)w;
	else if (w < 0 && errno != EAGAIN)
		p->caller_gone = true;
	if (p->doff == p->dlen || p->caller_gone)
		p->doff = p->dlen = 0;
}

static bool cancelled(const int *cancel)
{
	return cancel && __atomic_load_n(cancel, __ATOMIC_SEQ_CST);
}

int saas__ctl_conn_pump(struct saas__ctl **ctl, int fd, const int *cancel)
{
	struct pump *p = calloc(1, sizeof(*p));
	int64_t end_at = 0;
	int rc = SAAS_OK;

	if (!p || !(p->down = malloc(sizeof((*ctl)->buf)))) {
		rc = saas__oom();
		goto out;
	}
	p->c = *ctl;
	p->fd = fd;
	/* What came with "ready" is the first frames'. */
	if (p->c->off < p->c->len) {
		long used = saas__ctl_exec_take(&p->r, p->c->buf + p->c->off, p->c->len - p->c->off, keep_down, p);
		if ((rc = used < 0 ? (int)used : SAAS_OK) < 0)
			goto out;
		p->c->off += (size_t)used;
	}
	while (!p->r.done || p->dlen) {
		/* A caller gone is looked at no more (its POLLHUP would come back at once, every time). */
		struct pollfd f[2] = { { p->caller_gone ? -1 : fd, 0, 0 }, { p->c->fd, 0, 0 } };
		bool busy = p->ooff < p->olen;

		if (!p->r.end_sent && (p->caller_gone || p->r.exited || cancelled(cancel)) && !busy) {
			queue(p, CTL_X_END, 0);
			p->r.end_sent = true;
			end_at = saas__now_ms();
			busy = true;
		}
		if (p->r.end_sent && !p->r.done && saas__now_ms() - end_at >= CONTROL_EXEC_END_MS) {
			rc = lost("the guest did not end the connection");
			goto out;
		}
		if (p->r.done && (p->caller_gone || cancelled(cancel)))
			break;
		if (!busy && !p->r.end_sent && !p->caller_eof && p->r.ahead < CONTROL_EXEC_WINDOW)
			f[0].events |= POLLIN;
		if (p->dlen)
			f[0].events |= POLLOUT;
		if (busy)
			f[1].events |= POLLOUT;
		if (!p->dlen && !p->r.done)
			f[1].events |= POLLIN;
		if (poll(f, 2, CONN_POLL_MS) < 0 && errno != EINTR) {
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "waiting on a port connection: %s", strerror(errno));
			goto out;
		}
		/* POLLHUP: the caller closed its end (a half-close reads as EOF without it). */
		if (f[0].revents & (POLLHUP | POLLERR))
			p->caller_gone = true;
		if ((f[0].revents & POLLIN) && !p->caller_gone)
			from_caller(p);
		if ((f[0].revents & POLLOUT) && p->dlen)
			to_caller(p);
		if (p->caller_gone)
			p->doff = p->dlen = 0;
		/* The port's bytes wait in it while the caller has not taken the last; its loss does not. */
		if (((f[1].revents & (POLLHUP | POLLERR)) || ((f[1].revents & POLLIN) && !p->dlen)) && (rc = from_guest(p)) < 0)
			goto out;
		if ((rc = saas__ctl_send_now(p->c->fd, p->obuf, &p->ooff, p->olen)) < 0)
			goto out;
	}
	rc = SAAS_OK;
out:
	if (rc < 0 || !p || !p->r.done) {
		saas__ctl_close(*ctl);
		*ctl = NULL;
	}
	if (p)
		free(p->down);
	free(p);
	return rc;
}
