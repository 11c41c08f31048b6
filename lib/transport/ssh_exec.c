/*
 * Commands over the shared session. Each runs in a session channel under a
 * wrapper that reports its pid and exit status as markers in its output
 * (transport/marker.h), so that a command which leaves background processes
 * holding its output returns when it ends, while those processes live on;
 * a timeout or a cancel kills all it started from a second channel.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libssh2.h>

#include "transport/marker.h"
#include "transport/ssh.h"
#include "transport/ssh_session.h"
#include "util/error.h"
#include "util/util.h"

/*
 * After the exit marker of one stream only (the command sent the shell's
 * other stream elsewhere, and that stream's marker with it): finish at EOF, or
 * once output has been quiet this long, or at most this late. The quiet spell
 * must outwait a loaded guest: sshd may forward one stream's marker before
 * output the command wrote earlier to the other, when it polled the two pipes
 * in between, and that data then trails the marker by however long sshd is
 * kept off the vCPU. With both markers, none of this: each follows all the
 * command wrote to its stream.
 */
#define SSH_EXIT_QUIET_MS 250
#define SSH_EXIT_MAX_MS 2000

/* s in single quotes for a POSIX shell: SAAS_OK, or SAAS_ENOMEM with b's end undefined. */
static int shell_quote(saas__buf *b, const char *s)
{
	int rc = saas__buf_puts(b, "'");

	for (const char *q; rc == SAAS_OK && (q = strchr(s, '\'')); s = q + 1)
		if ((rc = saas__buf_put(b, s, (size_t)(q - s))) == SAAS_OK)
			rc = saas__buf_puts(b, "'\\''");
	if (rc == SAAS_OK && (rc = saas__buf_puts(b, s)) == SAAS_OK)
		rc = saas__buf_puts(b, "'");
	return rc;
}

int saas__shell_enter(saas__buf *b, const char *cwd, const char *const *env)
{
	int rc;

	if (cwd && ((rc = saas__buf_puts(b, "cd -- ")) < 0 || (rc = shell_quote(b, cwd)) < 0 ||
	            (rc = saas__buf_puts(b, " || exit 126; ")) < 0))
		return rc;
	for (const char *const *e = env; e && *e; e++)
		if ((rc = saas__buf_puts(b, "export ")) < 0 || (rc = shell_quote(b, *e)) < 0 ||
		    (rc = saas__buf_puts(b, "; ")) < 0)
			return rc;
	return SAAS_OK;
}

/* ---- exec ------------------------------------------------------------------------------------ */

/*
 * The remote command, run by the user's login shell (POSIX): a wrapper that
 * reports its PID (the process group: OpenSSH starts every session in a new
 * session, so the shell leads its own group and everything the command
 * starts stays in it), enters cwd, exports env, evaluates the command and
 * reports its exit status from an EXIT trap before exiting with it.
 *
 * Processes the command leaves behind ("cmd &", nohup, setsid, daemons that
 * keep their output) hold its stdout and stderr pipes. They must neither hold
 * the call (no EOF comes while they live) nor die when it ends (sshd closes
 * its ends of the pipes with the channel: their next write gets SIGPIPE). So:
 *
 * - The exit status goes out on stdout as well as stderr, each after
 *   everything the command wrote to that stream; the call ends when both
 *   came, whoever else still holds the pipes.
 * - The trap looks for such processes: any process made since the command
 *   started (/proc/loadavg's last PID, before and after) that is still alive
 *   may be one, or the parent of one. Usually none is (no fork, or every
 *   child gone) and the shell exits at once, as it always did.
 * - When one may be, the shell first opens read ends of its own stdout and
 *   stderr pipes (/proc/self/fd), so that they never lose their last reader,
 *   says "held" before the exit status, and waits for the engine's go
 *   (SIGUSR1, sent from a second channel once it has read both exit markers:
 *   from then on nothing in the pipes is the command's output). Then one cat
 *   per pipe drains what those processes write, to /dev/null, for as long as
 *   any of them holds it; the shell exits. Without a go (the engine went
 *   away), it drains after EXEC_GO_WAIT_S seconds.
 *
 * Nothing here forks unless the command left processes alive: under TCG a
 * fork costs milliseconds and an exec ten, against ~20 for a whole call.
 */
