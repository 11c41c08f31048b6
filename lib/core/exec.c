/*
 * Executions: a command run in a sandbox, recorded in the store whether it ran
 * in the foreground or the background.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

/* Everything one run needs, owned, so a background thread can outlive the caller's buffers. */
struct job {
	saas_engine *engine;
	char sandbox_id[SAAS_ID_MAX + 1];
	void *ctx;             /* the driver context of the sandbox's host */
	saas_store_execution rec;
	char *command;
	char *cwd;
	char **env;
	void *stdin_data;
	size_t stdin_len;
	int64_t timeout_ms;
	size_t max_output;
	bool slot;             /* holds one of the account's max_executions */
	bool leased;           /* holds lease "exec:<id>" (a shared store: claims.c) */
	bool stdin_open;       /* SAAS_EXEC_STDIN_OPEN */
	struct saas__live *live;
	const saas_exec_callbacks *cb; /* a streaming caller's, on its own thread (foreground only) */
	uint64_t offset[2];    /* what cb was given of stdout, stderr */
};

/*
 * Keep what fits under the cap, count the rest away: the driver never blocks
 * on us. A streaming caller is given every byte, on its own thread.
 */
static int job_output(void *ud, int stream, const void *data, size_t len)
{
	struct job *j = ud;
	int s = stream == SAAS_STREAM_STDERR;

	saas__live_output(j->engine, j->live, stream, data, len);
	if (j->cb && j->cb->output && !saas__live_cancelled(j->engine, j->live) &&
	    j->cb->output(j->cb->userdata, s + 1, j->offset[s], data, len))
		saas__live_cancel(j->engine, j->live);
	j->offset[s] += len;
	return 0;
}

static void job_free(struct job *j)
{
	if (!j)
		return;
	if (j->slot)
		saas__exec_slot_release(j->engine, j->rec.account_id);
	/* Recorded as ended (or never recorded): its runner's lease is over. */
	if (j->leased)
		saas__claim_drop_kind(j->engine, "exec", j->rec.id);
	saas__live_unref(j->engine, j->live);
	free(j->command);
	free(j->cwd);
	if (j->env)
		for (char **p = j->env; *p; p++)
			free(*p);
	free(j->env);
	free(j->stdin_data);
	free(j);
}

/* What the store handed out with an execution; the record itself is the caller's. */
void saas__store_execution_clear(saas_store_execution *x)
{
	free(x->stdout_data);
	free(x->stderr_data);
	free(x->command);
	free(x->error);
	x->stdout_data = x->stderr_data = x->command = x->error = NULL;
}

static int execution_public(const saas_store_execution *x, saas_execution **out)
{
	saas_execution *p = calloc(1, sizeof(*p));

	if (!p)
		return saas__oom();
	p->status = x->status;
	p->exit_code = x->exit_code;
	p->stdout_truncated = x->stdout_truncated;
	p->stderr_truncated = x->stderr_truncated;
	p->started_at_ms = x->started_at_ms;
	/* One that runs on another engine: when its guest took it is not recorded, so it counts as started. */
	p->started = x->status != SAAS_EXEC_FAILED;
	p->finished_at_ms = x->finished_at_ms;
	p->duration_ms = x->finished_at_ms ? x->finished_at_ms - x->started_at_ms : 0;
	p->stdout_len = x->stdout_len;
	p->stderr_len = x->stderr_len;
	/* The store keeps no totals: what it kept is what there is to read. */
	p->stdout_total = x->stdout_len;
	p->stderr_total = x->stderr_len;
	if (!(p->id = saas__strdup(x->id)) || !(p->sandbox_id = saas__strdup(x->sandbox_id)) ||
	    !(p->stdout_data = malloc(x->stdout_len + 1)) || !(p->stderr_data = malloc(x->stderr_len + 1)) ||
	    !(p->error = saas__strdup(x->error ? x->error : "")) ||
	    (x->command && !(p->command = saas__strdup(x->command)))) {
		saas_execution_free(p);
		return saas__oom();
	}
	if (x->stdout_len)
		memcpy(p->stdout_data, x->stdout_data, x->stdout_len);
	p->stdout_data[x->stdout_len] = '\0';
	if (x->stderr_len)
		memcpy(p->stderr_data, x->stderr_data, x->stderr_len);
	p->stderr_data[x->stderr_len] = '\0';
	*out = p;
	return SAAS_OK;
}

