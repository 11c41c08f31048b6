/*
 * /mcp.tgz: aas-mcp as an npm package, for MCP clients that launch their
 * servers as processes and have Node but not our binaries:
 *
 *   npx -y https://HOST/mcp.tgz      (AAS_API_KEY set)
 *
 * The package is mcp/npm/ (package.json and bin/aas-mcp.js, a bridge from
 * stdio to this server's /v1/mcp with no dependencies), built into the binary
 * (mcp_package_data.c), plus a server.json that names the server it came from,
 * its default AAS_BASE_URL. That origin is --public-url when the operator gave
 * one; otherwise the request's Host, with https when --secure-cookies says
 * the server is reached over TLS and http otherwise. A Host is whatever the
 * client sent, so it is taken only when it is a DNS name, an IPv4 address or
 * a bracketed IPv6 address with an optional port, and nothing else: what is
 * written into the package is one of those, never a path, a quote or a space.
 *
 * Each origin's archive is made once (web/tgz.h) and kept in a small cache:
 * CACHE_SLOTS origins, the oldest made replaced first. A client that sends a
 * new Host each time makes one archive of some KiB per request, within the
 * address's request rate, and holds at most CACHE_SLOTS of them.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "web/internal.h"
#include "web/tgz.h"

/* The whole archive: the bridge is some tens of KiB; this catches a package that grew by mistake at start. */
#define PACKAGE_MAX ((size_t)1 << 20)
#define CACHE_SLOTS 8

static struct {
	char origin[AAS_ORIGIN_MAX];
	unsigned char *tgz;
	size_t len;
} cache[CACHE_SLOTS];
static size_t cache_next;
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static char public_origin[AAS_ORIGIN_MAX]; /* --public-url as checked; "" when not given */
static bool https;                     /* --secure-cookies: the Host was reached over TLS */

static bool is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* A DNS name (LDH labels of 1 to 63 bytes, 253 in all, lowercased already) or an IPv4 address, which is one. */
static bool dns_name(const char *s, size_t n)
{
	size_t label = 0;

	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '.') {
			if (label == 0 || s[i - 1] == '-')
				return false;
			label = 0;
		} else if (is_alnum(s[i]) || (s[i] == '-' && label > 0)) {
			if (++label > 63)
				return false;
		} else {
			return false;
		}
	}
	return label > 0 && s[n - 1] != '-';
}

/* The inside of an IPv6 literal's brackets: hex digits, colons, and dots for an embedded IPv4 address. */
static bool ipv6_literal(const char *s, size_t n)
{
	if (n < 2 || n > 45)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') || s[i] == ':' || s[i] == '.'))
			return false;
	return true;
}

/* 1 to 65535, in at most five digits. */
static bool port_number(const char *s, size_t n)
{
	unsigned long v = 0;

	if (n == 0 || n > 5)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	return v >= 1 && v <= 65535;
}

bool aas_mcp_package_origin(char *out, size_t cap, const char *scheme, const char *host)
{
	char h[AAS_ORIGIN_MAX];
	size_t n = host ? strlen(host) : 0, name_end;
	const char *colon;

	if (n == 0 || n >= sizeof(h) || strlen(scheme) + 3 + n >= cap)
		return false;
	for (size_t i = 0; i <= n; i++)
		h[i] = (host[i] >= 'A' && host[i] <= 'Z') ? (char)(host[i] - 'A' + 'a') : host[i];
	if (h[0] == '[') {
		const char *close = strchr(h, ']');
		if (!close || !ipv6_literal(h + 1, (size_t)(close - h - 1)))
			return false;
		name_end = (size_t)(close - h) + 1;
		if (h[name_end] != '\0' && h[name_end] != ':')
			return false;
	} else {
		colon = strchr(h, ':');
		name_end = colon ? (size_t)(colon - h) : n;
		if (!dns_name(h, name_end))
			return false;
	}
	if (name_end < n && !port_number(h + name_end + 1, n - name_end - 1))
		return false;
	snprintf(out, cap, "%s://%s", scheme, h);
	return true;
}

/* The archive for an origin: the embedded files under package/, and server.json naming the origin. */
static int package_make(unsigned char **out, size_t *out_len, const char *origin)
{
	struct aas_tgz_file files[8];
	char names[8][64], server_json[AAS_ORIGIN_MAX + 32];
	size_t n = 0;
	int len;

	if (aas_embedded_mcp_package_count + 1 > sizeof(files) / sizeof(files[0])) {
		errno = EFBIG;
		return -1;
	}
	for (size_t i = 0; i < aas_embedded_mcp_package_count; i++, n++) {
		const struct aas_embedded_file *f = &aas_embedded_mcp_package[i];
		if (snprintf(names[n], sizeof(names[n]), "package/%s", f->path) >= (int)sizeof(names[n])) {
			errno = EINVAL;
			return -1;
		}
		files[n] = (struct aas_tgz_file){ .name = names[n], .data = f->text, .len = f->len,
		                                  .mode = strncmp(f->path, "bin/", 4) == 0 ? 0755 : 0644 };
	}
	/* The origin is checked to be [a-z0-9.:-[]] after its scheme: nothing in it needs escaping in JSON. */
	len = snprintf(server_json, sizeof(server_json), "{\"base_url\": \"%s\"}\n", origin);
	if (len < 0 || (size_t)len >= sizeof(server_json)) {
		errno = EINVAL;
		return -1;
	}
	files[n++] = (struct aas_tgz_file){ .name = "package/server.json", .data = server_json, .len = (size_t)len,
	                                    .mode = 0644 };
	return aas_tgz_make(out, out_len, files, n, PACKAGE_MAX);
}

