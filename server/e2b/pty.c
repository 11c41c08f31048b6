/*
 * Terminals through E2B's daemon protocol: the process a `pty` Start makes.
 *
 * libsaas's terminal session (saas_pty_*) lives as long as whoever holds
 * it; an E2B PTY is a process with a pid that outlives the stream that
 * started it (a client that disconnects detaches), takes input and a new
 * size by pid from other calls, may have many subscribers, and is still
 * there to `connect` for a while after it ended. So each one is an object
 * of its own: a reader thread pumps the session's output into a bounded
 * log (the newest PTY_LOG_MAX bytes, by absolute offset, as an execution's
 * output is for commands) and keeps the exit; process.c's pid table and
 * streams follow it as they follow an execution. The reader hangs up at
 * the call's deadline (envd kills the process then) or at a kill.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2b/internal.h"

/* Output kept for a subscriber that lags (or connects late): the newest this many bytes. */
#define PTY_LOG_MAX ((size_t)256 << 10)
/* PTYs open at once on this server, whatever the accounts (each holds a thread). */
#define PTY_SERVER_MAX 256
/* A SendInput that the shell takes nothing of for this long fails (a shell that reads nothing would hold the call). */
#define PTY_WRITE_TIMEOUT_MS 5000
/* The reader thread's stack. */
#define PTY_READER_STACK ((size_t)256 << 10)

struct aas_e2b_pty {
	pthread_mutex_t mu;
	pthread_cond_t cond;          /* output came, or the end */
	unsigned int refs;            /* the reader's, the pid table's, each stream's */
	char sandbox[SAAS_ID_MAX + 1];
	char account[SAAS_ID_MAX + 1];
	saas_pty *pty;                /* NULL once the reader closed it */
	pthread_mutex_t io_mu;        /* input, resize and the close exclude each other */
	int wake[2];                  /* a byte here wakes the reader: a kill */
	bool kill;
	int64_t deadline_ms;          /* the reader hangs up then; 0: never */
	unsigned char *log;           /* a ring of log_cap bytes: grows to PTY_LOG_MAX before it wraps */
	size_t log_cap;
	uint64_t total;               /* bytes of output ever */
	bool ended, killed;
	int status;                   /* the shell's exit status (saas_pty_close's) */
	int64_t ended_ms;
	struct aas_e2b_pty *next, **prevp; /* on the open list (list_mu) */
};

static pthread_mutex_t list_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t list_cond = PTHREAD_COND_INITIALIZER;
static struct aas_e2b_pty *open_list;
static unsigned int readers; /* reader threads running */

void aas_e2b_pty_ref(struct aas_e2b_pty *p)
{
	pthread_mutex_lock(&p->mu);
	p->refs++;
	pthread_mutex_unlock(&p->mu);
}

void aas_e2b_pty_unref(struct aas_e2b_pty *p)
{
	bool last;

	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	last = --p->refs == 0;
	pthread_mutex_unlock(&p->mu);
	if (!last)
		return;
	/* The reader's reference is the last to go while it runs, so the session is closed by now. */
	saas_pty_close(p->pty, NULL);
	close(p->wake[0]);
	close(p->wake[1]);
	pthread_mutex_destroy(&p->io_mu);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->mu);
	free(p->log);
	free(p);
}

/*
 * Append output to the ring. It starts small and doubles while it has not
 * wrapped (offsets below log_cap stay where they are), so a short session
 * costs little. p->mu held.
 */
static void log_put(struct aas_e2b_pty *p, const unsigned char *data, size_t n)
{
	while (p->total + n > p->log_cap && p->log_cap < PTY_LOG_MAX && p->total <= p->log_cap) {
		size_t cap = p->log_cap * 2 < PTY_LOG_MAX ? p->log_cap * 2 : PTY_LOG_MAX;
		unsigned char *grown = realloc(p->log, cap);
		if (!grown)
			break; /* wrap at the size it has: a lagging subscriber loses more, nobody else anything */
		p->log = grown;
		p->log_cap = cap;
	}
	for (size_t i = 0; i < n;) {
		size_t at = (size_t)(p->total % p->log_cap), room = p->log_cap - at, k = n - i < room ? n - i : room;
		memcpy(p->log + at, data + i, k);
		p->total += k;
		i += k;
	}
}

