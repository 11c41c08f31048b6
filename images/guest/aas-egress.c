/*
 * aas-egress: the guest's end of the egress channel of a VM on a remote
 * host (docs/vm-hosts.md, "Egress on a host"). The guest's slirp opens no
 * connection (restrict=on); its TCP connections and DNS lookups are
 * redirected by the guest's own nftables to this root service, which
 * carries them over a virtio-serial port (MUX_PORT_NAME) to the servers,
 * where every decision is taken: this end trusts nothing it does not have
 * to, and a sandbox user who spoke the protocol itself would get no more
 * than the VM's policy gives.
 *
 *   - a connection accepted on the listener: its original destination
 *     (SO_ORIGINAL_DST) is asked for with OPEN_ADDR; refused, it is reset;
 *     opened, its bytes go both ways as DATA within each direction's window,
 *     its half-closes as SHUT;
 *   - a lookup on the DNS socket: sent as DNS_QUERY, its answer sent back to
 *     the asker (at most MUX_DNS_PENDING in flight; more are dropped, and the
 *     asker retries); a lookup over TCP (a connection to port 53, the retry
 *     of a truncated answer) likewise, one query per connection, at most
 *     DNS_TCP_MAX connections at once.
 *
 * One poll loop; plain C with libc only (images/build compiles it static
 * with egress_mux.c). tests/unit/test_ehost.c compiles it with
 * AAS_EGRESS_NO_MAIN and runs its loop against the servers' end.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "aas-egress.h"

#ifndef SO_ORIGINAL_DST
#define SO_ORIGINAL_DST 80
#endif
#ifndef IP6T_SO_ORIGINAL_DST
#define IP6T_SO_ORIGINAL_DST 80
#endif

/* What waits to be sent on the port: past OUT_SOFT no local socket is read, nor a connection accepted. */
#define OUT_SOFT (256 * 1024)
#define OUT_CAP (OUT_SOFT + 2 * MUX_FRAME_MAX + MUX_CONNS_MAX * 64)
#define DNS_TCP_MAX 4
/* The poll set's fixed head: the port, the listeners, the DNS sockets. */
#define FIXED 5

struct gconn {
	uint32_t id;                     /* 0: free */
	int fd;
	bool open;                       /* OPENED ok came */
	struct saas__mux_pending pend;   /* from the servers, not yet written here, in pend_buf */
	bool shut_in, wr_shut, rd_eof;
	uint8_t pend_buf[MUX_WINDOW];    /* last: not cleared per use */
};

struct gquery {
	bool used;
	int tcp;                         /* the DNS_TCP connection that asked, -1: the UDP socket */
	struct sockaddr_storage from;
	socklen_t from_len;
};

/* A lookup over TCP: its 2-byte length and the query, read until whole. */
struct gdns_tcp {
	int fd;                          /* -1: free */
	bool asked;                      /* its query is with the servers */
	size_t have;
	uint8_t buf[2 + MUX_DNS_MAX];
};

static struct {
	int port, listener[2], dns[2]; /* [0] IPv4, [1] IPv6 (-1: none) */
	struct gdns_tcp dt[DNS_TCP_MAX];
	struct saas__mux_track t;
	struct gconn c[MUX_CONNS_MAX];
	struct gquery q[MUX_DNS_PENDING];
	uint32_t next_id;
	uint8_t in[2 * MUX_FRAME_MAX];
	size_t in_len;
	uint8_t out[OUT_CAP];
	size_t out_len;
	bool broken;
} g;

/* Queue a frame; the caller checked the rules and the room (what is queued is bounded by OUT_CAP). */
static void out_frame(uint8_t type, uint32_t id, const void *payload, uint32_t len)
{
	if (g.out_len + MUX_HEADER + len > sizeof(g.out)) {
		g.broken = true;             /* cannot happen within the bounds above; never write past them */
		return;
	}
	saas__mux_header(g.out + g.out_len, type, id, len);
	if (len)
		memcpy(g.out + g.out_len + MUX_HEADER, payload, len);
	g.out_len += MUX_HEADER + len;
}

static void send_ctl(uint8_t type, uint32_t id, uint32_t value)
{
	uint8_t b[MUX_HEADER + 4];

	if (saas__mux_track_sent(&g.t, type, id, 0, value) < 0)
		return;
	if (type == MUX_WINDOW_UPDATE) {
		saas__mux_u32_frame(b, type, id, value);
		out_frame(type, id, b + MUX_HEADER, 4);
	} else {
		out_frame(type, id, NULL, 0);
	}
}

