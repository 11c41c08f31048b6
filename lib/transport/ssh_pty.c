/*
 * Terminals: the user's login shell in a session channel with a
 * pseudo-terminal (or, without one, on pipes), in a directory and with
 * variables when asked (start_script), bridged to a local socket pair
 * by a pump (ssh_tunnel.c). Unlike a tunnel's, the pump belongs to the
 * session's owner, who holds a reference to the connection until it hangs up.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libssh2.h>

#include "transport/ssh.h"
#include "transport/ssh_session.h"
#include "util/error.h"
#include "util/util.h"

struct saas__ssh_pty {
	struct pump pump;
};

/*
 * A terminal with a directory or variables: sshd's `exec` of a script run
 * by the user's shell, not the SSH protocol's `env` request (sshd drops it
 * unless its AcceptEnv names the variable; and it has no directory). A
 * login shell would run the login profile last, and a profile may change
 * directory (the project's images' ~/.profile enters /workspace) or reset
 * a variable (PATH): so the script runs the profile itself first (as a
 * login shell would: /etc/profile, then ~/.profile), then enters the
 * directory and exports the variables as a command's script does
 * (saas__shell_enter), then becomes the user's shell, interactive on a
 * terminal, reading its input on a pipe otherwise. "": none of either
 * asked (the plain `shell` request, a login shell as `ssh` gives).
 */
static int start_script(saas__buf *b, const saas_driver_pty *req)
{
	int rc;

	if (!req->cwd && !(req->env && req->env[0]))
		return SAAS_OK;
	if ((rc = saas__buf_puts(b, "[ -r /etc/profile ] && . /etc/profile; "
	                            "[ -r \"$HOME/.profile\" ] && . \"$HOME/.profile\"; ")) < 0 ||
	    (rc = saas__shell_enter(b, req->cwd, req->env)) < 0 ||
	    (rc = saas__buf_puts(b, req->tty ? "exec \"${SHELL:-/bin/sh}\" -i" : "exec \"${SHELL:-/bin/sh}\"")) < 0)
		return rc;
	return SAAS_OK;
}

int saas__ssh_pty_open(saas__ssh *ssh, const saas_driver_pty *req, int *fd, saas__ssh_pty **out)
{
	saas__ssh_pty *t;
	struct pump *p;
	saas__buf script = SAAS__BUF_INIT;
	int sv[2] = { -1, -1 };
	int rc, lrc, have_slot = 0;

	*fd = -1;
	*out = NULL;
	if ((rc = start_script(&script, req)) < 0) {
		saas__buf_free(&script);
		return rc;
	}
	if (!(t = calloc(1, sizeof(*t)))) {
		saas__buf_free(&script);
		return saas__oom();
	}
	p = &t->pump;
	p->op.ssh = saas__ssh_ref(ssh);
	p->fd = -1;
	p->pty = 1;
	p->exit_status = -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "socketpair: %s", strerror(errno));
		goto fail_nolock;
	}
	pthread_mutex_lock(&ssh->mu);
	p->op.deadline = saas__now_ms() + SSH_CALL_TIMEOUT_MS;
	if ((rc = saas__ssh_channel_open(&p->op, &p->ch, 0, NULL)) < 0)
		goto fail;
	have_slot = 1;
	if (req->tty) {
		SSH_LOOP(&p->op, lrc, libssh2_channel_request_pty_ex(p->ch, req->term, (unsigned int)strlen(req->term), NULL, 0,
		                                                      (int)req->cols, (int)req->rows, 0, 0));
		if (lrc < 0) {
			rc = saas__ssh_err(lrc, "asking for a terminal");
			goto fail;
		}
	} else {
		/* As `ssh` without a terminal: one output stream, in the order the shell wrote it. */
		SSH_LOOP(&p->op, lrc, libssh2_channel_handle_extended_data2(p->ch, LIBSSH2_CHANNEL_EXTENDED_DATA_MERGE));
		(void)lrc;
	}
	if (script.len) {
		SSH_LOOP(&p->op, lrc, libssh2_channel_process_startup(p->ch, "exec", 4, script.data, (unsigned int)script.len));
	} else {
		SSH_LOOP(&p->op, lrc, libssh2_channel_process_startup(p->ch, "shell", 5, NULL, 0));
	}
	if (lrc < 0) {
		rc = saas__ssh_err(lrc, "starting the shell");
		goto fail;
	}
	p->op.deadline = 0;
	p->fd = sv[1];
	if ((rc = pthread_create(&p->tid, NULL, saas__ssh_pump_main, p)) != 0) {
		p->fd = -1;
		rc = saas__error(SAAS_ENOMEM, SAAS_ERRCLASS_OS, rc, "cannot start a terminal thread");
		goto fail;
	}
	pthread_mutex_unlock(&ssh->mu);
	saas__buf_free(&script);
	*fd = sv[0];
	*out = t;
	return SAAS_OK;
fail:
	if (p->ch)
		saas__ssh_channel_release(&p->op, p->ch, have_slot);
	pthread_mutex_unlock(&ssh->mu);
fail_nolock:
	if (sv[0] >= 0) {
		close(sv[0]);
		close(sv[1]);
	}
	saas__ssh_close(p->op.ssh);
	free(t);
	saas__buf_free(&script);
	return rc;
}

int saas__ssh_pty_resize(saas__ssh_pty *pty, unsigned int cols, unsigned int rows)
{
	struct pump *p = &pty->pump;
	saas__ssh *ssh = p->op.ssh;
	int rc = SAAS_OK;

	pthread_mutex_lock(&ssh->mu);
	if (p->done) {
		rc = saas__error(SAAS_ESTATE, SAAS_ERRCLASS_GUEST, 0, "the terminal's shell has ended");
	} else {
		p->cols = cols;
		p->rows = rows;
		p->resize = 1;
	}
	pthread_mutex_unlock(&ssh->mu);
	return rc;
}

void saas__ssh_pty_close(saas__ssh_pty *pty, int *exit_status)
{
	struct pump *p;
	saas__ssh *ssh;

	if (exit_status)
		*exit_status = -1;
	if (!pty)
		return;
	p = &pty->pump;
	ssh = p->op.ssh;
	pthread_mutex_lock(&ssh->mu);
	p->stop = 1;
	pthread_mutex_unlock(&ssh->mu);
	pthread_join(p->tid, NULL);
	if (exit_status)
		*exit_status = p->exit_status;
	saas__ssh_close(ssh);
	free(pty);
}
