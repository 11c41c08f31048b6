/*
 * Preview URLs: http://<port>-<sandbox-id>.<preview-domain>[:port]/...
 * proxied to an exposed port inside the sandbox through saas_engine_port_connect().
 *
 * How: for each request, a tunnel is opened and the request is written to it
 * raw (method, path and query as sent, headers with Host rewritten, the body
 * streamed as it arrives). A plain request goes as HTTP/1.0 with
 * "Connection: close", so the server inside answers with a Content-Length or
 * until close and never chunked; its status and headers are parsed and the
 * body relayed as it arrives (libmicrohttpd re-chunks an unknown length, so
 * streams and server-sent events pass). A WebSocket (any "Connection:
 * Upgrade") goes as HTTP/1.1 untouched; if the server inside answers 101, the
 * client's connection is upgraded too and the two sockets are bridged both
 * ways until either side closes.
 *
 * The URL is the capability: no API key, and no need to know the owner, so
 * previews answer from the first request after a restart. Only exposed ports
 * of ready sandboxes answer (the engine checks).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server.h"

#define HEAD_MAX (64 * 1024)
#define HEAD_TIMEOUT_MS 120000

static saas_engine *engine;

struct relay {
	int fd;
	char *extra;        /* bytes read past the response head */
	size_t extra_len, extra_off;
};

struct proxy {
	int fd;
	bool upgrade;
	bool failed;        /* writing the request failed */
	struct relay *relay;
	char *head;         /* request head being built */
	size_t head_len, head_cap;
};

void aas_preview_init(saas_engine *e)
{
	engine = e;
}

bool aas_preview_match(const char *host, const char *domain, unsigned int *port, char *id, size_t idsize)
{
	char h[256];
	size_t n, dl;
	unsigned long p;
	char *end;

	if (!host || !domain || !*domain || strlen(host) >= sizeof(h))
		return false;
	for (n = 0; host[n] && host[n] != ':'; n++)
		h[n] = (char)tolower((unsigned char)host[n]);
	h[n] = '\0';
	dl = strlen(domain);
	if (n <= dl + 1 || h[n - dl - 1] != '.' || strncasecmp(h + n - dl, domain, dl) != 0)
		return false;
	h[n - dl - 1] = '\0';
	if (strchr(h, '.') || !isdigit((unsigned char)h[0]))
		return false;
	p = strtoul(h, &end, 10);
	if (*end != '-' || p < 1 || p > 65535 || !end[1] || strlen(end + 1) >= idsize)
		return false;
	for (const char *c = end + 1; *c; c++)
		if (!(islower((unsigned char)*c) || isdigit((unsigned char)*c) || *c == '-'))
			return false;
	*port = (unsigned int)p;
	strcpy(id, end + 1);
	return true;
}

static void relay_free(struct relay *rl)
{
	if (!rl)
		return;
	if (rl->fd >= 0)
		close(rl->fd);
	free(rl->extra);
	free(rl);
}

void aas_preview_free(struct aas_req *r)
{
	struct proxy *p = r->proxy;

	if (!p)
		return;
	if (p->fd >= 0)
		close(p->fd);
	relay_free(p->relay);
	free(p->head);
	free(p);
	r->proxy = NULL;
}

static enum MHD_Result fail(struct aas_req *r, unsigned int status, const char *code, const char *msg)
{
	const char *accept = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Accept");
	struct aas_reply rep = { 0, NULL };

	if (accept && strstr(accept, "text/html")) {
		char *page = NULL;
		int n = asprintf(&page,
		                 "<!doctype html><html><head><title>%u</title></head><body><h1>%u</h1><p>%s</p>"
		                 "<p><small>aas-server preview</small></p></body></html>\n", status, status, msg);
		if (n >= 0) {
			rep.status = status;
			rep.response = MHD_create_response_from_buffer((size_t)n, page, MHD_RESPMEM_MUST_FREE);
			MHD_add_response_header(rep.response, "Content-Type", "text/html; charset=utf-8");
			return aas_queue(r, &rep);
		}
	}
	aas_reply_error(&rep, status, code, "%s", msg);
	return aas_queue(r, &rep);
}

