/*
 * aas-control: the guest's end of the engine's control port, run by aas-init
 * as root in every image. A clone restored from a template (or a snapshot)
 * must become a machine of its own before its first command: its hostname,
 * the clock, fresh random bytes in the kernel's pool. The engine sends them
 * over a virtio-serial port (org.libsaas.control.0) instead of an SSH login
 * as root, so that a clone's only login is the engine's own session.
 *
 * Why the port is trusted: its device node is root's alone (devtmpfs makes it
 * 0600 root:root, and the kernel lets one process hold a port open at a time:
 * this one, from boot on), and its host end is a socket in the VM's directory
 * that only the engine reaches. Nothing the sandbox user runs can write a
 * line here, or read one. The bounds below are there all the same.
 *
 * The protocol, one line each way (at most CONTROL_LINE_MAX bytes with '\n'):
 *   engine: fixup NONCE HOSTNAME SECONDS[.NANOS] HEX_SEED
 *   guest:  ok NONCE            or: error NONCE WHAT
 * NONCE is 16 hex digits the engine chose for this request.
 *
 * Then files, commands and port connections (control_proto.h says how).
 *
 *   aas-control              serve the port (aas-init starts it in the background)
 *   aas-control --restored   the same fix-ups for an SSH forced command: reads
 *                            "HOSTNAME SECONDS HEX_SEED" from SSH_ORIGINAL_COMMAND,
 *                            prints "ok" (the path of engines and images that
 *                            have no control port)
 *
 * Built static by images/build; tests/unit/test_control.c compiles the parser
 * with AAS_CONTROL_NO_MAIN. One file of ~1,600 lines on purpose: the guest
 * program is built with one compiler line into every image (with lib/util's
 * XXH64 and the protocol header it shares with the engine), its parts (fix-ups,
 * files, commands) share its one poll loop and its bounds, and the fuzzer and
 * the unit test compile it whole.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/fsuid.h>
#include <sys/socket.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "aas-control.h"
#include "util/xxh64.h"

/* The next space-separated word of *p (no empty words, nothing but one space between them). */
static const char *next_word(const char **p, const char *end, size_t *len)
{
	const char *w = *p, *e = w;

	while (e < end && *e != ' ')
		e++;
	*len = (size_t)(e - w);
	*p = e < end ? e + 1 : e;
	return *len ? w : NULL;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static bool hostname_ok(const char *s, size_t n)
{
	if (n < 1 || n > CONTROL_HOSTNAME_MAX || s[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

/* SECONDS[.NANOS]: 1 to 12 digits, then 1 to 9 more. */
static bool time_parse(const char *s, size_t n, long long *secs, long *nanos)
{
	size_t i = 0, digits = 0;
	long long v = 0;
	long ns = 0;

	for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
		if (digits == 12)
			return false;
		v = v * 10 + (s[i] - '0');
	}
	if (digits == 0)
		return false;
	if (i < n) {
		size_t frac = 0;
		if (s[i++] != '.')
			return false;
		for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, frac++) {
			if (frac == 9)
				return false;
			ns = ns * 10 + (s[i] - '0');
		}
		if (frac == 0 || i < n)
			return false;
		for (; frac < 9; frac++)
			ns *= 10;
	}
	*secs = v;
	*nanos = ns;
	return true;
}

static bool seed_parse(const char *s, size_t n, unsigned char *out, size_t *len)
{
	if (n < CONTROL_SEED_MIN || n > CONTROL_SEED_MAX || n % 2)
		return false;
	for (size_t i = 0; i < n; i += 2) {
		int hi = hexval(s[i]), lo = hexval(s[i + 1]);
		if (hi < 0 || lo < 0)
			return false;
		out[i / 2] = (unsigned char)(hi << 4 | lo);
	}
	*len = n / 2;
	return true;
}

/* The next word as a nonce into out (CONTROL_NONCE_LEN + 1 bytes): 16 hex digits. */
static bool nonce_parse(const char **p, const char *end, char *out)
{
	size_t len;
	const char *w = next_word(p, end, &len);

	if (!w || len != CONTROL_NONCE_LEN)
		return false;
	for (size_t i = 0; i < len; i++)
		if (hexval(w[i]) < 0)
			return false;
	memcpy(out, w, len);
	out[len] = '\0';
	return true;
}

/* A decimal number of 1 to maxdigits digits (at most 18), with no leading zero but "0" itself. */
static bool decimal_parse(const char *s, size_t n, size_t maxdigits, long long *out)
{
	long long v = 0;

	if (n < 1 || n > maxdigits || (n > 1 && s[0] == '0'))
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return true;
}

int aas_request_kind(const char *line, size_t n)
{
	static const struct {
		const char *verb;
		int kind;
	} verbs[] = { { "fixup", AAS_REQ_FIXUP }, { "files", AAS_REQ_FILES }, { "put", AAS_REQ_PUT }, { "get", AAS_REQ_GET },
	              { "exec", AAS_REQ_EXEC }, { "connect", AAS_REQ_CONNECT }, { "run", AAS_REQ_RUN } };
	const char *p = line;
	size_t len;
	const char *w = next_word(&p, line + n, &len);

	for (size_t i = 0; w && i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (len == strlen(verbs[i].verb) && memcmp(w, verbs[i].verb, len) == 0)
			return verbs[i].kind;
	return -1;
}

int aas_files_parse(const char *line, size_t n, struct aas_file_req *out, const char **why)
{
	const char *p = line, *end = line + n, *w;
	size_t len;
	long long v;

	memset(out, 0, sizeof(*out));
	*why = "not a request";
	if (n >= CONTROL_LINE_MAX || (out->kind = aas_request_kind(line, n)) < 0 || out->kind == AAS_REQ_FIXUP)
		return -1;
	(void)next_word(&p, end, &len);
	*why = "bad nonce";
	if (!nonce_parse(&p, end, out->nonce))
		return -1;
	if (out->kind == AAS_REQ_PUT) {
		*why = "bad mode";
		if (!(w = next_word(&p, end, &len)) || len > 4)
			return -1;
		for (size_t i = 0; i < len; i++) {
			if (w[i] < '0' || w[i] > '7')
				return -1;
			out->mode = out->mode * 8 + (unsigned int)(w[i] - '0');
		}
	}
	if (out->kind == AAS_REQ_GET) {
		*why = "bad bound";
		if (!(w = next_word(&p, end, &len)) || !decimal_parse(w, len, 18, &out->max))
			return -1;
	}
	if (out->kind == AAS_REQ_CONNECT) {
		*why = "bad port";
		if (!(w = next_word(&p, end, &len)) || !decimal_parse(w, len, 5, &v) || v > 65535)
			return -1;
		out->port = (unsigned int)v;
	} else if (out->kind == AAS_REQ_EXEC || out->kind == AAS_REQ_RUN) {
		*why = "bad script length";
		if (!(w = next_word(&p, end, &len)) || !decimal_parse(w, len, 9, &v) || v < 0 || v > CONTROL_EXEC_SCRIPT_MAX)
			return -1;
		out->path_len = (size_t)v;
	} else if (out->kind != AAS_REQ_FILES) {
		*why = "bad path length";
		if (!(w = next_word(&p, end, &len)) || !decimal_parse(w, len, 9, &v) || v < 1 || v > CONTROL_FILES_PATH_MAX)
			return -1;
		out->path_len = (size_t)v;
	}
	*why = "trailing words";
	if (p != end || line[n - 1] == ' ')
		return -1;
	return 0;
}

int aas_control_parse(const char *line, size_t n, struct aas_fixup *out, const char **why)
{
	const char *p = line, *end = line + n, *w;
	size_t len;

	memset(out, 0, sizeof(*out));
	*why = "not a request";
	if (n >= CONTROL_LINE_MAX || !(w = next_word(&p, end, &len)) || len != 5 || memcmp(w, "fixup", 5) != 0)
		return -1;
	*why = "bad nonce";
	if (!nonce_parse(&p, end, out->nonce))
		return -1;
	*why = "bad hostname";
	if (!(w = next_word(&p, end, &len)) || !hostname_ok(w, len))
		return -1;
	memcpy(out->hostname, w, len);
	*why = "bad time";
	if (!(w = next_word(&p, end, &len)) || !time_parse(w, len, &out->seconds, &out->nanos))
		return -1;
	*why = "bad seed";
	if (!(w = next_word(&p, end, &len)) || !seed_parse(w, len, out->seed, &out->seed_len))
		return -1;
	*why = "trailing words";
	if (p != end || line[n - 1] == ' ')
		return -1;
	return 0;
}

size_t aas_lines_feed(struct aas_lines *r, const char *b, size_t n,
                      int (*fn)(const char *line, size_t len, bool overlong, void *ud), void *ud)
{
	for (size_t i = 0; i < n; i++) {
		if (b[i] == '\n') {
			bool over = r->overlong;
			size_t len = r->len;
			r->len = 0;
			r->overlong = false;
			if (fn(r->buf, over ? 0 : len, over, ud))
				return i + 1;
		} else if (r->overlong) {
			continue;
		} else if (r->len == sizeof(r->buf) - 1) {
			r->overlong = true;
		} else {
			r->buf[r->len++] = b[i];
		}
	}
	return n;
}

void aas_lines_reset(struct aas_lines *r)
{
	r->len = 0;
	r->overlong = false;
}

void aas_signals_default(void)
{
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
}

ssize_t aas_serve_read(int fd, char *buf, size_t cap, size_t carried)
{
	/* Before the read, never after it: with no child left, waitpid's ECHILD would take the place of the read's EAGAIN. */
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	return carried ? (ssize_t)carried : read(fd, buf, cap);
}

int aas_run_parse(char *b, size_t n, struct aas_run *out, const char **why)
{
	char *p = b, *end = b + n;
	bool words = false;

	memset(out, 0, sizeof(*out));
	b[n] = '\0';
	*why = "a run must end with a NUL";
	if (n == 0 || b[n - 1] != '\0')
		return -1;
	*why = "an empty script";
	if (!*(out->script = p))
		return -1;
	p += strlen(p) + 1;
	*why = "no directory";
	if (p >= end)
		return -1;
	out->cwd = *p ? p : NULL;
	*why = "the directory must be absolute";
	if (out->cwd && out->cwd[0] != '/')
		return -1;
	p += strlen(p) + 1;
	for (; p < end; p += strlen(p) + 1) {
		if (!words && !*p) {
			words = true;
		} else if (!words) {
			*why = "too many variables, or one with no =";
			if (out->nenv == CONTROL_RUN_ENV_MAX || !strchr(p, '=') || *p == '=')
				return -1;
			out->env[out->nenv++] = p;
		} else {
			*why = "too many words, or an empty one";
			if (out->argc == CONTROL_RUN_ARGS_MAX || !*p)
				return -1;
			out->argv[out->argc++] = p;
		}
	}
	*why = "no command";
	if (out->argc == 0)
		return -1;
	out->argv[out->argc] = NULL;
	return 0;
}

int aas_bashrc_kind(const char *rc, size_t n, const char *skel, size_t sn)
{
	static const char header[] = AAS_BASHRC_HEADER;
	static const char stanza[] = "case $- in\n    *i*) ;;\n      *) return;;\nesac\n";
	size_t h = sizeof(header) - 1, i = 0;

	if (!rc)
		return 0;
	/* The skeleton returns at once when not interactive: nothing but comments and blank lines before it says so. */
	while (i < sn && (skel[i] == '#' || skel[i] == '\n')) {
		const char *nl = memchr(skel + i, '\n', sn - i);
		if (!nl)
			return -1;
		i = (size_t)(nl - skel) + 1;
	}
	if (sn - i < sizeof(stanza) - 1 || memcmp(skel + i, stanza, sizeof(stanza) - 1) != 0)
		return -1;
	if (n == sn && memcmp(rc, skel, n) == 0)
		return 0;
	if (n == h + sn && memcmp(rc, header, h) == 0 && memcmp(rc + h, skel, sn) == 0)
		return 1;
	return -1;
}

void aas_bashrc_path(char *out, size_t len, const char *home, const char *path)
{
	char want[600], have[4200];

	snprintf(want, sizeof(want), ":%s/.local/bin:", home);
	snprintf(have, sizeof(have), ":%s:", path);
	if (strstr(have, want))
		snprintf(out, len, "%s", path);
	else
		snprintf(out, len, "%s/.local/bin:%s", home, path);
}

size_t aas_bash_signal_note(char *out, size_t len, int sig, bool core, long pid, const char *const *argv)
{
	const char *name = strsignal(sig);
	int n;

	out[0] = '\0';
	if (sig == SIGINT || sig == SIGPIPE)
		return 0;
	if (sig == SIGHUP || sig == SIGQUIT || sig == SIGUSR1 || sig == SIGUSR2 || sig == SIGALRM || sig == SIGTERM) {
		n = snprintf(out, len, "%s%s\n", name, core ? " (core dumped)" : "");
	} else {
		/* jobs.c's print_pipeline: the pid in 5, the status padded to LONGEST_SIGNAL_DESC (24), the command. */
		n = snprintf(out, len, "bash: line 1: %5ld %s%*s%s", pid, name, (int)(strlen(name) < 24 ? 24 - strlen(name) : 0), "",
		             core ? "(core dumped) " : "");
		for (size_t i = 0; argv[i] && n >= 0 && (size_t)n < len; i++)
			n += snprintf(out + n, len - (size_t)n, "%s%s", i ? " " : "", argv[i]);
		if (n >= 0 && (size_t)n < len)
			n += snprintf(out + n, len - (size_t)n, "\n");
	}
	if (n < 0)
		return 0;
	return (size_t)n < len ? (size_t)n : len - 1;
}

/* bash 5's hash_string (FNV-1, 32 bits) of a variable's name. */
static uint32_t bash_hash(const char *s, size_t n)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++) {
		h *= 16777619u;
		h ^= (unsigned char)s[i];
	}
	return h;
}

static size_t name_len(const char *v)
{
	const char *eq = strchr(v, '=');
	return eq ? (size_t)(eq - v) : strlen(v);
}

size_t aas_bash_env(const char **vars, size_t n, const char *prog, char *underscore, size_t ulen, const char **out)
{
	size_t m = 0;

	/* Each name once, in the order it was first met, with its last value. */
	for (size_t i = 0; i < n; i++) {
		size_t ln = name_len(vars[i]), j;
		for (j = 0; j < m; j++)
			if (name_len(out[j]) == ln && memcmp(out[j], vars[i], ln) == 0)
				break;
		out[j] = vars[i];
		if (j == m)
			m++;
	}
	/* By bucket; within one, the newest first (a stable insertion sort: m is small). */
	for (size_t i = 1; i < m; i++) {
		const char *v = out[i];
		uint32_t b = bash_hash(v, name_len(v)) & 1023;
		size_t j = i;
		while (j > 0 && (bash_hash(out[j - 1], name_len(out[j - 1])) & 1023) >= b) {
			out[j] = out[j - 1];
			j--;
		}
		out[j] = v;
	}
	snprintf(underscore, ulen, "_=%s", prog);
	out[m++] = underscore;
	out[m] = NULL;
	return m;
}

#ifndef AAS_CONTROL_NO_MAIN

#define LOG(...) console_log(__VA_ARGS__)
#define PORTS_DIR "/sys/class/virtio-ports"
#define PORT_WAIT_S 60             /* the port shows up once the driver probed it; not forever */
#define IDLE_RECHECK_S 5           /* with no host end, a wake-up this often in case a SIGIO was lost */

static void console_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void console_log(const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	int fd = open("/dev/console", O_WRONLY | O_NOCTTY | O_CLOEXEC);

	if (fd < 0)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg) - 1, fmt, ap);
	va_end(ap);
	strcat(msg, "\n");
	if (write(fd, "aas: ", 5) < 0 || write(fd, msg, strlen(msg)) < 0) {
		/* nothing to do: the console is all there is to say it on */
	}
	close(fd);
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), rc = 0;
	size_t n = strlen(text);

	if (fd < 0)
		return -1;
	if (write(fd, text, n) != (ssize_t)n)
		rc = -1;
	if (close(fd) < 0)
		rc = -1;
	return rc;
}

