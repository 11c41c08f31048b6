/*
 * Client addresses behind trusted proxies (server/forwarded.c): the networks
 * of --trusted-proxies, and the reading of X-Forwarded-For and Forwarded
 * from the right; and /readyz's verdict (server/api/account.c) from what its
 * probe found, a failing store included.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>

#include "api/api.h"
#include "forwarded.h"

static struct aas_trust trust;

static int setup(void **state)
{
	char err[160];

	(void)state;
	return aas_trust_parse(&trust, "10.0.0.0/8, 192.168.0.0/16,2001:db8:ffff::/48", err, sizeof(err));
}

static struct sockaddr_storage sa(const char *text)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (strchr(text, ':')) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
		in6->sin6_family = AF_INET6;
		assert_int_equal(inet_pton(AF_INET6, text, &in6->sin6_addr), 1);
	} else {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;
		in->sin_family = AF_INET;
		assert_int_equal(inet_pton(AF_INET, text, &in->sin_addr), 1);
	}
	return ss;
}

/* The address `from` a peer with these header lines gives, as text; `kind` is what it took. */
static const char *client(int header, const char *peer, const char *const *lines, size_t n,
                          enum aas_forwarded_from *kind)
{
	static char text[INET6_ADDRSTRLEN];
	struct sockaddr_storage p = sa(peer), out;
	const char *why;

	*kind = aas_forwarded_client(&out, (const struct sockaddr *)&p, &trust, header, lines, n, &why);
	assert_true((*kind == AAS_FROM_FALLBACK) == (why != NULL));
	text[0] = '\0';
	if (out.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&out)->sin_addr, text, sizeof(text));
	else if (out.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&out)->sin6_addr, text, sizeof(text));
	return text;
}

/* One line of header `header` from `peer`: the client it names, checking what it took. */
#define EXPECT(header, peer, line, want, want_kind)                                                                  \
	do {                                                                                                         \
		const char *l_[] = { line };                                                                         \
		enum aas_forwarded_from k_;                                                                          \
		assert_string_equal(client(header, peer, l_, 1, &k_), want);                                         \
		assert_int_equal(k_, want_kind);                                                                     \
	} while (0)
#define XFF(line, want, kind) EXPECT(AAS_FORWARDED_XFF, "10.0.0.1", line, want, kind)
#define FWD(line, want, kind) EXPECT(AAS_FORWARDED_RFC7239, "10.0.0.1", line, want, kind)

static void test_trust_parse(void **state)
{
	struct aas_trust t;
	char err[160], many[64 * 16 + 16] = "";
	struct sockaddr_storage a;

	(void)state;
	assert_int_equal(aas_trust_parse(&t, "127.0.0.1", err, sizeof(err)), 0);
	assert_int_equal(t.n, 1);
	a = sa("127.0.0.1");
	assert_true(aas_trust_has(&t, (struct sockaddr *)&a));
	a = sa("127.0.0.2");
	assert_false(aas_trust_has(&t, (struct sockaddr *)&a));
	/* IPv4-mapped peers (a dual-stack socket's) are their IPv4 address. */
	a = sa("::ffff:127.0.0.1");
	assert_true(aas_trust_has(&t, (struct sockaddr *)&a));
	assert_int_equal(aas_trust_parse(&t, "0.0.0.0/0", err, sizeof(err)), 0);
	a = sa("203.0.113.9");
	assert_true(aas_trust_has(&t, (struct sockaddr *)&a));
	a = sa("2001:db8::1");
	assert_false(aas_trust_has(&t, (struct sockaddr *)&a));
	assert_int_equal(aas_trust_parse(&t, "2001:db8::/32", err, sizeof(err)), 0);
	assert_true(aas_trust_has(&t, (struct sockaddr *)&a));
	a = sa("10.1.2.3");
	assert_true(aas_trust_has(&trust, (struct sockaddr *)&a));
	a = sa("10.1.2.3");
	assert_false(aas_trust_has(NULL, (struct sockaddr *)&a));
	assert_false(aas_trust_has(&trust, NULL));
	/* Refused, with a reason. */
	static const char *const bad[] = {
		"", ",", "10.0.0.0/8,", "10.0.0.0/33", "10.0.0.1/8", "10.0.0.0/", "10.0.0.0/x", "10.0.0.0/8x",
		"2001:db8::/129", "2001:db8::1/64", "example.com", "10.0.0", "10.0.0.0/-1", "fe80::1%eth0",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (aas_trust_parse(&t, bad[i], err, sizeof(err)) == 0)
			fail_msg("accepted \"%s\"", bad[i]);
		assert_true(err[0] != '\0');
	}
	/* At most AAS_TRUSTED_PROXIES_MAX networks. */
	for (int i = 0; i < AAS_TRUSTED_PROXIES_MAX; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "%s10.0.%d.0/24", i ? "," : "", i);
	assert_int_equal(aas_trust_parse(&t, many, err, sizeof(err)), 0);
	assert_int_equal(t.n, AAS_TRUSTED_PROXIES_MAX);
	strcat(many, ",10.1.0.0/24");
	assert_int_equal(aas_trust_parse(&t, many, err, sizeof(err)), -1);
}

