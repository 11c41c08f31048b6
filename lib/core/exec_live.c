/*
 * Executions while they run: their output so far, for readers who follow
 * it from a cursor, the stdin and the signals sent to them, and the list of
 * what runs. The store learns of an execution twice (started, ended); all in
 * between lives here, in memory, bounded per execution by its max_output per
 * stream, SAAS_EXEC_FOLLOW_WINDOW per stream and SAAS_EXEC_STDIN_PENDING_MAX,
 * and in number by the accounts' max_executions.
 *
 * One lock (the engine's live_mu) guards every live execution: what it
 * protects is a few copies per chunk, never a guest call. Lock order:
 * a transport's own lock, then live_mu, never the other way.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"

/* One follow step copies at most this much of each stream out of the lock. */
#define FOLLOW_STEP ((size_t)64 << 10)

int saas__live_new(saas_engine *e, const saas_store_execution *rec, size_t max_output, bool stdin_open,
                   struct saas__live **out)
{
	struct saas__live *l = calloc(1, sizeof(*l));

	if (!l)
		return saas__oom();
	saas__strlcpy(l->id, rec->id, sizeof(l->id));
	saas__strlcpy(l->account_id, rec->account_id, sizeof(l->account_id));
	saas__strlcpy(l->sandbox_id, rec->sandbox_id, sizeof(l->sandbox_id));
	l->started_at_ms = rec->started_at_ms;
	l->max = max_output;
	l->stdin_open = stdin_open;
	l->refs = 1;
	l->engine = e;
	saas__cond_init_monotonic(&l->cond);
	pthread_mutex_lock(&e->live_mu);
	l->next = e->lives;
	e->lives = l;
	pthread_mutex_unlock(&e->live_mu);
	*out = l;
	return SAAS_OK;
}

bool saas__live_here(saas_engine *e, const char *id)
{
	bool found = false;

	pthread_mutex_lock(&e->live_mu);
	for (struct saas__live *l = e->lives; l && !found; l = l->next)
		found = !l->done && strcmp(l->id, id) == 0;
	pthread_mutex_unlock(&e->live_mu);
	return found;
}

static void live_free(struct saas__live *l)
{
	for (int s = 0; s < 2; s++) {
		saas__buf_free(&l->s[s].kept);
		free(l->s[s].ring);
	}
	saas__buf_free(&l->in);
	pthread_cond_destroy(&l->cond);
	free(l);
}

void saas__live_unref(saas_engine *e, struct saas__live *l)
{
	bool last;

	if (!l)
		return;
	pthread_mutex_lock(&e->live_mu);
	last = --l->refs == 0;
	if (last)
		for (struct saas__live **p = &e->lives; *p; p = &(*p)->next)
			if (*p == l) {
				*p = l->next;
				break;
			}
	pthread_mutex_unlock(&e->live_mu);
	if (last)
		live_free(l);
}

/* The live execution `id` of the client's account, with a reference; NULL if none. */
static struct saas__live *live_find(saas_client *c, const char *id)
{
	saas_engine *e = c->engine;
	struct saas__live *l;

	pthread_mutex_lock(&e->live_mu);
	for (l = e->lives; l; l = l->next)
		if (!strcmp(l->id, id) && !strcmp(l->account_id, c->account_id)) {
			l->refs++;
			break;
		}
	pthread_mutex_unlock(&e->live_mu);
	return l;
}

/*
 * Keep a chunk (live_mu held): the first `max` bytes of the stream for the
 * record, and the last SAAS_EXEC_FOLLOW_WINDOW of what goes past them for the
 * followers, so that a follower of a long stream lags but does not lose.
 */
static void stream_keep(struct saas__live *l, struct saas__live_stream *st, const char *d, size_t n)
{
	size_t room = l->max > st->kept.len ? l->max - st->kept.len : 0, k = n < room ? n : room;

	if (k && saas__buf_put(&st->kept, d, k) < 0)
		k = 0; /* out of memory: the chunk goes to the window only */
	if (k < n)
		st->truncated = 1;
	st->total += k;
	d += k;
	n -= k;
	if (!n)
		return;
	if (!st->ring) {
		if (!(st->ring = malloc(SAAS_EXEC_FOLLOW_WINDOW))) {
			st->total += n; /* lost to every follower: they are told so */
			return;
		}
		st->ring_from = st->total;
	}
	if (n > SAAS_EXEC_FOLLOW_WINDOW) {
		st->total += n - SAAS_EXEC_FOLLOW_WINDOW;
		d += n - SAAS_EXEC_FOLLOW_WINDOW;
		n = SAAS_EXEC_FOLLOW_WINDOW;
	}
	while (n) {
		size_t at = (size_t)(st->total % SAAS_EXEC_FOLLOW_WINDOW), piece = SAAS_EXEC_FOLLOW_WINDOW - at;
		if (piece > n)
			piece = n;
		memcpy(st->ring + at, d, piece);
		st->total += piece;
		d += piece;
		n -= piece;
	}
}