static int send_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int head_add(struct proxy *p, const char *a, const char *b, const char *c)
{
	size_t need = strlen(a) + strlen(b) + strlen(c) + 1;

	if (p->head_len + need > p->head_cap) {
		size_t cap = (p->head_cap ? p->head_cap : 2048) * 2;
		while (cap < p->head_len + need)
			cap *= 2;
		char *h = realloc(p->head, cap);
		if (!h)
			return -1;
		p->head = h;
		p->head_cap = cap;
	}
	p->head_len += (size_t)sprintf(p->head + p->head_len, "%s%s%s", a, b, c);
	return 0;
}

static bool hop_by_hop(const char *name)
{
	static const char *const hop[] = { "connection", "keep-alive", "proxy-connection", "te", "trailer",
		                               "transfer-encoding", "upgrade", "proxy-authorization" };
	for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
		if (strcasecmp(name, hop[i]) == 0)
			return true;
	return false;
}

struct head_ctx {
	struct proxy *p;
	int err;
};

static enum MHD_Result copy_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct head_ctx *hc = cls;

	(void)kind;
	if (!key || !value || strcasecmp(key, "Host") == 0 || strncasecmp(key, "X-Forwarded-", 12) == 0)
		return MHD_YES;
	if (!hc->p->upgrade && hop_by_hop(key))
		return MHD_YES;
	if (strpbrk(key, "\r\n") || strpbrk(value, "\r\n"))
		return MHD_YES;
	if (head_add(hc->p, key, ": ", value) < 0 || head_add(hc->p, "\r\n", "", "") < 0)
		hc->err = -1;
	return MHD_YES;
}

static int build_head(struct aas_req *r, struct proxy *p, unsigned int port)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const char *host = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Host");
	struct head_ctx hc = { p, 0 };
	char line[256], ip[INET6_ADDRSTRLEN] = "";

	if (head_add(p, r->method, " ", r->raw_uri) < 0 || head_add(p, p->upgrade ? " HTTP/1.1" : " HTTP/1.0", "\r\n", "") < 0)
		return -1;
	snprintf(line, sizeof(line), "Host: localhost:%u\r\n", port);
	if (head_add(p, line, "", "") < 0)
		return -1;
	MHD_get_connection_values(r->conn, MHD_HEADER_KIND, copy_header, &hc);
	if (hc.err)
		return -1;
	if (ci && ci->client_addr) {
		const struct sockaddr *sa = ci->client_addr;
		if (sa->sa_family == AF_INET)
			inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, ip, sizeof(ip));
		else if (sa->sa_family == AF_INET6)
			inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, ip, sizeof(ip));
	}
	if ((*ip && head_add(p, "X-Forwarded-For: ", ip, "\r\n") < 0) ||
	    (host && !strpbrk(host, "\r\n") && head_add(p, "X-Forwarded-Host: ", host, "\r\n") < 0) ||
	    head_add(p, "X-Forwarded-Proto: http\r\n", "", "") < 0)
		return -1;
	if (!p->upgrade && head_add(p, "Connection: close\r\n", "", "") < 0)
		return -1;
	return head_add(p, "\r\n", "", "");
}

static bool wants_upgrade(struct aas_req *r)
{
	const char *c = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Connection");
	const char *u = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Upgrade");
	return c && u && strcasestr(c, "upgrade");
}

/* The first call: open the tunnel, send the request head. */
static enum MHD_Result start(struct aas_req *r, unsigned int port, const char *id)
{
	struct proxy *p = calloc(1, sizeof(*p));
	char msg[256];
	int rc;

