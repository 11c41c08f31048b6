/*
 * The guest transport: one libssh2 session per sandbox, shared by every
 * thread that runs a command, moves a file or carries a tunnel into it.
 *
 * libssh2 sessions are not thread-safe, so the session runs non-blocking and
 * every libssh2 call is made with the connection's mutex held; an operation
 * that would block lets go of the mutex and waits (see op_wait). Because any
 * thread's call may read packets meant for another thread's channel into
 * libssh2's buffers, waiting on the socket alone could sleep through data that
 * already arrived: our recv callback counts the bytes read, and whoever moved
 * input wakes the others.
 *
 * Two libssh2 quirks shape the rest:
 *  - A packet that could be sent only in part stays "pending" in the session;
 *    until the same call is repeated with the same arguments and finishes it,
 *    every other send fails with LIBSSH2_ERROR_BAD_USE (and some callers turn
 *    that into a silently dropped close). Our send callback records which
 *    operation owns the pending packet; nobody else calls into libssh2 until
 *    it is flushed, and its owner never walks away from it.
 *  - Opening a channel keeps its state in the session, not the channel, so
 *    opens are serialised (open_mu); SFTP requests likewise share state in the
 *    SFTP handle, so SFTP operations are serialised (sftp_mu).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libssh2.h>
#include <libssh2_sftp.h>

#include "transport/marker.h"
#include "transport/ssh.h"
#include "util/error.h"
#include "util/util.h"

/* Longest sleep between two looks at the socket; bounds how late a timeout, cancel or missed wake-up is seen. */
#define SSH_POLL_MS 20
/* How long one blocking-style libssh2 call (open, request, SFTP packet) may take before the guest counts as gone. */
#define SSH_CALL_TIMEOUT_MS 60000
/* Closing a channel waits this long for the guest's close before leaving it to the session's teardown. */
#define SSH_CLOSE_TIMEOUT_MS 3000
/*
 * After the command's exit marker: finish at EOF, or once output has been
 * quiet this long, or at most this late. A command that leaves nothing holding
 * its output ends at EOF, a moment after the marker. The quiet spell is for
 * one that started a background process on it, and must be long enough to
 * outwait a loaded guest: sshd may forward the marker (stderr) before output
 * the command wrote earlier (stdout), when it polled the two pipes in between,
 * and the stdout data then trails the marker by however long sshd is kept off
 * the vCPU.
 */
#define SSH_EXIT_QUIET_MS 250
#define SSH_EXIT_MAX_MS 2000
/* The backend_code of a host key that cannot match the pinned one (libssh2's own codes are above -100). */
#define SSH_EHOSTKEY (-1000L)
/*
 * Session channels per connection. OpenSSH refuses more than MaxSessions (10 by
 * default); the guest image raises it to 64. Commands and the SFTP subsystem
 * share SSH_SESSIONS; kills have a reserve of their own so that a timed-out
 * command can always be killed even when every slot is busy.
 */
#define SSH_SESSIONS 48
#define SSH_SESSIONS_KILL 8
#define SSH_KEEPALIVE_S 15
#define SSH_CHUNK 32768
#define SSH_FILE_CHUNK (256 * 1024)

struct ssh_op;
struct pump;

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
	int closing;
	unsigned int sessions;    /* session channels open */
	struct pump *pumps;
};

/* One thread's use of the session; its address identifies the owner of a pending packet. */
struct ssh_op {
	saas__ssh *ssh;
	int64_t deadline;         /* saas__now_ms() time; the loop gives LIBSSH2_ERROR_TIMEOUT after it */
};

static const struct ssh_op orphan_op; /* owns a packet half-sent outside any operation (cannot be flushed) */

static int global_rc = -1;

static void global_init_once(void)
{
	global_rc = libssh2_init(0);
}

int saas__ssh_global_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	/* libssh2_init is not thread-safe itself. */
	if (pthread_once(&once, global_init_once) != 0 || global_rc != 0)
		return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, global_rc, "libssh2 initialisation failed");
	return SAAS_OK;
}

/* ---- errors ---------------------------------------------------------------------------------- */

static const char *ssh_strerror(int rc)
{
	switch (rc) {
	case LIBSSH2_ERROR_BANNER_RECV:
	case LIBSSH2_ERROR_BANNER_SEND: return "SSH banner exchange failed";
	case LIBSSH2_ERROR_KEX_FAILURE: return "SSH key exchange failed";
	case LIBSSH2_ERROR_SOCKET_SEND: return "sending to the guest failed";
	case LIBSSH2_ERROR_SOCKET_RECV: return "receiving from the guest failed";
	case LIBSSH2_ERROR_SOCKET_DISCONNECT: return "the guest closed the SSH connection";
	case LIBSSH2_ERROR_TIMEOUT:
	case LIBSSH2_ERROR_SOCKET_TIMEOUT: return "the guest did not answer in time";
	case LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED:
	case LIBSSH2_ERROR_AUTHENTICATION_FAILED: return "the guest refused the engine's key";
	case LIBSSH2_ERROR_FILE: return "cannot read the engine's key file";
	case LIBSSH2_ERROR_CHANNEL_FAILURE: return "the guest refused to open a channel";
	case LIBSSH2_ERROR_CHANNEL_REQUEST_DENIED: return "the guest refused the request";
	case LIBSSH2_ERROR_CHANNEL_CLOSED: return "the channel was closed";
	case LIBSSH2_ERROR_SFTP_PROTOCOL: return "SFTP request failed";
	case LIBSSH2_ERROR_ALLOC: return "out of memory in libssh2";
	default: return "SSH failure";
	}
}

/* Does this libssh2 error mean the connection itself is gone? */
static int ssh_fatal(int rc)
{
	switch (rc) {
	case LIBSSH2_ERROR_SOCKET_NONE:
	case LIBSSH2_ERROR_BANNER_RECV:
	case LIBSSH2_ERROR_BANNER_SEND:
	case LIBSSH2_ERROR_INVALID_MAC:
	case LIBSSH2_ERROR_KEX_FAILURE:
	case LIBSSH2_ERROR_SOCKET_SEND:
	case LIBSSH2_ERROR_SOCKET_DISCONNECT:
	case LIBSSH2_ERROR_PROTO:
	case LIBSSH2_ERROR_SOCKET_TIMEOUT:
	case LIBSSH2_ERROR_SOCKET_RECV:
	case LIBSSH2_ERROR_ENCRYPT:
	case LIBSSH2_ERROR_DECRYPT:
	case LIBSSH2_ERROR_OUT_OF_BOUNDARY:
		return 1;
	default:
		return 0;
	}
}

static int ssh_err(int rc, const char *what)
{
	return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, rc, "%s: %s", what, ssh_strerror(rc));
}