static struct gconn *conn_find(uint32_t id)
{
	for (unsigned int i = 0; i < MUX_CONNS_MAX; i++)
		if (g.c[i].id == id && id)
			return &g.c[i];
	return NULL;
}

/* Close c here; reset (RST) when it was refused or broke, so that the asker sees a refusal, not an end. */
static void conn_drop(struct gconn *c, bool reset)
{
	if (reset) {
		struct linger l = { 1, 0 };
		setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	}
	close(c->fd);
	c->id = 0;
	c->fd = -1;
}

static void conn_end(struct gconn *c, bool reset)
{
	send_ctl(MUX_CLOSE, c->id, 0);
	conn_drop(c, reset);
}

static void on_accept(int listener)
{
	struct sockaddr_storage dst;
	socklen_t len = sizeof(dst);
	struct saas__mux_open o = { 0 };
	struct gconn *c = NULL;
	uint8_t b[MUX_HEADER + 19];
	size_t n;
	int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd < 0)
		return;
	for (unsigned int i = 0; i < MUX_CONNS_MAX && !c; i++)
		if (!g.c[i].id)
			c = &g.c[i];
	/* Where it was going: IPv4 first, then IPv6 (a redirected connection has one). */
	if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &dst, &len) == 0 && dst.ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)&dst;
		o.family = 4;
		o.port = ntohs(s4->sin_port);
		memcpy(o.addr, &s4->sin_addr, 4);
	} else if ((len = sizeof(dst)) && getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &dst, &len) == 0 &&
	           dst.ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&dst;
		o.family = 6;
		o.port = ntohs(s6->sin6_port);
		memcpy(o.addr, &s6->sin6_addr, 16);
	}
	/* DNS over TCP is answered here, by the same lookups as over UDP. */
	if (o.family && o.port == 53) {
		for (unsigned int i = 0; i < DNS_TCP_MAX; i++)
			if (g.dt[i].fd < 0) {
				g.dt[i].fd = fd;
				g.dt[i].asked = false;
				g.dt[i].have = 0;
				return;
			}
		close(fd);
		return;
	}
	/* Never the id of one the servers still hold: the table says which are in use. */
	do
		g.next_id = g.next_id == UINT32_MAX ? 1 : g.next_id + 1;
	while (saas__mux_conn_find(&g.t, g.next_id));
	if (!c || !o.family || !(n = saas__mux_open_write(b, sizeof(b), g.next_id, &o)) ||
	    saas__mux_track_sent(&g.t, MUX_OPEN_ADDR, g.next_id, (uint32_t)(n - MUX_HEADER), 0) < 0) {
		struct linger l = { 1, 0 };
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
		close(fd);
		return;
	}
	out_frame(MUX_OPEN_ADDR, g.next_id, b + MUX_HEADER, (uint32_t)(n - MUX_HEADER));
	memset(c, 0, offsetof(struct gconn, pend_buf));
	c->pend.buf = c->pend_buf;
	c->id = g.next_id;
	c->fd = fd;
}

/* Write what the servers sent; give the window back; shut our write side after their SHUT. */
static void conn_write(struct gconn *c)
{
	uint32_t credit;

	if (saas__mux_pending_flush(&c->pend, c->fd, &credit) < 0) {
		conn_end(c, true);
		return;
	}
	if (credit)
		send_ctl(MUX_WINDOW_UPDATE, c->id, credit);
	if (c->shut_in && !saas__mux_pending_any(&c->pend) && !c->wr_shut) {
		shutdown(c->fd, SHUT_WR);
		c->wr_shut = true;
	}
	if (c->wr_shut && c->rd_eof)
		conn_end(c, false);
}

static void conn_read(struct gconn *c)
{
	struct saas__mux_conn *t = saas__mux_conn_find(&g.t, c->id);
	uint8_t buf[MUX_DATA_MAX];

	while (t && t->credit_out && !c->rd_eof && g.out_len < OUT_SOFT) {
		size_t want = t->credit_out < sizeof(buf) ? t->credit_out : sizeof(buf);
		ssize_t n = recv(c->fd, buf, want, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n < 0) {
			conn_end(c, true);
			return;
		}
		if (n == 0) {
			c->rd_eof = true;
			send_ctl(MUX_SHUT, c->id, 0);
			if (c->wr_shut)
				conn_end(c, false);
			return;
		}
		if (saas__mux_track_sent(&g.t, MUX_DATA, c->id, (uint32_t)n, 0) == 0)
			out_frame(MUX_DATA, c->id, buf, (uint32_t)n);
	}
}

