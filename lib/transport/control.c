/*
 * The control port: a virtio-serial channel (CONTROL_PORT_NAME) between the
 * engine and the guest's root helper, aas-control (images/guest/). A restored
 * clone gets its fix-ups over it (hostname, clock, random bytes) with no SSH
 * login: its one login is the engine's own session.
 *
 * The host end is a socket QEMU listens on in the VM's directory (libvirt
 * makes it, root's and writable by no other, and hands QEMU the listening
 * fd): no other tenant's QEMU can write a request. Nor can this VM's own QEMU, escaped,
 * point the engine at another's socket: the directory is the engine's, so
 * the name cannot be swapped, the engine connects through the directory it
 * opened and checked, and the listener's credentials (SO_PEERCRED) must be
 * the VM's QEMU's (its uid as the engine recorded it) before a byte is sent. The guest end is a device node only root may open,
 * held open by the helper. What comes back from the guest is hostile input
 * all the same: the reply is read to a bound and within a deadline, and must
 * be exactly the answer to this request's nonce.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "transport/control.h"
#include "transport/vmdir.h"
#include "saas/errors.h"
#include "util/error.h"
#include "util/util.h"

bool saas__ctl_fits(const char *vmdir)
{
	struct sockaddr_un sa;

	return strlen(vmdir) + 1 + strlen(CONTROL_SOCKET) < sizeof(sa.sun_path);
}

int saas__ctl_request(char *out, size_t cap, const char *nonce, const char *hostname,
                      const struct timespec *now, const char *seed_hex)
{
	int n = snprintf(out, cap, "fixup %s %s %lld.%09ld %s\n", nonce, hostname, (long long)now->tv_sec, now->tv_nsec,
	                 seed_hex);

	if (n < 0 || (size_t)n >= cap || n > CONTROL_LINE_MAX)
		return saas__inval("the control request for %s does not fit a line", hostname);
	return n;
}

void saas__ctl_printable(char *out, size_t cap, const char *s, size_t n)
{
	size_t w = 0;

	for (size_t i = 0; i < n && w + 1 < cap; i++)
		out[w++] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	out[w] = '\0';
}

int saas__ctl_reply(const char *buf, size_t len, const char *nonce)
{
	size_t nl = strlen(nonce);
	char said[CONTROL_SAID_MAX + 1];
	const char *nl_at = len ? memchr(buf, '\n', len) : NULL;

	if (!nl_at || (size_t)(nl_at - buf) + 1 != len || len > CONTROL_REPLY_MAX)
		return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, 0, "the guest's control port answered no line");
	len--; /* the '\n' */
	if (len == 3 + nl && memcmp(buf, "ok ", 3) == 0 && memcmp(buf + 3, nonce, nl) == 0)
		return SAAS_OK;
	if (len > 6 && memcmp(buf, "error ", 6) == 0) {
		const char *what = memchr(buf + 6, ' ', len - 6);
		size_t wl = what ? len - (size_t)(what + 1 - buf) : 0;
		saas__ctl_printable(said, sizeof(said), what ? what + 1 : "", wl);
		return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, 0, "the guest's control port refused the fix-ups: %s",
		                   said[0] ? said : "no reason given");
	}
	saas__ctl_printable(said, sizeof(said), buf, len);
	return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, 0, "the guest's control port answered '%s'", said);
}

int saas__ctl_fixup_answer(const char *buf, size_t len, const char *nonce, bool at_start, int *rc)
{
	char want[8 + CONTROL_NONCE_LEN];
	const char *at = NULL, *nl;
	size_t n, rest;

	n = (size_t)snprintf(want, sizeof(want), "ok %s\n", nonce);
	if (memmem(buf, len, want, n)) {
		*rc = SAAS_OK;
		return 1;
	}
	n = (size_t)snprintf(want, sizeof(want), "error %s", nonce);
	for (const char *p = buf; !at && (p = memmem(p, len - (size_t)(p - buf), want, n)); p++)
		if ((size_t)(p - buf) + n < len && (p[n] == ' ' || p[n] == '\n'))
			at = p;
	if (!at && at_start && len >= 8 && memcmp(buf, "error - ", 8) == 0)
		at = buf;
	if (!at)
		return 0;
	rest = len - (size_t)(at - buf);
	if ((nl = memchr(at, '\n', rest)))
		rest = (size_t)(nl + 1 - at);
	else if (rest < CONTROL_REPLY_MAX)
		return 0;
	*rc = saas__ctl_reply(at, rest, nonce);
	return 1;
}

static int remaining(const struct timespec *t0, int timeout_ms)
{
	int64_t left = timeout_ms - saas__ms_since(t0);

	return left > 0 ? (int)left : 0;
}

int saas__ctl_nonce(char nonce[CONTROL_NONCE_LEN + 1])
{
	unsigned char raw[CONTROL_NONCE_LEN / 2];
	int rc;

	if ((rc = saas__random(raw, sizeof(raw))) < 0)
		return rc;
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(nonce + 2 * i, 3, "%02x", raw[i]);
	return SAAS_OK;
}

