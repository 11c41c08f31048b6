/*
 * Internal: the control port, a guest transport beside SSH: the engine's end
 * of the protocol (control_proto.h) that images/guest/aas-control.c serves
 * in the guest. The fix-ups of a restored clone (control.c), files
 * (control_files.c), commands (control_exec.c) and port connections
 * (control_conn.c). No libvirt here: the
 * port is a socket in the VM's directory (vmdir.h), or a connection the
 * driver opens (a remote host's, struct saas__ctl_way). Every byte the guest
 * sends is read as hostile input (tests/unit/test_control.c,
 * tests/fuzz/fuzz_control.c).
 */
#ifndef SAAS_TRANSPORT_CONTROL_H
#define SAAS_TRANSPORT_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "saas/files.h"
#include "saas/sys/driver.h"
#include "transport/control_proto.h"

/* The host end: a socket QEMU listens on, in the VM's directory. */
#define CONTROL_SOCKET "ctl"
#define CONTROL_REPLY_MAX 256      /* what the engine reads back, at most */
#define CONTROL_SAID_MAX 120       /* of a guest's words, what goes into an error message */
/*
 * How long the engine waits for the guest's answer before it does the
 * fix-ups over SSH instead. The helper answers in milliseconds once the
 * restored guest runs; this is for a guest that lost it.
 */
#define CONTROL_TIMEOUT_MS 15000

/* Can a socket in vmdir be bound (its path fits a sockaddr_un)? */
bool saas__ctl_fits(const char *vmdir);

/*
 * The request line for hostname, the time now and seed_hex, with its '\n',
 * into out (cap bytes): its length, or SAAS_EINVAL when it is longer than
 * CONTROL_LINE_MAX. Pure.
 */
int saas__ctl_request(char *out, size_t cap, const char *nonce, const char *hostname,
                      const struct timespec *now, const char *seed_hex);

/*
 * The guest's reply, len bytes at buf (one line with its '\n'): SAAS_OK when
 * it is exactly "ok NONCE"; SAAS_EBACKEND otherwise, the message quoting the
 * guest's reason or words in printable ASCII, at most CONTROL_SAID_MAX bytes.
 * Pure; reads nothing past len.
 */
int saas__ctl_reply(const char *buf, size_t len, const char *nonce);

/*
 * The answer to the fix-ups of nonce in what the guest sent so far, len bytes
 * at buf: 1 with *rc saas__ctl_reply's verdict once it is there, 0 while it
 * may still come. Stale bytes may come first: a command's output frame that
 * the helper had under way when the VM was paused reaches the next
 * connection (the resume's fix-ups) before the helper reads the request
 * line (which then detaches the command). So the answer is a line that
 * names this nonce ("ok NONCE", "error NONCE ..."), wherever it is (output
 * cannot hold a nonce chosen now), or the helper's refusal of a line it
 * could not read ("error - ...") where nothing came before it (at_start:
 * buf holds the stream from its first byte). Pure; reads nothing past len.
 */
int saas__ctl_fixup_answer(const char *buf, size_t len, const char *nonce, bool at_start, int *rc);

/* The guest's words, n bytes at s, for an error message: printable ASCII only, at most cap - 1 bytes. */
void saas__ctl_printable(char *out, size_t cap, const char *s, size_t n);

/* A fresh nonce: CONTROL_NONCE_LEN lowercase hex digits. */
int saas__ctl_nonce(char nonce[CONTROL_NONCE_LEN + 1]);

/* Whose listener the engine talks to on a control port (saas__ctl_peer_check). */
struct saas__ctl_peer_want {
	unsigned int self_uid; /* the engine's euid and pid: libvirt embedded in it made the socket */
	pid_t self_pid;
	unsigned int vm_uid;   /* the VM's QEMU's uid (0: it has none of its own), and its pid (0: not known) */
	pid_t qemu_pid;
};

struct ucred;
/*
 * Is peer (SO_PEERCRED of a control port connection) a listener the engine
 * may send to: the VM's own QEMU (want->vm_uid, and want->qemu_pid when not
 * 0), root or libvirt in this process; anyone when the VM has no uid of its
 * own (want->vm_uid 0)? SAAS_OK, or SAAS_EIO naming the uid and pid refused
 * (another VM's QEMU). Pure.
 */
int saas__ctl_peer_check(const struct ucred *peer, const struct saas__ctl_peer_want *want);

