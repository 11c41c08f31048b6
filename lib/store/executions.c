/*
 * The store's executions: recorded when they start, finished, listed and
 * pruned (slots.h says how the store's rooms share the work).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/slots.h"

/* ---- executions ---- */

/* An execution is recorded when it starts; execution_finish records the rest. */
static const saas__sql q_execution_insert = {
	Q_EXECUTION_INSERT,
	"INSERT INTO executions (id, sandbox_id, account_id, status, exit_code, command, started_at)"
	" VALUES ($1, $2, $3, 1, -1, $4, $5)", NULL, "inserting an execution", 0
};
static const saas__sql q_execution_finish = {
	Q_EXECUTION_FINISH,
	"UPDATE executions SET status = $2, exit_code = $3, stdout = $4, stderr = $5, stdout_truncated = $6,"
	" stderr_truncated = $7, error = $8, finished_at = $9 WHERE id = $1", NULL, "finishing an execution", 0
};
static const saas__sql q_execution_get = {
	.id = Q_EXECUTION_GET,
	.sql = "SELECT id, sandbox_id, account_id, status, exit_code, command, stdout, stderr, stdout_truncated,"
	       " stderr_truncated, error, started_at, finished_at FROM executions WHERE id = $1",
	.what = "reading an execution",
	.read = 1,
	.binary = 1,
};
/* executions_sandbox_status (sandbox_id, status) narrows to the sandbox; its rows are few (pruned). */
static const saas__sql q_execution_list = {
	Q_EXECUTION_LIST,
	"SELECT id, sandbox_id, account_id, status, exit_code, command, NULL, NULL, stdout_truncated,"
	" stderr_truncated, error, started_at, finished_at FROM executions WHERE sandbox_id = $1"
	" AND ($3 IS NULL OR started_at < $2 OR (started_at = $2 AND id < $3))"
	" ORDER BY started_at DESC, id DESC LIMIT $4", NULL, "listing executions", 1
};
static const saas__sql q_execution_fail = {
	Q_EXECUTION_FAIL,
	"UPDATE executions SET status = $2, error = $3, finished_at = $4 WHERE sandbox_id = $1 AND status = 1", NULL,
	"failing running executions", 0
};
/* finished_at > 0: a running execution (0) is never old enough. */
static const saas__sql q_execution_prune = {
	Q_EXECUTION_PRUNE,
	"DELETE FROM executions WHERE id IN (SELECT id FROM executions"
	" WHERE finished_at > 0 AND finished_at < $1 AND status != 1 LIMIT $2)", NULL, "pruning executions", 0
};

static void execution_free(saas_store_execution *e)
{
	free(e->command);
	free(e->stdout_data);
	free(e->stderr_data);
	free(e->error);
	e->command = e->stdout_data = e->stderr_data = e->error = NULL;
}

/* A malloc()ed copy of a column with a NUL after it; SQL NULL stays NULL if `keep_null`, else "". */
static int get_dup(const struct saas__dialect *d, const saas__row *row, int col, int keep_null, char **out,
                   size_t *len)
{
	size_t n = 0;
	const char *t = d->col_text(row, col, &n);

	*out = NULL;
	if (len)
		*len = 0;
	if (!t && keep_null)
		return SAAS_OK;
	if (!(*out = malloc(n + 1)))
		return saas__oom();
	if (n)
		memcpy(*out, t, n);
	(*out)[n] = '\0';
	if (len)
		*len = n;
	return SAAS_OK;
}

/* The columns of q_execution_get; a list has NULL output columns, left NULL. */
static int execution_row(const struct saas__dialect *d, const saas__row *row, void *out, int output)
{
	saas_store_execution *e = out;
	int rc;

	if ((rc = get_text(d, row, 0, e->id, sizeof(e->id))) < 0 ||
	    (rc = get_text(d, row, 1, e->sandbox_id, sizeof(e->sandbox_id))) < 0 ||
	    (rc = get_text(d, row, 2, e->account_id, sizeof(e->account_id))) < 0 ||
	    (rc = get_dup(d, row, 5, 0, &e->command, NULL)) < 0 ||
	    (output && (rc = get_dup(d, row, 6, 0, &e->stdout_data, &e->stdout_len)) < 0) ||
	    (output && (rc = get_dup(d, row, 7, 0, &e->stderr_data, &e->stderr_len)) < 0) ||
	    (rc = get_dup(d, row, 10, 1, &e->error, NULL)) < 0) {
		execution_free(e);
		return rc;
	}
	e->status = (int)d->col_i64(row, 3);
	e->exit_code = (int)d->col_i64(row, 4);
	e->stdout_truncated = (int)d->col_i64(row, 8);
	e->stderr_truncated = (int)d->col_i64(row, 9);
	e->started_at_ms = d->col_i64(row, 11);
	e->finished_at_ms = d->col_i64(row, 12);
	return SAAS_OK;
}

static int execution_full_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	return execution_row(d, row, out, 1);
}

static int execution_list_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	return execution_row(d, row, out, 0);
}

/* Free the records of a fetch of executions. */
static void executions_free(struct fetch *f)
{
	for (size_t i = 0; i < f->n; i++)
		execution_free((saas_store_execution *)(void *)(f->data + i * f->elem));
	free(f->data);
	f->data = NULL;
	f->n = 0;
}