static const struct {
	const char *name;
	int num;
} wrapper_signals[] = { { "HUP", 1 }, { "INT", 2 }, { "QUIT", 3 }, { "USR1", 10 }, { "USR2", 12 },
                        { "PIPE", 13 }, { "ALRM", 14 }, { "TERM", 15 } };

/*
 * The signal traps (a shell that takes one exits 128+N once its command
 * returns, whichever shell it is), then the command.
 */
static int exec_run_command(saas__buf *b, const saas_driver_exec *req)
{
	int rc = SAAS_OK;

	for (size_t i = 0; rc == SAAS_OK && i < SAAS_ARRAY_SIZE(wrapper_signals); i++)
		rc = saas__buf_printf(b, "trap 'exit %d' %s; ", 128 + wrapper_signals[i].num, wrapper_signals[i].name);
	if (rc == SAAS_OK && (rc = saas__buf_puts(b, "eval ")) == SAAS_OK)
		rc = shell_quote(b, req->command);
	return rc;
}

int saas__exec_script(saas__buf *out, const saas_driver_exec *req)
{
	int rc;

	if ((rc = saas__shell_enter(out, req->cwd, req->env)) < 0)
		return rc;
	return exec_run_command(out, req);
}

/* How long a shell that reported "held" waits for the engine's go before it drains anyway. */
#define EXEC_GO_WAIT_S 30
/* A command that made more processes than this is taken to have left some behind, unchecked. */
#define EXEC_SPAWN_CHECK_MAX 64

static int build_command(saas__buf *out, const saas_driver_exec *req, const char *token)
{
	saas__buf w = SAAS__BUF_INIT;
	int rc;

	if ((rc = saas__buf_printf(&w, "printf '\\036aas-%s:pid=%%d\\036' $$ >&2; "
	                               "read -r _ _ _ _ __aas_p </proc/loadavg 2>/dev/null; ", token)) < 0 ||
	    (rc = saas__shell_enter(&w, req->cwd, req->env)) < 0)
		goto out;
	/*
	 * The EXIT trap (above). Its variables and its function start with
	 * __aas_ so that a command has no reason to touch them.
	 */
	rc = saas__buf_printf(&w,
	                 "__aas_end() { __aas_s=$1 __aas_h=0; "
	                 "if [ -n \"$__aas_p\" ] && read -r _ _ _ _ __aas_q </proc/loadavg 2>/dev/null && "
	                 "[ \"$__aas_q\" != \"$__aas_p\" ]; then __aas_h=1; "
	                 "if [ \"$__aas_q\" -gt \"$__aas_p\" ] && [ $((__aas_q - __aas_p)) -le %d ]; then "
	                 "__aas_h=0 __aas_i=$__aas_p; while [ $__aas_i -lt $__aas_q ]; do __aas_i=$((__aas_i + 1)); "
	                 "if [ -e /proc/$__aas_i ]; then __aas_h=1; break; fi; done; fi; fi; "
	                 "if [ $__aas_h = 1 ]; then __aas_go= __aas_7= __aas_8=; trap '__aas_go=1' USR1; "
	                 "if [ -p /proc/self/fd/1 ]; then exec 7</proc/self/fd/1; __aas_7=1; fi; "
	                 "if [ -p /proc/self/fd/2 ]; then exec 8</proc/self/fd/2; __aas_8=1; fi; "
	                 "printf '\\036aas-%s:held\\036' >&2; fi; "
	                 "printf '\\036aas-%s:exit=%%d\\036' $__aas_s; printf '\\036aas-%s:exit=%%d\\036' $__aas_s >&2; "
	                 "if [ $__aas_h = 1 ]; then exec >/dev/null 2>&1 </dev/null; __aas_i=0; "
	                 "while [ -z \"$__aas_go\" ] && [ $__aas_i -lt %d ]; do sleep 1 & wait $!; __aas_i=$((__aas_i + 1)); done; "
	                 "[ -n \"$__aas_7\" ] && { cat <&7 >/dev/null 7<&- 8<&- & }; "
	                 "[ -n \"$__aas_8\" ] && { cat <&8 >/dev/null 7<&- 8<&- & }; fi; "
	                 "exit $__aas_s; }; ",
	                 EXEC_SPAWN_CHECK_MAX, token, token, token, EXEC_GO_WAIT_S);
	/*
	 * The command runs in the wrapper's own shell (eval), not a child
	 * /bin/sh: under TCG every fork and exec in the guest costs milliseconds,
	 * and this one bought nothing. The EXIT trap reports the status however
	 * the command ends, `exit N` included; the signal traps (exec_run_command)
	 * keep what a shell killed by a catchable signal would report (128+N),
	 * whichever shell runs it. SIGKILL cannot be trapped: then no marker
	 * comes and the exit signal does.
	 *
	 * sshd hands this to the user's login shell, which the guest contract says
	 * is a POSIX shell; going through it directly saves an exec in the guest.
	 */
	if (rc == SAAS_OK && (rc = saas__buf_puts(&w, "trap '__aas_end $?' EXIT; ")) == SAAS_OK &&
	    (rc = exec_run_command(&w, req)) == SAAS_OK)
		rc = saas__buf_put(out, w.data, w.len);
out:
	saas__buf_free(&w);
	return rc;
}