static int64_t ms_left(int64_t deadline)
{
	int64_t left = deadline - saas__now_ms();

	return left > 0 ? left : 0;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* ---- the shared session ---------------------------------------------------------------------- */

/* libssh2's own socket I/O, plus the bookkeeping the sharing needs. Called with mu held. */
static ssize_t ssh_recv_cb(libssh2_socket_t fd, void *buf, size_t len, int flags, void **abstract)
{
	saas__ssh *ssh = *abstract;
	ssize_t n = recv(fd, buf, len, flags);

	if (n < 0)
		return errno == ENOENT ? -EAGAIN : -errno;
	if (n > 0)
		ssh->rx_gen++;
	return n;
}

static ssize_t ssh_send_cb(libssh2_socket_t fd, const void *buf, size_t len, int flags, void **abstract)
{
	saas__ssh *ssh = *abstract;
	ssize_t n = send(fd, buf, len, flags | MSG_NOSIGNAL);
	int err = errno;

	/*
	 * libssh2 sends a packet whole or keeps the rest to be finished by the
	 * very same call; a complete send therefore ends any pending packet.
	 */
	if (n == (ssize_t)len)
		ssh->pending = NULL;
	else if (n >= 0 || err == EAGAIN || err == EWOULDBLOCK)
		ssh->pending = ssh->cur ? ssh->cur : (struct ssh_op *)&orphan_op;
	return n < 0 ? -err : n;
}

static void wake_all(saas__ssh *ssh)
{
	pthread_cond_broadcast(&ssh->cond);
	if (ssh->polling) {
		uint64_t one = 1;
		if (write(ssh->wake_fd, &one, sizeof(one)) < 0) {
			/* the counter is saturated: the poller wakes anyway */
		}
	}
}

/* May this operation call into libssh2 now? Not while another owns a half-sent packet. */
static int op_may_call(const struct ssh_op *op)
{
	return !op->ssh->pending || op->ssh->pending == op;
}

struct call_snap {
	uint64_t rx_gen;
	struct ssh_op *pending;
};

static struct call_snap call_enter(struct ssh_op *op)
{
	struct call_snap sn = { op->ssh->rx_gen, op->ssh->pending };

	op->ssh->cur = op;
	return sn;
}

static void call_leave(struct ssh_op *op, struct call_snap sn, int rc)
{
	saas__ssh *ssh = op->ssh;

	ssh->cur = NULL;
	if (rc < 0 && rc != LIBSSH2_ERROR_EAGAIN && ssh_fatal(rc))
		ssh->dead = 1;
	/* Input this call read may be another thread's; a flushed packet unblocks everyone. */
	if (ssh->rx_gen != sn.rx_gen || ssh->pending != sn.pending || ssh->dead)
		wake_all(ssh);
}

/*
 * With mu held: sleep until the socket or another thread may have made
 * progress for us, at most max_ms. One thread polls the socket (and the
 * wake-up eventfd); the rest wait on the condition variable, which the poller
 * and every thread that reads input broadcast.
 */
static void op_wait(struct ssh_op *op, int max_ms)
{
	saas__ssh *ssh = op->ssh;

	if (max_ms > SSH_POLL_MS)
		max_ms = SSH_POLL_MS;
	if (max_ms < 1)
		max_ms = 1;
	if (!ssh->polling) {
		struct pollfd p[2];
		short ev = POLLIN;

		if (ssh->pending || (libssh2_session_block_directions(ssh->session) & LIBSSH2_SESSION_BLOCK_OUTBOUND))
			ev |= POLLOUT;
		p[0].fd = ssh->fd;
		p[0].events = ev;
		p[1].fd = ssh->wake_fd;
		p[1].events = POLLIN;
		p[0].revents = p[1].revents = 0;
		ssh->polling = 1;
		pthread_mutex_unlock(&ssh->mu);
		if (poll(p, 2, max_ms) > 0 && (p[1].revents & POLLIN)) {
			uint64_t v;
			if (read(ssh->wake_fd, &v, sizeof(v)) < 0) {
				/* nothing to drain */
			}
		}
		pthread_mutex_lock(&ssh->mu);
		ssh->polling = 0;
		pthread_cond_broadcast(&ssh->cond);
	} else {
		struct timespec ts;
		saas__deadline(&ts, CLOCK_REALTIME, max_ms);
		pthread_cond_timedwait(&ssh->cond, &ssh->mu, &ts);
	}
}

/*
 * After the deadline: give up, unless this operation owns a half-sent packet,
 * which must be finished first (for a while longer: then the session is
 * beyond repair and marked dead).
 */
static int op_expired(struct ssh_op *op)
{
	int64_t now = saas__now_ms();

	if (!op->deadline || now < op->deadline)
		return 0;
	if (op->ssh->pending == op) {
		if (now < op->deadline + SSH_CALL_TIMEOUT_MS)
			return 0;
		op->ssh->dead = 1;
		wake_all(op->ssh);
	}
	return 1;
}

/*
 * With mu held: repeat an int-returning libssh2 call until it stops saying
 * EAGAIN, the connection dies or the operation's deadline passes
 * (LIBSSH2_ERROR_TIMEOUT).
 */
#define SSH_LOOP(op, rc, expr)                                                   \
	for (;;) {                                                                   \
		if ((op)->ssh->dead) {                                                   \
			(rc) = LIBSSH2_ERROR_SOCKET_DISCONNECT;                              \
			break;                                                               \
		}                                                                        \
		if (!op_may_call(op)) {                                                  \
			(rc) = LIBSSH2_ERROR_EAGAIN;                                         \
		} else {                                                                 \
			struct call_snap sn_ = call_enter(op);                               \
			(rc) = (expr);                                                       \
			call_leave((op), sn_, (int)(rc));                                    \
		}                                                                        \
		if ((rc) != LIBSSH2_ERROR_EAGAIN)                                        \
			break;                                                               \
		if (op_expired(op)) {                                                    \
			(rc) = LIBSSH2_ERROR_TIMEOUT;                                        \
			break;                                                               \
		}                                                                        \
		op_wait((op), (int)ms_left((op)->deadline ? (op)->deadline : saas__now_ms() + SSH_POLL_MS)); \
	}

/* The same for calls that return a pointer, NULL with the session's errno on failure. */
#define SSH_LOOP_PTR(op, ptr, rc, expr)                                          \
	for (;;) {                                                                   \
		if ((op)->ssh->dead) {                                                   \
			(rc) = LIBSSH2_ERROR_SOCKET_DISCONNECT;                              \
			break;                                                               \
		}                                                                        \
		if (!op_may_call(op)) {                                                  \
			(rc) = LIBSSH2_ERROR_EAGAIN;                                         \
		} else {                                                                 \
			struct call_snap sn_ = call_enter(op);                               \
			(ptr) = (expr);                                                      \
			(rc) = (ptr) ? 0 : libssh2_session_last_errno((op)->ssh->session);   \
			if (!(ptr) && (rc) == 0)                                             \
				(rc) = LIBSSH2_ERROR_SOCKET_NONE;                                \
			call_leave((op), sn_, (rc));                                         \
		}                                                                        \
		if ((rc) != LIBSSH2_ERROR_EAGAIN)                                        \
			break;                                                               \
		if (op_expired(op)) {                                                    \
			(rc) = LIBSSH2_ERROR_TIMEOUT;                                        \
			break;                                                               \
		}                                                                        \
		op_wait((op), (int)ms_left((op)->deadline ? (op)->deadline : saas__now_ms() + SSH_POLL_MS)); \
	}

/* ---- connecting ------------------------------------------------------------------------------ */

/* One TCP connection attempt, non-blocking, within `deadline`. -errno on failure. */
static int tcp_connect(const char *host, unsigned int port, int64_t deadline)
{
	struct addrinfo hints, *res = NULL, *ai;
	char portstr[16];
	int fd = -1, err = ECONNREFUSED, one = 1;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(portstr, sizeof(portstr), "%u", port);
	if (getaddrinfo(host, portstr, &hints, &res) != 0)
		return -EHOSTUNREACH;
	for (ai = res; ai; ai = ai->ai_next) {
		struct pollfd p;
		socklen_t len = sizeof(err);

		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0) {
			err = errno;
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			goto out;
		err = errno;
		if (err == EINPROGRESS) {
			p.fd = fd;
			p.events = POLLOUT;
			p.revents = 0;
			if (poll(&p, 1, (int)ms_left(deadline)) == 1 &&
			    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0)
				goto out;
			if (err == EINPROGRESS)
				err = ETIMEDOUT;
		}
		close(fd);
		fd = -1;
	}
out:
	freeaddrinfo(res);
	if (fd < 0)
		return -err;
	/* Commands are small request/response exchanges: no Nagle delays. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* "ssh-ed25519 AAAA... comment" → the type and the base64 body, without copying. */
static int split_host_key(const char *s, const char **type, size_t *type_len, const char **b64, size_t *b64_len)
{
	while (*s == ' ' || *s == '\t')
		s++;
	*type = s;
	while (*s && *s != ' ' && *s != '\t')
		s++;
	*type_len = (size_t)(s - *type);
	while (*s == ' ' || *s == '\t')
		s++;
	*b64 = s;
	while (*s && *s != ' ' && *s != '\t' && *s != '\n' && *s != '\r')
		s++;
	*b64_len = (size_t)(s - *b64);
	return *type_len && *b64_len ? 0 : -1;
}

static const char *host_key_type_name(int type)
{
	switch (type) {
	case LIBSSH2_HOSTKEY_TYPE_RSA: return "ssh-rsa";
	case LIBSSH2_HOSTKEY_TYPE_DSS: return "ssh-dss";
#ifdef LIBSSH2_HOSTKEY_TYPE_ECDSA_256
	case LIBSSH2_HOSTKEY_TYPE_ECDSA_256: return "ecdsa-sha2-nistp256";
	case LIBSSH2_HOSTKEY_TYPE_ECDSA_384: return "ecdsa-sha2-nistp384";
	case LIBSSH2_HOSTKEY_TYPE_ECDSA_521: return "ecdsa-sha2-nistp521";
#endif
#ifdef LIBSSH2_HOSTKEY_TYPE_ED25519
	case LIBSSH2_HOSTKEY_TYPE_ED25519: return "ssh-ed25519";
#endif
	default: return "unknown";
	}
}

/* Compare the server's host key with the pinned one (split_host_key's parts). SAAS_OK or an error recorded. */
static int check_host_key(saas__ssh *ssh, const char *type, size_t type_len, const char *b64, size_t b64_len)
{
	const char *key;
	size_t key_len = 0;
	int key_type = 0, rc;
	char *got;

	key = libssh2_session_hostkey(ssh->session, &key_len, &key_type);
	if (!key)
		return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, SSH_EHOSTKEY, "the guest sent no host key");
	/* The manifest pins the key as OpenSSH writes it: its wire form in base64. */
	if (!(got = saas_base64_encode(key, key_len)))
		return saas__oom();
	if (strlen(host_key_type_name(key_type)) != type_len ||
	    memcmp(host_key_type_name(key_type), type, type_len) != 0 || strlen(got) != b64_len ||
	    memcmp(got, b64, b64_len) != 0)
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, SSH_EHOSTKEY,
		                 "host key mismatch: the guest presented %s %s, expected %.*s %.*s",
		                 host_key_type_name(key_type), got, (int)type_len, type, (int)b64_len, b64);
	else
		rc = SAAS_OK;
	free(got);
	return rc;
}