/* Send a lookup (n bytes at msg) under a free slot: the slot, or -1 when all are in flight. */
static int ask(const uint8_t *msg, size_t n, int tcp, const struct sockaddr_storage *from, socklen_t from_len)
{
	for (uint32_t i = 0; i < MUX_DNS_PENDING; i++)
		if (!g.q[i].used) {
			if (saas__mux_track_sent(&g.t, MUX_DNS_QUERY, i, (uint32_t)n, 0) < 0)
				return -1;
			g.q[i].used = true;
			g.q[i].tcp = tcp;
			if (from)
				g.q[i].from = *from;
			g.q[i].from_len = from_len;
			out_frame(MUX_DNS_QUERY, i, msg, (uint32_t)n);
			return (int)i;
		}
	return -1;
}

static void on_lookup(int dns)
{
	uint8_t msg[MUX_DNS_MAX];
	struct sockaddr_storage from;
	socklen_t from_len = sizeof(from);
	ssize_t n = recvfrom(dns, msg, sizeof(msg), MSG_DONTWAIT, (struct sockaddr *)&from, &from_len);

	if (n >= MUX_DNS_MIN)
		ask(msg, (size_t)n, -1, &from, from_len);
}

static void dns_tcp_close(struct gdns_tcp *d)
{
	close(d->fd);
	d->fd = -1;
}

/* Read a TCP lookup until whole, then ask it; one that cannot be is closed (the asker sees the end). */
static void on_dns_tcp(struct gdns_tcp *d)
{
	ssize_t n = recv(d->fd, d->buf + d->have, sizeof(d->buf) - d->have, MSG_DONTWAIT);
	size_t want;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		dns_tcp_close(d);
		return;
	}
	d->have += (size_t)n;
	if (d->have < 2)
		return;
	want = (size_t)d->buf[0] << 8 | d->buf[1];
	if (want < MUX_DNS_MIN || want > MUX_DNS_MAX || d->have > 2 + want) {
		dns_tcp_close(d);
		return;
	}
	if (d->have == 2 + want) {
		if (ask(d->buf + 2, want, (int)(d - g.dt), NULL, 0) < 0)
			dns_tcp_close(d);
		else
			d->asked = true;
	}
}

static void on_frame(const struct saas__mux_frame *f)
{
	enum saas__mux_verdict v = saas__mux_track_received(&g.t, f);
	struct gconn *c = conn_find(f->id);

	if (v == MUX_V_ERROR) {
		g.broken = true;
		return;
	}
	if (v == MUX_V_CLOSE) {
		if (c)
			conn_drop(c, !c->rd_eof || !c->wr_shut);
		out_frame(MUX_CLOSE, f->id, NULL, 0);
		return;
	}
	if (v != MUX_V_OK)
		return;
	switch (f->type) {
	case MUX_OPENED:
		if (!c)
			break;
		if (f->payload[0] == MUX_ST_OK)
			c->open = true;
		else
			conn_drop(c, true);          /* the table freed the id */
		break;
	case MUX_DATA:
		if (!c)
			break;
		saas__mux_pending_add(&c->pend, f->payload, f->len); /* within the window: the table checked */
		conn_write(c);
		break;
	case MUX_SHUT:
		if (c) {
			c->shut_in = true;
			conn_write(c);
		}
		break;
	case MUX_DNS_ANSWER:
		if (f->id < MUX_DNS_PENDING && g.q[f->id].used) {
			struct gquery *q = &g.q[f->id];
			if (q->tcp < 0) {
				sendto(g.dns[q->from.ss_family == AF_INET6], f->payload, f->len, MSG_DONTWAIT, (struct sockaddr *)&q->from, q->from_len);
			} else if (g.dt[q->tcp].fd >= 0) {
				/* Its length, then it: a few KiB a fresh connection's buffer takes whole. */
				uint8_t b[2 + MUX_DNS_MAX];
				b[0] = (uint8_t)(f->len >> 8);
				b[1] = (uint8_t)f->len;
				memcpy(b + 2, f->payload, f->len);
				if (send(g.dt[q->tcp].fd, b, 2 + f->len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
					/* The asker is gone, or its buffer full: it retries. */
				}
				dns_tcp_close(&g.dt[q->tcp]);
			}
			q->used = false;
		}
		break;
	default:
		break;
	}
}

static void on_port(void)
{
	struct saas__mux_frame f;
	size_t used = 0;
	long took = 0;
	ssize_t n = read(g.port, g.in + g.in_len, sizeof(g.in) - g.in_len);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		g.broken = true;
		return;
	}
	g.in_len += (size_t)n;
	while (!g.broken && (took = saas__mux_frame_read(g.in + used, g.in_len - used, MUX_SERVER, &f)) > 0) {
		on_frame(&f);
		used += (size_t)took;
	}
	if (took < 0)
		g.broken = true;
	memmove(g.in, g.in + used, g.in_len - used);
	g.in_len -= used;
}

