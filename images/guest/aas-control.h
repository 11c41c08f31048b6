/*
 * aas-control's pure parts (aas-control.c): the request parser and the line
 * reader, which tests/unit/test_control.c drives with the engine's side. The
 * protocol itself is lib/transport/control_proto.h, which both ends include.
 */
#ifndef AAS_CONTROL_H
#define AAS_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "transport/control_proto.h"

#define AAS_CONTROL_RATE_MAX 8         /* requests served per second; more wait for the next second */

struct aas_fixup {
	char nonce[CONTROL_NONCE_LEN + 1];
	char hostname[CONTROL_HOSTNAME_MAX + 1];
	long long seconds;
	long nanos;
	unsigned char seed[CONTROL_SEED_MAX / 2];
	size_t seed_len;
};

/*
 * A request line (without its '\n'), n bytes at line: "fixup NONCE HOSTNAME
 * SECONDS[.NANOS] HEX_SEED", one space between words. 0, or -1 with *why
 * saying what is wrong (and out->nonce set when the nonce itself was well
 * formed, for the answer).
 */
int aas_control_parse(const char *line, size_t n, struct aas_fixup *out, const char **why);

/* Whose files a put or a get touches, and who runs a command. */
#define AAS_FILES_USER "sandbox"

/* sshd's PATH for a user's command (Debian's OpenSSH), which a command over the port gets too. */
#define AAS_EXEC_PATH "/usr/local/bin:/usr/bin:/bin:/usr/games"

enum aas_request { AAS_REQ_FIXUP, AAS_REQ_FILES, AAS_REQ_PUT, AAS_REQ_GET, AAS_REQ_EXEC, AAS_REQ_CONNECT, AAS_REQ_RUN };

struct aas_file_req {
	int kind;                      /* AAS_REQ_FILES, _PUT, _GET, _EXEC or _CONNECT */
	char nonce[CONTROL_NONCE_LEN + 1];
	unsigned int mode;             /* put */
	long long max;                 /* get: the most bytes the engine takes (0: any) */
	size_t path_len;               /* put, get: the path's length; exec: the script's; run: its request's */
	unsigned int port;             /* connect: 127.0.0.1's port (0: the probe) */
};

/* Which request a line is (by its first word): enum aas_request, or -1. */
int aas_request_kind(const char *line, size_t n);

/*
 * A files, put, get, exec or connect line (without its '\n'): 0, or -1 with *why saying what
 * is wrong (out->nonce set when the nonce itself was well formed).
 */
int aas_files_parse(const char *line, size_t n, struct aas_file_req *out, const char **why);

/* A run's request (control_proto.h), its fields pointing into the bytes it was parsed from. */
struct aas_run {
	const char *script;            /* what runs when the shell must */
	const char *cwd;               /* NULL: the user's home */
	const char *env[CONTROL_RUN_ENV_MAX];
	size_t nenv;
	const char *argv[CONTROL_RUN_ARGS_MAX + 1]; /* NULL-terminated */
	size_t argc;
};

/* A run's n bytes at b (b[n] must be readable and is set to NUL): 0, or -1 with *why. */
int aas_run_parse(char *b, size_t n, struct aas_run *out, const char **why);

/*
 * Every signal's disposition back to the default, as sshd's session has
 * them: a command's child calls it before its exec. aas-init starts the
 * helper with `&`, which leaves SIGINT and SIGQUIT ignored, and an ignored
 * signal stays ignored across exec (a shell cannot even trap one it got
 * so): a Ctrl-C would never reach the command.
 */
void aas_signals_default(void);

/*
 * The serve loop's next bytes: carried, when a lost command's stream left
 * that many in buf (nothing read then), or a read of the port into buf; and
 * first, every child of the helper's that ended reaped (a command's shell
 * that outlived its kill, a detached one). errno is the read's: the loop
 * polls on EAGAIN, and takes anything else for a failed port (a second's
 * sleep). A reaping after the read left waitpid's ECHILD there whenever no
 * child was left, which is after every command: the helper slept a second
 * before it read the next request, and every command over the port took a
 * second more.
 */
ssize_t aas_serve_read(int fd, char *buf, size_t cap, size_t carried);

/*
 * What the default image's ~/.bashrc starts with (images/build writes it
 * before Debian's /etc/skel/.bashrc): ~/.local/bin first on PATH.
 */
#define AAS_BASHRC_HEADER                                                                                    \
	"# libsaas: user-installed tools first (pip --user, npm prefix)\n"                                         \
	"case \":$PATH:\" in *\":$HOME/.local/bin:\"*) ;; *) PATH=\"$HOME/.local/bin:$PATH\" ;; esac\n"             \
	"export PATH\n"

/*
 * What sourcing ~/.bashrc (n bytes at rc; NULL: there is none) does to a
 * non-interactive bash, given /etc/skel/.bashrc (sn bytes at skel): 0
 * nothing (none, or Debian's skeleton, which returns at once when not
 * interactive), 1 AAS_BASHRC_HEADER's PATH and nothing else, -1 something
 * only bash can tell.
 */
int aas_bashrc_kind(const char *rc, size_t n, const char *skel, size_t sn);

/* AAS_BASHRC_HEADER's PATH: HOME/.local/bin before path unless it is in it (into out, len bytes). */
void aas_bashrc_path(char *out, size_t len, const char *home, const char *path);

/*
 * The environment bash gives a program it runs (the helper's, then what the
 * script exports): vars (NAME=VALUE, n of them, in the order bash met them:
 * its imported environment first, then PWD, OLDPWD and SHLVL, then the
 * exported ones; a later NAME replaces an earlier one in its place) in the
 * order of bash 5's variable table (FNV-1 over 1024 buckets, the newest
 * first in a bucket), then "_=" prog. Into out (n + 2 pointers, NULL at the
 * end; the "_=" string into underscore, ulen bytes); the count.
 */
size_t aas_bash_env(const char **vars, size_t n, const char *prog, char *underscore, size_t ulen, const char **out);

/*
 * What bash says on stderr when the command it waits for was killed by sig
 * (core: it dumped core), as the script runs it: for a signal the script
 * traps (HUP QUIT USR1 USR2 ALRM TERM) its name, as `Terminated`; for INT
 * and PIPE nothing; for any other, `bash: line 1:  PID Killed ... WORDS`
 * (bash's job line). Into out (len bytes); its length, 0 for nothing.
 */
size_t aas_bash_signal_note(char *out, size_t len, int sig, bool core, long pid, const char *const *argv);

/*
 * The line reader: bytes in, whole lines out. A line longer than
 * CONTROL_LINE_MAX - 1 bytes is dropped whole (reported once, as
 * overlong), never cut into requests.
 */
struct aas_lines {
	char buf[CONTROL_LINE_MAX];
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
