/*
 * A store's listings as arrays (list.h): one appender for every record
 * type, and a callback a type that hands it the row. The callbacks only
 * differ in the type they are called with: calling one function through
 * another's pointer type is undefined, so each type has its own.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdlib.h>
#include <string.h>

#include "store/list.h"
#include "util/error.h"
#include "util/util.h"

/* The rows so far; rc is set (and the listing stopped) when one could not be kept. */
struct rows {
	char *data;
	size_t n, cap, elem;
	int rc;
};

static int rows_add(struct rows *r, const void *row)
{
	if ((r->rc = saas__array_reserve(&r->data, &r->cap, r->n + 1, r->elem)) < 0)
		return 1;
	memcpy(r->data + r->n * r->elem, row, r->elem);
	r->n++;
	return 0;
}

/* The listing's end: the store's code, else the appender's; *count set, the rows in r->data or freed. */
static int rows_end(struct rows *r, int rc, size_t *count)
{
	if (rc == SAAS_OK)
		rc = r->rc;
	if (rc < 0) {
		free(r->data);
		r->data = NULL;
		r->n = 0;
	}
	*count = r->n;
	return rc;
}

#define ROWS_INIT(type) { NULL, 0, 0, sizeof(type), SAAS_OK }

static int add_account(void *ud, const saas_store_account *row)
{
	return rows_add(ud, row);
}

static int add_key(void *ud, const saas_store_key *row)
{
	return rows_add(ud, row);
}

static int add_user(void *ud, const saas_store_user *row)
{
	return rows_add(ud, row);
}

static int add_sandbox(void *ud, const saas_store_sandbox *row)
{
	return rows_add(ud, row);
}

static int add_port(void *ud, const saas_store_port *row)
{
	return rows_add(ud, row);
}

static int add_host(void *ud, const saas_store_host *row)
{
	return rows_add(ud, row);
}

int saas__store_accounts(const saas_store *st, void *ctx, saas_store_account **out, size_t *count)
{
	struct rows r = ROWS_INIT(saas_store_account);
	int rc = rows_end(&r, st->account_list(ctx, add_account, &r), count);

	*out = (saas_store_account *)(void *)r.data;
	return rc;
}

int saas__store_keys(const saas_store *st, void *ctx, const char *account_id, saas_store_key **out, size_t *count)
{
	struct rows r = ROWS_INIT(saas_store_key);
	int rc = rows_end(&r, st->key_list(ctx, account_id, add_key, &r), count);

	*out = (saas_store_key *)(void *)r.data;
	return rc;
}

int saas__store_users(const saas_store *st, void *ctx, saas_store_user **out, size_t *count)
{
	struct rows r = ROWS_INIT(saas_store_user);
	int rc = rows_end(&r, st->user_list(ctx, add_user, &r), count);

	*out = (saas_store_user *)(void *)r.data;
	return rc;
}

int saas__store_sandboxes(const saas_store *st, void *ctx, const saas_store_filter *filter, saas_store_sandbox **out,
                          size_t *count)
{
	struct rows r = ROWS_INIT(saas_store_sandbox);
	int rc = rows_end(&r, st->sandbox_list(ctx, filter, add_sandbox, &r), count);

	*out = (saas_store_sandbox *)(void *)r.data;
	return rc;
}

int saas__store_ports(const saas_store *st, void *ctx, const char *sandbox_id, saas_store_port **out, size_t *count)
{
	struct rows r = ROWS_INIT(saas_store_port);
	int rc = rows_end(&r, st->port_list(ctx, sandbox_id, add_port, &r), count);

	*out = (saas_store_port *)(void *)r.data;
	return rc;
}

int saas__store_hosts(const saas_store *st, void *ctx, saas_store_host **out, size_t *count)
{
	struct rows r = ROWS_INIT(saas_store_host);
	int rc = rows_end(&r, st->host_list(ctx, add_host, &r), count);

	*out = (saas_store_host *)(void *)r.data;
	return rc;
}

/* An execution's strings belong to the store until its callback returns: copied. */
static int add_execution(void *ud, const saas_store_execution *row)
{
	struct rows *r = ud;
	saas_store_execution x = *row;

	x.stdout_data = x.stderr_data = NULL;
	x.stdout_len = x.stderr_len = 0;
	x.command = x.error = NULL;
	if ((row->command && !(x.command = saas__strdup(row->command))) ||
	    (row->error && !(x.error = saas__strdup(row->error)))) {
		free(x.command);
		r->rc = saas__oom();
		return 1;
	}
	if (rows_add(r, &x) != 0) {
		free(x.command);
		free(x.error);
		return 1;
	}
	return 0;
}

void saas__store_executions_free(saas_store_execution *items, size_t count)
{
	for (size_t i = 0; items && i < count; i++) {
		free(items[i].command);
		free(items[i].error);
	}
	free(items);
}

int saas__store_executions(const saas_store *st, void *ctx, const char *sandbox_id, int64_t before_started_ms,
                           const char *before_id, unsigned int limit, saas_store_execution **out, size_t *count)
{
	struct rows r = ROWS_INIT(saas_store_execution);
	int rc = st->execution_list(ctx, sandbox_id, before_started_ms, before_id, limit, add_execution, &r);

	if (rc == SAAS_OK)
		rc = r.rc;
	if (rc < 0) {
		saas__store_executions_free((saas_store_execution *)(void *)r.data, r.n);
		r.data = NULL;
		r.n = 0;
	}
	*out = (saas_store_execution *)(void *)r.data;
	*count = r.n;
	return rc;
}
