/*
 * DNS messages as the egress resolver reads and writes them
 * (lib/driver/libvirt/dns.c): queries, refusals, answers with compression,
 * and every bound (name length, label bytes, pointer loops, truncation).
 */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "driver/libvirt/dns.h"

/* A message under construction. */
struct msg {
	uint8_t b[1024];
	size_t n;
};

static void put(struct msg *m, const void *p, size_t n)
{
	assert_true(m->n + n <= sizeof(m->b));
	memcpy(m->b + m->n, p, n);
	m->n += n;
}

static void put16(struct msg *m, unsigned int v)
{
	uint8_t b[2] = { (uint8_t)(v >> 8), (uint8_t)v };

	put(m, b, 2);
}

static void put32(struct msg *m, uint32_t v)
{
	put16(m, v >> 16);
	put16(m, v & 0xffff);
}

/* "www.example.com" as labels. */
static void put_name(struct msg *m, const char *name)
{
	while (*name) {
		size_t n = strcspn(name, ".");
		uint8_t len = (uint8_t)n;
		put(m, &len, 1);
		put(m, name, n);
		name += n + (name[n] == '.');
	}
	put(m, "", 1);
}

static void header(struct msg *m, unsigned int id, unsigned int flags, unsigned int qd, unsigned int an)
{
	m->n = 0;
	put16(m, id);
	put16(m, flags);
	put16(m, qd);
	put16(m, an);
	put16(m, 0);
	put16(m, 0);
}

static void query(struct msg *m, const char *name, unsigned int type)
{
	header(m, 0x1234, 0x0100, 1, 0);
	put_name(m, name);
	put16(m, type);
	put16(m, DNS_CLASS_IN);
}

static void test_query_parse(void **state)
{
	struct saas__dns_question q;
	struct msg m;

	(void)state;
	query(&m, "WWW.Example.COM", DNS_TYPE_AAAA);
	assert_int_equal(saas__dns_query_parse(m.b, m.n, &q), 0);
	assert_int_equal(q.id, 0x1234);
	assert_string_equal(q.name, "www.example.com");
	assert_int_equal(q.qtype, DNS_TYPE_AAAA);
	assert_int_equal(q.qclass, DNS_CLASS_IN);
	assert_int_equal(q.end, m.n);

	/* Truncated anywhere: refused, and never read past the end. */
	for (size_t n = 0; n < m.n; n++)
		assert_int_equal(saas__dns_query_parse(m.b, n, &q), -1);

	/* An answer is never answered. */
	query(&m, "example.com", DNS_TYPE_A);
	m.b[2] |= 0x80;
	assert_int_equal(saas__dns_query_parse(m.b, m.n, &q), -1);
	assert_int_equal(q.end, 0);

	/* Two questions, or another opcode: FORMERR, quoting the first question. */
	query(&m, "example.com", DNS_TYPE_A);
	m.b[5] = 2;
	assert_int_equal(saas__dns_query_parse(m.b, m.n, &q), -1);
	assert_int_equal(q.end, 0);
	query(&m, "example.com", DNS_TYPE_A);
	m.b[2] |= 0x10; /* opcode 2 */
	assert_int_equal(saas__dns_query_parse(m.b, m.n, &q), -1);
	assert_int_equal(q.end, m.n);
}

