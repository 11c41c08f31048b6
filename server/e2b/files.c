/*
 * Files through E2B's daemon protocol: GET /files (read), POST /files
 * (write: multipart/form-data, or application/octet-stream), and
 * filesystem.Filesystem's Stat, ListDir, MakeDir, Remove and Move, as
 * libsaas's file calls (SFTP as the sandbox user). A relative path, "~" and E2B's home are under
 * /workspace, as everywhere in libsaas.
 *
 * Bounds: an upload is the request body, held whole (at most
 * AAS_JSON_BODY_MAX, the route's), and a read at most READ_MAX in memory;
 * streaming both ways comes with the bench's 64 MiB case (docs/e2b.md).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "e2b/connect.h"
#include "e2b/internal.h"
#include "e2b/multipart.h"

/* The largest file a read answers from memory. */
#define READ_MAX ((int64_t)64 << 20)
#define HOME "/workspace"

/* E2B's path as libsaas's: "~" and "~/x" are the home; the rest as given (relative is under /workspace). */
static const char *path_of(const char *p, char *buf, size_t size)
{
	if (p[0] == '~' && (p[1] == '\0' || p[1] == '/')) {
		snprintf(buf, size, "%s%s", HOME, p + 1);
		return buf;
	}
	return p;
}

/* The absolute path libsaas makes of p, for answers: relative ones are under /workspace. */
static void absolute(char *out, size_t size, const char *p)
{
	if (p[0] == '/')
		snprintf(out, size, "%s", p);
	else
		snprintf(out, size, "%s/%s", HOME, p);
}

static const char *base_name(const char *p)
{
	const char *slash = strrchr(p, '/');

	return slash && slash[1] ? slash + 1 : p;
}

/* ---- REST ---- */

/* A libsaas failure of a file call as envd answers it (the SDK: 404 FileNotFoundError, 400 InvalidArgumentError). */
static void file_error(struct aas_reply *out, int rc, const char *path, const char *where)
{
	switch (rc) {
	case SAAS_ENOTFOUND: aas_e2b_error(out, 404, "path '%s' does not exist", path); break;
	case SAAS_EISDIR: aas_e2b_error(out, 400, "path '%s' is a directory", path); break;
	case SAAS_EINVAL: aas_e2b_error(out, 400, "%s", aas_tenant_message(rc, where)); break;
	case SAAS_EPERM: aas_e2b_error(out, 403, "%s", aas_tenant_message(rc, where)); break;
	default: aas_e2b_error_saas(out, rc, where); break;
	}
}

static void files_get(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t, const char *path)
{
	char buf[SAAS_PATH_MAX + 16], disposition[SAAS_NAME_MAX + 64];
	void *data = NULL;
	size_t len = 0;
	int rc;

	(void)r;
	if ((rc = saas_file_read(&data, &len, t->client, t->id, path_of(path, buf, sizeof(buf)), READ_MAX)) < 0) {
		if (rc == SAAS_ETOOBIG)
			aas_e2b_error(out, 413, "files over %lld MiB are not read through the E2B API yet (libsaas's "
			              "/v1 files API streams them)", (long long)(READ_MAX >> 20));
		else
			file_error(out, rc, path, "e2b: read");
		return;
	}
	out->status = 200;
	out->response = MHD_create_response_from_buffer_with_free_callback(len, data, saas_free);
	if (!out->response) {
		saas_free(data);
		return;
	}
	MHD_add_response_header(out->response, "Content-Type", "application/octet-stream");
	snprintf(disposition, sizeof(disposition), "inline; filename=\"%.255s\"", base_name(path));
	for (char *p = disposition + strlen("inline; filename=\""); *p; p++)
		if (*p == '"' && p[1] != '\0')
			*p = '_';
	MHD_add_response_header(out->response, "Content-Disposition", disposition);
	aas_reply_common_headers(out->response);
}