/* A small file's bytes (malloc'd, at most 64 KiB), or NULL. */
static char *file_slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	char *b = fd >= 0 ? malloc(65536) : NULL;
	ssize_t r;

	*len = 0;
	while (b && *len < 65536 && (r = read(fd, b + *len, 65536 - *len)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			free(b);
			b = NULL;
			break;
		}
		*len += (size_t)r;
	}
	if (b && *len == 65536) {
		free(b);
		b = NULL;
	}
	if (fd >= 0)
		close(fd);
	return b;
}

/* The fix-ups themselves (the same whichever way they came): NULL, or what failed. */
static const char *apply(const struct aas_fixup *f)
{
	struct timespec ts = { (time_t)f->seconds, f->nanos };
	char hosts[256];
	int fd;

	if (clock_settime(CLOCK_REALTIME, &ts) < 0)
		return "cannot set the clock";
	if (sethostname(f->hostname, strlen(f->hostname)) < 0)
		return "cannot set the hostname";
	snprintf(hosts, sizeof(hosts), "127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n",
	         f->hostname);
	/* /etc/hostname only says it again: a read-only /etc is no failure of the fix-ups. */
	{
		char line[CONTROL_HOSTNAME_MAX + 2];
		snprintf(line, sizeof(line), "%s\n", f->hostname);
		(void)write_file("/etc/hostname", line);
	}
	(void)write_file("/etc/hosts", hosts);
	/* Writing to /dev/urandom mixes the bytes in (without crediting entropy). */
	if ((fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC)) < 0)
		return "cannot open /dev/urandom";
	if (write(fd, f->seed, f->seed_len) != (ssize_t)f->seed_len) {
		close(fd);
		return "cannot write to /dev/urandom";
	}
	close(fd);
	LOG("restored as %s", f->hostname);
	return NULL;
}

/* --restored: the forced command of root's key (the SSH path). */
static int restored_main(void)
{
	const char *cmd = getenv("SSH_ORIGINAL_COMMAND");
	char line[CONTROL_LINE_MAX];
	struct aas_fixup f;
	const char *why;

	/* The same parser: the SSH form is a request without its verb and nonce. */
	if (!cmd || strlen(cmd) > CONTROL_LINE_MAX - 40) {
		fputs("usage: HOSTNAME UNIX_SECONDS HEX_SEED\n", stderr);
		return 2;
	}
	snprintf(line, sizeof(line), "fixup 0000000000000000 %s", cmd);
	if (aas_control_parse(line, strlen(line), &f, &why) < 0) {
		fprintf(stderr, "%s\n", why);
		return 2;
	}
	if ((why = apply(&f))) {
		fprintf(stderr, "%s\n", why);
		return 1;
	}
	puts("ok");
	return 0;
}

/* /dev/vportNpM of the port named CONTROL_PORT_NAME (no udev here to make /dev/virtio-ports/). */
static int port_find(char *dev, size_t len)
{
	DIR *dir = opendir(PORTS_DIR);
	struct dirent *e;
	int found = -1;

	if (!dir)
		return -1;
	while (found < 0 && (e = readdir(dir))) {
		char path[512], name[64] = "";
		int fd;
		ssize_t n;
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), PORTS_DIR "/%s/name", e->d_name);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		n = read(fd, name, sizeof(name) - 1);
		close(fd);
		if (n > 0 && name[n - 1] == '\n')
			name[--n] = '\0';
		if (n > 0 && strcmp(name, CONTROL_PORT_NAME) == 0) {
			snprintf(dev, len, "/dev/%s", e->d_name);
			found = 0;
		}
	}
	closedir(dir);
	return found;
}

