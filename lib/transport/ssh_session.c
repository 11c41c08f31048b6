/*
 * The guest transport: one libssh2 session per sandbox, shared by every
 * thread that runs a command, moves a file or carries a tunnel into it. This
 * file holds the session (connecting, the host key, the sharing, channels);
 * ssh_exec.c, ssh_sftp.c and ssh_tunnel.c use it through ssh_session.h.
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
#include <time.h>
#include <unistd.h>

#include <libssh2.h>

#include "transport/ssh.h"
#include "transport/ssh_session.h"
#include "util/error.h"
#include "util/util.h"

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

/*
 * Every byte of a command's output and of a file is encrypted and MACed by
 * the guest's sshd, which under TCG runs its crypto on an emulated CPU: the
 * choice of algorithms is a large part of a transfer's cost. libssh2 1.10
 * offers no AEAD cipher, no ETM MAC and no umac; of what it has, AES-CTR uses
 * the AES instructions TCG emulates for the guest, and HMAC-SHA2-512 costs the
 * guest's software SHA about half of what HMAC-SHA2-256 does per byte (64-bit
 * words, 128-byte blocks; measured on the guest's sshd: 16 MiB of output took
 * ~0.4 the user time). Both are in OpenSSH's default lists. Nothing weaker is
 * offered at all: no CBC, no SHA-1 or MD5 MACs.
 */
#define SSH_CIPHERS "aes128-ctr,aes256-ctr,aes192-ctr"
#define SSH_MACS "hmac-sha2-512,hmac-sha2-256"

/* A channel whose close was sent, waiting for the guest's answer (saas__ssh_channel_park). */
struct parked {
	LIBSSH2_CHANNEL *ch;
	int session_slot;
	int64_t deadline;          /* then it is left to the session's teardown, as a release leaves it */
	struct parked *next;
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

const char *saas__ssh_strerror(int rc)
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

int saas__ssh_err(int rc, const char *what)
{
	return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, rc, "%s: %s", what, saas__ssh_strerror(rc));
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

void saas__ssh_call_leave(struct ssh_op *op, struct call_snap sn, int rc)
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
void saas__ssh_op_wait(struct ssh_op *op, int max_ms)
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
int saas__ssh_op_expired(struct ssh_op *op)
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
#define SSH_TEARDOWN(ssh, rc, expr)                                             \
	for (int tries_ = 0; tries_ < 100; tries_++) {                              \
		struct pollfd pf_ = { (ssh)->fd, POLLIN, 0 };                           \
		if (((rc) = (expr)) != LIBSSH2_ERROR_EAGAIN)                            \
			break;                                                              \
		poll(&pf_, 1, 10);                                                      \
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
	/* The session's free freed their channels. */
	while (ssh->parked) {
		struct parked *p = ssh->parked;
		ssh->parked = p->next;
		free(p);
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
	if (libssh2_session_method_pref(ssh->session, LIBSSH2_METHOD_CRYPT_CS, SSH_CIPHERS) < 0 ||
	    libssh2_session_method_pref(ssh->session, LIBSSH2_METHOD_CRYPT_SC, SSH_CIPHERS) < 0 ||
	    libssh2_session_method_pref(ssh->session, LIBSSH2_METHOD_MAC_CS, SSH_MACS) < 0 ||
	    libssh2_session_method_pref(ssh->session, LIBSSH2_METHOD_MAC_SC, SSH_MACS) < 0) {
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, 0, "libssh2 lacks the SSH algorithms the transport uses");
		goto out;
	}
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
	for (int extended = 0;;) {
		const char *banner;
		/* Until an sshd answers, in slices when it may be cancelled: the handshake resumes where it was. */
		bool sliced = !extended && cfg->cancelled && ms_left(deadline) > SSH_CANCEL_SLICE_MS;
		if (!extended)
			op.deadline = sliced ? saas__now_ms() + SSH_CANCEL_SLICE_MS : deadline;
		SSH_LOOP(&op, lrc, libssh2_session_handshake(ssh->session, ssh->fd));
		/*
		 * The caller's deadline is for reaching an sshd. Once its banner came,
		 * the key exchange may finish (a loaded guest is slow, not gone): a
		 * session freed in the middle of one leaks libssh2's exchange state.
		 */
		banner = libssh2_session_banner_get(ssh->session);
		if (lrc == LIBSSH2_ERROR_TIMEOUT && sliced && (!banner || !*banner)) {
			if (cfg->cancelled(cfg->cancelled_ud))
				break;
			continue;
		}
		if (lrc != LIBSSH2_ERROR_TIMEOUT || extended || !banner || !*banner)
			break;
		extended = 1;
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
			rc = lrc == LIBSSH2_ERROR_TIMEOUT || lrc == LIBSSH2_ERROR_KEX_FAILURE ? saas__ssh_err(lrc, "SSH handshake") : 1;
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
		                                      saas__ssh_strerror(lrc));
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
		if (cfg->cancelled && cfg->cancelled(cfg->cancelled_ud))
			return saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, 0, "waiting for SSH on %s:%u: cancelled", cfg->host,
			                   cfg->port);
		if ((rc = open_once(out, cfg, deadline)) <= 0)
			return rc;
		if (ms_left(deadline) <= 0)
			break;
		saas__sleep_ms(ms_left(deadline) < 100 ? (int)ms_left(deadline) : 100);
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
	alive = !ssh->dead && !ssh->retired;
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
		saas__ssh_call_leave(&op, sn, rc);
		if ((rc < 0 && rc != LIBSSH2_ERROR_EAGAIN) || ssh->pending == &op)
			ssh->dead = 1;
		alive = !ssh->dead;
	}
	if (!alive && !ssh->retired)
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
/*
 * Free the parked channels whose close was answered, or whose wait is over
 * (mu held). The list is taken off the session while it is worked through: a
 * call that must finish a half-sent packet lets go of mu, and another thread
 * may park or reap meanwhile.
 */
