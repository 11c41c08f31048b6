/*
 * Tunnels: a direct-tcpip channel into the guest, bridged to a local socket
 * pair by a pump thread of its own. The pumps end with their connection.
 * A terminal (ssh_pty.c) is a session channel bridged by the same pump.
 */
#include <errno.h>
#include <poll.h>
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

/* ---- tunnels --------------------------------------------------------------------------------- */

/* As exec_call: one call site, so a repeated call finds libssh2's pending packet. */
__attribute__((noinline)) static ssize_t pump_call(struct pump *p, enum pump_call what)
{
	struct call_snap sn = call_enter(&p->op);
	ssize_t n = 0;

	p->last = what;
	switch (what) {
	case PCALL_WRITE: n = libssh2_channel_write_ex(p->ch, 0, p->up + p->up_off, p->up_len - p->up_off); break;
	case PCALL_EOF: n = libssh2_channel_send_eof(p->ch); break;
	case PCALL_READ: n = libssh2_channel_read_ex(p->ch, 0, p->down, sizeof(p->down)); break;
	case PCALL_RESIZE: n = libssh2_channel_request_pty_size_ex(p->ch, (int)p->cols, (int)p->rows, 0, 0); break;
	case PCALL_CLOSE: n = libssh2_channel_wait_closed(p->ch); break;
	case PCALL_NONE: break;
	}
	saas__ssh_call_leave(&p->op, sn, (int)n);
	return n;
}

void *saas__ssh_pump_main(void *arg)
{
	struct pump *p = arg;
	saas__ssh *ssh = p->op.ssh;
	int local_eof = 0, eof_sent = 0, remote_eof = 0, shut_wr = 0, broken = 0;
	/* A terminal's end: the shell's exit status is in (or given up on at close_by). */
	int status_known = !p->pty;
	int64_t close_by = 0;

	while (!broken) {
		int progress = 0;
		struct pollfd pf[2];
		ssize_t n;

		pthread_mutex_lock(&ssh->mu);
		if (ssh->closing || ssh->dead || (p->stop && ssh->pending != &p->op)) {
			pthread_mutex_unlock(&ssh->mu);
			break;
		}
		if (op_may_call(&p->op)) {
			enum pump_call todo[4];
			size_t k = 0;
			if (ssh->pending == &p->op) {
				todo[k++] = p->last;
			} else {
				/*
				 * A resize first: what the caller writes after its
				 * saas__ssh_pty_resize returned is read from the socket
				 * after this flag was seen, so the shell gets the new size
				 * before those bytes (a `stty size` typed next answers it).
				 */
				if (p->resize)
					todo[k++] = PCALL_RESIZE;
				if (p->up_off < p->up_len)
					todo[k++] = PCALL_WRITE;
				else if (local_eof && !eof_sent)
					todo[k++] = PCALL_EOF;
				if (!p->down_len && !remote_eof)
					todo[k++] = PCALL_READ;
				/* sshd sends the exit status before its close: wait for the close (the EOF may come first). */
				if (remote_eof && !p->down_len && !status_known)
					todo[k++] = PCALL_CLOSE;
			}
			for (size_t i = 0; i < k && !broken; i++) {
				n = pump_call(p, todo[i]);
				if (todo[i] == PCALL_WRITE) {
					if (n > 0) {
						p->up_off += (size_t)n;
						progress = 1;
					} else if (n != LIBSSH2_ERROR_EAGAIN) {
						broken = 1;
					}
				} else if (todo[i] == PCALL_EOF) {
					if (n != LIBSSH2_ERROR_EAGAIN)
						eof_sent = progress = 1;
				} else if (todo[i] == PCALL_READ) {
					if (n > 0) {
						p->down_len = (size_t)n;
						p->down_off = 0;
						progress = 1;
					} else if (n == 0 || (n < 0 && n != LIBSSH2_ERROR_EAGAIN) || libssh2_channel_eof(p->ch)) {
						remote_eof = 1;
						progress = 1;
					}
				} else if (todo[i] == PCALL_RESIZE) {
					if (n != LIBSSH2_ERROR_EAGAIN)
						p->resize = 0; /* a refusal changes nothing worth ending the session for */
				} else if (todo[i] == PCALL_CLOSE) {
					if (!close_by)
						close_by = saas__now_ms() + SSH_CLOSE_TIMEOUT_MS;
					if (n != LIBSSH2_ERROR_EAGAIN || saas__now_ms() >= close_by) {
						char *sig = NULL;
						libssh2_channel_get_exit_signal(p->ch, &sig, NULL, NULL, NULL, NULL, NULL);
						if (sig) {
							p->exit_status = 128 + saas__ssh_signal_number(sig);
							libssh2_free(ssh->session, sig);
						} else if (n == 0) {
							p->exit_status = libssh2_channel_get_exit_status(p->ch);
						}
						status_known = progress = 1;
					}
				}
				if (ssh->pending == &p->op)
					break;
			}
			if (!p->down_len && !remote_eof && libssh2_channel_eof(p->ch))
				remote_eof = 1;
		}
		if (ssh->pending == &p->op)
			broken = 0; /* must finish the packet: loop again whatever happened locally */
		pthread_mutex_unlock(&ssh->mu);

		if (p->down_off < p->down_len) {
			n = send(p->fd, p->down + p->down_off, p->down_len - p->down_off, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n > 0) {
				p->down_off += (size_t)n;
				progress = 1;
			} else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
				broken = 1;
			}
			if (p->down_off == p->down_len)
				p->down_len = p->down_off = 0;
		}
		if (remote_eof && !p->down_len && !shut_wr && status_known) {
			shutdown(p->fd, SHUT_WR);
			shut_wr = 1;
		}
		if (p->up_off == p->up_len && !local_eof) {
			p->up_off = p->up_len = 0;
			n = recv(p->fd, p->up, sizeof(p->up), MSG_DONTWAIT);
			if (n > 0) {
				p->up_len = (size_t)n;
				progress = 1;
			} else if (n == 0) {
				local_eof = progress = 1;
			} else if (errno != EAGAIN && errno != EWOULDBLOCK) {
				broken = 1;
			}
		}
		/* A tunnel ends when both directions did; a terminal once its status is in and delivered. */
		if (p->pty ? shut_wr : (local_eof && eof_sent && remote_eof && !p->down_len))
			break;
		if (progress || broken)
			continue;
		/* Wait for the local side or the connection; 10 ms at most, as another thread may read our data. */
		pf[0].fd = p->fd;
		pf[0].events = (short)((!local_eof && p->up_off == p->up_len ? POLLIN : 0) |
		                       (p->down_len ? POLLOUT : 0));
		pf[1].fd = ssh->fd;
		pf[1].events = POLLIN;
		pf[0].revents = pf[1].revents = 0;
		poll(pf, 2, 10);
	}

	pthread_mutex_lock(&ssh->mu);
	/* At connection close the session's teardown frees the channel. */
	if (!ssh->closing)
		saas__ssh_channel_release(&p->op, p->ch, p->pty);
	p->ch = NULL;
	close(p->fd);
	p->fd = -1;
	p->done = 1;
	pthread_mutex_unlock(&ssh->mu);
	return NULL;
}