/* Repeat a teardown call while it says EAGAIN, a bounded number of times (mu held). */
#define SSH_TEARDOWN(ssh, rc, expr)                                              \
	for (int tries_ = 0; tries_ < 100; tries_++) {                               \
		struct pollfd pf_ = { (ssh)->fd, POLLIN, 0 };                            \
		if (((rc) = (expr)) != LIBSSH2_ERROR_EAGAIN)                             \
			break;                                                               \
		poll(&pf_, 1, 10);                                                       \
	}

static void ssh_free(saas__ssh *ssh)
{
	int rc;

	if (!ssh)
		return;
	if (ssh->session) {
		struct ssh_op op = { ssh, saas__now_ms() + 1000 };

		pthread_mutex_lock(&ssh->mu);
		/* A polite goodbye while the connection works (a second at most)... */
		if (ssh->sftp) {
			SSH_LOOP(&op, rc, libssh2_sftp_shutdown(ssh->sftp));
			if (rc != LIBSSH2_ERROR_EAGAIN && rc != LIBSSH2_ERROR_TIMEOUT && rc != LIBSSH2_ERROR_SOCKET_DISCONNECT)
				ssh->sftp = NULL;
		}
		SSH_LOOP(&op, rc, libssh2_session_disconnect(ssh->session, "bye"));
		/*
		 * ...then the socket goes, so that whatever still waits for the
		 * guest (a channel's close) fails at once and libssh2 frees it all
		 * (it answers EAGAIN until then, non-blocking as the session is).
		 */
		shutdown(ssh->fd, SHUT_RDWR);
		if (ssh->sftp)
			SSH_TEARDOWN(ssh, rc, libssh2_sftp_shutdown(ssh->sftp));
		SSH_TEARDOWN(ssh, rc, libssh2_session_free(ssh->session));
		pthread_mutex_unlock(&ssh->mu);
	}
	if (ssh->fd >= 0)
		close(ssh->fd);
	if (ssh->wake_fd >= 0)
		close(ssh->wake_fd);
	pthread_mutex_destroy(&ssh->mu);
	pthread_mutex_destroy(&ssh->open_mu);
	pthread_mutex_destroy(&ssh->sftp_mu);
	pthread_cond_destroy(&ssh->cond);
	free(ssh);
}

static saas__ssh *ssh_new(void)
{
	saas__ssh *ssh = calloc(1, sizeof(*ssh));

	if (!ssh)
		return NULL;
	ssh->fd = -1;
	ssh->refs = 1;
	pthread_mutex_init(&ssh->mu, NULL);
	pthread_mutex_init(&ssh->open_mu, NULL);
	pthread_mutex_init(&ssh->sftp_mu, NULL);
	pthread_cond_init(&ssh->cond, NULL);
	ssh->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (ssh->wake_fd < 0) {
		ssh_free(ssh);
		return NULL;
	}
	return ssh;
}

/*
 * One attempt: TCP, handshake, host key, authentication. Returns SAAS_OK, or
 * 1 when the failure may be a guest still booting (worth retrying), or an error.
 */
static int open_once(saas__ssh **out, const saas__ssh_config *cfg, int64_t deadline)
{
	saas__ssh *ssh = ssh_new();
	struct ssh_op op;
	const char *type = NULL, *b64 = NULL;
	size_t type_len = 0, b64_len = 0;
	int rc, lrc;

	if (!ssh)
		return saas__oom();
	op.ssh = ssh;
	op.deadline = deadline;
	if ((ssh->fd = tcp_connect(cfg->host, cfg->port, deadline)) < 0) {
		rc = ssh->fd == -ECONNREFUSED || ssh->fd == -ETIMEDOUT || ssh->fd == -ECONNRESET ||
		             ssh->fd == -EHOSTUNREACH || ssh->fd == -ENETUNREACH
		             ? 1
		             : saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_OS, -ssh->fd, "cannot connect to %s:%u: %s",
		                           cfg->host, cfg->port, strerror(-ssh->fd));
		goto out;
	}
	if (!(ssh->session = libssh2_session_init_ex(NULL, NULL, NULL, ssh))) {
		rc = saas__oom();
		goto out;
	}
	libssh2_session_callback_set(ssh->session, LIBSSH2_CALLBACK_RECV, (void *)ssh_recv_cb);
	libssh2_session_callback_set(ssh->session, LIBSSH2_CALLBACK_SEND, (void *)ssh_send_cb);
	libssh2_session_set_blocking(ssh->session, 0);
	if (cfg->host_key) {
		/* Ask for the pinned key's type, or a guest with several host keys may show another. */
		char pref[64];
		if (split_host_key(cfg->host_key, &type, &type_len, &b64, &b64_len) < 0 || type_len >= sizeof(pref)) {
			rc = saas__error(SAAS_EINVAL, SAAS_ERRCLASS_ARGS, SSH_EHOSTKEY,
			                 "the pinned host key is not \"TYPE BASE64\"");
			goto out;
		}
		memcpy(pref, type, type_len);
		pref[type_len] = '\0';
		libssh2_session_method_pref(ssh->session, LIBSSH2_METHOD_HOSTKEY, pref);
	}

	pthread_mutex_lock(&ssh->mu);
	for (int extended = 0;; extended = 1) {
		const char *banner;
		SSH_LOOP(&op, lrc, libssh2_session_handshake(ssh->session, ssh->fd));
		/*
		 * The caller's deadline is for reaching an sshd. Once its banner came,
		 * the key exchange may finish (a loaded guest is slow, not gone): a
		 * session freed in the middle of one leaks libssh2's exchange state.
		 */
		banner = libssh2_session_banner_get(ssh->session);
		if (lrc != LIBSSH2_ERROR_TIMEOUT || extended || !banner || !*banner)
			break;
		op.deadline = saas__now_ms() + SSH_CALL_TIMEOUT_MS;
	}
	pthread_mutex_unlock(&ssh->mu);
	if (lrc < 0) {
		/*
		 * A forwarded port accepts before the guest's sshd runs; the banner
		 * exchange then fails, worth another try. A failed key exchange is
		 * an answer (e.g. no host key of the pinned type): no retry.
		 */
		if (lrc == LIBSSH2_ERROR_KEX_FAILURE && cfg->host_key)
			rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, SSH_EHOSTKEY,
			                 "host key mismatch: the guest offers no host key of the pinned type");
		else
			rc = lrc == LIBSSH2_ERROR_TIMEOUT || lrc == LIBSSH2_ERROR_KEX_FAILURE ? ssh_err(lrc, "SSH handshake") : 1;
		goto out;
	}
	if (cfg->host_key && (rc = check_host_key(ssh, type, type_len, b64, b64_len)) < 0)
		goto out;

	/* Likewise, authentication started is left to finish. */
	if (op.deadline < saas__now_ms() + SSH_CALL_TIMEOUT_MS)
		op.deadline = saas__now_ms() + SSH_CALL_TIMEOUT_MS;
	pthread_mutex_lock(&ssh->mu);
	SSH_LOOP(&op, lrc,
	         libssh2_userauth_publickey_fromfile(ssh->session, cfg->user, cfg->public_key, cfg->private_key, NULL));
	pthread_mutex_unlock(&ssh->mu);
	if (lrc < 0) {
		rc = ssh_fatal(lrc) ? 1 : saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, lrc,
		                                      "SSH authentication as '%s' failed: %s", cfg->user,
		                                      ssh_strerror(lrc));
		goto out;
	}
	/* Have the guest answer now and then, so a connection that died quietly is noticed. */
	libssh2_keepalive_config(ssh->session, 1, SSH_KEEPALIVE_S);
	ssh->dead = 0;
	*out = ssh;
	ssh = NULL;
	rc = SAAS_OK;
out:
	ssh_free(ssh);
	return rc;
}

bool saas__ssh_host_key_mismatch(const saas_error *err)
{
	return err && err->backend_code == SSH_EHOSTKEY;
}

bool saas__ssh_key_refused(const saas_error *err)
{
	return err && err->klass == SAAS_ERRCLASS_GUEST &&
	       (err->backend_code == LIBSSH2_ERROR_AUTHENTICATION_FAILED ||
	        err->backend_code == LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED);
}

int saas__ssh_open(saas__ssh **out, const saas__ssh_config *cfg)
{
	int64_t deadline;
	int rc;

	if (!out || !cfg || !cfg->host || !cfg->user || !cfg->private_key || !cfg->public_key || !cfg->port ||
	    cfg->port > 65535)
		return saas__inval("incomplete SSH configuration");
	*out = NULL;
	if ((rc = saas__ssh_global_init()) < 0)
		return rc;
	deadline = saas__now_ms() + (cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : 10000);
	for (;;) {
		if ((rc = open_once(out, cfg, deadline)) <= 0)
			return rc;
		if (ms_left(deadline) <= 0)
			break;
		sleep_ms(ms_left(deadline) < 100 ? (int)ms_left(deadline) : 100);
	}
	return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, 0,
	                   "no SSH service answered on %s:%u within %d ms", cfg->host, cfg->port,
	                   cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : 10000);
}