static void reply(int fd, const char *text)
{
	size_t n = strlen(text), off = 0;

	/* The host end reads it at once; a host that stopped reading gets a second, not a hung helper. */
	while (off < n) {
		struct pollfd p = { fd, POLLOUT, 0 };
		ssize_t w = write(fd, text + off, n - off);
		if (w > 0) {
			off += (size_t)w;
		} else if (w < 0 && errno == EAGAIN) {
			if (poll(&p, 1, 1000) <= 0)
				return;
		} else if (!(w < 0 && errno == EINTR)) {
			return;
		}
	}
}

/* ---- files ---------------------------------------------------------------------------------- */

#define FILES_CHUNK (256 * 1024)   /* what a get reads from the file per frame */
#define USER_GROUPS_MAX 64

/*
 * A transfer runs in the helper itself, as root with the sandbox user's
 * filesystem identity (setfsuid: the kernel checks every path as the user's,
 * and the filesystem capabilities leave the effective set), so that nothing
 * the user runs can signal or trace it: the helper never loses its place in
 * the stream. Once a put said "ready", every byte until its end is the file's
 * and is never read as a request.
 *
 * A transfer ends only in the stream (its end, an abort frame, a protocol
 * error), never because the host end seemed to go away: the port's
 * connect and disconnect news reach the guest on another queue than its
 * data, so a disconnect can be seen after the next connection's first bytes
 * (a stale one). Without a host end, a transfer waits for one to come back;
 * the engine resynchronises a connection it lost in the stream
 * (control_files.c).
 */
struct xfer {
	int port;
	const char *pre;               /* bytes the line reader read past the request line: the request's own */
	size_t pre_len;
	const struct aas_file_req *q;
};

/* No host end: wait for one (the port raises SIGIO when it connects), or 5 s. */
static void port_idle(void)
{
	sigset_t io;
	struct timespec wait = { IDLE_RECHECK_S, 0 };

	sigemptyset(&io);
	sigaddset(&io, SIGIO);
	sigtimedwait(&io, NULL, &wait);
}

/* Exactly n bytes from the port (what the line reader held first): false only when the port failed. */
static bool port_read(struct xfer *x, void *buf, size_t n)
{
	char *b = buf;

	while (n) {
		ssize_t r;
		if (x->pre_len) {
			size_t take = x->pre_len < n ? x->pre_len : n;
			memcpy(b, x->pre, take);
			x->pre += take;
			x->pre_len -= take;
			b += take;
			n -= take;
			continue;
		}
		r = read(x->port, b, n);
		if (r > 0) {
			b += r;
			n -= (size_t)r;
		} else if (r == 0) {
			port_idle(); /* a virtio-serial read says 0 while no host end is there */
		} else if (errno == EAGAIN) {
			struct pollfd p = { x->port, POLLIN, 0 };
			poll(&p, 1, IDLE_RECHECK_S * 1000);
		} else if (errno != EINTR) {
			return false;
		}
	}
	return true;
}

static bool port_write(int fd, const void *buf, size_t n)
{
	const char *b = buf;

	while (n) {
		ssize_t w = write(fd, b, n);
		if (w > 0) {
			b += w;
			n -= (size_t)w;
		} else if (w < 0 && errno == EAGAIN) {
			/* The host has not taken what came before, or there is no host end (POLLHUP): wait. */
			struct pollfd p = { fd, POLLOUT, 0 };
			if (poll(&p, 1, IDLE_RECHECK_S * 1000) > 0 && !(p.revents & POLLOUT))
				port_idle();
		} else if (!(w < 0 && errno == EINTR)) {
			return false;
		}
	}
	return true;
}

static bool port_say(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool port_say(int fd, const char *fmt, ...)
{
	char line[CONTROL_LINE_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return false;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	return port_write(fd, line, (size_t)n);
}

/* The error answer: the errno as a number, then what failed (the engine quotes it). */
static void files_fail(struct xfer *x, int err, const char *what)
{
	port_say(x->port, "error %s %d %s: %s", x->q->nonce, err, what, strerror(err));
}

static void be32_put(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

/* The sandbox user, as /etc/passwd and /etc/group say. */
struct user {
	uid_t uid;
	gid_t gid;
	gid_t groups[USER_GROUPS_MAX + 1]; /* its primary group first, then the others */
	int ngroups;
	char home[256], shell[256];
};

/*
 * The sandbox user's uid, gid, supplementary groups, home and shell, read
 * from /etc/passwd and /etc/group: a static helper has no NSS, and the tiny
 * image no libc to load one from. 0, or -1 when the user is not there.
 */
static int user_lookup(struct user *u)
{
	char *line = NULL;
	size_t cap = 0;
	bool found = false;
	FILE *f;

	memset(u, 0, sizeof(*u));
	if (!(f = fopen("/etc/passwd", "re")))
		return -1;
	while (!found && getline(&line, &cap, f) > 0) {
		char *p = line, *name, *id, *gid, *home, *shell;
		unsigned long uv, gv;
		line[strcspn(line, "\n")] = '\0';
		name = strsep(&p, ":");
		if (strcmp(name, AAS_FILES_USER) != 0 || !strsep(&p, ":") || !(id = strsep(&p, ":")) ||
		    !(gid = strsep(&p, ":")) || !strsep(&p, ":") || !(home = strsep(&p, ":")) || !(shell = p))
			continue;
		if (sscanf(id, "%lu", &uv) == 1 && sscanf(gid, "%lu", &gv) == 1 && uv != 0) {
			u->uid = (uid_t)uv;
			u->gid = (gid_t)gv;
			snprintf(u->home, sizeof(u->home), "%s", *home == '/' ? home : "/");
			snprintf(u->shell, sizeof(u->shell), "%s", *shell == '/' ? shell : "/bin/sh");
			found = true;
		}
	}
	fclose(f);
	u->groups[u->ngroups++] = u->gid;
	if (found && (f = fopen("/etc/group", "re"))) {
		while (u->ngroups < USER_GROUPS_MAX + 1 && getline(&line, &cap, f) > 0) {
			char *p = line, *m, *gidtext;
			unsigned long g;
			line[strcspn(line, "\n")] = '\0';
			if (!strsep(&p, ":") || !strsep(&p, ":") || !(gidtext = strsep(&p, ":")) || !p ||
			    sscanf(gidtext, "%lu", &g) != 1)
				continue;
			while ((m = strsep(&p, ",")))
				if (strcmp(m, AAS_FILES_USER) == 0 && (gid_t)g != u->gid) {
					u->groups[u->ngroups++] = (gid_t)g;
					break;
				}
		}
		fclose(f);
	}
	free(line);
	return found ? 0 : -1;
}

/*
 * Take the sandbox user's filesystem identity: its supplementary groups, its
 * fsgid and fsuid (the effective uid stays root's, so nothing of the user's
 * can signal this process). Its file creation mask is SFTP's, 022.
 */
static int user_enter(void)
{
	struct user u;

	if (user_lookup(&u) < 0) {
		errno = ENOENT;
		return -1;
	}
	if (setgroups((size_t)u.ngroups, u.groups) < 0)
		return -1;
	/* setfsuid and setfsgid say no failure: each is asked again for what it holds. */
	setfsgid(u.gid);
	setfsuid(u.uid);
	if ((gid_t)setfsgid((gid_t)-1) != u.gid || (uid_t)setfsuid((uid_t)-1) != u.uid) {
		errno = EPERM;
		return -1;
	}
	umask(022);
	return 0;
}

/* Back to root's own identity (the filesystem capabilities come back with fsuid 0). */
static void user_leave(void)
{
	setfsuid(0);
	setfsgid(0);
	if (setgroups(0, NULL) < 0 || setfsuid((uid_t)-1) != 0) {
		LOG("control: cannot take back root's identity after a transfer");
		_exit(1); /* aas-init's helper is gone then: clones fall back to SSH for their fix-ups */
	}
}

/* mkdir -p, 0755, as SFTP's would: an existing directory is fine, a file in the way is ENOTDIR. */
static int mkdir_p(char *dir)
{
	struct stat st;
	char *slash;

	if (!*dir || strcmp(dir, "/") == 0)
		return 0;
	if (stat(dir, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return 0;
		errno = ENOTDIR;
		return -1;
	}
	if (errno != ENOENT)
		return -1;
	if ((slash = strrchr(dir, '/')) && slash != dir) {
		int rc;
		*slash = '\0';
		rc = mkdir_p(dir);
		*slash = '/';
		if (rc < 0)
			return -1;
	}
	if (mkdir(dir, 0755) < 0 && !(errno == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode)))
		return -1;
	return 0;
}

static void files_put(struct xfer *x, const char *path)
{
	char dir[CONTROL_FILES_PATH_MAX + 1], tmp[CONTROL_FILES_PATH_MAX + 32];
	unsigned char hdr[4], want[8], *buf;
	uint64_t rnd = 0, got;
	saas__xxh64_ctx sum;
	struct stat st;
	char *slash;
	int fd, err = 0;

	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		files_fail(x, EISDIR, "writing");
		return;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	slash[slash == dir ? 1 : 0] = '\0';
	if (mkdir_p(dir) < 0) {
		files_fail(x, errno, "creating the directory");
		return;
	}
	if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		files_fail(x, EAGAIN, "drawing a temporary name");
		return;
	}
	/* A temporary name beside the target, renamed over it at the end: no partial file is ever seen. */
	snprintf(tmp, sizeof(tmp), "%s/.aas-tmp-%016llx", strcmp(dir, "/") ? dir : "", (unsigned long long)rnd);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0) {
		files_fail(x, errno, "writing");
		return;
	}
	if (!(buf = malloc(CONTROL_FILES_FRAME_MAX)) || !port_say(x->port, "ready %s", x->q->nonce)) {
		unlink(tmp);
		return;
	}
	saas__xxh64_init(&sum, 0);
	for (;;) {
		uint32_t len;
		if (!port_read(x, hdr, sizeof(hdr)))
			goto gone;
		len = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
		if (len == 0)
			break;
		if (len == CONTROL_FILES_FRAME_ABORT) {
			/* The engine gave it up (its source failed): no file, and the stream goes on. */
			files_fail(x, ECANCELED, "writing");
			goto gone;
		}
		if (len > CONTROL_FILES_FRAME_MAX) {
			files_fail(x, EPROTO, "a frame longer than the protocol allows");
			goto gone;
		}
		if (!port_read(x, buf, len))
			goto gone;
		saas__xxh64_update(&sum, buf, len);
		/* A failed write (the disk full) still takes the rest: the answer comes at the end. */
		for (size_t off = 0; !err && off < len;) {
			ssize_t w = write(fd, buf + off, len - off);
			if (w > 0)
				off += (size_t)w;
			else if (!(w < 0 && errno == EINTR))
				err = w < 0 ? errno : EIO;
		}
	}
	if (!port_read(x, want, sizeof(want)))
		goto gone;
	got = saas__xxh64_digest(&sum);
	if (!err && fchmod(fd, x->q->mode & 07777) < 0)
		err = errno;
	if (close(fd) < 0 && !err)
		err = errno;
	fd = -1;
	for (int i = 0; !err && i < 8; i++)
		if (want[i] != (unsigned char)(got >> (56 - 8 * i)))
			err = EBADMSG;
	if (!err && rename(tmp, path) < 0)
		err = errno;
	if (err) {
		unlink(tmp);
		files_fail(x, err, err == EBADMSG ? "the bytes' checksum does not match" : "writing");
	} else {
		port_say(x->port, "ok %s", x->q->nonce);
	}
	free(buf);
	return;
gone:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	free(buf);
}

static void files_get(struct xfer *x, const char *path)
{
	unsigned char *frame;
	saas__xxh64_ctx sum;
	struct stat st;
	long long left;
	int fd;

	/* O_NONBLOCK: a FIFO no one writes is opened, not waited on (its size, like a device's, is 0). */
	if ((fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)) < 0) {
		files_fail(x, errno, "reading");
		return;
	}
	if (fstat(fd, &st) < 0 || S_ISDIR(st.st_mode)) {
		files_fail(x, S_ISDIR(st.st_mode) ? EISDIR : errno, "reading");
		close(fd);
		return;
	}
	left = S_ISREG(st.st_mode) ? (long long)st.st_size : 0;
	/* Over the engine's bound: the size says why, and nothing follows. */
	if (!(frame = malloc(4 + FILES_CHUNK)) || !port_say(x->port, "size %s %lld", x->q->nonce, left) ||
	    (x->q->max > 0 && left > x->q->max)) {
		free(frame);
		close(fd);
		return;
	}
	saas__xxh64_init(&sum, 0);
	/* Exactly the size announced, even if the file grows meanwhile. */
	while (left > 0) {
		ssize_t n = read(fd, frame + 4, left < FILES_CHUNK ? (size_t)left : FILES_CHUNK);
		if (n <= 0 && !(n < 0 && errno == EINTR)) {
			int err = n < 0 ? errno : ENODATA;
			be32_put(frame, CONTROL_FILES_FRAME_ABORT);
			if (port_write(x->port, frame, 4))
				files_fail(x, err, n < 0 ? "reading" : "reading: the file shrank while being read");
			goto out;
		}
		if (n < 0)
			continue;
		be32_put(frame, (uint32_t)n);
		saas__xxh64_update(&sum, frame + 4, (size_t)n);
		if (!port_write(x->port, frame, 4 + (size_t)n))
			goto out;
		left -= n;
	}
	be32_put(frame, 0);
	if (port_write(x->port, frame, 4))
		port_say(x->port, "ok %s %016llx", x->q->nonce, (unsigned long long)saas__xxh64_digest(&sum));
out:
	free(frame);
	close(fd);
}

