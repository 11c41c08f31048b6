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
 *
 * What a template cannot carry is the clone's QEMU's own: under TCG each
 * guest code path is translated once per QEMU, and a clone's starts with
 * none, so its first run pays for the code server's, ZeroMQ's, IPython's and
 * the guest kernel's paths (most of its first `1+1`). A spare of such an
 * image (spare.c) runs that path once before a create takes it
 * (saas__lv_spare_code_warm): `POST /warm` over its control port, as a
 * first run comes, which the server answers only in a context that never
 * ran a client's code and leaves nothing of.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libvirt/libvirt.h>

#include "driver/libvirt/channel.h"
#include "driver/libvirt/launch.h"
#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/template.h"
#include "transport/control.h"
#include "transport/ssh.h"

/*
 * Send req on fd and read the answer into buf (NUL-terminated) until the
 * server closes, at least want bytes came, cap - 1 are in, or the deadline:
 * how many bytes came, or -1 when the request could not be sent.
 */
static ssize_t exchange(int fd, const char *req, char *buf, size_t cap, size_t want, int64_t deadline_ms)
{
	size_t got = 0, sent = 0, len = strlen(req);

	while (sent < len) {
		ssize_t n = write(fd, req + sent, len - sent);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		sent += (size_t)n;
	}
	while (got < cap - 1 && got < want) {
		struct pollfd p = { fd, POLLIN, 0 };
		int64_t left = deadline_ms - saas__now_ms();
		ssize_t n;
		if (left <= 0 || poll(&p, 1, left > 5000 ? 5000 : (int)left) <= 0)
			break;
		if ((n = read(fd, buf + got, cap - 1 - got)) < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	return (ssize_t)got;
}

static bool status_200(const char *buf)
{
	return strncmp(buf, "HTTP/1.1 200 ", 13) == 0 || strncmp(buf, "HTTP/1.0 200 ", 13) == 0;
}

/* One request, one answer: 1 when the server answered 200, 0 otherwise (not yet listening, still warming). */
static int health_once(saas__ssh *ssh, unsigned int port, int64_t deadline_ms)
{
	char buf[512];
	int fd = -1, ok;

	if (saas__ssh_port_connect(ssh, port, &fd) < 0) {
		saas__error_clear(); /* nothing listens yet: the server is still starting */
		return 0;
	}
	/* The status line is all that counts ("HTTP/1.1 200 "); the body is "OK" as E2B's. */
	ok = exchange(fd, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", buf, sizeof(buf), 13,
	              deadline_ms) >= 13 && status_200(buf);
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

/* The pump of the warm-up's connection: the control port's frames to and from the socket pair's end fd. */
struct warm_pump {
	struct saas__ctl *ctl;
	int fd;
	const int *cancel;
	int rc;
};

static void *warm_pump_main(void *arg)
{
	struct warm_pump *p = arg;

	p->rc = saas__ctl_conn_pump(&p->ctl, p->fd, p->cancel);
	shutdown(p->fd, SHUT_RDWR);
	return NULL;
}

int saas__lv_spare_code_warm(struct launch *l, const struct timespec *t0, int64_t budget_ms)
{
	static const char req[] = "POST /warm HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
	struct drv *d = l->d;
	struct saas__lv_way w;
	struct warm_pump p = { NULL, -1, &d->closing, SAAS_OK };
	pthread_t thread;
	char buf[4096];
	int64_t deadline = saas__now_ms() + SPARE_WARM_TIMEOUT_MS;
	int sp[2] = { -1, -1 }, serves = 0, conns = 0, n, rc;
	ssize_t got;

	if (!l->im->code_port || !l->control || !d->control_port || !d->control_exec || !d->host->control_port)
		return 0;
	if (!l->restored && (rc = saas__lv_clone_restore(l, t0, budget_ms)) < 0)
		return rc;
	if (virDomainResume(l->dom) < 0) {
		l->template_bad = !closing(d); /* as a state QEMU could not load */
		return saas__lv_virt_error("resuming a VM started ahead to warm its code server");
	}
	rc = saas__ctl_conn_open(&p.ctl, saas__lv_ctl_way(&w, d, l->spec->name, l->dir), &serves, &conns, l->im->code_port,
	                         &d->closing);
	if (rc != SAAS_OK)
		goto out;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "socketpair: %s", strerror(errno));
		goto out;
	}
	p.fd = sp[1];
	if ((n = pthread_create(&thread, NULL, warm_pump_main, &p)) != 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, n, "starting a warm-up's relay: %s", strerror(n));
		goto out;
	}
	got = exchange(sp[0], req, buf, sizeof(buf), sizeof(buf), deadline);
	/* Closed: a pump still at it (the deadline) ends the guest's connection, and the run with it. */
	close(sp[0]);
	sp[0] = -1;
	pthread_join(thread, NULL);
	/*
	 * 200 and the run's end: warm, and nothing of it kept. Any other
	 * status: the server ran nothing (an image's server without /warm, a
	 * context not fresh): the spare is as it would be without. Cut off: the
	 * run may have left its value in the kernel, so the spare is given up.
	 */
	if (got > 0 && status_200(buf) && strstr(buf, "\"text\": \"2\"") && strstr(buf, "\"end_of_execution\""))
		rc = 1;
	else if (got >= 13 && strncmp(buf, "HTTP/1.", 7) == 0 && !status_200(buf))
		rc = 0;
	else
		rc = saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_GUEST, 0, "the code server's warm-up did not end within %d s%s",
		                 SPARE_WARM_TIMEOUT_MS / 1000, p.rc < 0 ? " (its connection was lost)" : "");
out:
	if (sp[0] >= 0)
		close(sp[0]);
	if (sp[1] >= 0)
		close(sp[1]);
	saas__ctl_close(p.ctl);
	if (rc == 0 || rc == SAAS_ENOTSUP || rc == SAAS_EBACKEND) {
		/* No way to it or nothing run: the spare is as it would be without. */
		if (rc < 0)
			saas__lv_log(d, SAAS_LOG_DEBUG, "VM %s, started ahead: its code server not warmed (%s)", l->spec->name,
			             saas_error_last()->message);
		saas__error_clear();
		rc = 0;
	}
	if (rc >= 0 && virDomainSuspend(l->dom) < 0)
		rc = saas__lv_virt_error("pausing a VM started ahead after its warm-up");
	l->restored = true;
	return rc;
}
