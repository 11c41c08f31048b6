/*
 * Files over the control port: the bulk path. A file's bytes cross the
 * virtio-serial channel in frames, with no SSH and no cipher in the guest
 * (under TCG the guest's AES and HMAC are what bound SFTP), and both ends
 * check the bytes' XXH64 (lib/util/xxh64.h says why not SHA-256). The
 * guest's helper (images/guest/aas-control.c) does each transfer as the
 * sandbox user with SFTP's semantics, so a path means, and is allowed,
 * exactly what it would be over SFTP.
 *
 * Who can use it: the same as the fix-ups (control.c): the host end is a
 * socket in the VM's directory that only the engine and that VM's QEMU
 * reach, and the guest end a device node only root opens. What comes back
 * is hostile input all the same: every line is read to a bound, every frame
 * is checked against the size announced, every wait has a deadline, and all
 * of one operation's waits together fit the guest's budget (control.h's
 * CONTROL_GUEST_GRACE_MS): a guest that trickles is given up, not followed.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "transport/control.h"
#include "transport/vmdir.h"
#include "saas/errors.h"
#include "util/error.h"
#include "util/util.h"
#include "util/xxh64.h"

/* ---- the guest's lines (pure) ---------------------------------------------------------------- */

/* "WORD " at *p, advancing past it. */
static bool take_word(const char **p, const char *end, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(end - *p) < n + 1 || memcmp(*p, word, n) != 0 || (*p)[n] != ' ')
		return false;
	*p += n + 1;
	return true;
}

/* Decimal digits up to the next space or the end: 1 to maxdigits of them, no leading zero unless "0". */
static bool take_number(const char **p, const char *end, int maxdigits, int64_t *out)
{
	const char *s = *p;
	int64_t v = 0;
	int n = 0;

	for (; s < end && *s >= '0' && *s <= '9'; s++, n++) {
		if (n == maxdigits)
			return false;
		v = v * 10 + (*s - '0');
	}
	if (n == 0 || (n > 1 && (*p)[0] == '0') || (s < end && *s != ' '))
		return false;
	*out = v;
	*p = s;
	return true;
}

int saas__ctl_files_reply(const char *buf, size_t len, const char *nonce, struct files_reply *out)
{
	size_t nl = strlen(nonce);
	const char *p = buf, *end;
	char said[CONTROL_SAID_MAX + 1];
	int64_t v;

	memset(out, 0, sizeof(*out));
	if (len == 0 || len > CONTROL_REPLY_MAX || buf[len - 1] != '\n' || memchr(buf, '\n', len - 1))
		return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, 0, "the guest's control port answered no line");
	end = buf + len - 1;
	if (take_word(&p, end, "error")) {
		/* "error NONCE|- ERRNO WHAT": a helper's refusal, of this request or of a line it could not read. */
		out->kind = FILES_SAID_ERROR;
		if ((size_t)(end - p) > nl && memcmp(p, nonce, nl) == 0 && p[nl] == ' ')
			p += nl + 1;
		else if (end - p > 1 && p[0] == '-' && p[1] == ' ')
			p += 2;
		else
			goto bad;
		if (take_number(&p, end, 4, &v)) {
			out->err = (int)v;
			if (p < end)
				p++;
		}
		saas__ctl_printable(out->what, sizeof(out->what), p, (size_t)(end - p));
		return SAAS_OK;
	}
	if (take_word(&p, end, "size")) {
		out->kind = FILES_SAID_SIZE;
		if ((size_t)(end - p) <= nl + 1 || memcmp(p, nonce, nl) != 0 || p[nl] != ' ')
			goto bad;
		p += nl + 1;
		/* 18 digits: any size a disk holds, and no int64 overflow. */
		if (!take_number(&p, end, 18, &out->size) || p != end)
			goto bad;
		return SAAS_OK;
	}
	if (take_word(&p, end, "ready") || take_word(&p, end, "ok")) {
		out->kind = buf[0] == 'r' ? FILES_SAID_READY : FILES_SAID_OK;
		if ((size_t)(end - p) < nl || memcmp(p, nonce, nl) != 0)
			goto bad;
		p += nl;
		if (p == end)
			return SAAS_OK;
		if (out->kind == FILES_SAID_OK && end - p == 17 && *p == ' ' && saas__is_hex(p + 1, 16)) {
			memcpy(out->digest, p + 1, 16);
			return SAAS_OK;
		}
	}
