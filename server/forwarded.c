/*
 * Client addresses behind trusted proxies.
 *
 * Behind a load balancer every connection comes from the balancer, so every
 * per-address bound (request rates, previews, log-ins) would count all its
 * clients together. The balancer says who its client was in X-Forwarded-For
 * (or RFC 7239's Forwarded), but so can anyone: the header is read only when
 * the peer is one of the operator's proxies (--trusted-proxies; none by
 * default), and then only from the right. Each proxy appends the address it
 * took the connection from, so the rightmost elements are written by proxies
 * we trust and the first untrusted one from the right is the client; whatever
 * lies left of it is the client's to write and is never read. Only one header
 * is read (--forwarded-header): a proxy that writes X-Forwarded-For leaves a
 * client's Forwarded untouched, and reading both would let the client choose.
 *
 * Nothing here trusts garbage: an element that is no address, a chain past its
 * bounds (forwarded.h) or a missing header gives the peer, the proxy, whose
 * own bucket then counts the request (logged at debug level). That costs the
 * proxy's clients together only when the proxy itself writes nonsense.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "forwarded.h"
#include "front.h"

/* ---- the trusted networks ---- */

/* An address as 16 bytes, IPv4 as IPv4-mapped; false for anything but AF_INET and AF_INET6. */
static bool addr16(const struct sockaddr *sa, unsigned char out[16])
{
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	if (sa && sa->sa_family == AF_INET) {
		memcpy(out, mapped, 12);
		memcpy(out + 12, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
		return true;
	}
	if (sa && sa->sa_family == AF_INET6) {
		memcpy(out, ((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr, 16);
		return true;
	}
	return false;
}

static bool net_has(const struct aas_net *n, const unsigned char a[16])
{
	unsigned int whole = n->bits / 8, rest = n->bits % 8;

	if (memcmp(n->addr, a, whole) != 0)
		return false;
	return rest == 0 || ((n->addr[whole] ^ a[whole]) & (0xff00u >> rest) & 0xff) == 0;
}

bool aas_trust_has(const struct aas_trust *t, const struct sockaddr *sa)
{
	unsigned char a[16];

	if (!t || !t->n || !addr16(sa, a))
		return false;
	for (size_t i = 0; i < t->n; i++)
		if (net_has(&t->nets[i], a))
			return true;
	return false;
}

/* One "ADDR[/BITS]" of len bytes into *n; 0, or -1 with why in err. */
static int net_parse(struct aas_net *n, const char *s, size_t len, char *err, size_t errsize)
{
	char text[INET6_ADDRSTRLEN + 8], *slash, *end;
	struct in_addr v4;
	unsigned long bits;
	unsigned int max;

	if (len == 0 || len >= sizeof(text)) {
		snprintf(err, errsize, "\"%.*s\" is no address or CIDR", (int)(len > 64 ? 64 : len), s);
		return -1;
	}
	memcpy(text, s, len);
	text[len] = '\0';
	if ((slash = strchr(text, '/')))
		*slash = '\0';
	if (inet_pton(AF_INET, text, &v4) == 1) {
		memset(n->addr, 0, 10);
		n->addr[10] = n->addr[11] = 0xff;
		memcpy(n->addr + 12, &v4, 4);
		max = 32;
	} else if (inet_pton(AF_INET6, text, n->addr) == 1) {
		max = 128;
	} else {
		snprintf(err, errsize, "\"%.*s\" is no IPv4 or IPv6 address", (int)len, s);
		return -1;
	}
	bits = max;
	if (slash && (!slash[1] || slash[1] < '0' || slash[1] > '9' || (bits = strtoul(slash + 1, &end, 10)) > max ||
	              *end)) {
		snprintf(err, errsize, "\"%.*s\": the prefix must be 0 to %u", (int)len, s, max);
		return -1;
	}
	n->bits = (unsigned int)bits + (128 - max);
	/* 10.0.0.1/8 is a typo for 10.0.0.0/8 or 10.0.0.1/32: say so rather than guess. */
	for (unsigned int b = n->bits; b < 128; b++)
		if (n->addr[b / 8] & (0x80u >> (b % 8))) {
			snprintf(err, errsize, "\"%.*s\" has bits set past its /%lu prefix", (int)len, s, bits);
			return -1;
		}
	return 0;
}

int aas_trust_parse(struct aas_trust *t, const char *spec, char *err, size_t errsize)
{
	const char *p = spec;

	memset(t, 0, sizeof(*t));
	for (;;) {
		size_t len = strcspn(p, ",");
		const char *s = p;
		size_t n = len;

		while (n && (*s == ' ' || *s == '\t'))
			s++, n--;
		while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
			n--;
		if (t->n == AAS_TRUSTED_PROXIES_MAX) {
			snprintf(err, errsize, "at most %d networks", AAS_TRUSTED_PROXIES_MAX);
			return -1;
		}
		if (net_parse(&t->nets[t->n], s, n, err, errsize) < 0)
			return -1;
		t->n++;
		if (!p[len])
			return 0;
		p += len + 1;
	}
}

/* ---- reading the header ---- */

static bool ows(char c)
{
	return c == ' ' || c == '\t';
}

/* RFC 9110's tchar. */
static bool tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* A port after ':': 1 to 5 digits up to 65535 or, in Forwarded, an obfuscated "_..." one. */
static bool port_ok(const char *s, size_t len, bool obfuscated)
{
	unsigned long v = 0;

	if (obfuscated && len > 1 && s[0] == '_') {
		for (size_t i = 1; i < len; i++)
			if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
			      s[i] == '.' || s[i] == '_' || s[i] == '-'))
				return false;
		return true;
	}
	if (len == 0 || len > 5)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	return v <= 65535;
}

/*
 * A node: "a.b.c.d", "a.b.c.d:port", "[v6]", "[v6]:port", and a bare "v6" when
 * bare_v6 (X-Forwarded-For's spelling; Forwarded brackets IPv6 always).
 */
static bool node_parse(struct sockaddr_storage *out, const char *s, size_t len, bool bare_v6)
{
	char text[INET6_ADDRSTRLEN];
	const char *host = s, *colon;
	size_t hlen = len;
	bool v6 = false;

	if (len && s[0] == '[') {
		const char *close = memchr(s, ']', len);
		if (!close)
			return false;
		host = s + 1;
		hlen = (size_t)(close - host);
		if (close + 1 < s + len && (close[1] != ':' || !port_ok(close + 2, (size_t)(s + len - close - 2), !bare_v6)))
			return false;
		v6 = true;
	} else if ((colon = memchr(s, ':', len)) && !memchr(colon + 1, ':', (size_t)(s + len - colon - 1))) {
		/* One colon: IPv4 and a port. */
		hlen = (size_t)(colon - s);
		if (!port_ok(colon + 1, len - hlen - 1, !bare_v6))
			return false;
	} else if (colon) {
		if (!bare_v6)
			return false;
		v6 = true;
	}
	if (hlen == 0 || hlen >= sizeof(text))
		return false;
	memcpy(text, host, hlen);
	text[hlen] = '\0';
	memset(out, 0, sizeof(*out));
	if (v6) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)(void *)out;
		in6->sin6_family = AF_INET6;
		return inet_pton(AF_INET6, text, &in6->sin6_addr) == 1;
	}
	struct sockaddr_in *in = (struct sockaddr_in *)(void *)out;
	in->sin_family = AF_INET;
	return inet_pton(AF_INET, text, &in->sin_addr) == 1;
}

