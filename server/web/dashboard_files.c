/*
 * The Files section of a sandbox's dashboard page: one directory listed, with
 * breadcrumbs up to /, and forms to download, delete, make a directory and
 * upload a file. Every action is a plain form or link (no JavaScript needed;
 * /static/files.js only asks before a delete), acts through the session's
 * client as the REST API's files routes act through a key's (api/files.c,
 * api/files_ops.c): the same library calls, so the same paths are refused
 * (saas_file_* check them) and the same sizes (SAAS_FILE_MAX) bound them.
 *
 *   GET  /dashboard/sandboxes/{id}?dir=D                   the page, listing D
 *   GET  /dashboard/sandboxes/{id}/files/download?path=P   the file, as an attachment
 *   POST /dashboard/sandboxes/{id}/files/mkdir             csrf, dir, name
 *   POST /dashboard/sandboxes/{id}/files/delete            csrf, dir, path
 *   POST /dashboard/sandboxes/{id}/files/upload            multipart: csrf, dir, then file (each once)
 *
 * A name typed or uploaded is one path component: no '/', not "." or "..".
 * The upload is read as it arrives by the server's multipart reader
 * (multipart.h, E2B's uploads read with it too; no file is held in memory):
 * its csrf field comes first, and no byte reaches the sandbox before it matched.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "multipart.h"
#include "web/html.h"
#include "web/internal.h"

/* Entries one listing shows: the library's default. */
#define FILES_SHOWN SAAS_LIST_ENTRIES_DEFAULT
/* A text field of the upload form (csrf, dir); the reader bounds the rest (multipart.h). */
#define UPLOAD_FIELD_MAX (SAAS_PATH_MAX + 1)

/* Percent-encode s for a query value (a path keeps its '/'); the result is markup-safe. */
static void url_value(struct aas_html *h, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		char c[4] = { (char)*p, 0, 0, 0 };

		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      strchr("-._~/", *p))) {
			c[0] = '%';
			c[1] = hex[*p >> 4];
			c[2] = hex[*p & 15];
		}
		aas_html_raw(h, c);
	}
}

/* The sandbox page's URL listing dir, into a buffer (for a Location header). */
static char *page_url(const char *id, const char *dir)
{
	struct aas_html h = { 0 };

	aas_html_printf(&h, "/dashboard/sandboxes/%s", id);
	if (dir && *dir) {
		aas_html_raw(&h, "?dir=");
		url_value(&h, dir);
	}
	aas_html_raw(&h, "#files");
	if (h.failed)
		aas_html_free(&h);
	return h.buf;
}

static void redirect_to_dir(struct aas_reply *out, const char *id, const char *dir)
{
	char *where = page_url(id, dir);

	if (!where) {
		aas_reply_error(out, 500, "out_of_memory", "out of memory");
		return;
	}
	aas_reply_redirect(out, where);
	free(where);
}

