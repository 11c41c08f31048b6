/*
 * The servers' end of the egress channel of guests on VM hosts
 * (docs/vm-hosts.md, "Egress on a host"). A host's guest keeps slirp's
 * restrict=on: its connections and lookups come here as frames
 * (egress_mux.h) over a virtio-serial port, and this thread decides each
 * with the VM's policy by one machine's rules:
 *
 *   - a lookup: a name the policy allows (saas__lv_egress_name_allowed) is
 *     asked of the upstream (saas__lv_dns_ask), its answer's TTLs capped and
 *     its addresses learned for their TTL clamped as egress.c's sets do; any
 *     other is answered REFUSED and counted, and never leaves the server;
 *   - a connection to an address: never what the guard refuses (its ranges,
 *     saas__lv_guard_refuses; this server's own addresses and IPv6
 *     prefixes, as the guard's fib and host6 rules); then internet: any; a
 *     policy: not a deny CIDR, and an allow CIDR or an address its lookups
 *     learned; isolated: none. Each refusal is counted.
 *
 * An allowed connection is made from this server and spliced: DATA frames
 * are written to its socket, and what is read from it goes back as DATA,
 * never more than the guest's window. Every bound is the protocol's
 * (connections and lookups per VM) or this file's (what waits to be sent
 * on a channel: past OUT_SOFT no socket is read for it, past OUT_HARD the
 * channel is not read either, so a guest that never reads cannot grow it).
 * A guest that breaks the protocol loses its channel and its connections.
 *
 * One thread, one poll loop; the list of VMs and everything in it under mu,
 * which the thread lets go only while it polls.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "driver/libvirt/egress_host.h"
#include "transport/egress_mux.h"
#include "util/util.h"

_Static_assert(MUX_DNS_MAX == DNS_UDP_MAX, "a lookup's answer must fit one DNS_ANSWER frame");
_Static_assert(MUX_DNS_PENDING == EGRESS_PENDING_VM, "one bound of a VM's lookups in flight");

#define OUT_SOFT (256 * 1024)
#define OUT_HARD (512 * 1024)
/* What the channel is read by at once. */
#define IN_CHUNK (64 * 1024)
/* Addresses one VM's lookups learned at once (both families). */
#define LEARNED_MAX (2 * EGRESS_LEARNED_MAX)

struct hconn {
	uint32_t id;                     /* 0: slot free */
	int fd;
	bool connecting;
	int64_t deadline;                /* connecting: when it is given up */
	struct saas__mux_pending pend;   /* from the guest, not yet written (buf: MUX_WINDOW, made at its first DATA) */
	bool shut_in;                    /* the guest's SHUT: shut the socket's write side when pend is written */
	bool wr_shut, rd_eof;
};

struct hquery {
	uint32_t tag;
	int fd;                          /* -1: slot free */
	struct eacct *acct;              /* its VM's account, counted there while it waits */
	uint16_t id;
	unsigned int upstream;
	int64_t deadline;
	struct saas__dns_question q;
	size_t len;
	uint8_t msg[MUX_DNS_MAX];        /* the guest's query */
};

struct learned {
	int family;
	uint8_t addr[16];
	int64_t until;
};

struct hvm {
	char name[SAAS_ID_MAX + 1];
	int mode;
	struct eacct *acct;              /* its account: a share of the lookups in flight (egress.h) */
	char **allow, **deny;
	int fd;                          /* the channel, -1: none */
	bool live;                       /* its HELLO came */
	/* Its channel ended (the host's libvirtd, or the guest's end): opened again from retry_ms, 2 s doubling to 1 min. */
	bool lost;
	int64_t retry_ms, backoff_ms;
	struct saas__mux_track t;
	struct hconn c[MUX_CONNS_MAX];
	struct hquery q[MUX_DNS_PENDING];
	struct learned *learned;
	size_t n_learned;
	uint8_t in[2 * MUX_FRAME_MAX];
	size_t in_len;
	saas__buf out;
	size_t out_off;
	int64_t denied_connections, denied_lookups;
	struct hvm *next;
};

struct saas__lv_ehost {
	struct drv *d;
	pthread_mutex_t mu;
	struct hvm *vms;
	struct eacct *accts;
	unsigned int gen;                /* bumped when a VM or channel goes: what the poll saw is stale */
	struct sockaddr_storage upstream[EGRESS_UPSTREAMS_MAX];
	unsigned int n_upstream;
	struct saas__lv_prefix6 *host6;
	size_t n_host6;
	int wake;
	int closing;
	pthread_t thread;
	uint8_t msg[DNS_UDP_MAX];
};

/* ---- rules ----------------------------------------------------------------------------------- */

static bool cidr_any(char **rules, int family, const uint8_t *addr)
{
	for (; rules && *rules; rules++)
		if (strcmp(*rules, "*") == 0 || saas__lv_cidr_contains(*rules, family, addr))
			return true;
	return false;
}