/* One file written: its entry of the answer appended to list. false after a reply. */
static bool write_one(struct aas_reply *out, struct aas_e2b_target *t, const char *path, const void *data, size_t len,
                      json_t *list)
{
	char buf[SAAS_PATH_MAX + 16], abs[SAAS_PATH_MAX + 16 + sizeof(HOME) + 1];
	const char *p = path_of(path, buf, sizeof(buf));
	int rc;

	if ((rc = saas_file_write(t->client, t->id, p, data, len, NULL)) < 0) {
		if (rc == SAAS_EIO)
			aas_e2b_error(out, 507, "%s", aas_tenant_message(rc, "e2b: write"));
		else
			file_error(out, rc, path, "e2b: write");
		return false;
	}
	absolute(abs, sizeof(abs), p);
	json_array_append_new(list, json_pack("{s:s,s:s,s:s}", "path", abs, "name", base_name(abs), "type", "file"));
	return true;
}

static void files_post(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t, const char *path)
{
	const char *ct = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Type");
	const char *enc = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Encoding");
	struct aas_multipart_part *parts = NULL;
	char boundary[AAS_MULTIPART_BOUNDARY_MAX + 1], *names = NULL;
	json_t *list = json_array();
	const char *why;
	size_t count = 0;

	if (!list) {
		aas_e2b_error(out, 500, "out of memory");
		goto out;
	}
	if (r->too_big) {
		aas_e2b_error(out, 413, "uploads through the E2B API are at most %zu bytes yet (libsaas's /v1 files API "
		              "streams larger ones)", r->body_max);
		goto out;
	}
	if (enc && *enc && strcasecmp(enc, "identity") != 0) {
		aas_e2b_error(out, 400, "Content-Encoding %s is not served yet: upload without gzip", enc);
		goto out;
	}
	if (ct && strncasecmp(ct, "application/octet-stream", 24) == 0) {
		if (!path || !*path) {
			aas_e2b_error(out, 400, "an octet-stream upload needs ?path=");
			goto out;
		}
		if (!write_one(out, t, path, r->body, r->body_len, list))
			goto out;
		aas_e2b_json(out, 200, list);
		list = NULL;
		goto out;
	}
	if (!aas_multipart_boundary(boundary, ct)) {
		aas_e2b_error(out, 400, "the body must be multipart/form-data (with a boundary) or application/octet-stream");
		goto out;
	}
	if (!(parts = calloc(AAS_MULTIPART_PARTS_MAX, sizeof(*parts))) ||
	    !(names = malloc((size_t)AAS_MULTIPART_PARTS_MAX * (SAAS_PATH_MAX + 1)))) {
		aas_e2b_error(out, 500, "out of memory");
		goto out;
	}
	if (!aas_multipart_parse(r->body ? r->body : "", r->body_len, boundary, parts, AAS_MULTIPART_PARTS_MAX, &count,
	                         &why)) {
		aas_e2b_error(out, 400, "the multipart body is refused: %s", why);
		goto out;
	}
	/* Each part named "file" is one file: at ?path= when given (one file), else at its filename. */
	size_t files = 0;
	for (size_t i = 0; i < count; i++) {
		struct aas_multipart_part *pt = &parts[i];
		char *name = names + files * (SAAS_PATH_MAX + 1);
		if (!pt->name || pt->name_len != 4 || memcmp(pt->name, "file", 4) != 0)
			continue;
		if (path && *path) {
			snprintf(name, SAAS_PATH_MAX + 1, "%s", path);
		} else if (!pt->filename || pt->filename_len == 0 || pt->filename_len > SAAS_PATH_MAX ||
		           !aas_multipart_filename(name, pt->filename, pt->filename_len)) {
			aas_e2b_error(out, 400, "each file part needs a filename (its path), of at most %d bytes without "
			              "control characters", SAAS_PATH_MAX);
			goto out;
		}
		for (size_t j = 0; j < files; j++) {
			if (strcmp(names + j * (SAAS_PATH_MAX + 1), name) == 0) {
				aas_e2b_error(out, 400, "two parts write '%s'", name);
				goto out;
			}
		}
		if (!write_one(out, t, name, pt->data, pt->len, list))
			goto out;
		files++;
	}
	if (files == 0) {
		aas_e2b_error(out, 400, "no part named \"file\" in the body");
		goto out;
	}
	aas_e2b_json(out, 200, list);
	list = NULL;
out:
	json_decref(list);
	free(parts);
	free(names);
}