/*
 * One Forwarded element (pairs separated by ';'): its for= node. Values are
 * tokens or quoted strings without quoted-pairs (no proxy escapes an address,
 * and a backslash would make the right-to-left split ambiguous).
 */
static bool rfc7239_element(struct sockaddr_storage *out, const char *s, size_t len)
{
	const char *p = s, *end = s + len, *node = NULL;
	size_t node_len = 0;

	while (p < end) {
		const char *name = p, *val;
		size_t nlen, vlen;

		while (p < end && ows(*p))
			p++;
		for (name = p; p < end && tchar((unsigned char)*p); p++)
			;
		nlen = (size_t)(p - name);
		if (nlen == 0 || p == end || *p != '=')
			return false;
		p++;
		if (p < end && *p == '"') {
			val = ++p;
			while (p < end && *p != '"' && *p != '\\')
				p++;
			if (p == end || *p != '"')
				return false;
			vlen = (size_t)(p - val);
			p++;
		} else {
			for (val = p; p < end && tchar((unsigned char)*p); p++)
				;
			vlen = (size_t)(p - val);
			if (vlen == 0)
				return false;
		}
		while (p < end && ows(*p))
			p++;
		if (p < end && *p++ != ';')
			return false;
		if (nlen == 3 && strncasecmp(name, "for", 3) == 0) {
			if (node) /* one for= per element (RFC 7239, 4) */
				return false;
			node = val;
			node_len = vlen;
		}
	}
	return node && node_parse(out, node, node_len, false);
}

/*
 * The start of the last element of s[0..end), split at a ',' outside quotes
 * (Forwarded) or at any (X-Forwarded-For). -1 when a quote is left open.
 */
static ptrdiff_t element_start(const char *s, size_t end, bool quotes)
{
	bool inq = false;

	for (size_t i = end; i > 0; i--) {
		if (quotes && s[i - 1] == '"')
			inq = !inq;
		else if (s[i - 1] == ',' && !inq)
			return (ptrdiff_t)i;
	}
	return inq ? -1 : 0;
}