static void *reader_main(void *arg)
{
	struct aas_e2b_pty *p = arg;
	unsigned char buf[16384];
	int status = -1;
	bool killed = false;

	for (;;) {
		struct pollfd pf[2] = { { saas_pty_fd(p->pty), POLLIN, 0 }, { p->wake[0], POLLIN, 0 } };
		int64_t now = aas_now_ms();
		int wait = -1, n;
		size_t got = 0;

		pthread_mutex_lock(&p->mu);
		killed = p->kill;
		pthread_mutex_unlock(&p->mu);
		if (killed || (p->deadline_ms && now >= p->deadline_ms)) {
			killed = true;
			break;
		}
		if (p->deadline_ms)
			wait = p->deadline_ms - now > 60000 ? 60000 : (int)(p->deadline_ms - now);
		n = poll(pf, 2, wait);
		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0 || !(pf[0].revents))
			continue;
		if (saas_pty_read(p->pty, buf, sizeof(buf), &got, 0) == SAAS_ETIMEOUT)
			continue;
		if (!got)
			break; /* the shell ended (or reading failed: the same to a subscriber) */
		pthread_mutex_lock(&p->mu);
		log_put(p, buf, got);
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->mu);
	}
	/* Hung up on (a kill, the deadline) or ended: the status is known once it is closed. */
	pthread_mutex_lock(&p->io_mu);
	saas_pty_close(p->pty, &status);
	p->pty = NULL;
	pthread_mutex_unlock(&p->io_mu);
	pthread_mutex_lock(&p->mu);
	p->ended = true;
	p->killed = killed;
	p->status = status;
	p->ended_ms = aas_now_ms();
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->mu);
	pthread_mutex_lock(&list_mu);
	if ((*p->prevp = p->next))
		p->next->prevp = p->prevp;
	pthread_mutex_unlock(&list_mu);
	aas_e2b_pty_unref(p);
	pthread_mutex_lock(&list_mu);
	readers--;
	pthread_cond_broadcast(&list_cond);
	pthread_mutex_unlock(&list_mu);
	return NULL;
}

/* Open PTYs of sandbox and of account, and in all. list_mu held. */
static void count(const char *sandbox, const char *account, unsigned int *in_sandbox, unsigned int *in_account,
                  unsigned int *all)
{
	*in_sandbox = *in_account = *all = 0;
	for (struct aas_e2b_pty *p = open_list; p; p = p->next) {
		*in_sandbox += strcmp(p->sandbox, sandbox) == 0;
		*in_account += strcmp(p->account, account) == 0;
		++*all;
	}
}

