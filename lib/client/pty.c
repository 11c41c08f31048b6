/*
 * Terminals: the public calls on a session, the same for every provider (a
 * session is a stream socket and two operations). The local provider's
 * session, which is the driver's, is in core/local.c.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client/provider.h"

#define PTY_TERM_DEFAULT "xterm-256color"

static int check_size(unsigned int cols, unsigned int rows)
{
	if (cols < 1 || cols > SAAS_PTY_SIZE_MAX || rows < 1 || rows > SAAS_PTY_SIZE_MAX)
		return saas__inval("a terminal is 1 to %u columns and rows (asked: %u x %u)", SAAS_PTY_SIZE_MAX, cols, rows);
	return SAAS_OK;
}

/* TERM names a terminfo entry: a file name, so nothing that could walk paths or break a shell's quoting. */
static int check_term(const char *term)
{
	size_t n = strlen(term);

	if (!n || n > SAAS_PTY_TERM_MAX)
		return saas__inval("term must be 1 to %u characters", SAAS_PTY_TERM_MAX);
	for (size_t i = 0; i < n; i++) {
		char ch = term[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
		      ch == '.' || ch == '+' || ch == '_'))
			return saas__inval("term may hold letters, digits, '-', '.', '+' and '_' only");
	}
	if (term[0] == '.')
		return saas__inval("term may not start with '.'");
	return SAAS_OK;
}

SAAS_EXTERN(int) saas_pty_open(saas_pty **out, saas_client *c, const char *sandbox_id,
                               const saas_pty_options *options, unsigned int flags)
{
	/* What each version of the options holds: a version 1 caller's struct ends before cwd. */
	static const size_t sizes[] = { 0, offsetof(saas_pty_options, cwd), sizeof(saas_pty_options) };
	saas_pty_options opts = SAAS_PTY_OPTIONS_INIT;
	const saas_pty_options *o = &opts;
	struct saas__pty_req req;
	int rc;

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	if (!c)
		return saas__inval("client is NULL");
	if (!sandbox_id || !*sandbox_id || !saas__valid_text(sandbox_id, SAAS_ID_MAX))
		return saas__inval("sandbox id is missing, too long or not printable");
	if (flags & ~SAAS_PTY_NOTTY)
		return saas__inval("unknown flags 0x%x", flags & ~SAAS_PTY_NOTTY);
	if ((rc = saas__options_read(&opts, options, sizes, SAAS_PTY_OPTIONS_VERSION, "pty")) < 0)
		return rc;
	req.term = o->term ? o->term : PTY_TERM_DEFAULT;
	req.cols = o->cols ? o->cols : SAAS_PTY_COLS_DEFAULT;
	req.rows = o->rows ? o->rows : SAAS_PTY_ROWS_DEFAULT;
	req.tty = !(flags & SAAS_PTY_NOTTY);
	/* "" is no directory at all, as for exec: a mistake to report, not the home. */
	req.cwd = o->cwd;
	req.env = o->env && o->env[0] ? o->env : NULL;
	if ((rc = check_term(req.term)) < 0 || (rc = check_size(req.cols, req.rows)) < 0 ||
	    (req.cwd && (rc = saas__check_path(req.cwd, true)) < 0) || (rc = saas__check_env(req.env)) < 0)
		return rc;
	if (!c->ops->pty_open)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_ARGS, 0, "this client cannot open terminals");
	return c->ops->pty_open(c, sandbox_id, &req, out);
}

SAAS_EXTERN(int) saas_pty_fd(const saas_pty *pty)
{
	return pty ? pty->fd : -1;
}

SAAS_EXTERN(int) saas_pty_read(saas_pty *pty, void *buf, size_t size, size_t *got, int timeout_ms)
{
	struct pollfd pf;
	ssize_t n;
	int ready;

	saas__error_clear();
	if (got)
		*got = 0;
	if (!pty || !buf || !size || !got)
		return saas__inval("pty, buf or got is NULL, or size is 0");
	pf.fd = pty->fd;
	pf.events = POLLIN;
	do {
		pf.revents = 0;
		ready = poll(&pf, 1, timeout_ms < 0 ? -1 : timeout_ms);
	} while (ready < 0 && errno == EINTR);
	if (ready < 0)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "poll: %s", strerror(errno));
	if (ready == 0)
		return saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_ARGS, 0, "no output from the terminal within %d ms", timeout_ms);
	do
		n = recv(pty->fd, buf, size, MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_ARGS, 0, "no output from the terminal yet");
	if (n < 0)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "reading the terminal: %s", strerror(errno));
	*got = (size_t)n;
	return SAAS_OK;
}

SAAS_EXTERN(int) saas_pty_write(saas_pty *pty, const void *data, size_t len)
{
	const char *p = data;

	saas__error_clear();
	if (!pty || (!data && len))
		return saas__inval("pty or data is NULL");
	while (len) {
		ssize_t n;
		if (pty->write_timeout_ms) {
			/* Wait for room, then take what fits: each wait is a new chance to progress. */
			struct pollfd pf = { pty->fd, POLLOUT, 0 };
			int ready = poll(&pf, 1, (int)pty->write_timeout_ms);
			if (ready < 0 && errno == EINTR)
				continue;
			if (ready == 0)
				return saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_ARGS, 0,
				                   "the terminal took no input for %u ms: its shell reads none", pty->write_timeout_ms);
			n = send(pty->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				continue;
		} else {
			n = send(pty->fd, p, len, MSG_NOSIGNAL);
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
			return saas__error(SAAS_ESTATE, SAAS_ERRCLASS_ARGS, 0,
			                   "the terminal takes no more input: its shell ended, or end-of-input was sent");
		if (n < 0)
			return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "writing to the terminal: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
	}
	return SAAS_OK;
}

SAAS_EXTERN(int) saas_pty_set_write_timeout(saas_pty *pty, unsigned int timeout_ms)
{
	saas__error_clear();
	if (!pty)
		return saas__inval("pty is NULL");
	pty->write_timeout_ms = timeout_ms > INT_MAX ? INT_MAX : timeout_ms;
	return SAAS_OK;
}

SAAS_EXTERN(int) saas_pty_send_eof(saas_pty *pty)
{
	saas__error_clear();
	if (!pty)
		return saas__inval("pty is NULL");
	if (shutdown(pty->fd, SHUT_WR) < 0 && errno != ENOTCONN)
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "ending the terminal's input: %s", strerror(errno));
	return SAAS_OK;
}

SAAS_EXTERN(int) saas_pty_resize(saas_pty *pty, unsigned int cols, unsigned int rows)
{
	int rc;

	saas__error_clear();
	if (!pty)
		return saas__inval("pty is NULL");
	if ((rc = check_size(cols, rows)) < 0)
		return rc;
	return pty->ops->resize(pty, cols, rows);
}

SAAS_EXTERN(void) saas_pty_close(saas_pty *pty, int *exit_status)
{
	int status = -1;

	if (pty) {
		pty->ops->close(pty, &status);
		if (pty->fd >= 0)
			close(pty->fd);
		free(pty);
	}
	if (exit_status)
		*exit_status = status;
}