/*
 * A non-blocking connection to the control port of the VM in vmdir, in *fd:
 * SAAS_OK, SAAS_ENOTSUP (the directory is too long for a socket) or SAAS_EIO
 * (no socket there, QEMU does not take connections, the directory is not
 * the engine's alone, or the listener is not libvirt's nor the VM's).
 */
int saas__ctl_connect(const char *vmdir, int *fd);

/*
 * How the engine reaches a VM's control port: the socket in its directory
 * vmdir (saas__ctl_connect, the VM's QEMU on this machine), or, when open
 * is set, the connection open(ud, &fd) makes: a non-blocking stream socket
 * carrying the same bytes (a remote host's port, through libvirt), SAAS_OK
 * or an error saying why not. Either way what comes back is the guest's.
 * ready, if set, is told (ready(ready_ud)) once a command saas__ctl_exec
 * sent runs in the guest (its "ready"), before any of its frames: a driver
 * starts its other commands after it (guest.c).
 */
struct saas__ctl_way {
	const char *vmdir;
	int (*open)(void *ud, int *fd);
	void *ud;
	void (*ready)(void *ready_ud);
	void *ready_ud;
};
/* The way to the socket in dir. */
#define SAAS__CTL_DIR(dir) (&(const struct saas__ctl_way){ .vmdir = (dir) })
/* A connection by way, in *fd (non-blocking): SAAS_OK, or saas__ctl_connect's errors (open's, for a driver's). */
int saas__ctl_open(const struct saas__ctl_way *way, int *fd);

/*
 * The fix-ups of the restored VM reached by way, over its control
 * port: connect, send the request, read the answer, all within timeout_ms.
 * SAAS_OK once the guest said it applied them; SAAS_EIO (no connection, the
 * port closed), SAAS_ETIMEOUT (no answer: stale bytes and anything that is
 * not an answer are passed over, saas__ctl_fixup_answer), SAAS_EBACKEND
 * (refused) otherwise, and the caller does them over SSH instead.
 */
int saas__ctl_fixup(const struct saas__ctl_way *way, const char *hostname, const char *seed_hex, int timeout_ms);

/*
 * Files over the control port (control_files.c): the bulk path, with no SSH
 * and no cipher in the guest. The guest's helper does each transfer as the
 * sandbox user, with SFTP's semantics; both ends check the bytes' XXH64.
 */
/* How long the engine waits for the guest to move anything (an answer, a frame) before it gives up. */
#define CONTROL_FILES_IDLE_MS 60000
/*
 * The whole of an operation's waiting on the guest, whatever arrives on the
 * way: CONTROL_GUEST_GRACE_MS, plus a second for each CONTROL_GUEST_MIN_RATE
 * bytes moved either way. A guest that trickles (a byte now and then, each
 * under the idle bound) is given up once its grace is spent; a transfer that
 * moves its bytes is never cut short. Time spent in the caller's reader or
 * writer (a slow client of the server) is not the guest's and does not count.
 */
#define CONTROL_GUEST_GRACE_MS 60000
#define CONTROL_GUEST_MIN_RATE (256 * 1024)

/* What one line of the guest's says during a transfer. */
enum files_said { FILES_SAID_READY, FILES_SAID_OK, FILES_SAID_SIZE, FILES_SAID_ERROR };

struct files_reply {
	int kind;                      /* enum files_said */
	int64_t size;                  /* FILES_SAID_SIZE: the file's bytes */
	char digest[17];               /* FILES_SAID_OK after a get: the XXH64, 16 lowercase hex digits; else "" */
	int err;                       /* FILES_SAID_ERROR: the guest's errno (0: it gave none) */
	char what[CONTROL_SAID_MAX + 1]; /* FILES_SAID_ERROR: its words, printable ASCII */
};

/*
 * One line of the guest's, len bytes at buf with its '\n' last: SAAS_OK and
 * *out when it is a well-formed answer to nonce (any of enum files_said);
 * SAAS_EBACKEND otherwise, quoting the guest's words. Pure; reads nothing
 * past len.
 */
int saas__ctl_files_reply(const char *buf, size_t len, const char *nonce, struct files_reply *out);

/*
 * The saas error for a guest's errno while doing `verb` ("writing",
 * "reading") to path, as SFTP's status codes map: ENOENT is SAAS_ENOTFOUND,
 * EACCES SAAS_EPERM, EISDIR SAAS_EISDIR, a refused path SAAS_EINVAL, a full
 * disk and the rest SAAS_EIO. Pure.
 */