/* Take finished pumps off the list (mu held); the caller joins and frees them without it. */
struct pump *saas__ssh_pumps_take(saas__ssh *ssh, int all)
{
	struct pump **pp = &ssh->pumps, *done = NULL;

	while (*pp) {
		struct pump *p = *pp;
		if (all || p->done) {
			*pp = p->next;
			p->next = done;
			done = p;
		} else {
			pp = &p->next;
		}
	}
	return done;
}

void saas__ssh_pumps_join(struct pump *list)
{
	while (list) {
		struct pump *next = list->next;
		pthread_join(list->tid, NULL);
		free(list);
		list = next;
	}
}

int saas__ssh_port_connect(saas__ssh *ssh, unsigned int port, int *fd)
{
	struct pump *p = NULL, *finished;
	int sv[2] = { -1, -1 };
	int rc, lrc;

	if (!port || port > 65535)
		return saas__inval("port %u is out of range", port);
	if (!(p = calloc(1, sizeof(*p))))
		return saas__oom();
	p->op.ssh = ssh;
	p->fd = -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		free(p);
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "socketpair: %s", strerror(errno));
	}
	pthread_mutex_lock(&ssh->mu);
	finished = saas__ssh_pumps_take(ssh, 0);
	pthread_mutex_unlock(&ssh->mu);
	saas__ssh_pumps_join(finished);

	pthread_mutex_lock(&ssh->open_mu);
	pthread_mutex_lock(&ssh->mu);
	p->op.deadline = saas__now_ms() + SSH_CALL_TIMEOUT_MS;
	SSH_LOOP_PTR(&p->op, p->ch, lrc, libssh2_channel_direct_tcpip_ex(ssh->session, "127.0.0.1", (int)port, "127.0.0.1", 0));
	pthread_mutex_unlock(&ssh->open_mu);
	if (!p->ch) {
		rc = lrc == LIBSSH2_ERROR_CHANNEL_FAILURE
		             ? saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, lrc, "nothing listens on port %u in the sandbox", port)
		             : saas__ssh_err(lrc, "opening a tunnel");
		goto fail;
	}
	p->fd = sv[1];
	if ((rc = pthread_create(&p->tid, NULL, saas__ssh_pump_main, p)) != 0) {
		rc = saas__error(SAAS_ENOMEM, SAAS_ERRCLASS_OS, rc, "cannot start a tunnel thread");
		saas__ssh_channel_release(&p->op, p->ch, 0);
		goto fail;
	}
	p->next = ssh->pumps;
	ssh->pumps = p;
	pthread_mutex_unlock(&ssh->mu);
	*fd = sv[0];
	return SAAS_OK;
fail:
	pthread_mutex_unlock(&ssh->mu);
	close(sv[0]);
	close(sv[1]);
	free(p);
	return rc;
}