int aas_mcp_package_init(const struct aas_config *cfg)
{
	const char *u = cfg->public_url, *rest = NULL, *scheme = NULL;
	char host[AAS_ORIGIN_MAX], longest[AAS_ORIGIN_MAX];
	unsigned char *probe = NULL;
	size_t len = 0, probe_len;

	https = cfg->secure_cookies > 0;
	public_origin[0] = '\0';
	if (u) {
		if (strncasecmp(u, "https://", 8) == 0)
			scheme = "https", rest = u + 8;
		else if (strncasecmp(u, "http://", 7) == 0)
			scheme = "http", rest = u + 7;
		if (rest) {
			len = strlen(rest);
			len -= len > 0 && rest[len - 1] == '/'; /* "https://example.com/" is the same origin */
		}
		if (rest && len < sizeof(host)) {
			memcpy(host, rest, len);
			host[len] = '\0';
		}
		if (!rest || len >= sizeof(host) ||
		    !aas_mcp_package_origin(public_origin, sizeof(public_origin), scheme, host)) {
			public_origin[0] = '\0';
			aas_log(SAAS_LOG_ERROR, "--public-url \"%.300s\": expected an origin, http(s)://HOST[:PORT] with no "
			        "path, such as https://sandbox.example.com", u);
			return -1;
		}
	}
	/* The package must fit its bound for the longest origin: found now rather than at a user's first npx. */
	memset(longest, 'x', sizeof(longest) - 1);
	longest[sizeof(longest) - 1] = '\0';
	if (package_make(&probe, &probe_len, longest) < 0) {
		aas_log(SAAS_LOG_ERROR, "/mcp.tgz: the npm package cannot be made: %s", strerror(errno));
		return -1;
	}
	free(probe);
	aas_log(SAAS_LOG_INFO, "/mcp.tgz: the MCP package points at %s", public_origin[0] ? public_origin
	        : https ? "https://HOST (each request's Host)" : "http://HOST (each request's Host)");
	return 0;
}

void aas_mcp_package_free(void)
{
	pthread_mutex_lock(&cache_mu);
	for (size_t i = 0; i < CACHE_SLOTS; i++) {
		free(cache[i].tgz);
		cache[i].tgz = NULL;
		cache[i].origin[0] = '\0';
	}
	cache_next = 0;
	pthread_mutex_unlock(&cache_mu);
}

bool aas_public_origin(char *out, size_t cap, struct aas_req *r)
{
	if (public_origin[0])
		return (size_t)snprintf(out, cap, "%s", public_origin) < cap;
	return aas_mcp_package_origin(out, cap, https ? "https" : "http",
	                              MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST));
}

void aas_h_mcp_package(struct aas_req *r, struct aas_reply *out)
{
	char origin[AAS_ORIGIN_MAX];
	struct MHD_Response *resp = NULL;
	size_t i;

	if (!aas_public_origin(origin, sizeof(origin), r)) {
		const char *host = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
		aas_reply_error(out, 400, "bad_host",
		                "the Host header \"%.100s\" is not a host name or address with an optional port, "
		                "which the package would name as its server; the server's operator can set "
		                "--public-url", host ? host : "");
		return;
	}

	pthread_mutex_lock(&cache_mu);
	for (i = 0; i < CACHE_SLOTS; i++)
		if (cache[i].tgz && strcmp(cache[i].origin, origin) == 0)
			break;
	if (i == CACHE_SLOTS) {
		unsigned char *tgz;
		size_t len;
		if (package_make(&tgz, &len, origin) < 0) {
			int err = errno;
			pthread_mutex_unlock(&cache_mu);
			aas_log(SAAS_LOG_ERROR, "/mcp.tgz: cannot make the package: %s", strerror(err));
			aas_reply_error(out, 500, "internal", "the package could not be made: %s", strerror(err));
			return;
		}
		i = cache_next;
		cache_next = (cache_next + 1) % CACHE_SLOTS;
		free(cache[i].tgz);
		cache[i].tgz = tgz;
		cache[i].len = len;
		snprintf(cache[i].origin, sizeof(cache[i].origin), "%s", origin);
	}
	/* A copy: the slot may be replaced while the response is still being sent. */
	resp = MHD_create_response_from_buffer(cache[i].len, cache[i].tgz, MHD_RESPMEM_MUST_COPY);
	pthread_mutex_unlock(&cache_mu);
	if (!resp) {
		aas_reply_error(out, 500, "out_of_memory", "out of memory");
		return;
	}
	out->status = 200;
	out->response = resp;
	MHD_add_response_header(resp, "Content-Type", "application/gzip");
	if (!public_origin[0])
		MHD_add_response_header(resp, "Vary", "Host");
	aas_reply_common_headers(resp);
}
