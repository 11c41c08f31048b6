/*
 * The connection policy: how long a client may take to send a request, how
 * many connections one address may hold, and how many may wait on previews.
 *
 * libmicrohttpd 0.9.75 has only an idle timeout, and a client that trickles
 * one byte every few seconds is never idle: 512 such connections held every
 * thread, and the API was down for everyone. So every connection is tracked
 * here from accept to close (MHD_OPTION_NOTIFY_CONNECTION) with a deadline
 * for the phase it is in:
 *
 *   headers  from accept, or from the end of the previous request on a
 *            kept-alive connection, until the request's headers are complete:
 *            header_timeout seconds;
 *   body     from the headers until the last byte of the body: body_timeout
 *            seconds plus one more per AAS_BODY_MIN_RATE bytes received, so a
 *            large upload at a fair rate finishes and a trickle does not;
 *   handler  the request is being answered (an exec of minutes, a download, a
 *            WebSocket bridge): no deadline from here.
 *
 * A watchdog thread shuts down the socket of a connection past its deadline;
 * libmicrohttpd's own thread for it then reads the end of the stream and
 * closes it the ordinary way, so no fd is closed behind its back. The socket
 * stays open until the CLOSED notification, which unlinks the connection
 * under the same lock the watchdog holds: the watchdog never touches an fd
 * that may have been reused.
 *
 * Why threads and not an event loop. The handlers block, by design and for
 * long: an exec streamed as SSE for its whole run, a terminal's WebSocket for
 * hours, the preview proxy waiting on a guest, a create of many seconds, long
 * polls. An event loop that reads requests and hands them to a pool of
 * workers moves the problem rather than solving it: a fixed pool is starved
 * by a few hundred blocked handlers (the same outage as a full connection
 * table, now for everyone with a request), and a pool that grows per
 * blocked handler is a thread per request again. What made 512 idle clients
 * expensive was not the thread but its 8 MiB of stack and the low limit that
 * followed from it. So: one thread per connection with a small stack
 * (--connection-stack-kb, 1 MiB: jansson's deepest parse fits in it with
 * room to spare), thousands of them (--max-connections 8192), the headers'
 * deadline above (--header-timeout 10 s) so a trickle holds a thread only
 * that long, and a lower per-address cap (24) so filling the table takes 342
 * addresses. An idle connection then costs its socket, a thread that touched
 * a few pages of its stack, and libmicrohttpd's lazily touched pool: some
 * tens of KiB resident (bench/RESULTS.md has the figures). The bound on
 * memory is max-connections x (stack + 128 KiB pool): 9 GiB of address space
 * at the defaults, of which only what is touched is resident.
 *
 * Behind load balancers (--trusted-proxies) the per-address cap cannot see
 * the clients: it is decided at accept, before any header names one, and
 * every connection comes from a balancer. So a trusted proxy's connections
 * are not capped per address (the balancer caps its clients, which is the
 * only place that can); they still count against max_connections, and their
 * requests' rates count by the client the header names (forwarded.c).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "front.h"

/* A body slower than this (bytes per second) runs out of body_timeout. */
#define AAS_BODY_MIN_RATE ((uint64_t)64 * 1024)
/* How often the watchdog looks for connections past their deadline. */
#define WATCH_INTERVAL_MS 250
/*
 * Open files a connection may need: its socket, and one more its answer may
 * hold (an SSH session, a preview's tunnel, a control-port connection).
 */
#define FDS_PER_CONN 2
/* Open files and threads kept for the engine itself: the store, libvirt, logs, its workers. */
#define ENGINE_RESERVE 512
/* Mappings per connection: the thread's stack and its guard page, and libmicrohttpd's pool. */
#define MAPS_PER_CONN 3
/* Mappings of the engine itself: its libraries, heaps and threads. */
#define ENGINE_MAPS 2048

enum phase { PHASE_HEADERS, PHASE_BODY, PHASE_HANDLER };