int saas__ssh_alive(saas__ssh *ssh)
{
	struct pollfd p;
	int alive, queued = -1;

	if (!ssh)
		return 0;
	pthread_mutex_lock(&ssh->mu);
	alive = !ssh->dead;
	if (alive) {
		p.fd = ssh->fd;
		p.events = POLLIN | POLLRDHUP;
		p.revents = 0;
		if (poll(&p, 1, 0) == 1) {
			char c;
			if (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL))
				alive = 0;
			else if ((p.revents & POLLIN) && recv(ssh->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
				alive = 0;
		}
	}
	/*
	 * A keepalive (when its interval has passed), only if no packet is
	 * half-sent and the socket's send queue is empty: libssh2 builds it on
	 * the stack, so it must go out whole or it could never be finished.
	 */
	if (alive && !ssh->pending && ioctl(ssh->fd, SIOCOUTQ, &queued) == 0 && queued == 0) {
		struct ssh_op op = { ssh, 0 };
		struct call_snap sn = call_enter(&op);
		int next = 0, rc = libssh2_keepalive_send(ssh->session, &next);
		call_leave(&op, sn, rc);
		if ((rc < 0 && rc != LIBSSH2_ERROR_EAGAIN) || ssh->pending == &op)
			ssh->dead = 1;
		alive = !ssh->dead;
	}
	if (!alive)
		ssh->dead = 1;
	pthread_mutex_unlock(&ssh->mu);
	return alive;
}

/* ---- channels -------------------------------------------------------------------------------- */

/*
 * Open a session channel (mu held on entry and exit). Waits for one of the
 * connection's session slots (kill channels have a reserve); a guest that
 * refuses (MaxSessions reached by someone else) is asked again until the
 * deadline. `stop`, if given, cuts the wait short when it becomes non-zero.
 */
static int channel_open_session(struct ssh_op *op, LIBSSH2_CHANNEL **out, int for_kill, const int *stop)
{
	saas__ssh *ssh = op->ssh;
	unsigned int limit = SSH_SESSIONS + (for_kill ? SSH_SESSIONS_KILL : 0);
	LIBSSH2_CHANNEL *ch = NULL;
	int rc = 0;

	for (;;) {
		if (ssh->dead)
			return ssh_err(LIBSSH2_ERROR_SOCKET_DISCONNECT, "opening a channel");
		if (stop && __atomic_load_n(stop, __ATOMIC_SEQ_CST))
			return saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, 0, "cancelled");
		if (ssh->sessions < limit)
			break;
		if (op->deadline && ms_left(op->deadline) == 0)
			return saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_GUEST, 0, "no free SSH channel in time");
		op_wait(op, SSH_POLL_MS);
	}
	ssh->sessions++;
	for (;;) {
		/* Opens keep their state in the session: one at a time (and never hold mu while waiting for open_mu). */
		pthread_mutex_unlock(&ssh->mu);
		pthread_mutex_lock(&ssh->open_mu);
		pthread_mutex_lock(&ssh->mu);
		SSH_LOOP_PTR(op, ch, rc, libssh2_channel_open_session(ssh->session));
		pthread_mutex_unlock(&ssh->open_mu);
		if (rc != LIBSSH2_ERROR_CHANNEL_FAILURE || (op->deadline && ms_left(op->deadline) == 0) ||
		    (stop && __atomic_load_n(stop, __ATOMIC_SEQ_CST)))
			break;
		pthread_mutex_unlock(&ssh->mu);
		sleep_ms(50);
		pthread_mutex_lock(&ssh->mu);
	}
	if (!ch) {
		ssh->sessions--;
		wake_all(ssh);
		if (rc == LIBSSH2_ERROR_TIMEOUT && !ssh->dead)
			return saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_GUEST, rc, "opening a channel timed out");
		return ssh_err(rc, "opening a channel");
	}
	*out = ch;
	return SAAS_OK;
}

/*
 * Close and free a channel (mu held). Waits a little for the guest's close; if
 * it does not come, the channel is left to the session's teardown rather than
 * holding the caller.
 */
static void channel_release(struct ssh_op *op, LIBSSH2_CHANNEL *ch, int session_slot)
{
	saas__ssh *ssh = op->ssh;
	int64_t saved = op->deadline;
	int rc;

	op->deadline = saas__now_ms() + SSH_CLOSE_TIMEOUT_MS;
	SSH_LOOP(op, rc, libssh2_channel_free(ch));
	(void)rc;
	op->deadline = saved;
	if (session_slot) {
		ssh->sessions--;
		wake_all(ssh);
	}
}

static void shell_quote(saas__buf *b, const char *s)
{
	saas__buf_puts(b, "'");
	for (; *s; s++) {
		if (*s == '\'')
			saas__buf_puts(b, "'\\''");
		else
			saas__buf_put(b, s, 1);
	}
	saas__buf_puts(b, "'");
}

/*
 * Run a short housekeeping command (mu held) as is, with no wrapper. Its
 * stdout goes to out (when not NULL; cut at outsize - 1 bytes, NUL-ended),
 * stderr is dropped, and *exit_code gets its exit status (-1 if none came).
 */
static int run_quick(saas__ssh *ssh, const char *command, int timeout_ms, char *out, size_t outsize, int *exit_code)
{
	struct ssh_op op = { ssh, saas__now_ms() + timeout_ms };
	LIBSSH2_CHANNEL *ch = NULL;
	size_t used = 0;
	char buf[256];
	int rc, lrc;

	if (out && outsize)
		out[0] = '\0';
	if (exit_code)
		*exit_code = -1;
	if ((rc = channel_open_session(&op, &ch, 1, NULL)) < 0)
		return rc;
	SSH_LOOP(&op, lrc, libssh2_channel_process_startup(ch, "exec", 4, command, (unsigned int)strlen(command)));
	if (lrc < 0) {
		rc = ssh_err(lrc, "running a command");
		goto out;
	}
	SSH_LOOP(&op, lrc, libssh2_channel_send_eof(ch));
	for (;;) {
		ssize_t n;
		SSH_LOOP(&op, n, libssh2_channel_read_ex(ch, 0, buf, sizeof(buf)));
		if (n > 0) {
			if (out && outsize) {
				size_t take = (size_t)n < outsize - 1 - used ? (size_t)n : outsize - 1 - used;
				memcpy(out + used, buf, take);
				used += take;
				out[used] = '\0';
			}
			continue;
		}
		SSH_LOOP(&op, n, libssh2_channel_read_ex(ch, SSH_EXTENDED_DATA_STDERR, buf, sizeof(buf)));
		if (n > 0)
			continue;
		if (n < 0) {
			rc = ssh_err((int)n, "reading a command's output");
			goto out;
		}
		if (libssh2_channel_eof(ch))
			break;
	}
	rc = SAAS_OK;
out:
	if (rc == SAAS_OK && exit_code) {
		/* The exit status may trail the EOF: wait for the close that carries it. */
		SSH_LOOP(&op, lrc, libssh2_channel_wait_closed(ch));
		*exit_code = libssh2_channel_get_exit_status(ch);
	}
	channel_release(&op, ch, 1);
	return rc;
}

int saas__ssh_run(saas__ssh *ssh, const char *command, int timeout_ms, char *out, size_t outsize, int *exit_code)
{
	int rc;

	pthread_mutex_lock(&ssh->mu);
	rc = run_quick(ssh, command, timeout_ms, out, outsize, exit_code);
	pthread_mutex_unlock(&ssh->mu);
	return rc;
}

/* ---- exec ------------------------------------------------------------------------------------ */

static int signal_number(const char *name)
{
	static const struct { const char *name; int num; } sigs[] = {
		{ "HUP", 1 }, { "INT", 2 }, { "QUIT", 3 }, { "ILL", 4 }, { "TRAP", 5 }, { "ABRT", 6 },
		{ "BUS", 7 }, { "FPE", 8 }, { "KILL", 9 }, { "USR1", 10 }, { "SEGV", 11 }, { "USR2", 12 },
		{ "PIPE", 13 }, { "ALRM", 14 }, { "TERM", 15 }, { "XCPU", 24 }, { "XFSZ", 25 }, { "SYS", 31 },
	};

	if (!strncmp(name, "SIG", 3))
		name += 3;
	for (size_t i = 0; i < SAAS_ARRAY_SIZE(sigs); i++)
		if (!strcmp(sigs[i].name, name))
			return sigs[i].num;
	return 0;
}

/*
 * The remote command, run by the user's login shell (POSIX): a wrapper that
 * reports its PID (the process group: OpenSSH starts every session in a new
 * session, so the shell leads its own group and everything the command
 * starts stays in it), enters cwd, exports env, evaluates the command and
 * reports its exit status from an EXIT trap before exiting with it.
 */