/* One path component for a new directory or an uploaded file: false for "", ".", "..", a '/', too long. */
static bool plain_name(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	return n && n <= SAAS_NAME_MAX && !strchr(name, '/') && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

/* dir + "/" + name, or NULL when it would be too long (SAAS_PATH_MAX) or out of memory. */
static char *join(const char *dir, const char *name)
{
	size_t n = strlen(dir);
	char *p;

	if (n + 1 + strlen(name) >= SAAS_PATH_MAX || asprintf(&p, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name) < 0)
		return NULL;
	return p;
}

/* ---- the section ---- */

/* / > workspace > src: each ancestor of root a link to its listing. */
static void breadcrumbs(struct aas_html *h, const saas_sandbox *sb, const char *root)
{
	char *prefix = strdup(root);
	size_t n = strlen(root);

	aas_html_raw(h, "<nav aria-label=\"Directory\" class=\"breadcrumbs\"><ol>");
	if (!prefix) {
		aas_html_printf(h, "<li>%s</li></ol></nav>", root);
		return;
	}
	aas_html_printf(h, "<li><a href=\"/dashboard/sandboxes/%s?dir=/#files\"%s>/</a></li>", sb->id,
	                n <= 1 ? " aria-current=\"location\"" : "");
	for (size_t i = 1; i <= n; i++) {
		if (i < n && root[i] != '/')
			continue;
		if (i > 0 && root[i - 1] == '/')
			continue; /* "//" or a trailing '/' */
		prefix[i] = '\0';
		const char *name = strrchr(prefix, '/') + 1;
		aas_html_printf(h, "<li><a href=\"/dashboard/sandboxes/%s?dir=", sb->id);
		url_value(h, prefix);
		aas_html_printf(h, "#files\"%s>%s</a></li>", i == n ? " aria-current=\"location\"" : "", name);
		prefix[i] = root[i];
	}
	aas_html_raw(h, "</ol></nav>");
	free(prefix);
}

static void entry_row(struct aas_html *h, const struct aas_viewer *v, const saas_sandbox *sb, const char *root,
                      const saas_file_entry *e)
{
	const char *name = strrchr(e->path, '/') ? strrchr(e->path, '/') + 1 : e->path;
	char b1[40], action[128];

	aas_html_printf(h, "<tr data-type=\"%s\"><td class=\"name\">",
	                e->type == SAAS_FILE_DIRECTORY ? "directory" : e->type == SAAS_FILE_REGULAR ? "file" : "other");
	if (e->type == SAAS_FILE_DIRECTORY) {
		aas_html_printf(h, "<a class=\"dir\" href=\"/dashboard/sandboxes/%s?dir=", sb->id);
		url_value(h, e->path);
		aas_html_printf(h, "#files\">%s/</a>", name);
	} else {
		aas_html_printf(h, "%s%s", name, e->type == SAAS_FILE_SYMLINK ? " (link)" : "");
	}
	aas_html_raw(h, "</td><td class=\"size\">");
	if (e->type == SAAS_FILE_REGULAR)
		aas_html_printf(h, "%lld B", (long long)e->size);
	aas_html_printf(h, "</td><td class=\"mtime\">%s</td><td class=\"file-actions\">",
	                e->mtime_ms > 0 ? aas_dash_when(b1, e->mtime_ms) : "-");
	if (e->type == SAAS_FILE_REGULAR) {
		aas_html_printf(h, "<a class=\"download\" download href=\"/dashboard/sandboxes/%s/files/download?path=", sb->id);
		url_value(h, e->path);
		aas_html_printf(h, "\" aria-label=\"Download %s\">Download</a> ", name);
	}
	snprintf(action, sizeof(action), "/dashboard/sandboxes/%s/files/delete", sb->id);
	aas_dash_form(h, v, "file-delete", action);
	aas_html_printf(h, "<input type=\"hidden\" name=\"dir\" value=\"%s\"><input type=\"hidden\" name=\"path\" "
	                   "value=\"%s\"><button type=\"submit\" class=\"danger\" data-name=\"%s\" aria-label=\"Delete %s\">"
	                   "Delete</button></form></td></tr>",
	                root, e->path, name, name);
}

void aas_dash_files_section(struct aas_html *h, const struct aas_viewer *v, const saas_sandbox *sb, const char *dir)
{
	saas_file_list *l = NULL;
	char action[128];
	int rc;

	aas_html_raw(h, "<section id=\"files\" aria-labelledby=\"files-h\"><h2 id=\"files-h\">Files</h2>");
	if (sb->status != SAAS_SANDBOX_READY) {
		aas_html_raw(h, "<p>The sandbox is not running: its files cannot be read.</p></section>");
		return;
	}
	if ((rc = saas_file_list_get(&l, v->client, sb->id, dir && *dir ? dir : NULL, 1, FILES_SHOWN, 0)) < 0) {
		int64_t wait = aas_retry_after_ms(rc); /* a transfer slot: the page comes again in a moment */
		char why[768];

		if (wait > 0)
			aas_retry_words(why, sizeof(why), aas_tenant_message(rc, "the files of a sandbox page"), wait);
		else
			snprintf(why, sizeof(why), "%s.", aas_tenant_message(rc, "the files of a sandbox page"));
		aas_html_printf(h, "<p class=\"error\" role=\"alert\">%s cannot be listed: %s</p>"
		                   "<p><a href=\"/dashboard/sandboxes/%s#files\">Back to /workspace</a></p></section>",
		                dir && *dir ? dir : "/workspace", why, sb->id);
		return;
	}
	breadcrumbs(h, sb, l->root);
	aas_html_raw(h, "<div class=\"table-scroll\"><table id=\"file-list\"><caption class=\"visually-hidden\">"
	                "Files in this directory</caption><thead><tr><th scope=\"col\">Name</th><th scope=\"col\">Size</th>"
	                "<th scope=\"col\" class=\"mtime\">Modified</th><th scope=\"col\">Actions</th></tr></thead><tbody>");
	for (size_t i = 0; i < l->count; i++)
		if (strcmp(l->entries[i]->path, l->root) != 0) /* a file listed as itself */
			entry_row(h, v, sb, l->root, l->entries[i]);
	aas_html_raw(h, "</tbody></table></div>");
	if (l->count == 0)
		aas_html_raw(h, "<p id=\"no-files\">This directory is empty.</p>");
	if (l->truncated)
		aas_html_printf(h, "<p>Only the first %u entries are shown.</p>", (unsigned int)FILES_SHOWN);
	aas_html_raw(h, "<div class=\"file-forms\">");
	snprintf(action, sizeof(action), "/dashboard/sandboxes/%s/files/upload", sb->id);
	/* csrf first: the server checks it before it writes any byte of the file. */
	aas_html_printf(h, "<form method=\"post\" class=\"file-upload\" enctype=\"multipart/form-data\" action=\"%s\">"
	                   "<input type=\"hidden\" name=\"csrf\" value=\"%s\"><input type=\"hidden\" name=\"dir\" "
	                   "value=\"%s\"><label for=\"upload-file\">Upload a file here</label> <input id=\"upload-file\" "
	                   "type=\"file\" name=\"file\" required> <button type=\"submit\">Upload</button></form>",
	                action, v->csrf, l->root);
	snprintf(action, sizeof(action), "/dashboard/sandboxes/%s/files/mkdir", sb->id);
	aas_dash_form(h, v, "file-mkdir", action);
	aas_html_printf(h, "<input type=\"hidden\" name=\"dir\" value=\"%s\"><label for=\"mkdir-name\">New directory"
	                   "</label> <input id=\"mkdir-name\" name=\"name\" maxlength=\"%d\" required> "
	                   "<button type=\"submit\">Make directory</button></form></div>"
	                   "<script src=\"/static/files.js\" defer></script></section>",
	                l->root, SAAS_NAME_MAX);
	saas_file_list_free(l);
}

/* ---- the actions ---- */

/*
 * A Files form post's start: the viewer's own sandbox, the form (its token and
 * origin checked), its dir field (NULL when absent). false after replying;
 * *v and *f are then freed.
 */
static bool files_form(struct aas_req *r, struct aas_reply *out, struct aas_viewer *v, struct aas_form *f,
                       const char **dir)
{
	if (!aas_dash_viewer_sandbox(r, out, v, NULL))
		return false;
	if (!aas_dash_form_ok(r, out, v, f)) {
		aas_form_free(f);
		aas_viewer_free(v);
		return false;
	}
	*dir = aas_form_get(f, "dir");
	return true;
}

void aas_h_dash_file_mkdir(struct aas_req *r, struct aas_reply *out)
{
	struct aas_viewer v;
	struct aas_form f = { 0 };
	const char *dir, *name;
	char *path = NULL;
	int rc;

	if (!files_form(r, out, &v, &f, &dir))
		return;
	name = aas_form_get(&f, "name");
	if (!dir || !*dir || !plain_name(name)) {
		aas_reply_page_error(r, out, 400, "Cannot make the directory",
		                     "Give the new directory's name: one name, without '/', not \".\" or \"..\".");
		goto out;
	}
	if (!(path = join(dir, name))) {
		aas_reply_page_error(r, out, 400, "Cannot make the directory", "The path is too long.");
		goto out;
	}
	if ((rc = saas_file_mkdir(NULL, v.client, r->route_id, path, 0)) < 0) {
		aas_reply_page_saas(r, out, rc, "Cannot make the directory");
		goto out;
	}
	redirect_to_dir(out, r->route_id, dir);
out:
	free(path);
	aas_form_free(&f);
	aas_viewer_free(&v);
}

void aas_h_dash_file_delete(struct aas_req *r, struct aas_reply *out)
{
	struct aas_viewer v;
	struct aas_form f = { 0 };
	const char *dir, *path;
	int rc;

	if (!files_form(r, out, &v, &f, &dir))
		return;
	path = aas_form_get(&f, "path");
	if (!path || !*path) {
		aas_reply_page_error(r, out, 400, "Cannot delete", "The form names no path.");
		goto out;
	}
	if ((rc = saas_file_remove(v.client, r->route_id, path, 0)) < 0) {
		aas_reply_page_saas(r, out, rc, "Cannot delete");
		goto out;
	}
	redirect_to_dir(out, r->route_id, dir);
out:
	aas_form_free(&f);
	aas_viewer_free(&v);
}

/* The viewer, held by a download until its last byte: then freed. */
static void viewer_release(void *hold)
{
	aas_viewer_free(hold);
	free(hold);
}

/* A download that failed before its first byte, on the transfer's thread (its error state): a page, saying when. */
static void download_failed(struct aas_reply *out, int rc, void *ud)
{
	aas_reply_page_saas(ud, out, rc, "Cannot download");
}

void aas_h_dash_file_download(struct aas_req *r, struct aas_reply *out)
{
	struct aas_viewer *v = malloc(sizeof(*v));
	const char *path, *name;
	struct aas_html cd = { 0 };

	if (!v) {
		aas_reply_error(out, 500, "out_of_memory", "out of memory");
		return;
	}
	if (!aas_dash_viewer_sandbox(r, out, v, NULL)) {
		free(v);
		return;
	}
	if (!aas_query(r, "path", &path, out) || !path || !*path) {
		if (!out->response)
			aas_reply_page_error(r, out, 400, "Cannot download", "Name the file: ?path=/workspace/...");
		viewer_release(v);
		return;
	}
	name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	/* RFC 6266's filename*: the name percent-encoded, whatever bytes it holds. */
	aas_html_raw(&cd, "attachment; filename*=UTF-8''");
	url_value(&cd, *name ? name : "download");
	aas_file_stream(out, v->client, r->route_id, path, v, viewer_release, download_failed, r);
	if (out->status == 200 && out->response && !cd.failed)
		MHD_add_response_header(out->response, "Content-Disposition", cd.buf);
	aas_html_free(&cd);
}

/* ---- the upload: the server's multipart reader (multipart.h), its parts taken as they come ---- */

/* The part being read. */
enum upload_part { PART_NONE, PART_CSRF, PART_DIR, PART_FILE };

struct dash_upload {
	struct aas_viewer v;
	struct aas_req *r;               /* the request, as of the last piece of its body */
	struct aas_multipart mp;
	struct aas_upload *sink;         /* the write into the sandbox, once the file part began */
	bool sink_done;                  /* it ended: sink_rc, sink_why (borrowed from it) */
	int sink_rc;
	const char *sink_why;
	enum upload_part part;
	/* A text part's value so far (csrf, dir): bounded, as the form's fields are. */
	char field[UPLOAD_FIELD_MAX + 1];
	size_t field_len;
	char *dir;
	bool csrf_ok, file_seen, refused;
	int64_t file_bytes;
	unsigned int status;             /* a refusal: its status and words (why NULL: aas_upload_end's) */
	const char *why;
	char why_buf[160];
	char *path;
};

static void upload_free(void *cls)
{
	struct dash_upload *u = cls;

	if (!u)
		return;
	aas_upload_free(u->sink); /* first: its thread writes through the viewer's client */
	aas_viewer_free(&u->v);
	free(u->dir);
	free(u->path);
	free(u);
}

/* Refuse the upload (the reader stops: the sink said so). */
static int fail(struct dash_upload *u, unsigned int status, const char *why)
{
	u->refused = true;
	u->status = status;
	u->why = why;
	return 1;
}

static bool named(const struct aas_multipart_part *pt, const char *name)
{
	return pt->name && pt->name_len == strlen(name) && memcmp(pt->name, name, pt->name_len) == 0;
}

/*
 * A part begins: a text field (csrf, dir) to collect, or the one file, which
 * is written only when the token came before it and matched. The fields come
 * once each, before the file: a second dir, or any field after the file, is
 * refused, so that where the file went and where the reply sends the browser
 * are one directory whatever order a client sends.
 */
static int part_begin(void *ud, const struct aas_multipart_part *pt)
{
	struct dash_upload *u = ud;
	/* A '"' comes as %22: a name of SAAS_NAME_MAX bytes is at most three times as long as sent. */
	char filename[3 * SAAS_NAME_MAX + 1];

	if (!pt->filename) {
		if (u->file_seen)
			return fail(u, 400, "The upload form's fields come before its file; this one came after it (the "
			                    "file was written, to the directory named before it).");
		if (!named(pt, "csrf") && !named(pt, "dir"))
			return fail(u, 400, "The upload form has a field it does not know.");
		if (named(pt, "dir") && u->dir)
			return fail(u, 400, "The upload form names its directory once.");
		u->part = named(pt, "csrf") ? PART_CSRF : PART_DIR;
		u->field_len = 0;
		return 0;
	}
	if (!named(pt, "file") || u->file_seen)
		return fail(u, 400, "The upload form sends one file, as its field \"file\".");
	u->file_seen = true;
	if (!u->csrf_ok)
		return fail(u, 403, "The form's security token is missing or out of date. Reload the page and send it again.");
	if (!u->dir || !*u->dir)
		return fail(u, 400, "The upload form names no directory.");
	if (!pt->filename_len)
		return fail(u, 400, "Choose a file to upload.");
	/* aas_multipart_filename refuses a CR, an LF and every other control character: no name holds one. */
	if (pt->filename_len >= sizeof(filename) || !aas_multipart_filename(filename, pt->filename, pt->filename_len) ||
	    !plain_name(filename))
		return fail(u, 400, "The file's name must be one name: no '/', not \".\" or \"..\", at most 255 bytes.");
	if (!(u->path = join(u->dir, filename)))
		return fail(u, 400, "The path is too long.");
	if (!(u->sink = aas_upload_begin(u->v.client, u->r->route_id, u->path, 0, -1)))
		return fail(u, 500, "Out of memory, or no thread for the upload.");
	u->part = PART_FILE;
	return 0;
}

/* Bytes of the current part. */
static int part_data(void *ud, const char *data, size_t n)
{
	struct dash_upload *u = ud;

	if (u->part != PART_FILE) {
		if (n > UPLOAD_FIELD_MAX - u->field_len)
			return fail(u, 400, "A field of the upload form is too long.");
		memcpy(u->field + u->field_len, data, n);
		u->field_len += n;
		return 0;
	}
	u->file_bytes += (int64_t)n;
	if (u->file_bytes > SAAS_FILE_MAX)
		return fail(u, 413, "The file is larger than a sandbox's files may be (1 GiB).");
	if (aas_upload_data(u->sink, data, n) < 0)
		return fail(u, 0, NULL); /* the write stopped: aas_upload_end says why */
	return 0;
}

/* A part ended: keep a field (the token checked now, before any later part begins), or end the write. */
static int part_end(void *ud)
{
	struct dash_upload *u = ud;

	u->field[u->field_len] = '\0';
	switch (u->part) {
	case PART_CSRF: u->csrf_ok = aas_csrf_ok(u->field, u->v.csrf); break;
	case PART_DIR: /* once: part_begin refuses a second */
		if (!(u->dir = strdup(u->field)))
			return fail(u, 500, "Out of memory.");
		break;
	case PART_FILE:
		u->sink_rc = aas_upload_end(u->sink, &u->sink_why);
		u->sink_done = true;
		if (u->sink_rc < 0)
			return fail(u, 0, NULL);
		break;
	case PART_NONE: break;
	}
	u->part = PART_NONE;
	return 0;
}

static const struct aas_multipart_sink upload_sink = { part_begin, part_data, part_end };

int aas_dash_upload_start(struct aas_req *r, struct aas_reply *out)
{
	struct dash_upload *u = calloc(1, sizeof(*u));
	char boundary[AAS_MULTIPART_BOUNDARY_MAX + 1];

	if (!u) {
		aas_reply_error(out, 500, "out_of_memory", "out of memory");
		return -1;
	}
	if (!aas_dash_viewer_sandbox(r, out, &u->v, NULL)) {
		free(u);
		return -1;
	}
	r->stream = u;
	r->stream_free = upload_free;
	u->r = r;
	if (!aas_origin_allowed(r, out, false))
		return -1;
	if (!aas_multipart_boundary(boundary, MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
	                                                                  MHD_HTTP_HEADER_CONTENT_TYPE)) ||
	    !aas_multipart_init(&u->mp, boundary, AAS_MULTIPART_PARTS_MAX, &upload_sink, u)) {
		aas_reply_page_error(r, out, 415, "Not an upload", "Send the file as multipart/form-data.");
		return -1;
	}
	return 0;
}