bad:
	memset(out, 0, sizeof(*out));
	saas__ctl_printable(said, sizeof(said), buf, len - 1);
	return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, 0, "the guest's control port answered '%s'", said);
}

int saas__ctl_files_error(int err, const char *what, const char *verb, const char *path)
{
	switch (err) {
	case ENOENT:
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_GUEST, err, "%s %s: no such file or directory", verb, path);
	case ENOTDIR:
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_GUEST, err, "%s %s: a parent is not a directory", verb, path);
	case EACCES:
	case EPERM:
	case EROFS:
		return saas__error(SAAS_EPERM, SAAS_ERRCLASS_GUEST, err, "%s %s: permission denied", verb, path);
	case EISDIR:
		return saas__error(SAAS_EISDIR, SAAS_ERRCLASS_GUEST, err, "%s is a directory", path);
	case ENAMETOOLONG:
	case EINVAL:
	case ELOOP:
		return saas__error(SAAS_EINVAL, SAAS_ERRCLASS_GUEST, err,
		                   "%s %s: the guest refused the path (a name too long, or invalid)", verb, path);
	case ENOSPC:
	case EDQUOT:
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, err, "%s %s: no space left on the sandbox's disk", verb,
		                   path);
	default:
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, err, "%s %s failed in the guest: %s", verb, path,
		                   what && *what ? what : "no reason given");
	}
}

/* ---- the connection -------------------------------------------------------------------------- */

/* How long a connection's first exchange may take (the helper answers in milliseconds when it runs). */
#define CTL_HELLO_MS CONTROL_TIMEOUT_MS

void saas__ctl_close(struct saas__ctl *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	free(c);
}

/* How often a wait looks at the cancel flag. */
#define CTL_CANCEL_POLL_MS 100

void saas__ctl_begin(struct saas__ctl *c, int64_t deadline, const int *cancel)
{
	c->deadline = deadline;
	c->cancel = cancel;
	c->waited_ms = c->moved = 0;
}

/*
 * Wait for ev: at most idle_ms, and within the operation's bounds (its
 * deadline, its cancel flag, the guest's budget: control.h). Only here does
 * the engine wait on the guest, so the budget counts exactly that time.
 */
static int conn_wait(struct saas__ctl *c, short ev, int idle_ms)
{
	int64_t start = saas__now_ms(), now = start, budget = c->grace_ms + c->moved / (CONTROL_GUEST_MIN_RATE / 1000);
	int rc;

	for (;;) {
		struct pollfd p = { c->fd, ev, 0 };
		int64_t left = idle_ms - (now - start), b = budget - c->waited_ms - (now - start);
		int r, why = 0; /* what ends the wait: 0 idle, 1 the budget, 2 the deadline */
		if (c->cancel && __atomic_load_n(c->cancel, __ATOMIC_SEQ_CST)) {
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_DRIVER, 0, "cancelled: the engine is shutting down");
			break;
		}
		if (b < left)
			left = b, why = 1;
		if (c->deadline && c->deadline - now < left)
			left = c->deadline - now, why = 2;
		if (left <= 0) {
			if (why == 0)
				rc = saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_GUEST, 0,
				                 "the guest moved nothing on the control port in %d s", idle_ms / 1000);
			else if (why == 1)
				rc = saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_GUEST, 0,
				                 "the guest moved %lld bytes on the control port in %lld s of waiting, slower than "
				                 "the least it must (%d KiB/s after %lld s): given up",
				                 (long long)c->moved, (long long)((c->waited_ms + now - start) / 1000),
				                 CONTROL_GUEST_MIN_RATE / 1024, (long long)(c->grace_ms / 1000));
			else
				rc = saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_GUEST, 0,
				                 "the operation on the control port ran past its deadline");
			break;
		}
		if (c->cancel && left > CTL_CANCEL_POLL_MS)
			left = CTL_CANCEL_POLL_MS;
		r = poll(&p, 1, (int)left);
		now = saas__now_ms();
		if (r > 0) {
			rc = SAAS_OK;
			break;
		}
		if (r < 0 && errno != EINTR) {
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "waiting on the control port: %s", strerror(errno));
			break;
		}
	}
	c->waited_ms += now - start;
	return rc;
}

