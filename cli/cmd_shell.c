/*
 * aas shell: a terminal in a sandbox, as `ssh` gives one.
 *
 * On a terminal, the local one goes raw (every key reaches the remote shell,
 * ^C included) and is restored on every way out: the shell's exit, a lost
 * connection, SIGTERM or SIGHUP. SIGWINCH becomes a resize. Without a
 * terminal (piped commands), the remote shell reads the pipe and ends at its
 * end. Signals reach the loop through a pipe, so nothing but write() runs in
 * a handler.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "common.h"

static const char help[] =
	"usage: aas shell ID [-t|-T] [--term TERM] [--cwd DIR] [-e NAME=VALUE]...\n"
	"\n"
	"Open a terminal in a sandbox: the sandbox user's login shell, as ssh gives one.\n"
	"Exits with the shell's exit status (126 when it cannot enter --cwd).\n"
	"\n"
	"  -t               a terminal even when stdin is not one (as ssh -tt)\n"
	"  -T               no terminal: the shell reads stdin as a pipe and ends at its end\n"
	"                   (the default when stdin is not a terminal)\n"
	"  --term TERM      TERM for the shell (default: yours, else xterm-256color)\n"
	"  --cwd DIR        start in DIR (relative: under /workspace) rather than the home\n"
	"  -e, --env NAME=VALUE  set in the shell's environment (repeatable, at most 128),\n"
	"                   over the sandbox's own; both after the login profile has run\n";

static int sig_pipe[2] = { -1, -1 };
static struct termios saved;
static int raw_on;

static void on_signal(int sig)
{
	unsigned char b = (unsigned char)sig;
	int e = errno;

	if (write(sig_pipe[1], &b, 1) < 0) {
		/* Full: a resize or an end is pending already. */
	}
	errno = e;
}

static void raw_restore(void)
{
	if (raw_on) {
		tcsetattr(STDIN_FILENO, TCSADRAIN, &saved);
		raw_on = 0;
	}
}

static int raw_enter(void)
{
	struct termios t;

	if (tcgetattr(STDIN_FILENO, &saved) < 0)
		return -1;
	t = saved;
	cfmakeraw(&t);
	if (tcsetattr(STDIN_FILENO, TCSADRAIN, &t) < 0)
		return -1;
	raw_on = 1;
	return 0;
}

static void win_size(unsigned int *cols, unsigned int *rows)
{
	struct winsize ws;

	if ((ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0 || ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0) && ws.ws_col &&
	    ws.ws_row) {
		*cols = ws.ws_col;
		*rows = ws.ws_row;
	}
}

