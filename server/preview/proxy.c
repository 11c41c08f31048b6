/*
 * Preview URLs: http://<name>.<preview-domain>[:port]/... where <name> is an
 * exposure's own unguessable label, proxied to the port it exposes through
 * saas_engine_port_connect().
 *
 * How: for each request, a tunnel is opened and the request is written to it
 * raw (method, path and query as sent, headers with Host rewritten, the body
 * streamed as it arrives). A plain request goes as HTTP/1.0 with
 * "Connection: close", so the server inside answers with a Content-Length or
 * until close (or chunked, if it ignores the version); its answer is read as
 * browsers read it (guest_http.c: bare LF line ends, folded fields and
 * interim answers taken, ambiguous framing refused with 502) and the body
 * relayed as it arrives, unframed (libmicrohttpd frames it anew, re-chunking
 * an unknown length, so streams and server-sent events pass). A WebSocket (any "Connection:
 * Upgrade") goes as HTTP/1.1 untouched; if the server inside answers 101, the
 * client's connection is upgraded too and the two sockets are bridged both
 * ways until either side closes.
 *
 * The name is the capability: no API key, and no need to know the owner, so
 * previews answer from the first request after a restart. A URL shared for one
 * port opens no other, and only exposed ports of ready sandboxes answer.
 *
 * What crosses, and what does not: the API's credentials (Authorization,
 * x-api-key) and this server's own cookies never reach the guest, and a guest's
 * Set-Cookie for any domain but the preview's own host (the preview domain or
 * above, where it would reach every other preview) never reaches the browser.
 *
 * Bounds: a guest's server has a time to take the connection, to answer (the
 * whole response head) and a time it may stay silent (body or WebSocket);
 * past them the client gets 504 or the stream ends. Every open tunnel is
 * registered, so that un-exposing a port or destroying a sandbox closes its
 * tunnels at once (the REST handlers call aas_preview_revoke), and a watcher
 * closes those whose exposure ended any other way (expiry, the reaper, MCP,
 * another server on the same store) within AAS_PREVIEW_RECHECK_MS.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "preview/internal.h"
#include "preview/preview.h"

/* The chain of a trusted proxy passed on to the guest: its last lines that fit, whole. */
#define AAS_PREVIEW_CHAIN_MAX 2048
#define AAS_PREVIEW_CHAIN_LINES 16

#define HEAD_MAX (64 * 1024)
/* How often the watcher re-checks the exposure of every open tunnel. */
#define AAS_PREVIEW_RECHECK_MS 1000
/*
 * This server's own cookies (the dashboard's session and form tokens): never
 * forwarded into a guest. With --secure-cookies they carry a "__Host-" prefix
 * (web/people.c); "__Secure-" is the other prefix a browser knows.
 */
static const char *const own_cookie_prefixes[] = { "aas_", "__Host-aas_", "__Secure-aas_" };

static saas_engine *engine;
static unsigned int connect_ms, first_byte_ms, idle_ms;

/*
 * An open tunnel to a guest's port. The registry holds it from the connect to
 * its close, so a revocation can shut its socket down (waking whoever waits on
 * it) without racing the owner's close().
 */
struct tunnel {
	int fd;
	char sandbox_id[SAAS_ID_MAX + 1];
	unsigned int port;
	char name[SAAS_PREVIEW_NAME_LEN + 1];
	atomic_bool revoked;
	struct tunnel *prev, *next;
};

static pthread_mutex_t tunnels_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watcher_cond = PTHREAD_COND_INITIALIZER;
static struct tunnel *tunnels;
static pthread_t watcher;
static bool watcher_running, stopping;

static pthread_mutex_t dials_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t dials_cond = PTHREAD_COND_INITIALIZER;
static unsigned int dials;      /* connect threads still running: the engine must outlive them */

struct relay {
	struct tunnel *t;
	char *extra;        /* bytes read past the response head */
	size_t extra_len, extra_off;
	enum aas_http_body body;
	uint64_t left;      /* AAS_HTTP_BODY_LENGTH: bytes still to come */
	struct aas_http_chunked chunked;
};

struct proxy {
	struct tunnel *t;
	bool upgrade;
	bool failed;        /* writing the request failed */
	struct relay *relay;
	char *head;         /* request head being built */
	size_t head_len, head_cap;
	char host[256];     /* the preview's host, lowercased, without a port */
};