/* Is addr one of this server's own (binding it works only then)? */
static bool local_addr(int family, const uint8_t *addr)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t len;
	int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool local;

	if (fd < 0)
		return true;                 /* cannot tell: refused */
	if (family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		s4->sin_family = AF_INET;
		memcpy(&s4->sin_addr, addr, 4);
		len = sizeof(*s4);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		s6->sin6_family = AF_INET6;
		memcpy(&s6->sin6_addr, addr, 16);
		len = sizeof(*s6);
	}
	local = bind(fd, (struct sockaddr *)&ss, len) == 0 || errno == EADDRINUSE;
	close(fd);
	return local;
}

static bool learned_has(struct hvm *v, int family, const uint8_t *addr, int64_t now)
{
	for (size_t i = 0; i < v->n_learned; i++)
		if (v->learned[i].family == family && v->learned[i].until > now &&
		    memcmp(v->learned[i].addr, addr, family == AF_INET ? 4 : 16) == 0)
			return true;
	return false;
}

/* Allow a for its TTL clamped as egress.c's sets do; the oldest entry makes room. */
static void learn(struct hvm *v, const struct saas__dns_addr *a, int64_t now)
{
	uint32_t ttl = a->ttl < EGRESS_TTL_MIN ? EGRESS_TTL_MIN : a->ttl > EGRESS_TTL_MAX ? EGRESS_TTL_MAX : a->ttl;
	size_t slot = v->n_learned;

	for (size_t i = 0; i < v->n_learned; i++)
		if (v->learned[i].family == a->family &&
		    memcmp(v->learned[i].addr, a->addr, a->family == AF_INET ? 4 : 16) == 0) {
			slot = i;
			break;
		}
	if (slot == v->n_learned) {
		if (!v->learned && !(v->learned = calloc(LEARNED_MAX, sizeof(*v->learned))))
			return;
		if (v->n_learned < LEARNED_MAX) {
			v->n_learned++;
		} else {
			slot = 0;
			for (size_t i = 1; i < v->n_learned; i++)
				if (v->learned[i].until < v->learned[slot].until)
					slot = i;
		}
	}
	v->learned[slot].family = a->family;
	memcpy(v->learned[slot].addr, a->addr, 16);
	v->learned[slot].until = now + (int64_t)ttl * 1000;
}

/* May v's guest connect to addr? */
static bool addr_allowed(struct saas__lv_ehost *h, struct hvm *v, int family, const uint8_t *addr)
{
	if (v->mode == SAAS_NET_ISOLATED || saas__lv_guard_refuses(family, addr) || local_addr(family, addr))
		return false;
	for (size_t i = 0; family == AF_INET6 && i < h->n_host6; i++)
		if (saas__lv_prefix_has(h->host6[i].addr.s6_addr, h->host6[i].len, addr))
			return false;
	if (v->mode == SAAS_NET_INTERNET)
		return true;
	if (cidr_any(v->deny, family, addr))
		return false;
	return cidr_any(v->allow, family, addr) || learned_has(v, family, addr, saas__now_ms());
}

static bool name_allowed(struct hvm *v, const char *name)
{
	if (v->mode == SAAS_NET_INTERNET)
		return true;
	return v->mode == SAAS_NET_POLICY &&
	       saas__lv_egress_name_allowed((const char *const *)v->allow, (const char *const *)v->deny, name);
}

/* ---- the channel ----------------------------------------------------------------------------- */

/* Queue a frame for the guest (header and payload); the protocol's rules were checked by the caller. */
static void out_frame(struct hvm *v, uint8_t type, uint32_t id, const void *payload, uint32_t len)
{
	uint8_t head[MUX_HEADER];

	saas__mux_header(head, type, id, len);
	if (saas__buf_put(&v->out, head, sizeof(head)) < 0 || (len && saas__buf_put(&v->out, payload, len) < 0))
		saas__error_clear(); /* out of memory: the guest's connection stalls, and times out on its side */
}

static void out_value(struct hvm *v, uint8_t type, uint32_t id, uint32_t value)
{
	uint8_t b[MUX_HEADER + 4];
	size_t n = type == MUX_OPENED ? saas__mux_u8_frame(b, type, id, (uint8_t)value)
	           : type == MUX_HELLO ? saas__mux_u16_frame(b, type, id, (uint16_t)value)
	                               : saas__mux_u32_frame(b, type, id, value);

	out_frame(v, b[0], id, b + MUX_HEADER, (uint32_t)(n - MUX_HEADER));
}

/* Send a tracked frame of a value (OPENED, WINDOW_UPDATE) or none (SHUT, CLOSE). */
static void send_ctl(struct hvm *v, uint8_t type, uint32_t id, uint32_t value)
{
	if (saas__mux_track_sent(&v->t, type, id, 0, value) < 0)
		return;
	if (type == MUX_OPENED || type == MUX_WINDOW_UPDATE)
		out_value(v, type, id, value);
	else
		out_frame(v, type, id, NULL, 0);
}

