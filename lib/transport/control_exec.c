/*
 * Commands over the control port. A clone is made without waiting for the
 * engine's SSH session: its login (two executables linked at each
 * connection, a key exchange, all under TCG) is most of a clone's time.
 * Until the session is up, a command goes over the port instead, run by the
 * guest's helper (images/guest/aas-control.c) exactly as sshd would run it:
 * the same script (saas__exec_script, the SSH wrapper's without its markers,
 * since the helper knows the shell's status), the user's login shell in its
 * home, sshd's environment, a session of its own. Once the session is up,
 * commands go over SSH again, where many run at once on one connection; the
 * port takes one thing at a time per VM, and files are its first use.
 *
 * Who can use it: the same as the fix-ups and files (control.c,
 * control_files.c). What comes back is hostile input all the same: every
 * frame is checked against the protocol's bounds, a line against
 * CONTROL_REPLY_MAX, a guest that stops moving after the end is given up
 * after CONTROL_EXEC_END_MS, and the waits before the command starts (the
 * probe, "ready") end at its timeout and cancel, which then send it nowhere
 * else.
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
#include "transport/ssh.h"

/* How often the input and control callbacks, the cancel flag and the deadline are looked at while nothing moves. */
#define EXEC_POLL_MS 20

struct xrun {
	struct saas__ctl *c;
	const saas_driver_exec *req;
	/* What goes to the guest: whole frames, sent from obuf[ooff, olen). */
	unsigned char obuf[4 + CONTROL_EXEC_FRAME_MAX + 64];
	size_t ooff, olen;
	/* Stdin: stdin_data first, then what req->input gives, never more than the window ahead. */
	const char *in;
	size_t in_len, in_off;
	bool in_done, eof_queued;
	char in_buf[CONTROL_EXEC_FRAME_MAX];
	struct saas__ctl_xread r;       /* what comes from the guest */
};

/* A whole frame onto obuf (there is room: control frames are small, stdin's is queued only on an empty obuf). */
static void queue(struct xrun *x, unsigned int type, const void *data, size_t len)
{
	if (x->ooff == x->olen)
		x->ooff = x->olen = 0;
	saas__ctl_be32_put(x->obuf + x->olen, (uint32_t)type << 24 | (uint32_t)len);
	if (len)
		memcpy(x->obuf + x->olen + 4, data, len);
	x->olen += 4 + len;
}

/* The next piece of stdin as an IN frame, within the window; or EOF once it ended. */
static void queue_stdin(struct xrun *x)
{
	const saas_driver_exec *req = x->req;
	size_t room = CONTROL_EXEC_WINDOW - x->r.ahead, n;

	if (x->olen != x->ooff || x->eof_queued || x->r.exited || x->r.end_sent)
		return;
	if (x->in_off == x->in_len && !x->in_done) {
		long got;
		if (!req->input) {
			x->in_done = true;
		} else if ((got = req->input(req->control_userdata, x->in_buf, sizeof(x->in_buf))) < 0) {
			x->in_done = true;
		} else if (got > 0) {
			x->in = x->in_buf;
			x->in_len = (size_t)got;
			x->in_off = 0;
		}
	}
	if (x->in_off < x->in_len) {
		if (room == 0)
			return;
		n = x->in_len - x->in_off;
		if (n > room)
			n = room;
		if (n > CONTROL_EXEC_FRAME_MAX)
			n = CONTROL_EXEC_FRAME_MAX;
		queue(x, CTL_X_IN, x->in + x->in_off, n);
		x->in_off += n;
		x->r.ahead += n;
	} else if (x->in_done) {
		queue(x, CTL_X_EOF, NULL, 0);
		x->eof_queued = true;
	}
}

int saas__ctl_send_now(int fd, const void *buf, size_t *off, size_t len)
{
	while (*off < len) {
		ssize_t w = send(fd, (const char *)buf + *off, len - *off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0) {
			*off += (size_t)w;
		} else if (w < 0 && errno == EINTR) {
			continue;
		} else if (w < 0 && errno == EAGAIN) {
			break;
		} else {
			return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "writing to the control port: %s", strerror(errno));
		}
	}
	return SAAS_OK;
}

/* Send what the socket takes now. */
static int send_some(struct xrun *x)
{
	return saas__ctl_send_now(x->c->fd, x->obuf, &x->ooff, x->olen);
}

static int lost(const char *what)
{
	return saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, 0, "the command's stream on the control port broke: %s", what);
}