void saas__live_output(saas_engine *e, struct saas__live *l, int stream, const void *data, size_t len)
{
	pthread_mutex_lock(&e->live_mu);
	stream_keep(l, &l->s[stream == SAAS_STREAM_STDERR], data, len);
	l->running = true; /* its output says so, whether or not its driver did */
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&e->live_mu);
}

void saas__live_end(saas_engine *e, struct saas__live *l, const saas_store_execution *rec)
{
	pthread_mutex_lock(&e->live_mu);
	l->done = true;
	l->stdin_open = false;
	l->status = rec->status;
	l->exit_code = rec->exit_code;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&e->live_mu);
}

void saas__live_started(void *userdata)
{
	struct saas__live *l = userdata;
	saas_engine *e = l->engine;

	pthread_mutex_lock(&e->live_mu);
	l->running = true;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&e->live_mu);
}

long saas__live_input(void *userdata, void *buf, size_t cap)
{
	struct saas__live *l = userdata;
	saas_engine *e = l->engine;
	long n = 0;

	pthread_mutex_lock(&e->live_mu);
	if (l->in_off < l->in.len) {
		size_t k = l->in.len - l->in_off;
		if (k > cap)
			k = cap;
		memcpy(buf, l->in.data + l->in_off, k);
		l->in_off += k;
		if (l->in_off == l->in.len)
			l->in_off = l->in.len = 0;
		n = (long)k;
	} else if (l->in_eof || l->cancel) {
		n = -1;
	}
	pthread_mutex_unlock(&e->live_mu);
	return n;
}

int saas__live_control(void *userdata, int *group)
{
	struct saas__live *l = userdata;
	saas_engine *e = l->engine;
	int sig = 0;

	*group = 0;
	pthread_mutex_lock(&e->live_mu);
	if (l->cancel) {
		sig = -1;
	} else if (l->nsig) {
		sig = l->sig[0].num;
		*group = l->sig[0].group;
		memmove(&l->sig[0], &l->sig[1], (size_t)(--l->nsig) * sizeof(l->sig[0]));
	}
	pthread_mutex_unlock(&e->live_mu);
	return sig;
}

void saas__live_cancel(saas_engine *e, struct saas__live *l)
{
	pthread_mutex_lock(&e->live_mu);
	l->cancel = true;
	pthread_mutex_unlock(&e->live_mu);
}

bool saas__live_cancelled(saas_engine *e, struct saas__live *l)
{
	bool c;

	pthread_mutex_lock(&e->live_mu);
	c = l->cancel;
	pthread_mutex_unlock(&e->live_mu);
	return c;
}

/*
 * Recorded as running, but not by this engine: another server on the same
 * store runs it, and only that one holds its output stream, its stdin and its
 * process. Not proxied: the servers need not reach each other, only the store.
 */
static int elsewhere(const char *id)
{
	return saas__error(SAAS_ESTATE, SAAS_ERRCLASS_ARGS, 0,
	                   "execution '%s' runs on another server: its live output, stdin, signals and cancel are "
	                   "reachable only through that server; its record shows the result once it ends", id);
}

/*
 * The live execution to act on, referenced and with live_mu held; or, when
 * it ended or is unknown, the error that says which (SAAS_ESTATE, SAAS_ENOTFOUND).
 */