/* ---- the tunnel registry ---- */

static void revoke_locked(struct tunnel *t)
{
	if (!atomic_exchange(&t->revoked, true))
		shutdown(t->fd, SHUT_RDWR);
}

static void tunnel_register(struct tunnel *t)
{
	pthread_mutex_lock(&tunnels_mu);
	t->prev = NULL;
	t->next = tunnels;
	if (tunnels)
		tunnels->prev = t;
	tunnels = t;
	if (stopping)
		revoke_locked(t);
	pthread_mutex_unlock(&tunnels_mu);
}

static void tunnel_close(struct tunnel *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&tunnels_mu);
	if (t->prev)
		t->prev->next = t->next;
	else if (tunnels == t)
		tunnels = t->next;
	if (t->next)
		t->next->prev = t->prev;
	pthread_mutex_unlock(&tunnels_mu);
	close(t->fd);
	free(t);
}

void aas_preview_revoke(const char *sandbox_id, unsigned int port)
{
	unsigned int n = 0;

	pthread_mutex_lock(&tunnels_mu);
	for (struct tunnel *t = tunnels; t; t = t->next)
		if (strcmp(t->sandbox_id, sandbox_id) == 0 && (port == 0 || t->port == port)) {
			revoke_locked(t);
			n++;
		}
	pthread_mutex_unlock(&tunnels_mu);
	if (n)
		aas_log(SAAS_LOG_INFO, "preview: closed %u tunnel(s) to sandbox %s%s", n, sandbox_id,
		        port ? "'s un-exposed port" : " (it ended)");
}

/* Revoke the tunnels of one exposure, by name (the watcher's view). */
static void revoke_name(const char *name)
{
	pthread_mutex_lock(&tunnels_mu);
	for (struct tunnel *t = tunnels; t; t = t->next)
		if (strcmp(t->name, name) == 0)
			revoke_locked(t);
	pthread_mutex_unlock(&tunnels_mu);
}

/*
 * Every AAS_PREVIEW_RECHECK_MS: is each open tunnel's exposure still there, its
 * sandbox ready and not expired? The names are copied out so that the store is
 * never asked while the registry is locked.
 */
static void *watch(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&tunnels_mu);
	while (!stopping) {
		struct timespec ts;
		char (*names)[SAAS_PREVIEW_NAME_LEN + 1] = NULL;
		size_t n = 0, cap = 0;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += AAS_PREVIEW_RECHECK_MS / 1000;
		ts.tv_nsec += (long)(AAS_PREVIEW_RECHECK_MS % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&watcher_cond, &tunnels_mu, &ts);
		if (stopping)
			break;
		for (struct tunnel *t = tunnels; t; t = t->next)
			cap += !atomic_load(&t->revoked);
		if (cap && !(names = calloc(cap, sizeof(*names))))
			continue;
		for (struct tunnel *t = tunnels; t && n < cap; t = t->next)
			if (!atomic_load(&t->revoked))
				memcpy(names[n++], t->name, sizeof(names[0]));
		pthread_mutex_unlock(&tunnels_mu);
		for (size_t i = 0; i < n; i++) {
			char id[SAAS_ID_MAX + 1];
			unsigned int port;

			/* A store that fails now is not a reason to cut anyone off; only "gone" is. */
			if (saas_engine_preview_find(id, &port, engine, names[i]) == SAAS_ENOTFOUND)
				revoke_name(names[i]);
		}
		free(names);
		pthread_mutex_lock(&tunnels_mu);
	}
	pthread_mutex_unlock(&tunnels_mu);
	return NULL;
}

int aas_preview_init(saas_engine *e, const struct aas_config *cfg)
{
	int rc;

	engine = e;
	connect_ms = cfg->preview_connect_timeout_s * 1000;
	first_byte_ms = cfg->preview_first_byte_timeout_s * 1000;
	idle_ms = cfg->preview_idle_timeout_s * 1000;
	stopping = false;
	if ((rc = pthread_create(&watcher, NULL, watch, NULL)) != 0) {
		aas_log(SAAS_LOG_ERROR, "cannot start the preview watcher: %s", strerror(rc));
		return -1;
	}
	watcher_running = true;
	return 0;
}

