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
 * The protocol, one line each way (at most AAS_CONTROL_LINE_MAX bytes with '\n'):
 *   engine: fixup NONCE HOSTNAME SECONDS[.NANOS] HEX_SEED
 *   guest:  ok NONCE            or: error NONCE WHAT
 * NONCE is 16 hex digits the engine chose for this request.
 *
 *   aas-control              serve the port (aas-init starts it in the background)
 *   aas-control --restored   the same fix-ups for an SSH forced command: reads
 *                            "HOSTNAME SECONDS HEX_SEED" from SSH_ORIGINAL_COMMAND,
 *                            prints "ok" (the path of engines and images that
 *                            have no control port)
 *
 * Built static by images/build; tests/unit/test_control.c compiles the parser
 * with AAS_CONTROL_NO_MAIN.
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
#include <sys/fsuid.h>
#include <sys/random.h>
#include <sys/stat.h>
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
	if (n < 1 || n > AAS_CONTROL_HOSTNAME_MAX || s[0] == '-')
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
	if (n < AAS_CONTROL_SEED_MIN || n > AAS_CONTROL_SEED_MAX || n % 2)
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

/* The next word as a nonce into out (AAS_CONTROL_NONCE_LEN + 1 bytes): 16 hex digits. */
static bool nonce_parse(const char **p, const char *end, char *out)
{
	size_t len;
	const char *w = next_word(p, end, &len);

	if (!w || len != AAS_CONTROL_NONCE_LEN)
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
	} verbs[] = { { "fixup", AAS_REQ_FIXUP }, { "files", AAS_REQ_FILES }, { "put", AAS_REQ_PUT }, { "get", AAS_REQ_GET } };
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
	if (n >= AAS_CONTROL_LINE_MAX || (out->kind = aas_request_kind(line, n)) < 0 || out->kind == AAS_REQ_FIXUP)
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
	if (out->kind != AAS_REQ_FILES) {
		*why = "bad path length";
		if (!(w = next_word(&p, end, &len)) || !decimal_parse(w, len, 9, &v) || v < 1 || v > AAS_FILES_PATH_MAX)
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
	if (n >= AAS_CONTROL_LINE_MAX || !(w = next_word(&p, end, &len)) || len != 5 || memcmp(w, "fixup", 5) != 0)
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
		char line[AAS_CONTROL_HOSTNAME_MAX + 2];
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
	char line[AAS_CONTROL_LINE_MAX];
	struct aas_fixup f;
	const char *why;

	/* The same parser: the SSH form is a request without its verb and nonce. */
	if (!cmd || strlen(cmd) > AAS_CONTROL_LINE_MAX - 40) {
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

/* /dev/vportNpM of the port named AAS_CONTROL_PORT_NAME (no udev here to make /dev/virtio-ports/). */
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
		if (n > 0 && strcmp(name, AAS_CONTROL_PORT_NAME) == 0) {
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
	char line[AAS_CONTROL_LINE_MAX];
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

/*
 * The sandbox user's uid, gid and supplementary groups, read from /etc/passwd
 * and /etc/group: a static helper has no NSS, and the tiny image no libc to
 * load one from. 0, or -1 when the user is not there.
 */
static int user_lookup(uid_t *uid, gid_t *gid, gid_t *groups, int *ngroups)
{
	char *line = NULL;
	size_t cap = 0;
	bool found = false;
	FILE *f;

	*ngroups = 0;
	if (!(f = fopen("/etc/passwd", "re")))
		return -1;
	while (!found && getline(&line, &cap, f) > 0) {
		unsigned long u, g;
		char *p = line, *name = strsep(&p, ":");
		if (strcmp(name, AAS_FILES_USER) != 0 || !strsep(&p, ":") || !p)
			continue;
		if (sscanf(p, "%lu:%lu:", &u, &g) == 2) {
			*uid = (uid_t)u;
			*gid = (gid_t)g;
			found = u != 0;
		}
	}
	fclose(f);
	if (found && (f = fopen("/etc/group", "re"))) {
		while (*ngroups < USER_GROUPS_MAX && getline(&line, &cap, f) > 0) {
			char *p = line, *m, *gidtext;
			unsigned long g;
			line[strcspn(line, "\n")] = '\0';
			if (!strsep(&p, ":") || !strsep(&p, ":") || !(gidtext = strsep(&p, ":")) || !p ||
			    sscanf(gidtext, "%lu", &g) != 1)
				continue;
			while ((m = strsep(&p, ",")))
				if (strcmp(m, AAS_FILES_USER) == 0 && (gid_t)g != *gid) {
					groups[(*ngroups)++] = (gid_t)g;
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
	gid_t groups[USER_GROUPS_MAX + 1];
	uid_t uid = 0;
	gid_t gid = 0;
	int n = 0;

	if (user_lookup(&uid, &gid, groups + 1, &n) < 0) {
		errno = ENOENT;
		return -1;
	}
	groups[0] = gid;
	if (setgroups((size_t)n + 1, groups) < 0)
		return -1;
	/* setfsuid and setfsgid say no failure: each is asked again for what it holds. */
	setfsgid(gid);
	setfsuid(uid);
	if ((gid_t)setfsgid((gid_t)-1) != gid || (uid_t)setfsuid((uid_t)-1) != uid) {
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
	char dir[AAS_FILES_PATH_MAX + 1], tmp[AAS_FILES_PATH_MAX + 32];
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
	if (!(buf = malloc(AAS_FILES_FRAME_MAX)) || !port_say(x->port, "ready %s", x->q->nonce)) {
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
		if (len == AAS_FILES_FRAME_ABORT) {
			/* The engine gave it up (its source failed): no file, and the stream goes on. */
			files_fail(x, ECANCELED, "writing");
			goto gone;
		}
		if (len > AAS_FILES_FRAME_MAX) {
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
			be32_put(frame, AAS_FILES_FRAME_ABORT);
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
	char path[AAS_FILES_PATH_MAX + 1];

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
		/* Files: the engine's transfers, not rate-bound (each waits for the one before). */
		if (aas_files_parse(line, len, &s->q, &why) < 0) {
			snprintf(out, sizeof(out), "error %s %d %s\n", s->q.nonce[0] ? s->q.nonce : "-", EINVAL, why);
			LOG("control: refused a request: %s", why);
		} else if (s->q.kind == AAS_REQ_FILES) {
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
	char dev[300], buf[512];
	sigset_t io;

	sigemptyset(&io);
	sigaddset(&io, SIGIO);
	sigprocmask(SIG_BLOCK, &io, NULL);
	for (int i = 0; port_find(dev, sizeof(dev)) < 0; i++) {
		if (i == PORT_WAIT_S * 10) {
			LOG("control: no port %s: clones get their fix-ups over SSH", AAS_CONTROL_PORT_NAME);
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
		ssize_t n = read(s.fd, buf, sizeof(buf));
		if (n > 0) {
			size_t used = aas_lines_feed(&lines, buf, (size_t)n, serve_line, &s);
			if (s.pending) {
				/* The transfer reads the rest itself; the host closes the connection after it. */
				files_serve(s.fd, &s.q, buf + used, (size_t)n - used);
				s.pending = false;
				aas_lines_reset(&lines);
			}
		} else if (n == 0) {
			struct timespec wait = { IDLE_RECHECK_S, 0 };
			aas_lines_reset(&lines);
			sigtimedwait(&io, NULL, &wait);
		} else if (errno == EAGAIN) {
			struct pollfd p = { s.fd, POLLIN, 0 };
			poll(&p, 1, IDLE_RECHECK_S * 1000);
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