static int live_act(saas_client *c, const char *id, struct saas__live **out)
{
	saas_engine *e = c->engine;
	struct saas__live *l = live_find(c, id);
	saas_execution *x = NULL;
	int rc;

	if (l) {
		pthread_mutex_lock(&e->live_mu);
		if (!l->done) {
			*out = l;
			return SAAS_OK;
		}
		pthread_mutex_unlock(&e->live_mu);
		saas__live_unref(e, l);
	}
	/* Ended, or never ours: say which, as execution_get would. */
	if ((rc = saas__local_execution_get(c, id, &x)) == SAAS_OK)
		rc = x->status == SAAS_EXEC_RUNNING ? elsewhere(id)
		                                    : saas__error(SAAS_ESTATE, SAAS_ERRCLASS_ARGS, 0, "execution '%s' has ended", id);
	saas_execution_free(x);
	return rc;
}

static void live_act_done(saas_engine *e, struct saas__live *l)
{
	pthread_mutex_unlock(&e->live_mu);
	saas__live_unref(e, l);
}

int saas__local_execution_stdin(saas_client *c, const char *id, const void *data, size_t len, unsigned int flags)
{
	saas_engine *e = c->engine;
	struct saas__live *l = NULL;
	int rc;

	if ((rc = live_act(c, id, &l)) < 0)
		return rc;
	if (!l->stdin_open) {
		rc = saas__error(SAAS_ESTATE, SAAS_ERRCLASS_ARGS, 0,
		                 l->in_eof ? "the stdin of execution '%s' is closed"
		                           : "execution '%s' was not started with its stdin open",
		                 id);
		goto out;
	}
	if (len > SAAS_EXEC_STDIN_PENDING_MAX - (l->in.len - l->in_off)) {
		rc = saas__error(SAAS_EBUSY, SAAS_ERRCLASS_ARGS, 0,
		                 "execution '%s' has not read the %zu bytes of stdin it was sent yet (at most %u may wait): "
		                 "send again later",
		                 id, l->in.len - l->in_off, SAAS_EXEC_STDIN_PENDING_MAX);
		goto out;
	}
	if (len && saas__buf_put(&l->in, data, len) < 0) {
		rc = saas__oom();
		goto out;
	}
	if (flags & SAAS_STDIN_CLOSE) {
		l->in_eof = true;
		l->stdin_open = false;
	}
out:
	live_act_done(e, l);
	return rc;
}

int saas__local_execution_signal(saas_client *c, const char *id, int signum, unsigned int flags)
{
	saas_engine *e = c->engine;
	struct saas__live *l = NULL;
	int rc;

	if ((rc = live_act(c, id, &l)) < 0)
		return rc;
	if (l->nsig == SAAS_ARRAY_SIZE(l->sig)) {
		rc = saas__error(SAAS_EBUSY, SAAS_ERRCLASS_ARGS, 0,
		                 "execution '%s' has %zu signals waiting to be sent; send again later", id,
		                 SAAS_ARRAY_SIZE(l->sig));
	} else {
		l->sig[l->nsig].num = signum;
		l->sig[l->nsig].group = (flags & SAAS_SIGNAL_GROUP) != 0;
		l->nsig++;
	}
	live_act_done(e, l);
	return rc;
}

int saas__local_execution_cancel(saas_client *c, const char *id)
{
	struct saas__live *l = NULL;
	int rc;

	if ((rc = live_act(c, id, &l)) < 0)
		return rc;
	l->cancel = true;
	live_act_done(c->engine, l);
	return SAAS_OK;
}

/* The public form of a live execution, without output (live_mu held). */
static int live_public(const struct saas__live *l, bool with_output, saas_execution **out)
{
	saas_execution *p = calloc(1, sizeof(*p));
	size_t lo = with_output ? l->s[0].kept.len : 0, le = with_output ? l->s[1].kept.len : 0;

	if (!p)
		return saas__oom();
	p->status = SAAS_EXEC_RUNNING;
	p->exit_code = -1;
	p->started = l->running;
	p->started_at_ms = l->started_at_ms;
	p->stdout_len = lo;
	p->stderr_len = le;
	p->stdout_truncated = l->s[0].truncated;
	p->stderr_truncated = l->s[1].truncated;
	p->stdout_total = l->s[0].total;
	p->stderr_total = l->s[1].total;
	p->stdin_open = l->stdin_open;
	if (!(p->id = saas__strdup(l->id)) || !(p->sandbox_id = saas__strdup(l->sandbox_id)) ||
	    !(p->stdout_data = malloc(lo + 1)) || !(p->stderr_data = malloc(le + 1)) || !(p->error = saas__strdup(""))) {
		saas_execution_free(p);
		return saas__oom();
	}
	if (lo)
		memcpy(p->stdout_data, l->s[0].kept.data, lo);
	if (le)
		memcpy(p->stderr_data, l->s[1].kept.data, le);
	p->stdout_data[lo] = p->stderr_data[le] = '\0';
	*out = p;
	return SAAS_OK;
}