int saas__ctl_peer_check(const struct ucred *peer, const struct saas__ctl_peer_want *want)
{
	/*
	 * A VM without a uid of its own shares its QEMU's uid with every other:
	 * no listener can be told from another's by its credentials.
	 */
	if (!want->vm_uid)
		return SAAS_OK;
	/*
	 * The VM's own QEMU (its pid, where known): libvirt binds the socket and
	 * hands QEMU the fd, and QEMU's listen() makes the credentials its own.
	 * Root's, or libvirt's in this very process: a listener no VM's uid can
	 * make. Another VM's QEMU is none of these.
	 */
	if ((peer->uid == want->vm_uid && (!want->qemu_pid || peer->pid == want->qemu_pid)) || peer->uid == 0 ||
	    (peer->uid == want->self_uid && peer->pid == want->self_pid))
		return SAAS_OK;
	return saas__error(SAAS_EIO, SAAS_ERRCLASS_DRIVER, 0,
	                   "the control port's listener is uid %u (pid %ld), not this VM's QEMU (uid %u): refused",
	                   (unsigned)peer->uid, (long)peer->pid, want->vm_uid);
}

int saas__ctl_connect(const char *vmdir, int *out)
{
	struct sockaddr_un sa;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct saas__ctl_peer_want want = { (unsigned int)geteuid(), getpid(), 0, 0 };
	struct stat st;
	int fd = -1, dfd = -1, rc;

	*out = -1;
	if (!saas__ctl_fits(vmdir))
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "the VM's directory %s is too long for a socket",
		                   vmdir);
	/*
	 * Through the directory as opened and checked (the engine's alone), to
	 * a name that is a socket there: nothing the VM's QEMU can rename.
	 */
	if ((rc = saas__vmdir_open(vmdir, &dfd)) < 0 || (rc = saas__vmdir_uid_read(dfd, &want.vm_uid)) < 0)
		goto out;
	if (fstatat(dfd, CONTROL_SOCKET, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISSOCK(st.st_mode)) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "no control port socket in %s%s", vmdir,
		                 errno == ENOENT ? "" : " (something else under its name)");
		goto out;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", dfd, CONTROL_SOCKET);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot connect to the control port %s/%s: %s", vmdir,
		                 CONTROL_SOCKET, strerror(errno));
		goto out;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "who listens on the control port %s/%s: %s", vmdir,
		                 CONTROL_SOCKET, strerror(errno));
		goto out;
	}
	if ((rc = saas__ctl_peer_check(&cred, &want)) < 0) {
		saas__error_wrap(rc, "%s/%s", vmdir, CONTROL_SOCKET);
		goto out;
	}
	*out = fd;
	fd = -1;
	rc = SAAS_OK;
out:
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	return rc;
}

int saas__ctl_open(const struct saas__ctl_way *way, int *fd)
{
	int rc;

	if (!way->open)
		return saas__ctl_connect(way->vmdir, fd);
	*fd = -1;
	if ((rc = way->open(way->ud, fd)) < 0)
		return rc;
	/* The callers poll and never block on it, whoever made it. */
	if (fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) | O_NONBLOCK) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "the control port's connection: %s", strerror(errno));
		close(*fd);
		*fd = -1;
	}
	return rc;
}

int saas__ctl_fixup(const struct saas__ctl_way *way, const char *hostname, const char *seed_hex, int timeout_ms)
{
	struct timespec t0, now;
	char nonce[CONTROL_NONCE_LEN + 1], req[CONTROL_LINE_MAX + 1], buf[2 * CONTROL_REPLY_MAX];
	size_t got = 0, sent = 0;
	bool at_start = true;
	int fd = -1, rc, n;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	if ((rc = saas__ctl_nonce(nonce)) < 0 || (rc = saas__ctl_open(way, &fd)) < 0)
		goto out;
	/* The clock is read last: what the guest sets is as close to now as the engine can make it. */
	clock_gettime(CLOCK_REALTIME, &now);
	if ((n = saas__ctl_request(req, sizeof(req), nonce, hostname, &now, seed_hex)) < 0) {
		rc = n;
		goto out;
	}
	while (sent < (size_t)n) {
		struct pollfd p = { fd, POLLOUT, 0 };
		ssize_t w = send(fd, req + sent, (size_t)n - sent, MSG_NOSIGNAL);
		if (w > 0) {
			sent += (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EINTR) {
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "writing to the control port: %s", strerror(errno));
			goto out;
		}
		if (poll(&p, 1, remaining(&t0, timeout_ms)) == 0) {
			rc = saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_DRIVER, 0, "the control port took no request in %d ms",
			                 timeout_ms);
			goto out;
		}
	}
	/*
	 * The answer, after whatever stale bytes come first (saas__ctl_fixup_answer),
	 * read within the deadline: the last CONTROL_REPLY_MAX bytes are kept,
	 * which hold any answer that began before them whole.
	 */
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t r;
		if (got == sizeof(buf)) {
			memmove(buf, buf + got - CONTROL_REPLY_MAX, CONTROL_REPLY_MAX);
			got = CONTROL_REPLY_MAX;
			at_start = false;
		}
		r = recv(fd, buf + got, sizeof(buf) - got, 0);
		if (r > 0) {
			got += (size_t)r;
			if (saas__ctl_fixup_answer(buf, got, nonce, at_start, &rc))
				goto out;
			continue;
		}
		if (r == 0) {
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_DRIVER, 0, "the control port closed before it answered");
			goto out;
		}
		if (errno != EAGAIN && errno != EINTR) {
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "reading the control port: %s", strerror(errno));
			goto out;
		}
		if (poll(&p, 1, remaining(&t0, timeout_ms)) == 0) {
			rc = saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_DRIVER, 0,
			                 "the guest did not answer on the control port in %d ms (no aas-control?)", timeout_ms);
			goto out;
		}
	}
out:
	if (fd >= 0)
		close(fd);
	return rc;
}