struct aas_conn {
	struct aas_conn *prev, *next;
	MHD_socket fd;
	enum phase phase;
	int64_t deadline_ms;   /* monotonic; for PHASE_HEADERS and PHASE_BODY */
	int64_t body_start_ms;
	uint64_t body_bytes;
	bool preview;          /* holds one of the preview slots */
	bool cut;              /* the watchdog shut it down */
	unsigned char key[16]; /* the address counted against the per-address cap */
	char addr[INET6_ADDRSTRLEN];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake;
static struct aas_conn *conns;
static unsigned int previews;
static unsigned int header_ms, body_ms, per_address, preview_max;
static bool stopping, watching;
static pthread_t watchdog;

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * The part of an address one client is assumed to hold: an IPv4 address, or
 * the /64 of an IPv6 one (a single host is routinely given a whole /64, so
 * counting /128s would cap nobody). IPv4-mapped IPv6 counts as IPv4.
 */
void aas_address_key(const struct sockaddr *sa, unsigned char key[16], char *text, size_t textsize)
{
	memset(key, 0, 16);
	if (text && textsize)
		text[0] = '\0';
	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		memcpy(key + 12, &in->sin_addr, 4);
		if (text)
			inet_ntop(AF_INET, &in->sin_addr, text, (socklen_t)textsize);
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
			memcpy(key + 12, in6->sin6_addr.s6_addr + 12, 4);
		else
			memcpy(key, in6->sin6_addr.s6_addr, 8);
		if (text)
			inet_ntop(AF_INET6, &in6->sin6_addr, text, (socklen_t)textsize);
	}
}

static struct aas_conn *conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

enum MHD_Result aas_conn_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
	unsigned char key[16];
	char text[INET6_ADDRSTRLEN];
	unsigned int n = 0;

	(void)cls;
	(void)addrlen;
	if (aas_proxy_trusted(addr))
		return MHD_YES;
	aas_address_key(addr, key, text, sizeof(text));
	pthread_mutex_lock(&mu);
	for (struct aas_conn *k = conns; k; k = k->next)
		if (memcmp(k->key, key, sizeof(key)) == 0)
			n++;
	pthread_mutex_unlock(&mu);
	if (n < per_address)
		return MHD_YES;
	aas_log(SAAS_LOG_INFO, "connection from %s refused: it holds %u connections already (--per-ip-connections)",
	        text, n);
	return MHD_NO;
}

void aas_conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                     enum MHD_ConnectionNotificationCode code)
{
	struct aas_conn *k = *socket_context;
	const union MHD_ConnectionInfo *ci;

	(void)cls;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		/* Out of memory: the connection goes unpoliced rather than refused. */
		if (!(k = calloc(1, sizeof(*k))))
			return;
		ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		k->fd = ci ? ci->connect_fd : MHD_INVALID_SOCKET;
		ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		aas_address_key(ci ? ci->client_addr : NULL, k->key, k->addr, sizeof(k->addr));
		k->phase = PHASE_HEADERS;
		k->deadline_ms = mono_ms() + header_ms;
		pthread_mutex_lock(&mu);
		k->next = conns;
		if (conns)
			conns->prev = k;
		conns = k;
		pthread_mutex_unlock(&mu);
		*socket_context = k;
		return;
	}
	if (!k)
		return;
	*socket_context = NULL;
	pthread_mutex_lock(&mu);
	if (k->prev)
		k->prev->next = k->next;
	else
		conns = k->next;
	if (k->next)
		k->next->prev = k->prev;
	if (k->preview)
		previews--;
	pthread_mutex_unlock(&mu);
	free(k);
}

static bool has_body(struct MHD_Connection *c)
{
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);

	if (MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING))
		return true;
	return cl && strspn(cl, "0 \t") != strlen(cl);
}

void aas_conn_progress(struct MHD_Connection *c, bool first, size_t upload_size)
{
	struct aas_conn *k = conn_of(c);
	bool body = first && has_body(c);
	int64_t now = mono_ms();

	if (!k)
		return;
	pthread_mutex_lock(&mu);
	if (first && body) {
		k->phase = PHASE_BODY;
		k->body_start_ms = now;
		k->body_bytes = 0;
		k->deadline_ms = now + body_ms;
	} else if (!first && upload_size && k->phase == PHASE_BODY) {
		k->body_bytes += upload_size;
		k->deadline_ms = k->body_start_ms + body_ms + (int64_t)(k->body_bytes * 1000 / AAS_BODY_MIN_RATE);
	} else if (first || !upload_size) {
		k->phase = PHASE_HANDLER;
	}
	pthread_mutex_unlock(&mu);
}

