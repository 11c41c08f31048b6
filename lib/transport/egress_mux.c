/*
 * The egress channel's frames and each end's rules (egress_mux.h). Every
 * frame read here may be a hostile guest's: each read is bounded by the
 * frame's length, each payload by its type's bound, and the connection
 * table by MUX_CONNS_MAX.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "transport/egress_mux.h"

static uint32_t get16(const uint8_t *p)
{
	return (uint32_t)p[0] << 8 | p[1];
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, v >> 16);
	put16(p + 2, v & 0xffff);
}

/* Each type's sender and payload bounds; id: 0 must be 0, 1 must not be 0, 2 any. */
static const struct {
	uint8_t from;                     /* MUX_GUEST, MUX_SERVER or both */
	uint32_t min, max;
	uint8_t id;
} types[] = {
	[MUX_HELLO] = { MUX_GUEST | MUX_SERVER, 2, 2, 0 },
	[MUX_OPEN_ADDR] = { MUX_GUEST, 7, 19, 1 },
	[MUX_OPEN_NAME] = { MUX_GUEST, 3, 2 + MUX_NAME_MAX, 1 },
	[MUX_OPENED] = { MUX_SERVER, 1, 1, 1 },
	[MUX_DATA] = { MUX_GUEST | MUX_SERVER, 1, MUX_DATA_MAX, 1 },
	[MUX_WINDOW_UPDATE] = { MUX_GUEST | MUX_SERVER, 4, 4, 1 },
	[MUX_SHUT] = { MUX_GUEST | MUX_SERVER, 0, 0, 1 },
	[MUX_CLOSE] = { MUX_GUEST | MUX_SERVER, 0, 0, 1 },
	[MUX_DNS_QUERY] = { MUX_GUEST, MUX_DNS_MIN, MUX_DNS_MAX, 2 },
	[MUX_DNS_ANSWER] = { MUX_SERVER, MUX_DNS_MIN, MUX_DNS_MAX, 2 },
};

long saas__mux_frame_read(const uint8_t *buf, size_t n, enum saas__mux_role from, struct saas__mux_frame *f)
{
	uint8_t type;
	uint32_t len, id;

	memset(f, 0, sizeof(*f));
	if (n < MUX_HEADER)
		return 0;
	type = buf[0];
	len = (uint32_t)buf[1] << 16 | get16(buf + 2);
	id = get32(buf + 4);
	/* The header alone says whether it is well formed: never wait for the payload of a bad one. */
	if (type == 0 || type >= sizeof(types) / sizeof(types[0]) || !(types[type].from & from) ||
	    len < types[type].min || len > types[type].max || (types[type].id == 0 && id != 0) ||
	    (types[type].id == 1 && id == 0))
		return -1;
	if (n - MUX_HEADER < len)
		return 0;
	f->type = type;
	f->id = id;
	f->len = len;
	f->payload = buf + MUX_HEADER;
	if (type == MUX_OPENED && f->payload[0] > MUX_ST_MAX)
		return -1;
	if (type == MUX_WINDOW_UPDATE && (get32(f->payload) == 0 || get32(f->payload) > MUX_WINDOW))
		return -1;
	return (long)(MUX_HEADER + len);
}

void saas__mux_header(uint8_t *out, uint8_t type, uint32_t id, uint32_t len)
{
	out[0] = type;
	out[1] = (uint8_t)(len >> 16);
	put16(out + 2, len & 0xffff);
	put32(out + 4, id);
}

uint32_t saas__mux_value(const struct saas__mux_frame *f)
{
	switch (f->len) {
	case 1:
		return f->payload[0];
	case 2:
		return get16(f->payload);
	case 4:
		return get32(f->payload);
	default:
		return 0;
	}
}

size_t saas__mux_u8_frame(uint8_t *out, uint8_t type, uint32_t id, uint8_t v)
{
	saas__mux_header(out, type, id, 1);
	out[MUX_HEADER] = v;
	return MUX_HEADER + 1;
}

size_t saas__mux_u16_frame(uint8_t *out, uint8_t type, uint32_t id, uint16_t v)
{
	saas__mux_header(out, type, id, 2);
	put16(out + MUX_HEADER, v);
	return MUX_HEADER + 2;
}

size_t saas__mux_u32_frame(uint8_t *out, uint8_t type, uint32_t id, uint32_t v)
{
	saas__mux_header(out, type, id, 4);
	put32(out + MUX_HEADER, v);
	return MUX_HEADER + 4;
}

bool saas__mux_name_ok(const char *name, size_t len)
{
	size_t label = 0;

	if (len == 0 || len > MUX_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];
		if (c == '.') {
			if (label == 0)
				return false;
			label = 0;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_') || ++label > 63)
			return false;
	}
	return label != 0;
}

