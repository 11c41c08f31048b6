/*
 * PUT/GET /v1/sandboxes/{id}/files: raw bytes, streamed both ways.
 *
 * Upload: the connection's thread hands the body, piece by piece, through a
 * bounded pipe (1 MiB, pipe.h) to a worker thread running saas_file_write_stream();
 * when the buffer is full the connection's thread waits, so TCP pushes back
 * on the client. Download: a worker thread runs saas_file_read_stream() into
 * the same kind of buffer and libmicrohttpd's content reader drains it. No
 * file is ever held whole in memory; each transfer holds at most 1 MiB.
 * Both workers are pipe.c's, shared with the dashboard and E2B's /files;
 * what is this room's is the route, its checks and its error replies.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "pipe.h"

static const char *file_path(struct aas_req *r, struct aas_reply *out)
{
	const char *path;

	if (!aas_query(r, "path", &path, out))
		return NULL;
	if (!path || !*path) {
		aas_reply_error(out, 400, "invalid_argument", "the query parameter \"path\" is required");
		return NULL;
	}
	return path;
}

/* ---- upload ---- */

static void upload_free(void *stream)
{
	aas_upload_free(stream);
}

/* Octal permission bits, digits only (strtoul() would take " 755" and "+755"). */
static bool parse_mode(const char *s, unsigned int *mode)
{
	unsigned int m = 0;
	const char *p;

	for (p = s; *p >= '0' && *p <= '7' && m <= 07777; p++)
		m = m * 8 + (unsigned int)(*p - '0');
	if (!*s || *p || m > 07777)
		return false;
	*mode = m;
	return true;
}

int aas_file_put_start(struct aas_req *r, struct aas_reply *out)
{
	const char *path, *mode;
	const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Length");
	saas_sandbox *sb = NULL;
	struct aas_upload *u;
	unsigned int m = 0;
	int rc;

	if (!(path = file_path(r, out)) || !aas_query(r, "mode", &mode, out))
		return -1;
	if (mode && !parse_mode(mode, &m)) {
		aas_reply_error(out, 400, "invalid_argument", "mode must be octal permission bits, e.g. 0755");
		return -1;
	}
	/* Refuse at once what cannot be written, before the body is read (its status only: no live counters). */
	if ((rc = saas_sandbox_get_ext(&sb, r->client, r->route_id, SAAS_GET_RECORDED)) < 0) {
		aas_reply_saas(out, rc);
		return -1;
	}
	rc = sb->status == SAAS_SANDBOX_READY ? SAAS_OK : SAAS_ESTATE;
	saas_sandbox_free(sb);
	if (rc < 0) {
		aas_reply_error(out, 409, "conflict", "the sandbox is not ready");
		return -1;
	}
	if (!(u = aas_upload_start(r->client, r->route_id, path, m, cl ? (int64_t)strtoll(cl, NULL, 10) : -1,
	                           aas_file_error_saas, NULL))) {
		aas_reply_error(out, 500, "out_of_memory", "out of memory, or no thread for the upload");
		return -1;
	}
	r->stream = u;
	r->stream_free = upload_free;
	return 0;
}

int aas_file_put_data(struct aas_req *r, const char *data, size_t len)
{
	return aas_upload_data(r->stream, data, len) < 0 ? 1 : 0;
}

void aas_h_file_put(struct aas_req *r, struct aas_reply *out)
{
	struct aas_upload *u = r->stream;
	const char *message, *path;

	if (aas_upload_end(u, &message) < 0) {
		aas_upload_reply(u, out);
		return;
	}
	if (!(path = file_path(r, out))) /* read once already, with the headers */
		return;
	aas_reply_json(out, 200, json_pack("{s:s,s:s,s:I}", "sandbox_id", r->route_id, "path", path, "size",
	                                   (json_int_t)aas_upload_received(u)));
}

/* ---- download ---- */

static void file_list(struct aas_req *r, struct aas_reply *out)
{
	unsigned int depth = 0, max = 0; /* 0: the library's defaults */
	saas_file_list *list = NULL;
	const char *path;
	int rc;

	if (!aas_query(r, "path", &path, out) || !aas_query_uint(r, "depth", 1, SAAS_LIST_DEPTH_MAX, &depth, out) ||
	    !aas_query_uint(r, "max_entries", 1, SAAS_LIST_ENTRIES_MAX, &max, out))
		return;
	if ((rc = saas_file_list_get(&list, r->client, r->route_id, path, depth, max, 0)) < 0)
		aas_reply_saas(out, rc);
	else
		aas_reply_json(out, 200, saas__wire_file_list(list));
	saas_file_list_free(list);
}

static void auth_release(void *hold)
{
	aas_auth_release(hold);
}

void aas_h_file_get(struct aas_req *r, struct aas_reply *out)
{
	const char *path;
	bool list = false;

	if (!aas_query_bool(r, "list", &list, out))
		return;
	if (list) {
		file_list(r, out);
		return;
	}
	if (!(path = file_path(r, out)))
		return;
	aas_auth_ref(r->auth);
	aas_file_send(r, out, r->client, path, r->auth, auth_release);
}

void aas_file_send(struct aas_req *r, struct aas_reply *out, saas_client *client, const char *path, void *hold,
                   void (*release)(void *hold))
{
	aas_file_stream(out, client, r->route_id, path, hold, release, aas_file_error_saas, NULL);
}