/* The reader failed: the body is not multipart/form-data, and it says how. */
static int malformed(struct dash_upload *u)
{
	snprintf(u->why_buf, sizeof(u->why_buf), "The upload is not well-formed multipart/form-data: %s.", u->mp.why);
	return fail(u, 400, u->why_buf);
}

int aas_dash_upload_data(struct aas_req *r, const char *data, size_t len)
{
	struct dash_upload *u = r->stream;

	u->r = r;
	switch (aas_multipart_feed(&u->mp, data, len)) {
	case AAS_MULTIPART_FAILED: return malformed(u);
	case AAS_MULTIPART_STOPPED: return 1; /* refused: fail() said why */
	default: return 0;                    /* on, or done: what follows the closing delimiter is ignored */
	}
}

/* The write into the sandbox failed: why, and when to try again if it said (a transfer slot, no room now). */
static void upload_failed(struct aas_req *r, struct aas_reply *out, struct dash_upload *u)
{
	unsigned int status = aas_status_for(u->sink_rc);
	/* The host's detail of a failure of ours is the operator's, as the API keeps it. */
	const char *why = u->sink_why && *u->sink_why && status < 500 ? u->sink_why : saas_strerror(u->sink_rc);
	int64_t wait = aas_upload_retry_ms(u->sink);

	if (wait > 0)
		aas_reply_page_retry(r, out, status, "Cannot upload", why, wait);
	else
		aas_reply_page_error(r, out, status, "Cannot upload", why);
}

void aas_h_dash_file_upload(struct aas_req *r, struct aas_reply *out)
{
	struct dash_upload *u = r->stream;
	/* The body's end: a reader still within it was cut short (or never fed: no body at all). */
	bool whole = u->refused || aas_multipart_finish(&u->mp) == AAS_MULTIPART_DONE;

	if (u->sink && !u->sink_done) {
		u->sink_rc = aas_upload_end(u->sink, &u->sink_why);
		u->sink_done = true;
	}
	if (u->refused && u->why)
		aas_reply_page_error(r, out, u->status, "Cannot upload", u->why);
	else if (u->sink_done && u->sink_rc < 0)
		upload_failed(r, out, u);
	else if (!u->file_seen)
		aas_reply_page_error(r, out, 400, "Cannot upload", "Choose a file to upload.");
	else if (!whole)
		aas_reply_page_error(r, out, 400, "Cannot upload", "The upload ended before its last part.");
	else
		redirect_to_dir(out, r->route_id, u->dir);
}
