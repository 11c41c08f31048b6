/*
 * Directories, removal and renames in a sandbox: the calls of the files
 * resource that move no bytes, each one saas_file_* call answered with JSON.
 *
 *   POST   /v1/sandboxes/{id}/files/mkdir?path=P
 *   DELETE /v1/sandboxes/{id}/files?path=P
 *   POST   /v1/sandboxes/{id}/files/move?path=A&to=B[&replace=true]
 *
 * Paths are query parameters, as for the bytes (files.c): a path is not JSON
 * and the same checks apply to every one.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include "api/api.h"

/* A required path parameter, or false after a 400 naming it. */
static bool required_path(struct aas_req *r, const char *name, const char **path, struct aas_reply *out)
{
	if (!aas_query(r, name, path, out))
		return false;
	if (!*path || !**path) {
		aas_reply_error(out, 400, "invalid_argument", "the query parameter \"%s\" is required", name);
		return false;
	}
	return true;
}

void aas_h_file_mkdir(struct aas_req *r, struct aas_reply *out)
{
	const char *path;
	int created = 0, rc;

	if (!required_path(r, "path", &path, out))
		return;
	if ((rc = saas_file_mkdir(&created, r->client, r->route_id, path, 0)) < 0) {
		aas_reply_saas(out, rc);
		return;
	}
	aas_reply_json(out, created ? 201 : 200,
	               json_pack("{s:s,s:s,s:b}", "sandbox_id", r->route_id, "path", path, "created", created));
}

void aas_h_file_delete(struct aas_req *r, struct aas_reply *out)
{
	const char *path;
	int rc;

	if (!required_path(r, "path", &path, out))
		return;
	if ((rc = saas_file_remove(r->client, r->route_id, path, 0)) < 0) {
		aas_reply_saas(out, rc);
		return;
	}
	aas_reply_json(out, 200, json_pack("{s:s,s:s}", "sandbox_id", r->route_id, "path", path));
}

void aas_h_file_move(struct aas_req *r, struct aas_reply *out)
{
	const char *from, *to;
	bool replace = false;
	int rc;

	if (!required_path(r, "path", &from, out) || !required_path(r, "to", &to, out) ||
	    !aas_query_bool(r, "replace", &replace, out))
		return;
	if ((rc = saas_file_rename(r->client, r->route_id, from, to, replace ? SAAS_FILE_RENAME_REPLACE : 0)) < 0) {
		aas_reply_saas(out, rc);
		return;
	}
	aas_reply_json(out, 200, json_pack("{s:s,s:s,s:s}", "sandbox_id", r->route_id, "from", from, "path", to));
}