int saas__live_get(saas_client *c, const char *id, saas_execution **out)
{
	saas_engine *e = c->engine;
	struct saas__live *l = live_find(c, id);
	int rc = 1;

	if (!l)
		return 1;
	pthread_mutex_lock(&e->live_mu);
	if (!l->done)
		rc = live_public(l, true, out);
	pthread_mutex_unlock(&e->live_mu);
	saas__live_unref(e, l);
	return rc;
}

int saas__local_execution_list_running(saas_client *c, const char *sandbox_id, saas_execution_list **out)
{
	saas_engine *e = c->engine;
	saas_store_sandbox sb;
	saas_execution_list *list = NULL;
	size_t cap = 0;
	int rc;

	if ((rc = saas__sandbox_get_owned(c, sandbox_id, &sb)) < 0)
		return rc;
	if (!(list = calloc(1, sizeof(*list))))
		return saas__oom();
	pthread_mutex_lock(&e->live_mu);
	/* The list is newest first; the caller wants the oldest first. */
	for (struct saas__live *l = e->lives; l; l = l->next) {
		if (l->done || strcmp(l->sandbox_id, sandbox_id) || strcmp(l->account_id, c->account_id))
			continue;
		if ((rc = SAAS__ARRAY_RESERVE(list->items, cap, list->count + 1)) < 0 ||
		    (rc = live_public(l, false, &list->items[list->count])) < 0)
			break;
		list->count++;
	}
	pthread_mutex_unlock(&e->live_mu);
	if (rc < 0) {
		saas_execution_list_free(list);
		return rc;
	}
	for (size_t i = 0; i < list->count / 2; i++) {
		saas_execution *t = list->items[i];
		list->items[i] = list->items[list->count - 1 - i];
		list->items[list->count - 1 - i] = t;
	}
	*out = list;
	return SAAS_OK;
}

/* Copy what a cursor has not seen of one stream (live_mu held); *lost: bytes gone before it. */
static size_t stream_take(const struct saas__live_stream *st, uint64_t *at, char *buf, size_t cap, uint64_t *lost)
{
	uint64_t o = *at;
	size_t n = 0;

	*lost = 0;
	if (o > st->total)
		o = *at = st->total; /* a cursor from the future: nothing to give, nothing lost */
	if (o < st->kept.len) {
		n = st->kept.len - (size_t)o;
		if (n > cap)
			n = cap;
		memcpy(buf, st->kept.data + o, n);
		*at = o + n;
		return n;
	}
	if (o < st->total) {
		uint64_t lo = st->ring ? st->ring_from : st->total;
		if (st->total - lo > SAAS_EXEC_FOLLOW_WINDOW)
			lo = st->total - SAAS_EXEC_FOLLOW_WINDOW;
		if (o < lo) {
			*lost = lo - o;
			o = lo;
		}
		while (o < st->total && n < cap) {
			size_t from = (size_t)(o % SAAS_EXEC_FOLLOW_WINDOW), piece = SAAS_EXEC_FOLLOW_WINDOW - from;
			if (piece > st->total - o)
				piece = (size_t)(st->total - o);
			if (piece > cap - n)
				piece = cap - n;
			memcpy(buf + n, st->ring + from, piece);
			n += piece;
			o += piece;
		}
		*at = o;
	}
	return n;
}

/*
 * Deliver one step of each stream to the callbacks; 1 if anything was there,
 * 0 if not, -1 if a callback asked to stop.
 */
static int follow_step(saas_engine *e, struct saas__live *l, saas_exec_cursor *cur, const saas_exec_callbacks *cb,
                       char *buf)
{
	uint64_t *at[2] = { &cur->stdout_offset, &cur->stderr_offset };
	int moved = 0;

	for (int s = 0; s < 2; s++) {
		uint64_t before, lost;
		size_t n;
		pthread_mutex_lock(&e->live_mu);
		before = *at[s];
		n = stream_take(&l->s[s], at[s], buf, FOLLOW_STEP, &lost);
		pthread_mutex_unlock(&e->live_mu);
		if (lost && cb && cb->lost)
			cb->lost(cb->userdata, s + 1, before, lost);
		if (n && cb && cb->output && cb->output(cb->userdata, s + 1, *at[s] - n, buf, n))
			return -1;
		if (n || lost)
			moved = 1;
	}
	return moved;
}

