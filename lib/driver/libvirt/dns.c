/*
 * DNS messages for the egress resolver (resolver.c): reading a guest's
 * query, writing a refusal, walking an upstream's answer. dns.h states the
 * bounds; each read below checks its own.
 */
#include <string.h>
#include <sys/socket.h>

#include "driver/libvirt/dns.h"

#define FLAG_QR 0x8000
#define FLAG_OPCODE 0x7800
#define FLAG_RD 0x0100
#define FLAG_RA 0x0080

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

static bool host_char(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/*
 * Read the name at *off. With text (DNS_NAME_MAX + 1 bytes), write it
 * lowercased and fail on a byte a hostname never has; without, only walk
 * it. *off moves past the name where it starts (not where a pointer leads).
 * Pointers must go strictly backwards, each before the last, so a loop is
 * impossible; DNS_POINTERS_MAX bounds the work anyway.
 */
static int read_name(const uint8_t *msg, size_t len, size_t *off, char *text)
{
	size_t pos = *off, out = 0, limit = *off, wire = 0;
	unsigned int hops = 0;
	bool jumped = false;

	for (;;) {
		uint8_t l;
		if (pos >= len)
			return -1;
		l = msg[pos];
		if ((l & 0xc0) == 0xc0) {
			size_t to;
			if (pos + 1 >= len || ++hops > DNS_POINTERS_MAX)
				return -1;
			to = (size_t)(l & 0x3f) << 8 | msg[pos + 1];
			if (to >= limit)
				return -1;
			if (!jumped)
				*off = pos + 2;
			jumped = true;
			limit = to;
			pos = to;
			continue;
		}
		if (l & 0xc0)
			return -1; /* 0x40 and 0x80: extended label types, never used */
		if (l == 0)
			break;
		/* The wire form's 255 octets: the labels, their length bytes and the root's. */
		wire += 1u + l;
		if (pos + 1 + l > len || wire + 1 > DNS_NAME_MAX + 2)
			return -1;
		if (text) {
			if (out && out + 1 > DNS_NAME_MAX)
				return -1;
			if (out)
				text[out++] = '.';
			for (size_t i = 0; i < l; i++) {
				uint8_t c = msg[pos + 1 + i];
				if (c >= 'A' && c <= 'Z')
					c = (uint8_t)(c - 'A' + 'a');
				if (!host_char(c) || out + 1 > DNS_NAME_MAX)
					return -1;
				text[out++] = (char)c;
			}
		}
		pos += 1u + l;
	}
	if (text)
		text[out] = '\0';
	if (!jumped)
		*off = pos + 1;
	return 0;
}

int saas__dns_query_parse(const uint8_t *msg, size_t len, struct saas__dns_question *q)
{
	uint16_t flags;
	size_t off = DNS_HEADER;

	memset(q, 0, sizeof(*q));
	if (len < DNS_HEADER)
		return -1;
	q->id = get16(msg);
	flags = get16(msg + 2);
	if (flags & FLAG_QR)
		return -1; /* an answer sent to us: never answer an answer */
	if ((flags & FLAG_OPCODE) || get16(msg + 4) != 1 || get16(msg + 6) || get16(msg + 8))
		goto formerr;
	if (read_name(msg, len, &off, q->name) < 0 || off + 4 > len)
		goto formerr;
	q->qtype = get16(msg + off);
	q->qclass = get16(msg + off + 2);
	q->end = off + 4;
	return 0;
formerr:
	/* Answerable only when its question can be quoted back whole. */
	q->end = 0;
	off = DNS_HEADER;
	if (len >= DNS_HEADER && get16(msg + 4) == 1 && read_name(msg, len, &off, NULL) == 0 && off + 4 <= len)
		q->end = off + 4;
	return -1;
}

size_t saas__dns_error_answer(const uint8_t *query, const struct saas__dns_question *q, int rcode, uint8_t *out,
                              size_t cap)
{
	size_t n = q->end ? q->end : DNS_HEADER;

	if (n > cap)
		return 0;
	memcpy(out, query, n);
	put16(out + 2, (uint16_t)(FLAG_QR | (get16(query + 2) & FLAG_RD) | FLAG_RA | (rcode & 0xf)));
	put16(out + 4, q->end ? 1 : 0);
	put16(out + 6, 0);
	put16(out + 8, 0);
	put16(out + 10, 0);
	return n;
}

/* Lower the TTL of the record whose fixed part starts at p (type, class, ttl, rdlength). */
static uint32_t cap_ttl(uint8_t *p, uint32_t ttl_max)
{
	uint32_t ttl = get32(p + 4);

	/* RFC 2181: a TTL with the top bit set means zero. */
	if (ttl > 0x7fffffffu)
		ttl = 0;
	if (ttl > ttl_max)
		ttl = ttl_max;
	put32(p + 4, ttl);
	return ttl;
}

int saas__dns_answer_walk(uint8_t *msg, size_t len, const struct saas__dns_question *q, uint32_t ttl_max,
                          saas__dns_addr_fn fn, void *ud)
{
	struct saas__dns_question got;
	size_t off = DNS_HEADER;
	unsigned int an, records;
	int found = 0;

	if (len < DNS_HEADER || !(get16(msg + 2) & FLAG_QR) || get16(msg + 4) != 1)
		return -1;
	/* The question must be the one asked: an answer to another name feeds nothing. */
	if (read_name(msg, len, &off, got.name) < 0 || off + 4 > len || strcmp(got.name, q->name) != 0 ||
	    get16(msg + off) != q->qtype || get16(msg + off + 2) != q->qclass)
		return -1;
	off += 4;
	an = get16(msg + 6);
	records = an + get16(msg + 8) + get16(msg + 10);
	for (unsigned int i = 0; i < records; i++) {
		uint16_t type, klass, rdlen;
		uint32_t ttl;
		if (read_name(msg, len, &off, NULL) < 0 || off + 10 > len)
			return -1;
		type = get16(msg + off);
		klass = get16(msg + off + 2);
		rdlen = get16(msg + off + 8);
		if (off + 10 + rdlen > len)
			return -1;
		/* EDNS's OPT pseudo-record keeps its flags in the TTL field. */
		ttl = type == 41 ? 0 : cap_ttl(msg + off, ttl_max);
		if (i < an && klass == DNS_CLASS_IN &&
		    ((type == DNS_TYPE_A && rdlen == 4) || (type == DNS_TYPE_AAAA && rdlen == 16))) {
			struct saas__dns_addr a;
			int rc;
			memset(&a, 0, sizeof(a));
			a.family = type == DNS_TYPE_A ? AF_INET : AF_INET6;
			memcpy(a.addr, msg + off + 10, rdlen);
			a.ttl = ttl;
			if (fn && (rc = fn(ud, &a)) != 0)
				return rc;
			found++;
		}
		off += 10u + rdlen;
	}
	return found;
}