long saas__ctl_exec_take(struct saas__ctl_xread *r, const char *buf, size_t len, saas_output_fn output, void *ud)
{
	size_t off = 0;

	while (off < len && !r->done) {
		size_t have = len - off;
		uint32_t h, v;
		unsigned int type;
		size_t flen;
		if (r->rleft) {
			/* Output, delivered as it comes: a frame may straddle reads. */
			size_t n = have < r->rleft ? have : r->rleft;
			output(ud, r->rtype == CTL_X_OUT ? SAAS_STREAM_STDOUT : SAAS_STREAM_STDERR, buf + off, n);
			off += n;
			r->rleft -= n;
			continue;
		}
		if (have < 4)
			break;
		h = saas__ctl_be32_get((const unsigned char *)buf + off);
		type = h >> 24;
		flen = h & 0xffffff;
		if (type == CTL_X_OUT || type == CTL_X_ERR) {
			if (flen == 0 || flen > CONTROL_EXEC_FRAME_MAX || r->exited)
				return lost("an output frame out of bounds");
			off += 4;
			r->rtype = type;
			r->rleft = flen;
		} else if (type == CTL_X_TOOK || type == CTL_X_EXIT) {
			if (flen != 4)
				return lost("a frame of the wrong length");
			if (have < 8)
				break;
			v = saas__ctl_be32_get((const unsigned char *)buf + off + 4);
			off += 8;
			if (type == CTL_X_TOOK) {
				if (v > r->ahead)
					return lost("the guest took more stdin than was sent");
				r->ahead -= v;
			} else {
				if (v > 255 || r->exited)
					return lost("a second or impossible exit status");
				r->exited = true;
				r->status = (int)v;
			}
		} else if (type == CTL_X_DONE && flen == 0) {
			if (!r->end_sent)
				return lost("the guest ended a command the engine had not");
			off += 4;
			r->done = true;
		} else {
			return lost("a frame of no known type");
		}
	}
	return (long)off;
}

/* The frames in the connection's buffer, taken. */
static int take_frames(struct xrun *x)
{
	struct saas__ctl *c = x->c;
	long used = saas__ctl_exec_take(&x->r, c->buf + c->off, c->len - c->off, x->req->output, x->req->output_userdata);

	if (used < 0)
		return (int)used;
	c->off += (size_t)used;
	if (c->off == c->len)
		c->off = c->len = 0;
	else if (c->off > sizeof(c->buf) / 2) {
		memmove(c->buf, c->buf + c->off, c->len - c->off);
		c->len -= c->off;
		c->off = 0;
	}
	return SAAS_OK;
}

static int recv_some(struct xrun *x)
{
	struct saas__ctl *c = x->c;

	for (;;) {
		ssize_t r;
		if (c->len == sizeof(c->buf)) {
			if (c->off == 0)
				return lost("a frame larger than the buffer"); /* cannot happen: frames are read as they come */
			memmove(c->buf, c->buf + c->off, c->len - c->off);
			c->len -= c->off;
			c->off = 0;
		}
		r = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, MSG_DONTWAIT);
		if (r > 0) {
			int rc;
			c->len += (size_t)r;
			if ((rc = take_frames(x)) < 0 || x->r.done)
				return rc;
			continue;
		}
		if (r == 0)
			return lost("the port closed");
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN)
			return SAAS_OK;
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "reading the control port: %s", strerror(errno));
	}
}

/*
 * Why a command stopped before it started in the guest, when its caller's
 * bounds did it (a cancel, its timeout): then it must not go over SSH
 * instead. 0 when neither did.
 */
static int stopped_early(const saas_driver_exec *req, int64_t deadline)
{
	if (__atomic_load_n(req->cancel, __ATOMIC_SEQ_CST))
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, 0, "cancelled: the engine is shutting down");
	if (deadline && saas__now_ms() >= deadline)
		return saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_GUEST, 0,
		                   "the command's timeout of %lld ms passed before the guest started it",
		                   (long long)req->timeout_ms);
	return 0;
}

int saas__ctl_probe(struct saas__ctl *c, const char *verb, int *known, const char *what)
{
	char nonce[CONTROL_NONCE_LEN + 1], line[64];
	struct iovec v;
	struct files_reply r;
	int rc;

	if ((rc = saas__ctl_nonce(nonce)) < 0)
		return rc;
	v.iov_base = line;
	v.iov_len = (size_t)snprintf(line, sizeof(line), "%s %s 0\n", verb, nonce);
	if ((rc = saas__ctl_send(c, &v, 1)) < 0 || (rc = saas__ctl_line(c, nonce, &r)) < 0)
		return rc;
	if (r.kind == FILES_SAID_OK) {
		*known = 1;
		return SAAS_OK;
	}
	if (r.kind == FILES_SAID_ERROR && r.err == 0 && strstr(r.what, "not a request")) {
		*known = -1;
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_GUEST, 0, "the guest's helper predates %s over the port", what);
	}
	return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, 0, "the guest's helper answered the probe out of turn");
}