static struct hconn *conn_find(struct hvm *v, uint32_t id)
{
	for (unsigned int i = 0; i < MUX_CONNS_MAX; i++)
		if (v->c[i].id == id && id)
			return &v->c[i];
	return NULL;
}

static void conn_drop(struct hconn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->pend.buf);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

static void query_drop(struct saas__lv_ehost *h, struct hquery *q)
{
	if (q->fd >= 0)
		close(q->fd);
	q->fd = -1;
	if (q->acct) {
		q->acct->pending--;
		saas__lv_acct_drop(&h->accts, q->acct);
		q->acct = NULL;
	}
}

/* The channel ends: its connections and lookups with it; the policy and counters stay. */
static void channel_close(struct saas__lv_ehost *h, struct hvm *v)
{
	if (v->fd >= 0) {
		close(v->fd);
		v->lost = true;
		v->backoff_ms = v->backoff_ms ? v->backoff_ms : EGRESS_HOST_RETRY_MS;
		v->retry_ms = saas__now_ms() + v->backoff_ms;
	}
	v->fd = -1;
	v->live = false;
	for (unsigned int i = 0; i < MUX_CONNS_MAX; i++)
		conn_drop(&v->c[i]);
	for (unsigned int i = 0; i < MUX_DNS_PENDING; i++)
		query_drop(h, &v->q[i]);
	saas__buf_free(&v->out);
	v->out_off = 0;
	v->in_len = 0;
	saas__mux_track_init(&v->t, MUX_SERVER);
	h->gen++;
}

static void protocol_error(struct saas__lv_ehost *h, struct hvm *v, const char *what)
{
	saas__lv_log(h->d, SAAS_LOG_WARN, "VM %s: its egress channel broke the protocol (%s): closed with its connections",
	             v->name, what);
	channel_close(h, v);
}

/* ---- DNS ------------------------------------------------------------------------------------- */

static void dns_error(struct hvm *v, uint32_t tag, const uint8_t *msg, const struct saas__dns_question *q, int rcode)
{
	uint8_t out[MUX_DNS_MAX];
	size_t n = saas__dns_error_answer(msg, q, rcode, out, sizeof(out));

	if (n >= MUX_DNS_MIN)
		out_frame(v, MUX_DNS_ANSWER, tag, out, (uint32_t)n);
}

static void on_query(struct saas__lv_ehost *h, struct hvm *v, const struct saas__mux_frame *f)
{
	struct saas__dns_question q;
	struct hquery *slot = NULL;
	unsigned int share = saas__lv_acct_share(h->accts);

	if (saas__dns_query_parse(f->payload, f->len, &q) < 0) {
		if (q.end || !(f->payload[2] & 0x80))
			dns_error(v, f->id, f->payload, &q, DNS_RCODE_FORMERR);
		return;
	}
	if (!name_allowed(v, q.name)) {
		v->denied_lookups++;
		saas__lv_log(h->d, SAAS_LOG_DEBUG, "VM %s: lookup of %s refused by its policy", v->name, q.name);
		dns_error(v, f->id, f->payload, &q, DNS_RCODE_REFUSED);
		return;
	}
	for (unsigned int i = 0; i < MUX_DNS_PENDING && !slot; i++)
		if (v->q[i].fd < 0)
			slot = &v->q[i];
	/* Its VM's bound, and its account's share of the pool: another account's flood leaves this one its own. */
	if (!slot || !h->n_upstream || !v->acct || v->acct->pending >= share) {
		saas__lv_log(h->d, SAAS_LOG_DEBUG, "VM %s: lookup of %s answered SERVFAIL: %s", v->name, q.name,
		             !h->n_upstream ? "no upstream" : !slot ? "its own bound" : "its account's share in flight");
		dns_error(v, f->id, f->payload, &q, DNS_RCODE_SERVFAIL);
		return;
	}
	slot->tag = f->id;
	slot->q = q;
	slot->len = f->len;
	memcpy(slot->msg, f->payload, f->len);
	slot->upstream = 0;
	slot->deadline = saas__now_ms() + EGRESS_UPSTREAM_MS;
	if ((slot->fd = saas__lv_dns_ask(&h->upstream[0], slot->msg, slot->len, &slot->id)) < 0) {
		dns_error(v, f->id, f->payload, &q, DNS_RCODE_SERVFAIL);
		return;
	}
	slot->acct = v->acct;
	slot->acct->pending++;
}