static void test_xff(void **state)
{
	(void)state;
	/* IPv4, with a port, spaces around. */
	XFF("203.0.113.5", "203.0.113.5", AAS_FROM_HEADER);
	XFF("  203.0.113.5:4711\t", "203.0.113.5", AAS_FROM_HEADER);
	/* IPv6 bare and bracketed, with a port. */
	XFF("2001:db8:1:2::5", "2001:db8:1:2::5", AAS_FROM_HEADER);
	XFF("[2001:db8:1:2::6]:443", "2001:db8:1:2::6", AAS_FROM_HEADER);
	XFF("[2001:db8:1:2::6]", "2001:db8:1:2::6", AAS_FROM_HEADER);
	/* The first untrusted from the right: what is left of it is the client's to write. */
	XFF("6.6.6.6, 203.0.113.5, 192.168.1.1, 10.1.1.1", "203.0.113.5", AAS_FROM_HEADER);
	XFF("garbage, 203.0.113.5", "203.0.113.5", AAS_FROM_HEADER);
	XFF("\"quoted, 203.0.113.5", "203.0.113.5", AAS_FROM_HEADER);
	/* Trusted IPv6 hops skipped too. */
	XFF("203.0.113.5, 2001:db8:ffff:1::1", "203.0.113.5", AAS_FROM_HEADER);
	/* Nothing usable where it is read: the peer. */
	XFF("", "10.0.0.1", AAS_FROM_FALLBACK);
	XFF("garbage", "10.0.0.1", AAS_FROM_FALLBACK);
	XFF("203.0.113.5, garbage", "10.0.0.1", AAS_FROM_FALLBACK);
	XFF("203.0.113.5,", "10.0.0.1", AAS_FROM_FALLBACK);
	XFF("unknown", "10.0.0.1", AAS_FROM_FALLBACK);
	XFF("203.0.113.5:99999", "10.0.0.1", AAS_FROM_FALLBACK);
	XFF("203.0.113.5:", "10.0.0.1", AAS_FROM_FALLBACK);
	XFF("[2001:db8::1", "10.0.0.1", AAS_FROM_FALLBACK);
	XFF("[2001:db8::1]x", "10.0.0.1", AAS_FROM_FALLBACK);
	XFF("[203.0.113.5]", "10.0.0.1", AAS_FROM_FALLBACK);
	XFF("fe80::1%eth0", "10.0.0.1", AAS_FROM_FALLBACK);
	XFF("203.0.113", "10.0.0.1", AAS_FROM_FALLBACK);
	XFF("203.0.113.5 6", "10.0.0.1", AAS_FROM_FALLBACK);
	XFF("example.com", "10.0.0.1", AAS_FROM_FALLBACK);
	/* All of it trusted: the peer. */
	XFF("10.2.2.2, 192.168.9.9", "10.0.0.1", AAS_FROM_FALLBACK);
}

