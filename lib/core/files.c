/*
 * Files of a sandbox. The driver moves the bytes; the core decides which
 * sandbox, which path, and how much. Ports are in ports.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

/* Relative paths are relative to the workspace, as they are for commands and terminals. */
char *saas__workspace_path(const char *path)
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
	void *ctx;
	int rc;

	if ((rc = saas__sandbox_ready(c, id, &sb)) < 0 || (rc = saas__vm_driver(e, sb.host_id, &ctx)) < 0)
		return rc;
	if (!e->driver->file_write)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "driver '%s' cannot write files",
		                   e->driver->name);
	if (!(abs = saas__workspace_path(path)))
		return SAAS_ENOMEM;
	if ((rc = saas__transfer_slot_take(e, c->account_id)) == SAAS_OK) {
		rc = e->driver->file_write(ctx, id, abs, mode ? mode : 0644, reader, ud, size);
		saas__transfer_slot_release(e, c->account_id);
	}
	free(abs);
	return rc;
}

int saas__local_file_read(saas_client *c, const char *id, const char *path, int64_t max, saas_write_fn writer,
                          void *ud, int64_t *size)
{
	saas_engine *e = c->engine;
	saas_store_sandbox sb;
	char *abs;
	void *ctx;
	int rc;

	if ((rc = saas__sandbox_ready(c, id, &sb)) < 0 || (rc = saas__vm_driver(e, sb.host_id, &ctx)) < 0)
		return rc;
	if (!e->driver->file_read)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "driver '%s' cannot read files",
		                   e->driver->name);
	if (!(abs = saas__workspace_path(path)))
		return SAAS_ENOMEM;
	if ((rc = saas__transfer_slot_take(e, c->account_id)) == SAAS_OK) {
		rc = e->driver->file_read(ctx, id, abs, max, writer, ud, size);
		saas__transfer_slot_release(e, c->account_id);
	}
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
	if ((c->rc = SAAS__ARRAY_RESERVE(c->list->entries, c->cap, c->list->count + 1)) < 0)
		return 1;
	if (!(slot = malloc(sizeof(*slot)))) {
		c->rc = saas__oom();
		return 1;
	}
	*slot = *entry;
	c->list->entries[c->list->count++] = slot;
	if (!(slot->path = saas__strdup(entry->path))) {
		c->rc = SAAS_ENOMEM;
		return 1;
	}
	return 0;
}

int saas__local_file_list(saas_client *c, const char *id, const char *path, unsigned int depth,
                          unsigned int max_entries, saas_file_list **out)
{
	saas_engine *e = c->engine;
	struct collect_entries ce = { NULL, 0, max_entries, SAAS_OK };
	saas_store_sandbox sb;
	void *ctx;
	int rc;

	if ((rc = saas__sandbox_ready(c, id, &sb)) < 0 || (rc = saas__vm_driver(e, sb.host_id, &ctx)) < 0)
		return rc;
	if (!e->driver->file_list)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "driver '%s' cannot list files",
		                   e->driver->name);
	if (!(ce.list = calloc(1, sizeof(*ce.list))))
		return saas__oom();
	if (!(ce.list->root = saas__workspace_path(path))) {
		saas_file_list_free(ce.list);
		return SAAS_ENOMEM;
	}
	rc = e->driver->file_list(ctx, id, ce.list->root, depth, collect_entry, &ce);
	if (rc == SAAS_OK)
		rc = ce.rc;
	if (rc < 0) {
		saas_file_list_free(ce.list);
		return rc;
	}
	*out = ce.list;
	return SAAS_OK;
}

/*
 * The driver's slot for a version 11 call, or SAAS_ENOTSUP naming what the
 * driver cannot do: a driver built against an older table has no such slot.
 */
#define DRIVER_SLOT(e, slot, what)                                                                  \
	((e)->driver->version >= 11 && (e)->driver->slot                                                \
	         ? SAAS_OK                                                                              \
	         : saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "driver '%s' cannot %s", (e)->driver->name, \
	                       what))

/*
 * These calls move no bytes, but each is a walk of guest requests (a remove
 * of a tree up to SAAS_FILE_REMOVE_ENTRIES_MAX of them): they take one of
 * the account's transfer slots, as a read or a write does, so that a tenant
 * cannot keep more of them going at once than max_transfers.
 */
int saas__local_file_mkdir(saas_client *c, const char *id, const char *path, int *created)
{
	saas_engine *e = c->engine;
	saas_store_sandbox sb;
	char *abs;
	void *ctx;
	int rc;

	if ((rc = saas__sandbox_ready(c, id, &sb)) < 0 || (rc = saas__vm_driver(e, sb.host_id, &ctx)) < 0 ||
	    (rc = DRIVER_SLOT(e, file_mkdir, "make directories")) < 0)
		return rc;
	if (!(abs = saas__workspace_path(path)))
		return SAAS_ENOMEM;
	if ((rc = saas__transfer_slot_take(e, c->account_id)) == SAAS_OK) {
		*created = 0;
		rc = e->driver->file_mkdir(ctx, id, abs, created);
		saas__transfer_slot_release(e, c->account_id);
	}
	free(abs);
	return rc;
}

int saas__local_file_remove(saas_client *c, const char *id, const char *path)
{
	saas_engine *e = c->engine;
	saas_store_sandbox sb;
	char *abs;
	void *ctx;
	int rc;

	if ((rc = saas__sandbox_ready(c, id, &sb)) < 0 || (rc = saas__vm_driver(e, sb.host_id, &ctx)) < 0 ||
	    (rc = DRIVER_SLOT(e, file_remove, "remove files")) < 0)
		return rc;
	if (!(abs = saas__workspace_path(path)))
		return SAAS_ENOMEM;
	if ((rc = saas__transfer_slot_take(e, c->account_id)) == SAAS_OK) {
		rc = e->driver->file_remove(ctx, id, abs);
		saas__transfer_slot_release(e, c->account_id);
	}
	free(abs);
	return rc;
}

int saas__local_file_rename(saas_client *c, const char *id, const char *from, const char *to, unsigned int flags)
{
	saas_engine *e = c->engine;
	saas_store_sandbox sb;
	char *abs_from = NULL, *abs_to = NULL;
	void *ctx;
	int rc;

	if ((rc = saas__sandbox_ready(c, id, &sb)) < 0 || (rc = saas__vm_driver(e, sb.host_id, &ctx)) < 0 ||
	    (rc = DRIVER_SLOT(e, file_rename, "rename files")) < 0)
		return rc;
	if (!(abs_from = saas__workspace_path(from)) || !(abs_to = saas__workspace_path(to))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	if ((rc = saas__transfer_slot_take(e, c->account_id)) == SAAS_OK) {
		rc = e->driver->file_rename(ctx, id, abs_from, abs_to, flags);
		saas__transfer_slot_release(e, c->account_id);
	}
out:
	free(abs_from);
	free(abs_to);
	return rc;
}
