/*
 * Ports of a sandbox: exposing one under a preview name, and the tunnels to
 * it, for a client or (keyless) for the preview proxy. The driver makes the
 * tunnel; the core decides which sandbox and whether the port is exposed.
 */
#include <string.h>

#include "core/core.h"

struct find_port {
	unsigned int port;
	saas_store_port *out;
	int found;
};

static int match_port(void *ud, const saas_store_port *exposure)
{
	struct find_port *f = ud;

	if (exposure->port == f->port) {
		if (f->out)
			*f->out = *exposure;
		f->found = 1;
	}
	return f->found;
}

/* The exposure of a sandbox's port: 1 and *out filled, 0 if the port is not exposed, or an error. */
static int port_exposure(saas_engine *e, const char *id, unsigned int port, saas_store_port *out)
{
	struct find_port fp = { port, out, 0 };
	int rc;

	if ((rc = e->store->port_list(e->store_ctx, id, match_port, &fp)) < 0)
		return rc;
	return fp.found;
}

int saas__local_port_expose(saas_client *c, const char *id, unsigned int port, char **url)
{
	saas_engine *e = c->engine;
	saas_store_sandbox sb;
	saas_store_port exposure;
	int rc;

	if ((rc = saas__sandbox_ready(c, id, &sb)) < 0)
		return rc;
	/* A fresh name every time; the store keeps the first if the port is exposed already. */
	memset(&exposure, 0, sizeof(exposure));
	saas__strlcpy(exposure.sandbox_id, id, sizeof(exposure.sandbox_id));
	exposure.port = port;
	exposure.created_at_ms = saas__engine_now(e);
	if ((rc = saas__id_new(exposure.name, "", SAAS_PREVIEW_NAME_LEN)) < 0 ||
	    (rc = e->store->port_insert(e->store_ctx, &exposure)) < 0)
		return rc;
	if ((rc = port_exposure(e, id, port, &exposure)) < 0)
		return rc;
	if (rc == 0) /* un-exposed again between the two calls */
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_ARGS, 0,
		                   "port %u of sandbox '%s' was un-exposed while it was being exposed", port, id);
	if (!(*url = saas__preview_url(e, &exposure)))
		return saas__oom();
	saas__log(e, SAAS_LOG_INFO, "sandbox %s exposes port %u", id, port);
	return SAAS_OK;
}

int saas__local_port_unexpose(saas_client *c, const char *id, unsigned int port)
{
	saas_engine *e = c->engine;
	saas_store_sandbox sb;
	int rc;

	/* Any state: a destroyed sandbox's exposures are gone already, and forgetting them is harmless. */
	if ((rc = saas__sandbox_get_owned(c, id, &sb)) < 0)
		return rc;
	if ((rc = e->store->port_delete(e->store_ctx, id, port)) < 0)
		return rc;
	saas__log(e, SAAS_LOG_INFO, "sandbox %s no longer exposes port %u", id, port);
	return SAAS_OK;
}

/* A tunnel to an exposed port of a ready sandbox; `sb` is its row (owner checked or not by the caller). */
static int port_connect_row(saas_engine *e, const saas_store_sandbox *sb, unsigned int port, int *fd)
{
	void *ctx;
	int rc;

	if ((rc = port_exposure(e, sb->id, port, NULL)) < 0)
		return rc;
	if (rc == 0)
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_ARGS, 0, "port %u of sandbox '%s' is not exposed", port,
		                   sb->id);
	if (!e->driver->port_connect)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "driver '%s' cannot open tunnels",
		                   e->driver->name);
	if ((rc = saas__vm_driver(e, sb->host_id, &ctx)) < 0)
		return rc;
	return e->driver->port_connect(ctx, sb->id, port, fd);
}

int saas__local_port_connect(saas_client *c, const char *id, unsigned int port, int *fd)
{
	saas_store_sandbox sb;
	int rc;

	if ((rc = saas__sandbox_ready(c, id, &sb)) < 0)
		return rc;
	return port_connect_row(c->engine, &sb, port, fd);
}

/* A ready sandbox's row, for the keyless calls: without a key, every way of not being reachable looks the same. */
static int ready_row(saas_engine *e, const char *id, saas_store_sandbox *sb)
{
	int rc = e->store->sandbox_get(e->store_ctx, id, sb);

	if (rc == SAAS_ENOTFOUND || (rc == SAAS_OK && (sb->status != SAAS_SANDBOX_READY ||
	                                               sb->expires_at_ms <= saas__engine_now(e))))
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_ARGS, 0, "no ready sandbox '%s'", id);
	return rc;
}

SAAS_EXTERN(int) saas_engine_port_connect(int *fd, saas_engine *e, const char *id, unsigned int port)
{
	saas_store_sandbox sb;
	int rc;

	saas__error_clear();
	if (!fd)
		return saas__inval("fd is NULL");
	*fd = -1;
	if (!e)
		return saas__inval("engine is NULL");
	if (!saas__valid_text(id, SAAS_ID_MAX))
		return saas__inval("sandbox id is missing, too long or not printable");
	if (port == 0 || port > 65535)
		return saas__inval("port must be between 1 and 65535");
	if ((rc = saas__engine_need_driver(e)) < 0)
		return rc;
	if ((rc = ready_row(e, id, &sb)) < 0)
		return rc;
	return port_connect_row(e, &sb, port, fd);
}

SAAS_EXTERN(int) saas_engine_preview_find(char sandbox_id[SAAS_ID_MAX + 1], unsigned int *port, saas_engine *e,
                                          const char *name)
{
	saas_store_sandbox sb;
	saas_store_port exposure;
	size_t i;
	int rc;

	saas__error_clear();
	if (!sandbox_id || !port)
		return saas__inval("sandbox_id or port is NULL");
	sandbox_id[0] = '\0';
	*port = 0;
	if (!e)
		return saas__inval("engine is NULL");
	/* Only names the engine could have made reach the store. */
	for (i = 0; name && name[i] && i <= SAAS_PREVIEW_NAME_LEN; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '2' && name[i] <= '7')))
			break;
	if (!name || i != SAAS_PREVIEW_NAME_LEN || name[i])
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_ARGS, 0, "no preview by that name");
	rc = e->store->port_find(e->store_ctx, name, &exposure);
	if (rc == SAAS_ENOTFOUND)
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_ARGS, 0, "no preview by that name");
	if (rc < 0)
		return rc;
	if ((rc = ready_row(e, exposure.sandbox_id, &sb)) < 0)
		return rc;
	saas__strlcpy(sandbox_id, exposure.sandbox_id, SAAS_ID_MAX + 1);
	*port = exposure.port;
	return SAAS_OK;
}