int saas__local_execution_list(saas_client *c, const char *sandbox_id, const char *cursor, unsigned int limit,
                               saas_execution_list **out)
{
	saas_engine *e = c->engine;
	saas_execution_list *list = NULL;
	saas_store_execution *rows = NULL;
	saas_store_sandbox sb;
	size_t n = 0;
	char cursor_id[SAAS_ID_MAX + 1];
	int64_t cursor_ms = 0;
	int rc;

	if (cursor && (rc = saas__list_cursor_parse(cursor, &cursor_ms, cursor_id, sizeof(cursor_id))) < 0)
		return rc;
	/* Tenancy: another account's sandbox is not found, and so are its executions. */
	if ((rc = saas__sandbox_get_owned(c, sandbox_id, &sb)) < 0)
		return rc;
	/* One more than asked tells whether another page exists. */
	if ((rc = saas__store_executions(e->store, e->store_ctx, sandbox_id, cursor_ms, cursor ? cursor_id : NULL,
	                                 limit + 1, &rows, &n)) < 0)
		return rc;
	if (!(list = calloc(1, sizeof(*list))) || (n && !(list->items = calloc(n, sizeof(*list->items))))) {
		rc = saas__oom();
		goto out;
	}
	for (; list->count < n && list->count < limit; list->count++)
		if ((rc = execution_public(&rows[list->count], &list->items[list->count])) < 0)
			goto out;
	if (n > limit) {
		const saas_execution *last = list->items[limit - 1];

		if (asprintf(&list->next_cursor, "%lld.%s", (long long)last->started_at_ms, last->id) < 0) {
			list->next_cursor = NULL;
			rc = saas__oom();
			goto out;
		}
	}
	*out = list;
	list = NULL;
out:
	saas_execution_list_free(list);
	saas__store_executions_free(rows, n);
	return rc;
}

/* Run the job to its end and record the outcome. Returns the store's verdict. */
static int job_run(struct job *j)
{
	saas_engine *e = j->engine;
	struct saas__live *l = j->live;
	saas_driver_exec req;
	int exit_code = -1, rc;

	memset(&req, 0, sizeof(req));
	req.command = j->command;
	req.cwd = j->cwd;
	req.env = (const char *const *)j->env;
	req.stdin_data = j->stdin_data;
	req.stdin_len = j->stdin_len;
	req.timeout_ms = j->timeout_ms;
	req.output = job_output;
	req.output_userdata = j;
	req.cancel = &e->cancel;
	req.input = j->stdin_open ? saas__live_input : NULL;
	req.control = saas__live_control;
	req.control_userdata = l;
	/* A driver that cannot say when the guest runs it: from the moment it has it. */
	if (e->driver->version >= 15)
		req.started = saas__live_started;

	if (!e->driver->exec)
		rc = saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "driver '%s' cannot run commands",
		                 e->driver->name);
	else if (saas__live_cancelled(e, l))
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_ARGS, 0, "cancelled before it started");
	else {
		if (!req.started)
			saas__live_started(l);
		rc = e->driver->exec(j->ctx, j->sandbox_id, &req, &exit_code);
	}

	/* The driver is done with the live streams: what they kept is read without the lock from here on. */
	j->rec.finished_at_ms = saas__engine_now(e);
	j->rec.stdout_data = l->s[0].kept.data;
	j->rec.stdout_len = l->s[0].kept.len;
	j->rec.stderr_data = l->s[1].kept.data;
	j->rec.stderr_len = l->s[1].kept.len;
	j->rec.stdout_truncated = l->s[0].truncated;
	j->rec.stderr_truncated = l->s[1].truncated;
	if (rc == SAAS_OK) {
		j->rec.status = SAAS_EXEC_EXITED;
		j->rec.exit_code = exit_code;
	} else if (rc == SAAS_ETIMEOUT) {
		j->rec.status = SAAS_EXEC_TIMEDOUT;
		j->rec.exit_code = -1;
		j->rec.error = saas__strdup("the command ran past its timeout and was killed, with every process it started");
	} else if (rc == SAAS_EIO && saas__live_cancelled(e, l)) {
		j->rec.status = SAAS_EXEC_FAILED;
		j->rec.exit_code = -1;
		j->rec.error = saas__strdup("cancelled: the command was killed, with every process it started");
	} else {
		j->rec.status = SAAS_EXEC_FAILED;
		j->rec.exit_code = -1;
		j->rec.error = saas__strdup(saas_error_last()->message);
	}
	rc = e->store->execution_finish(e->store_ctx, &j->rec);
	saas__live_end(e, l, &j->rec);
	saas__log(e, SAAS_LOG_DEBUG, "execution %s in %s: %s, exit %d, %lld ms", j->rec.id, j->sandbox_id,
	          saas_exec_status_name(j->rec.status), j->rec.exit_code,
	          (long long)(j->rec.finished_at_ms - j->rec.started_at_ms));
	return rc;
}