void aas_preview_shutdown(void)
{
	pthread_mutex_lock(&tunnels_mu);
	stopping = true;
	for (struct tunnel *t = tunnels; t; t = t->next)
		revoke_locked(t);
	pthread_cond_signal(&watcher_cond);
	pthread_mutex_unlock(&tunnels_mu);
	if (watcher_running)
		pthread_join(watcher, NULL);
	watcher_running = false;
	/* A connect the client gave up on still runs in the engine; the driver bounds it. */
	pthread_mutex_lock(&dials_mu);
	while (dials)
		pthread_cond_wait(&dials_cond, &dials_mu);
	pthread_mutex_unlock(&dials_mu);
}

/* ---- the Host matcher ---- */

bool aas_preview_match(const char *host, const char *domain, char name[SAAS_PREVIEW_NAME_LEN + 1])
{
	char label[SAAS_PREVIEW_NAME_LEN + 2];

	name[0] = '\0';
	/* The floor reads the Host (one reader of host names); a label of another length is a preview not found. */
	if (!aas_host_label(label, sizeof(label), host, domain))
		return false;
	if (strlen(label) == SAAS_PREVIEW_NAME_LEN)
		memcpy(name, label, SAAS_PREVIEW_NAME_LEN + 1);
	return true;
}

static void relay_free(struct relay *rl)
{
	if (!rl)
		return;
	tunnel_close(rl->t);
	free(rl->extra);
	free(rl);
}

void aas_preview_free(struct aas_req *r)
{
	struct proxy *p = r->proxy;

	if (!p)
		return;
	tunnel_close(p->t);
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

/* The API's credentials, and a sandbox's E2B tokens (server/e2b): never into a guest, WebSocket or not. */
static bool credential(const char *name)
{
	return strcasecmp(name, "Authorization") == 0 || strcasecmp(name, "x-api-key") == 0 ||
	       strcasecmp(name, "Proxy-Authorization") == 0 || strcasecmp(name, "X-Access-Token") == 0 ||
	       strcasecmp(name, "e2b-traffic-access-token") == 0;
}

bool aas_preview_cookie_ours(const char *pair, size_t len)
{
	/* Case-insensitive: browsers match the "__Host-" prefix so, and a guest must not see any spelling of ours. */
	for (size_t i = 0; i < sizeof(own_cookie_prefixes) / sizeof(own_cookie_prefixes[0]); i++) {
		size_t n = strlen(own_cookie_prefixes[i]);

		if (len >= n && strncasecmp(pair, own_cookie_prefixes[i], n) == 0)
			return true;
	}
	return false;
}

/* A Cookie header without this server's own cookies; nothing when none is left. */
static int add_cookies(struct proxy *p, const char *value)
{
	const char *c = value;
	bool first = true;

	while (*c) {
		size_t len;

		c += strspn(c, " \t;");
		len = strcspn(c, ";");
		while (len && (c[len - 1] == ' ' || c[len - 1] == '\t'))
			len--;
		if (len && !aas_preview_cookie_ours(c, len)) {
			char *one = strndup(c, len);
			int rc = one ? head_add(p, first ? "Cookie: " : "; ", one, "") : -1;
			free(one);
			if (rc < 0)
				return -1;
			first = false;
		}
		c += strcspn(c, ";");
	}
	return first ? 0 : head_add(p, "\r\n", "", "");
}

struct head_ctx {
	struct proxy *p;
	int err;
};

static enum MHD_Result copy_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct head_ctx *hc = cls;

	(void)kind;
	/* The forwarded headers are forwarded_headers()' to write: the client's own never pass as they came. */
	if (!key || !value || strcasecmp(key, "Host") == 0 || strncasecmp(key, "X-Forwarded-", 12) == 0 ||
	    strcasecmp(key, "Forwarded") == 0 || credential(key))
		return MHD_YES;
	if (!hc->p->upgrade && hop_by_hop(key))
		return MHD_YES;
	if (strpbrk(key, "\r\n") || strpbrk(value, "\r\n"))
		return MHD_YES;
	if (strcasecmp(key, "Cookie") == 0) {
		if (add_cookies(hc->p, value) < 0)
			hc->err = -1;
		return MHD_YES;
	}
	if (head_add(hc->p, key, ": ", value) < 0 || head_add(hc->p, "\r\n", "", "") < 0)
		hc->err = -1;
	return MHD_YES;
}