static void test_spoofed(void **state)
{
	(void)state;
	/* From a peer that is no trusted proxy the header is not read, whatever it says. */
	EXPECT(AAS_FORWARDED_XFF, "198.51.100.7", "203.0.113.5", "198.51.100.7", AAS_FROM_PEER);
	EXPECT(AAS_FORWARDED_XFF, "198.51.100.7", "10.0.0.9", "198.51.100.7", AAS_FROM_PEER);
	EXPECT(AAS_FORWARDED_RFC7239, "2001:db8:1::1", "for=203.0.113.5", "2001:db8:1::1", AAS_FROM_PEER);
	/* None configured: nobody is trusted. */
	{
		struct aas_trust none = { 0 };
		struct sockaddr_storage p = sa("10.0.0.1"), out;
		const char *l[] = { "203.0.113.5" };
		assert_int_equal(aas_forwarded_client(&out, (struct sockaddr *)&p, &none, AAS_FORWARDED_XFF, l, 1, NULL),
		                 AAS_FROM_PEER);
		assert_memory_equal(&out, &p, sizeof(struct sockaddr_in));
	}
	/* No peer (a UNIX socket): AF_UNSPEC. */
	{
		struct sockaddr_storage out;
		const char *l[] = { "203.0.113.5" };
		assert_int_equal(aas_forwarded_client(&out, NULL, &trust, AAS_FORWARDED_XFF, l, 1, NULL), AAS_FROM_PEER);
		assert_int_equal(out.ss_family, AF_UNSPEC);
	}
	/* Behind the proxy, the header the proxies do not write is never read: a client's Forwarded is not. */
	{
		enum aas_forwarded_from k;
		const char *l[] = { "for=6.6.6.6" };
		assert_string_equal(client(AAS_FORWARDED_XFF, "10.0.0.1", l, 1, &k), "10.0.0.1");
		assert_int_equal(k, AAS_FROM_FALLBACK);
	}
}

static void test_chains(void **state)
{
	enum aas_forwarded_from k;
	char line[4096];

	(void)state;
	/* Lines as HAProxy adds them (one of its own, last), read as one list. */
	{
		const char *l[] = { "6.6.6.6", "203.0.113.5", "10.1.1.1" };
		assert_string_equal(client(AAS_FORWARDED_XFF, "192.168.0.1", l, 3, &k), "203.0.113.5");
		assert_int_equal(k, AAS_FROM_HEADER);
	}
	{
		const char *l[] = { "203.0.113.5, 10.3.3.3", "192.168.4.4", "10.1.1.1" };
		assert_string_equal(client(AAS_FORWARDED_XFF, "10.0.0.1", l, 3, &k), "203.0.113.5");
	}
	{
		const char *l[] = { "garbage", "10.1.1.1" };
		assert_string_equal(client(AAS_FORWARDED_XFF, "10.0.0.1", l, 2, &k), "10.0.0.1");
		assert_int_equal(k, AAS_FROM_FALLBACK);
	}
	/* AAS_FORWARDED_HOPS_MAX elements are read, and no more. */
	snprintf(line, sizeof(line), "203.0.113.5");
	for (int i = 0; i < AAS_FORWARDED_HOPS_MAX - 1; i++)
		snprintf(line + strlen(line), sizeof(line) - strlen(line), ", 10.0.0.%d", i + 2);
	XFF(line, "203.0.113.5", AAS_FROM_HEADER);
	snprintf(line, sizeof(line), "203.0.113.5");
	for (int i = 0; i < AAS_FORWARDED_HOPS_MAX; i++)
		snprintf(line + strlen(line), sizeof(line) - strlen(line), ", 10.0.0.%d", i + 2);
	XFF(line, "10.0.0.1", AAS_FROM_FALLBACK);
	/* An element past AAS_FORWARDED_ELEMENT_MAX is none. */
	memset(line, ' ', sizeof(line));
	strcpy(line + AAS_FORWARDED_ELEMENT_MAX, "203.0.113.5");
	XFF(line, "203.0.113.5", AAS_FROM_HEADER); /* spaces trimmed first: the address is short */
	memset(line, '1', AAS_FORWARDED_ELEMENT_MAX + 1);
	line[AAS_FORWARDED_ELEMENT_MAX + 1] = '\0';
	XFF(line, "10.0.0.1", AAS_FROM_FALLBACK);
	/* A long spoofed left part costs nothing: it is never reached. */
	memset(line, 'x', 3000);
	strcpy(line + 3000, ", 203.0.113.5");
	XFF(line, "203.0.113.5", AAS_FROM_HEADER);
	/* More bytes than AAS_FORWARDED_BYTES_MAX in trusted hops (fewer than the hops' bound): the peer. */
	{
		char pad[300];
		const char *l[AAS_FORWARDED_HOPS_MAX];

		memset(pad, ' ', sizeof(pad));
		memcpy(pad, "10.9.9.9", 8);
		pad[sizeof(pad) - 1] = '\0';
		for (size_t i = 0; i < AAS_FORWARDED_HOPS_MAX; i++)
			l[i] = pad;
		l[0] = "203.0.113.5";
		_Static_assert(12 * sizeof(pad) < AAS_FORWARDED_BYTES_MAX && 15 * sizeof(pad) > AAS_FORWARDED_BYTES_MAX,
		               "the lines straddle the bound");
		assert_string_equal(client(AAS_FORWARDED_XFF, "10.0.0.1", l, 12, &k), "203.0.113.5");
		assert_int_equal(k, AAS_FROM_HEADER);
		assert_string_equal(client(AAS_FORWARDED_XFF, "10.0.0.1", l, 15, &k), "10.0.0.1");
		assert_int_equal(k, AAS_FROM_FALLBACK);
	}
}