void aas_e2b_files(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t)
{
	const char *path, *user, *sig;
	char why[256];

	if (!aas_query(r, "path", &path, out) || !aas_query(r, "username", &user, out) ||
	    !aas_query(r, "signature", &sig, out))
		return;
	if (!aas_e2b_user_ok(user, why, sizeof(why))) {
		aas_e2b_error(out, 400, "%s", why);
		return;
	}
	if (path && strlen(path) >= SAAS_PATH_MAX) {
		aas_e2b_error(out, 400, "the path is over %d bytes", SAAS_PATH_MAX - 1);
		return;
	}
	if (strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0) {
		if (!path || !*path)
			aas_e2b_error(out, 400, "?path= is required");
		else
			files_get(r, out, t, path);
	} else if (strcmp(r->method, "POST") == 0) {
		files_post(r, out, t, path);
	} else {
		aas_e2b_error(out, 405, "%s is not allowed on /files", r->method);
	}
}

/* ---- filesystem.Filesystem ---- */

static json_t *iso_time(int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char buf[80];

	if (ms <= 0 || !gmtime_r(&t, &tm))
		return json_string("1970-01-01T00:00:00Z");
	snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
	         tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
	return json_string(buf);
}

/* EntryInfo: E2B's names for an entry (owner and group are not known here, and left out). */
static json_t *entry_json(const saas_file_entry *e)
{
	static const char *const kinds[] = { "FILE_TYPE_UNSPECIFIED", "FILE_TYPE_FILE", "FILE_TYPE_DIRECTORY",
		                             "FILE_TYPE_SYMLINK", "FILE_TYPE_UNSPECIFIED" };
	char perms[11];
	const char *rwx = "rwxrwxrwx";

	perms[0] = e->type == SAAS_FILE_DIRECTORY ? 'd' : e->type == SAAS_FILE_SYMLINK ? 'l' : '-';
	for (int i = 0; i < 9; i++)
		perms[1 + i] = e->mode & (0400u >> i) ? rwx[i] : '-';
	perms[10] = '\0';
	return json_pack("{s:s,s:s,s:s,s:I,s:i,s:s,s:o}", "name", base_name(e->path), "type",
	                 kinds[e->type >= 1 && e->type <= 4 ? e->type : 0], "path", e->path, "size", (json_int_t)e->size,
	                 "mode", (int)(e->mode | (e->type == SAAS_FILE_DIRECTORY ? 040000u : 0100000u)), "permissions",
	                 perms, "modifiedTime", iso_time(e->mtime_ms));
}

static void fs_error(struct aas_reply *out, int rc, const char *path, const char *where)
{
	if (rc == SAAS_ENOTFOUND)
		aas_e2b_reply_unary_error(out, AAS_CONNECT_NOT_FOUND, "path '%s' does not exist", path);
	else
		aas_e2b_reply_unary_error(out, aas_connect_code_from_saas(rc), "%s", aas_tenant_message(rc, where));
}

static const char *string_field(json_t *msg, const char *name)
{
	json_t *v = json_object_get(msg, name);

	return json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v) ? json_string_value(v) : NULL;
}

/*
 * Stat: the entry as its parent directory lists it; failing that (the root,
 * a parent too large to list whole), the path's own listing says: a file
 * lists as itself, a directory as its entries (its own entry is then made
 * up: a directory, 0755), a missing path is not found.
 */
