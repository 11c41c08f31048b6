/*
 * Internal: the insides of the SSH transport's shared session, for the files
 * that use it (ssh_exec.c, ssh_sftp.c, ssh_tunnel.c). ssh_session.c holds the
 * session itself and says how the sharing works: every libssh2 call is made
 * with mu held, through SSH_LOOP or a call site of its own that brackets the
 * call with call_enter and saas__ssh_call_leave.
 */
#ifndef SAAS_TRANSPORT_SSH_SESSION_H
#define SAAS_TRANSPORT_SSH_SESSION_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include <libssh2.h>
#include <libssh2_sftp.h>

#include "transport/ssh.h"
#include "util/util.h"

/* Longest sleep between two looks at the socket; bounds how late a timeout, cancel or missed wake-up is seen. */
#define SSH_POLL_MS 20
/* How long one blocking-style libssh2 call (open, request, SFTP packet) may take before the guest counts as gone. */
#define SSH_CALL_TIMEOUT_MS 60000
/* How often a connect that may be cancelled (saas__ssh_config.cancelled) asks, while no sshd has answered. */
#define SSH_CANCEL_SLICE_MS 250
/* Closing a channel waits this long for the guest's close before leaving it to the session's teardown. */
#define SSH_CLOSE_TIMEOUT_MS 3000
#define SSH_CHUNK 32768
/* Channels parked at once; past it, closes wait for their answer again (saas__ssh_channel_park). */
#define SSH_PARKED_MAX 16

struct ssh_op;
struct pump;
struct parked;

struct saas__ssh {
	/*
	 * Who holds the connection: its opener, and every thread in the middle
	 * of an operation on it (saas__ssh_ref). A dead connection is replaced
	 * for new users while old ones still hold it: only the last reference
	 * frees it, so an upload blocked on its client can never find it gone.
	 */
	unsigned int refs;        /* __atomic */
	pthread_mutex_t mu;       /* guards the session, the SFTP handle and every field below */
	pthread_cond_t cond;      /* broadcast when input arrived, a pending packet left, or the poller woke */
	pthread_mutex_t open_mu;  /* channel opens (libssh2 keeps their state in the session) */
	pthread_mutex_t sftp_mu;  /* SFTP operations (libssh2 keeps their state in the SFTP handle) */
	int fd;
	int wake_fd;              /* eventfd: wakes the thread polling the socket */
	LIBSSH2_SESSION *session;
	LIBSSH2_SFTP *sftp;
	struct ssh_op *cur;       /* the operation whose libssh2 call is running */
	struct ssh_op *pending;   /* the operation owning a half-sent packet, or NULL */
	uint64_t rx_gen;          /* bumped whenever bytes were read from the socket */
	int polling;              /* a thread is in poll() on the socket */
	int dead;
	/*
	 * No new channel: a channel open gave up half-way, and libssh2 keeps that
	 * open's state in the session, so the next open would go on with it. What
	 * runs on the session goes on; saas__ssh_alive says 0, so callers connect
	 * anew.
	 */
	int retired;
	int closing;
	unsigned int sessions;    /* session channels open (parked ones included) */
	struct pump *pumps;
	/*
	 * Channels whose close went out but whose answer had not come
	 * (saas__ssh_channel_park): each keeps its session slot until the next
	 * channel open finds it answered and frees it.
	 */
	struct parked *parked;
	unsigned int nparked;
	unsigned long parks;      /* channels ever parked (for tests and debugging) */
	unsigned long gos;        /* gos sent to wrappers that said "held" (ssh_exec.c), and of them */
	unsigned long gos_missed; /* those that found no such wrapper waiting: it drained on its own clock */
};

/* One thread's use of the session; its address identifies the owner of a pending packet. */
struct ssh_op {
	saas__ssh *ssh;
	int64_t deadline;         /* saas__now_ms() time; the loop gives LIBSSH2_ERROR_TIMEOUT after it */
};

/* May this operation call into libssh2 now? Not while another owns a half-sent packet. */
static inline int op_may_call(const struct ssh_op *op)
{
	return !op->ssh->pending || op->ssh->pending == op;
}

struct call_snap {
	uint64_t rx_gen;
	struct ssh_op *pending;
};

static inline struct call_snap call_enter(struct ssh_op *op)
{
	struct call_snap sn = { op->ssh->rx_gen, op->ssh->pending };

	op->ssh->cur = op;
	return sn;
}

/* After a libssh2 call (mu held): a fatal error marks the connection dead; progress wakes the others. */
void saas__ssh_call_leave(struct ssh_op *op, struct call_snap sn, int rc);
/* Sleep (mu held) until the socket or another thread may have made progress for op, at most max_ms. */
void saas__ssh_op_wait(struct ssh_op *op, int max_ms);
/* Is op past its deadline (and owns no half-sent packet it must finish first)? */
int saas__ssh_op_expired(struct ssh_op *op);

static inline int64_t ms_left(int64_t deadline)
{
	int64_t left = deadline - saas__now_ms();

	return left > 0 ? left : 0;
}

/*
 * With mu held: repeat an int-returning libssh2 call until it stops saying
 * EAGAIN, the connection dies or the operation's deadline passes
 * (LIBSSH2_ERROR_TIMEOUT).
 */