int aas_e2b_pty_open(struct aas_e2b_pty **out, saas_client *client, const char *sandbox, const char *account,
                     const saas_pty_options *o, int64_t deadline_ms, char *why, size_t whysize)
{
	const struct aas_config *cfg = aas_e2b_state.cfg;
	struct aas_e2b_pty *p = NULL;
	unsigned int in_sandbox, in_account, all;
	pthread_attr_t attr;
	pthread_t tid;
	int rc = SAAS_ENOMEM, started;

	*out = NULL;
	if (!(p = calloc(1, sizeof(*p)))) {
		snprintf(why, whysize, "out of memory");
		goto fail;
	}
	p->wake[0] = p->wake[1] = -1;
	p->log_cap = 4096;
	if (!(p->log = malloc(p->log_cap))) {
		snprintf(why, whysize, "out of memory");
		goto fail;
	}
	if (pipe2(p->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		snprintf(why, whysize, "out of descriptors");
		rc = SAAS_EIO;
		goto fail;
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_mutex_init(&p->io_mu, NULL);
	pthread_cond_init(&p->cond, NULL);
	p->refs = 2; /* the caller's and the reader's */
	p->status = -1;
	p->deadline_ms = deadline_ms;
	snprintf(p->sandbox, sizeof(p->sandbox), "%s", sandbox);
	snprintf(p->account, sizeof(p->account), "%s", account);
	/* The bounds of /v1's terminals (--pty-per-sandbox, --pty-per-account), counted apart from them. */
	pthread_mutex_lock(&list_mu);
	count(sandbox, account, &in_sandbox, &in_account, &all);
	pthread_mutex_unlock(&list_mu);
	if (in_sandbox >= cfg->pty_per_sandbox || in_account >= cfg->pty_per_account || all >= PTY_SERVER_MAX) {
		if (all >= PTY_SERVER_MAX)
			snprintf(why, whysize, "%d terminals are open on this server, the most it takes; try again",
			         PTY_SERVER_MAX);
		else
			snprintf(why, whysize, "at most %u terminals per sandbox and %u per account are open at once; kill "
			         "one first", cfg->pty_per_sandbox, cfg->pty_per_account);
		rc = SAAS_ELIMIT;
		goto fail;
	}
	if ((rc = saas_pty_open(&p->pty, client, sandbox, o, 0)) < 0) {
		snprintf(why, whysize, "%s", aas_tenant_message(rc, "e2b: pty"));
		goto fail;
	}
	saas_pty_set_write_timeout(p->pty, PTY_WRITE_TIMEOUT_MS);
	pthread_mutex_lock(&list_mu);
	/* Counted again under the lock the open list changes under: two opens at once must not both pass. */
	count(sandbox, account, &in_sandbox, &in_account, &all);
	started = -1;
	if (in_sandbox < cfg->pty_per_sandbox && in_account < cfg->pty_per_account && all < PTY_SERVER_MAX &&
	    pthread_attr_init(&attr) == 0) {
		/* A small stack, as a connection's (conn.c): the reader holds one buffer and calls recv. */
		pthread_attr_setstacksize(&attr, PTY_READER_STACK);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		started = pthread_create(&tid, &attr, reader_main, p);
		pthread_attr_destroy(&attr);
	}
	if (started != 0) {
		pthread_mutex_unlock(&list_mu);
		snprintf(why, whysize, "too many terminals open at once; kill one first");
		rc = SAAS_ELIMIT;
		goto fail;
	}
	readers++;
	if ((p->next = open_list))
		open_list->prevp = &p->next;
	p->prevp = &open_list;
	open_list = p;
	pthread_mutex_unlock(&list_mu);
	*out = p;
	return SAAS_OK;
fail:
	if (p && p->wake[0] >= 0) {
		p->refs = 1;
		aas_e2b_pty_unref(p);
	} else if (p) {
		free(p->log);
		free(p);
	}
	return rc;
}

int aas_e2b_pty_follow(struct aas_e2b_pty *p, uint64_t *offset, unsigned char *buf, size_t cap, size_t *got,
                       int *status, unsigned int wait_ms)
{
	int64_t until = aas_now_ms() + wait_ms;
	int rc = 0;

	*got = 0;
	pthread_mutex_lock(&p->mu);
	while (*offset >= p->total && !p->ended && wait_ms) {
		int64_t now = aas_now_ms();
		struct timespec ts;
		if (now >= until)
			break;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += (until - now) / 1000;
		ts.tv_nsec += ((until - now) % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&p->cond, &p->mu, &ts);
	}
	/* A subscriber more than the log behind loses what fell out of it, as a terminal's scrollback does. */
	if (p->total > p->log_cap && *offset < p->total - p->log_cap)
		*offset = p->total - p->log_cap;
	if (*offset < p->total) {
		size_t at = (size_t)(*offset % p->log_cap), n = (size_t)(p->total - *offset);
		if (n > cap)
			n = cap;
		if (n > p->log_cap - at)
			n = p->log_cap - at;
		memcpy(buf, p->log + at, n);
		*offset += n;
		*got = n;
	} else if (p->ended) {
		*status = p->killed ? -1 : p->status;
		rc = p->killed ? 2 : 1;
	}
	pthread_mutex_unlock(&p->mu);
	return rc;
}

uint64_t aas_e2b_pty_offset(struct aas_e2b_pty *p)
{
	uint64_t total;

	pthread_mutex_lock(&p->mu);
	total = p->total;
	pthread_mutex_unlock(&p->mu);
	return total;
}

bool aas_e2b_pty_gone(struct aas_e2b_pty *p, int64_t now, int64_t keep_ms)
{
	bool gone;

	pthread_mutex_lock(&p->mu);
	gone = p->ended && now - p->ended_ms >= keep_ms;
	pthread_mutex_unlock(&p->mu);
	return gone;
}

bool aas_e2b_pty_running(struct aas_e2b_pty *p)
{
	bool running;

	pthread_mutex_lock(&p->mu);
	running = !p->ended;
	pthread_mutex_unlock(&p->mu);
	return running;
}

int aas_e2b_pty_input(struct aas_e2b_pty *p, const void *data, size_t len)
{
	int rc = SAAS_ESTATE;

	pthread_mutex_lock(&p->io_mu);
	if (p->pty)
		rc = saas_pty_write(p->pty, data, len);
	pthread_mutex_unlock(&p->io_mu);
	return rc;
}

int aas_e2b_pty_resize(struct aas_e2b_pty *p, unsigned int cols, unsigned int rows)
{
	int rc = SAAS_ESTATE;

	pthread_mutex_lock(&p->io_mu);
	if (p->pty)
		rc = saas_pty_resize(p->pty, cols, rows);
	pthread_mutex_unlock(&p->io_mu);
	return rc;
}

int aas_e2b_pty_kill(struct aas_e2b_pty *p)
{
	bool ended;

	pthread_mutex_lock(&p->mu);
	ended = p->ended || p->kill;
	p->kill = true;
	pthread_mutex_unlock(&p->mu);
	if (ended)
		return SAAS_ESTATE;
	/* The pipe is non-blocking and a byte is enough: a full one has woken the reader already. */
	if (write(p->wake[1], "k", 1) < 0 && errno != EAGAIN)
		return SAAS_EIO;
	return SAAS_OK;
}

void aas_e2b_pty_shutdown(void)
{
	pthread_mutex_lock(&list_mu);
	for (struct aas_e2b_pty *p = open_list; p; p = p->next)
		aas_e2b_pty_kill(p);
	/* Each reader hangs up and goes; the server's end waits for them (nothing may outlive the engine). */
	while (readers)
		pthread_cond_wait(&list_cond, &list_mu);
	pthread_mutex_unlock(&list_mu);
}