static void fs_stat(struct aas_reply *out, struct aas_e2b_target *t, const char *path)
{
	char buf[SAAS_PATH_MAX + 16], parent[SAAS_PATH_MAX + 16 + sizeof(HOME) + 1], abs[sizeof(parent)];
	const char *p = path_of(path, buf, sizeof(buf));
	saas_file_list *l = NULL, *pl = NULL;
	saas_file_entry self = { 0 };
	json_t *entry = NULL;
	char *slash;
	int rc;

	absolute(abs, sizeof(abs), p);
	snprintf(parent, sizeof(parent), "%s", abs);
	if ((slash = strrchr(parent, '/')) && slash[1]) {
		slash[slash == parent ? 1 : 0] = '\0';
		if (saas_file_list_get(&pl, t->client, t->id, parent, 1, SAAS_LIST_ENTRIES_MAX, 0) == SAAS_OK)
			for (size_t i = 0; i < pl->count && !entry; i++)
				if (strcmp(pl->entries[i]->path, abs) == 0)
					entry = entry_json(pl->entries[i]);
	}
	if (entry)
		goto out;
	if ((rc = saas_file_list_get(&l, t->client, t->id, p, 1, 1, 0)) < 0) {
		fs_error(out, rc, path, "e2b: stat");
		goto done;
	}
	if (l->count == 1 && strcmp(l->entries[0]->path, l->root) == 0 && l->entries[0]->type != SAAS_FILE_DIRECTORY) {
		entry = entry_json(l->entries[0]);
	} else {
		self.path = l->root;
		self.type = SAAS_FILE_DIRECTORY;
		self.mode = 0755;
		entry = entry_json(&self);
	}
out:
	aas_e2b_reply_unary(out, json_pack("{s:o}", "entry", entry ? entry : json_object()));
done:
	saas_file_list_free(l);
	saas_file_list_free(pl);
}

static void fs_list(struct aas_reply *out, struct aas_e2b_target *t, const char *path, json_t *msg)
{
	json_t *d = json_object_get(msg, "depth"), *entries;
	json_int_t depth = json_is_integer(d) ? json_integer_value(d) : 1;
	char buf[SAAS_PATH_MAX + 16];
	saas_file_list *l = NULL;
	int rc;

	if (depth < 1)
		depth = 1;
	if (depth > SAAS_LIST_DEPTH_MAX) {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_INVALID_ARGUMENT, "depth is at most %d", SAAS_LIST_DEPTH_MAX);
		return;
	}
	if ((rc = saas_file_list_get(&l, t->client, t->id, path_of(path, buf, sizeof(buf)), (unsigned int)depth,
	                             SAAS_LIST_ENTRIES_MAX, 0)) < 0) {
		fs_error(out, rc, path, "e2b: list");
		return;
	}
	if (l->count == 1 && strcmp(l->entries[0]->path, l->root) == 0 && l->entries[0]->type != SAAS_FILE_DIRECTORY) {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_INVALID_ARGUMENT, "path '%s' is not a directory", path);
		saas_file_list_free(l);
		return;
	}
	if (!(entries = json_array())) {
		saas_file_list_free(l);
		aas_e2b_reply_unary_error(out, AAS_CONNECT_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	for (size_t i = 0; i < l->count; i++)
		if (strcmp(l->entries[i]->path, l->root) != 0)
			json_array_append_new(entries, entry_json(l->entries[i]));
	saas_file_list_free(l);
	aas_e2b_reply_unary(out, json_pack("{s:o}", "entries", entries));
}

/*
 * MakeDir as envd answers it: the new directory's entry; a directory already
 * there is already_exists (the SDK's makeDir then returns false), anything
 * else there invalid_argument.
 */
static void fs_mkdir(struct aas_reply *out, struct aas_e2b_target *t, const char *path)
{
	char buf[SAAS_PATH_MAX + 16], abs[SAAS_PATH_MAX + 16 + sizeof(HOME) + 1];
	const char *p = path_of(path, buf, sizeof(buf));
	saas_file_entry self = { 0 };
	int created = 0, rc;

	absolute(abs, sizeof(abs), p);
	if ((rc = saas_file_mkdir(&created, t->client, t->id, p, 0)) == SAAS_EEXISTS) {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_INVALID_ARGUMENT,
		                          "path already exists but it is not a directory: %s", abs);
	} else if (rc < 0) {
		fs_error(out, rc, path, "e2b: make a directory");
	} else if (!created) {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_ALREADY_EXISTS, "directory already exists: %s", abs);
	} else {
		self.path = abs;
		self.type = SAAS_FILE_DIRECTORY;
		self.mode = 0755;
		aas_e2b_reply_unary(out, json_pack("{s:o}", "entry", entry_json(&self)));
	}
}

