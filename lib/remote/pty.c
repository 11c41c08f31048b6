/*
 * The remote provider's terminal: GET /v1/sandboxes/{id}/pty upgraded to a
 * WebSocket (docs/rest.md, "Terminal"). libcurl makes the connection (TLS
 * included) and stops there (CONNECT_ONLY); the handshake and the frames are
 * ours (wire/ws.h). A thread bridges the WebSocket to a socket pair, so the
 * session is a stream socket like a local one: binary frames carry the
 * terminal's bytes, text frames its size, end-of-input and exit status.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "remote/http.h"
#include "wire/ws.h"

/* The largest frame taken from the server; it sends at most 32 KiB of output in one. */
#define RPTY_FRAME_MAX (64u << 10)
#define RPTY_HEAD_MAX (16u << 10)
#define RPTY_POLL_MS 20
/* The longest request target (path and query) sent: what the server's route takes (server/api/pty.c). */
#define RPTY_TARGET_MAX (32u << 10)

struct rpty {
	CURL *h;
	curl_socket_t sock;
	pthread_mutex_t send_mu;   /* curl_easy_send from the pump and from resize */
	pthread_t tid;
	int fd;                    /* the pump's end of the pair */
	int stop;                  /* __atomic: the owner hangs up */
	int exit_status;           /* from the server's exit message; -1 until then */
	unsigned char in[SAAS_WS_HEAD_MAX + RPTY_FRAME_MAX];
	size_t in_len;
};

static int wait_sock(curl_socket_t s, short events, int ms)
{
	struct pollfd pf = { s, events, 0 };
	int n;

	do
		n = poll(&pf, 1, ms);
	while (n < 0 && errno == EINTR);
	return n;
}

/* Send all of buf; mu held by the caller when the pump runs. */
static int ws_send_raw(struct rpty *p, const void *buf, size_t len)
{
	const char *c = buf;

	while (len) {
		size_t n = 0;
		CURLcode cc = curl_easy_send(p->h, c, len, &n);
		if (cc == CURLE_AGAIN) {
			if (wait_sock(p->sock, POLLOUT, 1000) < 0)
				return -1;
			continue;
		}
		if (cc != CURLE_OK)
			return -1;
		c += n;
		len -= n;
	}
	return 0;
}

/* One frame from us: masked, as RFC 6455 wants of a client. */
static int ws_send(struct rpty *p, int opcode, const void *data, size_t len)
{
	unsigned char head[SAAS_WS_HEAD_MAX], mask[4], chunk[4096];
	size_t hl, off = 0;
	int rc = 0;

	if (saas__random(mask, sizeof(mask)) < 0)
		return -1;
	hl = saas__ws_head(head, opcode, len, mask);
	pthread_mutex_lock(&p->send_mu);
	if (ws_send_raw(p, head, hl) < 0)
		rc = -1;
	while (!rc && off < len) {
		size_t k = len - off < sizeof(chunk) ? len - off : sizeof(chunk);
		memcpy(chunk, (const char *)data + off, k);
		saas__ws_unmask(chunk, k, mask, off);
		rc = ws_send_raw(p, chunk, k);
		off += k;
	}
	pthread_mutex_unlock(&p->send_mu);
	return rc;
}