#define SSH_LOOP(op, rc, expr)                                                  \
	for (;;) {                                                                  \
		if ((op)->ssh->dead) {                                                  \
			(rc) = LIBSSH2_ERROR_SOCKET_DISCONNECT;                             \
			break;                                                              \
		}                                                                       \
		if (!op_may_call(op)) {                                                 \
			(rc) = LIBSSH2_ERROR_EAGAIN;                                        \
		} else {                                                                \
			struct call_snap sn_ = call_enter(op);                              \
			(rc) = (expr);                                                      \
			saas__ssh_call_leave((op), sn_, (int)(rc));                         \
		}                                                                       \
		if ((rc) != LIBSSH2_ERROR_EAGAIN)                                       \
			break;                                                              \
		if (saas__ssh_op_expired(op)) {                                         \
			(rc) = LIBSSH2_ERROR_TIMEOUT;                                       \
			break;                                                              \
		}                                                                       \
		saas__ssh_op_wait((op), (int)ms_left((op)->deadline ? (op)->deadline : saas__now_ms() + SSH_POLL_MS)); \
	}

/* The same for calls that return a pointer, NULL with the session's errno on failure. */
#define SSH_LOOP_PTR(op, ptr, rc, expr)                                         \
	for (;;) {                                                                  \
		if ((op)->ssh->dead) {                                                  \
			(rc) = LIBSSH2_ERROR_SOCKET_DISCONNECT;                             \
			break;                                                              \
		}                                                                       \
		if (!op_may_call(op)) {                                                 \
			(rc) = LIBSSH2_ERROR_EAGAIN;                                        \
		} else {                                                                \
			struct call_snap sn_ = call_enter(op);                              \
			(ptr) = (expr);                                                     \
			(rc) = (ptr) ? 0 : libssh2_session_last_errno((op)->ssh->session);  \
			if (!(ptr) && (rc) == 0)                                            \
				(rc) = LIBSSH2_ERROR_SOCKET_NONE;                               \
			saas__ssh_call_leave((op), sn_, (rc));                              \
		}                                                                       \
		if ((rc) != LIBSSH2_ERROR_EAGAIN)                                       \
			break;                                                              \
		if (saas__ssh_op_expired(op)) {                                         \
			(rc) = LIBSSH2_ERROR_TIMEOUT;                                       \
			break;                                                              \
		}                                                                       \
		saas__ssh_op_wait((op), (int)ms_left((op)->deadline ? (op)->deadline : saas__now_ms() + SSH_POLL_MS)); \
	}


/* A libssh2 failure as SAAS_EBACKEND: "what: why". */
int saas__ssh_err(int rc, const char *what);
/* What a libssh2 error code means, in words. */
const char *saas__ssh_strerror(int rc);

/*
 * Open a session channel (mu held on entry and exit), waiting for one of the
 * connection's session slots (for_kill: from the kill reserve); `stop`, if
 * given, cuts the wait short when it becomes non-zero.
 */
int saas__ssh_channel_open(struct ssh_op *op, LIBSSH2_CHANNEL **out, int for_kill, const int *stop);
/* Close and free a channel (mu held), giving back its session slot if it holds one. */
void saas__ssh_channel_release(struct ssh_op *op, LIBSSH2_CHANNEL *ch, int session_slot);
/*
 * The same without waiting for the guest's close (mu held): the close goes
 * out now and the channel is freed by a later channel open once the answer
 * came (at most SSH_CLOSE_TIMEOUT_MS later, then it is left to the teardown,
 * as saas__ssh_channel_release leaves it). For a channel whose results were
 * all read: a command's, after its exit markers.
 */
void saas__ssh_channel_park(struct ssh_op *op, LIBSSH2_CHANNEL *ch, int session_slot);
/* saas__ssh_run with mu held. */
int saas__ssh_run_quick(saas__ssh *ssh, const char *command, int timeout_ms, char *out, size_t outsize,
                        int *exit_code);

/*
 * A channel bridged to a local socket pair by a thread of its own
 * (ssh_tunnel.c): a tunnel, or a terminal (ssh_pty.c), which also resizes,
 * waits for the shell's exit status before it ends its side of the pair, and
 * belongs to its owner rather than to the connection's list.
 */
enum pump_call { PCALL_NONE, PCALL_WRITE, PCALL_EOF, PCALL_READ, PCALL_RESIZE, PCALL_CLOSE };

struct pump {
	struct pump *next;
	struct ssh_op op;
	LIBSSH2_CHANNEL *ch;
	int fd;                   /* our end of the socketpair */
	pthread_t tid;
	int done;                 /* the thread has finished and can be joined */
	enum pump_call last;
	/* A terminal's; all 0 for a tunnel. Fields but exit_status are guarded by mu. */
	int pty;
	int stop;                 /* the owner hangs up */
	int resize;               /* cols x rows is to be sent */
	unsigned int cols, rows;
	int exit_status;          /* the shell's once the thread is done; -1 unknown */
	char up[SSH_CHUNK], down[SSH_CHUNK];
	size_t up_len, up_off, down_len, down_off;
};

/* The pump thread (ssh_tunnel.c). */
void *saas__ssh_pump_main(void *arg);
/* "TERM", "SIGTERM" -> 15; 0 for a name it does not know. */
int saas__ssh_signal_number(const char *name);

/* Tunnels (ssh_tunnel.c): take the finished ones (all: every one) off the list, mu held... */
struct pump *saas__ssh_pumps_take(saas__ssh *ssh, int all);
/* ...then, without mu, join their threads and free them. */
void saas__ssh_pumps_join(struct pump *list);

#endif
