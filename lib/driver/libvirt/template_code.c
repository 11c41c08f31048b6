/*
 * A template of an image with a code server (manifest "code_port",
 * images/guest/aas-code) is saved only once that server says its default
 * Python context is warm: `GET /health` answers 200 when the kernel is up
 * with numpy, pandas and matplotlib imported. Every clone then starts with
 * a warm kernel instead of paying for the imports on its first run.
 *
 * The health check goes through the engine's own way into the guest (a
 * direct-tcpip channel to the guest's loopback port), as the code contexts'
 * requests will: no guest tool is assumed.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/template.h"
#include "transport/ssh.h"

/* One request, one answer: 1 when the server answered 200, 0 otherwise (not yet listening, still warming). */
static int health_once(saas__ssh *ssh, unsigned int port, int64_t deadline_ms)
{
	static const char req[] = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
	char buf[512];
	size_t got = 0, sent = 0;
	int fd = -1, ok = 0;

	if (saas__ssh_port_connect(ssh, port, &fd) < 0) {
		saas__error_clear(); /* nothing listens yet: the server is still starting */
		return 0;
	}
	while (sent < sizeof(req) - 1) {
		ssize_t n = write(fd, req + sent, sizeof(req) - 1 - sent);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			goto out;
		sent += (size_t)n;
	}
	/* The status line is all that counts ("HTTP/1.1 200 "); the body is "OK" as E2B's. */
	while (got < sizeof(buf) - 1) {
		struct pollfd p = { fd, POLLIN, 0 };
		int64_t left = deadline_ms - saas__now_ms();
		ssize_t n;
		if (left <= 0 || poll(&p, 1, left > 5000 ? 5000 : (int)left) <= 0)
			goto out;
		if ((n = read(fd, buf + got, sizeof(buf) - 1 - got)) < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got >= 13)
			break;
	}
	buf[got] = '\0';
	ok = strncmp(buf, "HTTP/1.1 200 ", 13) == 0 || strncmp(buf, "HTTP/1.0 200 ", 13) == 0;
out:
	close(fd);
	return ok;
}

int saas__lv_template_code_wait(struct drv *d, saas__ssh *ssh, const struct image *im, const char *key)
{
	int64_t start = saas__now_ms(), deadline = start + TEMPLATE_CODE_TIMEOUT_MS;

	if (!im->code_port)
		return SAAS_OK;
	while (!stopping(d)) {
		if (health_once(ssh, im->code_port, deadline)) {
			saas__lv_log(d, SAAS_LOG_INFO, "template %s: the code server on port %u is warm after %lld ms", key,
			             im->code_port, (long long)(saas__now_ms() - start));
			return SAAS_OK;
		}
		if (saas__now_ms() >= deadline)
			return saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_GUEST, 0,
			                   "image %s: its code server (port %u in the guest) did not answer GET /health with 200 "
			                   "within %d s; a template with a cold kernel is not saved (see the guest's "
			                   "/run/aas-code/server.log)", im->name, im->code_port, TEMPLATE_CODE_TIMEOUT_MS / 1000);
		for (int waited = 0; waited < 500 && !stopping(d); waited += 50)
			saas__sleep_ms(50);
	}
	return saas__error(SAAS_EIO, SAAS_ERRCLASS_DRIVER, 0, "the engine is stopping");
}
