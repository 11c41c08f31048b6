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
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "aas-control.h"

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

int aas_control_parse(const char *line, size_t n, struct aas_fixup *out, const char **why)
{
	const char *p = line, *end = line + n, *w;
	size_t len;

	memset(out, 0, sizeof(*out));
	*why = "not a request";
	if (n >= AAS_CONTROL_LINE_MAX || !(w = next_word(&p, end, &len)) || len != 5 || memcmp(w, "fixup", 5) != 0)
		return -1;
	*why = "bad nonce";
	if (!(w = next_word(&p, end, &len)) || len != AAS_CONTROL_NONCE_LEN)
		return -1;
	for (size_t i = 0; i < len; i++)
		if (hexval(w[i]) < 0)
			return -1;
	memcpy(out->nonce, w, len);
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

struct serve {
	int fd;
	struct timespec window;        /* the second the last requests were counted in */
	unsigned int served;
};

static int serve_line(const char *line, size_t len, bool overlong, void *ud)
{
	struct serve *s = ud;
	struct aas_fixup f;
	struct timespec now;
	const char *why = "line too long";
	char out[128];

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
	struct serve s = { -1, { 0, 0 }, 0 };
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
			aas_lines_feed(&lines, buf, (size_t)n, serve_line, &s);
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