	if (!p)
		return MHD_NO;
	p->fd = -1;
	r->proxy = p;
	p->upgrade = wants_upgrade(r);
	if (MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Transfer-Encoding") &&
	    !MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Length"))
		return fail(r, 411, "length_required", "preview requests with a body need a Content-Length");
	rc = saas_engine_port_connect(&p->fd, engine, id, port);
	if (rc == SAAS_ENOTFOUND || rc == SAAS_ESTATE || rc == SAAS_EINVAL) {
		snprintf(msg, sizeof(msg), "no preview here: sandbox %s is unknown or not running, or port %u is not exposed",
		         id, port);
		return fail(r, 404, "not_found", msg);
	}
	if (rc < 0) {
		snprintf(msg, sizeof(msg), "nothing answers on port %u inside sandbox %s (is the server started, "
		         "listening on that port?)", port, id);
		return fail(r, rc == SAAS_ENOTSUP ? 501 : 502, saas_error_name(rc), msg);
	}
	if (build_head(r, p, port) < 0)
		return MHD_NO;
	if (send_all(p->fd, p->head, p->head_len) < 0)
		p->failed = true;
	return MHD_YES;
}

/* Read until the end of the response head; returns its length, or -1 (and sets *why). */
static ssize_t read_head(int fd, char *buf, size_t cap, size_t *got, const char **why)
{
	*got = 0;
	for (;;) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		char *end;
		int n = poll(&pfd, 1, HEAD_TIMEOUT_MS);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0) {
			*why = "timeout";
			return -1;
		}
		ssize_t k = recv(fd, buf + *got, cap - 1 - *got, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			*why = "closed";
			return -1;
		}
		*got += (size_t)k;
		buf[*got] = '\0';
		if ((end = strstr(buf, "\r\n\r\n")))
			return end + 4 - buf;
		if (*got >= cap - 1) {
			*why = "toolong";
			return -1;
		}
	}
}

static ssize_t relay_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct relay *rl = cls;
	ssize_t n;

	(void)pos;
	if (rl->extra_off < rl->extra_len) {
		size_t k = rl->extra_len - rl->extra_off;
		if (k > max)
			k = max;
		memcpy(buf, rl->extra + rl->extra_off, k);
		rl->extra_off += k;
		return (ssize_t)k;
	}
	do
		n = recv(rl->fd, buf, max, 0);
	while (n < 0 && errno == EINTR);
	if (n > 0)
		return n;
	return n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void relay_free_cb(void *cls)
{
	relay_free(cls);
}

/* Bridge the upgraded client socket and the tunnel until both directions end. */
static void bridge(void *cls, struct MHD_Connection *conn, void *con_cls, const char *extra_in,
                   size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	struct relay *rl = cls;
	char buf[16384];
	bool up_open = true, down_open = true;

	(void)conn;
	(void)con_cls;
	if ((extra_in_size && send_all(rl->fd, extra_in, extra_in_size) < 0) ||
	    (rl->extra_len && send_all(sock, rl->extra, rl->extra_len) < 0))
		up_open = down_open = false;
	while (up_open || down_open) {
		struct pollfd pf[2] = { { sock, up_open ? POLLIN : 0, 0 }, { rl->fd, down_open ? POLLIN : 0, 0 } };
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (up_open && (pf[0].revents & (POLLIN | POLLHUP | POLLERR))) {
			ssize_t n = recv(sock, buf, sizeof(buf), 0);
			if (n <= 0 || send_all(rl->fd, buf, (size_t)n) < 0) {
				up_open = false;
				shutdown(rl->fd, SHUT_WR);
			}
		}
		if (down_open && (pf[1].revents & (POLLIN | POLLHUP | POLLERR))) {
			ssize_t n = recv(rl->fd, buf, sizeof(buf), 0);
			if (n <= 0 || send_all(sock, buf, (size_t)n) < 0) {
				down_open = false;
				shutdown(sock, SHUT_WR);
			}
		}
	}
	MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
	/* The relay itself is freed with the request (aas_preview_free), which libmicrohttpd ends after this. */
	close(rl->fd);
	rl->fd = -1;
}

struct parsed {
	unsigned int status;
	int64_t length;     /* -1: unknown */
};

/* Parse the status line and headers into resp (created by the caller's choice). */
static int parse_head(char *head, struct parsed *ps)
{
	char *line = head;

	ps->length = -1;
	if (strncmp(line, "HTTP/1.", 7) != 0 || !isdigit((unsigned char)line[9]))
		return -1;
	ps->status = (unsigned int)strtoul(line + 9, NULL, 10);
	if (ps->status < 100 || ps->status > 999)
		return -1;
	return 0;
}