/* Deliver a finished execution's kept output from a cursor. */
static int follow_record(const saas_execution *x, saas_exec_cursor *cur, const saas_exec_callbacks *cb)
{
	const char *data[2] = { x->stdout_data, x->stderr_data };
	size_t len[2] = { x->stdout_len, x->stderr_len };
	uint64_t *at[2] = { &cur->stdout_offset, &cur->stderr_offset };

	for (int s = 0; s < 2; s++) {
		if (*at[s] >= len[s]) {
			continue;
		}
		if (cb && cb->output && cb->output(cb->userdata, s + 1, *at[s], data[s] + *at[s], len[s] - (size_t)*at[s]))
			return -1;
		*at[s] = len[s];
	}
	return 0;
}

/* Wait for output or the end (live_mu held), until the deadline. */
static void follow_wait(struct saas__live *l, saas_engine *e, int64_t deadline)
{
	struct timespec ts;

	/* The live cond waits on the monotonic clock (saas__live_new). */
	saas__deadline(&ts, CLOCK_MONOTONIC, deadline - saas__now_ms());
	pthread_cond_timedwait(&l->cond, &e->live_mu, &ts);
}

int saas__local_execution_follow(saas_client *c, const char *id, saas_exec_cursor *cur,
                                 const saas_exec_callbacks *cb, unsigned int wait_ms, unsigned int flags,
                                 saas_execution **out)
{
	saas_engine *e = c->engine;
	struct saas__live *l = live_find(c, id);
	saas_execution *x = NULL;
	char *buf = NULL;
	int64_t deadline = saas__now_ms() + (wait_ms ? wait_ms : SAAS_EXEC_FOLLOW_WAIT_MAX);
	int rc = SAAS_OK, moved = 0;
	bool done = false;

	if (l) {
		if (!(buf = malloc(FOLLOW_STEP))) {
			rc = saas__oom();
			goto out;
		}
		for (;;) {
			if ((moved = follow_step(e, l, cur, cb, buf)) < 0)
				break; /* the caller stops following; the command goes on */
			if (moved)
				continue;
			pthread_mutex_lock(&e->live_mu);
			/* Nothing new since the step: done now means all was delivered. */
			done = l->done && cur->stdout_offset >= l->s[0].total && cur->stderr_offset >= l->s[1].total;
			if (done || !(flags & SAAS_FOLLOW_WAIT) || saas__now_ms() >= deadline ||
			    ((flags & SAAS_FOLLOW_STARTED) && l->running)) {
				pthread_mutex_unlock(&e->live_mu);
				break;
			}
			if (!l->done && cur->stdout_offset >= l->s[0].total && cur->stderr_offset >= l->s[1].total)
				follow_wait(l, e, deadline);
			pthread_mutex_unlock(&e->live_mu);
		}
		if (!done) {
			/* Still running, or the caller stopped: the execution as it stands. */
			if (out) {
				pthread_mutex_lock(&e->live_mu);
				bool ended = l->done;
				if (!ended)
					rc = live_public(l, true, &x);
				pthread_mutex_unlock(&e->live_mu);
				if (ended)
					rc = saas__local_execution_get(c, id, &x);
			}
			goto out;
		}
	}
	/* Ended: the record has the rest (a cursor past what it kept saw it all live). */
	if ((rc = saas__local_execution_get(c, id, &x)) < 0)
		goto out;
	/* Or another server runs it: its output streams to that one only. */
	if (!l && x->status == SAAS_EXEC_RUNNING) {
		rc = elsewhere(id);
		goto out;
	}
	if (!l && (moved = follow_record(x, cur, cb)) < 0)
		goto out;
	if (x->status != SAAS_EXEC_RUNNING && cb && cb->exit)
		cb->exit(cb->userdata, x);
out:
	if (rc == SAAS_OK && out) {
		*out = x;
		x = NULL;
	}
	saas_execution_free(x);
	free(buf);
	saas__live_unref(e, l);
	return rc;
}