/* The upstream answered q (len bytes at msg), or gave up (len 0). */
static void answered(struct saas__lv_ehost *h, struct hvm *v, struct hquery *q, uint8_t *msg, size_t len)
{
	struct saas__lv_answer_addrs c = { .n = 0 };
	int64_t now = saas__now_ms();

	/* The policy may have changed while the upstream thought. */
	if (!name_allowed(v, q->q.name)) {
		v->denied_lookups++;
		dns_error(v, q->tag, q->msg, &q->q, DNS_RCODE_REFUSED);
	} else if (len && saas__dns_answer_walk(msg, len, &q->q, EGRESS_TTL_MAX, saas__lv_answer_collect, &c) >= 0) {
		for (size_t i = 0; i < c.n && v->mode == SAAS_NET_POLICY; i++)
			learn(v, &c.a[i], now);
		msg[0] = q->msg[0];
		msg[1] = q->msg[1];
		out_frame(v, MUX_DNS_ANSWER, q->tag, msg, (uint32_t)len);
	} else {
		dns_error(v, q->tag, q->msg, &q->q, DNS_RCODE_SERVFAIL);
	}
	query_drop(h, q);
}

static void on_upstream(struct saas__lv_ehost *h, struct hvm *v, struct hquery *q)
{
	ssize_t n = recv(q->fd, h->msg, sizeof(h->msg), MSG_DONTWAIT);

	/* Not ours (another id: late or forged) or an ICMP error: wait for the real one or the deadline. */
	if (n < DNS_HEADER || (uint16_t)(h->msg[0] << 8 | h->msg[1]) != q->id)
		return;
	answered(h, v, q, h->msg, (size_t)n);
}

/* ---- connections ----------------------------------------------------------------------------- */