/* A put or a get: the path, the user's identity, the transfer (one at a time on the port). */
static void files_serve(int port, const struct aas_file_req *q, const char *pre, size_t pre_len)
{
	struct xfer x = { port, pre, pre_len, q };
	char path[CONTROL_FILES_PATH_MAX + 1];

	if (!port_read(&x, path, q->path_len))
		return;
	path[q->path_len] = '\0';
	if (path[0] != '/' || memchr(path, '\0', q->path_len)) {
		files_fail(&x, EINVAL, "the path must be absolute, with no NUL");
		return;
	}
	if (user_enter() < 0) {
		files_fail(&x, errno, "taking the identity of the user " AAS_FILES_USER);
		user_leave();
		return;
	}
	if (q->kind == AAS_REQ_PUT)
		files_put(&x, path);
	else
		files_get(&x, path);
	user_leave();
}

/* ---- commands -------------------------------------------------------------------------------- */

/*
 * A command over the port runs as it would under the engine's SSH session:
 * `SHELL -c SCRIPT` (the engine's script enters the directory, exports the
 * variables and evaluates the command, as its SSH wrapper does) as the
 * sandbox user with all its groups, in its home, as the leader of a new
 * session, with sshd's environment for a command (USER, LOGNAME, HOME, PATH,
 * MAIL, SHELL), its file creation mask and pipes for stdin, stdout and
 * stderr. Debian's bash reads ~/.bashrc when sshd starts it (it sees
 * SSH_CLIENT), so bash is given the same first: a prelude sources it, then
 * evaluates the script, passed as an argument and never spliced into text.
 * (Not a socket for stdin, which would make bash read it the same way:
 * busybox cat sendfile()s from a socket into its stdout pipe, and the kernel
 * then holds the pipe's lock while it waits for stdin, so the helper could
 * neither read the output nor write the input the command waits for.)
 *
 * The helper forwards the command's output (reading its pipes only once the
 * port took what came before: a command that writes faster than the engine
 * reads waits, as on an SSH channel), its stdin (within the window the engine
 * keeps to, so that a frame from the engine is always read at once, a KILL
 * behind unread stdin included), signals and kills, and reports the shell's
 * status once it exited and its pipes gave all they held. Processes the
 * command left behind may hold the pipes after that: a drainer forked for
 * them reads and drops what they write until they close them, as the SSH
 * wrapper's cat does.
 *
 * Signals and kills are sent from a child that took the user's identity:
 * they reach exactly what the command could have signalled itself, never
 * another process that happens to get a pid the scan saw.
 *
 * Only the engine kills a command (KILL, or a signal it forwards): a stream
 * that ends otherwise leaves it running, as a command whose SSH connection
 * went away runs on. That is the engine's connection lost with the command
 * under way: the VM paused or saved (its QEMU gone, the command's process
 * saved with the guest and running again at the resume), the engine
 * restarted, or its read of the stream failed. The next connection's first
 * bytes say so: a request line where a frame should be (a restored VM's
 * fix-ups, a new engine's probe) or the resynchronisation's zeros (an END
 * with no KILL before it, while the command runs: the engine's own END comes
 * only after EXIT, or after the KILL of a stop). The helper then detaches the
 * command: its stdin closed (end of input, as sshd gives), its output read
 * and dropped by a drainer of the user's until it closes its pipes, the
 * shell reaped by the serve loop whenever it ends; and what it read past the
 * frames goes back to the line reader, so that the request that came is
 * served. It keeps nothing of a detached command but its zombie until it is
 * reaped (at once: SIGCHLD wakes the serve loop), and the drainer is the
 * user's process, counted against the user's limits as the command's own
 * processes are.
 */
#define EXEC_SCAN_ROUNDS 16        /* the kill's search for what left the process group */
#define EXEC_SCAN_MAX 4096         /* and the most processes it collects */
#define EXEC_END_WAIT_MS 2000      /* after a kill at END, how long the shell's exit is waited for */
#define EXEC_GONE_MS 200           /* no host end: how long the port is left alone before it is read again */

struct xrun {
	int port;
	pid_t pid;                     /* the shell, leader of its session and process group */
	int pidfd;                     /* readable once it exited; -1: polled with waitpid */
	int in, out, err;              /* the helper's ends (-1 once closed) */
	bool in_eof;                   /* the engine ended stdin: close it once written */
	unsigned char *inbuf;          /* stdin taken from the engine, not yet written: [in_off, in_len) */
	size_t in_off, in_len;
	unsigned char *rbuf;           /* the port's bytes: [r_off, r_len) */
	size_t r_off, r_len;
	struct timespec gone;          /* when the port last read 0 (no host end), or 0 */
	bool exited, ended, broken;    /* the shell's status is known; END came; the port failed */
	bool killed;                   /* the engine's KILL came */
	bool lost;                     /* a request line (or bytes of no frame) where a frame should be: rbuf[r_off, r_len) */
	bool conn;                     /* a port connection (conn_serve): in and out are its socket, no process */
	int status;
	struct user u;
	const struct aas_run *run;     /* a run the helper may start with no shell: its words */
	int bashrc;                    /* aas_bashrc_kind of the user's ~/.bashrc, for a run */
	bool plain;                    /* a run's command started with no shell */
	int trapped;                   /* 128+N once a signal the script traps came, on a run with no shell; or 0 */
	bool shell_hit;                /* a signal or kill the shell would have died of came (it would have said nothing) */
	char note[512];                /* what bash would have said of the command's death by a signal */
};

static long ms_between(const struct timespec *a, const struct timespec *b)
{
	return (long)(b->tv_sec - a->tv_sec) * 1000 + (b->tv_nsec - a->tv_nsec) / 1000000;
}

static bool frame_send(struct xrun *x, unsigned int type, const void *data, size_t len)
{
	unsigned char hdr[4];

	be32_put(hdr, (uint32_t)type << 24 | (uint32_t)len);
	return port_write(x->port, hdr, sizeof(hdr)) && (!len || port_write(x->port, data, len));
}

static bool frame_send_u32(struct xrun *x, unsigned int type, uint32_t v)
{
	unsigned char b[4];

	be32_put(b, v);
	return frame_send(x, type, b, sizeof(b));
}

static void fd_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* The end of stdin: a connection's socket half-closed (out is the same socket, still read). */
static void in_close(struct xrun *x)
{
	if (x->conn && x->in >= 0)
		shutdown(x->in, SHUT_WR);
	fd_close(&x->in);
}

/*
 * A run's command with no shell, in the child that has the user's identity
 * and its home for cwd: what bash would do for the script's one simple
 * command. Returns (then the shell runs the script) wherever bash would have
 * more to say: a directory it cannot enter, a command it does not find or
 * cannot run (its message is bash's own that way), a file it would read
 * as a script itself (ENOEXEC).
 */
