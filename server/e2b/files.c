/*
 * Files through E2B's daemon protocol: GET /files (read), POST /files
 * (write: multipart/form-data, or application/octet-stream), and
 * filesystem.Filesystem's Stat, ListDir, MakeDir, Remove and Move, as
 * libsaas's file calls (SFTP as the sandbox user). A relative path, "~" and E2B's home are under
 * /workspace, as everywhere in libsaas.
 *
 * Both ways stream, as /v1's files do (server/api/files.c), with the same
 * workers over a bounded pipe (pipe.h) running libsaas's stream calls:
 * an upload's multipart body is read as it comes (multipart.h), each part
 * named "file" written as its bytes arrive, one after the other; a read is
 * sent as the guest gives it, with its Content-Length. Nothing holds more
 * than the pipe's 1 MiB. A request's body is at most SAAS_FILE_MAX bytes,
 * one file or many, as a /v1 upload's. A write the client abandons (or
 * that fails) is never renamed into place: the transport writes a
 * temporary name and removes it, so its path keeps what it had; the files
 * of the request done before it stay written, each whole. A gzip body
 * (Content-Encoding: gzip, the SDK's `gzip: true`) is inflated as it comes,
 * before either reader, within gzip.h's bounds.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "e2b/connect.h"
#include "e2b/gzip.h"
#include "e2b/internal.h"
#include "multipart.h"
#include "pipe.h"

#define HOME "/workspace"

_Static_assert(AAS_GZIP_OUT_MAX == SAAS_FILE_MAX, "a gzip body inflates to at most what a body may be");

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

/* The query both ways take: false after a reply. */
static bool files_query(struct aas_req *r, struct aas_reply *out, const char **path)
{
	const char *user, *sig;
	char why[256];

	if (!aas_query(r, "path", path, out) || !aas_query(r, "username", &user, out) ||
	    !aas_query(r, "signature", &sig, out))
		return false;
	if (!aas_e2b_user_ok(user, why, sizeof(why))) {
		aas_e2b_error(out, 400, "%s", why);
		return false;
	}
	if (*path && strlen(*path) >= SAAS_PATH_MAX) {
		aas_e2b_error(out, 400, "the path is over %d bytes", SAAS_PATH_MAX - 1);
		return false;
	}
	return true;
}

/* ---- GET /files: the guest's bytes as they come ---- */

/* A read's failure before its first byte, on the worker's thread (pipe.h); ud: the path as the client named it. */
static void read_error(struct aas_reply *out, int rc, void *ud)
{
	file_error(out, rc, ud, "e2b: read");
}

static void client_release(void *hold)
{
	saas_client_free(hold);
}

static void files_get(struct aas_reply *out, struct aas_e2b_target *t, const char *path)
{
	char buf[SAAS_PATH_MAX + 16], disposition[SAAS_NAME_MAX + 64];
	saas_client *client = t->client;

	/* Owned by the transfer: the response outlives the request (and its target) when the client goes away midway. */
	t->client = NULL;
	aas_file_stream(out, client, t->id, path_of(path, buf, sizeof(buf)), client, client_release, read_error,
	                (void *)path);
	if (out->status != 200 || !out->response)
		return;
	snprintf(disposition, sizeof(disposition), "inline; filename=\"%.255s\"", base_name(path));
	for (char *p = disposition + strlen("inline; filename=\""); *p; p++)
		if (*p == '"' && p[1] != '\0')
			*p = '_';
	MHD_add_response_header(out->response, "Content-Disposition", disposition);
}

/* ---- POST /files: each file written as its bytes arrive ---- */

/* One file being written: pipe.h's upload, a worker running saas_file_write_stream. */
struct writer {
	struct aas_upload *up;
	char path[SAAS_PATH_MAX + 16];  /* libsaas's */
	char shown[SAAS_PATH_MAX + 1];  /* as the client named it */
};