static const struct {
	const char *name;
	int num;
} wrapper_signals[] = { { "HUP", 1 }, { "INT", 2 }, { "QUIT", 3 }, { "USR1", 10 }, { "USR2", 12 },
                        { "PIPE", 13 }, { "ALRM", 14 }, { "TERM", 15 } };

static int build_command(saas__buf *out, const saas_driver_exec *req, const char *token)
{
	saas__buf w = SAAS__BUF_INIT;
	int rc = SAAS_OK;

	saas__buf_printf(&w, "printf '\\036aas-%s:pid=%%d\\036' $$ >&2; cd -- ", token);
	shell_quote(&w, req->cwd);
	saas__buf_puts(&w, " || exit 126; ");
	if (req->env)
		for (const char *const *e = req->env; *e; e++) {
			saas__buf_puts(&w, "export ");
			shell_quote(&w, *e);
			saas__buf_puts(&w, "; ");
		}
	/*
	 * The command runs in the wrapper's own shell (eval), not a child
	 * /bin/sh: under TCG every fork and exec in the guest costs milliseconds,
	 * and this one bought nothing. The EXIT trap reports the status however
	 * the command ends, `exit N` included; the signal traps keep what a shell
	 * killed by a catchable signal would report (128+N), whichever shell runs
	 * it. SIGKILL cannot be trapped: then no marker comes and the exit signal
	 * does.
	 */
	saas__buf_printf(&w, "trap 's=$?; printf '\\''\\036aas-%s:exit=%%d\\036'\\'' $s >&2; exit $s' EXIT; ", token);
	for (size_t i = 0; i < SAAS_ARRAY_SIZE(wrapper_signals); i++)
		saas__buf_printf(&w, "trap 'exit %d' %s; ", 128 + wrapper_signals[i].num, wrapper_signals[i].name);
	saas__buf_puts(&w, "eval ");
	shell_quote(&w, req->command);
	/*
	 * sshd hands this to the user's login shell, which the guest contract says
	 * is a POSIX shell; going through it directly saves an exec in the guest.
	 */
	if (w.data)
		saas__buf_put(out, w.data, w.len);
	if (!w.data || !out->data)
		rc = saas__oom();
	saas__buf_free(&w);
	return rc;
}

enum exec_call { CALL_NONE, CALL_WRITE, CALL_EOF, CALL_READ_OUT, CALL_READ_ERR };

struct exec_run {
	struct ssh_op op;
	LIBSSH2_CHANNEL *ch;
	const saas_driver_exec *req;
	size_t in_off;
	int in_done;              /* stdin written (or abandoned) */
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
		size_t len = x->req->stdin_len - x->in_off;
		n = libssh2_channel_write_ex(x->ch, 0, (const char *)x->req->stdin_data + x->in_off,
		                             len > SSH_CHUNK ? SSH_CHUNK : len);
		break;
	}
	case CALL_EOF: n = libssh2_channel_send_eof(x->ch); break;
	case CALL_READ_OUT: n = libssh2_channel_read_ex(x->ch, 0, x->out, sizeof(x->out)); break;
	case CALL_READ_ERR: n = libssh2_channel_read_ex(x->ch, SSH_EXTENDED_DATA_STDERR, x->err, sizeof(x->err)); break;
	case CALL_NONE: break;
	}
	call_leave(&x->op, sn, (int)n);
	return n;
}

/* Apply the result of a call; returns 1 if it made progress. */
static int exec_result(struct exec_run *x, enum exec_call what, ssize_t n)
{
	switch (what) {
	case CALL_WRITE:
		if (n > 0) {
			x->in_off += (size_t)n;
			if (x->in_off >= x->req->stdin_len)
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
		if ((what == CALL_WRITE && x->in_done) || (what == CALL_EOF && (!x->in_done || x->eof_sent)))
			continue;
		progress |= exec_result(x, what, exec_call(x, what));
		if (ssh->pending == &x->op || ssh->dead)
			break;
	}
	return progress;
}

/* Kill the command's process group from a second channel (mu held). */
static void exec_kill(saas__ssh *ssh, long pid)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "kill -KILL -- -%ld 2>/dev/null || kill -KILL %ld 2>/dev/null; exit 0", pid, pid);
	run_quick(ssh, cmd, 10000, NULL, 0, NULL);
}

int saas__ssh_exec(saas__ssh *ssh, const saas_driver_exec *req, int *exit_code)
{
	struct exec_run *x = NULL;
	saas__marker_filter mf;
	saas__buf cmd = SAAS__BUF_INIT, errbuf = SAAS__BUF_INIT;
	unsigned char rnd[8];
	char token[17];
	int64_t start = saas__now_ms(), deadline = req->timeout_ms > 0 ? start + req->timeout_ms : 0;
	int64_t exit_at = 0, last_data = start, eof_at = 0, stop_at = 0;
	int rc, lrc, stop = 0; /* stop: SAAS_ETIMEOUT or SAAS_EIO once we decided to kill */
	int have_slot = 0;

	*exit_code = -1;
	if (__atomic_load_n(req->cancel, __ATOMIC_SEQ_CST))
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, 0, "cancelled: the engine is shutting down");
	if ((rc = saas__random(rnd, sizeof(rnd))) < 0)
		return rc;
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(token + 2 * i, 3, "%02x", rnd[i]);
	if ((rc = saas__marker_init(&mf, token)) < 0)
		return rc;
	if ((rc = build_command(&cmd, req, token)) < 0)
		return rc;
	if (!(x = calloc(1, sizeof(*x)))) {
		rc = saas__oom();
		goto out_nolock;
	}
	x->op.ssh = ssh;
	x->req = req;
	x->in_done = req->stdin_len == 0 || !req->stdin_data;

	pthread_mutex_lock(&ssh->mu);
	x->op.deadline = deadline ? deadline : saas__now_ms() + SSH_CALL_TIMEOUT_MS;
	if ((rc = channel_open_session(&x->op, &x->ch, 0, req->cancel)) < 0) {
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
			rc = ssh_err(lrc, "starting the command");
		goto out;
	}
	x->op.deadline = 0; /* from here on the loop below keeps time itself */

	for (;;) {
		int progress;
		int64_t now;

		if (ssh->dead) {
			rc = ssh_err(LIBSSH2_ERROR_SOCKET_DISCONNECT, "running the command");
			goto out;
		}
		progress = exec_pass(x);
		if (x->nout || x->nerr) {
			ssize_t nout = x->nout, nerr = x->nerr;
			/* Deliver without the lock: the consumer must not stall the connection. */
			pthread_mutex_unlock(&ssh->mu);
			if (nout)
				req->output(req->output_userdata, SAAS_STREAM_STDOUT, x->out, (size_t)nout);
			if (nerr) {
				errbuf.len = 0;
				saas__marker_feed(&mf, x->err, (size_t)nerr, &errbuf);
				if (errbuf.len)
					req->output(req->output_userdata, SAAS_STREAM_STDERR, errbuf.data, errbuf.len);
			}
			pthread_mutex_lock(&ssh->mu);
			last_data = saas__now_ms();
		}
		now = saas__now_ms();
		if (mf.exit_seen && !exit_at)
			exit_at = now;

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
			if (mf.exit_seen) {
				/* Output written before the exit may still trail the marker: drain to EOF or a quiet spell. */
				if (eof || (!progress && now - last_data >= SSH_EXIT_QUIET_MS) || now - exit_at >= SSH_EXIT_MAX_MS)
					break;
			} else if (eof) {
				/* No marker (the wrapper itself failed or was killed): the exit status comes with the close. */
				int c;
				struct call_snap sn = call_enter(&x->op);
				c = libssh2_channel_wait_closed(x->ch);
				call_leave(&x->op, sn, c);
				if (c != LIBSSH2_ERROR_EAGAIN || now - eof_at >= SSH_EXIT_MAX_MS)
					break;
			}
		}
		if (!progress) {
			int64_t wait = SSH_POLL_MS;
			if (deadline && deadline - now < wait)
				wait = deadline - now;
			op_wait(&x->op, (int)wait);
		}
	}

	if (stop) {
		rc = stop == SAAS_ETIMEOUT
		             ? saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_GUEST, 0, "the command ran past its timeout of %lld ms and was killed",
		                           (long long)req->timeout_ms)
		             : saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, 0, "cancelled: the engine is shutting down");
		goto out;
	}
	errbuf.len = 0;
	saas__marker_flush(&mf, &errbuf);
	if (errbuf.len) {
		pthread_mutex_unlock(&ssh->mu);
		req->output(req->output_userdata, SAAS_STREAM_STDERR, errbuf.data, errbuf.len);
		pthread_mutex_lock(&ssh->mu);
	}
	if (mf.exit_seen) {
		*exit_code = mf.exit_code;
	} else {
		char *sig = NULL;
		libssh2_channel_get_exit_signal(x->ch, &sig, NULL, NULL, NULL, NULL, NULL);
		if (sig) {
			*exit_code = 128 + signal_number(sig);
			libssh2_free(ssh->session, sig);
		} else {
			*exit_code = libssh2_channel_get_exit_status(x->ch);
		}
	}
	rc = SAAS_OK;
