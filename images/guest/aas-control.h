/*
 * aas-control's protocol and its pure parts (aas-control.c): the request
 * parser and the line reader, which tests/unit/test_control.c drives with
 * the engine's side (lib/driver/libvirt/control.h, whose constants must
 * match these: the test checks).
 */
#ifndef AAS_CONTROL_H
#define AAS_CONTROL_H

#include <stdbool.h>
#include <stddef.h>

#define AAS_CONTROL_PORT_NAME "org.libsaas.control.0"
#define AAS_CONTROL_LINE_MAX 256       /* a request line, '\n' included; a longer one is refused whole */
#define AAS_CONTROL_HOSTNAME_MAX 63
#define AAS_CONTROL_NONCE_LEN 16
#define AAS_CONTROL_SEED_MIN 32        /* hex digits: 16 bytes at least, 64 at most */
#define AAS_CONTROL_SEED_MAX 128
#define AAS_CONTROL_RATE_MAX 8         /* requests served per second; more wait for the next second */

struct aas_fixup {
	char nonce[AAS_CONTROL_NONCE_LEN + 1];
	char hostname[AAS_CONTROL_HOSTNAME_MAX + 1];
	long long seconds;
	long nanos;
	unsigned char seed[AAS_CONTROL_SEED_MAX / 2];
	size_t seed_len;
};

/*
 * A request line (without its '\n'), n bytes at line: "fixup NONCE HOSTNAME
 * SECONDS[.NANOS] HEX_SEED", one space between words. 0, or -1 with *why
 * saying what is wrong (and out->nonce set when the nonce itself was well
 * formed, for the answer).
 */
int aas_control_parse(const char *line, size_t n, struct aas_fixup *out, const char **why);

/*
 * Files over the port (the bulk path: no SSH, no guest-side cipher). After a
 * request line the bytes are binary, framed:
 *   engine: files NONCE                       guest: ok NONCE       (the helper serves files)
 *   engine: put NONCE MODE PATHLEN\n PATH      guest: ready NONCE   or error NONCE ERRNO WHAT
 *           frames..., a 0 frame, the data's XXH64 (8 bytes, big-endian)
 *                                             guest: ok NONCE      or error NONCE ERRNO WHAT
 *   engine: get NONCE MAX PATHLEN\n PATH       guest: size NONCE N  or error NONCE ERRNO WHAT
 *           guest: frames of the file's N bytes, then a 0 frame and ok NONCE HEX_XXH64,
 *                  or an abort frame and error NONCE ERRNO WHAT; nothing when N > MAX > 0
 * A frame is a 4-byte big-endian length (1 to AAS_FILES_FRAME_MAX) and that
 * many bytes; 0 ends the data, AAS_FILES_FRAME_ABORT gives it up. MODE is 1
 * to 4 octal digits (at most 07777), MAX 1 to 18 decimal digits (0: no
 * bound), PATHLEN 1 to AAS_FILES_PATH_MAX, PATH absolute with no NUL. ERRNO
 * is the guest's errno in decimal. XXH64 (lib/util/xxh64.h, seed 0) checks
 * the bytes: a put is renamed over its target only when the guest's hash of
 * what it received is the engine's, a get is taken only when the engine's
 * is the guest's. The guest does the work as the sandbox user, exactly as
 * its SFTP would: a put creates the missing directories (0755), writes a
 * temporary file beside the target and renames it over the target.
 */
#define AAS_FILES_PATH_MAX 4096
#define AAS_FILES_FRAME_MAX (1024 * 1024)
#define AAS_FILES_FRAME_ABORT 0xffffffffu
#define AAS_FILES_USER "sandbox"

