/*
 * Files and ports of a sandbox. The driver moves the bytes; the core decides
 * which sandbox, which path, and how much.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

/* Relative paths are relative to the workspace, as they are for commands. */
static char *absolute_path(const char *path)
{
	char *abs;

	if (!path || !*path)
		return saas__strdup(SAAS_WORKSPACE);
	if (path[0] == '/')
		return saas__strdup(path);
	if (asprintf(&abs, "%s/%s", SAAS_WORKSPACE, path) < 0) {
		saas__oom();
		return NULL;
	}
	return abs;
}

int saas__local_file_write(saas_client *c, const char *id, const char *path, saas_read_fn reader, void *ud,
                           int64_t size, unsigned int mode)
{
	saas_engine *e = c->engine;
	saas_store_sandbox sb;
	char *abs;
	int rc;

	if ((rc = saas__sandbox_ready(c, id, &sb)) < 0)
		return rc;
	if (!e->driver->file_write)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "driver '%s' cannot write files",
		                   e->driver->name);
	if (!(abs = absolute_path(path)))
		return SAAS_ENOMEM;
	rc = e->driver->file_write(e->driver_ctx, id, abs, mode ? mode : 0644, reader, ud, size);
	free(abs);
	return rc;
}

int saas__local_file_read(saas_client *c, const char *id, const char *path, int64_t max, saas_write_fn writer,
                          void *ud, int64_t *size)
{
	saas_engine *e = c->engine;
	saas_store_sandbox sb;
	char *abs;
	int rc;

	if ((rc = saas__sandbox_ready(c, id, &sb)) < 0)
		return rc;
	if (!e->driver->file_read)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "driver '%s' cannot read files",
		                   e->driver->name);
	if (!(abs = absolute_path(path)))
		return SAAS_ENOMEM;
	rc = e->driver->file_read(e->driver_ctx, id, abs, max, writer, ud, size);
	free(abs);
	return rc;
}

struct collect_entries {
	saas_file_list *list;
	size_t cap;
	unsigned int max;
	int rc;
};

static int collect_entry(void *ud, const saas_file_entry *entry)
{
	struct collect_entries *c = ud;
	saas_file_entry *slot;

	if (c->list->count >= c->max) {
		c->list->truncated = 1;
		return 1;
	}
	if (c->list->count == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		saas_file_entry *entries = realloc(c->list->entries, cap * sizeof(*entries));
		if (!entries) {
			c->rc = saas__oom();
			return 1;
		}
		c->list->entries = entries;
		c->cap = cap;
	}
	slot = &c->list->entries[c->list->count];
	*slot = *entry;
	if (!(slot->path = saas__strdup(entry->path))) {
		c->rc = SAAS_ENOMEM;
		return 1;
	}
	c->list->count++;
	return 0;
}

int saas__local_file_list(saas_client *c, const char *id, const char *path, unsigned int depth,
                          unsigned int max_entries, saas_file_list **out)
{
	saas_engine *e = c->engine;
	struct collect_entries ce = { NULL, 0, max_entries, SAAS_OK };
	saas_store_sandbox sb;
	int rc;

	if ((rc = saas__sandbox_ready(c, id, &sb)) < 0)
		return rc;
	if (!e->driver->file_list)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "driver '%s' cannot list files",
		                   e->driver->name);
	if (!(ce.list = calloc(1, sizeof(*ce.list))))
		return saas__oom();
	if (!(ce.list->root = absolute_path(path))) {
		saas_file_list_free(ce.list);
		return SAAS_ENOMEM;
	}
	rc = e->driver->file_list(e->driver_ctx, id, ce.list->root, depth, collect_entry, &ce);
	if (rc == SAAS_OK)
		rc = ce.rc;
	if (rc < 0) {
		saas_file_list_free(ce.list);
		return rc;
	}
	*out = ce.list;
	return SAAS_OK;
}

int saas__local_port_expose(saas_client *c, const char *id, unsigned int port, char **url)
{
	saas_engine *e = c->engine;
	saas_store_sandbox sb;
	int rc;

	if ((rc = saas__sandbox_ready(c, id, &sb)) < 0)
		return rc;
	if ((rc = e->store->port_insert(e->store_ctx, id, port, saas__engine_now(e))) < 0)
		return rc;
	if (!(*url = saas__preview_url(e, id, port)))
		return saas__oom();
	saas__log(e, SAAS_LOG_INFO, "sandbox %s exposes port %u", id, port);
	return SAAS_OK;
}

struct find_port {
	unsigned int port;
	int found;
};

static int match_port(void *ud, unsigned int port, int64_t created_at_ms)
{
	struct find_port *f = ud;

	(void)created_at_ms;
	if (port == f->port)
		f->found = 1;
	return f->found;
}

/* A tunnel to an exposed port of a ready sandbox; `sb` is its row (owner checked or not by the caller). */
static int port_connect_row(saas_engine *e, const saas_store_sandbox *sb, unsigned int port, int *fd)
{
	struct find_port fp = { port, 0 };
	int rc;

	if ((rc = e->store->port_list(e->store_ctx, sb->id, match_port, &fp)) < 0)
		return rc;
	if (!fp.found)
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_ARGS, 0, "port %u of sandbox '%s' is not exposed", port,
		                   sb->id);
	if (!e->driver->port_connect)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "driver '%s' cannot open tunnels",
		                   e->driver->name);
	return e->driver->port_connect(e->driver_ctx, sb->id, port, fd);
}

int saas__local_port_connect(saas_client *c, const char *id, unsigned int port, int *fd)
{
	saas_store_sandbox sb;
	int rc;

	if ((rc = saas__sandbox_ready(c, id, &sb)) < 0)
		return rc;
	return port_connect_row(c->engine, &sb, port, fd);
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
	rc = e->store->sandbox_get(e->store_ctx, id, &sb);
	/* Without a key, every way of not being reachable looks the same. */
	if (rc == SAAS_ENOTFOUND || (rc == SAAS_OK && (sb.status != SAAS_SANDBOX_READY ||
	                                               sb.expires_at_ms <= saas__engine_now(e))))
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_ARGS, 0, "no ready sandbox '%s'", id);
	if (rc < 0)
		return rc;
	return port_connect_row(e, &sb, port, fd);
}
