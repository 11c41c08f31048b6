/*
 * Client addresses behind trusted proxies (forwarded.c): the set of proxy
 * networks (--trusted-proxies), and the pure reader of X-Forwarded-For and
 * RFC 7239 Forwarded that the request-level aas_client_address() (server.h)
 * uses. Pure so that unit.forwarded and fuzz.forwarded reach it without a
 * connection.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_FORWARDED_H
#define AAS_FORWARDED_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* Networks --trusted-proxies may name. */
#define AAS_TRUSTED_PROXIES_MAX 64
/*
 * The work one request's header may cost (docs/operations.md, "Behind a load
 * balancer"). Elements are read from the right, and only until the first
 * untrusted address: at most AAS_FORWARDED_HOPS_MAX of them (a chain of more
 * trusted proxies than that is a misconfiguration), within the last
 * AAS_FORWARDED_BYTES_MAX bytes of the header's lines together, each element
 * at most AAS_FORWARDED_ELEMENT_MAX bytes. Past any bound the peer counts.
 */
#define AAS_FORWARDED_HOPS_MAX 16
#define AAS_FORWARDED_BYTES_MAX 4096
#define AAS_FORWARDED_ELEMENT_MAX 256

/* Which header the trusted proxies write (--forwarded-header). */
enum { AAS_FORWARDED_XFF, AAS_FORWARDED_RFC7239 };

/* An IPv6 network; IPv4 is held as IPv4-mapped (::ffff:a.b.c.d), its prefix 96 more. */
struct aas_net {
	unsigned char addr[16];
	unsigned int bits;
};

struct aas_trust {
	size_t n;
	struct aas_net nets[AAS_TRUSTED_PROXIES_MAX];
};

/*
 * Read "CIDR[,CIDR...]" (an address alone is a /32 or /128; spaces around each
 * are ignored) into *t. 0, or -1 with why in err: an entry that is not an
 * address, a prefix out of range, bits set past the prefix, more than
 * AAS_TRUSTED_PROXIES_MAX entries, an empty list.
 */
int aas_trust_parse(struct aas_trust *t, const char *spec, char *err, size_t errsize);
/* Is the address (AF_INET or AF_INET6, IPv4-mapped as IPv4) in one of t's networks? false for NULL or others. */
bool aas_trust_has(const struct aas_trust *t, const struct sockaddr *sa);

/* What aas_forwarded_client() took. */
enum aas_forwarded_from {
	AAS_FROM_PEER,     /* the peer is no trusted proxy (or none are configured): the header is not read */
	AAS_FROM_HEADER,   /* the first untrusted address from the header's right */
	AAS_FROM_FALLBACK  /* the peer is trusted but the header gave nothing usable: the peer, *why says why */
};

/*
 * The client's address: the peer's, unless it is in t; then the header's
 * elements (values: its lines in the order received, `header` which of
 * AAS_FORWARDED_*) from the right, skipping trusted addresses, and the first
 * untrusted one. A missing header, an element that is not an address (X-
 * Forwarded-For: an IPv4 address, with a port after ':', or an IPv6 one, bare
 * or in brackets with a port after; Forwarded: one for= per element, IPv4
 * or "[IPv6]" with an optional port, no quoted-pair), a chain that is all
 * trusted, or one past the bounds above falls back to the peer. *out is
 * AF_INET or AF_INET6, or AF_UNSPEC when peer is NULL or neither. Never
 * fails; why (optional) is static text for AAS_FROM_FALLBACK, else NULL.
 */
enum aas_forwarded_from aas_forwarded_client(struct sockaddr_storage *out, const struct sockaddr *peer,
                                             const struct aas_trust *t, int header, const char *const *values,
                                             size_t nvalues, const char **why);

#endif