int saas__mux_open_read(const struct saas__mux_frame *f, struct saas__mux_open *o)
{
	const uint8_t *p = f->payload;

	memset(o, 0, sizeof(*o));
	if (f->type == MUX_OPEN_ADDR) {
		size_t alen = p[0] == 4 ? 4 : p[0] == 6 ? 16 : 0;
		if (!alen || f->len != 3 + alen)
			return -1;
		o->family = p[0];
		o->port = (uint16_t)get16(p + 1);
		memcpy(o->addr, p + 3, alen);
	} else if (f->type == MUX_OPEN_NAME) {
		if (!saas__mux_name_ok((const char *)p + 2, f->len - 2))
			return -1;
		o->port = (uint16_t)get16(p);
		memcpy(o->name, p + 2, f->len - 2);
		o->name[f->len - 2] = '\0';
	} else {
		return -1;
	}
	return o->port ? 0 : -1;
}

size_t saas__mux_open_write(uint8_t *out, size_t cap, uint32_t id, const struct saas__mux_open *o)
{
	size_t len;

	if (id == 0 || o->port == 0)
		return 0;
	if (o->family == 4 || o->family == 6) {
		size_t alen = o->family == 4 ? 4 : 16;
		if (cap < MUX_HEADER + 3 + alen)
			return 0;
		saas__mux_header(out, MUX_OPEN_ADDR, id, (uint32_t)(3 + alen));
		out[MUX_HEADER] = (uint8_t)o->family;
		put16(out + MUX_HEADER + 1, o->port);
		memcpy(out + MUX_HEADER + 3, o->addr, alen);
		return MUX_HEADER + 3 + alen;
	}
	/* strnlen is POSIX, not C11: the guest's build is plain C11. */
	for (len = 0; len < sizeof(o->name) && o->name[len]; len++)
		;
	if (o->family != 0 || !saas__mux_name_ok(o->name, len) || cap < MUX_HEADER + 2 + len)
		return 0;
	saas__mux_header(out, MUX_OPEN_NAME, id, (uint32_t)(2 + len));
	put16(out + MUX_HEADER, o->port);
	memcpy(out + MUX_HEADER + 2, o->name, len);
	return MUX_HEADER + 2 + len;
}

/* ---- the rules ------------------------------------------------------------------------------- */

void saas__mux_track_init(struct saas__mux_track *t, enum saas__mux_role self)
{
	memset(t, 0, sizeof(*t));
	t->self = self;
}

struct saas__mux_conn *saas__mux_conn_find(struct saas__mux_track *t, uint32_t id)
{
	if (id == 0)
		return NULL;
	for (unsigned int i = 0; i < MUX_CONNS_MAX; i++)
		if (t->c[i].state != MUX_C_FREE && t->c[i].id == id)
			return &t->c[i];
	return NULL;
}

/* A slot for a new connection id; NULL when MUX_CONNS_MAX are in use. */
static struct saas__mux_conn *conn_add(struct saas__mux_track *t, uint32_t id)
{
	for (unsigned int i = 0; i < MUX_CONNS_MAX; i++)
		if (t->c[i].state == MUX_C_FREE) {
			struct saas__mux_conn *c = &t->c[i];
			memset(c, 0, sizeof(*c));
			c->id = id;
			c->state = MUX_C_OPENING;
			c->credit_in = c->credit_out = MUX_WINDOW;
			t->n++;
			return c;
		}
	return NULL;
}

static void conn_free(struct saas__mux_track *t, struct saas__mux_conn *c)
{
	memset(c, 0, sizeof(*c));
	t->n--;
}

enum saas__mux_verdict saas__mux_track_received(struct saas__mux_track *t, const struct saas__mux_frame *f)
{
	struct saas__mux_conn *c;
	uint32_t v;