static void parked_reap(saas__ssh *ssh)
{
	struct parked *list = ssh->parked, *keep = NULL;

	ssh->parked = NULL;
	ssh->nparked = 0;
	while (list) {
		struct parked *p = list;
		/* One try: a deadline already passed stops SSH_LOOP at the first EAGAIN, unless a packet is half-sent. */
		struct ssh_op op = { ssh, saas__now_ms() };
		int rc;

		list = p->next;
		SSH_LOOP(&op, rc, libssh2_channel_free(p->ch));
		if (rc == LIBSSH2_ERROR_TIMEOUT && !ssh->dead && saas__now_ms() < p->deadline) {
			p->next = keep;
			keep = p;
			continue;
		}
		/* Freed; or, the connection gone or the guest silent, left to the teardown. */
		if (p->session_slot) {
			ssh->sessions--;
			wake_all(ssh);
		}
		free(p);
	}
	while (keep) {
		struct parked *p = keep;
		keep = p->next;
		p->next = ssh->parked;
		ssh->parked = p;
		ssh->nparked++;
	}
}

int saas__ssh_channel_open(struct ssh_op *op, LIBSSH2_CHANNEL **out, int for_kill, const int *stop)
{
	saas__ssh *ssh = op->ssh;
	unsigned int limit = SSH_SESSIONS + (for_kill ? SSH_SESSIONS_KILL : 0);
	LIBSSH2_CHANNEL *ch = NULL;
	int rc = 0;

	for (;;) {
		if (ssh->parked)
			parked_reap(ssh);
		if (ssh->dead)
			return saas__ssh_err(LIBSSH2_ERROR_SOCKET_DISCONNECT, "opening a channel");
		if (ssh->retired)
			return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_GUEST, 0,
			                   "opening a channel: the SSH connection takes no more (an open gave up on it)");
		if (stop && __atomic_load_n(stop, __ATOMIC_SEQ_CST))
			return saas__error(SAAS_EIO, SAAS_ERRCLASS_GUEST, 0, "cancelled");
		if (ssh->sessions < limit)
			break;
		if (op->deadline && ms_left(op->deadline) == 0)
			return saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_GUEST, 0, "no free SSH channel in time");
		saas__ssh_op_wait(op, SSH_POLL_MS);
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
		saas__sleep_ms(50);
		pthread_mutex_lock(&ssh->mu);
	}
	if (!ch) {
		ssh->sessions--;
		wake_all(ssh);
		/* Given up half-way (its deadline): libssh2 holds that open's state, so no other open here. */
		if (rc == LIBSSH2_ERROR_TIMEOUT)
			ssh->retired = 1;
		if (rc == LIBSSH2_ERROR_TIMEOUT && !ssh->dead)
			return saas__error(SAAS_ETIMEOUT, SAAS_ERRCLASS_GUEST, rc, "opening a channel timed out");
		return saas__ssh_err(rc, "opening a channel");
	}
	*out = ch;
	return SAAS_OK;
}