struct aas_e2b_upload {
	struct aas_e2b_target *t;
	const char *query_path;         /* ?path= (the request's), or NULL */
	bool multipart;
	struct aas_multipart mp;
	struct writer *w;               /* the file being written, or NULL (none yet, or a part that is not a file) */
	int64_t received;               /* the body's bytes, for its bound */
	json_t *list;                   /* the answer: one entry a file written */
	char *names[AAS_MULTIPART_PARTS_MAX]; /* the paths written, as named: two parts may not write one */
	size_t files;
	struct aas_reply failure;       /* the first failure, the answer once the body is in */
	bool gzip;                      /* Content-Encoding: gzip: the body inflated as it comes (gzip.h) */
	struct aas_gzip gz;
};

/* A write's failure, on the worker's thread (pipe.h); ud: the path as the client named it. */
static void write_error(struct aas_reply *out, int rc, void *ud)
{
	if (rc == SAAS_EIO)
		aas_e2b_error(out, 507, "%s", aas_tenant_message(rc, "e2b: write"));
	else
		file_error(out, rc, ud, "e2b: write");
}

/* A failure: the upload's answer, unless one came first. Stops the body (1), for the sink's return. */
static int upload_fail(struct aas_e2b_upload *u, struct aas_reply *reply)
{
	if (!u->failure.status && !u->failure.response)
		u->failure = *reply;
	else if (reply->response)
		MHD_destroy_response(reply->response);
	reply->status = 0;
	reply->response = NULL;
	return 1;
}

__attribute__((format(printf, 3, 4))) static int upload_error(struct aas_e2b_upload *u, unsigned int status,
                                                              const char *fmt, ...)
{
	struct aas_reply reply = { 0, NULL };
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	aas_e2b_error(&reply, status, "%s", msg);
	if (!reply.response)
		reply.status = status; /* out of memory: the failure stands, answered as http.c answers a NULL */
	return upload_fail(u, &reply);
}

/*
 * End the file being written: to its end (done), or abandoned (its partial
 * copy removed, its path as it was). 0, or 1 after recording its failure.
 */
static int writer_close(struct aas_e2b_upload *u, bool done)
{
	struct writer *w = u->w;
	char abs[SAAS_PATH_MAX + 16 + sizeof(HOME) + 1];
	struct aas_reply reply = { 0, NULL };
	const char *message;
	int rc = 0;

	if (!w)
		return 0;
	u->w = NULL;
	/* Abandoned (freed without an end), it fails for the caller's reason, which the caller records. */
	if (done && aas_upload_end(w->up, &message) < 0) {
		aas_upload_reply(w->up, &reply);
		rc = upload_fail(u, &reply);
	} else if (done) {
		absolute(abs, sizeof(abs), w->path);
		json_array_append_new(u->list, json_pack("{s:s,s:s,s:s}", "path", abs, "name", base_name(abs), "type", "file"));
	}
	aas_upload_free(w->up);
	free(w);
	return rc;
}

/* Start writing the file named `name` (as the client sent it). 0, or 1 after recording a failure. */
static int writer_open(struct aas_e2b_upload *u, const char *name)
{
	struct writer *w;
	char buf[SAAS_PATH_MAX + 16];

	for (size_t j = 0; j < u->files; j++)
		if (strcmp(u->names[j], name) == 0)
			return upload_error(u, 400, "two parts write '%s'", name);
	if (u->files == AAS_MULTIPART_PARTS_MAX || !(u->names[u->files] = strdup(name)))
		return upload_error(u, 500, "out of memory");
	u->files++;
	if (!(w = calloc(1, sizeof(*w))))
		return upload_error(u, 500, "out of memory");
	snprintf(w->path, sizeof(w->path), "%s", path_of(name, buf, sizeof(buf)));
	snprintf(w->shown, sizeof(w->shown), "%s", name);
	if (!(w->up = aas_upload_start(u->t->client, u->t->id, w->path, 0, -1, write_error, w->shown))) {
		free(w);
		return upload_error(u, 500, "out of memory, or no thread for the upload");
	}
	u->w = w;
	return 0;
}

