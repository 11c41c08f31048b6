/*
 * The preview proxy (server/preview/proxy.c): the input is what the server inside a
 * sandbox answers. aas-server runs in-process on the fake driver; its
 * port_connect hands the proxy one end of a socketpair whose other end holds
 * the input (then EOF), and a client asks for a preview over a loopback
 * connection, so the proxy's reading of the response head, its parsing, the
 * headers it passes on, the body relay and a WebSocket upgrade's bridge all
 * see it. The input's first byte picks the client's request (plain GET, HEAD,
 * POST with a body, WebSocket upgrade).
 *
 * The Host matcher (aas_preview_match) gets the input too, as a Host header:
 * when it matches, the name it fills in must be that Host's first label. So
 * does the check of the Host /mcp.tgz writes into its package
 * (aas_mcp_package_origin): what it takes comes out as the scheme and the
 * Host lowercased, made of nothing but a host name's, an address's and a
 * port's characters.
 *
 * So does the answer reader (preview/guest_http.c) on its own, with invariants: a
 * head it takes has no NUL or lone CR, fields free of CR, LF and NUL with
 * names that are tokens, one framing (never Content-Length with chunked), and
 * a chunked body decodes to no more than it was, however it is cut up.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "preview/internal.h"
#include "preview/preview.h"
#include "web/internal.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fuzz_tenant tenant;

/* The guest's answer for the current input, and its end of the socketpair. */
static pthread_mutex_t guest_mu = PTHREAD_MUTEX_INITIALIZER;
static const uint8_t *guest_data;
static size_t guest_len;
static int guest_fd = -1;