static void on_open(struct saas__lv_ehost *h, struct hvm *v, const struct saas__mux_frame *f)
{
	struct saas__mux_open o;
	struct sockaddr_storage ss = { 0 };
	struct hconn *c = NULL;
	socklen_t len;
	char text[INET6_ADDRSTRLEN];
	int family;

	if (saas__mux_open_read(f, &o) < 0) {
		protocol_error(h, v, "a malformed open");
		return;
	}
	/*
	 * By name (what TLS's SNI or HTTP's Host said): not served yet, the
	 * guest opens by the address its lookup (through us) gave.
	 */
	if (o.family == 0) {
		send_ctl(v, MUX_OPENED, f->id, MUX_ST_REFUSED);
		return;
	}
	family = o.family == 4 ? AF_INET : AF_INET6;
	if (!addr_allowed(h, v, family, o.addr)) {
		v->denied_connections++;
		saas__lv_log(h->d, SAAS_LOG_DEBUG, "VM %s: connection to %s port %u refused by its policy", v->name,
		             inet_ntop(family, o.addr, text, sizeof(text)), o.port);
		send_ctl(v, MUX_OPENED, f->id, MUX_ST_REFUSED);
		return;
	}
	for (unsigned int i = 0; i < MUX_CONNS_MAX && !c; i++)
		if (!v->c[i].id)
			c = &v->c[i];
	if (family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		s4->sin_family = AF_INET;
		s4->sin_port = htons(o.port);
		memcpy(&s4->sin_addr, o.addr, 4);
		len = sizeof(*s4);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(o.port);
		memcpy(&s6->sin6_addr, o.addr, 16);
		len = sizeof(*s6);
	}
	/* The table holds as many as the protocol's: a free slot is always there. */
	if (!c || (c->fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0) {
		if (c)
			c->fd = -1;
		send_ctl(v, MUX_OPENED, f->id, MUX_ST_UNREACHABLE);
		return;
	}
	c->id = f->id;
	if (connect(c->fd, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS) {
		conn_drop(c);
		send_ctl(v, MUX_OPENED, f->id, MUX_ST_UNREACHABLE);
		return;
	}
	c->connecting = true;
	c->deadline = saas__now_ms() + EGRESS_HOST_CONNECT_MS;
}

/* Our end of c is over: the guest is told, the id stays the protocol's until its CLOSE. */
static void conn_end(struct hvm *v, struct hconn *c)
{
	send_ctl(v, MUX_CLOSE, c->id, 0);
	conn_drop(c);
}

/* Write what the guest sent; give its window back; shut the write side after its SHUT. */
static void conn_write(struct hvm *v, struct hconn *c)
{
	uint32_t credit;

	if (saas__mux_pending_flush(&c->pend, c->fd, &credit) < 0) {
		conn_end(v, c);
		return;
	}
	if (credit)
		send_ctl(v, MUX_WINDOW_UPDATE, c->id, credit);
	if (c->shut_in && !saas__mux_pending_any(&c->pend) && !c->wr_shut) {
		shutdown(c->fd, SHUT_WR);
		c->wr_shut = true;
	}
	if (c->wr_shut && c->rd_eof)
		conn_end(v, c);
}

static void on_data(struct hvm *v, const struct saas__mux_frame *f)
{
	struct hconn *c = conn_find(v, f->id);

	if (!c)
		return;
	if (!c->pend.buf && !(c->pend.buf = malloc(MUX_WINDOW))) {
		conn_end(v, c);
		return;
	}
	/* The window the guest keeps to (saas__mux_track_received) is what pend holds. */
	saas__mux_pending_add(&c->pend, f->payload, f->len);
	conn_write(v, c);
}

/* Read c's socket into DATA frames, within the guest's window. */
static void conn_read(struct hvm *v, struct hconn *c)
{
	struct saas__mux_conn *t = saas__mux_conn_find(&v->t, c->id);
	uint8_t buf[MUX_DATA_MAX];

	while (t && t->credit_out && !c->rd_eof && v->out.len - v->out_off < OUT_SOFT) {
		size_t want = t->credit_out < sizeof(buf) ? t->credit_out : sizeof(buf);
		ssize_t n = recv(c->fd, buf, want, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			if (n < 0) {
				conn_end(v, c);
				return;
			}
			c->rd_eof = true;
			send_ctl(v, MUX_SHUT, c->id, 0);
			if (c->wr_shut)
				conn_end(v, c);
			return;
		}
		if (saas__mux_track_sent(&v->t, MUX_DATA, c->id, (uint32_t)n, 0) == 0)
			out_frame(v, MUX_DATA, c->id, buf, (uint32_t)n);
	}
}

static void on_connected(struct hvm *v, struct hconn *c, bool timeout)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (timeout || getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
		uint32_t id = c->id;
		conn_drop(c);
		send_ctl(v, MUX_OPENED, id, MUX_ST_UNREACHABLE);
		return;
	}
	c->connecting = false;
	send_ctl(v, MUX_OPENED, c->id, MUX_ST_OK);
}

/* ---- frames from the guest ------------------------------------------------------------------- */

static void on_frame(struct saas__lv_ehost *h, struct hvm *v, const struct saas__mux_frame *f)
{
	enum saas__mux_verdict verdict = saas__mux_track_received(&v->t, f);
	struct hconn *c;

	switch (verdict) {
	case MUX_V_ERROR:
		protocol_error(h, v, "a frame its rules forbid");
		return;
	case MUX_V_IGNORE:
		return;
	case MUX_V_FULL:
		out_value(v, MUX_OPENED, f->id, MUX_ST_LIMIT);
		return;
	case MUX_V_CLOSE:
		if ((c = conn_find(v, f->id)))
			conn_drop(c);
		out_frame(v, MUX_CLOSE, f->id, NULL, 0);
		return;
	case MUX_V_OK:
		break;
	}
	switch (f->type) {
	case MUX_HELLO:
		v->live = true;
		break;
	case MUX_OPEN_ADDR:
	case MUX_OPEN_NAME:
		on_open(h, v, f);
		break;
	case MUX_DATA:
		on_data(v, f);
		break;
	case MUX_SHUT:
		if ((c = conn_find(v, f->id))) {
			c->shut_in = true;
			conn_write(v, c);
		}
		break;
	case MUX_DNS_QUERY:
		on_query(h, v, f);
		break;
	default:
		break;                       /* WINDOW_UPDATE: the table took it; CLOSE of ours: done */
	}
}

static void on_channel_in(struct saas__lv_ehost *h, struct hvm *v)
{
	size_t used = 0;
	ssize_t n = read(v->fd, v->in + v->in_len, sizeof(v->in) - v->in_len < IN_CHUNK ? sizeof(v->in) - v->in_len
	                                                                                 : IN_CHUNK);
	struct saas__mux_frame f;
	long took;
	unsigned int gen = h->gen;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		saas__lv_log(h->d, SAAS_LOG_DEBUG, "VM %s: its egress channel closed", v->name);
		channel_close(h, v);
		return;
	}
	v->in_len += (size_t)n;
	while ((took = saas__mux_frame_read(v->in + used, v->in_len - used, MUX_GUEST, &f)) > 0) {
		on_frame(h, v, &f);
		if (h->gen != gen)
			return;                  /* the channel was closed */
		used += (size_t)took;
	}
	if (took < 0) {
		protocol_error(h, v, "a malformed frame");
		return;
	}
	memmove(v->in, v->in + used, v->in_len - used);
	v->in_len -= used;
}

static void on_channel_out(struct saas__lv_ehost *h, struct hvm *v)
{
	ssize_t n = send(v->fd, v->out.data + v->out_off, v->out.len - v->out_off, MSG_DONTWAIT | MSG_NOSIGNAL);

	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			channel_close(h, v);
		return;
	}
	v->out_off += (size_t)n;
	if (v->out_off == v->out.len)
		v->out.len = v->out_off = 0;
	else if (v->out_off > OUT_HARD) {
		memmove(v->out.data, v->out.data + v->out_off, v->out.len - v->out_off);
		v->out.len -= v->out_off;
		v->out_off = 0;
	}
}

/* ---- the loop -------------------------------------------------------------------------------- */

enum { SRC_WAKE, SRC_CHANNEL, SRC_CONN, SRC_QUERY };

struct source {
	int kind;
	struct hvm *v;
	unsigned int i;
};

