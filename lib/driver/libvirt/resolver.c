/*
 * The resolver of policy VMs: one thread, one poll loop. A policy VM's guest
 * asks slirp (10.0.2.3, fec0::3), slirp asks the host's resolvers from
 * QEMU's uid, and the egress table redirects that uid's port 53 to a port of
 * this VM's own on loopback (UDP and TCP, IPv4 and IPv6): the port says which
 * VM asks. A name the policy allows is asked of the upstream (a fresh
 * socket and a random id per query), and the addresses of its answer go into
 * the VM's learned sets (egress.c) before the answer goes back; any other
 * name is answered REFUSED at once, counted, and never leaves the host.
 * Queries waiting for an upstream are bounded per VM and per account
 * (egress.h): one account's VMs asking a nameserver that never answers hold
 * only their account's share of the pool.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "driver/libvirt/egress.h"
#include "util/util.h"

/* A query waiting for its upstream. */
struct pending {
	unsigned int uid;                /* the VM's: looked up again at the answer (it may be gone) */
	struct eacct *acct;              /* its account's: counted there until the query is done */
	int fd;                          /* the socket to the upstream */
	uint16_t id;                     /* ours, random; the guest's is in query */
	unsigned int upstream;           /* which one was asked */
	int64_t deadline;
	struct saas__dns_question q;
	uint8_t *query;                  /* the guest's query */
	size_t query_len;
	int family;                      /* UDP: the guest's side (which of the VM's sockets answers) */
	struct sockaddr_storage client;
	socklen_t client_len;
	struct tcpconn *conn;            /* TCP: the connection that asked */
	struct pending *next;
};

/* A TCP connection from a guest (through slirp): length-prefixed queries, one at a time. */
struct tcpconn {
	unsigned int uid;
	int fd;
	bool busy;                       /* its query is with the upstream */
	int64_t deadline;
	size_t have;
	uint8_t buf[2 + DNS_MSG_MAX];
	struct tcpconn *next;
};

struct resolver {
	struct pending *pending;
	unsigned int n_pending;
	struct tcpconn *conns;
	int64_t next_check;
	uint8_t msg[DNS_MSG_MAX];
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- sockets --------------------------------------------------------------------------------- */

static int bound(int family, int type, unsigned int port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd = socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), on = 1;

	if (fd < 0)
		return -1;
	memset(&ss, 0, sizeof(ss));
	if (family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)&ss;
		s->sin_family = AF_INET;
		s->sin_port = htons((uint16_t)port);
		s->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		len = sizeof(*s);
	} else {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;
		s->sin6_family = AF_INET6;
		s->sin6_port = htons((uint16_t)port);
		s->sin6_addr = in6addr_loopback;
		len = sizeof(*s);
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
	}
	if (type == SOCK_STREAM)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || (type == SOCK_STREAM && listen(fd, EGRESS_TCP_VM) < 0)) {
		int err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

void saas__lv_resolver_unbind(struct evm *v)
{
	close_fd(&v->udp4);
	close_fd(&v->tcp4);
	close_fd(&v->udp6);
	close_fd(&v->tcp6);
	v->port = 0;
}

int saas__lv_resolver_bind(struct evm *v)
{
	/* One port for all four sockets (the redirect names one); another is tried when one is taken. */
	for (int attempt = 0; attempt < 16; attempt++) {
		struct sockaddr_in a;
		socklen_t len = sizeof(a);
		if ((v->udp4 = bound(AF_INET, SOCK_DGRAM, 0)) < 0 || getsockname(v->udp4, (struct sockaddr *)&a, &len) < 0)
			break;
		v->port = ntohs(a.sin_port);
		if ((v->tcp4 = bound(AF_INET, SOCK_STREAM, v->port)) < 0) {
			saas__lv_resolver_unbind(v);
			continue;
		}
		/* A host without IPv6 on loopback: slirp's DNS then goes over IPv4 only. */
		if ((v->udp6 = bound(AF_INET6, SOCK_DGRAM, v->port)) < 0 && errno == EADDRINUSE) {
			saas__lv_resolver_unbind(v);
			continue;
		}
		if (v->udp6 >= 0 && (v->tcp6 = bound(AF_INET6, SOCK_STREAM, v->port)) < 0) {
			saas__lv_resolver_unbind(v);
			continue;
		}
		return SAAS_OK;
	}
	saas__lv_resolver_unbind(v);
	return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "VM %s: cannot open its resolver's sockets on loopback: %s",
	                   v->name, strerror(errno));
}