static void add_headers(struct MHD_Response *resp, char *head, struct parsed *ps, bool upgrade)
{
	char *line = strstr(head, "\r\n") + 2, *eol;

	for (; (eol = strstr(line, "\r\n")) && eol != line; line = eol + 2) {
		char *colon;
		*eol = '\0';
		if (!(colon = strchr(line, ':')))
			continue;
		*colon = '\0';
		char *value = colon + 1;
		while (*value == ' ' || *value == '\t')
			value++;
		if (strcasecmp(line, "Content-Length") == 0) {
			ps->length = strtoll(value, NULL, 10);
			continue;
		}
		if (strcasecmp(line, "Date") == 0 || (hop_by_hop(line) && !(upgrade && strcasecmp(line, "Upgrade") == 0)))
			continue;
		MHD_add_response_header(resp, line, value);
	}
}

static enum MHD_Result finish(struct aas_req *r)
{
	struct proxy *p = r->proxy;
	struct aas_reply rep = { 0, NULL };
	struct parsed ps;
	const char *why = "";
	char *buf;
	size_t got;
	ssize_t hlen;
	struct relay *rl;

	if (p->failed)
		return fail(r, 502, "backend_error", "the server inside the sandbox closed the connection");
	if (!(buf = malloc(HEAD_MAX)))
		return MHD_NO;
	hlen = read_head(p->fd, buf, HEAD_MAX, &got, &why);
	if (hlen < 0 || parse_head(buf, &ps) < 0) {
		free(buf);
		if (hlen < 0 && strcmp(why, "timeout") == 0)
			return fail(r, 504, "timeout", "the server inside the sandbox did not answer in time");
		return fail(r, 502, "backend_error",
		            "the server inside the sandbox closed the connection without a valid HTTP answer");
	}
	if (!(rl = calloc(1, sizeof(*rl)))) {
		free(buf);
		return MHD_NO;
	}
	rl->fd = p->fd;
	p->fd = -1;
	rl->extra_len = got - (size_t)hlen;
	if (rl->extra_len && (rl->extra = malloc(rl->extra_len)))
		memcpy(rl->extra, buf + hlen, rl->extra_len);
	else
		rl->extra_len = 0;
	buf[hlen - 2] = '\0'; /* keep the last header's CRLF for the line walk */
	if (p->upgrade && ps.status == 101) {
		p->relay = rl;
		rep.response = MHD_create_response_for_upgrade(bridge, rl);
		if (rep.response)
			add_headers(rep.response, buf, &ps, true);
	} else if (ps.status < 200 || ps.status == 204 || ps.status == 304) {
		rep.response = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
		if (rep.response)
			add_headers(rep.response, buf, &ps, false);
		relay_free(rl);
	} else {
		/* Headers first (they tell the length), then the response that carries them. */
		struct MHD_Response *tmp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
		char *copy = strdup(buf);
		if (tmp && copy)
			add_headers(tmp, copy, &ps, false);
		if (tmp)
			MHD_destroy_response(tmp);
		free(copy);
		if (p->upgrade && ps.length < 0)
			ps.length = 0; /* an HTTP/1.1 answer without a length to an upgrade: no body we can frame */
		rep.response = MHD_create_response_from_callback(ps.length >= 0 ? (uint64_t)ps.length : MHD_SIZE_UNKNOWN,
		                                                 64 * 1024, relay_read, rl, relay_free_cb);
		if (rep.response)
			add_headers(rep.response, buf, &ps, false);
		else
			relay_free(rl);
	}
	free(buf);
	if (!rep.response)
		return MHD_NO;
	rep.status = ps.status;
	return aas_queue(r, &rep);
}

enum MHD_Result aas_preview_handle(struct aas_req *r, unsigned int port, const char *id, const char *upload,
                                   size_t *upload_size)
{
	struct proxy *p = r->proxy;

	if (!p)
		return start(r, port, id);
	if (r->done) {
		*upload_size = 0;
		return MHD_YES;
	}
	if (*upload_size) {
		if (!p->failed && send_all(p->fd, upload, *upload_size) < 0)
			p->failed = true;
		*upload_size = 0;
		return MHD_YES;
	}
	return finish(r);
}