/* Bytes of the file being written (none: a part that is not a file, skipped). */
static int upload_bytes(void *ud, const char *data, size_t len)
{
	struct aas_e2b_upload *u = ud;

	if (!u->w)
		return 0;
	if (aas_upload_data(u->w->up, data, len) == 0)
		return 0;
	/* The writer stops taking only when it failed: its answer is the upload's. */
	(void)writer_close(u, true);
	return 1;
}

/* Each part named "file" is one file: at ?path= when given (one file), else at its filename. */
static int part_begin(void *ud, const struct aas_multipart_part *pt)
{
	struct aas_e2b_upload *u = ud;
	char name[SAAS_PATH_MAX + 1];

	if (!pt->name || pt->name_len != 4 || memcmp(pt->name, "file", 4) != 0)
		return 0;
	if (u->query_path && *u->query_path) {
		snprintf(name, sizeof(name), "%s", u->query_path);
	} else if (!pt->filename || pt->filename_len == 0 || pt->filename_len >= SAAS_PATH_MAX ||
	           !aas_multipart_filename(name, pt->filename, pt->filename_len)) {
		return upload_error(u, 400, "each file part needs a filename (its path), of at most %d bytes without "
		                    "control characters", SAAS_PATH_MAX - 1);
	}
	return writer_open(u, name);
}

static int part_end(void *ud)
{
	return writer_close(ud, true);
}

static const struct aas_multipart_sink upload_sink = { part_begin, upload_bytes, part_end };

/* The body's bytes (inflated when it is gzip): the multipart reader's, or the one file's. 0, or 1 to stop. */
static int body_feed(void *ud, const char *data, size_t len)
{
	struct aas_e2b_upload *u = ud;
	int rc;

	if (!u->multipart)
		return upload_bytes(u, data, len);
	rc = aas_multipart_feed(&u->mp, data, len);
	if (rc == AAS_MULTIPART_FAILED) {
		(void)writer_close(u, false);
		return upload_error(u, 400, "the multipart body is refused: %s", u->mp.why);
	}
	/* STOPPED: a part's file failed, its answer recorded; DONE: what follows is the epilogue, ignored. */
	return rc == AAS_MULTIPART_STOPPED;
}

void aas_e2b_upload_free(struct aas_e2b_upload *u)
{
	if (!u)
		return;
	(void)writer_close(u, false);
	if (u->failure.response)
		MHD_destroy_response(u->failure.response);
	for (size_t i = 0; i < u->files; i++)
		free(u->names[i]);
	aas_gzip_end(&u->gz); /* zeroed if never begun */
	json_decref(u->list);
	free((char *)u->query_path);
	free(u);
}

/*
 * A refusal found with the headers is answered once the body is in (its
 * bytes dropped as they come): a client still sending when the answer
 * came would see its connection cut, not the answer (undici's fetch says
 * only "fetch failed").
 */