/* Does the helper run plain commands with no shell? *execs 2 if so, 3 if not (it predates run): SAAS_OK either way. */
static int probe_run(struct saas__ctl *c, int *execs)
{
	int known = 0, rc = saas__ctl_probe(c, "run", &known, "commands with no shell");

	if (rc == SAAS_ENOTSUP && known < 0) {
		saas__error_clear();
		rc = SAAS_OK;
	}
	if (rc == SAAS_OK)
		*execs = known > 0 ? 2 : 3;
	return rc;
}

/*
 * The run's request (control_proto.h) in place of the script: the script,
 * NUL, the directory, the exports, the words. One too long for the port is
 * left the script alone (*plain 0).
 */
static int run_request(saas__buf *script, const saas__buf *words, const saas_driver_exec *req, int *plain)
{
	size_t had = script->len;
	int rc = saas__buf_put(script, "", 1);

	if (rc == SAAS_OK)
		rc = saas__buf_put(script, req->cwd ? req->cwd : "", (req->cwd ? strlen(req->cwd) : 0) + 1);
	for (const char *const *e = req->env; rc == SAAS_OK && e && *e; e++)
		rc = saas__buf_put(script, *e, strlen(*e) + 1);
	if (rc == SAAS_OK)
		rc = saas__buf_put(script, "", 1);
	if (rc == SAAS_OK)
		rc = saas__buf_put(script, words->data, words->len);
	if (rc == SAAS_OK && script->len > CONTROL_EXEC_SCRIPT_MAX) {
		script->len = had; /* too long with its fields: the script alone, run by the shell */
		*plain = 0;
	}
	return rc;
}