/* Up to n bytes into dst, straight from the socket: how many (> 0), or an error. */
static long conn_recv(struct saas__ctl *c, void *dst, size_t n)
{
	for (;;) {
		ssize_t r = recv(c->fd, dst, n, 0);
		int rc;
		if (r > 0) {
			c->moved += r;
			return (long)r;
		}
		if (r == 0)
			return saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, 0, "the control port closed");
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "reading the control port: %s", strerror(errno));
		if ((rc = conn_wait(c, POLLIN, CONTROL_FILES_IDLE_MS)) < 0)
			return rc;
	}
}

/* Exactly n bytes (dst NULL: thrown away): what is buffered first, the rest straight into dst. */
static int conn_read(struct saas__ctl *c, void *dst, size_t n)
{
	char *d = dst;

	while (n) {
		long r;
		if (c->off < c->len || !d) {
			size_t take;
			if (c->off == c->len) {
				c->off = c->len = 0;
				if ((r = conn_recv(c, c->buf, sizeof(c->buf))) < 0)
					return (int)r;
				c->len = (size_t)r;
			}
			take = c->len - c->off < n ? c->len - c->off : n;
			if (d) {
				memcpy(d, c->buf + c->off, take);
				d += take;
			}
			c->off += take;
			n -= take;
			continue;
		}
		if ((r = conn_recv(c, d, n)) < 0)
			return (int)r;
		d += r;
		n -= (size_t)r;
	}
	return SAAS_OK;
}

/* One line of the guest's, parsed: at most CONTROL_REPLY_MAX bytes with its '\n'. */
int saas__ctl_line(struct saas__ctl *c, const char *nonce, struct files_reply *out)
{
	for (;;) {
		const char *nl = memchr(c->buf + c->off, '\n', c->len - c->off);
		long r;
		if (nl) {
			size_t n = (size_t)(nl - (c->buf + c->off)) + 1;
			int rc = saas__ctl_files_reply(c->buf + c->off, n, nonce, out);
			c->off += n;
			return rc;
		}
		if (c->len - c->off >= CONTROL_REPLY_MAX)
			return saas__ctl_files_reply(c->buf + c->off, CONTROL_REPLY_MAX, nonce, out);
		if (c->off) {
			memmove(c->buf, c->buf + c->off, c->len - c->off);
			c->len -= c->off;
			c->off = 0;
		}
		if ((r = conn_recv(c, c->buf + c->len, sizeof(c->buf) - c->len)) < 0)
			return (int)r;
		c->len += (size_t)r;
	}
}

/* Everything in iov, as a whole. */
int saas__ctl_send(struct saas__ctl *c, struct iovec *iov, int n)
{
	while (n > 0) {
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)n };
		ssize_t w = sendmsg(c->fd, &m, MSG_NOSIGNAL);
		int rc;
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "writing to the control port: %s",
				                   strerror(errno));
			if ((rc = conn_wait(c, POLLOUT, CONTROL_FILES_IDLE_MS)) < 0)
				return rc;
			continue;
		}
		c->moved += w;
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return SAAS_OK;
}

static int conn_send_text(struct saas__ctl *c, const char *text, size_t n)
{
	struct iovec v = { (void *)text, n };

	return saas__ctl_send(c, &v, 1);
}