out:
	if (x && x->ch)
		channel_release(&x->op, x->ch, have_slot);
	pthread_mutex_unlock(&ssh->mu);
out_nolock:
	free(x);
	saas__buf_free(&cmd);
	saas__buf_free(&errbuf);
	return rc;
}

/* ---- files (SFTP) ---------------------------------------------------------------------------- */

/* Each SFTP request gets SSH_CALL_TIMEOUT_MS of its own: a large file takes many. */
#define SFTP_LOOP(op, rc, expr)                                                  \
	do {                                                                         \
		(op)->deadline = saas__now_ms() + SSH_CALL_TIMEOUT_MS;                   \
		SSH_LOOP(op, rc, expr);                                                  \
	} while (0)
#define SFTP_LOOP_PTR(op, ptr, rc, expr)                                         \
	do {                                                                         \
		(op)->deadline = saas__now_ms() + SSH_CALL_TIMEOUT_MS;                   \
		SSH_LOOP_PTR(op, ptr, rc, expr);                                         \
	} while (0)

/* The connection's SFTP subsystem, started on first use (sftp_mu and mu held). */
static int sftp_get(struct ssh_op *op, LIBSSH2_SFTP **out)
{
	saas__ssh *ssh = op->ssh;
	LIBSSH2_SFTP *sftp = NULL;
	int rc;

	if (ssh->sftp) {
		*out = ssh->sftp;
		return SAAS_OK;
	}
	/* It occupies a session channel for the connection's lifetime. */
	ssh->sessions++;
	pthread_mutex_unlock(&ssh->mu);
	pthread_mutex_lock(&ssh->open_mu);
	pthread_mutex_lock(&ssh->mu);
	SFTP_LOOP_PTR(op, sftp, rc, libssh2_sftp_init(ssh->session));
	pthread_mutex_unlock(&ssh->open_mu);
	if (!sftp) {
		ssh->sessions--;
		return ssh_err(rc, "starting SFTP");
	}
	*out = ssh->sftp = sftp;
	return SAAS_OK;
}

/*
 * An SFTP failure as a saas error (mu held, right after the call). The guest's
 * sftp-server (OpenSSH's) sends ENOENT and ENOTDIR as NO_SUCH_FILE, EACCES and
 * EPERM as PERMISSION_DENIED, ENAMETOOLONG and EINVAL as BAD_MESSAGE: each is
 * the caller's mistake and says so, never a server failure.
 */
static int sftp_fail(struct ssh_op *op, int rc, const char *what, const char *path)
{
	unsigned long fx;

	if (rc != LIBSSH2_ERROR_SFTP_PROTOCOL)
		return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, rc, "%s %s: %s", what, path, ssh_strerror(rc));
	fx = libssh2_sftp_last_error(op->ssh->sftp);
	switch (fx) {
	case LIBSSH2_FX_NO_SUCH_FILE:
	case LIBSSH2_FX_NO_SUCH_PATH:
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_GUEST, (long)fx, "%s %s: no such file or directory", what, path);
	case LIBSSH2_FX_PERMISSION_DENIED:
	case LIBSSH2_FX_WRITE_PROTECT:
		return saas__error(SAAS_EPERM, SAAS_ERRCLASS_GUEST, (long)fx, "%s %s: permission denied", what, path);
	case LIBSSH2_FX_BAD_MESSAGE:
		return saas__error(SAAS_EINVAL, SAAS_ERRCLASS_GUEST, (long)fx,
		                   "%s %s: the guest refused the path (a name too long, or invalid)", what, path);
	case LIBSSH2_FX_NO_SPACE_ON_FILESYSTEM:
	case LIBSSH2_FX_QUOTA_EXCEEDED:
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, (long)fx, "%s %s: no space left on the sandbox's disk",
		                   what, path);
	case 24: /* SSH_FX_FILE_IS_A_DIRECTORY (v6), which libssh2 1.10 does not name */
		return saas__error(SAAS_EISDIR, SAAS_ERRCLASS_GUEST, (long)fx, "%s %s: is a directory", what, path);
	case LIBSSH2_FX_NOT_A_DIRECTORY:
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_GUEST, (long)fx, "%s %s: a parent is not a directory",
		                   what, path);
	default:
		return saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, (long)fx, "%s %s failed (SFTP status %lu)", what, path, fx);
	}
}

static int sftp_stat(struct ssh_op *op, const char *path, int follow, LIBSSH2_SFTP_ATTRIBUTES *attrs)
{
	int rc;

	memset(attrs, 0, sizeof(*attrs));
	SFTP_LOOP(op, rc,
	          libssh2_sftp_stat_ex(op->ssh->sftp, path, (unsigned int)strlen(path),
	                               follow ? LIBSSH2_SFTP_STAT : LIBSSH2_SFTP_LSTAT, attrs));
	return rc;
}

static int attrs_is_dir(const LIBSSH2_SFTP_ATTRIBUTES *a)
{
	return (a->flags & LIBSSH2_SFTP_ATTR_PERMISSIONS) && LIBSSH2_SFTP_S_ISDIR(a->permissions);
}

/* mkdir -p over SFTP, 0755 (sftp_mu and mu held). */
static int sftp_mkdir_p(struct ssh_op *op, char *dir)
{
	LIBSSH2_SFTP_ATTRIBUTES a;
	char *slash;
	int rc;

	if (!*dir || !strcmp(dir, "/"))
		return SAAS_OK;
	if ((rc = sftp_stat(op, dir, 1, &a)) == 0) {
		if (attrs_is_dir(&a))
			return SAAS_OK;
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_GUEST, 0, "creating %s: it is a file, not a directory", dir);
	}
	if (rc != LIBSSH2_ERROR_SFTP_PROTOCOL || libssh2_sftp_last_error(op->ssh->sftp) != LIBSSH2_FX_NO_SUCH_FILE)
		return sftp_fail(op, rc, "looking at", dir);
	if ((slash = strrchr(dir, '/')) && slash != dir) {
		*slash = '\0';
		rc = sftp_mkdir_p(op, dir);
		*slash = '/';
		if (rc < 0)
			return rc;
	}
	SFTP_LOOP(op, rc, libssh2_sftp_mkdir_ex(op->ssh->sftp, dir, (unsigned int)strlen(dir), 0755));
	if (rc < 0) {
		int err = sftp_fail(op, rc, "creating directory", dir);
		/* Someone else made it meanwhile: fine. */
		if (sftp_stat(op, dir, 1, &a) == 0 && attrs_is_dir(&a)) {
			saas__error_clear();
			return SAAS_OK;
		}
		return err;
	}
	return SAAS_OK;
}

static void sftp_unlink(struct ssh_op *op, const char *path)
{
	int rc;

	SFTP_LOOP(op, rc, libssh2_sftp_unlink_ex(op->ssh->sftp, path, (unsigned int)strlen(path)));
	(void)rc;
}

static void sftp_close_handle(struct ssh_op *op, LIBSSH2_SFTP_HANDLE *h)
{
	int rc;

	if (op->ssh->dead) {
		/*
		 * Nothing reaches the guest any more, but libssh2 frees a handle only
		 * in its close call (not in the SFTP shutdown), which on a dead
		 * connection fails at once and frees it all the same.
		 */
		struct call_snap sn = call_enter(op);
		rc = libssh2_sftp_close_handle(h);
		call_leave(op, sn, rc);
		return;
	}
	SFTP_LOOP(op, rc, libssh2_sftp_close_handle(h));
	(void)rc;
}