enum aas_forwarded_from aas_forwarded_client(struct sockaddr_storage *out, const struct sockaddr *peer,
                                             const struct aas_trust *t, int header, const char *const *values,
                                             size_t nvalues, const char **why)
{
	size_t hops = 0, bytes = 0;
	bool rfc = header == AAS_FORWARDED_RFC7239;
	const char *reason = "no such header";

	memset(out, 0, sizeof(*out));
	if (why)
		*why = NULL;
	if (peer && peer->sa_family == AF_INET)
		memcpy(out, peer, sizeof(struct sockaddr_in));
	else if (peer && peer->sa_family == AF_INET6)
		memcpy(out, peer, sizeof(struct sockaddr_in6));
	if (!aas_trust_has(t, peer))
		return AAS_FROM_PEER;
	/* The last line first: a proxy that adds a line of its own (HAProxy) adds it last. */
	for (size_t v = nvalues; v > 0; v--) {
		const char *s = values[v - 1];
		size_t end = s ? strlen(s) : 0;

		for (;;) {
			struct sockaddr_storage a;
			ptrdiff_t start = element_start(s, end, rfc);
			const char *e;
			size_t len;

			if (start < 0) {
				reason = "an element's quote is not closed";
				goto fallback;
			}
			bytes += end - (size_t)start + 1;
			if (++hops > AAS_FORWARDED_HOPS_MAX || bytes > AAS_FORWARDED_BYTES_MAX) {
				reason = "more trusted hops or bytes than it may take";
				goto fallback;
			}
			e = s + start;
			len = end - (size_t)start;
			while (len && ows(*e))
				e++, len--;
			while (len && ows(e[len - 1]))
				len--;
			if (len == 0 || len > AAS_FORWARDED_ELEMENT_MAX ||
			    !(rfc ? rfc7239_element(&a, e, len) : node_parse(&a, e, len, true))) {
				reason = "an element is no address";
				goto fallback;
			}
			if (!aas_trust_has(t, (const struct sockaddr *)&a)) {
				*out = a;
				return AAS_FROM_HEADER;
			}
			if (start == 0)
				break;
			end = (size_t)start - 1;
		}
		reason = "every address in it is a trusted proxy";
	}
fallback:
	if (why)
		*why = reason;
	return AAS_FROM_FALLBACK;
}

/* ---- a request's client (server.h) ---- */

static struct aas_trust trusted;
static int header_kind = AAS_FORWARDED_XFF;

int aas_forwarded_init(const struct aas_config *cfg)
{
	char err[160];

	memset(&trusted, 0, sizeof(trusted));
	header_kind = cfg->forwarded_header;
	if (!cfg->trusted_proxies)
		return 0;
	if (aas_trust_parse(&trusted, cfg->trusted_proxies, err, sizeof(err)) < 0) {
		aas_log(SAAS_LOG_ERROR, "--trusted-proxies: %s", err);
		return -1;
	}
	aas_log(SAAS_LOG_INFO, "trusting %s from %zu proxy network%s (--trusted-proxies)",
	        header_kind == AAS_FORWARDED_RFC7239 ? "Forwarded" : "X-Forwarded-For", trusted.n,
	        trusted.n == 1 ? "" : "s");
	return 0;
}

bool aas_proxy_trusted(const struct sockaddr *sa)
{
	return aas_trust_has(&trusted, sa);
}

const char *aas_forwarded_header_name(void)
{
	return header_kind == AAS_FORWARDED_RFC7239 ? "Forwarded" : "X-Forwarded-For";
}

struct lines {
	const char *name;
	const char *v[AAS_FORWARDED_HOPS_MAX];
	size_t n;
};

/* Keeps the last AAS_FORWARDED_HOPS_MAX lines: each holds an element at least, and no more are read. */
static enum MHD_Result collect(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct lines *l = cls;

	(void)kind;
	if (!key || !value || strcasecmp(key, l->name) != 0)
		return MHD_YES;
	if (l->n == AAS_FORWARDED_HOPS_MAX) {
		memmove(l->v, l->v + 1, (AAS_FORWARDED_HOPS_MAX - 1) * sizeof(l->v[0]));
		l->n--;
	}
	l->v[l->n++] = value;
	return MHD_YES;
}

size_t aas_forwarded_lines(struct MHD_Connection *conn, const char *name, const char **v, size_t max)
{
	struct lines l = { .name = name };
	size_t n;

	MHD_get_connection_values(conn, MHD_HEADER_KIND, collect, &l);
	n = l.n < max ? l.n : max;
	memcpy(v, l.v + (l.n - n), n * sizeof(v[0]));
	return n;
}

const struct sockaddr *aas_peer_address(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);

	return ci ? ci->client_addr : NULL;
}

void aas_client_address(struct MHD_Connection *conn, struct sockaddr_storage *out)
{
	const struct sockaddr *peer = aas_peer_address(conn);
	const char *lines[AAS_FORWARDED_HOPS_MAX] = { NULL }, *why;
	size_t n = 0;

	/* The common case, no proxies configured: no header is looked at. */
	if (trusted.n && aas_trust_has(&trusted, peer))
		n = aas_forwarded_lines(conn, aas_forwarded_header_name(), lines, AAS_FORWARDED_HOPS_MAX);
	if (aas_forwarded_client(out, peer, &trusted, header_kind, lines, n, &why) == AAS_FROM_FALLBACK) {
		unsigned char key[16];
		char text[INET6_ADDRSTRLEN];

		aas_address_key(peer, key, text, sizeof(text));
		aas_log(SAAS_LOG_DEBUG, "client address: %s from trusted proxy %s: %s; counting the proxy's address",
		        aas_forwarded_header_name(), text, why);
	}
}