enum exec_call { CALL_NONE, CALL_WRITE, CALL_EOF, CALL_READ_OUT, CALL_READ_ERR };

struct exec_run {
	struct ssh_op op;
	LIBSSH2_CHANNEL *ch;
	const saas_driver_exec *req;
	const char *in_data;      /* the stdin being written: stdin_data, then each chunk of req->input */
	size_t in_len, in_off;
	int in_done;              /* stdin written (or abandoned) */
	char in_buf[SSH_CHUNK];
	int eof_sent;
	enum exec_call last;      /* the call that left a packet pending, to repeat */
	char out[SSH_CHUNK], err[SSH_CHUNK];
	ssize_t nout, nerr;
};

/*
 * One libssh2 call of the exec loop (mu held). Always called from the same
 * place so that a repeated call finds libssh2's pending packet where it left
 * it (channel_send_eof builds its packet on the stack).
 */
__attribute__((noinline)) static ssize_t exec_call(struct exec_run *x, enum exec_call what)
{
	struct call_snap sn = call_enter(&x->op);
	ssize_t n = 0;

	x->last = what;
	switch (what) {
	case CALL_WRITE: {
		size_t len = x->in_len - x->in_off;
		n = libssh2_channel_write_ex(x->ch, 0, x->in_data + x->in_off, len > SSH_CHUNK ? SSH_CHUNK : len);
		break;
	}
	case CALL_EOF: n = libssh2_channel_send_eof(x->ch); break;
	case CALL_READ_OUT: n = libssh2_channel_read_ex(x->ch, 0, x->out, sizeof(x->out)); break;
	case CALL_READ_ERR: n = libssh2_channel_read_ex(x->ch, SSH_EXTENDED_DATA_STDERR, x->err, sizeof(x->err)); break;
	case CALL_NONE: break;
	}
	saas__ssh_call_leave(&x->op, sn, (int)n);
	return n;
}

/* Apply the result of a call; returns 1 if it made progress. */
static int exec_result(struct exec_run *x, enum exec_call what, ssize_t n)
{
	switch (what) {
	case CALL_WRITE:
		if (n > 0) {
			x->in_off += (size_t)n;
			if (x->in_off >= x->in_len && !x->req->input)
				x->in_done = 1;
			return 1;
		}
		if (n < 0 && n != LIBSSH2_ERROR_EAGAIN)
			x->in_done = x->eof_sent = 1; /* the command no longer takes input */
		return 0;
	case CALL_EOF:
		if (n != LIBSSH2_ERROR_EAGAIN) {
			x->eof_sent = 1;
			return 1;
		}
		return 0;
	case CALL_READ_OUT:
		x->nout = n > 0 ? n : 0;
		return n > 0;
	case CALL_READ_ERR:
		x->nerr = n > 0 ? n : 0;
		return n > 0;
	case CALL_NONE: break;
	}
	return 0;
}

/*
 * The next piece of a running command's input, once the last is written (mu
 * held: the input callback takes only its own lock, never ours).
 */
static void exec_refill(struct exec_run *x)
{
	long n;

	if (x->in_done || x->in_off < x->in_len || !x->req->input)
		return;
	n = x->req->input(x->req->control_userdata, x->in_buf, sizeof(x->in_buf));
	if (n < 0) {
		x->in_done = 1;
	} else if (n > 0) {
		x->in_data = x->in_buf;
		x->in_len = (size_t)n;
		x->in_off = 0;
	}
}

