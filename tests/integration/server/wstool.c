/*
 * A tiny WebSocket echo server and client for the preview proxy tests. No
 * dependencies beyond libc, so it builds static (`cc -static`) and runs
 * inside a guest too.
 *
 *   wstool serve PORT                 echo every text/binary frame back; one process per connection
 *   wstool client ADDR PORT HOST MSG  handshake with Host: HOST, send MSG, print the echo; exit 0 if equal
 *   wstool hold ADDR PORT HOST MSG    the same, then print "open" and keep the WebSocket open until
 *                                     the other side ends it; print "closed" then
 *   wstool pty ADDR PORT PATH KEY STEP...
 *                                     a terminal (GET PATH with the API key KEY): print what the
 *                                     server sends (binary as is; a text message as "\ntext: JSON\n";
 *                                     its close as "\nclose CODE REASON\n") after the steps:
 *                                       send:TEXT   a binary frame ("\r", "\n" and "\\" escapes)
 *                                       text:JSON   a text frame
 *                                       wait:TEXT   read until the output so far holds TEXT
 *                                       big:N       a binary frame of N bytes of 'x'
 *                                       plain:TEXT  an unmasked text frame (clients must mask)
 *                                       close       a close frame (1000)
 *                                     then read to the server's close. A refusal prints
 *                                     "status N" and the body; exit 3.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ws.h"

static int read_full(int fd, void *buf, size_t len)
{
	char *p = buf;
	while (len) {
		ssize_t n = read(fd, p, len);
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Read an HTTP head into buf (NUL-terminated). */
static int read_head(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	while (n + 1 < cap) {
		if (read(fd, buf + n, 1) != 1)
			return -1;
		buf[++n] = '\0';
		if (n >= 4 && memcmp(buf + n - 4, "\r\n\r\n", 4) == 0)
			return 0;
	}
	return -1;
}

static const char *header(const char *head, const char *name, char *val, size_t cap)
{
	size_t nl = strlen(name);
	for (const char *p = strstr(head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
		if (strncasecmp(p + 2, name, nl) == 0 && p[2 + nl] == ':') {
			const char *v = p + 3 + nl, *e;
			while (*v == ' ')
				v++;
			e = strstr(v, "\r\n");
			snprintf(val, cap, "%.*s", (int)(e - v), v);
			return val;
		}
	}
	return NULL;
}

/* One frame, its head read as the server reads it (ws.h): returns opcode, payload in *out (malloc), or -1. */
static int read_frame(int fd, unsigned char **out, size_t *len)
{
	unsigned char h[SAAS_WS_HEAD_MAX];
	struct saas__ws_frame f;
	size_t hl = 0;
	int r;

	do {
		if (read_full(fd, h + hl, 1))
			return -1;
		hl++;
	} while ((r = saas__ws_frame_parse(h, hl, &f)) == 0 && hl < sizeof(h));
	if (r != 1 || f.len > (1u << 24))
		return -1;
	*out = malloc((size_t)f.len + 1);
	if (!*out || read_full(fd, *out, (size_t)f.len))
		return -1;
	if (f.masked)
		saas__ws_unmask(*out, (size_t)f.len, f.mask, 0);
	(*out)[f.len] = 0;
	*len = (size_t)f.len;
	return f.opcode;
}

static int write_frame(int fd, int opcode, const unsigned char *data, size_t len, int masked)
{
	static const unsigned char mask[4] = { 0x12, 0x34, 0x56, 0x78 };
	unsigned char h[SAAS_WS_HEAD_MAX], *copy = malloc(len + 1);
	size_t hl = saas__ws_head(h, opcode, len, masked ? mask : NULL);
	int rc;

	memcpy(copy, data, len);
	if (masked)
		saas__ws_unmask(copy, len, mask, 0);
	rc = write_full(fd, h, hl) || write_full(fd, copy, len) ? -1 : 0;
	free(copy);
	return rc;
}

static void serve_one(int fd)
{
	char head[8192], key[256], accept[29], resp[512];
	unsigned char *data;
	size_t len;
	int op;

	if (read_head(fd, head, sizeof(head)))
		return;
	if (!header(head, "Sec-WebSocket-Key", key, sizeof(key))) {
		static const char body[] = "wstool: plain HTTP works\n";
		snprintf(resp, sizeof(resp), "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n\r\n%s",
		         sizeof(body) - 1, body);
		write_full(fd, resp, strlen(resp));
		return;
	}
	saas__ws_accept(key, accept);
	snprintf(resp, sizeof(resp),
	         "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
	         "Sec-WebSocket-Accept: %s\r\n\r\n", accept);
	if (write_full(fd, resp, strlen(resp)))
		return;
	while ((op = read_frame(fd, &data, &len)) >= 0) {
		if (op == 8) { /* close: answer it */
			write_frame(fd, 8, data, len, 0);
			free(data);
			return;
		}
		if (op == 9)
			write_frame(fd, 10, data, len, 0);
		else if (op == 1 || op == 2)
			write_frame(fd, op, data, len, 0);
		free(data);
	}
}

static int serve(int port)
{
	struct sockaddr_in sa;
	int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	signal(SIGCHLD, SIG_IGN);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) || listen(s, 64)) {
		perror("wstool: bind");
		return 1;
	}
	for (;;) {
		int c = accept(s, NULL, NULL);
		if (c < 0)
			continue;
		if (fork() == 0) {
			close(s);
			serve_one(c);
			close(c);
			_exit(0);
		}
		close(c);
	}
}

