/*
 * A server that answers anything (answer_server.h).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "answer_server.h"
#include "util/util.h"
#include "wire/ws.h"

/* The longest request read (the tests' are far smaller). */
#define REQUEST_MAX (256u << 10)

struct server {
	int fd;
	answer_fn fn;
	void *ud;
};

static void die(const char *what)
{
	fprintf(stderr, "answer_server: %s: %s\n", what, strerror(errno));
	abort();
}

/* Read one request into *req; false if the client went away first. */
static int read_request(int fd, saas__buf *req)
{
	size_t head = 0, body = 0;
	int chunked = 0;

	for (;;) {
		char buf[8192];
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (req->len && !head) {
			char *end = memmem(req->data, req->len, "\r\n\r\n", 4);
			if (end) {
				const char *h;
				head = (size_t)(end + 4 - req->data); /* saas__buf keeps its text NUL-terminated */
				if ((h = strcasestr(req->data, "\r\ncontent-length:")) && h < end)
					body = strtoul(h + 17, NULL, 10);
				chunked = (h = strcasestr(req->data, "\r\ntransfer-encoding: chunked")) && h < end;
				if ((h = strcasestr(req->data, "\r\nexpect: 100-continue")) && h < end)
					answer_send(fd, "HTTP/1.1 100 Continue\r\n\r\n", 25);
			}
		}
		if (head && !chunked && req->len >= head + body)
			return 1;
		if (head && chunked && req->len >= head + 5 && memcmp(req->data + req->len - 5, "0\r\n\r\n", 5) == 0)
			return 1;
		if (req->len > REQUEST_MAX || poll(&p, 1, 5000) != 1)
			return 0;
		if ((n = recv(fd, buf, sizeof(buf), 0)) <= 0)
			return 0;
		if (saas__buf_put(req, buf, (size_t)n) < 0)
			die("memory");
	}
}

int answer_send(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n <= 0)
			return 0;
		p += n, len -= (size_t)n;
	}
	return 1;
}

void answer_send_ws(int fd, const char *req, const void *answer, size_t len)
{
	const char *a = answer, *k = strcasestr(req, "\r\nsec-websocket-key:");
	const char *at = len >= 8 ? memmem(a, len, "@ACCEPT@", 8) : NULL;
	char key[64] = "", accept[29];

	if (!at || !k) {
		answer_send(fd, a, len);
		return;
	}
	if (sscanf(k + 20, " %63[^\r\n ]", key) != 1)
		key[0] = '\0';
	saas__ws_accept(key, accept);
	if (answer_send(fd, a, (size_t)(at - a)) && answer_send(fd, accept, 28))
		answer_send(fd, at + 8, len - (size_t)(at - a) - 8);
}

static void *serve(void *arg)
{
	struct server *s = arg;

	for (;;) {
		int fd = accept(s->fd, NULL, NULL);
		saas__buf req = SAAS__BUF_INIT;
		struct timeval tv = { .tv_sec = 5 };

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			die("accept");
		}
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		if (read_request(fd, &req))
			s->fn(s->ud, fd, req.data, req.len);
		/* The whole answer, then the connection's end: nothing waits on a server that said all. */
		shutdown(fd, SHUT_WR);
		close(fd);
		saas__buf_free(&req);
	}
	return NULL;
}

unsigned short answer_server_start(answer_fn fn, void *ud)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	struct server *s = calloc(1, sizeof(*s));
	pthread_t t;

	if (!s)
		die("memory");
	s->fn = fn;
	s->ud = ud;
	if ((s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    bind(s->fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s->fd, 16) < 0 ||
	    getsockname(s->fd, (struct sockaddr *)&a, &alen) < 0)
		die("listen");
	if (pthread_create(&t, NULL, serve, s) != 0)
		die("pthread_create");
	pthread_detach(t);
	return ntohs(a.sin_port);
}