int saas__ctl_exec(struct saas__ctl **ctl, const struct saas__ctl_way *way, int *serves, int *execs,
                   const saas_driver_exec *req, int *exit_code)
{
	const char *stop_why = NULL;
	struct xrun *x = NULL;
	saas__buf script = SAAS__BUF_INIT, words = SAAS__BUF_INIT;
	char nonce[CONTROL_NONCE_LEN + 1], line[64];
	struct files_reply r;
	struct iovec v[2];
	int plain = 0;
	int64_t deadline = req->timeout_ms > 0 ? saas__now_ms() + req->timeout_ms : 0, end_at = 0;
	int rc, stop = 0; /* SAAS_ETIMEOUT or SAAS_EIO once the command is being killed */
	bool broken = true;

	*exit_code = -1;
	if (*execs < 0)
		return SAAS_ENOTSUP;
	if (__atomic_load_n(req->cancel, __ATOMIC_SEQ_CST))
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, 0, "cancelled: the engine is shutting down");
	if ((rc = saas__exec_script(&script, req)) < 0 || (rc = plain = saas__exec_plain(&words, req)) < 0)
		goto out_free;
	if (script.len > CONTROL_EXEC_SCRIPT_MAX) {
		rc = saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "the command is longer than the control port takes");
		goto out_free;
	}
	if ((rc = saas__ctl_get(ctl, way, serves)) < 0)
		goto out_free;
	/* The waits for the guest's lines (the probe's, "ready") end at the command's timeout and cancel. */
	saas__ctl_begin(*ctl, deadline, req->cancel);
	if ((*execs == 0 && (rc = saas__ctl_probe(*ctl, "exec", execs, "commands")) < 0) ||
	    (plain > 0 && *execs == 1 && (rc = probe_run(*ctl, execs)) < 0)) {
		if (rc != SAAS_ENOTSUP) {
			int why = stopped_early(req, deadline);
			saas__ctl_close(*ctl); /* the next use brings the stream back */
			*ctl = NULL;
			/* Not asked to the end: asked again next time. */
			rc = why ? why : saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_GUEST, 0, "%s", saas_error_last()->message);
		}
		goto out_free;
	}
	/* A plain command the helper can run with no shell: the script, then the fields it runs without it. */
	if (plain > 0 && *execs == 2 && (rc = run_request(&script, &words, req, &plain)) < 0)
		goto out_free;
	if (!(x = calloc(1, sizeof(*x)))) {
		rc = saas__oom();
		goto out_free;
	}
	x->c = *ctl;
	x->req = req;
	x->in = req->stdin_data;
	x->in_len = req->stdin_data ? req->stdin_len : 0;
	if ((rc = saas__ctl_nonce(nonce)) < 0) {
		broken = false;
		goto out;
	}
	v[0].iov_base = line;
	v[0].iov_len = (size_t)snprintf(line, sizeof(line), "%s %s %zu\n", plain > 0 && *execs == 2 ? "run" : "exec", nonce,
	                                script.len);
	v[1].iov_base = script.data;
	v[1].iov_len = script.len;
	if ((rc = saas__ctl_send(x->c, v, 2)) < 0) {
		/* The helper waits for the rest of a script: it never started it, and the next use resynchronises. */
		int why = stopped_early(req, deadline);
		rc = why ? why : saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_GUEST, 0, "%s", saas_error_last()->message);
		goto out;
	}
	if ((rc = saas__ctl_line(x->c, nonce, &r)) < 0)
		goto out;
	if (r.kind == FILES_SAID_ERROR) {
		broken = false;
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, r.err, "the command could not start in the guest: %s",
		                 r.what[0] ? r.what : "no reason given");
		goto out;
	}
	if (r.kind != FILES_SAID_READY) {
		rc = lost("the guest answered out of turn");
		goto out;
	}
	/* "ready": the shell (or the plain command) runs, and none of its output has come yet. */
	if (way->ready)
		way->ready(way->ready_ud);
	if (req->started)
		req->started(req->control_userdata);
	if ((rc = take_frames(x)) < 0)
		goto out;

	while (!x->r.done) {
		int64_t now = saas__now_ms();
		struct pollfd p = { x->c->fd, POLLIN, 0 };
		int wait = EXEC_POLL_MS;

		if (!stop && !x->r.exited) {
			/* Signals, and a caller's kill (-1), while the command runs. */
			if (req->control) {
				int group, sig = 0;
				unsigned char s[2];
				/* Room for each, and for a KILL and an END after them; a flood waits for the next turn. */
				while (x->olen + 6 + 8 <= sizeof(x->obuf) &&
				       (sig = req->control(req->control_userdata, &group)) > 0) {
					s[0] = (unsigned char)(sig < 256 ? sig : 0);
					s[1] = group != 0;
					queue(x, CTL_X_SIGNAL, s, sizeof(s));
				}
				if (sig < 0)
					stop = SAAS_EIO, stop_why = "cancelled by its caller";
			}
			if (!stop && deadline && now >= deadline)
				stop = SAAS_ETIMEOUT;
			else if (!stop && __atomic_load_n(req->cancel, __ATOMIC_SEQ_CST))
				stop = SAAS_EIO, stop_why = "cancelled: the engine is shutting down";
			if (stop)
				queue(x, CTL_X_KILL, NULL, 0);
		}
		if ((stop || x->r.exited) && !x->r.end_sent) {
			queue(x, CTL_X_END, NULL, 0);
			x->r.end_sent = true;
			end_at = now;
		}
		queue_stdin(x);
		if ((rc = send_some(x)) < 0)
			goto out;
		if (x->r.end_sent && now - end_at >= CONTROL_EXEC_END_MS) {
			rc = lost("the guest did not end the command");
			goto out;
		}
		if (x->ooff < x->olen)
			p.events |= POLLOUT;
		if (deadline && !stop && deadline - now < wait)
			wait = deadline - now > 0 ? (int)(deadline - now) : 0;
		if (poll(&p, 1, wait) < 0 && errno != EINTR) {
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "waiting on the control port: %s", strerror(errno));
			goto out;
		}
		if ((p.revents & (POLLIN | POLLHUP | POLLERR)) && (rc = recv_some(x)) < 0)
			goto out;
	}
	broken = false;
	if (stop == SAAS_ETIMEOUT)
		rc = saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_GUEST, 0,
		                 "the command ran past its timeout of %lld ms and was killed, with every process it started",
		                 (long long)req->timeout_ms);
	else if (stop)
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, 0, "%s", stop_why);
	else
		*exit_code = x->r.status, rc = SAAS_OK;
out:
	if (broken) {
		saas__ctl_close(*ctl);
		*ctl = NULL;
	}
out_free:
	free(x);
	saas__buf_free(&script);
	saas__buf_free(&words);
	return rc;
}