int saas__st_execution_insert(void *ctx, const saas_store_execution *e)
{
	int rc;

	if (!e || !e->command)
		return saas__inval("execution or its command is NULL");
	if ((rc = saas__store_field(e->id, sizeof(e->id), "execution id")) < 0 ||
	    (rc = saas__store_field(e->sandbox_id, sizeof(e->sandbox_id), "sandbox id")) < 0 ||
	    (rc = saas__store_field(e->account_id, sizeof(e->account_id), "account id")) < 0)
		return rc;
	const saas__param p[] = {
		SAAS__TEXT(e->id), SAAS__TEXT(e->sandbox_id), SAAS__TEXT(e->account_id), SAAS__TEXT(e->command),
		SAAS__I64(e->started_at_ms),
	};
	rc = run1(ctx, &q_execution_insert, p, 5, NULL);
	if (rc == SAAS_EEXISTS)
		saas__error_wrap(rc, "execution '%.64s' already exists", e->id);
	else if (rc == SAAS_ENOTFOUND)
		rc = saas__store_not_found("sandbox", e->sandbox_id);
	return rc;
}

/* Output is whatever the command wrote, NUL bytes included; an empty one is stored as NULL. */
static saas__param output_param(const char *data, size_t len)
{
	return (saas__param){ .type = SAAS__P_BLOB, .text = len ? data : NULL, .len = len };
}

int saas__st_execution_finish(void *ctx, const saas_store_execution *e)
{
	int64_t changed = 0;
	int rc;

	if (!e)
		return saas__inval("execution is NULL");
	if ((e->stdout_len && !e->stdout_data) || (e->stderr_len && !e->stderr_data))
		return saas__inval("execution output has a length but no data");
	if (e->stdout_len > INT_MAX || e->stderr_len > INT_MAX)
		return saas__inval("execution output is too long");
	if ((rc = saas__store_field(e->id, sizeof(e->id), "execution id")) < 0)
		return rc;
	const saas__param p[] = {
		SAAS__TEXT(e->id), SAAS__I64(e->status), SAAS__I64(e->exit_code),
		output_param(e->stdout_data, e->stdout_len), output_param(e->stderr_data, e->stderr_len),
		SAAS__I64(e->stdout_truncated ? 1 : 0), SAAS__I64(e->stderr_truncated ? 1 : 0), SAAS__TEXT(e->error),
		SAAS__I64(e->finished_at_ms),
	};
	rc = run1(ctx, &q_execution_finish, p, 9, &changed);
	if (rc == SAAS_OK && changed == 0)
		rc = saas__store_not_found("execution", e->id);
	return rc;
}

int saas__st_execution_get(void *ctx, const char *id, saas_store_execution *out)
{
	struct fetch f;
	int rc;

	if (!id || !out)
		return saas__inval("execution id or output is NULL");
	rc = fetch(ctx, &q_execution_get, &SAAS__TEXT(id), 1, execution_full_row, sizeof(*out), &f);
	if (rc == SAAS_OK && f.n == 0)
		rc = saas__store_not_found("execution", id);
	if (rc == SAAS_OK) {
		/* The first row's memory becomes the caller's. */
		memcpy(out, f.data, sizeof(*out));
		memset(f.data, 0, sizeof(*out));
	}
	executions_free(&f);
	return rc;
}

int saas__st_execution_list(void *ctx, const char *sandbox_id, int64_t before_started_ms, const char *before_id,
                            unsigned int limit, saas_store_execution_fn fn, void *userdata)
{
	/* A NULL before_id is no cursor; no limit is the largest one, which both dialects take. */
	const saas__param p[] = {
		SAAS__TEXT(sandbox_id), SAAS__I64(before_started_ms), SAAS__TEXT(before_id),
		SAAS__I64(limit ? (int64_t)limit : INT64_MAX),
	};
	struct fetch f;
	int rc;

	if (!sandbox_id || !fn)
		return saas__inval("sandbox id or callback is NULL");
	rc = fetch(ctx, &q_execution_list, p, 4, execution_list_row, sizeof(saas_store_execution), &f);
	for (size_t i = 0; rc == SAAS_OK && i < f.n; i++)
		if (fn(userdata, (const saas_store_execution *)(void *)(f.data + i * f.elem)) != 0)
			break;
	executions_free(&f);
	return rc;
}

int saas__st_execution_fail_running(void *ctx, const char *sandbox_id, const char *error, int64_t at_ms)
{
	const saas__param p[] = { SAAS__TEXT(sandbox_id), SAAS__I64(SAAS_EXEC_FAILED), SAAS__TEXT(error),
		                  SAAS__I64(at_ms) };
	int rc;

	if (!sandbox_id)
		return saas__inval("sandbox id is NULL");
	rc = run1(ctx, &q_execution_fail, p, 4, NULL);
	return rc;
}

int saas__st_execution_prune(void *ctx, int64_t finished_before_ms, unsigned int max, unsigned int *pruned)
{
	return prune1(ctx, &q_execution_prune, finished_before_ms, max, pruned);
}