int saas__ssh_file_write(saas__ssh *ssh, const char *path, unsigned int mode, saas_read_fn reader, void *ud,
                         int64_t size)
{
	struct ssh_op op = { ssh, 0 };
	LIBSSH2_SFTP *sftp;
	LIBSSH2_SFTP_HANDLE *h = NULL;
	LIBSSH2_SFTP_ATTRIBUTES a;
	saas__buf tmp = SAAS__BUF_INIT;
	char *dir = NULL, *buf = NULL, *slash;
	unsigned char rnd[8];
	int rc, lrc, created = 0;

	(void)size; /* the reader's end is what counts */
	if (!path || path[0] != '/')
		return saas__inval("the path must be absolute");
	if (!(dir = saas__strdup(path)) || !(buf = malloc(SSH_FILE_CHUNK))) {
		free(dir);
		return saas__oom();
	}
	slash = strrchr(dir, '/');
	slash[slash == dir ? 1 : 0] = '\0';
	if ((rc = saas__random(rnd, sizeof(rnd))) < 0)
		goto out_nolock;
	/* A temporary name in the same directory, renamed over the target at the end: no partial file is ever seen. */
	saas__buf_printf(&tmp, "%s/.aas-tmp-", strcmp(dir, "/") ? dir : "");
	for (size_t i = 0; i < sizeof(rnd); i++)
		saas__buf_printf(&tmp, "%02x", rnd[i]);
	if (!tmp.data) {
		rc = saas__oom();
		goto out_nolock;
	}

	pthread_mutex_lock(&ssh->sftp_mu);
	pthread_mutex_lock(&ssh->mu);
	if ((rc = sftp_get(&op, &sftp)) < 0)
		goto out;
	if ((lrc = sftp_stat(&op, path, 1, &a)) == 0 && attrs_is_dir(&a)) {
		rc = saas__error(SAAS_EISDIR, SAAS_ERRCLASS_GUEST, 0, "%s is a directory", path);
		goto out;
	}
	if ((rc = sftp_mkdir_p(&op, dir)) < 0)
		goto out;
	SFTP_LOOP_PTR(&op, h, lrc,
	              libssh2_sftp_open_ex(sftp, tmp.data, (unsigned int)tmp.len,
	                                   LIBSSH2_FXF_WRITE | LIBSSH2_FXF_CREAT | LIBSSH2_FXF_EXCL | LIBSSH2_FXF_TRUNC,
	                                   0600, LIBSSH2_SFTP_OPENFILE));
	if (!h) {
		rc = sftp_fail(&op, lrc, "writing", path);
		goto out;
	}
	created = 1;
	for (;;) {
		long n;
		size_t off = 0;

		/* The reader may be slow (a client upload): don't hold the connection meanwhile. */
		pthread_mutex_unlock(&ssh->mu);
		n = reader(ud, buf, SSH_FILE_CHUNK);
		pthread_mutex_lock(&ssh->mu);
		if (n < 0) {
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, n, "writing %s: the data source failed", path);
			goto out;
		}
		if (n == 0)
			break;
		if ((size_t)n > SSH_FILE_CHUNK)
			n = SSH_FILE_CHUNK;
		while (off < (size_t)n) {
			ssize_t w;
			/* libssh2 pipelines the write; it acknowledges a part, the rest comes again next call. */
			SFTP_LOOP(&op, w, libssh2_sftp_write(h, buf + off, (size_t)n - off));
			if (w < 0) {
				rc = sftp_fail(&op, (int)w, "writing", path);
				goto out;
			}
			off += (size_t)w;
		}
	}
	memset(&a, 0, sizeof(a));
	a.flags = LIBSSH2_SFTP_ATTR_PERMISSIONS;
	a.permissions = mode & 07777;
	/* Set after creation: the server's umask applied to the open. */
	SFTP_LOOP(&op, lrc, libssh2_sftp_fstat_ex(h, &a, 1));
	if (lrc < 0) {
		rc = sftp_fail(&op, lrc, "setting the mode of", path);
		goto out;
	}
	SFTP_LOOP(&op, lrc, libssh2_sftp_close_handle(h));
	h = NULL;
	if (lrc < 0) {
		rc = sftp_fail(&op, lrc, "writing", path);
		goto out;
	}
	/*
	 * SFTP v3's rename refuses an existing target and libssh2 1.10 has no
	 * posix-rename@openssh.com: unlink first. Only a failure in between
	 * could leave the path missing, never half-written.
	 */
	sftp_unlink(&op, path);
	SFTP_LOOP(&op, lrc,
	          libssh2_sftp_rename_ex(sftp, tmp.data, (unsigned int)tmp.len, path, (unsigned int)strlen(path),
	                                 LIBSSH2_SFTP_RENAME_OVERWRITE | LIBSSH2_SFTP_RENAME_ATOMIC |
	                                         LIBSSH2_SFTP_RENAME_NATIVE));
	if (lrc < 0) {
		rc = sftp_fail(&op, lrc, "writing", path);
		goto out;
	}
	created = 0;
	rc = SAAS_OK;
out:
	if (h)
		sftp_close_handle(&op, h);
	if (created && !ssh->dead)
		sftp_unlink(&op, tmp.data);
	pthread_mutex_unlock(&ssh->mu);
	pthread_mutex_unlock(&ssh->sftp_mu);
out_nolock:
	saas__buf_free(&tmp);
	free(dir);
	free(buf);
	return rc;
}

int saas__ssh_file_read(saas__ssh *ssh, const char *path, int64_t max, saas_write_fn writer, void *ud,
                        int64_t *size)
{
	struct ssh_op op = { ssh, 0 };
	LIBSSH2_SFTP *sftp;
	LIBSSH2_SFTP_HANDLE *h = NULL;
	LIBSSH2_SFTP_ATTRIBUTES a;
	char *buf = malloc(SSH_FILE_CHUNK);
	int64_t left;
	int rc, lrc;

	if (!buf)
		return saas__oom();
	pthread_mutex_lock(&ssh->sftp_mu);
	pthread_mutex_lock(&ssh->mu);
	if ((rc = sftp_get(&op, &sftp)) < 0)
		goto out;
	if ((lrc = sftp_stat(&op, path, 1, &a)) < 0) {
		rc = sftp_fail(&op, lrc, "reading", path);
		goto out;
	}
	if (attrs_is_dir(&a)) {
		rc = saas__error(SAAS_EISDIR, SAAS_ERRCLASS_GUEST, 0, "%s is a directory", path);
		goto out;
	}
	left = (a.flags & LIBSSH2_SFTP_ATTR_SIZE) ? (int64_t)a.filesize : 0;
	if (max > 0 && left > max) {
		rc = saas__error(SAAS_ETOOBIG, SAAS_ERRCLASS_GUEST, 0, "%s is %lld bytes, more than %lld", path,
		                 (long long)left, (long long)max);
		goto out;
	}
	if (size)
		*size = left;
	SFTP_LOOP_PTR(&op, h, lrc,
	              libssh2_sftp_open_ex(sftp, path, (unsigned int)strlen(path), LIBSSH2_FXF_READ, 0,
	                                   LIBSSH2_SFTP_OPENFILE));
	if (!h) {
		rc = sftp_fail(&op, lrc, "reading", path);
		goto out;
	}
	/* Deliver exactly the size announced, even if the file grows meanwhile. */
	while (left > 0) {
		ssize_t n;
		int stop;
		SFTP_LOOP(&op, n, libssh2_sftp_read(h, buf, left < SSH_FILE_CHUNK ? (size_t)left : SSH_FILE_CHUNK));
		if (n < 0) {
			rc = sftp_fail(&op, (int)n, "reading", path);
			goto out;
		}
		if (n == 0) {
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, 0, "reading %s: the file shrank while being read", path);
			goto out;
		}
		left -= n;
		pthread_mutex_unlock(&ssh->mu);
		stop = writer(ud, buf, (size_t)n);
		pthread_mutex_lock(&ssh->mu);
		if (stop) {
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, stop, "reading %s: the receiver stopped", path);
			goto out;
		}
	}
	rc = SAAS_OK;
out:
	if (h)
		sftp_close_handle(&op, h);
	pthread_mutex_unlock(&ssh->mu);
	pthread_mutex_unlock(&ssh->sftp_mu);
	free(buf);
	return rc;
}

struct dirent_rec {
	char *name;
	LIBSSH2_SFTP_ATTRIBUTES attrs;
};

static int dirent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct dirent_rec *)a)->name, ((const struct dirent_rec *)b)->name);
}

static void entry_from_attrs(saas_file_entry *e, const LIBSSH2_SFTP_ATTRIBUTES *a)
{
	unsigned long fmt = a->permissions & LIBSSH2_SFTP_S_IFMT;

	e->type = fmt == LIBSSH2_SFTP_S_IFREG   ? SAAS_FILE_REGULAR
	          : fmt == LIBSSH2_SFTP_S_IFDIR ? SAAS_FILE_DIRECTORY
	          : fmt == LIBSSH2_SFTP_S_IFLNK ? SAAS_FILE_SYMLINK
	                                        : SAAS_FILE_OTHER;
	e->size = (a->flags & LIBSSH2_SFTP_ATTR_SIZE) ? (int64_t)a->filesize : 0;
	e->mode = (unsigned int)(a->permissions & 07777);
	e->mtime_ms = (a->flags & LIBSSH2_SFTP_ATTR_ACMODTIME) ? (int64_t)a->mtime * 1000 : 0;
}

/* Emit an entry without holding mu. Returns the callback's verdict. */
static int emit_entry(struct ssh_op *op, saas_entry_fn fn, void *ud, const char *path,
                      const LIBSSH2_SFTP_ATTRIBUTES *a)
{
	saas_file_entry e;
	int stop;

	memset(&e, 0, sizeof(e));
	e.path = (char *)path;
	entry_from_attrs(&e, a);
	pthread_mutex_unlock(&op->ssh->mu);
	stop = fn(ud, &e);
	pthread_mutex_lock(&op->ssh->mu);
	return stop;
}

/* One listing's walk: where entries go, how deep, and how many more may be read. */
struct list_walk {
	struct ssh_op *op;
	unsigned int max_depth;
	saas_entry_fn fn;
	void *ud;
	size_t left;              /* entries still allowed into host memory; 0: the walk reads no more */
};

/*
 * One directory, depth first (sftp_mu and mu held). Returns SAAS_OK, 1 when
 * the callback stopped the walk, or an error. Unreadable directories below
 * the top are skipped. A directory is read whole before any of it is emitted
 * (entries come sorted), so the walk's budget is what bounds the memory a
 * guest with a huge directory can make the host spend: once it is spent,
 * reading stops and what was read is still emitted, in order.
 */