static void expire(struct saas__lv_ehost *h, int64_t now)
{
	for (struct hvm *v = h->vms; v; v = v->next) {
		for (unsigned int i = 0; i < MUX_CONNS_MAX; i++)
			if (v->c[i].id && v->c[i].connecting && now >= v->c[i].deadline)
				on_connected(v, &v->c[i], true);
		for (unsigned int i = 0; i < MUX_DNS_PENDING; i++) {
			struct hquery *q = &v->q[i];
			if (q->fd < 0 || now < q->deadline)
				continue;
			close(q->fd);
			q->fd = -1;
			if (q->upstream + 1 < h->n_upstream) {
				q->upstream++;
				q->deadline = now + EGRESS_UPSTREAM_MS;
				if ((q->fd = saas__lv_dns_ask(&h->upstream[q->upstream], q->msg, q->len, &q->id)) >= 0)
					continue;
			}
			answered(h, v, q, NULL, 0);
		}
	}
}

static void *ehost_main(void *arg)
{
	struct saas__lv_ehost *h = arg;
	struct pollfd *fds = NULL;
	struct source *src = NULL;
	size_t cap = 0;

	pthread_mutex_lock(&h->mu);
	while (!__atomic_load_n(&h->closing, __ATOMIC_SEQ_CST)) {
		size_t n = 1, want = 1;
		int64_t now = saas__now_ms(), next = now + 1000;
		unsigned int gen;

		for (struct hvm *v = h->vms; v; v = v->next)
			want += 1 + MUX_CONNS_MAX + MUX_DNS_PENDING;
		if (want > cap) {
			struct pollfd *nf = realloc(fds, want * sizeof(*fds));
			struct source *ns = nf ? realloc(src, want * sizeof(*src)) : NULL;
			if (nf)
				fds = nf;
			if (!ns) {
				pthread_mutex_unlock(&h->mu);
				usleep(100000);
				pthread_mutex_lock(&h->mu);
				continue;
			}
			src = ns;
			cap = want;
		}
		fds[0] = (struct pollfd){ .fd = h->wake, .events = POLLIN };
		src[0] = (struct source){ SRC_WAKE, NULL, 0 };
		for (struct hvm *v = h->vms; v; v = v->next) {
			size_t backlog = v->out.len - v->out_off;
			if (v->fd < 0)
				continue;
			fds[n] = (struct pollfd){ .fd = v->fd, .events = (short)((backlog < OUT_HARD ? POLLIN : 0) |
			                                                          (backlog ? POLLOUT : 0)) };
			src[n++] = (struct source){ SRC_CHANNEL, v, 0 };
			for (unsigned int i = 0; i < MUX_CONNS_MAX; i++) {
				struct hconn *c = &v->c[i];
				struct saas__mux_conn *t;
				short ev = 0;
				if (!c->id)
					continue;
				if (c->connecting) {
					ev = POLLOUT;
					if (c->deadline < next)
						next = c->deadline;
				} else {
					t = saas__mux_conn_find(&v->t, c->id);
					if (saas__mux_pending_any(&c->pend))
						ev |= POLLOUT;
					if (t && t->credit_out && !c->rd_eof && backlog < OUT_SOFT)
						ev |= POLLIN;
				}
				/* Nothing wanted of it now: not polled at all (a hung-up socket would wake the loop for ever). */
				fds[n] = (struct pollfd){ .fd = ev ? c->fd : -1, .events = ev };
				src[n++] = (struct source){ SRC_CONN, v, i };
			}
			for (unsigned int i = 0; i < MUX_DNS_PENDING; i++)
				if (v->q[i].fd >= 0) {
					if (v->q[i].deadline < next)
						next = v->q[i].deadline;
					fds[n] = (struct pollfd){ .fd = v->q[i].fd, .events = POLLIN };
					src[n++] = (struct source){ SRC_QUERY, v, i };
				}
		}
		gen = h->gen;
		pthread_mutex_unlock(&h->mu);
		if (poll(fds, n, (int)(next > now ? next - now : 0)) < 0 && errno != EINTR)
			usleep(10000);
		pthread_mutex_lock(&h->mu);
		for (size_t i = 0; i < n && h->gen == gen; i++) {
			struct hvm *v = src[i].v;
			short re = fds[i].revents;
			if (!re)
				continue;
			if (src[i].kind == SRC_WAKE) {
				uint64_t count;
				if (read(h->wake, &count, sizeof(count)) < 0) {
					/* Nothing to read: woken anyway. */
				}
			} else if (src[i].kind == SRC_CHANNEL) {
				if (re & (POLLIN | POLLHUP | POLLERR))
					on_channel_in(h, v);
				if (h->gen == gen && v->fd >= 0 && (re & POLLOUT))
					on_channel_out(h, v);
			} else if (src[i].kind == SRC_CONN) {
				struct hconn *c = &v->c[src[i].i];
				if (!c->id || c->fd != fds[i].fd)
					continue;        /* ended by a frame of this round */
				if (c->connecting) {
					on_connected(v, c, false);
					continue;
				}
				if (re & (POLLOUT | POLLERR))
					conn_write(v, c);
				if (c->id && (re & (POLLIN | POLLHUP | POLLERR)))
					conn_read(v, c);
			} else if (v->q[src[i].i].fd == fds[i].fd) {
				on_upstream(h, v, &v->q[src[i].i]);
			}
		}
		/* Frames queued this round go out now, without waiting a poll for it. */
		for (struct hvm *v = h->vms; v; v = v->next)
			if (v->fd >= 0 && v->out.len > v->out_off)
				on_channel_out(h, v);
		expire(h, saas__now_ms());
	}
	pthread_mutex_unlock(&h->mu);
	free(fds);
	free(src);
	return NULL;
}