static void test_rfc7239(void **state)
{
	(void)state;
	FWD("for=203.0.113.5", "203.0.113.5", AAS_FROM_HEADER);
	FWD("for=192.0.2.60;proto=http;by=203.0.113.43", "192.0.2.60", AAS_FROM_HEADER);
	FWD("proto=https; For=\"192.0.2.60:8080\"", "192.0.2.60", AAS_FROM_HEADER);
	FWD("for=\"[2001:db8:cafe::17]:4711\"", "2001:db8:cafe::17", AAS_FROM_HEADER);
	FWD("for=\"[2001:db8:cafe::17]:_port\"", "2001:db8:cafe::17", AAS_FROM_HEADER);
	FWD("for=\"[2001:db8:cafe::17]\"", "2001:db8:cafe::17", AAS_FROM_HEADER);
	FWD("for=192.0.2.43, for=203.0.113.5, for=10.1.1.1;by=10.0.0.1", "203.0.113.5", AAS_FROM_HEADER);
	/* A comma in a quoted value splits nothing. */
	FWD("for=\"[2001:db8::1]\";host=\"a,b\", for=10.1.1.1", "2001:db8::1", AAS_FROM_HEADER);
	FWD("for=\"oops, for=203.0.113.5", "203.0.113.5", AAS_FROM_HEADER);
	/* Not addresses, not Forwarded: the peer. */
	FWD("for=unknown", "10.0.0.1", AAS_FROM_FALLBACK);
	FWD("for=_gazonk", "10.0.0.1", AAS_FROM_FALLBACK);
	FWD("for=2001:db8::1", "10.0.0.1", AAS_FROM_FALLBACK);
	FWD("for=\"2001:db8::1\"", "10.0.0.1", AAS_FROM_FALLBACK);
	FWD("for=203.0.113.5;for=198.51.100.1", "10.0.0.1", AAS_FROM_FALLBACK);
	FWD("proto=http", "10.0.0.1", AAS_FROM_FALLBACK);
	FWD("for=\"203.0.113.5", "10.0.0.1", AAS_FROM_FALLBACK);
	FWD("for=\"203.0.\\113.5\"", "10.0.0.1", AAS_FROM_FALLBACK);
	FWD("for=", "10.0.0.1", AAS_FROM_FALLBACK);
	FWD("=203.0.113.5", "10.0.0.1", AAS_FROM_FALLBACK);
	FWD("for=203.0.113.5 x", "10.0.0.1", AAS_FROM_FALLBACK);
	FWD("203.0.113.5", "10.0.0.1", AAS_FROM_FALLBACK);
	FWD("for=203.0.113.5:80", "10.0.0.1", AAS_FROM_FALLBACK); /* a port needs quotes */
}