static int send_all_fd(int fd, const void *data, size_t len)
{
	const char *c = data;

	while (len) {
		ssize_t n = send(fd, c, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		c += n;
		len -= (size_t)n;
	}
	return 0;
}

/* A text frame from the server: {"type":"exit","status":N}; anything else is ignored, as new types may come. */
static void on_text(struct rpty *p, const unsigned char *data, size_t len)
{
	json_t *j = json_loadb((const char *)data, len, 0, NULL);
	const char *type = json_string_value(json_object_get(j, "type"));
	json_t *st = json_object_get(j, "status");

	if (type && strcmp(type, "exit") == 0 && json_is_integer(st))
		p->exit_status = (int)json_integer_value(st);
	json_decref(j);
}

/* Take the whole frames in p->in; 1 once the server closed, -1 on a protocol error. */
static int take_frames(struct rpty *p)
{
	for (;;) {
		struct saas__ws_frame f;
		int r = saas__ws_frame_parse(p->in, p->in_len, &f);
		size_t whole;

		if (r < 0 || (r == 1 && (f.masked || f.len > RPTY_FRAME_MAX)))
			return -1;
		if (r == 0 || p->in_len - f.head < f.len)
			return 0;
		whole = f.head + (size_t)f.len;
		switch (f.opcode) {
		case SAAS_WS_BINARY:
		case SAAS_WS_CONT:
			if (f.len && send_all_fd(p->fd, p->in + f.head, (size_t)f.len) < 0)
				return -1;
			break;
		case SAAS_WS_TEXT: on_text(p, p->in + f.head, (size_t)f.len); break;
		case SAAS_WS_PING: ws_send(p, SAAS_WS_PONG, p->in + f.head, (size_t)f.len); break;
		case SAAS_WS_CLOSE: return 1;
		default: break;
		}
		memmove(p->in, p->in + whole, p->in_len - whole);
		p->in_len -= whole;
	}
}

static void *rpty_main(void *arg)
{
	struct rpty *p = arg;
	unsigned char buf[16384];
	int local_eof = 0;

	for (;;) {
		struct pollfd pf[2] = { { p->sock, POLLIN, 0 }, { p->fd, (short)(local_eof ? 0 : POLLIN), 0 } };
		size_t n = 0;
		CURLcode cc;

		if (__atomic_load_n(&p->stop, __ATOMIC_SEQ_CST))
			break;
		/* TLS may hold decrypted bytes the socket no longer shows: try the read whatever poll says. */
		poll(pf, 2, RPTY_POLL_MS);
		pthread_mutex_lock(&p->send_mu);
		cc = curl_easy_recv(p->h, p->in + p->in_len, sizeof(p->in) - p->in_len, &n);
		pthread_mutex_unlock(&p->send_mu);
		if (cc == CURLE_OK && n == 0)
			break; /* the server went without a close frame */
		if (cc == CURLE_OK) {
			p->in_len += n;
			if (take_frames(p) != 0)
				break;
		} else if (cc != CURLE_AGAIN) {
			break;
		}
		if (pf[1].revents & (POLLIN | POLLHUP)) {
			ssize_t k = recv(p->fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (k > 0) {
				if (ws_send(p, SAAS_WS_BINARY, buf, (size_t)k) < 0)
					break;
			} else if (k == 0) {
				local_eof = 1;
				if (ws_send(p, SAAS_WS_TEXT, "{\"type\":\"eof\"}", 14) < 0)
					break;
			} else if (errno != EAGAIN && errno != EINTR) {
				break;
			}
		}
	}
	/* The owner reads the end; the exit status is in by then. */
	shutdown(p->fd, SHUT_RDWR);
	return NULL;
}

static int rpty_resize(saas_pty *pty, unsigned int cols, unsigned int rows)
{
	struct rpty *p = pty->provider;
	char msg[96];
	int n = snprintf(msg, sizeof(msg), "{\"type\":\"resize\",\"cols\":%u,\"rows\":%u}", cols, rows);

	if (ws_send(p, SAAS_WS_TEXT, msg, (size_t)n) < 0)
		return saas__error(SAAS_ENETWORK, SAAS_ERRCLASS_HTTP, 0, "the terminal's connection is gone");
	return SAAS_OK;
}

static void rpty_free(struct rpty *p)
{
	if (p->h)
		curl_easy_cleanup(p->h);
	if (p->fd >= 0)
		close(p->fd);
	pthread_mutex_destroy(&p->send_mu);
	free(p);
}

static void rpty_close(saas_pty *pty, int *exit_status)
{
	struct rpty *p = pty->provider;
	static const unsigned char bye[2] = { 0x03, 0xe8 }; /* 1000: normal closure */

	__atomic_store_n(&p->stop, 1, __ATOMIC_SEQ_CST);
	pthread_join(p->tid, NULL);
	ws_send(p, SAAS_WS_CLOSE, bye, sizeof(bye));
	*exit_status = p->exit_status;
	rpty_free(p);
	pty->provider = NULL;
}

static const struct saas__pty_ops rpty_ops = { .resize = rpty_resize, .close = rpty_close };

/* Read the answer's head (and what follows it in the same reads) into p->in; its length, or an error. */
static int read_head(struct saas_remote *r, struct rpty *p, size_t *head_len)
{
	int64_t deadline = saas__now_ms() + r->timeout_ms;

	for (;;) {
		size_t n = 0;
		CURLcode cc;
		char *end;

		p->in[p->in_len] = '\0';
		if ((end = strstr((char *)p->in, "\r\n\r\n"))) {
			*head_len = (size_t)(end + 4 - (char *)p->in);
			return SAAS_OK;
		}
		if (p->in_len >= RPTY_HEAD_MAX)
			return saas__error(SAAS_EPROTOCOL, SAAS_ERRCLASS_HTTP, 0, "the server's answer to the terminal has no end");
		cc = curl_easy_recv(p->h, p->in + p->in_len, RPTY_HEAD_MAX - p->in_len, &n);
		if (cc == CURLE_AGAIN) {
			int64_t left = deadline - saas__now_ms();
			if (left <= 0)
				return saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_HTTP, 0, "the server did not answer the terminal's request");
			wait_sock(p->sock, POLLIN, left > 1000 ? 1000 : (int)left);
			continue;
		}
		if (cc != CURLE_OK || n == 0)
			return saas__error(SAAS_ENETWORK, SAAS_ERRCLASS_HTTP, 0, "the server closed the terminal's connection: %s",
			                   curl_easy_strerror(cc));
		p->in_len += n;
	}
}

/* A refusal: its status and JSON error body, read to Content-Length (bounded by what fits). */
static int refusal(struct saas_remote *r, struct rpty *p, size_t head_len, long status)
{
	const char *cl = strcasestr((const char *)p->in, "\r\ncontent-length:");
	size_t want = cl ? strtoul(cl + 17, NULL, 10) : 0;
	int64_t deadline = saas__now_ms() + r->timeout_ms;
	saas__buf body = SAAS__BUF_INIT;
	int rc;

	if (want > sizeof(p->in) - head_len - 1)
		want = sizeof(p->in) - head_len - 1;
	while (p->in_len - head_len < want && saas__now_ms() < deadline) {
		size_t n = 0;
		CURLcode cc = curl_easy_recv(p->h, p->in + p->in_len, head_len + want - p->in_len, &n);
		if (cc == CURLE_AGAIN) {
			wait_sock(p->sock, POLLIN, 200);
			continue;
		}
		if (cc != CURLE_OK || n == 0)
			break;
		p->in_len += n;
	}
	saas__buf_put(&body, p->in + head_len, p->in_len - head_len);
	rc = saas__http_error_from_body(status, &body);
	saas__buf_free(&body);
	return rc;
}

/*
 * The directory and the variables as query parameters (cwd=, env= once per
 * variable) on *url, which is replaced. They travel in the request line, which
 * the server bounds (docs/rest.md, "Terminal"): past RPTY_TARGET_MAX bytes the
 * call is refused here, with a message saying what to do instead, rather than
 * by the server's bare 414.
 */
static int url_add_start(char **url, size_t base_len, const struct saas__pty_req *req)
{
	saas__buf b = SAAS__BUF_INIT;
	char *esc = NULL;
	int rc;

	if ((rc = saas__buf_puts(&b, *url)) < 0)
		goto out;
	if (req->cwd) {
		if (!(esc = saas__url_escape(req->cwd)) || (rc = saas__buf_puts(&b, "&cwd=")) < 0 ||
		    (rc = saas__buf_puts(&b, esc)) < 0) {
			rc = saas__oom();
			goto out;
		}
		free(esc);
		esc = NULL;
	}
	for (const char *const *e = req->env; e && *e; e++) {
		if (!(esc = saas__url_escape(*e)) || (rc = saas__buf_puts(&b, "&env=")) < 0 ||
		    (rc = saas__buf_puts(&b, esc)) < 0) {
			rc = saas__oom();
			goto out;
		}
		free(esc);
		esc = NULL;
		if (b.len - base_len > RPTY_TARGET_MAX)
			break;
	}
	if (b.len - base_len > RPTY_TARGET_MAX) {
		rc = saas__inval("a remote terminal's cwd and env take at most %u bytes of its request, URL-encoded; "
		                 "give larger variables to the sandbox at create (envs) instead", RPTY_TARGET_MAX);
		goto out;
	}
	free(*url);
	*url = b.data;
	b.data = NULL;
	rc = SAAS_OK;
out:
	free(esc);
	saas__buf_free(&b);
	return rc;
}

int saas__remote_pty_open(saas_client *c, const char *id, const struct saas__pty_req *req, saas_pty **out)
{
	struct saas_remote *r = c->provider;
	struct rpty *p = NULL;
	saas_pty *pty = NULL;
	unsigned char nonce[16];
	char accept[29], *key = NULL, *url = NULL, *eid = NULL, *reqtext = NULL;
	const char *host, *line;
	int sv[2] = { -1, -1 };
	curl_socket_t sock = CURL_SOCKET_BAD;
	long status = 0;
	size_t head_len = 0;
	CURLcode cc;
	int rc;

	if (!(p = calloc(1, sizeof(*p))) || !(pty = calloc(1, sizeof(*pty)))) {
		rc = saas__oom();
		goto fail;
	}
	p->fd = -1;
	p->exit_status = -1;
	pthread_mutex_init(&p->send_mu, NULL);
	if (!(eid = saas__url_escape(id)) ||
	    asprintf(&url, "%s/v1/sandboxes/%s/pty?cols=%u&rows=%u&term=%s&tty=%s", r->base, eid, req->cols, req->rows,
	             req->term, req->tty ? "true" : "false") < 0) {
		url = NULL;
		rc = saas__oom();
		goto fail;
	}
	if ((req->cwd || req->env) && (rc = url_add_start(&url, strlen(r->base), req)) < 0)
		goto fail;
	if (!(p->h = curl_easy_init())) {
		rc = saas__oom();
		goto fail;
	}
	curl_easy_setopt(p->h, CURLOPT_URL, url);
	curl_easy_setopt(p->h, CURLOPT_CONNECT_ONLY, 1L);
	curl_easy_setopt(p->h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(p->h, CURLOPT_CONNECTTIMEOUT_MS, r->connect_timeout_ms);
	curl_easy_setopt(p->h, CURLOPT_SSL_VERIFYPEER, r->verify_tls ? 1L : 0L);
	curl_easy_setopt(p->h, CURLOPT_SSL_VERIFYHOST, r->verify_tls ? 2L : 0L);
	if (r->ca_file)
		curl_easy_setopt(p->h, CURLOPT_CAINFO, r->ca_file);
	if ((cc = curl_easy_perform(p->h)) != CURLE_OK) {
		rc = saas__error(SAAS_ENETWORK, SAAS_ERRCLASS_HTTP, 0, "cannot reach %s: %s", r->base, curl_easy_strerror(cc));
		goto fail;
	}
	if (curl_easy_getinfo(p->h, CURLINFO_ACTIVESOCKET, &sock) != CURLE_OK || sock == CURL_SOCKET_BAD) {
		rc = saas__error(SAAS_ENETWORK, SAAS_ERRCLASS_HTTP, 0, "no connection to %s", r->base);
		goto fail;
	}
	p->sock = sock;

	if ((rc = saas__random(nonce, sizeof(nonce))) < 0)
		goto fail;
	if (!(key = saas_base64_encode(nonce, sizeof(nonce)))) {
		rc = saas__oom();
		goto fail;
	}
	host = strstr(r->base, "://") + 3;
	if (asprintf(&reqtext,
	             "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\nUser-Agent: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
	             "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n",
	             url + strlen(r->base), host, r->auth_header, r->user_agent, key) < 0) {
		reqtext = NULL;
		rc = saas__oom();
		goto fail;
	}
	if (ws_send_raw(p, reqtext, strlen(reqtext)) < 0) {
		rc = saas__error(SAAS_ENETWORK, SAAS_ERRCLASS_HTTP, 0, "cannot send the terminal's request to %s", r->base);
		goto fail;
	}
	if ((rc = read_head(r, p, &head_len)) < 0)
		goto fail;
	if (sscanf((const char *)p->in, "HTTP/1.%*c %ld", &status) != 1) {
		rc = saas__error(SAAS_EPROTOCOL, SAAS_ERRCLASS_HTTP, 0, "the server's answer to the terminal is not HTTP");
		goto fail;
	}
	if (status != 101) {
		rc = refusal(r, p, head_len, status);
		goto fail;
	}
	saas__ws_accept(key, accept);
	line = strcasestr((const char *)p->in, "\r\nsec-websocket-accept:");
	if (!line || (line += 23, line += strspn(line, " \t"), strncmp(line, accept, 28) != 0)) {
		rc = saas__error(SAAS_EPROTOCOL, SAAS_ERRCLASS_HTTP, 101, "the server's WebSocket handshake is not valid");
		goto fail;
	}
	memmove(p->in, p->in + head_len, p->in_len - head_len);
	p->in_len -= head_len;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "socketpair: %s", strerror(errno));
		goto fail;
	}
	p->fd = sv[1];
	/* Frames that came with the head: the pump takes them first. */
	if (p->in_len && take_frames(p) < 0) {
		rc = saas__error(SAAS_EPROTOCOL, SAAS_ERRCLASS_HTTP, 101, "the server sent a bad WebSocket frame");
		goto fail;
	}
	if ((rc = pthread_create(&p->tid, NULL, rpty_main, p)) != 0) {
		rc = saas__error(SAAS_ENOMEM, SAAS_ERRCLASS_OS, rc, "cannot start a terminal thread");
		goto fail;
	}
	pty->fd = sv[0];
	pty->ops = &rpty_ops;
	pty->provider = p;
	*out = pty;
	rc = SAAS_OK;
	goto out;
fail:
	if (sv[0] >= 0)
		close(sv[0]);
	if (p)
		rpty_free(p);
	free(pty);
out:
	saas_free(key);
	free(reqtext);
	free(url);
	free(eid);
	return rc;
}
