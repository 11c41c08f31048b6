/*
 * Internal: DNS messages as the egress resolver (dns.c) reads and writes
 * them. Everything here parses hostile input (a guest's queries, an
 * upstream's answers): every read is bounded by the message's length, names
 * by DNS_NAME_MAX, compression pointers by DNS_POINTERS_MAX and by pointing
 * strictly backwards. Pure: no sockets, no allocation;
 * tests/unit/test_dns.c and tests/fuzz/fuzz_dns.c drive it.
 */
#ifndef SAAS_DRIVER_LIBVIRT_DNS_H
#define SAAS_DRIVER_LIBVIRT_DNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DNS_HEADER 12
/* A name in text form: 253 characters (RFC 1035's 255 octets on the wire), and a NUL. */
#define DNS_NAME_MAX 253
#define DNS_LABEL_MAX 63
/* Compression pointers followed in one name: a real name needs a handful. */
#define DNS_POINTERS_MAX 32
/* The largest message over TCP (its two-byte length prefix) and what we take over UDP. */
#define DNS_MSG_MAX 65535
#define DNS_UDP_MAX 4096

#define DNS_TYPE_A 1
#define DNS_TYPE_CNAME 5
#define DNS_TYPE_AAAA 28
#define DNS_CLASS_IN 1

#define DNS_RCODE_NOERROR 0
#define DNS_RCODE_FORMERR 1
#define DNS_RCODE_SERVFAIL 2
#define DNS_RCODE_NXDOMAIN 3
#define DNS_RCODE_REFUSED 5

/* A query's one question. */
struct saas__dns_question {
	uint16_t id;
	char name[DNS_NAME_MAX + 1];   /* lowercase, dot-separated, no trailing dot; "" for the root */
	uint16_t qtype, qclass;
	size_t end;                    /* offset just past the question in the message */
};

/*
 * Read a query: a header with QR clear, opcode QUERY, exactly one question,
 * whose name is made of letters, digits, '-' and '_' only (a label holding
 * a dot or a byte a hostname never has is refused: the text form must name
 * exactly what goes upstream). 0, or -1 for anything else (answer FORMERR
 * when q->end is not 0, else drop).
 */
int saas__dns_query_parse(const uint8_t *msg, size_t len, struct saas__dns_question *q);

/*
 * Write into out (cap bytes) the answer to query (its first q->end bytes)
 * carrying rcode and no records: the header's id and RD kept, QR and RA set.
 * Returns its length, or 0 when it does not fit.
 */
size_t saas__dns_error_answer(const uint8_t *query, const struct saas__dns_question *q, int rcode, uint8_t *out,
                              size_t cap);

/* An address of an answer's A or AAAA record. */
struct saas__dns_addr {
	int family;                    /* AF_INET or AF_INET6 */
	uint8_t addr[16];
	uint32_t ttl;
};

typedef int (*saas__dns_addr_fn)(void *ud, const struct saas__dns_addr *a);

/*
 * Read an upstream's answer to q (same question, QR set) in place: every
 * record's TTL above ttl_max is lowered to it (so no guest caches an address
 * longer than its allowed set keeps it), and fn gets each A and AAAA record
 * of the answer section, whatever its owner (the chain of CNAMEs from the
 * name asked). The id is not checked (the caller matched it). Returns the
 * number of addresses, -1 when the message is malformed or answers another
 * question, or what fn returned when it returned non-zero (it stops there).
 */
int saas__dns_answer_walk(uint8_t *msg, size_t len, const struct saas__dns_question *q, uint32_t ttl_max,
                          saas__dns_addr_fn fn, void *ud);

#endif