/* One pass of calls (mu held): feed stdin, read both streams. Returns 1 if anything moved. */
static int exec_pass(struct exec_run *x)
{
	saas__ssh *ssh = x->op.ssh;
	static const enum exec_call order[] = { CALL_WRITE, CALL_EOF, CALL_READ_OUT, CALL_READ_ERR };
	int progress = 0;

	x->nout = x->nerr = 0;
	if (!op_may_call(&x->op))
		return 0;
	if (ssh->pending == &x->op) {
		/* Finish our half-sent packet before anything else. */
		enum exec_call what = x->last;
		return exec_result(x, what, exec_call(x, what));
	}
	for (size_t i = 0; i < SAAS_ARRAY_SIZE(order); i++) {
		enum exec_call what = order[i];
		if (what == CALL_WRITE)
			exec_refill(x);
		if ((what == CALL_WRITE && (x->in_done || x->in_off >= x->in_len)) ||
		    (what == CALL_EOF && (!x->in_done || x->eof_sent)))
			continue;
		progress |= exec_result(x, what, exec_call(x, what));
		if (ssh->pending == &x->op || ssh->dead)
			break;
	}
	return progress;
}

/*
 * Kill everything the command started, from a second channel (mu held): its
 * process group, and what left the group, found in /proc: the rest of its
 * session (a job with a process group of its own) and its descendants (a
 * child that called setsid). Stopped first, so that nothing forks meanwhile.
 */
static void exec_kill(saas__ssh *ssh, long pid)
{
	char cmd[768];

	snprintf(cmd, sizeof(cmd),
	         "p=%ld; kill -STOP -- -$p 2>/dev/null; t=\" $p \"; n=1; r=0; "
	         "while [ $n = 1 ] && [ $r -lt 16 ]; do n=0 r=$((r + 1)); "
	         "for d in /proc/[0-9]*; do i=${d#/proc/}; case \"$t\" in *\" $i \"*) continue ;; esac; "
	         "read -r l <\"$d/stat\" 2>/dev/null || continue; set -- ${l##*) }; "
	         "case \"$t\" in *\" $2 \"*) t=\"$t$i \" n=1; continue ;; esac; "
	         "[ \"$4\" = $p ] && t=\"$t$i \" n=1; done; done; "
	         "kill -STOP $t 2>/dev/null; kill -KILL -- -$p 2>/dev/null; kill -KILL $t 2>/dev/null; exit 0",
	         pid);
	saas__ssh_run_quick(ssh, cmd, 10000, NULL, 0, NULL);
}

/*
 * The go for a wrapper that reported "held" (mu held): both exit markers are
 * in, so what is left in its pipes is no longer the command's. Only that
 * shell, still waiting: its command line holds the token.
 */
static void exec_go(saas__ssh *ssh, long pid, const char *token)
{
	char cmd[192];
	int code = -1;

	/*
	 * The command line's words are NUL-separated: busybox's grep (the tiny
	 * image's) would stop at the first NUL and never see the token, so the
	 * shell matches it with the NULs made blanks.
	 */
	snprintf(cmd, sizeof(cmd),
	         "case \"$(tr '\\0' ' ' </proc/%ld/cmdline 2>/dev/null)\" in *'aas-%s:'*) kill -USR1 %ld && exit 0 ;; "
	         "esac; exit 1",
	         pid, token, pid);
	ssh->gos++;
	if (saas__ssh_run_quick(ssh, cmd, 10000, NULL, 0, &code) < 0 || code != 0)
		ssh->gos_missed++;
}

/* A signal the engine was asked to send (mu held): to the wrapper shell, or to its process group. */
static void exec_signal(saas__ssh *ssh, long pid, int sig, int group)
{
	char cmd[96];

	snprintf(cmd, sizeof(cmd), group ? "kill -%d -- -%ld 2>/dev/null; exit 0" : "kill -%d %ld 2>/dev/null; exit 0",
	         sig, pid);
	saas__ssh_run_quick(ssh, cmd, 10000, NULL, 0, NULL);
}