void saas__ctl_be32_put(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

uint32_t saas__ctl_be32_get(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/*
 * Bring a connection whose guest end may be anywhere in a transfer back to
 * the start of a request, within CTL_HELLO_MS: a frame's worth of zeros and
 * more (whatever the guest was reading, a frame's data, a header, a digest, a
 * path or a line, ends in them: a put ends on a 0 header with a digest that
 * cannot match, a line is dropped as too long), an abort frame and a newline,
 * then "files NONCE". Everything the guest sends until "ok NONCE" (the rest
 * of a get it was in, its refusals of the zeros) is thrown away: file bytes
 * cannot hold a nonce chosen now. Sending and reading go on together, since
 * a guest in a get reads nothing until it has sent it all.
 */
static int conn_resync(struct saas__ctl *c)
{
	static const char zeros[64 * 1024];
	char nonce[CONTROL_NONCE_LEN + 1], tail[40], okline[40];
	unsigned char abort_frame[4];
	size_t pad = CONTROL_FILES_FRAME_MAX + 64, sent = 0, total, want, tlen;
	struct timespec t0;
	int rc;

	if ((rc = saas__ctl_nonce(nonce)) < 0)
		return rc;
	saas__ctl_be32_put(abort_frame, CONTROL_FILES_FRAME_ABORT);
	tlen = (size_t)snprintf(tail, sizeof(tail), "\nfiles %s\n", nonce);
	total = pad + sizeof(abort_frame) + tlen;
	want = (size_t)snprintf(okline, sizeof(okline), "ok %s\n", nonce);
	c->off = c->len = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int left = CTL_HELLO_MS - (int)saas__ms_since(&t0);
		struct pollfd p = { c->fd, (short)(POLLIN | (sent < total ? POLLOUT : 0)), 0 };
		if (left <= 0 || poll(&p, 1, left) <= 0)
			return saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_GUEST, 0,
			                   "the guest's control port did not come back to a request in %d s", CTL_HELLO_MS / 1000);
		if ((p.revents & POLLOUT) && sent < total) {
			struct iovec v;
			ssize_t w;
			if (sent < pad)
				v = (struct iovec){ (void *)zeros, pad - sent < sizeof(zeros) ? pad - sent : sizeof(zeros) };
			else if (sent < pad + sizeof(abort_frame))
				v = (struct iovec){ abort_frame + (sent - pad), sizeof(abort_frame) - (sent - pad) };
			else
				v = (struct iovec){ tail + (sent - pad - sizeof(abort_frame)), total - sent };
			w = send(c->fd, v.iov_base, v.iov_len, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (w > 0)
				sent += (size_t)w;
			else if (w < 0 && errno != EAGAIN && errno != EINTR)
				return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "writing to the control port: %s",
				                   strerror(errno));
		}
		if (p.revents & (POLLIN | POLLHUP)) {
			ssize_t r;
			/* Keep the last want - 1 bytes: the answer may straddle two reads. */
			if (c->len > want - 1) {
				memmove(c->buf, c->buf + c->len - (want - 1), want - 1);
				c->len = want - 1;
			}
			r = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, MSG_DONTWAIT);
			if (r == 0)
				return saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, 0, "the control port closed");
			if (r < 0 && errno != EAGAIN && errno != EINTR)
				return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "reading the control port: %s", strerror(errno));
			if (r > 0)
				c->len += (size_t)r;
			if (sent == total && memmem(c->buf, c->len, okline, want)) {
				/* Nothing is asked after the probe: nothing the guest says after its answer is ours. */
				c->off = c->len = 0;
				return SAAS_OK;
			}
		}
	}
}

int saas__ctl_get(struct saas__ctl **ctl, const struct saas__ctl_way *way, int *serves)
{
	struct saas__ctl *c;
	char nonce[CONTROL_NONCE_LEN + 1], line[64];
	struct files_reply r;
	int rc, n;

	if (*serves < 0)
		return SAAS_ENOTSUP;
	if (*ctl)
		return SAAS_OK;
	if (!(c = malloc(sizeof(*c))))
		return saas__oom();
	c->off = c->len = 0;
	c->grace_ms = CONTROL_GUEST_GRACE_MS;
	/* The first exchange is a line or two: it has the hello's bound, whatever the guest trickles. */
	saas__ctl_begin(c, saas__now_ms() + CTL_HELLO_MS, NULL);
	if (saas__ctl_open(way, &c->fd) < 0) {
		/*
		 * No socket (no channel): a domain without the port (it stays
		 * without one). A driver's way may fail for a while (a host briefly
		 * gone, a channel another engine holds): its driver says whether
		 * and when it is asked again.
		 */
		if (!way->open)
			*serves = -1;
		rc = saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "%s", saas_error_last()->message);
		saas__ctl_close(c);
		return rc;
	}
	if (*serves == 0) {
		/*
		 * The first connection to this VM: its helper waits for a line, and
		 * one that predates files says "error - not a request" at once.
		 */
		if ((rc = saas__ctl_nonce(nonce)) < 0) {
			saas__ctl_close(c);
			return rc;
		}
		n = snprintf(line, sizeof(line), "files %s\n", nonce);
		rc = conn_send_text(c, line, (size_t)n);
		if (rc == SAAS_OK) {
			struct pollfd p = { c->fd, POLLIN, 0 };
			rc = poll(&p, 1, CTL_HELLO_MS) > 0 ? saas__ctl_line(c, nonce, &r) : SAAS_ETIMEOUT;
		}
		if (rc == SAAS_OK && r.kind == FILES_SAID_ERROR && r.err == 0 && strstr(r.what, "not a request")) {
			*serves = -1;
			saas__ctl_close(c);
			return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_GUEST, 0,
			                   "the guest's helper predates files over the port");
		}
		if (rc != SAAS_OK || r.kind != FILES_SAID_OK)
			rc = conn_resync(c); /* the engine before this one left it in a transfer */
	} else {
		/* A connection lost in the stream: the guest may be anywhere in a transfer. */
		rc = conn_resync(c);
	}
	if (rc < 0) {
		*serves = -1;
		rc = saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_GUEST, 0, "the guest's helper serves no files: %s",
		                 saas_error_last()->message);
		saas__ctl_close(c);
		return rc;
	}
	*serves = 1;
	*ctl = c;
	return SAAS_OK;
}