/* Remove: envd's RemoveAll, for which a missing path is no error. */
static void fs_remove(struct aas_reply *out, struct aas_e2b_target *t, const char *path)
{
	char buf[SAAS_PATH_MAX + 16];
	int rc = saas_file_remove(t->client, t->id, path_of(path, buf, sizeof(buf)), 0);

	if (rc < 0 && rc != SAAS_ENOTFOUND)
		fs_error(out, rc, path, "e2b: remove");
	else
		aas_e2b_reply_unary(out, json_object());
}

/*
 * Move: envd's rename(2), which replaces a file at the destination and makes
 * its parents; the answer is the moved entry, as Stat gives it (the SDK
 * fails without one).
 */
static void fs_move(struct aas_reply *out, struct aas_e2b_target *t, json_t *msg)
{
	const char *from = string_field(msg, "source"), *to = string_field(msg, "destination");
	char fbuf[SAAS_PATH_MAX + 16], tbuf[SAAS_PATH_MAX + 16];
	int rc;

	if (!from || !*from || strlen(from) >= SAAS_PATH_MAX || !to || !*to || strlen(to) >= SAAS_PATH_MAX) {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_INVALID_ARGUMENT, "source and destination must be 1 to %d bytes",
		                          SAAS_PATH_MAX - 1);
		return;
	}
	if ((rc = saas_file_rename(t->client, t->id, path_of(from, fbuf, sizeof(fbuf)), path_of(to, tbuf, sizeof(tbuf)),
	                           SAAS_FILE_RENAME_REPLACE)) < 0) {
		if (rc == SAAS_ENOTFOUND)
			aas_e2b_reply_unary_error(out, AAS_CONNECT_NOT_FOUND, "source file not found: '%s'", from);
		else
			fs_error(out, rc, from, "e2b: move");
		return;
	}
	fs_stat(out, t, to);
}

void aas_e2b_filesystem(struct aas_reply *out, struct aas_e2b_target *t, const char *method, json_t *msg)
{
	const char *path = string_field(msg, "path");

	if (strcmp(method, "Move") == 0) {
		fs_move(out, t, msg);
		return;
	}
	if (strcmp(method, "Stat") == 0 || strcmp(method, "ListDir") == 0 || strcmp(method, "MakeDir") == 0 ||
	    strcmp(method, "Remove") == 0) {
		if (!path || !*path || strlen(path) >= SAAS_PATH_MAX) {
			aas_e2b_reply_unary_error(out, AAS_CONNECT_INVALID_ARGUMENT, "path must be 1 to %d bytes",
			                          SAAS_PATH_MAX - 1);
			return;
		}
		if (strcmp(method, "Stat") == 0)
			fs_stat(out, t, path);
		else if (strcmp(method, "ListDir") == 0)
			fs_list(out, t, path, msg);
		else if (strcmp(method, "MakeDir") == 0)
			fs_mkdir(out, t, path);
		else
			fs_remove(out, t, path);
		return;
	}
	aas_e2b_reply_unary_error(out, AAS_CONNECT_UNIMPLEMENTED, "filesystem.Filesystem/%s is not served by this server "
	                          "yet (docs/e2b.md)", method);
}