static void test_query_names(void **state)
{
	struct saas__dns_question q;
	char label[64], name[300];
	struct msg m;

	(void)state;
	/* A dot inside a label would read as another name: refused, as is any byte no hostname has. */
	header(&m, 1, 0, 1, 0);
	put(&m, "\x0b" "evil.allowd" "\x03" "com" "\x00", 17);
	put16(&m, DNS_TYPE_A);
	put16(&m, DNS_CLASS_IN);
	assert_int_equal(saas__dns_query_parse(m.b, m.n, &q), -1);
	assert_int_not_equal(q.end, 0);
	query(&m, "a b.example.com", DNS_TYPE_A);
	assert_int_equal(saas__dns_query_parse(m.b, m.n, &q), -1);
	query(&m, "_dmarc.my-host.example.com", DNS_TYPE_A);
	assert_int_equal(saas__dns_query_parse(m.b, m.n, &q), 0);
	assert_string_equal(q.name, "_dmarc.my-host.example.com");

	/* The root. */
	query(&m, "", DNS_TYPE_A);
	assert_int_equal(saas__dns_query_parse(m.b, m.n, &q), 0);
	assert_string_equal(q.name, "");

	/* 63 octets a label, 253 characters a name: at the bound and one past it. */
	memset(label, 'a', 63);
	label[63] = '\0';
	snprintf(name, sizeof(name), "%s.%s.%s.%.61s", label, label, label, label);
	assert_int_equal(strlen(name), DNS_NAME_MAX);
	query(&m, name, DNS_TYPE_A);
	assert_int_equal(saas__dns_query_parse(m.b, m.n, &q), 0);
	assert_string_equal(q.name, name);
	snprintf(name, sizeof(name), "%s.%s.%s.%.62s", label, label, label, label);
	query(&m, name, DNS_TYPE_A);
	assert_int_equal(saas__dns_query_parse(m.b, m.n, &q), -1);
	header(&m, 1, 0, 1, 0);
	put(&m, "\x40", 1); /* a label type of 0x40 */
	put(&m, label, 63);
	put(&m, "\x00\x00\x01\x00\x01", 5);
	assert_int_equal(saas__dns_query_parse(m.b, m.n, &q), -1);
}

static void test_pointer_loops(void **state)
{
	struct saas__dns_question q;
	struct msg m;

	(void)state;
	/* A pointer to itself, and one forward: both refused. */
	header(&m, 1, 0, 1, 0);
	put(&m, "\xc0\x0c", 2);
	put16(&m, DNS_TYPE_A);
	put16(&m, DNS_CLASS_IN);
	assert_int_equal(saas__dns_query_parse(m.b, m.n, &q), -1);
	header(&m, 1, 0, 1, 0);
	put(&m, "\xc0\x10", 2);
	put16(&m, DNS_TYPE_A);
	put16(&m, DNS_CLASS_IN);
	assert_int_equal(saas__dns_query_parse(m.b, m.n, &q), -1);
	/* Backwards is followed, whatever it lands on: the id's first byte 0 reads as the root. */
	header(&m, 1, 0, 1, 0);
	put(&m, "\xc0\x00", 2);
	put16(&m, DNS_TYPE_A);
	put16(&m, DNS_CLASS_IN);
	assert_int_equal(saas__dns_query_parse(m.b, m.n, &q), 0);
	assert_string_equal(q.name, "");
	assert_int_equal(q.end, m.n);
}

static void test_error_answer(void **state)
{
	struct saas__dns_question q;
	uint8_t out[512];
	struct msg m;
	size_t n;

	(void)state;
	query(&m, "exfil.example.net", 16);
	assert_int_equal(saas__dns_query_parse(m.b, m.n, &q), 0);
	n = saas__dns_error_answer(m.b, &q, DNS_RCODE_REFUSED, out, sizeof(out));
	assert_int_equal(n, m.n);
	assert_int_equal(out[0], 0x12);
	assert_int_equal(out[1], 0x34);
	assert_int_equal(out[2], 0x81); /* QR, RD kept */
	assert_int_equal(out[3], 0x80 | DNS_RCODE_REFUSED);
	assert_int_equal(out[5], 1);
	assert_int_equal(out[7] | out[9] | out[11], 0);
	assert_memory_equal(out + DNS_HEADER, m.b + DNS_HEADER, m.n - DNS_HEADER);
	/* Too small a buffer: nothing. */
	assert_int_equal(saas__dns_error_answer(m.b, &q, DNS_RCODE_REFUSED, out, m.n - 1), 0);
}

struct seen {
	int n;
	char addrs[8][64];
	uint32_t ttls[8];
};

