/*
 * The local provider: the engine's table of client operations, the two ways
 * to open a client on an engine, and the terminal a local client opens (the
 * driver's session). The public calls that lead here are in client/.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

const struct saas__client_ops saas__local_ops = {
	.account = saas__local_account,
	.usage = saas__local_usage,
	.sandbox_create = saas__local_sandbox_create,
	.sandbox_get = saas__local_sandbox_get,
	.sandbox_list = saas__local_sandbox_list,
	.sandbox_extend = saas__local_sandbox_extend,
	.sandbox_destroy = saas__local_sandbox_destroy,
	.exec = saas__local_exec,
	.execution_get = saas__local_execution_get,
	.file_write = saas__local_file_write,
	.file_read = saas__local_file_read,
	.file_list = saas__local_file_list,
	.port_expose = saas__local_port_expose,
	.port_connect = saas__local_port_connect,
	.port_unexpose = saas__local_port_unexpose,
	/* No .free: the engine a local client serves is the caller's, not the client's. */
	.sandbox_network_set = saas__local_sandbox_network_set,
	.pty_open = saas__local_pty_open,
	.exec_stream = saas__local_exec_stream,
	.execution_follow = saas__local_execution_follow,
	.execution_stdin = saas__local_execution_stdin,
	.execution_signal = saas__local_execution_signal,
	.execution_list_running = saas__local_execution_list_running,
	.execution_cancel = saas__local_execution_cancel,
	.sandbox_fork = saas__local_sandbox_fork,
	.sandbox_pause = saas__local_sandbox_pause,
	.sandbox_resume = saas__local_sandbox_resume,
	.execution_list = saas__local_execution_list,
	.sandbox_metrics = saas__local_sandbox_metrics,
	.file_mkdir = saas__local_file_mkdir,
	.file_remove = saas__local_file_remove,
	.file_rename = saas__local_file_rename,
	.code_context_create = saas__local_code_context_create,
	.code_context_list = saas__local_code_context_list,
	.code_context_restart = saas__local_code_context_restart,
	.code_context_delete = saas__local_code_context_delete,
	.code_run = saas__local_code_run,
};

/* What both ways to open check first, with the thread's error cleared. */
static int open_check(saas_client **out, saas_engine *engine, unsigned int flags)
{
	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	if (!engine)
		return saas__inval("engine is NULL");
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	return SAAS_OK;
}

/* A local client of `account_id` on the engine. */
static int client_new(saas_client **out, saas_engine *engine, const char *account_id)
{
	saas_client *c = calloc(1, sizeof(*c));

	if (!c)
		return saas__oom();
	c->ops = &saas__local_ops;
	c->engine = engine;
	saas__strlcpy(c->account_id, account_id, sizeof(c->account_id));
	*out = c;
	return SAAS_OK;
}

SAAS_EXTERN(int) saas_client_open_local(saas_client **out, saas_engine *engine, const char *api_key,
                                        unsigned int flags)
{
	saas_store_key key;
	char hash[65];
	int rc;

	if ((rc = open_check(out, engine, flags)) < 0)
		return rc;
	if (!api_key || !*api_key)
		return saas__error(SAAS_EAUTH, SAAS_ERRCLASS_AUTH, 0, "no API key given");
	if (strlen(api_key) > 256)
		return saas__error(SAAS_EAUTH, SAAS_ERRCLASS_AUTH, 0, "invalid API key");
	saas_key_fingerprint(hash, api_key);
	rc = engine->store->key_find(engine->store_ctx, hash, &key);
	if (rc == SAAS_ENOTFOUND || (rc == SAAS_OK && key.revoked_at_ms != 0))
		return saas__error(SAAS_EAUTH, SAAS_ERRCLASS_AUTH, 0,
		                   rc == SAAS_OK ? "this API key was revoked" : "invalid API key");
	if (rc < 0)
		return rc;
	if (key.account_disabled_at_ms)
		return saas__error(SAAS_EAUTH, SAAS_ERRCLASS_AUTH, 0, "this API key's account is disabled");
	/* "Last used" is shown to people, who need the day, not the request: once per open is enough. */
	if ((rc = engine->store->key_touch(engine->store_ctx, hash, saas__engine_now(engine))) < 0)
		saas__log(engine, SAAS_LOG_WARN, "cannot record the use of key %s: %s", key.id, saas_error_last()->message);
	return client_new(out, engine, key.account_id);
}