static int guest_connect(void *ctx, const char *name, unsigned int port, int *fd)
{
	int sv[2], rc = SAAS_OK;
	const uint8_t *p;
	size_t left;

	(void)ctx;
	(void)name;
	(void)port;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return SAAS_EIO;
	pthread_mutex_lock(&guest_mu);
	/* The input fits the socket's buffer (-max_len is well under it): write it all now, then EOF. */
	for (p = guest_data, left = guest_len; left;) {
		ssize_t n = send(sv[1], p, left, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		p += n;
		left -= (size_t)n;
	}
	/* Kept open for reading, so the proxy can send its request; closed after the exchange. */
	shutdown(sv[1], SHUT_WR);
	if (guest_fd >= 0)
		close(guest_fd);
	guest_fd = sv[1];
	pthread_mutex_unlock(&guest_mu);
	*fd = sv[0];
	return rc;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_server_start(fuzz_driver(guest_connect), &tenant);
	return 0;
}

/* What aas_preview_match filled in must be read off the host: "NAME." then the domain, NAME a label of ours. */
static void check_match(const uint8_t *data, size_t size)
{
	static const char *const domains[] = { "localhost", "Preview.Example.COM" };
	char host[300], name[SAAS_PREVIEW_NAME_LEN + 1], lower[300];

	if (size >= sizeof(host))
		size = sizeof(host) - 1;
	memcpy(host, data, size);
	host[size] = '\0';
	for (size_t d = 0; d < sizeof(domains) / sizeof(domains[0]); d++) {
		size_t n, dl = strlen(domains[d]);
		memset(name, 0x55, sizeof(name));
		if (!aas_preview_match(host, domains[d], name))
			continue;
		if (!memchr(name, '\0', sizeof(name)))
			abort();
		for (n = 0; host[n] && host[n] != ':'; n++)
			lower[n] = (char)tolower((unsigned char)host[n]);
		lower[n] = '\0';
		if (n < dl + 1 || lower[n - dl - 1] != '.' || strcasecmp(lower + n - dl, domains[d]) != 0)
			abort();
		lower[n - dl - 1] = '\0';
		/* One label before the domain; the name is that label when it has a name's length, else none. */
		if (strchr(lower, '.'))
			abort();
		if (name[0] ? strcmp(lower, name) != 0 : strlen(lower) == SAAS_PREVIEW_NAME_LEN)
			abort();
	}
}

/* An origin /mcp.tgz would write into a package: "http://" and the host, lowercased, and nothing else. */
static void check_package_origin(const uint8_t *data, size_t size)
{
	char host[300], out[300];

	if (size >= sizeof(host))
		size = sizeof(host) - 1;
	memcpy(host, data, size);
	host[size] = '\0';
	if (!aas_mcp_package_origin(out, sizeof(out), "http", host))
		return;
	if (strncmp(out, "http://", 7) != 0 || strlen(out + 7) != strlen(host) || strlen(host) == 0)
		abort();
	for (size_t i = 0; host[i]; i++) {
		unsigned char c = (unsigned char)out[7 + i];
		if (c != (unsigned char)tolower((unsigned char)host[i]) ||
		    !((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || strchr(".-:[]", c)))
			abort();
	}
}

static bool token_char(unsigned char c)
{
	return isalnum(c) || strchr("!#$%&'*+-.^_`|~", c);
}

static void check_reader(const uint8_t *data, size_t size)
{
	struct aas_http_head h;
	struct aas_http_chunked c = { 0 };
	char *buf = malloc(size + 1);
	const char *why;
	size_t from = 0, end = 0, cut = size > 1 ? data[0] % size : 0;
	ssize_t a, b;

	if (!buf)
		abort();
	memcpy(buf, data, size);
	buf[size] = '\0';
	/* The end found in two steps is the end found at once. */
	if (!(end = aas_http_head_end(buf, cut, &from)))
		end = aas_http_head_end(buf, size, &from);
	from = 0;
	if (end != aas_http_head_end(buf, size, &from) || end > size)
		abort();
	if (end && aas_http_head_parse(buf, end, &h, &why) == 0) {
		if (memchr(data, '\0', end))
			abort();
		for (size_t i = 0; i < end; i++)
			if (data[i] == '\r' && (i + 1 == end || data[i + 1] != '\n'))
				abort();
		if (h.status < 100 || h.status > 999)
			abort();
		for (size_t i = 0; i < h.nfields; i++) {
			if (!*h.fields[i].name || strpbrk(h.fields[i].value, "\r\n"))
				abort();
			for (const char *n = h.fields[i].name; *n; n++)
				if (!token_char((unsigned char)*n))
					abort();
		}
		if (h.body == AAS_HTTP_BODY_CHUNKED && h.length >= 0)
			abort();
		if (h.body == AAS_HTTP_BODY_LENGTH && h.length < 0)
			abort();
		aas_http_head_free(&h);
	}
	/* The chunked decoder, on the whole input and on two pieces: the same payload. */
	memcpy(buf, data, size);
	a = aas_http_chunked(&c, buf, size);
	if (a > (ssize_t)size)
		abort();
	if (a > 0) {
		char *whole = malloc((size_t)a), *two = buf;
		struct aas_http_chunked d = { 0 };
		ssize_t x, y;
		if (!whole)
			abort();
		memcpy(whole, buf, (size_t)a);
		memcpy(two, data, size);
		x = aas_http_chunked(&d, two, cut);
		if (x >= 0) {
			memmove(two + x, two + cut, size - cut);
			y = aas_http_chunked(&d, two + x, size - cut);
			b = y >= 0 ? x + y : x;
			if (y >= 0 && (b != a || memcmp(whole, two, (size_t)a) != 0))
				abort();
		}
		free(whole);
	}
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{

	static const char *const requests[] = {
		"GET /p?q=1 HTTP/1.1\r\nHost: %s.localhost\r\nAccept: */*\r\n\r\n",
		"HEAD / HTTP/1.1\r\nHost: %s.localhost\r\n\r\n",
		"POST /form HTTP/1.1\r\nHost: %s.localhost\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello",
		("GET /ws HTTP/1.1\r\nHost: %s.localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
		 "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\nframe"),
	};
	char req[512], answer[256];
	int n;

	check_match(data, size);
	check_package_origin(data, size);
	check_reader(data, size);
	if (size == 0)
		return 0;
	n = snprintf(req, sizeof(req), requests[data[0] % (sizeof(requests) / sizeof(requests[0]))], tenant.preview_name);
	pthread_mutex_lock(&guest_mu);
	guest_data = data + 1;
	guest_len = size - 1;
	pthread_mutex_unlock(&guest_mu);
	fuzz_server_exchange(req, (size_t)n, answer, sizeof(answer));
	pthread_mutex_lock(&guest_mu);
	if (guest_fd >= 0)
		close(guest_fd);
	guest_fd = -1;
	guest_data = NULL;
	guest_len = 0;
	pthread_mutex_unlock(&guest_mu);
	return 0;
}