static void run_plain(struct xrun *x, char *const *helper_env)
{
	const struct aas_run *r = x->run;
	char start[4096], pwd[4200], oldpwd[4200], path[4200], prog[4200], under[4300];
	const char *vars[16 + CONTROL_RUN_ENV_MAX], *envp[18 + CONTROL_RUN_ENV_MAX], *search = NULL;
	const char *name = r->argv[0];
	size_t n = 0;

	if (!getcwd(start, sizeof(start)))
		return;
	if (r->cwd && chdir(r->cwd) < 0) {
		if (chdir(start) < 0)
			_exit(126);
		return;
	}
	/* As bash met them: its environment (PATH as ~/.bashrc left it), PWD, OLDPWD after a cd, SHLVL, the exports. */
	for (int i = 0; helper_env[i]; i++) {
		if (strncmp(helper_env[i], "PATH=", 5) == 0 && x->bashrc == 1) {
			aas_bashrc_path(path, sizeof(path), x->u.home, helper_env[i] + 5);
			memmove(path + 5, path, strlen(path) + 1);
			memcpy(path, "PATH=", 5);
			vars[n++] = path;
		} else {
			vars[n++] = helper_env[i];
		}
	}
	snprintf(pwd, sizeof(pwd), "PWD=%s", r->cwd ? r->cwd : start);
	vars[n++] = pwd;
	if (r->cwd) {
		snprintf(oldpwd, sizeof(oldpwd), "OLDPWD=%s", start);
		vars[n++] = oldpwd;
	}
	vars[n++] = "SHLVL=1";
	for (size_t i = 0; i < r->nenv; i++)
		vars[n++] = r->env[i];
	for (size_t i = 0; i < n; i++)
		if (strncmp(vars[i], "PATH=", 5) == 0)
			search = vars[i] + 5;
	if (r->argc == 1 && (strcmp(name, "true") == 0 || strcmp(name, ":") == 0))
		_exit(0);
	if (r->argc == 1 && strcmp(name, "false") == 0)
		_exit(1);
	if (strchr(name, '/')) {
		snprintf(prog, sizeof(prog), "%s", name);
	} else {
		/* bash's search: the first executable file (not a directory) on PATH; the rest is bash's to say. */
		const char *p = search;
		bool found = false;
		while (p && !found) {
			const char *colon = strchr(p, ':');
			size_t len = colon ? (size_t)(colon - p) : strlen(p);
			struct stat st;
			if (len == 0 || p[0] != '/' || p[len - 1] == '/')
				return; /* "." and the like: bash's own way of naming what it finds */
			snprintf(prog, sizeof(prog), "%.*s/%s", (int)len, p, name);
			found = stat(prog, &st) == 0 && !S_ISDIR(st.st_mode) && access(prog, X_OK) == 0;
			p = colon ? colon + 1 : NULL;
		}
		if (!found)
			return;
	}
	aas_bash_env(vars, n, prog, under, sizeof(under), envp);
	execve(prog, (char *const *)r->argv, (char *const *)envp);
	/* Not run (ENOEXEC: bash reads it as a script; anything else: bash says so): the shell, from the start. */
	if (chdir(start) < 0)
		_exit(126);
}