static int seen_addr(void *ud, const struct saas__dns_addr *a)
{
	struct seen *s = ud;

	inet_ntop(a->family, a->addr, s->addrs[s->n], sizeof(s->addrs[0]));
	s->ttls[s->n++] = a->ttl;
	return 0;
}

/* The answer to "www.example.com A": a CNAME to cdn.example.net (compressed), two A, one AAAA in additional. */
static void answer(struct msg *m, uint32_t ttl)
{
	header(m, 0x1234, 0x8180, 1, 3);
	m->b[11] = 1; /* one additional record */
	put_name(m, "www.example.com");
	put16(m, DNS_TYPE_A);
	put16(m, DNS_CLASS_IN);
	put(m, "\xc0\x0c", 2);
	put16(m, DNS_TYPE_CNAME);
	put16(m, DNS_CLASS_IN);
	put32(m, 300);
	put16(m, 9);
	put(m, "\x03" "cdn" "\xc0\x10", 6); /* cdn.example.com */
	put(m, "\x00\x00\x00", 3);          /* padding: rdlength says 9 */
	put(m, "\xc0\x2d", 2);              /* cdn...: the CNAME's target */
	put16(m, DNS_TYPE_A);
	put16(m, DNS_CLASS_IN);
	put32(m, ttl);
	put16(m, 4);
	put(m, "\xc6\x33\x64\x07", 4);      /* 198.51.100.7 */
	put(m, "\xc0\x2d", 2);
	put16(m, DNS_TYPE_A);
	put16(m, DNS_CLASS_IN);
	put32(m, 0x80000000u);              /* "negative": zero */
	put16(m, 4);
	put(m, "\xc6\x33\x64\x08", 4);
	put(m, "\xc0\x0c", 2);
	put16(m, DNS_TYPE_AAAA);
	put16(m, DNS_CLASS_IN);
	put32(m, 60);
	put16(m, 16);
	put(m, "\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\x01", 16);
}

static void test_answer_walk(void **state)
{
	struct saas__dns_question q;
	struct msg m;
	struct seen s;

	(void)state;
	query(&m, "www.example.com", DNS_TYPE_A);
	assert_int_equal(saas__dns_query_parse(m.b, m.n, &q), 0);
	answer(&m, 86400);
	memset(&s, 0, sizeof(s));
	/* Only the answer section's addresses, whatever their owner; TTLs capped, in the message too. */
	assert_int_equal(saas__dns_answer_walk(m.b, m.n, &q, 3600, seen_addr, &s), 2);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.addrs[0], "198.51.100.7");
	assert_int_equal(s.ttls[0], 3600);
	assert_string_equal(s.addrs[1], "198.51.100.8");
	assert_int_equal(s.ttls[1], 0);
	memset(&s, 0, sizeof(s));
	assert_int_equal(saas__dns_answer_walk(m.b, m.n, &q, 3600, seen_addr, &s), 2);
	assert_int_equal(s.ttls[0], 3600);

	/* Truncated anywhere: malformed, and nothing read past the end. */
	answer(&m, 100);
	for (size_t n = 0; n < m.n; n++) {
		struct msg copy = m;
		assert_int_equal(saas__dns_answer_walk(copy.b, n, &q, 3600, NULL, NULL), -1);
	}

	/* The answer to another question feeds nothing. */
	query(&m, "www.example.org", DNS_TYPE_A);
	assert_int_equal(saas__dns_query_parse(m.b, m.n, &q), 0);
	answer(&m, 100);
	assert_int_equal(saas__dns_answer_walk(m.b, m.n, &q, 3600, seen_addr, &s), -1);
	/* Nor a query. */
	query(&m, "www.example.com", DNS_TYPE_A);
	assert_int_equal(saas__dns_query_parse(m.b, m.n, &q), 0);
	assert_int_equal(saas__dns_answer_walk(m.b, m.n, &q, 3600, seen_addr, &s), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_query_parse),
		cmocka_unit_test(test_query_names),
		cmocka_unit_test(test_pointer_loops),
		cmocka_unit_test(test_error_answer),
		cmocka_unit_test(test_answer_walk),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