/* ---- answering ------------------------------------------------------------------------------- */

static void conn_close(struct resolver *r, struct saas__lv_egress *e, struct tcpconn *c)
{
	struct evm *v = saas__lv_egress_find_uid(e, c->uid);

	for (struct tcpconn **pp = &r->conns; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	for (struct pending *p = r->pending; p; p = p->next)
		if (p->conn == c)
			p->conn = NULL;
	if (v && v->tcp_conns)
		v->tcp_conns--;
	close(c->fd);
	free(c);
}

/*
 * Send an answer to whoever asked: a datagram from the VM's socket of that
 * family, or a length-prefixed message on its connection (closed when it
 * cannot take it whole). Under e->mu.
 */
static void reply(struct resolver *r, struct saas__lv_egress *e, struct evm *v, int family,
                  const struct sockaddr_storage *to, socklen_t to_len, struct tcpconn *c, const uint8_t *msg,
                  size_t len)
{
	if (c) {
		uint8_t *out = c->buf; /* its query is done with: the buffer is free */
		out[0] = (uint8_t)(len >> 8);
		out[1] = (uint8_t)len;
		memmove(out + 2, msg, len);
		c->busy = false;
		c->have = 0;
		if (send(c->fd, out, len + 2, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)(len + 2))
			conn_close(r, e, c);
		return;
	}
	if (v) {
		int fd = family == AF_INET ? v->udp4 : v->udp6;
		if (fd >= 0 && sendto(fd, msg, len, MSG_DONTWAIT, (const struct sockaddr *)to, to_len) < 0) {
			/* A full socket buffer or a guest gone: it asks again. */
		}
	}
}

static void reply_error(struct resolver *r, struct saas__lv_egress *e, struct evm *v, int family,
                        const struct sockaddr_storage *to, socklen_t to_len, struct tcpconn *c, const uint8_t *query,
                        const struct saas__dns_question *q, int rcode)
{
	uint8_t out[DNS_HEADER + DNS_NAME_MAX + 2 + 4 + 8];
	size_t n = saas__dns_error_answer(query, q, rcode, out, sizeof(out));

	if (n)
		reply(r, e, v, family, to, to_len, c, out, n);
	else if (c)
		conn_close(r, e, c);
}

static void pending_free(struct saas__lv_egress *e, struct resolver *r, struct pending *p)
{
	for (struct pending **pp = &r->pending; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	r->n_pending--;
	if (p->acct) {
		p->acct->pending--;
		saas__lv_egress_acct_drop(e, p->acct);
	}
	close_fd(&p->fd);
	free(p->query);
	free(p);
}

int saas__lv_dns_ask(const struct sockaddr_storage *up, uint8_t *msg, size_t len, uint16_t *id)
{
	uint8_t head[2] = { msg[0], msg[1] };
	ssize_t sent;
	int fd;

	if (saas__random(id, sizeof(*id)) < 0)
		return -1;
	if ((fd = socket(up->ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	if (connect(fd, (const struct sockaddr *)up,
	            up->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6)) < 0) {
		close(fd);
		return -1;
	}
	/* Our id on the wire; the guest's comes back in the answer. */
	msg[0] = (uint8_t)(*id >> 8);
	msg[1] = (uint8_t)*id;
	sent = send(fd, msg, len, MSG_DONTWAIT);
	msg[0] = head[0];
	msg[1] = head[1];
	if (sent != (ssize_t)len) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Ask upstream i for p (a fresh socket, connected: only that address can answer it). 0 or -1. */
static int ask(struct saas__lv_egress *e, struct pending *p, unsigned int i)
{
	close_fd(&p->fd);
	p->upstream = i;
	p->deadline = now_ms() + EGRESS_UPSTREAM_MS;
	return (p->fd = saas__lv_dns_ask(&e->upstream[i], p->query, p->query_len, &p->id)) < 0 ? -1 : 0;
}

/* A query from VM v's guest (len bytes of msg). Under e->mu. */
static void query(struct drv *d, struct resolver *r, struct evm *v, const uint8_t *msg, size_t len, int family,
                  const struct sockaddr_storage *from, socklen_t from_len, struct tcpconn *c)
{
	struct saas__lv_egress *e = d->egress;
	struct saas__dns_question q;
	struct pending *p;
	unsigned int share;

	if (saas__dns_query_parse(msg, len, &q) < 0) {
		/* Answered with FORMERR when there is a header to answer, and it is not itself an answer. */
		if (q.end || (len >= DNS_HEADER && !(msg[2] & 0x80)))
			reply_error(r, e, v, family, from, from_len, c, msg, &q, DNS_RCODE_FORMERR);
		else if (c)
			conn_close(r, e, c);
		return;
	}
	if (!saas__lv_egress_name_allowed((const char *const *)v->allow, (const char *const *)v->deny, q.name)) {
		v->denied_lookups++;
		saas__lv_log(d, SAAS_LOG_DEBUG, "VM %s: lookup of %s refused by its policy", v->name, q.name);
		reply_error(r, e, v, family, from, from_len, c, msg, &q, DNS_RCODE_REFUSED);
		return;
	}
	/* Its VM's bound, and its account's share of the pool: another account's flood leaves this one its own. */
	if (v->acct && v->acct->pending >= (share = saas__lv_egress_share(e))) {
		saas__lv_log(d, SAAS_LOG_DEBUG, "VM %s: lookup of %s refused: its account has %u in flight, its share",
		             v->name, q.name, share);
		reply_error(r, e, v, family, from, from_len, c, msg, &q, DNS_RCODE_SERVFAIL);
		return;
	}
	if (!e->n_upstream || !v->acct || v->pending >= EGRESS_PENDING_VM || !(p = calloc(1, sizeof(*p)))) {
		reply_error(r, e, v, family, from, from_len, c, msg, &q, DNS_RCODE_SERVFAIL);
		return;
	}
	p->uid = v->uid;
	p->acct = v->acct;
	p->acct->pending++;
	p->fd = -1;
	p->q = q;
	p->family = family;
	if (from)
		p->client = *from;
	p->client_len = from_len;
	p->conn = c;
	p->query_len = len;
	p->next = r->pending;
	r->pending = p;
	r->n_pending++;
	v->pending++;
	if ((p->query = malloc(len)))
		memcpy(p->query, msg, len);
	if (!p->query || ask(e, p, 0) < 0) {
		v->pending--;
		reply_error(r, e, v, family, from, from_len, c, msg, &q, DNS_RCODE_SERVFAIL);
		pending_free(e, r, p);
		return;
	}
	if (c)
		c->busy = true;
}

int saas__lv_answer_collect(void *ud, const struct saas__dns_addr *a)
{
	struct saas__lv_answer_addrs *l = ud;

	if (l->n >= EGRESS_ANSWER_ADDRS_MAX)
		return -2;
	l->a[l->n++] = *a;
	return 0;
}

/* The upstream answered p (or gave up: len 0). Under e->mu. */
static void answered(struct drv *d, struct resolver *r, struct pending *p, uint8_t *msg, size_t len)
{
	struct saas__lv_egress *e = d->egress;
	struct evm *v = saas__lv_egress_find_uid(e, p->uid);
	struct saas__lv_answer_addrs l;
	int rcode = DNS_RCODE_SERVFAIL;

	if (v && v->pending)
		v->pending--;
	/* Gone, no longer a policy VM, or its connection closed: nobody to answer. */
	if (!v || v->mode != SAAS_NET_POLICY || (!p->conn && !p->family))
		goto out;
	/* The policy may have changed while the upstream thought. */
	if (!saas__lv_egress_name_allowed((const char *const *)v->allow, (const char *const *)v->deny, p->q.name)) {
		v->denied_lookups++;
		rcode = DNS_RCODE_REFUSED;
	} else if (len) {
		l.n = 0;
		if (saas__dns_answer_walk(msg, len, &p->q, EGRESS_TTL_MAX, saas__lv_answer_collect, &l) >= 0 &&
		    saas__lv_egress_learn(d, v, l.a, l.n) == SAAS_OK) {
			msg[0] = p->query[0];
			msg[1] = p->query[1];
			reply(r, e, v, p->family, &p->client, p->client_len, p->conn, msg, len);
			goto out;
		}
		if (saas_error_last()->code)
			saas__lv_log(d, SAAS_LOG_WARN, "%s", saas_error_last()->message);
		saas__error_clear();
	}
	reply_error(r, e, v, p->family, &p->client, p->client_len, p->conn, p->query, &p->q, rcode);
out:
	pending_free(e, r, p);
}

/* ---- the loop -------------------------------------------------------------------------------- */

enum { SRC_WAKE, SRC_UDP, SRC_LISTEN, SRC_CONN, SRC_UPSTREAM };

struct source {
	int kind;
	int family;
	unsigned int uid;
	void *ptr;                       /* the connection or the pending query */
};

static void on_udp(struct drv *d, struct resolver *r, struct evm *v, int fd, int family)
{
	struct sockaddr_storage from;

	for (int i = 0; i < 16; i++) {
		socklen_t from_len = sizeof(from);
		ssize_t n = recvfrom(fd, r->msg, DNS_UDP_MAX, MSG_DONTWAIT, (struct sockaddr *)&from, &from_len);
		if (n < 0)
			return;
		query(d, r, v, r->msg, (size_t)n, family, &from, from_len, NULL);
	}
}

static void on_listen(struct resolver *r, struct evm *v, int fd)
{
	int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct tcpconn *conn;

	if (c < 0)
		return;
	if (v->tcp_conns >= EGRESS_TCP_VM || !(conn = malloc(sizeof(*conn)))) {
		close(c);
		return;
	}
	conn->uid = v->uid;
	conn->fd = c;
	conn->busy = false;
	conn->have = 0;
	conn->deadline = now_ms() + EGRESS_TCP_IDLE_MS;
	conn->next = r->conns;
	r->conns = conn;
	v->tcp_conns++;
}

static void on_conn(struct drv *d, struct resolver *r, struct evm *v, struct tcpconn *c)
{
	ssize_t n = recv(c->fd, c->buf + c->have, sizeof(c->buf) - c->have, MSG_DONTWAIT);
	size_t want;

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		conn_close(r, d->egress, c);
		return;
	}
	if (n < 0)
		return;
	c->have += (size_t)n;
	c->deadline = now_ms() + EGRESS_TCP_IDLE_MS;
	if (c->have < 2)
		return;
	want = (size_t)c->buf[0] << 8 | c->buf[1];
	/* One query at a time: a second one before the answer closes the connection. */
	if (c->have > 2 + want || want < DNS_HEADER) {
		conn_close(r, d->egress, c);
		return;
	}
	if (c->have == 2 + want)
		query(d, r, v, c->buf + 2, want, 0, NULL, 0, c);
}

static void on_upstream(struct drv *d, struct resolver *r, struct pending *p)
{
	ssize_t n = recv(p->fd, r->msg, sizeof(r->msg), MSG_DONTWAIT);

	/* Not ours (another id: late or forged) or an ICMP error: wait for the real one or the deadline. */
	if (n < DNS_HEADER || ((uint16_t)(r->msg[0] << 8 | r->msg[1])) != p->id)
		return;
	answered(d, r, p, r->msg, (size_t)n);
}

/* Past their time: the next upstream is asked, or the guest gets SERVFAIL; idle connections close. */
static void expire(struct drv *d, struct resolver *r, int64_t now)
{
	struct saas__lv_egress *e = d->egress;

	for (struct pending *p = r->pending, *next; p; p = next) {
		next = p->next;
		if (now < p->deadline)
			continue;
		if (p->upstream + 1 < e->n_upstream && ask(e, p, p->upstream + 1) == 0)
			continue;
		answered(d, r, p, NULL, 0);
	}
	for (struct tcpconn *c = r->conns, *next; c; c = next) {
		next = c->next;
		if (!c->busy && now >= c->deadline)
			conn_close(r, e, c);
	}
}

static void *resolver_main(void *arg)
{
	struct drv *d = arg;
	struct saas__lv_egress *e = d->egress;
	struct resolver *r = e->res;
	struct pollfd *fds = NULL;
	struct source *src = NULL;
	size_t cap = 0, scap = 0;

	while (!__atomic_load_n(&e->closing, __ATOMIC_ACQUIRE)) {
		size_t n = 0;
		int64_t now = now_ms(), wait_ms = r->next_check - now;

		if (wait_ms <= 0) {
			/* A flushed ruleset takes the guard and every VM's rules: put them back (outside e->mu). */
			if (d->guard && saas__lv_guard_ensure(d) < 0)
				saas__error_clear();
			if (saas__lv_egress_ensure(d) < 0) {
				saas__lv_log(d, SAAS_LOG_WARN, "%s", saas_error_last()->message);
				saas__error_clear();
			}
			r->next_check = now_ms() + EGRESS_CHECK_MS;
			wait_ms = EGRESS_CHECK_MS;
		}
		pthread_mutex_lock(&e->mu);
		/* Every fd: the wake, 4 per policy VM, each connection and query. */
		{
			size_t need = 1 + r->n_pending;
			for (struct evm *v = e->vms; v; v = v->next)
				need += 4;
			for (struct tcpconn *c = r->conns; c; c = c->next)
				need++;
			if (SAAS__ARRAY_RESERVE(fds, cap, need) < 0 || SAAS__ARRAY_RESERVE(src, scap, need) < 0) {
				pthread_mutex_unlock(&e->mu);
				saas__error_clear();
				saas__sleep_ms(100);
				continue;
			}
		}
#define WATCH(f, k, fam, u, p)                                                                                 \
	do {                                                                                                       \
		fds[n] = (struct pollfd){ (f), POLLIN, 0 };                                                          \
		src[n++] = (struct source){ (k), (fam), (u), (p) };                                                  \
	} while (0)
		WATCH(e->wake, SRC_WAKE, 0, 0, NULL);
		for (struct evm *v = e->vms; v; v = v->next) {
			if (v->udp4 >= 0)
				WATCH(v->udp4, SRC_UDP, AF_INET, v->uid, NULL);
			if (v->udp6 >= 0)
				WATCH(v->udp6, SRC_UDP, AF_INET6, v->uid, NULL);
			if (v->tcp4 >= 0)
				WATCH(v->tcp4, SRC_LISTEN, AF_INET, v->uid, NULL);
			if (v->tcp6 >= 0)
				WATCH(v->tcp6, SRC_LISTEN, AF_INET6, v->uid, NULL);
		}
		for (struct tcpconn *c = r->conns; c; c = c->next)
			if (!c->busy)
				WATCH(c->fd, SRC_CONN, 0, c->uid, c);
		for (struct pending *p = r->pending; p; p = p->next)
			WATCH(p->fd, SRC_UPSTREAM, 0, p->uid, p);
#undef WATCH
		pthread_mutex_unlock(&e->mu);
		for (struct pending *p = r->pending; p; p = p->next)
			if (p->deadline - now < wait_ms)
				wait_ms = p->deadline - now > 0 ? p->deadline - now : 0;
		if (poll(fds, n, (int)(wait_ms < 1000 ? wait_ms : 1000)) < 0 && errno != EINTR)
			saas__sleep_ms(10);
		pthread_mutex_lock(&e->mu);
		/*
		 * Each source is checked against the list as it is now: a VM's sockets
		 * may have closed (and their numbers been reused) while it polled.
		 */
		for (size_t i = 0; i < n; i++) {
			struct evm *v;
			if (!(fds[i].revents & (POLLIN | POLLERR | POLLHUP)))
				continue;
			if (src[i].kind == SRC_WAKE) {
				uint64_t count;
				if (read(e->wake, &count, sizeof(count)) < 0) {
					/* Nothing to read: woken already. */
				}
				continue;
			}
			if (src[i].kind == SRC_UPSTREAM) {
				for (struct pending *p = r->pending; p; p = p->next)
					if (p == src[i].ptr && p->fd == fds[i].fd) {
						on_upstream(d, r, p);
						break;
					}
				continue;
			}
			if (src[i].kind == SRC_CONN) {
				for (struct tcpconn *c = r->conns; c; c = c->next)
					if (c == src[i].ptr && c->fd == fds[i].fd) {
						if ((v = saas__lv_egress_find_uid(e, c->uid)) && v->mode == SAAS_NET_POLICY)
							on_conn(d, r, v, c);
						else
							conn_close(r, e, c);
						break;
					}
				continue;
			}
			if (!(v = saas__lv_egress_find_uid(e, src[i].uid)))
				continue;
			if (src[i].kind == SRC_UDP && fds[i].fd == (src[i].family == AF_INET ? v->udp4 : v->udp6))
				on_udp(d, r, v, fds[i].fd, src[i].family);
			else if (src[i].kind == SRC_LISTEN && fds[i].fd == (src[i].family == AF_INET ? v->tcp4 : v->tcp6))
				on_listen(r, v, fds[i].fd);
		}
		expire(d, r, now_ms());
		pthread_mutex_unlock(&e->mu);
	}
	free(fds);
	free(src);
	return NULL;
}

int saas__lv_resolver_start(struct drv *d)
{
	struct saas__lv_egress *e = d->egress;
	int rc;

	if (!(e->res = calloc(1, sizeof(*e->res))))
		return saas__oom();
	e->res->next_check = now_ms() + EGRESS_CHECK_MS;
	if ((rc = pthread_create(&e->thread, NULL, resolver_main, d)) != 0) {
		free(e->res);
		e->res = NULL;
		errno = rc;
		return saas__error(SAAS_ENOMEM, SAAS_ERRCLASS_OS, rc, "cannot start the resolver's thread");
	}
	e->thread_started = true;
	return SAAS_OK;
}

void saas__lv_resolver_stop(struct drv *d)
{
	struct saas__lv_egress *e = d->egress;
	struct resolver *r = e->res;
	uint64_t one = 1;

	if (!e->thread_started)
		return;
	__atomic_store_n(&e->closing, 1, __ATOMIC_RELEASE);
	if (write(e->wake, &one, sizeof(one)) < 0) {
		/* Already signalled. */
	}
	pthread_join(e->thread, NULL);
	e->thread_started = false;
	while (r->pending)
		pending_free(e, r, r->pending);
	while (r->conns) {
		struct tcpconn *c = r->conns;
		r->conns = c->next;
		close(c->fd);
		free(c);
	}
	free(r);
	e->res = NULL;
}