int aas_e2b_files_start(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t)
{
	const char *ct = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Type");
	const char *enc = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Encoding");
	char boundary[AAS_MULTIPART_BOUNDARY_MAX + 1];
	struct aas_reply refused = { 0, NULL };
	struct aas_e2b_upload *u;
	const char *path = NULL;
	bool octets = ct && strncasecmp(ct, "application/octet-stream", 24) == 0;

	if (!(u = calloc(1, sizeof(*u))) || !(u->list = json_array())) {
		aas_e2b_upload_free(u);
		aas_e2b_error(out, 500, "out of memory");
		return -1;
	}
	u->t = t;
	t->upload = u;
	/* envd takes gzip alone (Go's gzip.Reader); x-gzip is its old name. */
	u->gzip = enc && (strcasecmp(enc, "gzip") == 0 || strcasecmp(enc, "x-gzip") == 0);
	if (!files_query(r, &refused, &path))
		(void)upload_fail(u, &refused);
	else if (enc && *enc && !u->gzip && strcasecmp(enc, "identity") != 0)
		(void)upload_error(u, 400, "Content-Encoding %s is not served: gzip or none", enc);
	else if (u->gzip && aas_gzip_init(&u->gz, body_feed, u) < 0)
		(void)upload_error(u, 500, "out of memory");
	else if (octets && (!path || !*path))
		(void)upload_error(u, 400, "an octet-stream upload needs ?path=");
	else if (!octets && !aas_multipart_boundary(boundary, ct))
		(void)upload_error(u, 400, "the body must be multipart/form-data (with a boundary) or application/octet-stream");
	else if (path && !(u->query_path = strdup(path)))
		(void)upload_error(u, 500, "out of memory");
	else if (octets)
		(void)writer_open(u, path); /* the whole body is the file; an empty one, an empty file */
	else if (!(u->multipart = aas_multipart_init(&u->mp, boundary, AAS_MULTIPART_PARTS_MAX, &upload_sink, u)))
		(void)upload_error(u, 400, "the multipart boundary is refused: %s", u->mp.why);
	return 0;
}

int aas_e2b_files_data(struct aas_e2b_target *t, const char *data, size_t len)
{
	struct aas_e2b_upload *u = t->upload;
	int rc;

	if (u->failure.status || u->failure.response)
		return 1;
	if ((int64_t)len > SAAS_FILE_MAX - u->received) {
		(void)writer_close(u, false);
		return upload_error(u, 413, "a request uploads at most %lld bytes (one file or many), as libsaas's /v1 "
		                    "files API does", (long long)SAAS_FILE_MAX);
	}
	u->received += (int64_t)len;
	if (!u->gzip)
		return body_feed(u, data, len);
	if ((rc = aas_gzip_feed(&u->gz, data, len)) == AAS_GZIP_FAILED) {
		(void)writer_close(u, false);
		return upload_error(u, u->gz.too_big ? 413 : 400, "the gzip body is refused: %s", u->gz.why);
	}
	return rc != AAS_GZIP_MORE; /* STOPPED: body_feed recorded why */
}

/* The body is in: the last file's end, and the answer. */
static void files_post(struct aas_reply *out, struct aas_e2b_target *t)
{
	struct aas_e2b_upload *u = t->upload;

	if (!u) {
		aas_e2b_error(out, 500, "the upload was not started");
		return;
	}
	if (!u->failure.status && !u->failure.response) {
		if (u->gzip && aas_gzip_finish(&u->gz) == AAS_GZIP_FAILED)
			(void)upload_error(u, 400, "the gzip body is refused: %s", u->gz.why);
		else if (!u->multipart)
			(void)writer_close(u, true);
		else if (aas_multipart_finish(&u->mp) == AAS_MULTIPART_FAILED)
			(void)upload_error(u, 400, "the multipart body is refused: %s", u->mp.why);
	}
	(void)writer_close(u, false); /* a part cut short: abandoned */
	if (!u->failure.status && !u->failure.response && json_array_size(u->list) == 0)
		(void)upload_error(u, 400, "no part named \"file\" in the body");
	if (u->failure.status || u->failure.response) {
		*out = u->failure;
		u->failure.status = 0;
		u->failure.response = NULL;
		return;
	}
	aas_e2b_json(out, 200, u->list);
	u->list = NULL;
}

void aas_e2b_files(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t)
{
	const char *path;

	if (strcmp(r->method, "POST") == 0) {
		files_post(out, t); /* its query was read with the headers (aas_e2b_files_start) */
		return;
	}
	if (!files_query(r, out, &path))
		return;
	if (strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0) {
		if (!path || !*path)
			aas_e2b_error(out, 400, "?path= is required");
		else
			files_get(out, t, path);
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