/* The last lines of header `name` that fit in AAS_PREVIEW_CHAIN_MAX bytes, joined by ", "; "" for none. */
static void chain_received(struct MHD_Connection *conn, const char *name, char *buf, size_t size)
{
	const char *v[AAS_PREVIEW_CHAIN_LINES];
	size_t n = aas_forwarded_lines(conn, name, v, AAS_PREVIEW_CHAIN_LINES), first = n, len = 0;

	/* From the right: a proxy's own elements are the last ones, and the ones kept. No line breaks a head. */
	while (first > 0 && len + strlen(v[first - 1]) + 2 < size && !strpbrk(v[first - 1], "\r\n")) {
		len += strlen(v[first - 1]) + 2;
		first--;
	}
	buf[0] = '\0';
	for (size_t i = first; i < n; i++)
		snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", i > first ? ", " : "", v[i]);
}

/*
 * X-Forwarded-For (and, when the trusted proxies write it, Forwarded) for the
 * guest. From a trusted proxy, the chain it sent with the peer appended, as a
 * proxy does; from anyone else only the peer: a client's own claims are not
 * passed on as if this server had checked them. X-Forwarded-Proto is "http":
 * what the guest's connection is; a TLS proxy in front says so itself only
 * when it is trusted, in the chain.
 */
static int forwarded_headers(struct aas_req *r, struct proxy *p)
{
	const struct sockaddr *peer = aas_peer_address(r->conn);
	bool trusted = aas_proxy_trusted(peer), rfc = strcmp(aas_forwarded_header_name(), "Forwarded") == 0;
	char ip[INET6_ADDRSTRLEN] = "", chain[AAS_PREVIEW_CHAIN_MAX];

	if (peer && peer->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)peer)->sin_addr, ip, sizeof(ip));
	else if (peer && peer->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)peer)->sin6_addr, ip, sizeof(ip));
	if (!*ip)
		return 0;
	chain[0] = '\0';
	if (trusted && !rfc)
		chain_received(r->conn, "X-Forwarded-For", chain, sizeof(chain));
	if (head_add(p, "X-Forwarded-For: ", chain, *chain ? ", " : "") < 0 || head_add(p, ip, "\r\n", "") < 0)
		return -1;
	if (trusted && rfc) {
		chain_received(r->conn, "Forwarded", chain, sizeof(chain));
		/* RFC 7239: an IPv6 node is quoted and bracketed. */
		if (head_add(p, "Forwarded: ", chain, *chain ? ", " : "") < 0 ||
		    head_add(p, strchr(ip, ':') ? "for=\"[" : "for=", ip, strchr(ip, ':') ? "]\"\r\n" : "\r\n") < 0)
			return -1;
	}
	return 0;
}

static int build_head(struct aas_req *r, struct proxy *p, unsigned int port)
{
	const char *host = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Host");
	struct head_ctx hc = { p, 0 };
	char line[256];

	if (head_add(p, r->method, " ", r->raw_uri) < 0 || head_add(p, p->upgrade ? " HTTP/1.1" : " HTTP/1.0", "\r\n", "") < 0)
		return -1;
	snprintf(line, sizeof(line), "Host: localhost:%u\r\n", port);
	if (head_add(p, line, "", "") < 0)
		return -1;
	MHD_get_connection_values(r->conn, MHD_HEADER_KIND, copy_header, &hc);
	if (hc.err)
		return -1;
	if (forwarded_headers(r, p) < 0 ||
	    (host && !strpbrk(host, "\r\n") && head_add(p, "X-Forwarded-Host: ", host, "\r\n") < 0) ||
	    head_add(p, "X-Forwarded-Proto: http\r\n", "", "") < 0)
		return -1;
	if (!p->upgrade && head_add(p, "Connection: close\r\n", "", "") < 0)
		return -1;
	return head_add(p, "\r\n", "", "");
}

/* ---- opening a tunnel within the connect timeout ---- */

/*
 * The driver's connect is bounded by its own deadlines, which may be longer
 * than a client should wait: it runs on a thread of its own, and a client that
 * stops waiting leaves it to close what it opens. Whichever side finishes
 * last frees it.
 */
struct dial {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	char sandbox_id[SAAS_ID_MAX + 1];
	unsigned int port;
	int fd, rc;
	bool done, abandoned;
};


