/*
 * Internal: the guest transport. One SSH connection per sandbox, opened when
 * it becomes ready and reused by every command, file and tunnel after (a new
 * connection costs ~145 ms under TCG, a command on a live one ~17 ms).
 */
#ifndef SAAS_TRANSPORT_SSH_H
#define SAAS_TRANSPORT_SSH_H

#include <stdbool.h>

#include "saas/errors.h"
#include "saas/sys/driver.h"
#include "util/util.h"

typedef struct saas__ssh saas__ssh;

typedef struct {
	const char *host;             /* "127.0.0.1" */
	unsigned int port;
	const char *user;             /* "sandbox" */
	const char *private_key;      /* path of the engine's private key (OpenSSH format, ed25519) */
	const char *public_key;       /* path of its public key */
	/* The guest's host key, pinned: "ssh-ed25519 AAAA..." as in the image manifest. NULL: not checked (tests only). */
	const char *host_key;
	int connect_timeout_ms;       /* whole connect + handshake + auth; <= 0: 10000 */
	/*
	 * Asked between tries and, while no sshd has answered yet, every 250 ms:
	 * non-zero gives up at once, so that a VM being abandoned (the engine
	 * stopping) is not waited for to the end of a long timeout. Once a
	 * banner came the attempt finishes: a key exchange cut short leaks
	 * libssh2's state. NULL: never.
	 */
	int (*cancelled)(void *ud);
	void *cancelled_ud;
} saas__ssh_config;

/* Global libssh2 setup; call once per process before anything else (the engine does). */
int saas__ssh_global_init(void);

/*
 * Connect, check the host key, authenticate. Retries refused connections
 * until connect_timeout_ms passes (a booting guest's sshd may not listen yet).
 * *out holds one reference, the caller's.
 */
int saas__ssh_open(saas__ssh **out, const saas__ssh_config *cfg);

/*
 * A connection is reference-counted: whoever hands it to another thread (the
 * driver, to each operation) takes a reference for that thread while it still
 * holds its own, and every reference is let go with saas__ssh_close. The last
 * one closes the connection, ending its tunnels. Operations on a connection
 * that died fail with SAAS_EBACKEND; the connection stays valid memory until
 * its last holder lets go, however long that holder blocks (on a slow
 * client, say) after the death. Returns ssh.
 */
saas__ssh *saas__ssh_ref(saas__ssh *ssh);
void saas__ssh_close(saas__ssh *ssh);

/*
 * What a failed saas__ssh_open says of the guest, read from its error
 * (saas_error_last() on the same thread; a wrapped message keeps it): the
 * guest's host key is not the pinned one (or it sent none), or the guest
 * refused the engine's key. Either means the guest is not the machine that
 * was expected; nobody answering, a cut connection or a timeout mean neither.
 */
bool saas__ssh_host_key_mismatch(const saas_error *err);
bool saas__ssh_key_refused(const saas_error *err);

/* Is the connection still usable? (A dead one is reopened by the caller.) */
int saas__ssh_alive(saas__ssh *ssh);

/*
 * Run req->command with `/bin/sh -c` in req->cwd with req->env added, feed
 * stdin, stream output to req->output, and return SAAS_OK with *exit_code
 * once the shell exits — even if it left background processes holding its
 * output open (`server &` must return). At req->timeout_ms the command's
 * whole process group is killed and SAAS_ETIMEOUT returned; when *req->cancel
 * becomes non-zero likewise, returning SAAS_EIO. Many execs may run at once
 * on one connection from different threads.
 */
int saas__ssh_exec(saas__ssh *ssh, const saas_driver_exec *req, int *exit_code);

/*
 * The script a command runs as, without the SSH wrapper's markers (for a
 * transport that knows the shell's status itself: the control port's): into
 * req->cwd (or exit 126), req->env exported, the wrapper's signal traps, then
 * `eval COMMAND`. Appended to out; SAAS_OK or SAAS_ENOMEM.
 */
int saas__exec_script(saas__buf *out, const saas_driver_exec *req);

