/*
 * The store's schema: the version it records and the migrations up to
 * SAAS_STORE_SCHEMA, one step per transaction (the steps themselves are
 * each dialect's).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "store/slots.h"

/* ---- the schema ---- */

static const saas__sql q_schema_read = {
	Q_SCHEMA_READ, "SELECT value FROM meta WHERE key = 'schema_version'", NULL, "reading the schema version", 1
};
static const saas__sql q_schema_write = {
	Q_SCHEMA_WRITE,
	"INSERT INTO meta (key, value) VALUES ('schema_version', $1)"
	" ON CONFLICT (key) DO UPDATE SET value = excluded.value", NULL, "recording the schema version", 0
};

static int version_text_row(const struct saas__dialect *d, const saas__row *row, void *out)
{
	return get_text(d, row, 0, out, 16);
}

/* The schema version recorded in meta; 0 when none is (a new database). */
static int schema_read(struct call *c, int *version)
{
	struct fetch f;
	char *end;
	long v;
	int rc;

	*version = 0;
	if ((rc = fetch_in(c, &q_schema_read, NULL, 0, version_text_row, 16, &f)) == SAAS_OK && f.n > 0) {
		errno = 0;
		v = strtol(f.data, &end, 10);
		if (errno || *end || end == f.data || v < 0 || v > 1000000)
			rc = saas__error(SAAS_ESTORE, SAAS_ERRCLASS_STORE, 0,
			                 "%s: meta.schema_version is '%.32s', not a version number", c->d->name, f.data);
		else
			*version = (int)v;
	}
	free(f.data);
	return rc;
}

int saas__st_schema_version(void *ctx, int *version)
{
	struct call c;
	int rc;

	if (!version)
		return saas__inval("version is NULL");
	if ((rc = enter(ctx, &c)) < 0)
		return rc;
	rc = schema_read(&c, version);
	leave(&c);
	return rc;
}

/* One step (or none, at the current version), inside the caller's transaction. */
static int migrate_step(struct call *c, const char *where, int *version)
{
	char text[16], what[64];
	int rc;

	if ((rc = c->d->script(c->conn, c->d->migrate_prologue, "preparing to migrate the schema")) < 0 ||
	    (rc = schema_read(c, version)) < 0)
		return rc;
	if (*version > SAAS_STORE_SCHEMA)
		return saas__error(SAAS_ESTORE, SAAS_ERRCLASS_STORE, 0,
		                   "%s has schema version %d, newer than the %d this libsaas knows; use a newer libsaas",
		                   where, *version, SAAS_STORE_SCHEMA);
	if (*version == SAAS_STORE_SCHEMA)
		return SAAS_OK;
	snprintf(what, sizeof(what), "migrating the schema to version %d", *version + 1);
	snprintf(text, sizeof(text), "%d", *version + 1);
	if ((rc = c->d->script(c->conn, c->d->steps[*version], what)) < 0)
		return rc;
	return run(c, &q_schema_write, &SAAS__TEXT(text), 1, NULL);
}

int saas__store_migrate(void *ctx, const char *where)
{
	char msg[512];
	struct call c;
	int rc, version;

	if ((rc = enter(ctx, &c)) < 0)
		return rc;
	/* One step per transaction, so a second engine that finds it migrating waits and then sees it done. */
	do {
		version = -1;
		if ((rc = begin(&c)) < 0)
			break;
		if ((rc = finish(&c, migrate_step(&c, where, &version))) == SAAS_OK && version < SAAS_STORE_SCHEMA) {
			snprintf(msg, sizeof(msg), "%s: schema migrated from version %d to %d", where, version, version + 1);
			c.d->log(c.conn, SAAS_LOG_INFO, msg);
		}
	} while (rc == SAAS_OK && version < SAAS_STORE_SCHEMA);
	leave(&c);
	return rc;
}