static void dial_free(struct dial *d)
{
	pthread_mutex_destroy(&d->mu);
	pthread_cond_destroy(&d->cond);
	free(d);
}

static void *dial_main(void *arg)
{
	struct dial *d = arg;
	int fd = -1, rc = saas_engine_port_connect(&fd, engine, d->sandbox_id, d->port);
	bool abandoned;

	pthread_mutex_lock(&d->mu);
	d->fd = fd;
	d->rc = rc;
	d->done = true;
	abandoned = d->abandoned;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->mu);
	if (abandoned) {
		if (fd >= 0)
			close(fd);
		dial_free(d);
	}
	pthread_mutex_lock(&dials_mu);
	if (--dials == 0)
		pthread_cond_broadcast(&dials_cond);
	pthread_mutex_unlock(&dials_mu);
	return NULL;
}

/* Open a tunnel to the port: SAAS_OK and *fd, a saas_status, or SAAS_ETIMEOUT after connect_ms. */
static int dial(int *fd, const char *sandbox_id, unsigned int port)
{
	struct dial *d = calloc(1, sizeof(*d));
	pthread_attr_t attr;
	pthread_t tid;
	struct timespec ts;
	int rc;

	*fd = -1;
	if (!d)
		return SAAS_ENOMEM;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cond, NULL);
	snprintf(d->sandbox_id, sizeof(d->sandbox_id), "%s", sandbox_id);
	d->port = port;
	d->fd = -1;
	pthread_mutex_lock(&dials_mu);
	dials++;
	pthread_mutex_unlock(&dials_mu);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&tid, &attr, dial_main, d);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		pthread_mutex_lock(&dials_mu);
		dials--;
		pthread_mutex_unlock(&dials_mu);
		dial_free(d);
		return SAAS_ENOMEM;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += connect_ms / 1000;
	ts.tv_nsec += (long)(connect_ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&d->mu);
	while (!d->done && pthread_cond_timedwait(&d->cond, &d->mu, &ts) == 0)
		;
	if (!d->done) {
		d->abandoned = true;
		pthread_mutex_unlock(&d->mu);
		return SAAS_ETIMEOUT;
	}
	pthread_mutex_unlock(&d->mu);
	*fd = d->fd;
	rc = d->rc;
	dial_free(d);
	return rc;
}

/* ---- a request ---- */

static const char *const gone =
	"no preview here: this URL is unknown, its port is no longer exposed, or its sandbox is not running";

/* The first call: find the exposure, open the tunnel, send the request head. */
static enum MHD_Result start(struct aas_req *r, const char *name)
{
	struct proxy *p = calloc(1, sizeof(*p));
	const char *host = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Host");
	char msg[256], id[SAAS_ID_MAX + 1];
	unsigned int port = 0;
	size_t n;
	int rc, fd = -1;