static void *background_main(void *arg)
{
	struct job *j = arg;
	saas_engine *e = j->engine;

	saas__error_clear();
	if (job_run(j) < 0)
		saas__log(e, SAAS_LOG_ERROR, "recording execution %s failed: %s", j->rec.id, saas_error_last()->message);
	free(j->rec.error);
	job_free(j);
	pthread_mutex_lock(&e->mu);
	e->background--;
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

static int job_new(struct job **out, saas_engine *e, const char *sandbox_id, const char *command,
                   const saas_exec_options *o)
{
	struct job *j = calloc(1, sizeof(*j));
	size_t nenv = 0;

	if (!j)
		return saas__oom();
	j->engine = e;
	saas__strlcpy(j->sandbox_id, sandbox_id, sizeof(j->sandbox_id));
	j->timeout_ms = (o->timeout_s ? o->timeout_s : SAAS_EXEC_TIMEOUT_DEFAULT) * 1000;
	j->max_output = o->max_output ? o->max_output : SAAS_EXEC_OUTPUT_DEFAULT;
	/* A relative directory is under the workspace, as a terminal's and a file's (the shell starts in the home). */
	if (!(j->command = saas__strdup(command)) || !(j->cwd = saas__workspace_path(o->cwd)))
		goto oom;
	if (o->env) {
		while (o->env[nenv])
			nenv++;
		if (!(j->env = calloc(nenv + 1, sizeof(*j->env))))
			goto oom;
		for (size_t i = 0; i < nenv; i++)
			if (!(j->env[i] = saas__strdup(o->env[i])))
				goto oom;
	}
	if (o->stdin_len) {
		if (!(j->stdin_data = malloc(o->stdin_len)))
			goto oom;
		memcpy(j->stdin_data, o->stdin_data, o->stdin_len);
		j->stdin_len = o->stdin_len;
	}
	*out = j;
	return SAAS_OK;
oom:
	job_free(j);
	return saas__oom();
}

/*
 * An execution's (or a terminal's) environment: its sandbox's default one
 * (saas_create_options.envs) less the names the execution sets, then the
 * execution's own, which so win. *out (NULL-terminated, borrowing from
 * *defaults and own) and *defaults are the caller's to free (free,
 * saas__rules_free); *out NULL: no variable at all.
 */
int saas__env_merge(saas_engine *e, const char *id, const char *const *own, char ***defaults, const char ***out)
{
	char **metadata = NULL;
	size_t nown = 0, ndef = 0, k = 0;
	int rc;

	*defaults = NULL;
	*out = NULL;
	if ((rc = saas__sandbox_values(e, id, &metadata, defaults)) < 0)
		return rc;
	saas__rules_free(metadata);
	while (own && own[nown])
		nown++;
	while ((*defaults)[ndef])
		ndef++;
	if (nown + ndef == 0)
		return SAAS_OK;
	if (!(*out = calloc(nown + ndef + 1, sizeof(**out))))
		return saas__oom();
	for (size_t i = 0; i < ndef; i++) {
		size_t klen = strcspn((*defaults)[i], "=") + 1; /* the name and its '=' */
		bool overridden = false;
		for (size_t j = 0; j < nown && !overridden; j++)
			overridden = strncmp(own[j], (*defaults)[i], klen) == 0;
		if (!overridden)
			(*out)[k++] = (*defaults)[i];
	}
	for (size_t j = 0; j < nown; j++)
		(*out)[k++] = own[j];
	return SAAS_OK;
}

int saas__local_exec(saas_client *c, const char *id, const char *command, const saas_exec_options *o,
                     unsigned int flags, saas_execution **out)
{
	return saas__local_exec_stream(c, id, command, o, NULL, flags, out);
}

int saas__local_exec_stream(saas_client *c, const char *id, const char *command, const saas_exec_options *o,
                            const saas_exec_callbacks *cb, unsigned int flags, saas_execution **out)
{
	saas_engine *e = c->engine;
	saas_store_sandbox sb;
	saas_limits lim;
	struct job *j = NULL;
	pthread_t tid;
	pthread_attr_t attr;
	void *ctx;
	int rc;

	if ((rc = saas__sandbox_ready(c, id, &sb)) < 0 || (rc = saas__vm_driver(e, sb.host_id, &ctx)) < 0)
		return rc;
	if ((rc = saas__account_limits(e, c->account_id, &lim)) < 0)
		return rc;
	/*
	 * The slot is taken before the job copies its stdin (up to 16 MiB) and
	 * held until the job is freed, so an account's running executions, and
	 * the memory and threads they hold, are bounded by its max_executions.
	 */
	if ((rc = saas__exec_slot_take(e, c->account_id, lim.max_executions)) < 0)
		return rc;
	{
		saas_exec_options merged = *o;
		char **defaults = NULL;
		const char **env = NULL;
		if ((rc = saas__env_merge(e, id, o->env, &defaults, &env)) == SAAS_OK) {
			merged.env = env;
			rc = job_new(&j, e, id, command, &merged);
		}
		free(env);
		saas__rules_free(defaults);
	}
	if (rc < 0) {
		saas__exec_slot_release(e, c->account_id);
		return rc;
	}
	saas__strlcpy(j->rec.account_id, c->account_id, sizeof(j->rec.account_id));
	j->ctx = ctx;
	j->slot = true;
	if ((rc = saas__id_new(j->rec.id, "exe-", 20)) < 0)
		goto out;
	saas__strlcpy(j->rec.sandbox_id, id, sizeof(j->rec.sandbox_id));
	j->rec.status = SAAS_EXEC_RUNNING;
	j->rec.exit_code = -1;
	j->rec.command = j->command;
	j->rec.started_at_ms = saas__engine_now(e);
	j->stdin_open = (flags & SAAS_EXEC_STDIN_OPEN) != 0;
	/*
	 * On a store other engines share, the execution's lease says its runner
	 * lives (renewed with the server's, claims.c); taken before its record
	 * exists, so no other engine ever sees it running and unleased.
	 */
	if (e->claims.shared) {
		char lease[SAAS_STORE_LEASE_NAME_MAX + 1];
		if ((rc = saas__claim_name(lease, "exec", j->rec.id)) < 0 || (rc = saas__claim_once(e, lease)) < 0)
			goto out;
		j->leased = true;
	}
	if ((rc = e->store->execution_insert(e->store_ctx, &j->rec)) < 0)
		goto out;
	if ((rc = saas__live_new(e, &j->rec, j->max_output, j->stdin_open, &j->live)) < 0)
		goto fail_record;

	if (flags & SAAS_EXEC_BACKGROUND) {
		saas_execution *p = NULL;
		if ((rc = execution_public(&j->rec, &p)) < 0)
			goto fail_record;
		p->stdin_open = j->stdin_open;
		pthread_mutex_lock(&e->mu);
		if (__atomic_load_n(&e->cancel, __ATOMIC_SEQ_CST)) {
			pthread_mutex_unlock(&e->mu);
			saas_execution_free(p);
			rc = saas__error(SAAS_ESTATE, SAAS_ERRCLASS_ARGS, 0, "the engine is shutting down");
			goto fail_record;
		}
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		rc = pthread_create(&tid, &attr, background_main, j);
		pthread_attr_destroy(&attr);
		if (rc != 0) {
			pthread_mutex_unlock(&e->mu);
			saas_execution_free(p);
			rc = saas__error(SAAS_ENOMEM, SAAS_ERRCLASS_OS, rc, "cannot start a thread for the execution");
			goto fail_record;
		}
		e->background++;
		pthread_mutex_unlock(&e->mu);
		*out = p;
		return SAAS_OK;
	}

	j->cb = cb;
	if (cb && cb->started && cb->started(cb->userdata, j->rec.id))
		saas__live_cancel(e, j->live);
	if ((rc = job_run(j)) == SAAS_OK)
		rc = execution_public(&j->rec, out);
	free(j->rec.error);
	j->rec.error = NULL;
	if (rc == SAAS_OK && cb && cb->exit)
		cb->exit(cb->userdata, *out);
	goto out;

fail_record:
	/* Nothing half-done: the execution we recorded says it never ran. */
	j->rec.status = SAAS_EXEC_FAILED;
	j->rec.finished_at_ms = saas__engine_now(e);
	j->rec.error = (char *)"could not be started";
	e->store->execution_finish(e->store_ctx, &j->rec);
	if (j->live)
		saas__live_end(e, j->live, &j->rec);
	j->rec.error = NULL;
out:
	job_free(j);
	return rc;
}

int saas__local_execution_get(saas_client *c, const char *id, saas_execution **out)
{
	saas_engine *e = c->engine;
	saas_store_execution x;
	int rc;

	if ((rc = saas__live_get(c, id, out)) <= 0)
		return rc; /* running: as it stands */
	memset(&x, 0, sizeof(x));
	rc = e->store->execution_get(e->store_ctx, id, &x);
	if (rc == SAAS_ENOTFOUND || (rc == SAAS_OK && strcmp(x.account_id, c->account_id) != 0)) {
		saas__store_execution_clear(&x);
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_ARGS, 0, "no execution '%s'", id);
	}
	if (rc == SAAS_OK)
		rc = execution_public(&x, out);
	saas__store_execution_clear(&x);
	return rc;
}

SAAS_EXTERN(const char *) saas_exec_status_name(int status)
{
	switch (status) {
	case SAAS_EXEC_RUNNING: return "running";
	case SAAS_EXEC_EXITED: return "exited";
	case SAAS_EXEC_TIMEDOUT: return "timeout";
	case SAAS_EXEC_FAILED: return "failed";
	}
	return "unknown";
}