static int client(const char *addr, const char *port, const char *host, const char *msg, int hold)
{
	struct addrinfo hints, *ai;
	char req[1024], head[8192], val[256];
	unsigned char *data;
	size_t len;
	int s, op;

	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(addr, port, &hints, &ai) != 0)
		return 2;
	s = socket(ai->ai_family, SOCK_STREAM, 0);
	if (connect(s, ai->ai_addr, ai->ai_addrlen) != 0) {
		perror("wstool: connect");
		return 2;
	}
	freeaddrinfo(ai);
	snprintf(req, sizeof(req),
	         "GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
	         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", host);
	if (write_full(s, req, strlen(req)) || read_head(s, head, sizeof(head))) {
		fprintf(stderr, "wstool: no handshake answer\n");
		return 1;
	}
	if (strncmp(head, "HTTP/1.1 101", 12) != 0 ||
	    !header(head, "Sec-WebSocket-Accept", val, sizeof(val)) || strcmp(val, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=") != 0) {
		fprintf(stderr, "wstool: bad handshake answer:\n%s", head);
		return 1;
	}
	for (int round = 0; round < 2; round++) {
		if (write_frame(s, 1, (const unsigned char *)msg, strlen(msg), 1) ||
		    (op = read_frame(s, &data, &len)) != 1) {
			fprintf(stderr, "wstool: no echo\n");
			return 1;
		}
		if (len != strlen(msg) || memcmp(data, msg, len) != 0) {
			fprintf(stderr, "wstool: echo differs: %s\n", data);
			return 1;
		}
		if (round == 1)
			printf("%s\n", data);
		free(data);
	}
	if (hold) {
		printf("open\n");
		fflush(stdout);
		while ((op = read_frame(s, &data, &len)) >= 0 && op != 8)
			free(data);
		printf("closed\n");
		close(s);
		return 0;
	}
	write_frame(s, 8, (const unsigned char *)"", 0, 1);
	close(s);
	return 0;
}

static size_t unescape(const char *in, unsigned char *out)
{
	size_t n = 0;

	for (; *in; in++) {
		if (*in == '\\' && in[1]) {
			in++;
			out[n++] = *in == 'r' ? '\r' : *in == 'n' ? '\n' : (unsigned char)*in;
		} else {
			out[n++] = (unsigned char)*in;
		}
	}
	return n;
}

/* Print one frame the server sent; 1 at its close. Binary output accumulates in seen. */
static int pty_show(int op, unsigned char *data, size_t len, char *seen, size_t *nseen, size_t cap)
{
	if (op == 2 || op == 0) {
		fwrite(data, 1, len, stdout);
		for (size_t i = 0; i < len && *nseen + 1 < cap; i++)
			seen[(*nseen)++] = (char)(data[i] ? data[i] : ' ');
		seen[*nseen] = '\0';
	} else if (op == 1) {
		printf("\ntext: %s\n", data);
	} else if (op == 8) {
		printf("\nclose %u %.*s\n", len >= 2 ? (unsigned int)(data[0] << 8 | data[1]) : 0,
		       len > 2 ? (int)(len - 2) : 0, len > 2 ? (char *)data + 2 : "");
		return 1;
	}
	fflush(stdout);
	return 0;
}

static int pty(const char *addr, const char *port, const char *path, const char *key, int nsteps, char **steps)
{
	struct addrinfo hints, *ai;
	char req[2048], head[8192], val[256];
	static char seen[1 << 20];
	size_t nseen = 0, len;
	unsigned char *data;
	int s, op;

	alarm(300); /* a hung server fails the test rather than holding it */
	signal(SIGPIPE, SIG_IGN);
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(addr, port, &hints, &ai) != 0)
		return 2;
	s = socket(ai->ai_family, SOCK_STREAM, 0);
	if (connect(s, ai->ai_addr, ai->ai_addrlen) != 0) {
		perror("wstool: connect");
		return 2;
	}
	freeaddrinfo(ai);
	snprintf(req, sizeof(req),
	         "GET %s HTTP/1.1\r\nHost: %s:%s\r\nAuthorization: Bearer %s\r\nUpgrade: websocket\r\n"
	         "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
	         path, addr, port, key);
	if (write_full(s, req, strlen(req)) || read_head(s, head, sizeof(head))) {
		fprintf(stderr, "wstool: no handshake answer\n");
		return 1;
	}
	if (strncmp(head, "HTTP/1.1 101", 12) != 0) {
		char body[4096];
		size_t n = header(head, "Content-Length", val, sizeof(val)) ? strtoul(val, NULL, 10) : 0;
		printf("status %.3s\n", head + 9);
		if (n >= sizeof(body) || read_full(s, body, n))
			n = 0;
		printf("%.*s\n", (int)n, body);
		return 3;
	}
	if (!header(head, "Sec-WebSocket-Accept", val, sizeof(val)) || strcmp(val, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=") != 0) {
		fprintf(stderr, "wstool: bad handshake answer:\n%s", head);
		return 1;
	}
	for (int i = 0; i < nsteps; i++) {
		const char *st = steps[i];
		static unsigned char buf[1 << 20];
		if (strncmp(st, "send:", 5) == 0) {
			if (write_frame(s, 2, buf, unescape(st + 5, buf), 1))
				return 1;
		} else if (strncmp(st, "text:", 5) == 0) {
			if (write_frame(s, 1, (const unsigned char *)st + 5, strlen(st + 5), 1))
				return 1;
		} else if (strncmp(st, "plain:", 6) == 0) {
			if (write_frame(s, 1, (const unsigned char *)st + 6, strlen(st + 6), 0))
				return 1;
		} else if (strcmp(st, "close") == 0) {
			if (write_frame(s, 8, (const unsigned char *)"\x03\xe8", 2, 1))
				return 1;
		} else if (strncmp(st, "big:", 4) == 0) {
			size_t n = strtoul(st + 4, NULL, 10);
			unsigned char *big = malloc(n);
			memset(big, 'x', n);
			write_frame(s, 2, big, n, 1);
			free(big);
		} else if (strncmp(st, "wait:", 5) == 0) {
			len = unescape(st + 5, buf);
			buf[len] = 0;
			while (!strstr(seen, (char *)buf)) {
				if ((op = read_frame(s, &data, &len)) < 0) {
					fprintf(stderr, "wstool: ended before \"%s\"\n", st + 5);
					return 1;
				}
				int closed = pty_show(op, data, len, seen, &nseen, sizeof(seen));
				free(data);
				if (closed) {
					fprintf(stderr, "wstool: closed before \"%s\"\n", st + 5);
					return 1;
				}
			}
		} else {
			fprintf(stderr, "wstool: unknown step %s\n", st);
			return 2;
		}
	}
	while ((op = read_frame(s, &data, &len)) >= 0) {
		int closed = pty_show(op, data, len, seen, &nseen, sizeof(seen));
		free(data);
		if (closed) {
			write_frame(s, 8, (const unsigned char *)"\x03\xe8", 2, 1);
			close(s);
			return 0;
		}
	}
	printf("\nended without a close\n");
	return 1;
}

int main(int argc, char **argv)
{
	if (argc >= 6 && strcmp(argv[1], "pty") == 0)
		return pty(argv[2], argv[3], argv[4], argv[5], argc - 6, argv + 6);
	if (argc == 3 && strcmp(argv[1], "serve") == 0)
		return serve(atoi(argv[2]));
	if (argc == 6 && (strcmp(argv[1], "client") == 0 || strcmp(argv[1], "hold") == 0))
		return client(argv[2], argv[3], argv[4], argv[5], strcmp(argv[1], "hold") == 0);
	fprintf(stderr, "usage: wstool serve PORT | wstool client|hold ADDR PORT HOST MESSAGE | "
	                "wstool pty ADDR PORT PATH KEY STEP...\n");
	return 2;
}