/* The request line and the path. */
static int conn_request(struct saas__ctl *c, const char *line, const char *path)
{
	struct iovec v[2] = { { (void *)line, strlen(line) }, { (void *)path, strlen(path) } };

	return saas__ctl_send(c, v, 2);
}

static int path_check(const char *path)
{
	if (!path || path[0] != '/')
		return saas__inval("the path must be absolute");
	if (strlen(path) > CONTROL_FILES_PATH_MAX)
		return saas__inval("the path is longer than %d bytes", CONTROL_FILES_PATH_MAX);
	return SAAS_OK;
}

/* A line that was not the one expected: the guest's refusal, or one out of turn (the stream is lost). */
static int unexpected(const struct files_reply *r, const char *verb, const char *path, bool *lost)
{
	if (r->kind == FILES_SAID_ERROR)
		return saas__ctl_files_error(r->err, r->what, verb, path);
	*lost = true;
	return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, 0, "%s %s: the guest's helper answered out of turn", verb,
	                   path);
}

/* After a transfer: a connection whose stream is lost is closed (the next one resynchronises). */
static void ctl_done(struct saas__ctl **ctl, bool lost)
{
	if (lost) {
		saas__ctl_close(*ctl);
		*ctl = NULL;
	}
}

int saas__ctl_files_write(struct saas__ctl **ctl, const struct saas__ctl_way *way, int *serves, const char *path,
                          unsigned int mode, saas_read_fn reader, void *ud, const int *cancel)
{
	struct saas__ctl *c;
	struct files_reply r;
	saas__xxh64_ctx sum;
	unsigned char hdr[4], digest[8], *buf = NULL;
	char nonce[CONTROL_NONCE_LEN + 1], line[96];
	bool lost = true;
	long failed = 0;
	int rc;

	if ((rc = path_check(path)) < 0 || (rc = saas__ctl_get(ctl, way, serves)) < 0)
		return rc;
	c = *ctl;
	saas__ctl_begin(c, 0, cancel);
	if ((rc = saas__ctl_nonce(nonce)) < 0)
		goto out;
	snprintf(line, sizeof(line), "put %s %o %zu\n", nonce, mode & 07777, strlen(path));
	if ((rc = conn_request(c, line, path)) < 0 || (rc = saas__ctl_line(c, nonce, &r)) < 0)
		goto out;
	lost = false;
	if (r.kind != FILES_SAID_READY) {
		rc = unexpected(&r, "writing", path, &lost);
		goto out;
	}
	lost = true;
	if (!(buf = malloc(CONTROL_FILES_FRAME_MAX)))
		goto abort;
	saas__xxh64_init(&sum, 0);
	for (;;) {
		struct iovec v[2];
		long n = reader(ud, buf, CONTROL_FILES_FRAME_MAX);
		if (n < 0) {
			failed = n;
			goto abort;
		}
		if (n == 0)
			break;
		if (n > CONTROL_FILES_FRAME_MAX)
			n = CONTROL_FILES_FRAME_MAX;
		saas__xxh64_update(&sum, buf, (size_t)n);
		saas__ctl_be32_put(hdr, (uint32_t)n);
		v[0] = (struct iovec){ hdr, sizeof(hdr) };
		v[1] = (struct iovec){ buf, (size_t)n };
		if ((rc = saas__ctl_send(c, v, 2)) < 0)
			goto out;
	}
	{
		uint64_t h = saas__xxh64_digest(&sum);
		struct iovec v[2] = { { hdr, sizeof(hdr) }, { digest, sizeof(digest) } };
		for (int i = 0; i < 8; i++)
			digest[i] = (unsigned char)(h >> (56 - 8 * i));
		saas__ctl_be32_put(hdr, 0);
		if ((rc = saas__ctl_send(c, v, 2)) < 0 || (rc = saas__ctl_line(c, nonce, &r)) < 0)
			goto out;
	}
	lost = false;
	rc = r.kind == FILES_SAID_OK && !r.digest[0] ? SAAS_OK : unexpected(&r, "writing", path, &lost);
	goto out;
abort:
	/* The source failed (or memory did): an abort frame ends the put in the guest, no file, and the stream goes on. */
	saas__ctl_be32_put(hdr, CONTROL_FILES_FRAME_ABORT);
	if (conn_send_text(c, (const char *)hdr, sizeof(hdr)) == SAAS_OK && saas__ctl_line(c, nonce, &r) == SAAS_OK &&
	    r.kind == FILES_SAID_ERROR)
		lost = false;
	rc = buf ? saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, failed, "writing %s: the data source failed", path)
	         : saas__oom();