int saas__ctl_files_error(int err, const char *what, const char *verb, const char *path);

/*
 * A VM's connection to its port for files, kept between transfers (each
 * connection and disconnection reaches the guest out of order with the
 * data, so the engine makes few): NULL until the first transfer, closed with
 * saas__ctl_close when the VM goes.
 */
struct saas__ctl {
	int fd;                        /* non-blocking */
	/*
	 * The operation under way (each sets these when it starts): every wait on
	 * the guest ends by `deadline` (monotonic ms, 0: none) and at `cancel`
	 * (non-zero: stop; NULL: never), and all of them together within the
	 * guest's budget (CONTROL_GUEST_GRACE_MS, `grace_ms` here so that a test
	 * can shorten it, plus `moved` / CONTROL_GUEST_MIN_RATE seconds).
	 */
	int64_t deadline;
	const int *cancel;
	int64_t grace_ms, waited_ms, moved;
	size_t off, len;               /* buf[off, len): read, not yet taken */
	char buf[64 * 1024];
};
/* Start an operation on c: nothing waited or moved yet, its deadline and cancel flag (either may be 0/NULL). */
void saas__ctl_begin(struct saas__ctl *c, int64_t deadline, const int *cancel);
void saas__ctl_close(struct saas__ctl *c);

/*
 * The connection's parts that commands share with files: the VM's connection,
 * opened (and asked whether the helper serves files, or brought back to the
 * start of a request when it was lost in a stream) when *ctl is NULL:
 * SAAS_ENOTSUP, with *serves -1, when the port cannot be used (left as it
 * is when a driver's way->open failed: its driver asks again or not). Then all of
 * iov sent, and one line of the guest's read and parsed (both waiting at
 * most CONTROL_FILES_IDLE_MS for the guest to move, and within the
 * operation's bounds: SAAS_ETIMEOUT past its deadline or the guest's budget,
 * SAAS_EIO, "cancelled", at its cancel flag).
 */
int saas__ctl_get(struct saas__ctl **ctl, const struct saas__ctl_way *way, int *serves);
struct iovec;
int saas__ctl_send(struct saas__ctl *c, struct iovec *iov, int n);
int saas__ctl_line(struct saas__ctl *c, const char *nonce, struct files_reply *out);
void saas__ctl_be32_put(unsigned char *p, uint32_t v);
uint32_t saas__ctl_be32_get(const unsigned char *p);

/*
 * Write path in the guest of the VM reached by way from reader (SFTP's
 * saas__ssh_file_write, over the port), or read it into writer, at most
 * max bytes when max > 0 (SFTP's saas__ssh_file_read), over *ctl (opened
 * when NULL; closed and NULL again when the stream was lost). *serves is the
 * VM's answer to "does your helper serve files": 0 not asked yet (asked, and
 * set), 1 yes, -1 no. SAAS_ENOTSUP, before the reader or writer was ever
 * called, when the port cannot be used (no socket, a helper that predates
 * files, no answer): the caller uses SFTP. The caller serialises calls per
 * VM (the port takes one connection at a time). A transfer ends, lost, with
 * SAAS_EIO once *cancel (atomic, may be NULL) is set: the driver's close.
 */
int saas__ctl_files_write(struct saas__ctl **ctl, const struct saas__ctl_way *way, int *serves, const char *path,
                          unsigned int mode, saas_read_fn reader, void *ud, const int *cancel);
int saas__ctl_files_read(struct saas__ctl **ctl, const struct saas__ctl_way *way, int *serves, const char *path, int64_t max,
                         saas_write_fn writer, void *ud, int64_t *size, const int *cancel);

/*
 * Commands over the control port (control_exec.c): a clone's first commands,
 * before the engine's SSH session is up, with no login on the create's
 * critical path.
 */
/* After END, how long the engine waits for the guest's DONE before it gives the connection up. */
#define CONTROL_EXEC_END_MS 15000

/*
 * What the guest sends during a command, read as hostile bytes: the frame
 * being read, the stdin window and the end. Zeroed before the first byte.
 */