static void flush(void)
{
	ssize_t n;

	if (!g.out_len)
		return;
	if ((n = write(g.port, g.out, g.out_len)) < 0) {
		if (errno != EAGAIN && errno != EINTR)
			g.broken = true;
		return;
	}
	memmove(g.out, g.out + n, g.out_len - (size_t)n);
	g.out_len -= (size_t)n;
}

int aas_egress_serve(int port, const int listener[2], const int dns[2], volatile int *stop)
{
	struct pollfd fds[FIXED + MUX_CONNS_MAX + DNS_TCP_MAX];
	uint8_t b[MUX_HEADER + 2];

	for (unsigned int i = 0; i < MUX_CONNS_MAX; i++) {
		g.c[i].id = 0;
		g.c[i].fd = -1;
	}
	memset(g.q, 0, sizeof(g.q));
	for (unsigned int i = 0; i < DNS_TCP_MAX; i++)
		g.dt[i].fd = -1;
	g.next_id = 0;
	g.port = port;
	for (unsigned int i = 0; i < 2; i++) {
		g.listener[i] = listener[i];
		g.dns[i] = dns[i];
	}
	g.in_len = g.out_len = 0;
	g.broken = false;
	saas__mux_track_init(&g.t, MUX_GUEST);
	saas__mux_track_sent(&g.t, MUX_HELLO, 0, 2, MUX_VERSION);
	saas__mux_u16_frame(b, MUX_HELLO, 0, MUX_VERSION);
	out_frame(MUX_HELLO, 0, b + MUX_HEADER, 2);
	while (!*stop && !g.broken) {
		bool room = g.out_len < OUT_SOFT && g.t.hello_in;
		nfds_t n = FIXED;
		fds[0] = (struct pollfd){ .fd = port, .events = (short)(POLLIN | (g.out_len ? POLLOUT : 0)) };
		for (unsigned int i = 0; i < 2; i++) {
			fds[1 + i] = (struct pollfd){ .fd = room && g.t.n < MUX_CONNS_MAX ? listener[i] : -1, .events = POLLIN };
			fds[3 + i] = (struct pollfd){ .fd = room ? dns[i] : -1, .events = POLLIN };
		}
		for (unsigned int i = 0; i < MUX_CONNS_MAX; i++) {
			struct gconn *c = &g.c[i];
			struct saas__mux_conn *t = c->id ? saas__mux_conn_find(&g.t, c->id) : NULL;
			short ev = 0;
			if (c->id && c->open) {
				if (saas__mux_pending_any(&c->pend))
					ev |= POLLOUT;
				if (t && t->credit_out && !c->rd_eof && room)
					ev |= POLLIN;
			}
			fds[n++] = (struct pollfd){ .fd = ev ? c->fd : -1, .events = ev };
		}
		for (unsigned int i = 0; i < DNS_TCP_MAX; i++)
			fds[n++] = (struct pollfd){ .fd = g.dt[i].asked ? -1 : g.dt[i].fd, .events = POLLIN };
		if (poll(fds, n, 200) < 0 && errno != EINTR)
			return -1;
		if (fds[0].revents & (POLLIN | POLLHUP | POLLERR))
			on_port();
		for (unsigned int i = 0; i < 2; i++) {
			if (fds[1 + i].revents & POLLIN)
				on_accept(listener[i]);
			if (fds[3 + i].revents & POLLIN)
				on_lookup(dns[i]);
		}
		for (unsigned int i = 0; i < MUX_CONNS_MAX && !g.broken; i++) {
			struct gconn *c = &g.c[i];
			short re = fds[FIXED + i].revents;
			if (!re || !c->id || c->fd != fds[FIXED + i].fd)
				continue;
			if (re & (POLLOUT | POLLERR))
				conn_write(c);
			if (c->id && (re & (POLLIN | POLLHUP | POLLERR)))
				conn_read(c);
		}
		for (unsigned int i = 0; i < DNS_TCP_MAX && !g.broken; i++)
			if (fds[FIXED + MUX_CONNS_MAX + i].revents && g.dt[i].fd == fds[FIXED + MUX_CONNS_MAX + i].fd)
				on_dns_tcp(&g.dt[i]);
		flush();
	}
	for (unsigned int i = 0; i < MUX_CONNS_MAX; i++)
		if (g.c[i].id)
			conn_drop(&g.c[i], true);
	for (unsigned int i = 0; i < DNS_TCP_MAX; i++)
		if (g.dt[i].fd >= 0)
			dns_tcp_close(&g.dt[i]);
	return g.broken ? -1 : 0;
}