out:
	ctl_done(ctl, lost);
	free(buf);
	return rc;
}

int saas__ctl_files_read(struct saas__ctl **ctl, const struct saas__ctl_way *way, int *serves, const char *path, int64_t max,
                         saas_write_fn writer, void *ud, int64_t *size, const int *cancel)
{
	struct saas__ctl *c;
	struct files_reply r;
	saas__xxh64_ctx sum;
	unsigned char hdr[4], *buf = NULL;
	char nonce[CONTROL_NONCE_LEN + 1], line[96], hex[17];
	int64_t want, got = 0;
	bool lost = true, stopped = false;
	int rc, stop = 0;

	if ((rc = path_check(path)) < 0 || (rc = saas__ctl_get(ctl, way, serves)) < 0)
		return rc;
	c = *ctl;
	saas__ctl_begin(c, 0, cancel);
	if ((rc = saas__ctl_nonce(nonce)) < 0)
		goto out;
	snprintf(line, sizeof(line), "get %s %lld %zu\n", nonce, (long long)(max > 0 ? max : 0), strlen(path));
	if ((rc = conn_request(c, line, path)) < 0 || (rc = saas__ctl_line(c, nonce, &r)) < 0)
		goto out;
	lost = false;
	if (r.kind != FILES_SAID_SIZE) {
		rc = unexpected(&r, "reading", path, &lost);
		goto out;
	}
	want = r.size;
	if (max > 0 && want > max) {
		/* The guest sends nothing after a size over the bound it was given. */
		rc = saas__error(SAAS_ETOOBIG, SAAS_ERRCLASS_GUEST, 0, "%s is %lld bytes, more than %lld", path,
		                 (long long)want, (long long)max);
		goto out;
	}
	lost = true;
	if (size)
		*size = want;
	if (!(buf = malloc(CONTROL_FILES_FRAME_MAX))) {
		rc = saas__oom();
		goto out;
	}
	saas__xxh64_init(&sum, 0);
	for (;;) {
		uint32_t len;
		if ((rc = conn_read(c, hdr, sizeof(hdr))) < 0)
			goto out;
		len = saas__ctl_be32_get(hdr);
		if (len == 0)
			break;
		if (len == CONTROL_FILES_FRAME_ABORT) {
			if ((rc = saas__ctl_line(c, nonce, &r)) == SAAS_OK) {
				lost = false;
				rc = unexpected(&r, "reading", path, &lost);
			}
			goto out;
		}
		if (len > CONTROL_FILES_FRAME_MAX || (int64_t)len > want - got) {
			rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, 0,
			                 "reading %s: the guest sent a frame of %u bytes with %lld of %lld left", path, len,
			                 (long long)(want - got), (long long)want);
			goto out;
		}
		/* After the receiver stopped, the rest is read and thrown away: the stream stays whole. */
		if ((rc = conn_read(c, stopped ? NULL : buf, len)) < 0)
			goto out;
		got += len;
		if (stopped)
			continue;
		saas__xxh64_update(&sum, buf, len);
		if ((stop = writer(ud, buf, len)))
			stopped = true;
	}
	if (got != want) {
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, 0, "reading %s: the guest sent %lld of %lld bytes", path,
		                 (long long)got, (long long)want);
		goto out;
	}
	if ((rc = saas__ctl_line(c, nonce, &r)) < 0)
		goto out;
	lost = false;
	if (r.kind != FILES_SAID_OK || !r.digest[0]) {
		rc = unexpected(&r, "reading", path, &lost);
		goto out;
	}
	if (stopped) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, stop, "reading %s: the receiver stopped", path);
		goto out;
	}
	snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)saas__xxh64_digest(&sum));
	if (strcmp(hex, r.digest) != 0)
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, 0,
		                 "reading %s: the bytes' checksum does not match the guest's", path);
out:
	ctl_done(ctl, lost);
	free(buf);
	return rc;
}