void aas_conn_request_done(struct MHD_Connection *c, bool completed)
{
	struct aas_conn *k = conn_of(c);

	if (!k)
		return;
	pthread_mutex_lock(&mu);
	if (k->preview) {
		k->preview = false;
		previews--;
	}
	/* Kept alive: the next request's headers are due like the first's. */
	if (completed) {
		k->phase = PHASE_HEADERS;
		k->deadline_ms = mono_ms() + header_ms;
	}
	pthread_mutex_unlock(&mu);
}

/*
 * What a response says of how long its kept-alive connection waits idle for
 * the next request: half of what it really waits (the headers' deadline
 * above), at least 1. Clients retire a pooled connection at the time they
 * are told, some earlier (undici, the E2B SDK's client, 2 s earlier), but
 * one whose event loop is busy then may still write on it late, into a
 * connection the watchdog has just cut (EPIPE): telling half leaves it that
 * half as a margin. A server that keeps idle connections 1 s says 0: reuse
 * none.
 */
unsigned int aas_conn_keep_alive_s(void)
{
	return header_ms / 2000;
}

bool aas_conn_preview_enter(struct MHD_Connection *c)
{
	struct aas_conn *k = conn_of(c);
	bool ok;

	if (!k)
		return true;
	pthread_mutex_lock(&mu);
	ok = k->preview || previews < preview_max;
	if (ok && !k->preview) {
		k->preview = true;
		previews++;
	}
	pthread_mutex_unlock(&mu);
	return ok;
}

static void *watch(void *arg)
{
	struct timespec until;

	(void)arg;
	pthread_mutex_lock(&mu);
	while (!stopping) {
		int64_t now = mono_ms();
		for (struct aas_conn *k = conns; k; k = k->next) {
			if (k->cut || k->phase == PHASE_HANDLER || k->deadline_ms > now)
				continue;
			k->cut = true;
			if (k->fd != MHD_INVALID_SOCKET)
				shutdown(k->fd, SHUT_RDWR);
			aas_log(SAAS_LOG_INFO, "connection from %s cut: its request %s did not arrive in time (%s)", k->addr,
			        k->phase == PHASE_HEADERS ? "headers" : "body",
			        k->phase == PHASE_HEADERS ? "--header-timeout" : "--body-timeout");
		}
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_nsec += WATCH_INTERVAL_MS * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&wake, &mu, &until);
	}
	pthread_mutex_unlock(&mu);
	return NULL;
}