	if (!t->hello_in) {
		if (f->type != MUX_HELLO || saas__mux_value(f) != MUX_VERSION)
			return MUX_V_ERROR;
		t->hello_in = true;
		return MUX_V_OK;
	}
	if (f->type == MUX_HELLO)
		return MUX_V_ERROR;
	if (f->type == MUX_DNS_QUERY || f->type == MUX_DNS_ANSWER)
		return MUX_V_OK;
	c = saas__mux_conn_find(t, f->id);
	switch (f->type) {
	case MUX_OPEN_ADDR:
	case MUX_OPEN_NAME:
		if (t->self != MUX_SERVER || c)
			return MUX_V_ERROR;
		return conn_add(t, f->id) ? MUX_V_OK : MUX_V_FULL;
	case MUX_OPENED:
		if (t->self != MUX_GUEST || !c || c->state == MUX_C_OPEN)
			return MUX_V_ERROR;
		if (c->state == MUX_C_CLOSING) {
			/* Crossed with our CLOSE: a failure ended it there (our CLOSE is ignored), a success is answered. */
			if (saas__mux_value(f) != MUX_ST_OK)
				conn_free(t, c);
			return MUX_V_IGNORE;
		}
		if (saas__mux_value(f) == MUX_ST_OK)
			c->state = MUX_C_OPEN;
		else
			conn_free(t, c);
		return MUX_V_OK;
	case MUX_CLOSE:
		if (!c)
			return MUX_V_IGNORE;     /* after an OPENED that failed, our CLOSE crossed it */
		if (c->state == MUX_C_CLOSING) {
			conn_free(t, c);
			return MUX_V_OK;
		}
		if (c->state == MUX_C_OPENING && t->self == MUX_GUEST)
			return MUX_V_ERROR;      /* the server answers an OPEN with OPENED, never a CLOSE of its own */
		conn_free(t, c);
		return MUX_V_CLOSE;
	default:
		break;
	}
	/* DATA, WINDOW_UPDATE, SHUT: only on an open connection. */
	if (!c || c->state == MUX_C_OPENING)
		return MUX_V_ERROR;
	if (c->state == MUX_C_CLOSING)
		return MUX_V_IGNORE;
	switch (f->type) {
	case MUX_DATA:
		if (c->shut_in || f->len > c->credit_in)
			return MUX_V_ERROR;
		c->credit_in -= f->len;
		return MUX_V_OK;
	case MUX_WINDOW_UPDATE:
		v = saas__mux_value(f);
		if (v > MUX_WINDOW - c->credit_out)
			return MUX_V_ERROR;
		c->credit_out += v;
		return MUX_V_OK;
	case MUX_SHUT:
		if (c->shut_in)
			return MUX_V_ERROR;
		c->shut_in = true;
		return MUX_V_OK;
	default:
		return MUX_V_ERROR;
	}
}

int saas__mux_track_sent(struct saas__mux_track *t, uint8_t type, uint32_t id, uint32_t len, uint32_t value)
{
	struct saas__mux_conn *c;

	if (type == MUX_HELLO) {
		if (t->hello_out)
			return -1;
		t->hello_out = true;
		return 0;
	}
	if (!t->hello_out)
		return -1;
	if (type == MUX_DNS_QUERY || type == MUX_DNS_ANSWER)
		return type == (t->self == MUX_GUEST ? MUX_DNS_QUERY : MUX_DNS_ANSWER) ? 0 : -1;
	if (id == 0)
		return -1;
	c = saas__mux_conn_find(t, id);
	switch (type) {
	case MUX_OPEN_ADDR:
	case MUX_OPEN_NAME:
		return t->self == MUX_GUEST && !c && conn_add(t, id) ? 0 : -1;
	case MUX_OPENED:
		if (t->self != MUX_SERVER || !c || c->state != MUX_C_OPENING || value > MUX_ST_MAX)
			return -1;
		if (value == MUX_ST_OK)
			c->state = MUX_C_OPEN;
		else
			conn_free(t, c);
		return 0;
	case MUX_CLOSE:
		if (!c || c->state == MUX_C_CLOSING || (c->state == MUX_C_OPENING && t->self == MUX_SERVER))
			return -1;
		c->state = MUX_C_CLOSING;
		return 0;
	default:
		break;
	}
	if (!c || c->state != MUX_C_OPEN)
		return -1;
	switch (type) {
	case MUX_DATA:
		if (c->shut_out || len == 0 || len > MUX_DATA_MAX || len > c->credit_out)
			return -1;
		c->credit_out -= len;
		return 0;
	case MUX_WINDOW_UPDATE:
		if (value == 0 || value > MUX_WINDOW - c->credit_in)
			return -1;
		c->credit_in += value;
		return 0;
	case MUX_SHUT:
		if (c->shut_out)
			return -1;
		c->shut_out = true;
		return 0;
	default:
		return -1;
	}
}

/* ---- DATA received, on its way to the connection's socket ------------------------------------ */

void saas__mux_pending_add(struct saas__mux_pending *p, const uint8_t *data, uint32_t len)
{
	if (p->off) {
		memmove(p->buf, p->buf + p->off, p->len - p->off);
		p->len -= p->off;
		p->off = 0;
	}
	memcpy(p->buf + p->len, data, len);
	p->len += len;
}

int saas__mux_pending_flush(struct saas__mux_pending *p, int fd, uint32_t *credit)
{
	*credit = 0;
	while (p->off < p->len) {
		ssize_t n = send(fd, p->buf + p->off, p->len - p->off, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			return -1;
		}
		p->off += (size_t)n;
		p->taken += (uint32_t)n;
	}
	if (p->off == p->len)
		p->off = p->len = 0;
	if (p->taken && (p->taken >= MUX_WINDOW_BATCH || !p->len)) {
		*credit = p->taken;
		p->taken = 0;
	}
	return 0;
}