	if (!p)
		return MHD_NO;
	r->proxy = p;
	for (n = 0; host && host[n] && host[n] != ':' && n + 1 < sizeof(p->host); n++)
		p->host[n] = (char)tolower((unsigned char)host[n]);
	p->host[n] = '\0';
	p->upgrade = aas_wants_upgrade(r);
	if (MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Transfer-Encoding") &&
	    !MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Length"))
		return fail(r, 411, "length_required", "preview requests with a body need a Content-Length");
	rc = *name ? saas_engine_preview_find(id, &port, engine, name) : SAAS_ENOTFOUND;
	if (rc == SAAS_ENOTFOUND)
		return fail(r, 404, "not_found", gone);
	if (rc < 0) {
		/* The store failed: nothing is known about the guest, and nothing of the store is told. */
		aas_log(SAAS_LOG_ERROR, "preview: looking a name up failed: %s", saas_error_last()->message);
		return fail(r, aas_status_for(rc), saas_error_name(rc), "this preview cannot be looked up now; retry shortly");
	}
	rc = dial(&fd, id, port);
	if (rc == SAAS_ENOTFOUND || rc == SAAS_ESTATE)
		return fail(r, 404, "not_found", gone);
	if (rc == SAAS_ETIMEOUT) {
		snprintf(msg, sizeof(msg), "the sandbox did not open a connection to port %u within %u s", port,
		         connect_ms / 1000);
		return fail(r, 504, "timeout", msg);
	}
	if (rc < 0) {
		snprintf(msg, sizeof(msg), "nothing answers on port %u inside the sandbox (is the server started, "
		         "listening on that port?)", port);
		return fail(r, rc == SAAS_ENOTSUP ? 501 : 502, saas_error_name(rc), msg);
	}
	if (!(p->t = calloc(1, sizeof(*p->t)))) {
		close(fd);
		return MHD_NO;
	}
	p->t->fd = fd;
	snprintf(p->t->sandbox_id, sizeof(p->t->sandbox_id), "%s", id);
	p->t->port = port;
	memcpy(p->t->name, name, sizeof(p->t->name));
	aas_send_timeout(fd, idle_ms);
	tunnel_register(p->t);
	if (build_head(r, p, port) < 0)
		return MHD_NO;
	if (aas_send_all(fd, p->head, p->head_len) < 0)
		p->failed = true;
	return MHD_YES;
}

/*
 * Read until the end of a response head in buf, which holds *got bytes already
 * (what followed an interim answer), by `deadline`; its length, or -1 (and *why).
 */
static ssize_t read_head(struct tunnel *t, char *buf, size_t cap, size_t *got, int64_t deadline, const char **why)
{
	struct timespec now;
	size_t from = 0, end;

	if ((end = aas_http_head_end(buf, *got, &from)))
		return (ssize_t)end;
	for (;;) {
		struct pollfd pfd = { t->fd, POLLIN, 0 };
		int64_t left;
		int n;

		clock_gettime(CLOCK_MONOTONIC, &now);
		left = deadline - ((int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000);
		n = left > 0 ? poll(&pfd, 1, (int)left) : 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (atomic_load(&t->revoked)) {
			*why = "revoked";
			return -1;
		}
		if (n == 0) {
			*why = "timeout";
			return -1;
		}
		ssize_t k = recv(t->fd, buf + *got, cap - 1 - *got, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			*why = "closed";
			return -1;
		}
		*got += (size_t)k;
		buf[*got] = '\0';
		if ((end = aas_http_head_end(buf, *got, &from)))
			return (ssize_t)end;
		if (*got >= cap - 1) {
			*why = "toolong";
			return -1;
		}
	}
}

/* The next raw bytes from the guest: what came with the head first, then the socket. 0 at EOF, -1 on error. */
static ssize_t relay_raw(struct relay *rl, char *buf, size_t max)
{
	struct pollfd pfd = { rl->t->fd, POLLIN, 0 };
	ssize_t n;
	int ready;

	if (rl->extra_off < rl->extra_len) {
		size_t k = rl->extra_len - rl->extra_off;
		if (k > max)
			k = max;
		memcpy(buf, rl->extra + rl->extra_off, k);
		rl->extra_off += k;
		return (ssize_t)k;
	}
	do
		ready = poll(&pfd, 1, (int)idle_ms);
	while (ready < 0 && errno == EINTR);
	/* Silent past the idle timeout, or closed under us. */
	if (ready <= 0 || atomic_load(&rl->t->revoked))
		return -1;
	do
		n = recv(rl->t->fd, buf, max, 0);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -1 : n;
}

/*
 * The body, unframed as the guest framed it (libmicrohttpd frames it anew for
 * the client). A body cut short, or a bad chunk, ends the client's body with
 * an error rather than as complete.
 */
static ssize_t relay_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct relay *rl = cls;
	ssize_t n;

	(void)pos;
	switch (rl->body) {
	case AAS_HTTP_BODY_LENGTH:
		if (!rl->left)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (max > rl->left)
			max = (size_t)rl->left;
		if ((n = relay_raw(rl, buf, max)) <= 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		rl->left -= (uint64_t)n;
		return n;
	case AAS_HTTP_BODY_CHUNKED:
		/* Framing bytes give no payload: read on until some, or the end. */
		for (;;) {
			if (aas_http_chunked_done(&rl->chunked))
				return MHD_CONTENT_READER_END_OF_STREAM;
			if (aas_http_chunked(&rl->chunked, buf, 0) < 0 || (n = relay_raw(rl, buf, max)) <= 0 || (n = aas_http_chunked(&rl->chunked, buf, (size_t)n)) < 0) {
				if (n < 0)
					aas_log(SAAS_LOG_DEBUG, "preview: a bad chunk in a guest's answer; body cut");
				return MHD_CONTENT_READER_END_WITH_ERROR;
			}
			if (n > 0)
				return n;
		}
	case AAS_HTTP_BODY_NONE:
		return MHD_CONTENT_READER_END_OF_STREAM;
	case AAS_HTTP_BODY_CLOSE:
		break;
	}
	n = relay_raw(rl, buf, max);
	if (n > 0)
		return n;
	return n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void relay_free_cb(void *cls)
{
	relay_free(cls);
}

/*
 * Bridge the upgraded client socket and the tunnel until both directions end,
 * both stay silent for the idle timeout, or the tunnel is revoked.
 */
static void bridge(void *cls, struct MHD_Connection *conn, void *con_cls, const char *extra_in,
                   size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	struct relay *rl = cls;
	struct tunnel *t = rl->t;
	char buf[16384];
	bool up_open = true, down_open = true;

	(void)conn;
	(void)con_cls;
	aas_send_timeout(sock, idle_ms);
	if ((extra_in_size && aas_send_all(t->fd, extra_in, extra_in_size) < 0) ||
	    (rl->extra_len && aas_send_all(sock, rl->extra, rl->extra_len) < 0))
		up_open = down_open = false;
	while ((up_open || down_open) && !atomic_load(&t->revoked)) {
		struct pollfd pf[2] = { { sock, up_open ? POLLIN : 0, 0 }, { t->fd, down_open ? POLLIN : 0, 0 } };
		int n = poll(pf, 2, (int)idle_ms);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (n == 0 || atomic_load(&t->revoked))
			break;
		if (up_open && (pf[0].revents & (POLLIN | POLLHUP | POLLERR))) {
			ssize_t k = recv(sock, buf, sizeof(buf), 0);
			if (k <= 0 || aas_send_all(t->fd, buf, (size_t)k) < 0) {
				up_open = false;
				shutdown(t->fd, SHUT_WR);
			}
		}
		if (down_open && (pf[1].revents & (POLLIN | POLLHUP | POLLERR))) {
			ssize_t k = recv(t->fd, buf, sizeof(buf), 0);
			if (k <= 0 || aas_send_all(sock, buf, (size_t)k) < 0) {
				down_open = false;
				shutdown(sock, SHUT_WR);
			}
		}
	}
	MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
	/* The relay and its tunnel are freed with the request (aas_preview_free), which libmicrohttpd ends after this. */
}

/*
 * May this Set-Cookie from a guest reach the browser? Only for the preview's
 * own host: a Domain attribute naming anything else (the preview domain or
 * above) would hand the cookie to every other preview, or to the API.
 */
bool aas_preview_cookie_ok(const char *set_cookie, const char *host)
{
	const char *a = strchr(set_cookie, ';');

	while (a) {
		const char *v, *end;
		size_t len;

		a += 1 + strspn(a + 1, " \t");
		end = a + strcspn(a, ";");
		if (strncasecmp(a, "domain", 6) == 0 && (v = a + 6 + strspn(a + 6, " \t")) < end && *v == '=') {
			v += 1 + strspn(v + 1, " \t");
			if (*v == '.')
				v++;
			len = (size_t)(end - v);
			while (len && (v[len - 1] == ' ' || v[len - 1] == '\t'))
				len--;
			if (len != strlen(host) || strncasecmp(v, host, len) != 0)
				return false;
		}
		a = *end ? end : NULL;
	}
	return true;
}

static void add_headers(struct MHD_Response *resp, const struct aas_http_head *h, bool upgrade, const char *host)
{
	for (size_t i = 0; i < h->nfields; i++) {
		const char *name = h->fields[i].name, *value = h->fields[i].value;

		/* The framing is libmicrohttpd's to write for the client. */
		if (strcasecmp(name, "Content-Length") == 0 || strcasecmp(name, "Date") == 0 ||
		    (hop_by_hop(name) && !(upgrade && strcasecmp(name, "Upgrade") == 0)))
			continue;
		if (strcasecmp(name, "Set-Cookie") == 0 && !aas_preview_cookie_ok(value, host)) {
			aas_log(SAAS_LOG_DEBUG, "preview: dropped a Set-Cookie for another domain than %s", host);
			continue;
		}
		MHD_add_response_header(resp, name, value);
	}
}

static enum MHD_Result finish(struct aas_req *r)
{
	struct proxy *p = r->proxy;
	struct aas_reply rep = { 0, NULL };
	struct aas_http_head h = { 0 };
	struct timespec now;
	const char *why = "";
	char *buf, msg[200];
	size_t got = 0;
	ssize_t hlen;
	int64_t deadline;
	struct relay *rl;

	if (atomic_load(&p->t->revoked))
		return fail(r, 404, "not_found", gone);
	if (p->failed)
		return fail(r, 502, "backend_error", "the server inside the sandbox closed the connection");
	if (!(buf = malloc(HEAD_MAX)))
		return MHD_NO;
	clock_gettime(CLOCK_MONOTONIC, &now);
	deadline = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 + first_byte_ms;
	/* Interim answers (1xx but a 101 to an upgrade) are skipped, as clients do; HEAD_MAX bounds them all. */
	for (;;) {
		hlen = read_head(p->t, buf, HEAD_MAX, &got, deadline, &why);
		if (hlen < 0)
			break;
		if (aas_http_head_parse(buf, (size_t)hlen, &h, &why) < 0) {
			aas_log(SAAS_LOG_DEBUG, "preview: a guest's answer refused: %s", why);
			snprintf(msg, sizeof(msg), "the server inside the sandbox answered with %s", why);
			free(buf);
			return fail(r, 502, "backend_error", msg);
		}
		if (h.status >= 200 || (p->upgrade && h.status == 101))
			break;
		aas_http_head_free(&h);
		memmove(buf, buf + hlen, got - (size_t)hlen);
		got -= (size_t)hlen;
	}
	if (hlen < 0) {
		free(buf);
		if (strcmp(why, "revoked") == 0)
			return fail(r, 404, "not_found", gone);
		if (strcmp(why, "timeout") == 0) {
			snprintf(msg, sizeof(msg), "the server inside the sandbox did not answer within %u s", first_byte_ms / 1000);
			return fail(r, 504, "timeout", msg);
		}
		return fail(r, 502, "backend_error",
		            "the server inside the sandbox closed the connection without a valid HTTP answer");
	}
	if (!(rl = calloc(1, sizeof(*rl)))) {
		aas_http_head_free(&h);
		free(buf);
		return MHD_NO;
	}
	rl->t = p->t;
	p->t = NULL;
	rl->extra_len = got - (size_t)hlen;
	if (rl->extra_len && (rl->extra = malloc(rl->extra_len)))
		memcpy(rl->extra, buf + hlen, rl->extra_len);
	else
		rl->extra_len = 0;
	rl->body = h.body;
	rl->left = h.length > 0 ? (uint64_t)h.length : 0;
	if (p->upgrade && h.status == 101) {
		p->relay = rl;
		rep.response = MHD_create_response_for_upgrade(bridge, rl);
		if (rep.response)
			add_headers(rep.response, &h, true, p->host);
	} else if (h.body == AAS_HTTP_BODY_NONE) {
		rep.response = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
		if (rep.response)
			add_headers(rep.response, &h, false, p->host);
		relay_free(rl);
	} else {
		int64_t size = h.body == AAS_HTTP_BODY_LENGTH ? h.length : -1;
		if (p->upgrade && size < 0) {
			size = 0; /* an HTTP/1.1 answer without a length to an upgrade: no body we can frame */
			rl->body = AAS_HTTP_BODY_LENGTH;
			rl->left = 0;
		}
		rep.response = MHD_create_response_from_callback(size >= 0 ? (uint64_t)size : MHD_SIZE_UNKNOWN, 64 * 1024,
		                                                 relay_read, rl, relay_free_cb);
		if (rep.response)
			add_headers(rep.response, &h, false, p->host);
		else
			relay_free(rl);
	}
	rep.status = h.status;
	aas_http_head_free(&h);
	free(buf);
	if (!rep.response)
		return MHD_NO;
	return aas_queue(r, &rep);
}

enum MHD_Result aas_preview_handle(struct aas_req *r, const char *name, const char *upload, size_t *upload_size)
{
	struct proxy *p = r->proxy;

	if (!p)
		return start(r, name);
	if (r->done) {
		*upload_size = 0;
		return MHD_YES;
	}
	if (*upload_size) {
		if (!p->failed && aas_send_all(p->t->fd, upload, *upload_size) < 0)
			p->failed = true;
		*upload_size = 0;
		return MHD_YES;
	}
	return finish(r);
}