/*
 * Commands over the port (a clone's first commands, before the engine's SSH
 * session is up: no login on a create's critical path):
 *   engine: exec NONCE 0                  guest: ok NONCE      (the helper serves commands)
 *   engine: exec NONCE LEN\n SCRIPT       guest: ready NONCE   or error NONCE ERRNO WHAT
 * (a helper that predates commands answers the probe "error - not a request",
 * and is never sent a script: it would read it as request lines).
 * SCRIPT (1 to AAS_EXEC_SCRIPT_MAX bytes, no NUL) runs as `SHELL -c SCRIPT`
 * by the sandbox user's login shell, in its home, in a session of its own,
 * with the environment sshd gives a command; "ready" once the shell runs.
 * Then frames both ways until the command's end, each a 4-byte big-endian
 * header, the frame's type in its top byte and its length (0 to
 * AAS_EXEC_FRAME_MAX) in the low 24 bits, then that many bytes:
 *   engine: IN (stdin bytes; never more outstanding than AAS_EXEC_WINDOW),
 *           EOF (end of stdin), SIGNAL (2 bytes: the number, 1 for the
 *           process group or 0 for the shell), KILL (the command and all it
 *           started), END (a 0 header: the engine is done with it; anything
 *           still running is killed)
 *   guest:  OUT, ERR (output), TOOK (4 bytes: stdin bytes the command took,
 *           given back to the window), EXIT (4 bytes: the shell's status,
 *           128+N for signal N, once it and its output are done), DONE
 *           (after END: the port takes requests again)
 * A header of an unknown type or an overlong frame ends the exec as END
 * does: a stream of zeros (the engine's resynchronisation, control_files.c)
 * ends one wherever it is.
 */
#define AAS_EXEC_SCRIPT_MAX (1024 * 1024)
#define AAS_EXEC_FRAME_MAX (64 * 1024)
#define AAS_EXEC_WINDOW (256 * 1024)
enum aas_exec_to_guest { AAS_X_END = 0, AAS_X_IN = 1, AAS_X_EOF = 2, AAS_X_SIGNAL = 3, AAS_X_KILL = 4 };
enum aas_exec_to_engine { AAS_X_OUT = 1, AAS_X_ERR = 2, AAS_X_TOOK = 3, AAS_X_EXIT = 4, AAS_X_DONE = 5 };
/* sshd's PATH for a user's command (Debian's OpenSSH), which a command over the port gets too. */
#define AAS_EXEC_PATH "/usr/local/bin:/usr/bin:/bin:/usr/games"

enum aas_request { AAS_REQ_FIXUP, AAS_REQ_FILES, AAS_REQ_PUT, AAS_REQ_GET, AAS_REQ_EXEC };

struct aas_file_req {
	int kind;                      /* AAS_REQ_FILES, _PUT, _GET or _EXEC */
	char nonce[AAS_CONTROL_NONCE_LEN + 1];
	unsigned int mode;             /* put */
	long long max;                 /* get: the most bytes the engine takes (0: any) */
	size_t path_len;               /* put, get: the path's length; exec: the script's */
};

/* Which request a line is (by its first word): enum aas_request, or -1. */
int aas_request_kind(const char *line, size_t n);

/*
 * A files, put, get or exec line (without its '\n'): 0, or -1 with *why saying what
 * is wrong (out->nonce set when the nonce itself was well formed).
 */
int aas_files_parse(const char *line, size_t n, struct aas_file_req *out, const char **why);

/*
 * The line reader: bytes in, whole lines out. A line longer than
 * AAS_CONTROL_LINE_MAX - 1 bytes is dropped whole (reported once, as
 * overlong), never cut into requests.
 */
struct aas_lines {
	char buf[AAS_CONTROL_LINE_MAX];
	size_t len;
	bool overlong;                 /* dropping the rest of a line too long */
};

/*
 * Feed n bytes; for each complete line, fn(line, len, overlong, ud). Returns
 * how many bytes were consumed: all of them, unless fn returned non-zero (then
 * the bytes after that line are left for the next call).
 */
size_t aas_lines_feed(struct aas_lines *r, const char *b, size_t n,
                      int (*fn)(const char *line, size_t len, bool overlong, void *ud), void *ud);

/* Forget a half line: one from a host that went away is no request. */
void aas_lines_reset(struct aas_lines *r);

#endif
