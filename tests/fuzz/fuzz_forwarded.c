/*
 * Client addresses behind trusted proxies (server/forwarded.c): the input's
 * first byte picks the header (X-Forwarded-For or Forwarded) and whether the
 * peer is a trusted proxy; the rest, split at newlines, are the header's
 * lines as a client sent them. Invariants:
 *
 *   - from an untrusted peer the header is never read: the peer, always;
 *   - an address taken from the header is an untrusted one, AF_INET or
 *     AF_INET6; a fallback is the peer's;
 *   - spoofing is impossible: whatever the client sent, a line a trusted
 *     proxy adds (its client, then a trusted hop), or the same appended to
 *     the client's last line as one list, gives exactly the proxy's client;
 *
 * and the input as a --trusted-proxies list either is refused or gives
 * networks with no bits past their prefix, each holding its own address.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "forwarded.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define LINES_MAX 32
#define CLIENT "203.0.113.77"

static struct aas_trust trust;
static bool trust_ready;

static struct sockaddr_storage v4(const char *text)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *in = (struct sockaddr_in *)&ss;

	memset(&ss, 0, sizeof(ss));
	in->sin_family = AF_INET;
	if (inet_pton(AF_INET, text, &in->sin_addr) != 1)
		abort();
	return ss;
}

static bool same_v4(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	return a->ss_family == AF_INET && b->ss_family == AF_INET &&
	       memcmp(&((const struct sockaddr_in *)a)->sin_addr, &((const struct sockaddr_in *)b)->sin_addr, 4) == 0;
}

static void check_trust_list(const char *spec)
{
	struct aas_trust t;
	char err[160];

	if (aas_trust_parse(&t, spec, err, sizeof(err)) < 0)
		return;
	if (t.n == 0 || t.n > AAS_TRUSTED_PROXIES_MAX)
		abort();
	for (size_t i = 0; i < t.n; i++) {
		const struct aas_net *n = &t.nets[i];
		struct sockaddr_in6 in6;

		if (n->bits > 128)
			abort();
		for (unsigned int b = n->bits; b < 128; b++)
			if (n->addr[b / 8] & (0x80u >> (b % 8)))
				abort();
		memset(&in6, 0, sizeof(in6));
		in6.sin6_family = AF_INET6;
		memcpy(in6.sin6_addr.s6_addr, n->addr, 16);
		if (!aas_trust_has(&t, (const struct sockaddr *)&in6))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text, *lines[LINES_MAX + 2], *joined = NULL;
	const char *v[LINES_MAX + 2];
	struct sockaddr_storage peer, out, want = v4(CLIENT);
	size_t n = 0;
	int header;
	bool untrusted;
	enum aas_forwarded_from from;

	if (!trust_ready) {
		char err[160];
		if (aas_trust_parse(&trust, "10.0.0.0/8,192.168.0.0/16,2001:db8:ffff::/48,::ffff:172.16.0.0/108", err,
		                    sizeof(err)) < 0)
			abort();
		trust_ready = true;
	}
	if (size == 0)
		return 0;
	header = data[0] & 1 ? AAS_FORWARDED_RFC7239 : AAS_FORWARDED_XFF;
	untrusted = data[0] & 2;
	peer = v4(untrusted ? "198.51.100.1" : "10.0.0.1");
	if (!(text = malloc(size)))
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	check_trust_list(text);
	for (char *p = text; n < LINES_MAX;) {
		char *nl = strchr(p, '\n');
		lines[n++] = p;
		if (!nl)
			break;
		*nl = '\0';
		p = nl + 1;
	}
	for (size_t i = 0; i < n; i++)
		v[i] = lines[i];

	from = aas_forwarded_client(&out, (const struct sockaddr *)&peer, &trust, header, v, n, NULL);
	if (untrusted && (from != AAS_FROM_PEER || !same_v4(&out, &peer)))
		abort();
	if (from == AAS_FROM_FALLBACK && !same_v4(&out, &peer))
		abort();
	if (from == AAS_FROM_HEADER &&
	    ((out.ss_family != AF_INET && out.ss_family != AF_INET6) || aas_trust_has(&trust, (const struct sockaddr *)&out)))
		abort();

	if (!untrusted) {
		/* A trusted proxy's line with its client, then a trusted hop's. */
		v[n] = header == AAS_FORWARDED_RFC7239 ? "for=" CLIENT ";proto=https" : CLIENT ":4711";
		v[n + 1] = header == AAS_FORWARDED_RFC7239 ? "for=\"[2001:db8:ffff::2]:80\"" : "192.168.3.3";
		if (aas_forwarded_client(&out, (const struct sockaddr *)&peer, &trust, header, v, n + 2, NULL) !=
		        AAS_FROM_HEADER ||
		    !same_v4(&out, &want))
			abort();
		/* The same appended to the client's last line, as nginx's $proxy_add_x_forwarded_for does. */
		size_t len = strlen(lines[n - 1]);
		if ((joined = malloc(len + 64))) {
			memcpy(joined, lines[n - 1], len);
			strcpy(joined + len, header == AAS_FORWARDED_RFC7239 ? ", for=" CLIENT : ", " CLIENT);
			v[n - 1] = joined;
			if (aas_forwarded_client(&out, (const struct sockaddr *)&peer, &trust, header, v, n, NULL) !=
			        AAS_FROM_HEADER ||
			    !same_v4(&out, &want))
				abort();
		}
	}
	free(joined);
	free(text);
	return 0;
}