SAAS_EXTERN(int) saas_client_open_account(saas_client **out, saas_engine *engine, const char *account_id,
                                          unsigned int flags)
{
	saas_store_account acc;
	int rc;

	if ((rc = open_check(out, engine, flags)) < 0)
		return rc;
	if (!saas__valid_text(account_id, SAAS_ID_MAX))
		return saas__inval("account id is empty, too long or not printable");
	if ((rc = engine->store->account_get(engine->store_ctx, account_id, &acc)) < 0)
		return rc;
	if (acc.disabled_at_ms)
		return saas__error(SAAS_EAUTH, SAAS_ERRCLASS_AUTH, 0, "account %s is disabled", account_id);
	return client_new(out, engine, acc.id);
}

/* ---- the terminal: the driver's session ---- */

struct local_pty {
	saas_engine *engine;
	void *ctx;             /* the driver context of the sandbox's host */
	void *session;
};

static int local_resize(saas_pty *pty, unsigned int cols, unsigned int rows)
{
	struct local_pty *l = pty->provider;

	return l->engine->driver->pty_resize(l->ctx, l->session, cols, rows);
}

static void local_close(saas_pty *pty, int *exit_status)
{
	struct local_pty *l = pty->provider;

	l->engine->driver->pty_close(l->ctx, l->session, exit_status);
	free(l);
	pty->provider = NULL;
}

static const struct saas__pty_ops local_pty_ops = { .resize = local_resize, .close = local_close };

int saas__local_pty_open(saas_client *c, const char *id, const struct saas__pty_req *req, saas_pty **out)
{
	saas_engine *e = c->engine;
	const saas_driver *d;
	saas_driver_pty dreq;
	saas_store_sandbox sb;
	saas_pty *pty = NULL;
	struct local_pty *l = NULL;
	char *cwd = NULL, **defaults = NULL;
	const char **env = NULL;
	void *ctx;
	int rc;

	if ((rc = saas__sandbox_ready(c, id, &sb)) < 0 || (rc = saas__vm_driver(e, sb.host_id, &ctx)) < 0)
		return rc;
	d = e->driver;
	/* A version 2 table ends before the terminal slots. */
	if (d->version < 3 || !d->pty_open || !d->pty_resize || !d->pty_close)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "driver '%s' cannot open terminals", d->name);
	memset(&dreq, 0, sizeof(dreq));
	if (d->version >= 12) {
		/* A relative directory is under the workspace, as for files (the login shell starts in the home). */
		if (req->cwd && !(cwd = saas__workspace_path(req->cwd))) {
			rc = SAAS_ENOMEM;
			goto out;
		}
		/* The sandbox's own environment, as every command in it gets. */
		if ((rc = saas__env_merge(e, sb.id, req->env, &defaults, &env)) < 0)
			goto out;
		dreq.cwd = cwd;
		dreq.env = env;
	} else if (req->cwd || req->env) {
		/*
		 * An older table cannot read the fields: the terminal would start
		 * elsewhere, without the variables, and nobody would know.
		 */
		rc = saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0,
		                 "driver '%s' cannot start a terminal in a directory or with variables (its table is of "
		                 "version %u; 12 can)", d->name, d->version);
		goto out;
	}
	if (!(pty = calloc(1, sizeof(*pty))) || !(l = calloc(1, sizeof(*l)))) {
		rc = saas__oom();
		goto out;
	}
	dreq.term = req->term;
	dreq.cols = req->cols;
	dreq.rows = req->rows;
	dreq.tty = req->tty;
	pty->fd = -1;
	if ((rc = d->pty_open(ctx, sb.id, &dreq, &pty->fd, &l->session)) < 0)
		goto out;
	l->engine = e;
	l->ctx = ctx;
	pty->ops = &local_pty_ops;
	pty->provider = l;
	*out = pty;
	pty = NULL;
	l = NULL;
	rc = SAAS_OK;
out:
	free(env);
	saas__rules_free(defaults);
	free(cwd);
	free(l);
	free(pty);
	return rc;
}