static void wake(struct saas__lv_ehost *h)
{
	uint64_t one = 1;

	if (write(h->wake, &one, sizeof(one)) < 0) {
		/* Already signalled: the thread looks anyway. */
	}
}

/* ---- the driver's calls ---------------------------------------------------------------------- */

static struct hvm *vm_find(struct saas__lv_ehost *h, const char *name)
{
	for (struct hvm *v = h->vms; v; v = v->next)
		if (strcmp(v->name, name) == 0)
			return v;
	return NULL;
}

/* v's account, as v now resolves through us or not; acct is its new one (may be v's own). */
static void acct_join(struct saas__lv_ehost *h, struct hvm *v, struct eacct *acct, int mode)
{
	struct eacct *old = v->acct;

	if (old) {
		old->vms--;
		if (v->mode != SAAS_NET_ISOLATED)
			old->policy_vms--;
	}
	v->acct = acct;
	acct->vms++;
	if (mode != SAAS_NET_ISOLATED)
		acct->policy_vms++;
	saas__lv_acct_drop(&h->accts, old);
}

static void vm_free(struct saas__lv_ehost *h, struct hvm *v)
{
	channel_close(h, v);
	if (v->acct) {
		v->acct->vms--;
		if (v->mode != SAAS_NET_ISOLATED)
			v->acct->policy_vms--;
		saas__lv_acct_drop(&h->accts, v->acct);
	}
	saas__lv_rules_free(v->allow);
	saas__lv_rules_free(v->deny);
	free(v->learned);
	free(v);
}

int saas__lv_ehost_start(struct saas__lv_ehost **out, struct drv *d, const struct sockaddr_storage *upstream,
                         unsigned int n_upstream)
{
	struct saas__lv_ehost *h = calloc(1, sizeof(*h));
	struct ifaddrs *ifa = NULL;
	int rc;

	*out = NULL;
	if (!h)
		return saas__oom();
	h->d = d;
	h->n_upstream = n_upstream < EGRESS_UPSTREAMS_MAX ? n_upstream : EGRESS_UPSTREAMS_MAX;
	memcpy(h->upstream, upstream, h->n_upstream * sizeof(*upstream));
	/* This server's own IPv6 prefixes: its neighbours there are not the internet (the guard's host6). */
	if (getifaddrs(&ifa) == 0) {
		rc = saas__lv_host_prefixes6(ifa, &h->host6, &h->n_host6);
		freeifaddrs(ifa);
		if (rc < 0) {
			free(h);
			return rc;
		}
	}
	pthread_mutex_init(&h->mu, NULL);
	if ((h->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 || (rc = pthread_create(&h->thread, NULL, ehost_main, h))) {
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, errno, "cannot start the egress thread of VM hosts: %s",
		                 strerror(h->wake < 0 ? errno : rc));
		if (h->wake >= 0)
			close(h->wake);
		pthread_mutex_destroy(&h->mu);
		free(h->host6);
		free(h);
		return rc;
	}
	*out = h;
	return SAAS_OK;
}

void saas__lv_ehost_stop(struct saas__lv_ehost *h)
{
	if (!h)
		return;
	__atomic_store_n(&h->closing, 1, __ATOMIC_SEQ_CST);
	wake(h);
	pthread_join(h->thread, NULL);
	while (h->vms) {
		struct hvm *v = h->vms;
		h->vms = v->next;
		vm_free(h, v);
	}
	close(h->wake);
	pthread_mutex_destroy(&h->mu);
	free(h->host6);
	free(h);
}