/* A number in /proc/sys (threads-max, pid_max, max_map_count); 0 when it cannot be read. */
static unsigned long proc_number(const char *path)
{
	unsigned long v = 0;
	FILE *f = fopen(path, "re");

	if (!f)
		return 0;
	if (fscanf(f, "%lu", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

/*
 * Raise a soft limit to what `want` needs, up to the hard limit; the soft
 * limit that holds afterwards (RLIM_INFINITY included).
 */
static rlim_t raise_soft(int resource, const char *name, rlim_t want)
{
	struct rlimit rl;

	if (getrlimit(resource, &rl) < 0)
		return RLIM_INFINITY; /* unknown: assume the kernel will say when it runs out */
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= want)
		return rl.rlim_cur;
	rlim_t old = rl.rlim_cur;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want : rl.rlim_max;
	if (setrlimit(resource, &rl) < 0) {
		aas_log(SAAS_LOG_WARN, "cannot raise %s from %llu to %llu: %s", name, (unsigned long long)old,
		        (unsigned long long)rl.rlim_cur, strerror(errno));
		return old;
	}
	aas_log(SAAS_LOG_INFO, "%s raised from %llu to %llu", name, (unsigned long long)old,
	        (unsigned long long)rl.rlim_cur);
	return rl.rlim_cur;
}

/*
 * Fit the connection limit to the process's limits. Open files are the one
 * that must fit: a server that takes a connection it has no fd left to answer
 * fails everyone (the store, libvirt and the engine's sockets get EMFILE too),
 * where one that stops accepting at its limit fails only newcomers. So the
 * soft RLIMIT_NOFILE is raised to what max_connections needs (the default
 * 1024 holds about 250 connections), and if even the hard limit is short the
 * limit is lowered to what fits, with a warning saying how to raise it.
 * Threads and mappings are the host's to give: they are checked and a
 * shortfall logged, since a thread that cannot be made only refuses its one
 * connection.
 */
static unsigned int fit_limits(unsigned int want)
{
	rlim_t nofile, nproc;
	unsigned long threads_max, pid_max, maps_max;
	unsigned int limit = want;
	rlim_t need = (rlim_t)want * FDS_PER_CONN + ENGINE_RESERVE;

	nofile = raise_soft(RLIMIT_NOFILE, "RLIMIT_NOFILE (open files)", need);
	if (nofile != RLIM_INFINITY && nofile < need) {
		limit = nofile > ENGINE_RESERVE + FDS_PER_CONN ? (unsigned int)((nofile - ENGINE_RESERVE) / FDS_PER_CONN) : 1;
		aas_log(SAAS_LOG_WARN, "--max-connections %u needs %llu open files and the hard RLIMIT_NOFILE allows %llu: "
		        "taking %u connections at once (raise it with `ulimit -Hn` or LimitNOFILE= in the service)",
		        want, (unsigned long long)need, (unsigned long long)nofile, limit);
	}
	/* RLIMIT_NPROC counts every thread of this uid (QEMUs included when they share it); root is exempt. */
	if (geteuid() != 0) {
		nproc = raise_soft(RLIMIT_NPROC, "RLIMIT_NPROC (processes and threads of this uid)",
		                   (rlim_t)limit + ENGINE_RESERVE);
		if (nproc != RLIM_INFINITY && nproc < (rlim_t)limit + ENGINE_RESERVE)
			aas_log(SAAS_LOG_WARN, "RLIMIT_NPROC allows %llu processes and threads for this uid, fewer than "
			        "--max-connections %u needs: connections past it will be refused (raise `ulimit -u` or "
			        "LimitNPROC=)", (unsigned long long)nproc, limit);
	}
	threads_max = proc_number("/proc/sys/kernel/threads-max");
	pid_max = proc_number("/proc/sys/kernel/pid_max");
	maps_max = proc_number("/proc/sys/vm/max_map_count");
	if ((threads_max && threads_max < (unsigned long)limit + ENGINE_RESERVE) ||
	    (pid_max && pid_max < (unsigned long)limit + ENGINE_RESERVE))
		aas_log(SAAS_LOG_WARN, "kernel.threads-max (%lu) or kernel.pid_max (%lu) is below the %u threads "
		        "--max-connections %u may need: connections past it will be refused", threads_max, pid_max,
		        limit + ENGINE_RESERVE, limit);
	if (maps_max && maps_max < (unsigned long)limit * MAPS_PER_CONN + ENGINE_MAPS)
		aas_log(SAAS_LOG_WARN, "vm.max_map_count (%lu) is below the %lu mappings --max-connections %u may need "
		        "(%d each): connections past it will be refused", maps_max,
		        (unsigned long)limit * MAPS_PER_CONN + ENGINE_MAPS, limit, MAPS_PER_CONN);
	return limit;
}

int aas_conn_start(const struct aas_config *cfg, unsigned int *limit)
{
	pthread_condattr_t ca;
	int rc;

	if (aas_forwarded_init(cfg) < 0)
		return -1;
	*limit = fit_limits(cfg->max_connections);
	header_ms = cfg->header_timeout_s * 1000;
	body_ms = cfg->body_timeout_s * 1000;
	per_address = cfg->per_ip_connections;
	preview_max = cfg->preview_connections;
	/* Fewer connections than asked for: previews still leave the API three quarters of them. */
	if (*limit < cfg->max_connections && preview_max > *limit / 4)
		preview_max = *limit / 4 ? *limit / 4 : 1;
	stopping = false;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&wake, &ca);
	pthread_condattr_destroy(&ca);
	if ((rc = pthread_create(&watchdog, NULL, watch, NULL)) != 0) {
		aas_log(SAAS_LOG_ERROR, "cannot start the connection watchdog: %s", strerror(rc));
		pthread_cond_destroy(&wake);
		return -1;
	}
	watching = true;
	return 0;
}

void aas_conn_stop(void)
{
	if (!watching)
		return;
	pthread_mutex_lock(&mu);
	stopping = true;
	pthread_cond_signal(&wake);
	pthread_mutex_unlock(&mu);
	pthread_join(watchdog, NULL);
	pthread_cond_destroy(&wake);
	watching = false;
}

/* ---- sockets a handler takes over (a WebSocket's, a preview's tunnel) ---- */

int aas_send_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

void aas_send_timeout(int fd, unsigned int ms)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };

	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}