/*
 * Close and free a channel (mu held). Waits a little for the guest's close; if
 * it does not come, the channel is left to the session's teardown rather than
 * holding the caller.
 */
void saas__ssh_channel_release(struct ssh_op *op, LIBSSH2_CHANNEL *ch, int session_slot)
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

void saas__ssh_channel_park(struct ssh_op *op, LIBSSH2_CHANNEL *ch, int session_slot)
{
	saas__ssh *ssh = op->ssh;
	int64_t saved = op->deadline;
	struct parked *p;
	int rc;

	if (ssh->dead || ssh->nparked >= SSH_PARKED_MAX || !(p = calloc(1, sizeof(*p)))) {
		saas__ssh_channel_release(op, ch, session_slot);
		return;
	}
	/*
	 * The EOF and close go out now: one try, which SSH_LOOP carries on only
	 * to finish a packet half-sent. If the answer came with it (or another
	 * thread owns the socket's half-sent packet and nothing went out), the
	 * free below or a later reap does the rest.
	 */
	op->deadline = saas__now_ms();
	SSH_LOOP(op, rc, libssh2_channel_close(ch));
	op->deadline = saved;
	if (rc != LIBSSH2_ERROR_TIMEOUT || ssh->dead) {
		/* Answered already (the free does not wait), or the connection failed. */
		free(p);
		saas__ssh_channel_release(op, ch, session_slot);
		return;
	}
	p->ch = ch;
	p->session_slot = session_slot;
	p->deadline = saas__now_ms() + SSH_CLOSE_TIMEOUT_MS;
	p->next = ssh->parked;
	ssh->parked = p;
	ssh->nparked++;
	ssh->parks++;
}

/*
 * Run a short housekeeping command (mu held) as is, with no wrapper. Its
 * stdout goes to out (when not NULL; cut at outsize - 1 bytes, NUL-ended),
 * stderr is dropped, and *exit_code gets its exit status (-1 if none came).
 */
int saas__ssh_run_quick(saas__ssh *ssh, const char *command, int timeout_ms, char *out, size_t outsize, int *exit_code)
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
	if ((rc = saas__ssh_channel_open(&op, &ch, 1, NULL)) < 0)
		return rc;
	SSH_LOOP(&op, lrc, libssh2_channel_process_startup(ch, "exec", 4, command, (unsigned int)strlen(command)));
	if (lrc < 0) {
		rc = saas__ssh_err(lrc, "running a command");
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
			rc = saas__ssh_err((int)n, "reading a command's output");
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
	saas__ssh_channel_release(&op, ch, 1);
	return rc;
}

int saas__ssh_run(saas__ssh *ssh, const char *command, int timeout_ms, char *out, size_t outsize, int *exit_code)
{
	int rc;

	pthread_mutex_lock(&ssh->mu);
	rc = saas__ssh_run_quick(ssh, command, timeout_ms, out, outsize, exit_code);
	pthread_mutex_unlock(&ssh->mu);
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
	all = saas__ssh_pumps_take(ssh, 1);
	pthread_mutex_unlock(&ssh->mu);
	saas__ssh_pumps_join(all);
	ssh_free(ssh);
}


int saas__ssh_signal_number(const char *name)
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