int saas__lv_ehost_set(struct saas__lv_ehost *h, const char *name, const saas_vm_network *net)
{
	int mode = net ? net->mode : SAAS_NET_ISOLATED, rc;
	char **allow = NULL, **deny = NULL, own[SAAS_ID_MAX + 8];
	struct eacct *acct;
	struct hvm *v;

	if ((rc = saas__lv_egress_take(net, &allow, &deny)) < 0)
		return rc;
	pthread_mutex_lock(&h->mu);
	if (!(v = vm_find(h, name))) {
		if (!(v = calloc(1, sizeof(*v)))) {
			pthread_mutex_unlock(&h->mu);
			saas__lv_rules_free(allow);
			saas__lv_rules_free(deny);
			return saas__oom();
		}
		saas__strlcpy(v->name, name, sizeof(v->name));
		v->fd = -1;
		for (unsigned int i = 0; i < MUX_CONNS_MAX; i++)
			v->c[i].fd = -1;
		for (unsigned int i = 0; i < MUX_DNS_PENDING; i++)
			v->q[i].fd = -1;
		saas__mux_track_init(&v->t, MUX_SERVER);
		v->next = h->vms;
		h->vms = v;
	}
	/* Its account, as egress.c takes it: a call without one keeps the one it has; a VM never told is its own. */
	snprintf(own, sizeof(own), "vm %s", name);
	if (!(acct = saas__lv_acct_get(&h->accts, net && net->account ? net->account : v->acct ? v->acct->id : own))) {
		pthread_mutex_unlock(&h->mu);
		saas__lv_rules_free(allow);
		saas__lv_rules_free(deny);
		return saas__oom();
	}
	acct_join(h, v, acct, mode);
	saas__lv_rules_free(v->allow);
	saas__lv_rules_free(v->deny);
	v->mode = mode;
	v->allow = allow;
	v->deny = deny;
	/* A swap forgets what lookups under the old policy allowed. */
	v->n_learned = 0;
	pthread_mutex_unlock(&h->mu);
	return SAAS_OK;
}

int saas__lv_ehost_attach(struct saas__lv_ehost *h, const char *name, int fd)
{
	struct hvm *v;

	pthread_mutex_lock(&h->mu);
	if (!(v = vm_find(h, name))) {
		pthread_mutex_unlock(&h->mu);
		close(fd);
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_DRIVER, 0, "VM %s has no egress here", name);
	}
	channel_close(h, v);
	v->fd = fd;
	v->lost = false;
	/* Our HELLO first; the guest's is the first frame the table takes. */
	if (saas__mux_track_sent(&v->t, MUX_HELLO, 0, 2, MUX_VERSION) == 0)
		out_value(v, MUX_HELLO, 0, MUX_VERSION);
	wake(h);
	pthread_mutex_unlock(&h->mu);
	return SAAS_OK;
}

void saas__lv_ehost_remove(struct saas__lv_ehost *h, const char *name)
{
	pthread_mutex_lock(&h->mu);
	for (struct hvm **pp = &h->vms; *pp; pp = &(*pp)->next)
		if (strcmp((*pp)->name, name) == 0) {
			struct hvm *v = *pp;
			*pp = v->next;
			vm_free(h, v);
			break;
		}
	wake(h);
	pthread_mutex_unlock(&h->mu);
}

size_t saas__lv_ehost_lost(struct saas__lv_ehost *h, char (*names)[SAAS_ID_MAX + 1], size_t max)
{
	int64_t now = saas__now_ms();
	size_t n = 0;

	pthread_mutex_lock(&h->mu);
	for (struct hvm *v = h->vms; v && n < max; v = v->next)
		if (v->lost && v->fd < 0 && v->retry_ms <= now) {
			saas__strlcpy(names[n++], v->name, sizeof(names[0]));
			v->retry_ms = now + v->backoff_ms;
			v->backoff_ms = v->backoff_ms * 2 > EGRESS_HOST_RETRY_MAX_MS ? EGRESS_HOST_RETRY_MAX_MS : v->backoff_ms * 2;
		}
	pthread_mutex_unlock(&h->mu);
	return n;
}

void saas__lv_ehost_conn_lost(struct saas__lv_ehost *h, bool back)
{
	pthread_mutex_lock(&h->mu);
	for (struct hvm *v = h->vms; v; v = v->next) {
		channel_close(h, v);
		if (back && v->lost) {
			v->backoff_ms = EGRESS_HOST_RETRY_MS;
			v->retry_ms = 0;
		}
	}
	wake(h);
	pthread_mutex_unlock(&h->mu);
}

int saas__lv_ehost_channel(struct saas__lv_ehost *h, const char *name)
{
	struct hvm *v;
	int has;

	pthread_mutex_lock(&h->mu);
	has = !(v = vm_find(h, name)) ? -1 : v->fd >= 0;
	pthread_mutex_unlock(&h->mu);
	return has;
}

int saas__lv_ehost_stats(struct saas__lv_ehost *h, const char *name, saas_vm_network_stats *out, bool *live)
{
	struct hvm *v;

	memset(out, 0, sizeof(*out));
	if (live)
		*live = false;
	pthread_mutex_lock(&h->mu);
	if ((v = vm_find(h, name))) {
		out->denied_connections = v->denied_connections;
		out->denied_lookups = v->denied_lookups;
		if (live)
			*live = v->fd >= 0 && v->live;
	}
	pthread_mutex_unlock(&h->mu);
	return SAAS_OK;
}
