/*
 * A hostile code server's test double (code_guest.h): one thread, one
 * connection at a time, canned answers.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "code_guest.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_t thread;
static int listener = -1;
static bool stopping;
static char *answer, *post_answer;
static size_t answer_len, answer_drip;
static int answer_drip_ms;
static bool answer_hold;
static char request[1 << 20];
static unsigned int hangups;

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* Read the request: its head, then Content-Length bytes of body. */
static void read_request(int fd)
{
	size_t n = 0, want = 0;
	char *end = NULL;

	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t k;
		if (poll(&p, 1, 5000) <= 0)
			break;
		k = recv(fd, request + n, sizeof(request) - 1 - n, 0);
		if (k <= 0)
			break;
		n += (size_t)k;
		request[n] = '\0';
		if (!end && (end = strstr(request, "\r\n\r\n"))) {
			const char *cl = strcasestr(request, "Content-Length:");
			want = (size_t)(end + 4 - request) + (cl ? strtoul(cl + 15, NULL, 10) : 0);
		}
		if (end && n >= want)
			break;
		if (n == sizeof(request) - 1)
			break;
	}
	request[n] = '\0';
}

static void *serve(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept(listener, NULL, NULL);
		char *bytes;
		size_t len, drip;
		int drip_ms;
		bool hold, hung = false;

		if (fd < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		pthread_mutex_lock(&mu);
		if (stopping) {
			pthread_mutex_unlock(&mu);
			close(fd);
			break;
		}
		pthread_mutex_unlock(&mu);
		read_request(fd);
		pthread_mutex_lock(&mu);
		if (post_answer && strncmp(request, "POST ", 5) == 0) {
			bytes = strdup(post_answer);
			len = bytes ? strlen(bytes) : 0;
		} else {
			bytes = answer ? malloc(answer_len + 1) : NULL;
			len = bytes ? answer_len : 0;
			if (bytes)
				memcpy(bytes, answer, len);
		}
		drip = answer_drip ? answer_drip : len;
		drip_ms = answer_drip_ms;
		hold = answer_hold;
		pthread_mutex_unlock(&mu);
		for (size_t off = 0; off < len && !hung;) {
			size_t k = len - off < drip ? len - off : drip;
			ssize_t w = send(fd, bytes + off, k, MSG_NOSIGNAL);
			if (w <= 0) {
				hung = true;
				break;
			}
			off += (size_t)w;
			if (off < len && drip_ms)
				sleep_ms(drip_ms);
		}
		if (hold && !hung) {
			/* The client's close is the hang-up this waits for. */
			char buf[256];
			while (recv(fd, buf, sizeof(buf), 0) > 0)
				;
			hung = true;
		}
		if (hung) {
			pthread_mutex_lock(&mu);
			hangups++;
			pthread_mutex_unlock(&mu);
		}
		free(bytes);
		close(fd);
	}
	return NULL;
}

int code_guest_start(void)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	char spec[64];

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    bind(listener, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(listener, 16) < 0 ||
	    getsockname(listener, (struct sockaddr *)&sa, &sl) < 0)
		abort();
	snprintf(spec, sizeof(spec), "49999=127.0.0.1:%u", ntohs(sa.sin_port));
	setenv("SAAS_FAKE_PORTS", spec, 1);
	stopping = false;
	if (pthread_create(&thread, NULL, serve, NULL))
		abort();
	return ntohs(sa.sin_port);
}

void code_guest_stop(void)
{
	pthread_mutex_lock(&mu);
	stopping = true;
	pthread_mutex_unlock(&mu);
	shutdown(listener, SHUT_RDWR);
	pthread_join(thread, NULL);
	close(listener);
	listener = -1;
	free(answer);
	free(post_answer);
	answer = post_answer = NULL;
	unsetenv("SAAS_FAKE_PORTS");
}

void code_guest_answer(const char *bytes, size_t len, size_t drip, int drip_ms, bool hold)
{
	char *copy = malloc(len + 1);

	if (!copy)
		abort();
	memcpy(copy, bytes, len);
	pthread_mutex_lock(&mu);
	free(answer);
	answer = copy;
	answer_len = len;
	answer_drip = drip;
	answer_drip_ms = drip_ms;
	answer_hold = hold;
	pthread_mutex_unlock(&mu);
}

void code_guest_answer_ndjson(const char *ndjson, size_t chunk)
{
	size_t len = strlen(ndjson), cap = len * 8 + 256, n;
	char *buf = malloc(cap);

	if (!buf)
		abort();
	n = (size_t)snprintf(buf, cap, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
	if (!chunk)
		chunk = len ? len : 1;
	for (size_t off = 0; off < len; off += chunk) {
		size_t k = len - off < chunk ? len - off : chunk;
		n += (size_t)snprintf(buf + n, cap - n, "%zx\r\n", k);
		memcpy(buf + n, ndjson + off, k);
		n += k;
		memcpy(buf + n, "\r\n", 2);
		n += 2;
	}
	n += (size_t)snprintf(buf + n, cap - n, "0\r\n\r\n");
	code_guest_answer(buf, n, 0, 0, false);
	free(buf);
}

void code_guest_answer_post(const char *text)
{
	char *copy = text ? strdup(text) : NULL;

	if (text && !copy)
		abort();
	pthread_mutex_lock(&mu);
	free(post_answer);
	post_answer = copy;
	pthread_mutex_unlock(&mu);
}

const char *code_guest_request(void)
{
	return request;
}

unsigned int code_guest_hangups(void)
{
	unsigned int n;

	pthread_mutex_lock(&mu);
	n = hangups;
	pthread_mutex_unlock(&mu);
	return n;
}