/* The child's side: the user's identity, its fds, its environment, the shell. Never returns. */
static void exec_child(struct xrun *x, const char *script, int in, int out, int err, int status)
{
	static const char bash_prelude[] = "__aas_script=$1; shift; if [ -e ~/.bashrc ]; then . ~/.bashrc; fi; "
	                                   "eval \"unset __aas_script; $__aas_script\"";
	char home[300], user[64], logname[64], mail[300], shell[300], *argv0, *argv[6], *envp[7];
	sigset_t none;
	int e;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	aas_signals_default();
	if (setsid() < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
		goto fail;
	/* Nothing of the helper's but the three: the port above all. */
	for (int fd = 3; fd < 1024; fd++)
		if (fd != status)
			close(fd);
	/* The user's processes are the OOM killer's to choose, as under sshd; the helper is not (serve_main). */
	if (write_file("/proc/self/oom_score_adj", "0") < 0)
		goto fail;
	if (setgroups((size_t)x->u.ngroups, x->u.groups) < 0 || setresgid(x->u.gid, x->u.gid, x->u.gid) < 0 ||
	    setresuid(x->u.uid, x->u.uid, x->u.uid) < 0 || getuid() != x->u.uid || geteuid() != x->u.uid)
		goto fail;
	umask(022);
	if (chdir(x->u.home) < 0 && chdir("/") < 0)
		goto fail;
	snprintf(home, sizeof(home), "HOME=%s", x->u.home);
	snprintf(user, sizeof(user), "USER=%s", AAS_FILES_USER);
	snprintf(logname, sizeof(logname), "LOGNAME=%s", AAS_FILES_USER);
	snprintf(mail, sizeof(mail), "MAIL=/var/mail/%s", AAS_FILES_USER);
	snprintf(shell, sizeof(shell), "SHELL=%s", x->u.shell);
	envp[0] = user;
	envp[1] = logname;
	envp[2] = home;
	envp[3] = (char *)"PATH=" AAS_EXEC_PATH;
	envp[4] = mail;
	envp[5] = shell;
	envp[6] = NULL;
	if (x->run && x->bashrc >= 0) {
		int shell = -1;
		run_plain(x, envp);
		/* Back here: the shell runs the script after all, and the helper is told (its traps are the shell's then). */
		if (write(status, &shell, sizeof(shell)) < 0)
			goto fail;
	}
	argv0 = strrchr(x->u.shell, '/');
	argv[0] = argv0 ? argv0 + 1 : x->u.shell;
	argv[1] = (char *)"-c";
	if (strcmp(argv[0], "bash") == 0) {
		/* $0 stays "bash" and $# 0, as under sshd. */
		argv[2] = (char *)bash_prelude;
		argv[3] = argv[0];
		argv[4] = (char *)script;
		argv[5] = NULL;
	} else {
		argv[2] = (char *)script;
		argv[3] = NULL;
	}
	execve(x->u.shell, argv, envp);
fail:
	e = errno;
	if (write(status, &e, sizeof(e)) < 0) {
		/* the helper reads EOF then, and says the command could not start */
	}
	_exit(127);
}

/*
 * aas_bashrc_kind of the user's ~/.bashrc now, read with the user's identity
 * (one bash could not read is bash's to report), -1 unless the user's shell
 * is bash. Remembered by the file's identity and times: a command does not
 * read it again unless it changed.
 */
static int bashrc_now(const struct user *u)
{
	static struct stat seen;
	static int kind = -1;
	static bool known;
	char path[300], *rc = NULL, *skel = NULL;
	size_t n = 0, sn = 0;
	struct stat st;
	int k = -1;

	if (strcmp(u->shell, "/bin/bash") != 0 && strcmp(u->shell, "/usr/bin/bash") != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/.bashrc", u->home);
	if (user_enter() < 0) {
		user_leave();
		return -1;
	}
	if (stat(path, &st) < 0) {
		k = errno == ENOENT ? 0 : -1;
	} else if (known && st.st_dev == seen.st_dev && st.st_ino == seen.st_ino && st.st_size == seen.st_size &&
	           st.st_mode == seen.st_mode && st.st_mtim.tv_sec == seen.st_mtim.tv_sec &&
	           st.st_mtim.tv_nsec == seen.st_mtim.tv_nsec && st.st_ctim.tv_sec == seen.st_ctim.tv_sec &&
	           st.st_ctim.tv_nsec == seen.st_ctim.tv_nsec) {
		k = kind;
	} else if (S_ISREG(st.st_mode) && st.st_size < 65536 && (rc = file_slurp(path, &n)) &&
	           (skel = file_slurp("/etc/skel/.bashrc", &sn))) {
		k = kind = aas_bashrc_kind(rc, n, skel, sn);
		seen = st;
		known = true;
	}
	user_leave();
	free(rc);
	free(skel);
	return k;
}

/* Start the shell; 0, or -1 with errno (nothing left running). */
static int exec_start(struct xrun *x, const char *script)
{
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, err[2] = { -1, -1 }, st[2] = { -1, -1 }, e = 0;
	ssize_t n;

	if (user_lookup(&x->u) < 0) {
		errno = ENOENT;
		return -1;
	}
	x->bashrc = x->run ? bashrc_now(&x->u) : -1;
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
	    pipe2(st, O_CLOEXEC) < 0)
		goto fail;
	if ((x->pid = fork()) < 0)
		goto fail;
	if (x->pid == 0)
		exec_child(x, script, in[0], out[1], err[1], st[1]);
	close(in[0]);
	close(out[1]);
	close(err[1]);
	close(st[1]);
	in[0] = out[1] = err[1] = st[1] = -1;
	/* EOF: the shell (or a run's command) runs (close-on-exec); an errno: it could not; -1 first: a run went to the shell. */
	x->plain = x->run && x->bashrc >= 0;
	while ((n = read(st[0], &e, sizeof(e))) < 0 && errno == EINTR)
		;
	if (n == (ssize_t)sizeof(e) && e == -1) {
		x->plain = false;
		while ((n = read(st[0], &e, sizeof(e))) < 0 && errno == EINTR)
			;
	}
	close(st[0]);
	if (n == (ssize_t)sizeof(e)) {
		while (waitpid(x->pid, NULL, 0) < 0 && errno == EINTR)
			;
		close(in[1]);
		close(out[0]);
		close(err[0]);
		errno = e;
		return -1;
	}
	x->in = in[1];
	x->out = out[0];
	x->err = err[0];
	fcntl(x->in, F_SETFL, O_NONBLOCK);
	fcntl(x->out, F_SETFL, O_NONBLOCK);
	fcntl(x->err, F_SETFL, O_NONBLOCK);
#ifdef SYS_pidfd_open
	x->pidfd = (int)syscall(SYS_pidfd_open, x->pid, 0);
#endif
	return 0;
fail:
	e = errno;
	for (int i = 0; i < 2; i++) {
		fd_close(&in[i]);
		fd_close(&out[i]);
		fd_close(&err[i]);
		fd_close(&st[i]);
	}
	errno = e;
	return -1;
}

/* One /proc/PID/stat's ppid and session: false when it is gone or unreadable. */
static bool proc_stat(pid_t pid, pid_t *ppid, pid_t *sid)
{
	char path[64], buf[512], *p;
	long pp, pg, se;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* "PID (COMM) STATE PPID PGRP SESSION ...": the command name may hold anything but the last ')'. */
	if (!(p = strrchr(buf, ')')) || sscanf(p + 1, " %*c %ld %ld %ld", &pp, &pg, &se) != 3)
		return false;
	*ppid = (pid_t)pp;
	*sid = (pid_t)se;
	return true;
}

/*
 * Kill all the command started, as the user: its process group stopped, then
 * what left the group (the rest of its session, and the descendants of any of
 * them: a child that called setsid) found in /proc, stopped, and all killed.
 */
static void kill_all(pid_t pid)
{
	static pid_t found[EXEC_SCAN_MAX];
	size_t n = 0;
	bool more = true;

	kill(-pid, SIGSTOP);
	found[n++] = pid;
	for (int round = 0; more && round < EXEC_SCAN_ROUNDS; round++) {
		DIR *dir = opendir("/proc");
		struct dirent *e;
		more = false;
		if (!dir)
			break;
		while ((e = readdir(dir)) && n < EXEC_SCAN_MAX) {
			pid_t p = (pid_t)atoi(e->d_name), ppid, sid;
			bool known = false;
			if (p <= 1)
				continue;
			for (size_t i = 0; i < n && !known; i++)
				known = found[i] == p;
			if (known || !proc_stat(p, &ppid, &sid))
				continue;
			for (size_t i = 0; i < n && !known; i++)
				known = found[i] == ppid;
			if (known || sid == pid) {
				found[n++] = p;
				kill(p, SIGSTOP);
				more = true;
			}
		}
		closedir(dir);
	}
	kill(-pid, SIGKILL);
	for (size_t i = 0; i < n; i++)
		kill(found[i], SIGKILL);
}

/* A signal (sig > 0: to the shell, or its group when group) or the kill (sig 0), sent as the user. */
static void exec_signal(struct xrun *x, int sig, bool group)
{
	pid_t k = fork();

	if (k == 0) {
		if (setgroups((size_t)x->u.ngroups, x->u.groups) < 0 || setresgid(x->u.gid, x->u.gid, x->u.gid) < 0 ||
		    setresuid(x->u.uid, x->u.uid, x->u.uid) < 0)
			_exit(1);
		if (sig == 0)
			kill_all(x->pid);
		else
			kill(group ? -x->pid : x->pid, sig);
		_exit(0);
	}
	if (k > 0)
		while (waitpid(k, NULL, 0) < 0 && errno == EINTR)
			;
}

/*
 * A signal for a run's command with no shell, as the script's shell would
 * have taken it: one of the signals it traps (`exit 128+N`, ssh_exec.c)
 * makes the status 128+N once the command ends (the shell runs a trap only
 * then); sent to the shell alone, the command never saw it. Others go where
 * they were sent: to the shell alone, that is the command here.
 */
static void exec_signal_plain(struct xrun *x, int sig, bool group)
{
	static const int trapped[] = { SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGALRM, SIGTERM };
	bool traps = false;

	for (size_t i = 0; x->plain && i < sizeof(trapped) / sizeof(trapped[0]); i++)
		traps = traps || trapped[i] == sig;
	if (traps && !x->trapped)
		x->trapped = 128 + sig;
	if (!traps)
		x->shell_hit = true;
	if (!traps || group)
		exec_signal(x, sig, group);
}

/* Has the shell exited? Its status, reaped, into x. */
static bool exec_reap(struct xrun *x, bool block)
{
	int st;
	pid_t r;

	if (x->exited)
		return true;
	while ((r = waitpid(x->pid, &st, block ? 0 : WNOHANG)) < 0 && errno == EINTR)
		;
	if (r != x->pid)
		return false;
	x->exited = true;
	x->status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 255;
	/* A trapped signal came (exec_signal_plain): the shell's trap would have said so, unless it was killed too. */
	if (x->trapped && !(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL))
		x->status = x->trapped;
	/* Killed by a signal with no shell: what the shell would have said of it, unless it died with it. */
	if (x->plain && WIFSIGNALED(st) && !x->shell_hit)
		aas_bash_signal_note(x->note, sizeof(x->note), WTERMSIG(st), WCOREDUMP(st), (long)x->pid, x->run->argv);
	fd_close(&x->pidfd);
	return true;
}

/* Up to one frame of a pipe's bytes to the port: 1 sent, 0 nothing there now, -1 its end (or the port's loss). */
static int exec_forward(struct xrun *x, int *fd, unsigned int type, unsigned char *buf)
{
	ssize_t n = read(*fd, buf, CONTROL_EXEC_FRAME_MAX);

	if (n > 0) {
		if (!frame_send(x, type, buf, (size_t)n))
			x->broken = true;
		return x->broken ? -1 : 1;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	fd_close(fd);
	return -1;
}

/* Stdin the engine sent, into the command as it takes it; what it took goes back to the window. */
static void exec_feed(struct xrun *x)
{
	size_t took = 0;

	while (x->in >= 0 && x->in_off < x->in_len) {
		ssize_t w = write(x->in, x->inbuf + x->in_off, x->in_len - x->in_off);
		if (w > 0) {
			x->in_off += (size_t)w;
			took += (size_t)w;
		} else if (w < 0 && errno == EINTR) {
			continue;
		} else if (w < 0 && errno == EAGAIN) {
			break;
		} else {
			/* The command closed its stdin: the rest is dropped, and given back all the same. */
			took += x->in_len - x->in_off;
			x->in_off = x->in_len;
			fd_close(&x->in);
		}
	}
	if (x->in_off == x->in_len) {
		x->in_off = x->in_len = 0;
		if (x->in_eof)
			in_close(x);
	}
	if (took && !x->exited && !frame_send_u32(x, CTL_X_TOOK, (uint32_t)took))
		x->broken = true;
}

/* The frames the port brought, in x->rbuf: false when the stream broke the protocol (the exec ends). */
static bool exec_frames(struct xrun *x)
{
	while (x->r_len - x->r_off >= 4) {
		const unsigned char *h = x->rbuf + x->r_off;
		unsigned int type = h[0];
		size_t len = (size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3];
		const unsigned char *data = h + 4;
		if (type > CTL_X_KILL || len > CONTROL_EXEC_FRAME_MAX) {
			x->lost = true; /* another connection's request, most likely: given back to the line reader */
			return false;
		}
		if (x->r_len - x->r_off < 4 + len)
			break;
		x->r_off += 4 + len;
		switch (type) {
		case CTL_X_END:
			x->ended = true;
			return true;
		case CTL_X_IN:
			if (x->exited)
				break;
			if (x->in < 0) {
				/* The command closed its stdin: dropped, and the window given back. */
				if (len && !frame_send_u32(x, CTL_X_TOOK, (uint32_t)len))
					x->broken = true;
				break;
			}
			if (x->in_len + len > CONTROL_EXEC_WINDOW) {
				if (x->in_off) {
					memmove(x->inbuf, x->inbuf + x->in_off, x->in_len - x->in_off);
					x->in_len -= x->in_off;
					x->in_off = 0;
				}
				if (x->in_len + len > CONTROL_EXEC_WINDOW) {
					x->lost = true; /* more than the window: not our engine's */
					return false;
				}
			}
			memcpy(x->inbuf + x->in_len, data, len);
			x->in_len += len;
			break;
		case CTL_X_EOF:
			x->in_eof = true;
			if (x->in_off == x->in_len)
				in_close(x);
			break;
		case CTL_X_SIGNAL:
			/* A connection has no process to signal (and pid -1 must never reach kill). */
			if (len == 2 && data[0] >= 1 && data[0] <= 64 && !x->exited && !x->conn)
				exec_signal_plain(x, data[0], data[1] != 0);
			break;
		case CTL_X_KILL:
			if (x->conn) {
				fd_close(&x->in);
				fd_close(&x->out); /* conn_run says EXIT */
			} else if (!x->exited) {
				x->shell_hit = true;
				x->killed = true;
				exec_signal(x, 0, false);
			}
			break;
		}
	}
	if (x->r_off == x->r_len)
		x->r_off = x->r_len = 0;
	return true;
}

/* Read what the port has: false when its stream broke the protocol. */
static bool exec_port_read(struct xrun *x)
{
	ssize_t n;

	if (x->r_off) {
		memmove(x->rbuf, x->rbuf + x->r_off, x->r_len - x->r_off);
		x->r_len -= x->r_off;
		x->r_off = 0;
	}
	n = read(x->port, x->rbuf + x->r_len, CONTROL_EXEC_FRAME_MAX + 4 - x->r_len);
	if (n > 0) {
		x->r_len += (size_t)n;
		return exec_frames(x);
	}
	if (n == 0)
		clock_gettime(CLOCK_MONOTONIC, &x->gone); /* no host end now: looked at again in a while */
	else if (errno != EAGAIN && errno != EINTR)
		x->broken = true;
	return true;
}

/*
 * The pipes left to whatever still holds them (a command detached, what an
 * exited one left behind): a drainer (a grandchild, so that init reaps it)
 * reads and drops what comes until they close, and the helper's ends close.
 */
static void drain_away(struct xrun *x, unsigned char *buf)
{
	pid_t k;

	if (x->out < 0 && x->err < 0)
		return;
	if ((k = fork()) == 0) {
		if (fork() == 0) {
			struct pollfd p[2] = { { x->out, POLLIN, 0 }, { x->err, POLLIN, 0 } };
			for (int fd = 0; fd < 1024; fd++)
				if (fd != x->out && fd != x->err)
					close(fd);
			/* The user's, as the SSH wrapper's cat is: its processes count, and it can end it. */
			if (setsid() < 0 || write_file("/proc/self/oom_score_adj", "0") < 0 || setgroups((size_t)x->u.ngroups, x->u.groups) < 0 ||
			    setresgid(x->u.gid, x->u.gid, x->u.gid) < 0 || setresuid(x->u.uid, x->u.uid, x->u.uid) < 0)
				_exit(1);
			while ((p[0].fd >= 0 || p[1].fd >= 0) && poll(p, 2, -1) >= 0)
				for (int i = 0; i < 2; i++)
					if (p[i].fd >= 0 && p[i].revents) {
						fcntl(p[i].fd, F_SETFL, 0);
						if (read(p[i].fd, buf, CONTROL_EXEC_FRAME_MAX) <= 0) {
							close(p[i].fd);
							p[i].fd = -1;
						}
					}
			_exit(0);
		}
		_exit(0);
	}
	if (k > 0)
		while (waitpid(k, NULL, 0) < 0 && errno == EINTR)
			;
	fd_close(&x->out);
	fd_close(&x->err);
}

/* The pipes after the shell's exit: what they hold now is the command's, forwarded; then the drainer for the rest. */
static void exec_drain(struct xrun *x, unsigned char *buf)
{
	while (x->out >= 0 && exec_forward(x, &x->out, CTL_X_OUT, buf) > 0)
		;
	while (x->err >= 0 && exec_forward(x, &x->err, CTL_X_ERR, buf) > 0)
		;
	drain_away(x, buf);
}

/* The engine lost the command's stream: it runs on without it (see "Only the engine kills a command" above). */
static void exec_detach(struct xrun *x, unsigned char *buf)
{
	fd_close(&x->in);
	drain_away(x, buf);
	fd_close(&x->pidfd);
	LOG("control: a command's stream was lost (its connection went away): it runs on, its output dropped");
}

/* Kill what still runs (the engine's KILL came) and reap the shell if it goes within EXEC_END_WAIT_MS. */
static void exec_stop(struct xrun *x)
{
	if (!x->exited) {
		exec_signal(x, 0, false);
		for (int i = 0; i < EXEC_END_WAIT_MS / 10 && !exec_reap(x, false); i++)
			usleep(10000);
		/* One that does not go (stuck in the kernel) is left to the serve loop's reaping. */
	}
	fd_close(&x->in);
	fd_close(&x->out);
	fd_close(&x->err);
	fd_close(&x->pidfd);
}

/* The port in the poll set, unless its host end went away a moment ago (then the wait is EXEC_GONE_MS): its index, or -1. */
static int port_poll(struct xrun *x, struct pollfd *p, int *n, int *wait)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (x->gone.tv_sec && ms_between(&x->gone, &now) >= EXEC_GONE_MS)
		x->gone.tv_sec = 0;
	if (x->gone.tv_sec) {
		*wait = EXEC_GONE_MS;
		return -1;
	}
	p[*n] = (struct pollfd){ x->port, POLLIN, 0 };
	return (*n)++;
}

static void exec_run(struct xrun *x)
{
	unsigned char *buf = malloc(CONTROL_EXEC_FRAME_MAX);
	bool said_exit = false;

	if (!buf) {
		exec_stop(x);
		return;
	}
	while (!x->ended && !x->broken && !x->lost) {
		struct pollfd p[5];
		int n = 0, ip, io = -1, ie = -1, ix = -1, ii = -1, wait = -1;

		ip = port_poll(x, p, &n, &wait);
		if (!x->exited) {
			if (x->out >= 0) {
				io = n;
				p[n++] = (struct pollfd){ x->out, POLLIN, 0 };
			}
			if (x->err >= 0) {
				ie = n;
				p[n++] = (struct pollfd){ x->err, POLLIN, 0 };
			}
			if (x->in >= 0 && x->in_off < x->in_len) {
				ii = n;
				p[n++] = (struct pollfd){ x->in, POLLOUT, 0 };
			}
			if (x->pidfd >= 0) {
				ix = n;
				p[n++] = (struct pollfd){ x->pidfd, POLLIN, 0 };
			} else {
				wait = 10; /* no pidfd (an old kernel): its exit is looked for this often */
			}
		}
		if (poll(p, (nfds_t)n, wait) < 0 && errno != EINTR) {
			x->broken = true;
			break;
		}
		if (ip >= 0 && (p[ip].revents & (POLLIN | POLLHUP | POLLERR)) && !exec_port_read(x))
			break;
		if (ii >= 0 && p[ii].revents)
			exec_feed(x);
		else if (x->in >= 0 && x->in_off < x->in_len && !x->exited)
			exec_feed(x); /* a frame just read */
		if (io >= 0 && p[io].revents)
			exec_forward(x, &x->out, CTL_X_OUT, buf);
		if (ie >= 0 && p[ie].revents)
			exec_forward(x, &x->err, CTL_X_ERR, buf);
		if (!x->exited && ((ix >= 0 && p[ix].revents) || x->pidfd < 0) && exec_reap(x, ix >= 0)) {
			exec_drain(x, buf);
			fd_close(&x->in);
			if (x->note[0] && !frame_send(x, CTL_X_ERR, x->note, strlen(x->note)))
				x->broken = true;
			if (!frame_send_u32(x, CTL_X_EXIT, (uint32_t)x->status))
				x->broken = true;
			said_exit = true;
		}
	}
	if (said_exit || x->killed)
		exec_stop(x); /* nothing more (what it left behind has the drainer), or the engine's kill made sure of */
	else
		exec_detach(x, buf);
	free(buf);
	if (x->ended)
		frame_send(x, CTL_X_DONE, NULL, 0);
}

/*
 * What a lost stream read past its frames (a request line, most likely),
 * into left (CONTROL_EXEC_FRAME_MAX + 4 bytes): its length, for the line
 * reader; 0 when the stream was not lost.
 */
static size_t give_back(const struct xrun *x, char *left)
{
	size_t n = x->lost && x->rbuf ? x->r_len - x->r_off : 0;

	if (n)
		memmove(left, x->rbuf + x->r_off, n);
	return n;
}

/*
 * exec (or run): the script, the shell (or the command) started, "ready",
 * then the command's frames until the engine's END, or until the stream is
 * lost (what it read past its frames into left: its length returned).
 */
static size_t exec_serve(int port, const struct aas_file_req *q, const char *pre, size_t pre_len, char *left)
{
	size_t kept = 0;
	struct xfer xf = { port, pre, pre_len, q };
	struct xrun x = { .port = port, .pid = -1, .pidfd = -1, .in = -1, .out = -1, .err = -1, .bashrc = -1 };
	struct aas_run run;
	char *script = malloc(q->path_len + 1);

	x.inbuf = malloc(CONTROL_EXEC_WINDOW);
	x.rbuf = malloc(CONTROL_EXEC_FRAME_MAX + 4);
	if (!script || !x.inbuf || !x.rbuf) {
		/* The script is read all the same: the stream must stay in step. */
		char sink[4096];
		for (size_t left = q->path_len; left;) {
			size_t take = left < sizeof(sink) ? left : sizeof(sink);
			if (!port_read(&xf, sink, take))
				break;
			left -= take;
		}
		port_say(port, "error %s %d out of memory", q->nonce, ENOMEM);
		goto out;
	}
	if (!port_read(&xf, script, q->path_len))
		goto out;
	script[q->path_len] = '\0';
	if (q->kind == AAS_REQ_RUN) {
		const char *why;
		if (aas_run_parse(script, q->path_len, &run, &why) < 0) {
			port_say(port, "error %s %d %s", q->nonce, EINVAL, why);
			goto out;
		}
		x.run = &run;
	} else if (memchr(script, '\0', q->path_len)) {
		port_say(port, "error %s %d the script holds a NUL", q->nonce, EINVAL);
		goto out;
	}
	if (exec_start(&x, x.run ? x.run->script : script) < 0) {
		port_say(port, "error %s %d starting the shell: %s", q->nonce, errno, strerror(errno));
		goto out;
	}
	if (!port_say(port, "ready %s", q->nonce)) {
		exec_stop(&x);
		goto out;
	}
	/* What the line reader read past the script is the first frames'. */
	memcpy(x.rbuf, xf.pre, xf.pre_len);
	x.r_len = xf.pre_len;
	exec_frames(&x);
	exec_run(&x);
	kept = give_back(&x, left);
out:
	free(script);
	free(x.inbuf);
	free(x.rbuf);
	return kept;
}

/* ---- port connections ------------------------------------------------------------------------ */

/*
 * A connection to 127.0.0.1:PORT, carried by the exec's frames: the socket is
 * both the command's stdin (the engine's bytes, written as the port takes
 * them, within the window) and its stdout (the port's bytes, read only once
 * the port took what came before). Loopback only: the request holds a port,
 * never an address. The socket is made with the sandbox user's filesystem
 * identity, so the kernel records it as the user's (its owner uid in
 * /proc/net/tcp, nftables' skuid): the same connection sshd's forward would
 * make for that user, with no shell run for it. EXIT (status 0) once the
 * port's side ended its bytes (its close or half-close: the rest of the
 * engine's are not wanted then), DONE after END.
 */
static int conn_open(unsigned int port)
{
	struct sockaddr_in a;
	struct pollfd p;
	int fd, e = 0, n;
	socklen_t len = sizeof(e);

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (user_enter() < 0) {
		e = errno;
		user_leave();
		errno = e;
		return -1;
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	e = errno;
	user_leave();
	if (fd < 0) {
		errno = e;
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
		return fd;
	if (errno != EINPROGRESS)
		goto fail;
	p = (struct pollfd){ fd, POLLOUT, 0 };
	while ((n = poll(&p, 1, CONTROL_CONNECT_MS)) < 0 && errno == EINTR)
		;
	if (n <= 0) {
		errno = n == 0 ? ETIMEDOUT : errno;
		goto fail;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
		goto fail;
	if (e == 0)
		return fd;
	errno = e;
fail:
	e = errno;
	close(fd);
	errno = e;
	return -1;
}

static void conn_run(struct xrun *x)
{
	unsigned char *buf = malloc(CONTROL_EXEC_FRAME_MAX);

	if (!buf) {
		x->broken = true;
		return;
	}
	while (!x->ended && !x->broken && !x->lost) {
		struct pollfd p[3];
		int n = 0, ip, io = -1, ii = -1, wait = -1;

		ip = port_poll(x, p, &n, &wait);
		if (x->out >= 0) {
			io = n;
			p[n++] = (struct pollfd){ x->out, POLLIN, 0 };
		}
		if (x->in >= 0 && x->in_off < x->in_len) {
			ii = n;
			p[n++] = (struct pollfd){ x->in, POLLOUT, 0 };
		}
		if (poll(p, (nfds_t)n, wait) < 0 && errno != EINTR) {
			x->broken = true;
			break;
		}
		if (ip >= 0 && (p[ip].revents & (POLLIN | POLLHUP | POLLERR)) && !exec_port_read(x))
			break;
		if ((ii >= 0 && p[ii].revents) || (x->in >= 0 && x->in_off < x->in_len && !x->exited))
			exec_feed(x);
		if (io >= 0 && p[io].revents && x->out >= 0)
			exec_forward(x, &x->out, CTL_X_OUT, buf);
		if (x->out < 0 && !x->exited) {
			x->exited = true;
			fd_close(&x->in);
			if (!frame_send_u32(x, CTL_X_EXIT, 0))
				x->broken = true;
		}
	}
	free(buf);
	fd_close(&x->in);
	fd_close(&x->out);
	if (x->ended)
		frame_send(x, CTL_X_DONE, NULL, 0);
	else
		LOG("control: a connection's stream was lost (its connection went away): it was closed");
}

/* connect: the port opened (or the error), "ready", then the connection's frames until the engine's END (as exec_serve). */
static size_t conn_serve(int port, const struct aas_file_req *q, const char *pre, size_t pre_len, char *left)
{
	size_t kept = 0;
	struct xrun x = { .port = port, .pid = -1, .pidfd = -1, .in = -1, .out = -1, .err = -1, .conn = true };
	int e;

	x.inbuf = malloc(CONTROL_EXEC_WINDOW);
	x.rbuf = malloc(CONTROL_EXEC_FRAME_MAX + 4);
	if (!x.inbuf || !x.rbuf) {
		port_say(port, "error %s %d out of memory", q->nonce, ENOMEM);
		goto out;
	}
	if ((x.in = conn_open(q->port)) < 0 || (x.out = fcntl(x.in, F_DUPFD_CLOEXEC, 0)) < 0) {
		e = errno;
		fd_close(&x.in);
		port_say(port, "error %s %d connecting to port %u: %s", q->nonce, e, q->port, strerror(e));
		goto out;
	}
	if (!port_say(port, "ready %s", q->nonce))
		goto out;
	/* What the line reader read past the line is the first frames'. */
	memcpy(x.rbuf, pre, pre_len);
	x.r_len = pre_len;
	if (exec_frames(&x))
		conn_run(&x);
	kept = give_back(&x, left);
out:
	fd_close(&x.in);
	fd_close(&x.out);
	free(x.inbuf);
	free(x.rbuf);
	return kept;
}

struct serve {
	int fd;
	struct timespec window;        /* the second the last requests were counted in */
	unsigned int served;
	bool pending;                  /* a put or get line was read: its bytes follow (q) */
	struct aas_file_req q;
};

static int serve_line(const char *line, size_t len, bool overlong, void *ud)
{
	struct serve *s = ud;
	struct aas_fixup f;
	struct timespec now;
	const char *why = "line too long";
	char out[128];

	if (!overlong && aas_request_kind(line, len) > AAS_REQ_FIXUP) {
		/* Files and commands: the engine's, not rate-bound (each waits for the one before). */
		if (aas_files_parse(line, len, &s->q, &why) < 0) {
			snprintf(out, sizeof(out), "error %s %d %s\n", s->q.nonce[0] ? s->q.nonce : "-", EINVAL, why);
			LOG("control: refused a request: %s", why);
		} else if (s->q.kind == AAS_REQ_FILES || ((s->q.kind == AAS_REQ_EXEC || s->q.kind == AAS_REQ_RUN) && s->q.path_len == 0) ||
		           (s->q.kind == AAS_REQ_CONNECT && s->q.port == 0)) {
			/* The probes: this helper serves files, commands (with no shell too), and connections. */
			snprintf(out, sizeof(out), "ok %s\n", s->q.nonce);
		} else {
			s->pending = true;
			return 1; /* what follows the line is the request's own bytes */
		}
		reply(s->fd, out);
		return 0;
	}
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (now.tv_sec != s->window.tv_sec) {
		s->window = now;
		s->served = 0;
	}
	/* Rate: past AAS_CONTROL_RATE_MAX in one second, the next request waits for the next second. */
	if (++s->served > AAS_CONTROL_RATE_MAX) {
		struct timespec rest = { 0, 1000000000L - now.tv_nsec };
		nanosleep(&rest, NULL);
		clock_gettime(CLOCK_MONOTONIC, &s->window);
		s->served = 1;
	}
	if (overlong) {
		snprintf(out, sizeof(out), "error - %s\n", why);
		LOG("control: refused a request: %s", why);
	} else if (aas_control_parse(line, len, &f, &why) < 0) {
		snprintf(out, sizeof(out), "error %s %s\n", f.nonce[0] ? f.nonce : "-", why);
		LOG("control: refused a request: %s", why);
	} else if ((why = apply(&f))) {
		snprintf(out, sizeof(out), "error %s %s\n", f.nonce, why);
		LOG("control: %s", why);
	} else {
		snprintf(out, sizeof(out), "ok %s\n", f.nonce);
	}
	reply(s->fd, out);
	return 0;
}

/*
 * Serve the port. A virtio-serial read returns 0 at once, every time, while
 * no host end is connected (and poll says readable): reading in a loop would
 * spin a vCPU in every idle sandbox and template. So a 0 parks the helper in
 * sigtimedwait for SIGIO, which the port raises (O_ASYNC) when the host end
 * connects or data comes; SIGIO stays blocked, so one raised between the read
 * and the wait is still pending, never lost. With the host connected and no
 * data, the read says EAGAIN and poll blocks.
 */
static int serve_main(void)
{
	struct serve s = { .fd = -1 };
	struct aas_lines lines = { .len = 0 };
	/* A read's 512 bytes, or what a lost command's stream read past its frames (exec_serve's left). */
	static char buf[CONTROL_EXEC_FRAME_MAX + 4];
	char dev[300];
	size_t carried = 0;
	sigset_t io, child;
	int chld;

	/* SIGCHLD too (and a signalfd of it while the port is idle): a detached command's shell is reaped as it ends. */
	sigemptyset(&child);
	sigaddset(&child, SIGCHLD);
	sigemptyset(&io);
	sigaddset(&io, SIGIO);
	sigaddset(&io, SIGCHLD);
	sigprocmask(SIG_BLOCK, &io, NULL);
	chld = signalfd(-1, &child, SFD_NONBLOCK | SFD_CLOEXEC);
	/* A command that closed its stdin is no reason for the helper to die. */
	signal(SIGPIPE, SIG_IGN);
	/*
	 * Nor is a tenant that fills the guest's memory: the OOM killer never
	 * picks the helper (sshd protects itself the same way), and what it
	 * starts for the user is back at 0.
	 */
	if (write_file("/proc/self/oom_score_adj", "-1000") < 0)
		LOG("control: cannot protect the helper from the OOM killer: %s", strerror(errno));
	for (int i = 0; port_find(dev, sizeof(dev)) < 0; i++) {
		if (i == PORT_WAIT_S * 10) {
			LOG("control: no port %s: clones get their fix-ups over SSH", CONTROL_PORT_NAME);
			return 0;
		}
		usleep(100000);
	}
	if ((s.fd = open(dev, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0 || fcntl(s.fd, F_SETOWN, getpid()) < 0 ||
	    fcntl(s.fd, F_SETFL, O_NONBLOCK | O_ASYNC) < 0) {
		LOG("control: cannot open %s: %s", dev, strerror(errno));
		return 1;
	}
	for (;;) {
		/* A command's shell that outlived its kill, or a detached one, is reaped once it goes (SIGCHLD wakes the poll). */
		ssize_t n = aas_serve_read(s.fd, buf, 512, carried);
		carried = 0;
		if (n > 0) {
			size_t used = aas_lines_feed(&lines, buf, (size_t)n, serve_line, &s);
			if (s.pending) {
				/* The transfer (or the command) reads the rest itself. */
				if (s.q.kind == AAS_REQ_EXEC || s.q.kind == AAS_REQ_RUN)
					carried = exec_serve(s.fd, &s.q, buf + used, (size_t)n - used, buf);
				else if (s.q.kind == AAS_REQ_CONNECT)
					carried = conn_serve(s.fd, &s.q, buf + used, (size_t)n - used, buf);
				else
					files_serve(s.fd, &s.q, buf + used, (size_t)n - used);
				s.pending = false;
				aas_lines_reset(&lines);
			}
		} else if (n == 0) {
			struct timespec wait = { IDLE_RECHECK_S, 0 };
			aas_lines_reset(&lines);
			sigtimedwait(&io, NULL, &wait);
		} else if (errno == EAGAIN) {
			struct pollfd p[2] = { { s.fd, POLLIN, 0 }, { chld, POLLIN, 0 } };
			struct signalfd_siginfo si;
			poll(p, chld >= 0 ? 2 : 1, IDLE_RECHECK_S * 1000);
			while (chld >= 0 && read(chld, &si, sizeof(si)) > 0)
				;
		} else if (errno != EINTR) {
			LOG("control: reading %s: %s", dev, strerror(errno));
			sleep(1);
		}
	}
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--restored") == 0)
		return restored_main();
	if (argc == 1)
		return serve_main();
	fputs("usage: aas-control [--restored]\n", stderr);
	return 2;
}

#endif /* AAS_CONTROL_NO_MAIN */
