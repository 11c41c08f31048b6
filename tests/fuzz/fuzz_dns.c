/*
 * The egress resolver's DNS messages (lib/driver/libvirt/dns.c), read from
 * hostile bytes: a guest's query and an upstream's answer. Each input is
 * read as a query and, in a copy, as an answer to its own question (when it
 * has one) and to a fixed one.
 *
 * Oracle: nothing is read or written outside the message (the sanitizers);
 * a parsed name has at most DNS_NAME_MAX characters, all lowercase hostname
 * bytes and dots, no empty label; a refusal is the query's header and
 * question with QR set and no records; TTLs handed out never pass the cap,
 * nor do they stay above it in the message.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "driver/libvirt/dns.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TTL_MAX 3600

static void name_ok(const char *name)
{
	size_t len = strlen(name);

	if (len > DNS_NAME_MAX || (len && (name[0] == '.' || name[len - 1] == '.')) || strstr(name, ".."))
		abort();
	for (size_t i = 0; i < len; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') || name[i] == '-' ||
		      name[i] == '_' || name[i] == '.'))
			abort();
}

static int addr_ok(void *ud, const struct saas__dns_addr *a)
{
	(void)ud;
	if (a->ttl > TTL_MAX || (a->family != AF_INET && a->family != AF_INET6))
		abort();
	return 0;
}

static void walk(const uint8_t *data, size_t size, const struct saas__dns_question *q)
{
	uint8_t *copy = malloc(size ? size : 1);

	if (!copy)
		return;
	memcpy(copy, data, size);
	if (saas__dns_answer_walk(copy, size, q, TTL_MAX, addr_ok, NULL) > 64 * 1024)
		abort();
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct saas__dns_question q, fixed;
	uint8_t out[DNS_HEADER + 300];
	size_t n;
	int rc = saas__dns_query_parse(data, size, &q);

	if (rc == 0)
		name_ok(q.name);
	if (q.end > size)
		abort();
	if (rc == 0 || q.end) {
		n = saas__dns_error_answer(data, &q, DNS_RCODE_REFUSED, out, sizeof(out));
		if (n && (n != (q.end ? q.end : DNS_HEADER) || !(out[2] & 0x80) || (out[3] & 0xf) != DNS_RCODE_REFUSED ||
		          out[6] || out[7] || out[8] || out[9] || out[10] || out[11]))
			abort();
	}
	if (rc == 0)
		walk(data, size, &q);
	memset(&fixed, 0, sizeof(fixed));
	strcpy(fixed.name, "www.example.com");
	fixed.qtype = DNS_TYPE_A;
	fixed.qclass = DNS_CLASS_IN;
	walk(data, size, &fixed);
	return 0;
}