static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Copy both ways until the shell ends or a signal says stop; the signal, or 0. */
static int relay(saas_pty *pty, int tty)
{
	char buf[16384];
	int in_open = 1;

	for (;;) {
		struct pollfd pf[3] = { { saas_pty_fd(pty), POLLIN, 0 },
			                { sig_pipe[0], POLLIN, 0 },
			                { STDIN_FILENO, (short)(in_open ? POLLIN : 0), 0 } };
		size_t got = 0;

		if (poll(pf, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			return 0;
		}
		if (pf[1].revents & POLLIN) {
			unsigned char sig;
			if (read(sig_pipe[0], &sig, 1) == 1) {
				if (sig == SIGWINCH) {
					unsigned int cols = 0, rows = 0;
					win_size(&cols, &rows);
					if (cols)
						saas_pty_resize(pty, cols, rows);
				} else {
					return sig;
				}
			}
		}
		if (pf[0].revents) {
			if (saas_pty_read(pty, buf, sizeof(buf), &got, 0) == SAAS_OK) {
				if (!got)
					return 0; /* the shell ended */
				if (write_all(STDOUT_FILENO, buf, got) < 0)
					return SIGPIPE;
			}
		}
		if (in_open && (pf[2].revents & (POLLIN | POLLHUP | POLLERR))) {
			ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (n <= 0) {
				/* Without a terminal, end-of-input ends the shell; on one, as ssh -tt, it changes nothing. */
				in_open = 0;
				if (!tty)
					saas_pty_send_eof(pty);
			} else if (saas_pty_write(pty, buf, (size_t)n) < 0) {
				in_open = 0; /* the shell is ending: its output and status follow */
			}
		}
	}
}

int aas_cmd_shell(aas_ctx *ctx, int argc, char **argv)
{
	static const int sigs[] = { SIGWINCH, SIGTERM, SIGHUP, SIGINT, SIGQUIT };
	saas_pty_options opts = SAAS_PTY_OPTIONS_INIT;
	saas_client *client = NULL;
	saas_pty *pty = NULL;
	const char *id = NULL, *v, *env[SAAS_ENVS_MAX + 1] = { NULL };
	size_t nenv = 0;
	int i, r, rc, code, n = 0, tty = -1, status = -1, sig = 0;
	struct sigaction sa;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-t") == 0 || strcmp(argv[i], "--tty") == 0) {
			tty = 1;
		} else if (strcmp(argv[i], "-T") == 0 || strcmp(argv[i], "--no-tty") == 0) {
			tty = 0;
		} else if ((r = aas_opt("shell", argc, argv, &i, "--term", NULL, &v)) != 0) {
			if (r < 0)
				return AAS_EXIT_USAGE;
			opts.term = v;
		} else if ((r = aas_opt("shell", argc, argv, &i, "--cwd", NULL, &v)) != 0) {
			if (r < 0)
				return AAS_EXIT_USAGE;
			opts.cwd = v;
		} else if ((r = aas_pair_opt("shell", argc, argv, &i, "--env", "-e", "NAME=VALUE", env, &nenv,
		                             SAAS_ENVS_MAX)) != 0) {
			if (r < 0)
				return AAS_EXIT_USAGE;
		} else if ((code = aas_arg(ctx, "shell", argc, argv, &i, &id, 1, &n)) != AAS_EXIT_OK) {
			return code;
		}
	}
	if ((code = aas_args_done(ctx, "shell", help, n, 1, "sandbox ID", NULL)) != AAS_GO)
		return code;
	if (nenv)
		opts.env = env;
	if (tty < 0)
		tty = isatty(STDIN_FILENO);
	if (tty && !opts.term && (v = getenv("TERM")) && *v && strcmp(v, "dumb") != 0)
		opts.term = v;
	if (tty)
		win_size(&opts.cols, &opts.rows);
	if ((code = aas_open(ctx, &client)) != AAS_EXIT_OK)
		return code;
	rc = saas_pty_open(&pty, client, id, &opts, tty ? 0 : SAAS_PTY_NOTTY);
	if (rc == SAAS_EINVAL && opts.term && opts.term == getenv("TERM")) {
		/* A TERM of ours the service does not take: the default one rather than no shell. */
		opts.term = NULL;
		rc = saas_pty_open(&pty, client, id, &opts, tty ? 0 : SAAS_PTY_NOTTY);
	}
	if (rc != SAAS_OK) {
		code = aas_fail(rc, id);
		goto out;
	}
	if (pipe(sig_pipe) < 0) {
		code = aas_error(AAS_EXIT_ERROR, "pipe: %s", strerror(errno));
		goto out;
	}
	fcntl(sig_pipe[1], F_SETFL, O_NONBLOCK);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t k = 0; k < sizeof(sigs) / sizeof(sigs[0]); k++)
		sigaction(sigs[k], &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (tty && isatty(STDIN_FILENO) && raw_enter() < 0) {
		code = aas_error(AAS_EXIT_ERROR, "cannot put the terminal in raw mode: %s", strerror(errno));
		goto out;
	}
	sig = relay(pty, tty);
	saas_pty_close(pty, &status);
	pty = NULL;
	raw_restore();
	if (sig && sig != SIGPIPE) {
		/* Ended here (TERM, HUP, or ^C without a terminal): as a process killed by it would. */
		code = 128 + sig;
	} else if (status < 0) {
		code = aas_error(AAS_EXIT_SERVER, "the connection to the shell was lost before it ended");
	} else {
		code = status > 255 ? 255 : status;
	}
out:
	raw_restore();
	saas_pty_close(pty, NULL);
	saas_client_free(client);
	return code;
}