#define SAAS_EXEC_PLAIN_MAX 4096       /* a plain command's length, at most */
#define SAAS_EXEC_PLAIN_ARGS_MAX 256   /* its words */
#define SAAS_EXEC_PLAIN_ENV_MAX 64     /* its variables */

/*
 * Is req a plain command, one the guest can run with no shell (exec_plain.c
 * says which): its words, each with its NUL, appended to words, and their
 * count; 0 (words as it was) when the shell must run it; SAAS_ENOMEM.
 */
int saas__exec_plain(saas__buf *words, const saas_driver_exec *req);

/*
 * Should req go over the VM's control port (when free) rather than its SSH
 * session? Always while the session is down (session_up false); with it up,
 * only a plain command whose VM's helper runs such commands with no shell or
 * was not asked yet (execs as saas__ctl_exec keeps it: 0, 1 or 2): there it
 * costs no SSH channel and no bash start, as a file costs no SFTP session.
 * A VM that booted cold (its session waited for) or whose session came up
 * later keeps its `true`-class commands fast that way. SAAS_ENOMEM as false.
 */
bool saas__exec_port_first(const saas_driver_exec *req, int execs, bool session_up);

/*
 * Into cwd (if not NULL; or exit 126, as a shell that cannot enter it), each
 * of env (NAME=VALUE, names checked by the core) exported, each quoted for a
 * POSIX shell: what a command's script and a terminal's start with. Appended
 * to b; SAAS_OK or SAAS_ENOMEM.
 */
int saas__shell_enter(saas__buf *b, const char *cwd, const char *const *env);

/*
 * Run a short command exactly as given (no wrapper, no cwd, no env, no stdin)
 * and wait for it at most timeout_ms: housekeeping, such as a guest's forced
 * command. Its stdout lands in out (cut at outsize - 1 bytes, NUL-ended; out
 * may be NULL), stderr is dropped, *exit_code (may be NULL) is its exit status.
 */
int saas__ssh_run(saas__ssh *ssh, const char *command, int timeout_ms, char *out, size_t outsize, int *exit_code);

/* SFTP, with the semantics of the driver table's file_write/file_read/file_list. */
int saas__ssh_file_write(saas__ssh *ssh, const char *path, unsigned int mode, saas_read_fn reader, void *ud,
                         int64_t size);
int saas__ssh_file_read(saas__ssh *ssh, const char *path, int64_t max, saas_write_fn writer, void *ud,
                        int64_t *size);
/*
 * The listing reads at most max_entries entries from the guest in all (at
 * least 1), then stops reading and still emits, in order, everything it read.
 * A directory cut short this way gives the entries the guest sent first,
 * sorted by name, not necessarily the first by name.
 */
int saas__ssh_file_list(saas__ssh *ssh, const char *path, unsigned int max_depth, unsigned int max_entries,
                        saas_entry_fn fn, void *ud);
/* SFTP, with the semantics of the driver table's file_mkdir/file_remove/file_rename (version 11). */
int saas__ssh_file_mkdir(saas__ssh *ssh, const char *path, int *created);
int saas__ssh_file_remove(saas__ssh *ssh, const char *path);
int saas__ssh_file_rename(saas__ssh *ssh, const char *from, const char *to, unsigned int flags);

/*
 * A direct-tcpip channel to 127.0.0.1:port inside the guest, bridged to a
 * local stream socket: *fd is the caller's end (close it to end the tunnel).
 */
int saas__ssh_port_connect(saas__ssh *ssh, unsigned int port, int *fd);

/*
 * A terminal (ssh_pty.c), with the semantics of the driver table's pty_open,
 * pty_resize and pty_close. The session holds a reference to the connection.
 */
typedef struct saas__ssh_pty saas__ssh_pty;
int saas__ssh_pty_open(saas__ssh *ssh, const saas_driver_pty *req, int *fd, saas__ssh_pty **out);
int saas__ssh_pty_resize(saas__ssh_pty *pty, unsigned int cols, unsigned int rows);
void saas__ssh_pty_close(saas__ssh_pty *pty, int *exit_status);

#endif