#ifndef AAS_EGRESS_NO_MAIN
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>

#define PORTS_DIR "/sys/class/virtio-ports"
/* Where the guest's nftables send its TCP and its lookups (root's own traffic is left alone). */
#define LISTEN_PORT 15001
#define DNS_PORT 15053

/* /dev/vportNpM of the port named MUX_PORT_NAME (no udev in the guest to make /dev/virtio-ports/). */
static int port_open(void)
{
	DIR *dir = opendir(PORTS_DIR);
	struct dirent *e;
	int fd = -1;

	while (dir && fd < 0 && (e = readdir(dir))) {
		char path[512], name[64] = "";
		int nf;
		ssize_t n;
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), PORTS_DIR "/%s/name", e->d_name);
		if ((nf = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		n = read(nf, name, sizeof(name) - 1);
		close(nf);
		if (n > 0 && name[n - 1] == '\n')
			name[--n] = '\0';
		if (n > 0 && strcmp(name, MUX_PORT_NAME) == 0) {
			snprintf(path, sizeof(path), "/dev/%s", e->d_name);
			fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
		}
	}
	if (dir)
		closedir(dir);
	return fd;
}

/*
 * A socket of family (AF_INET or AF_INET6) where the guest's nftables send
 * what they redirect: TCP on every address (a redirect goes to the primary
 * address of the interface it came by: loopback, for the guest's own
 * connections), DNS on loopback only.
 */
static int bound(int family, int type, uint16_t port)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *a = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
	int one = 1, fd = socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (family == AF_INET) {
		a->sin_family = AF_INET;
		a->sin_port = htons(port);
		a->sin_addr.s_addr = htonl(type == SOCK_STREAM ? INADDR_ANY : INADDR_LOOPBACK);
	} else {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(port);
		a6->sin6_addr = type == SOCK_STREAM ? in6addr_any : in6addr_loopback;
	}
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    (family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0) ||
	    bind(fd, (struct sockaddr *)&ss, family == AF_INET ? sizeof(*a) : sizeof(*a6)) < 0 ||
	    (type == SOCK_STREAM && listen(fd, 128) < 0)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

int main(void)
{
	static volatile int stop;
	int port = port_open();
	int listener[2] = { bound(AF_INET, SOCK_STREAM, LISTEN_PORT), bound(AF_INET6, SOCK_STREAM, LISTEN_PORT) };
	int dns[2] = { bound(AF_INET, SOCK_DGRAM, DNS_PORT), bound(AF_INET6, SOCK_DGRAM, DNS_PORT) };

	/* No port: a VM on this machine, whose egress is slirp's under the engine's nftables. */
	if (port < 0)
		return 0;
	/* A client gone while its bytes are written is that connection's end, not ours. */
	signal(SIGPIPE, SIG_IGN);
	/* IPv4 is needed; IPv6 only where the guest's kernel has it. */
	if (listener[0] < 0 || dns[0] < 0)
		return 1;
	/* The port is reopened by the engine after a broken channel: serve again. */
	for (;;) {
		if (aas_egress_serve(port, listener, dns, &stop) == 0)
			return 0;
		sleep(1);
	}
}
#endif