struct saas__ctl_xread {
	unsigned int rtype;            /* CTL_X_OUT or CTL_X_ERR: the frame whose bytes are coming */
	size_t rleft;                  /* its bytes still to come (0: a header is next) */
	size_t ahead;                  /* stdin sent (the engine adds), not yet taken by the command */
	bool end_sent;                 /* the engine sent END (it sets this): a DONE may come */
	bool exited, done;             /* the guest said EXIT (status), DONE */
	int status;
};

/*
 * Take frames from len bytes at buf: output to output(ud, ...) as it comes,
 * TOOK given back to the window, EXIT and DONE noted. Returns how many bytes
 * it used (a header or a 4-byte word cut short waits for more; nothing after
 * DONE is taken), or SAAS_EIO for a stream that breaks the protocol (a type
 * unknown, a frame past its bound, more stdin taken than sent, a second
 * status, a DONE before END). Pure but for output; tests/fuzz/fuzz_control.c.
 */
long saas__ctl_exec_take(struct saas__ctl_xread *r, const char *buf, size_t len, saas_output_fn output, void *ud);

/*
 * Run req as saas__ssh_exec would (the same script, its status, its
 * timeout, cancel, input and signals), over *ctl (opened when NULL; closed
 * and NULL again when the stream was lost). *serves is as for files;
 * *execs the VM's answer to "does your helper run commands": 0 not asked
 * (asked, and set), 1 yes, -1 no; and once a plain command came
 * (saas__exec_plain), to "and with no shell": 2 yes, 3 no. SAAS_ENOTSUP, before anything of the
 * command happened in the guest, when the port cannot run it (no socket, a
 * helper that predates commands, a script longer than the protocol
 * allows): the caller runs it over SSH. The caller serialises the port's
 * users per VM.
 */
int saas__ctl_exec(struct saas__ctl **ctl, const struct saas__ctl_way *way, int *serves, int *execs,
                   const saas_driver_exec *req, int *exit_code);

/*
 * Ask once per VM whether its helper serves `verb` ("exec", "connect": the
 * request with 0, control_proto.h), within the operation's bounds
 * (saas__ctl_begin): SAAS_OK and *known 1 (yes), SAAS_ENOTSUP and *known -1
 * (a helper that predates them; `what` names them in the error), or the
 * connection's error (*known left as it is: asked again next time).
 */
int saas__ctl_probe(struct saas__ctl *c, const char *verb, int *known, const char *what);
/* Send buf[*off, len) as far as the non-blocking fd takes it now, *off moved on: SAAS_OK, or SAAS_EIO. */
int saas__ctl_send_now(int fd, const void *buf, size_t *off, size_t len);

/*
 * Port connections over the control port (control_conn.c): a clone's first
 * connections to a guest port, before the engine's SSH session is up.
 *
 * saas__ctl_conn_open asks the guest of the VM reached by way to connect to
 * its 127.0.0.1:port, over *ctl (opened when NULL; closed and NULL again
 * when the stream was lost), *serves as for files, *conns the VM's answer
 * to "does your helper open connections" (0 not asked: asked, and set; 1
 * yes; -1 no). SAAS_OK: the connection is open and *ctl carries it; call
 * saas__ctl_conn_pump next. SAAS_ENOTSUP when the port cannot (no socket, a
 * helper that predates connections): the caller goes over SSH. Otherwise
 * SAAS_EBACKEND (nothing listens there: "nothing listens on port N in the
 * sandbox", as over SSH; the guest's errno in the error), SAAS_ETIMEOUT (no
 * answer within CONTROL_CONNECT_MS and CONTROL_TIMEOUT_MS), SAAS_EIO (the
 * port lost, *cancel set).
 *
 * saas__ctl_conn_pump then carries the connection between fd (the caller's
 * socket pair's other end, which it neither shuts nor closes) and the guest
 * until one side ends it: fd's close (POLLHUP) closes the guest's
 * connection, its half-close half-closes it, the guest's side ending its
 * bytes ends it all once fd took what came before, and so does *cancel
 * (atomic, may be NULL). SAAS_OK, with *ctl ready for the next request; or
 * an error with *ctl closed and NULL. The caller serialises the port's users
 * per VM: a connection holds the port until it ends.
 */
int saas__ctl_conn_open(struct saas__ctl **ctl, const struct saas__ctl_way *way, int *serves, int *conns,
                        unsigned int port, const int *cancel);
int saas__ctl_conn_pump(struct saas__ctl **ctl, int fd, const int *cancel);

#endif
