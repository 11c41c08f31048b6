/*
 * libsaas: a terminal in a sandbox, as `ssh` gives one.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef SAAS_PTY_H
#define SAAS_PTY_H

#include "common.h"

SAAS_BEGIN_DECLS

/** Terminal size when the options give none. */
#define SAAS_PTY_COLS_DEFAULT 80
#define SAAS_PTY_ROWS_DEFAULT 24
/** Largest terminal size accepted, each way. */
#define SAAS_PTY_SIZE_MAX 4096
/** Longest TERM value, in bytes. */
#define SAAS_PTY_TERM_MAX 64

/** Version of saas_pty_options this header describes (2: cwd and env). */
#define SAAS_PTY_OPTIONS_VERSION 2

/**
 * Options for saas_pty_open(). Initialise with SAAS_PTY_OPTIONS_INIT.
 *
 * Since: 0.2.0
 */
typedef struct saas_pty_options {
	unsigned int version;    /**< SAAS_PTY_OPTIONS_VERSION */
	const char *term;        /**< TERM for the shell: letters, digits, '-', '.', '+', '_'; NULL: "xterm-256color". */
	unsigned int cols;       /**< 0: SAAS_PTY_COLS_DEFAULT. 1 to SAAS_PTY_SIZE_MAX. */
	unsigned int rows;       /**< 0: SAAS_PTY_ROWS_DEFAULT. 1 to SAAS_PTY_SIZE_MAX. */
	/**
	 * Since version 2: the shell's working directory, as saas_exec_options.cwd
	 * (a relative path is under /workspace); NULL: the user's home, as `ssh`
	 * gives. A directory the shell cannot enter ends it at once with status 126.
	 */
	const char *cwd;
	/**
	 * Since version 2: NULL-terminated "NAME=VALUE" strings added to the
	 * shell's environment, with saas_exec_options.env's bounds; they win over
	 * the sandbox's own (saas_create_options.envs), which a terminal gets as a
	 * command does. NULL: none. With cwd or env, the login profile runs
	 * first (/etc/profile, ~/.profile), then the shell enters cwd and sets
	 * env, so neither is undone by a profile.
	 */
	const char *const *env;
} saas_pty_options;

#define SAAS_PTY_OPTIONS_INIT { SAAS_PTY_OPTIONS_VERSION, NULL, 0, 0, NULL, NULL }

/**
 * No terminal: the shell reads a pipe (end-of-input ends it, as `ssh` does
 * when its stdin is not a terminal) and its stderr is merged into the output.
 */
#define SAAS_PTY_NOTTY (1u << 0)

/**
 * A terminal session: the sandbox user's login shell on a pseudo-terminal.
 * One thread at a time may use it, but a reader and a writer may be two
 * threads (saas_pty_read() and saas_pty_write() touch nothing in common).
 *
 * Since: 0.2.0
 */
typedef struct saas_pty saas_pty;

/**
 * Start the sandbox user's login shell on a new pseudo-terminal, as `ssh`
 * does. The session lives until the shell exits or saas_pty_close().
 *
 * @param out      [out] the session; end it with saas_pty_close().
 * @param options  options or NULL.
 * @param flags    SAAS_PTY_NOTTY or 0.
 * @return SAAS_OK; SAAS_EINVAL; SAAS_ENOTFOUND; SAAS_ESTATE (not ready); SAAS_ELIMIT (too many
 *         sessions, remote); SAAS_EBACKEND (the guest could not be reached); SAAS_ENOTSUP (the driver
 *         has no terminals, or none with cwd or env: a driver table older than version 12);
 *         SAAS_ENETWORK, SAAS_EPROTOCOL (remote); SAAS_ENOMEM.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_pty_open(saas_pty **out, saas_client *client, const char *sandbox_id,
                               const saas_pty_options *options, unsigned int flags);

/**
 * A descriptor to poll(2) for POLLIN: readable when saas_pty_read() has
 * output or the end to give. Owned by the session; never read, write or
 * close it yourself.
 *
 * @return the descriptor, or -1 if pty is NULL.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_pty_fd(const saas_pty *pty);

/**
 * Read the terminal's output.
 *
 * @param got        [out] bytes read; 0 with SAAS_OK once the shell ended and all its output was read.
 * @param timeout_ms how long to wait for output: -1 for ever, 0 not at all.
 * @return SAAS_OK; SAAS_ETIMEOUT (nothing within timeout_ms); SAAS_EINVAL; SAAS_EIO.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_pty_read(saas_pty *pty, void *buf, size_t size, size_t *got, int timeout_ms);

/**
 * Send keystrokes (or any bytes) to the terminal; blocks until all are taken,
 * or (saas_pty_set_write_timeout()) until the terminal has taken nothing for
 * that long. A shell that reads no input (busy, or stopped) takes none once
 * the buffers between are full: about 2 MB.
 *
 * @return SAAS_OK; SAAS_EINVAL; SAAS_ESTATE (the shell ended, or end-of-input
 *         was sent); SAAS_ETIMEOUT (no progress within the write timeout: a
 *         part of data may have been taken); SAAS_EIO.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_pty_write(saas_pty *pty, const void *data, size_t len);

/**
 * Bound saas_pty_write(): a write that makes no progress for `timeout_ms`
 * fails with SAAS_ETIMEOUT. 0 (the default) waits for ever. Take the same
 * thread as saas_pty_write()'s, or set it before any write.
 *
 * @return SAAS_OK; SAAS_EINVAL (pty is NULL).
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_pty_set_write_timeout(saas_pty *pty, unsigned int timeout_ms);

/**
 * Send end-of-input. With SAAS_PTY_NOTTY the shell reads EOF and ends once
 * its commands are done; on a terminal, send ^D ("\x04") instead, as a
 * keyboard would. Nothing may be written after.
 *
 * @return SAAS_OK, SAAS_EINVAL, SAAS_EIO.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_pty_send_eof(saas_pty *pty);

/**
 * Tell the terminal its new size (the shell gets SIGWINCH). Input sent
 * after it returns reaches the terminal after the new size (on a local
 * client; through a server, in the order the server receives them).
 *
 * @param cols, rows 1 to SAAS_PTY_SIZE_MAX.
 * @return SAAS_OK; SAAS_EINVAL; SAAS_ESTATE (the shell ended); SAAS_EIO, SAAS_EBACKEND.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(int) saas_pty_resize(saas_pty *pty, unsigned int cols, unsigned int rows);

/**
 * End the session and free it: the shell is hung up on if it still runs.
 * Read to the end first (saas_pty_read() giving 0 bytes) to learn how the
 * shell ended.
 *
 * @param exit_status [out] may be NULL: the shell's exit status, 128+N if a
 *                    signal N ended it, -1 if it did not end by itself or the
 *                    status never came.
 * NULL pty is ignored.
 *
 * Since: 0.2.0
 */
SAAS_EXTERN(void) saas_pty_close(saas_pty *pty, int *exit_status);

SAAS_END_DECLS

#endif