/* The /64 grouping of aas_address_key: two clients of one /64 share a bucket, another /64 has its own. */
static void test_ipv6_grouping(void **state)
{
	unsigned char k1[16], k2[16], k3[16], k4[16];
	struct sockaddr_storage out;
	const char *a[] = { "2001:db8:1:2::5" }, *b[] = { "[2001:db8:1:2:ffff::9]:80" }, *c[] = { "2001:db8:1:3::5" },
		   *d[] = { "203.0.113.5" };
	struct sockaddr_storage p = sa("2001:db8:ffff::1");

	(void)state;
	aas_forwarded_client(&out, (struct sockaddr *)&p, &trust, AAS_FORWARDED_XFF, a, 1, NULL);
	aas_address_key((struct sockaddr *)&out, k1, NULL, 0);
	aas_forwarded_client(&out, (struct sockaddr *)&p, &trust, AAS_FORWARDED_XFF, b, 1, NULL);
	aas_address_key((struct sockaddr *)&out, k2, NULL, 0);
	aas_forwarded_client(&out, (struct sockaddr *)&p, &trust, AAS_FORWARDED_XFF, c, 1, NULL);
	aas_address_key((struct sockaddr *)&out, k3, NULL, 0);
	aas_forwarded_client(&out, (struct sockaddr *)&p, &trust, AAS_FORWARDED_XFF, d, 1, NULL);
	aas_address_key((struct sockaddr *)&out, k4, NULL, 0);
	assert_memory_equal(k1, k2, 16);
	assert_memory_not_equal(k1, k3, 16);
	assert_memory_not_equal(k1, k4, 16);
	assert_int_equal(k4[12], 203);
}

static saas_host host_at(int state, int64_t last_seen_ms)
{
	saas_host h;

	memset(&h, 0, sizeof(h));
	h.state = state;
	h.last_seen_ms = last_seen_ms;
	return h;
}

/* What a check says; its JSON body names it. */
static void expect_ready(bool want, const char *store, const char *vm, int rc, int64_t took,
                         const saas_host_list *hosts)
{
	const int64_t now = 1800000000000;
	json_t *body = NULL;
	bool ready = aas_readiness(&body, rc, took, hosts, now, 5000);

	assert_non_null(body);
	assert_int_equal(ready, want);
	assert_string_equal(json_string_value(json_object_get(body, "status")), want ? "ready" : "not_ready");
	assert_string_equal(json_string_value(json_object_get(json_object_get(body, "checks"), "store")), store);
	assert_string_equal(json_string_value(json_object_get(json_object_get(body, "checks"), "vm_hosts")), vm);
	json_decref(body);
}

static void test_readiness(void **state)
{
	const int64_t now = 1800000000000;
	saas_host lost = host_at(SAAS_HOST_LOST, now - 1000), stale = host_at(SAAS_HOST_ACTIVE, now - 60000),
		  never = host_at(SAAS_HOST_ACTIVE, 0), fresh = host_at(SAAS_HOST_DRAINING, now - 2000);
	saas_host *down[] = { &lost, &stale, &never }, *some[] = { &lost, &fresh };
	saas_host_list none = { 0, NULL }, all_down = { 3, down }, one_up = { 2, some };

	(void)state;
	/* The local driver alone: ready while the store answers. */
	expect_ready(true, "ok", "local", SAAS_OK, 3, &none);
	/* A failing store: not ready, and nothing known of the hosts. */
	expect_ready(false, "failed", "unknown", SAAS_ESTORE, 3, NULL);
	expect_ready(false, "failed", "unknown", SAAS_ESTORE, 3, &one_up);
	/* A store that answered too late. */
	expect_ready(false, "slow", "local", SAAS_OK, AAS_READY_STORE_MS + 1, &none);
	/* Hosts: one reached within three heartbeats and not lost is enough. */
	expect_ready(false, "ok", "unreachable", SAAS_OK, 3, &all_down);
	expect_ready(true, "ok", "ok", SAAS_OK, 3, &one_up);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trust_parse),
		cmocka_unit_test(test_xff),
		cmocka_unit_test(test_spoofed),
		cmocka_unit_test(test_chains),
		cmocka_unit_test(test_rfc7239),
		cmocka_unit_test(test_ipv6_grouping),
		cmocka_unit_test(test_readiness),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