int saas__ssh_exec(saas__ssh *ssh, const saas_driver_exec *req, int *exit_code)
{
	struct exec_run *x = NULL;
	saas__marker_filter mf, mo; /* the markers on stderr, and on stdout */
	saas__buf cmd = SAAS__BUF_INIT, errbuf = SAAS__BUF_INIT, outbuf = SAAS__BUF_INIT;
	unsigned char rnd[8];
	char token[17];
	int64_t start = saas__now_ms(), deadline = req->timeout_ms > 0 ? start + req->timeout_ms : 0;
	int64_t exit_at = 0, last_data = start, eof_at = 0, stop_at = 0;
	int rc, lrc, stop = 0; /* stop: SAAS_ETIMEOUT or SAAS_EIO once we decided to kill */
	int cancelled = 0;     /* the engine's caller, not the engine, stopped it */
	int have_slot = 0;
	bool told = false;     /* req->started was called */

	*exit_code = -1;
	if (__atomic_load_n(req->cancel, __ATOMIC_SEQ_CST))
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, 0, "cancelled: the engine is shutting down");
	if ((rc = saas__random(rnd, sizeof(rnd))) < 0)
		return rc;
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(token + 2 * i, 3, "%02x", rnd[i]);
	if ((rc = saas__marker_init(&mf, token)) < 0 || (rc = saas__marker_init(&mo, token)) < 0)
		return rc;
	if ((rc = build_command(&cmd, req, token)) < 0)
		return rc;
	if (!(x = calloc(1, sizeof(*x)))) {
		rc = saas__oom();
		goto out_nolock;
	}
	x->op.ssh = ssh;
	x->req = req;
	x->in_data = req->stdin_data;
	x->in_len = req->stdin_data ? req->stdin_len : 0;
	x->in_done = x->in_len == 0 && !req->input;

	pthread_mutex_lock(&ssh->mu);
	x->op.deadline = deadline ? deadline : saas__now_ms() + SSH_CALL_TIMEOUT_MS;
	if ((rc = saas__ssh_channel_open(&x->op, &x->ch, 0, req->cancel)) < 0) {
		if (rc == SAAS_EIO || rc == SAAS_EBACKEND)
			goto out;
		rc = saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_GUEST, 0, "the command could not start before its timeout");
		goto out;
	}
	have_slot = 1;
	SSH_LOOP(&x->op, lrc,
	         libssh2_channel_process_startup(x->ch, "exec", 4, cmd.data, (unsigned int)cmd.len));
	if (lrc < 0) {
		if (lrc == LIBSSH2_ERROR_TIMEOUT && !ssh->dead)
			rc = saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_GUEST, 0, "the command could not start before its timeout");
		else
			rc = saas__ssh_err(lrc, "starting the command");
		goto out;
	}
	x->op.deadline = 0; /* from here on the loop below keeps time itself */

	for (;;) {
		int progress;
		int64_t now;

		if (ssh->dead) {
			rc = saas__ssh_err(LIBSSH2_ERROR_SOCKET_DISCONNECT, "running the command");
			goto out;
		}
		progress = exec_pass(x);
		if (x->nout || x->nerr) {
			ssize_t nout = x->nout, nerr = x->nerr;
			/* Deliver without the lock: the consumer must not stall the connection. */
			pthread_mutex_unlock(&ssh->mu);
			outbuf.len = errbuf.len = 0;
			if (nout)
				saas__marker_feed(&mo, x->out, (size_t)nout, &outbuf);
			if (nerr)
				saas__marker_feed(&mf, x->err, (size_t)nerr, &errbuf);
			/* The wrapper's pid marker comes as the command starts; its output, if that is read first, says so too. */
			if (!told && (mf.pid || outbuf.len || errbuf.len)) {
				told = true;
				if (req->started)
					req->started(req->control_userdata);
			}
			if (outbuf.len)
				req->output(req->output_userdata, SAAS_STREAM_STDOUT, outbuf.data, outbuf.len);
			if (errbuf.len)
				req->output(req->output_userdata, SAAS_STREAM_STDERR, errbuf.data, errbuf.len);
			pthread_mutex_lock(&ssh->mu);
			last_data = saas__now_ms();
		}
		now = saas__now_ms();
		if ((mf.exit_seen || mo.exit_seen) && !exit_at)
			exit_at = now;

		/*
		 * Signals and a caller's cancel, once we know whom to signal (the PID
		 * comes first thing: until then they wait).
		 */
		if (!stop && req->control && mf.pid && ssh->pending != &x->op && !mf.exit_seen && !mo.exit_seen) {
			int group, sig;
			while ((sig = req->control(req->control_userdata, &group)) > 0)
				exec_signal(ssh, mf.pid, sig, group);
			if (sig < 0)
				stop = SAAS_EIO, cancelled = 1, stop_at = now;
		}
		/* Timeout or cancel: kill once we know whom to kill (the PID comes first thing). */
		if (!stop) {
			if (deadline && now >= deadline)
				stop = SAAS_ETIMEOUT;
			else if (__atomic_load_n(req->cancel, __ATOMIC_SEQ_CST))
				stop = SAAS_EIO;
			if (stop)
				stop_at = now;
		}
		if (stop && ssh->pending != &x->op && (mf.pid || now - stop_at > 2000)) {
			if (mf.pid)
				exec_kill(ssh, mf.pid);
			break;
		}
		if (!stop && ssh->pending != &x->op) {
			int eof = libssh2_channel_eof(x->ch);
			if (eof && !eof_at)
				eof_at = now;
			if (mf.exit_seen && mo.exit_seen) {
				/* Each stream's marker follows all the command wrote to it: that is all of it. */
				break;
			} else if (mf.exit_seen || mo.exit_seen) {
				/*
				 * One marker only: the command moved the shell's other stream
				 * elsewhere (exec >file), so its marker went there. What the
				 * command wrote to the pipe before may still trail: drain to
				 * EOF or a quiet spell.
				 */
				if (eof || (!progress && now - last_data >= SSH_EXIT_QUIET_MS) || now - exit_at >= SSH_EXIT_MAX_MS)
					break;
			} else if (eof) {
				/* No marker (the wrapper itself failed or was killed): the exit status comes with the close. */
				int c;
				struct call_snap sn = call_enter(&x->op);
				c = libssh2_channel_wait_closed(x->ch);
				saas__ssh_call_leave(&x->op, sn, c);
				if (c != LIBSSH2_ERROR_EAGAIN || now - eof_at >= SSH_EXIT_MAX_MS)
					break;
			}
		}
		if (!progress) {
			int64_t wait = SSH_POLL_MS;
			if (deadline && deadline - now < wait)
				wait = deadline - now;
			saas__ssh_op_wait(&x->op, (int)wait);
		}
	}

	if (stop) {
		rc = stop == SAAS_ETIMEOUT
		             ? saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_GUEST, 0, "the command ran past its timeout of %lld ms and was killed, "
		                                                       "with every process it started",
		                           (long long)req->timeout_ms)
		     : cancelled ? saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, 0, "cancelled by its caller")
		             : saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, 0, "cancelled: the engine is shutting down");
		goto out;
	}
	errbuf.len = outbuf.len = 0;
	saas__marker_flush(&mf, &errbuf);
	saas__marker_flush(&mo, &outbuf);
	if (errbuf.len || outbuf.len) {
		pthread_mutex_unlock(&ssh->mu);
		if (outbuf.len)
			req->output(req->output_userdata, SAAS_STREAM_STDOUT, outbuf.data, outbuf.len);
		if (errbuf.len)
			req->output(req->output_userdata, SAAS_STREAM_STDERR, errbuf.data, errbuf.len);
		pthread_mutex_lock(&ssh->mu);
	}
	/*
	 * Before the channel's close: sshd answers a close only once the shell
	 * has exited, and a shell that said "held" waits for this go.
	 */
	if ((mf.held || mo.held) && mf.pid && !ssh->dead)
		exec_go(ssh, mf.pid, token);
	if (mf.exit_seen || mo.exit_seen) {
		*exit_code = mf.exit_seen ? mf.exit_code : mo.exit_code;
	} else {
		char *sig = NULL;
		libssh2_channel_get_exit_signal(x->ch, &sig, NULL, NULL, NULL, NULL, NULL);
		if (sig) {
			*exit_code = 128 + saas__ssh_signal_number(sig);
			libssh2_free(ssh->session, sig);
		} else {
			*exit_code = libssh2_channel_get_exit_status(x->ch);
		}
	}
	rc = SAAS_OK;
out:
	/* Everything the command said was read: its close is not waited for (a round trip into the guest). */
	if (x && x->ch)
		saas__ssh_channel_park(&x->op, x->ch, have_slot);
	pthread_mutex_unlock(&ssh->mu);
out_nolock:
	free(x);
	saas__buf_free(&cmd);
	saas__buf_free(&errbuf);
	saas__buf_free(&outbuf);
	return rc;
}