static int list_dir(struct list_walk *w, const char *dir, unsigned int level)
{
	struct ssh_op *op = w->op;
	LIBSSH2_SFTP_HANDLE *h = NULL;
	struct dirent_rec *ents = NULL;
	size_t n = 0, cap = 0;
	char name[1024];
	saas__buf child = SAAS__BUF_INIT;
	int rc, lrc;

	if (!w->left)
		return SAAS_OK;
	SFTP_LOOP_PTR(op, h, lrc,
	              libssh2_sftp_open_ex(op->ssh->sftp, dir, (unsigned int)strlen(dir), 0, 0, LIBSSH2_SFTP_OPENDIR));
	if (!h) {
		if (level > 1 && lrc == LIBSSH2_ERROR_SFTP_PROTOCOL)
			return SAAS_OK;
		return sftp_fail(op, lrc, "listing", dir);
	}
	while (w->left) {
		LIBSSH2_SFTP_ATTRIBUTES a;
		ssize_t len;

		memset(&a, 0, sizeof(a));
		SFTP_LOOP(op, len, libssh2_sftp_readdir(h, name, sizeof(name) - 1, &a));
		if (len < 0) {
			rc = sftp_fail(op, (int)len, "listing", dir);
			goto out;
		}
		if (len == 0)
			break;
		name[len] = '\0';
		if (!strcmp(name, ".") || !strcmp(name, ".."))
			continue;
		if ((rc = SAAS__ARRAY_RESERVE(ents, cap, n + 1)) < 0)
			goto out;
		if (!(ents[n].name = strdup(name))) {
			rc = saas__oom();
			goto out;
		}
		ents[n++].attrs = a;
		w->left--;
	}
	/* Close before descending: a deep tree must not pile up open handles. */
	sftp_close_handle(op, h);
	h = NULL;
	if (n)
		qsort(ents, n, sizeof(*ents), dirent_cmp);
	rc = SAAS_OK;
	for (size_t i = 0; i < n; i++) {
		child.len = 0;
		saas__buf_printf(&child, "%s/%s", strcmp(dir, "/") ? dir : "", ents[i].name);
		if (!child.data) {
			rc = saas__oom();
			goto out;
		}
		if (emit_entry(op, w->fn, w->ud, child.data, &ents[i].attrs)) {
			rc = 1;
			goto out;
		}
		if (level < w->max_depth && (ents[i].attrs.flags & LIBSSH2_SFTP_ATTR_PERMISSIONS) &&
		    LIBSSH2_SFTP_S_ISDIR(ents[i].attrs.permissions)) {
			if ((rc = list_dir(w, child.data, level + 1)) != SAAS_OK)
				goto out;
		}
	}
out:
	if (h)
		sftp_close_handle(op, h);
	for (size_t i = 0; i < n; i++)
		free(ents[i].name);
	free(ents);
	saas__buf_free(&child);
	return rc;
}

int saas__ssh_file_list(saas__ssh *ssh, const char *path, unsigned int max_depth, unsigned int max_entries,
                        saas_entry_fn fn, void *ud)
{
	struct ssh_op op = { ssh, 0 };
	struct list_walk w = { &op, max_depth ? max_depth : 1, fn, ud, max_entries };
	LIBSSH2_SFTP *sftp;
	LIBSSH2_SFTP_ATTRIBUTES a;
	char *root = NULL;
	size_t len;
	int rc, lrc;

	if (!path || path[0] != '/')
		return saas__inval("the path must be absolute");
	if (!max_entries)
		return saas__inval("a listing needs room for one entry at least");
	if (!(root = saas__strdup(path)))
		return SAAS_ENOMEM;
	/* "/workspace/" lists as "/workspace": children get exactly one slash. */
	for (len = strlen(root); len > 1 && root[len - 1] == '/'; len--)
		root[len - 1] = '\0';
	pthread_mutex_lock(&ssh->sftp_mu);
	pthread_mutex_lock(&ssh->mu);
	if ((rc = sftp_get(&op, &sftp)) < 0)
		goto out;
	if ((lrc = sftp_stat(&op, root, 1, &a)) < 0 && (lrc = sftp_stat(&op, root, 0, &a)) < 0) {
		rc = sftp_fail(&op, lrc, "listing", root);
		goto out;
	}
	if (attrs_is_dir(&a)) {
		rc = list_dir(&w, root, 1);
	} else {
		/* A file lists as itself; a symlink as the link. */
		if ((lrc = sftp_stat(&op, root, 0, &a)) < 0) {
			rc = sftp_fail(&op, lrc, "listing", root);
			goto out;
		}
		rc = emit_entry(&op, fn, ud, root, &a) ? 1 : SAAS_OK;
	}
	if (rc == 1)
		rc = SAAS_OK;
out:
	pthread_mutex_unlock(&ssh->mu);
	pthread_mutex_unlock(&ssh->sftp_mu);
	free(root);
	return rc;
}

/* ---- tunnels --------------------------------------------------------------------------------- */

enum pump_call { PCALL_NONE, PCALL_WRITE, PCALL_EOF, PCALL_READ };

struct pump {
	struct pump *next;
	struct ssh_op op;
	LIBSSH2_CHANNEL *ch;
	int fd;                   /* our end of the socketpair */
	pthread_t tid;
	int done;                 /* the thread has finished and can be joined */
	enum pump_call last;
	char up[SSH_CHUNK], down[SSH_CHUNK];
	size_t up_len, up_off, down_len, down_off;
};

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
	case PCALL_NONE: break;
	}
	call_leave(&p->op, sn, (int)n);
	return n;
}

static void *pump_main(void *arg)
{
	struct pump *p = arg;
	saas__ssh *ssh = p->op.ssh;
	int local_eof = 0, eof_sent = 0, remote_eof = 0, shut_wr = 0, broken = 0;

	while (!broken) {
		int progress = 0;
		struct pollfd pf[2];
		ssize_t n;

		pthread_mutex_lock(&ssh->mu);
		if (ssh->closing || ssh->dead) {
			pthread_mutex_unlock(&ssh->mu);
			break;
		}
		if (op_may_call(&p->op)) {
			enum pump_call todo[3];
			size_t k = 0;
			if (ssh->pending == &p->op) {
				todo[k++] = p->last;
			} else {
				if (p->up_off < p->up_len)
					todo[k++] = PCALL_WRITE;
				else if (local_eof && !eof_sent)
					todo[k++] = PCALL_EOF;
				if (!p->down_len && !remote_eof)
					todo[k++] = PCALL_READ;
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
		if (remote_eof && !p->down_len && !shut_wr) {
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
		if (local_eof && eof_sent && remote_eof && !p->down_len)
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
		channel_release(&p->op, p->ch, 0);
	p->ch = NULL;
	close(p->fd);
	p->fd = -1;
	p->done = 1;
	pthread_mutex_unlock(&ssh->mu);
	return NULL;
}

/* Take finished pumps off the list (mu held); the caller joins and frees them without it. */
static struct pump *pumps_take(saas__ssh *ssh, int all)
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

static void pumps_join(struct pump *list)
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
	finished = pumps_take(ssh, 0);
	pthread_mutex_unlock(&ssh->mu);
	pumps_join(finished);

	pthread_mutex_lock(&ssh->open_mu);
	pthread_mutex_lock(&ssh->mu);
	p->op.deadline = saas__now_ms() + SSH_CALL_TIMEOUT_MS;
	SSH_LOOP_PTR(&p->op, p->ch, lrc, libssh2_channel_direct_tcpip_ex(ssh->session, "127.0.0.1", (int)port, "127.0.0.1", 0));
	pthread_mutex_unlock(&ssh->open_mu);
	if (!p->ch) {
		rc = lrc == LIBSSH2_ERROR_CHANNEL_FAILURE
		             ? saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, lrc, "nothing listens on port %u in the sandbox", port)
		             : ssh_err(lrc, "opening a tunnel");
		goto fail;
	}
	p->fd = sv[1];
	if ((rc = pthread_create(&p->tid, NULL, pump_main, p)) != 0) {
		rc = saas__error(SAAS_ENOMEM, SAAS_ERRCLASS_OS, rc, "cannot start a tunnel thread");
		channel_release(&p->op, p->ch, 0);
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

saas__ssh *saas__ssh_ref(saas__ssh *ssh)
{
	if (ssh)
		__atomic_add_fetch(&ssh->refs, 1, __ATOMIC_RELAXED);
	return ssh;
}

void saas__ssh_close(saas__ssh *ssh)
{
	struct pump *all;

	/* Acquire-release: every use made through another reference happens before the free. */
	if (!ssh || __atomic_sub_fetch(&ssh->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	pthread_mutex_lock(&ssh->mu);
	ssh->closing = 1;
	wake_all(ssh);
	all = pumps_take(ssh, 1);
	pthread_mutex_unlock(&ssh->mu);
	pumps_join(all);
	ssh_free(ssh);
}
