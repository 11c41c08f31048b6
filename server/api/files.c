/*
 * PUT/GET /v1/sandboxes/{id}/files: raw bytes, streamed both ways.
 *
 * Upload: the connection's thread hands the body, piece by piece, through a
 * bounded pipe (1 MiB, pipe.h) to a worker thread running saas_file_write_stream();
 * when the buffer is full the connection's thread waits, so TCP pushes back
 * on the client. Download: a worker thread runs saas_file_read_stream() into
 * the same kind of buffer and libmicrohttpd's content reader drains it. No
 * file is ever held whole in memory; each transfer holds at most 1 MiB.
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

struct aas_upload {
	struct aas_pipe pipe;
	pthread_t thread;
	bool running;
	saas_client *client;
	char id[SAAS_ID_MAX + 1];
	char *path;
	unsigned int mode;
	int64_t size;
	int64_t received;
	int rc;
	int klass;
	char message[512];
	char limit[32];                /* SAAS_ELIMIT: which, and when to retry (the worker's error, for the reply) */
	int64_t retry_after_ms;
	bool done;
};

static long upload_reader(void *ud, void *buf, size_t size)
{
	struct aas_upload *u = ud;
	return aas_pipe_read(&u->pipe, buf, size);
}

static void *upload_main(void *arg)
{
	struct aas_upload *u = arg;
	saas_file_write_options o = SAAS_FILE_WRITE_OPTIONS_INIT;
	const saas_error *e;

	o.mode = u->mode;
	u->rc = saas_file_write_stream(u->client, u->id, u->path, upload_reader, u, u->size, &o);
	e = saas_error_last();
	u->klass = e->code == u->rc ? e->klass : SAAS_ERRCLASS_NONE;
	snprintf(u->message, sizeof(u->message), "%s",
	         u->rc < 0 && e->code == u->rc && *e->message ? e->message : saas_strerror(u->rc));
	if (u->rc == SAAS_ELIMIT && e->code == u->rc) {
		snprintf(u->limit, sizeof(u->limit), "%s", e->limit);
		u->retry_after_ms = e->retry_after_ms;
	}
	/* Whatever happened, the connection's thread must not wait on us any more. */
	pthread_mutex_lock(&u->pipe.mu);
	u->done = true;
	pthread_mutex_unlock(&u->pipe.mu);
	aas_pipe_set(&u->pipe, false, true);
	return NULL;
}

void aas_upload_free(struct aas_upload *u)
{
	if (!u)
		return;
	if (u->running) {
		aas_pipe_set(&u->pipe, false, true);
		pthread_join(u->thread, NULL);
	}
	aas_pipe_destroy(&u->pipe);
	free(u->path);
	free(u);
}

static void upload_free(void *stream)
{
	aas_upload_free(stream);
}

struct aas_upload *aas_upload_begin(saas_client *client, const char *sandbox_id, const char *path, unsigned int mode,
                                    int64_t size)
{
	struct aas_upload *u;

	if (!(u = calloc(1, sizeof(*u))))
		return NULL;
	if (aas_pipe_init(&u->pipe) < 0 || !(u->path = strdup(path))) {
		aas_pipe_destroy(&u->pipe);
		free(u);
		return NULL;
	}
	u->client = client;
	u->mode = mode;
	u->size = size;
	snprintf(u->id, sizeof(u->id), "%s", sandbox_id);
	if (pthread_create(&u->thread, NULL, upload_main, u) != 0) {
		aas_upload_free(u);
		return NULL;
	}
	u->running = true;
	return u;
}

int aas_upload_data(struct aas_upload *u, const void *data, size_t len)
{
	u->received += (int64_t)len;
	return aas_pipe_write(&u->pipe, data, len);
}

int aas_upload_end(struct aas_upload *u, const char **message)
{
	aas_pipe_set(&u->pipe, true, false);
	pthread_join(u->thread, NULL);
	u->running = false;
	*message = u->message;
	return u->rc;
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
	/* Refuse at once what cannot be written, before the body is read. */
	if ((rc = saas_sandbox_get(&sb, r->client, r->route_id)) < 0) {
		aas_reply_saas(out, rc);
		return -1;
	}
	rc = sb->status == SAAS_SANDBOX_READY ? SAAS_OK : SAAS_ESTATE;
	saas_sandbox_free(sb);
	if (rc < 0) {
		aas_reply_error(out, 409, "conflict", "the sandbox is not ready");
		return -1;
	}
	if (!(u = aas_upload_begin(r->client, r->route_id, path, m, cl ? (int64_t)strtoll(cl, NULL, 10) : -1))) {
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
	const char *message;

	aas_upload_end(u, &message);
	if (u->rc < 0 && u->limit[0]) {
		aas_reply_limit(out, u->limit, u->retry_after_ms, "%s", u->message);
		return;
	}
	if (u->rc < 0) {
		aas_reply_failure(out, u->rc, u->klass, u->message);
		return;
	}
	aas_reply_json(out, 200, json_pack("{s:s,s:s,s:I}", "sandbox_id", u->id, "path", u->path, "size",
	                                   (json_int_t)u->received));
}

/* ---- download ---- */

struct download {
	struct aas_pipe pipe;
	pthread_t thread;
	void *hold;                    /* what keeps the client open, released at the end */
	void (*release)(void *hold);
	saas_client *client;
	char id[SAAS_ID_MAX + 1];
	char *path;
	int64_t size;
	bool started;   /* the first byte is on its way: the status is 200 */
	bool finished;
	int rc;
	int klass;
	char message[512];
	char limit[32];                /* as the upload's */
	int64_t retry_after_ms;
};

static int download_writer(void *ud, const void *data, size_t len)
{
	struct download *d = ud;

	pthread_mutex_lock(&d->pipe.mu);
	d->started = true;
	pthread_cond_broadcast(&d->pipe.cv);
	pthread_mutex_unlock(&d->pipe.mu);
	return aas_pipe_write(&d->pipe, data, len) < 0 ? 1 : 0;
}

static void *download_main(void *arg)
{
	struct download *d = arg;
	const saas_error *e;
	int rc;

	rc = saas_file_read_stream(&d->size, d->client, d->id, d->path, download_writer, d);
	e = saas_error_last();
	pthread_mutex_lock(&d->pipe.mu);
	d->rc = rc;
	d->klass = e->code == rc ? e->klass : SAAS_ERRCLASS_NONE;
	snprintf(d->message, sizeof(d->message), "%s",
	         rc < 0 && e->code == rc && *e->message ? e->message : saas_strerror(rc));
	if (rc == SAAS_ELIMIT && e->code == rc) {
		snprintf(d->limit, sizeof(d->limit), "%s", e->limit);
		d->retry_after_ms = e->retry_after_ms;
	}
	d->finished = true;
	d->pipe.eof = true;
	pthread_cond_broadcast(&d->pipe.cv);
	pthread_mutex_unlock(&d->pipe.mu);
	return NULL;
}

static void download_free(void *cls)
{
	struct download *d = cls;

	aas_pipe_set(&d->pipe, false, true);
	pthread_join(d->thread, NULL);
	d->release(d->hold);
	aas_pipe_destroy(&d->pipe);
	free(d->path);
	free(d);
}

static ssize_t download_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct download *d = cls;
	long n;

	(void)pos;
	n = aas_pipe_read(&d->pipe, buf, max);
	if (n > 0)
		return n;
	if (n == 0 && d->rc == SAAS_OK)
		return MHD_CONTENT_READER_END_OF_STREAM;
	aas_log(SAAS_LOG_WARN, "download of a file from %s failed midway: %s", d->id, d->message);
	return MHD_CONTENT_READER_END_WITH_ERROR;
}

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
	struct download *d;

	if (!(d = calloc(1, sizeof(*d))) || aas_pipe_init(&d->pipe) < 0 || !(d->path = strdup(path))) {
		if (d) {
			aas_pipe_destroy(&d->pipe);
			free(d);
		}
		release(hold);
		aas_reply_error(out, 500, "out_of_memory", "out of memory");
		return;
	}
	d->client = client;
	d->hold = hold;
	d->release = release;
	d->size = -1;
	snprintf(d->id, sizeof(d->id), "%s", r->route_id);
	if (pthread_create(&d->thread, NULL, download_main, d) != 0) {
		release(hold);
		aas_pipe_destroy(&d->pipe);
		free(d->path);
		free(d);
		aas_reply_error(out, 500, "error", "cannot start a thread");
		return;
	}
	/* Wait for the first byte or the end: only then is the status known. */
	pthread_mutex_lock(&d->pipe.mu);
	while (!d->started && !d->finished)
		pthread_cond_wait(&d->pipe.cv, &d->pipe.mu);
	bool failed = !d->started && d->rc < 0;
	pthread_mutex_unlock(&d->pipe.mu);
	if (failed) {
		if (d->limit[0])
			aas_reply_limit(out, d->limit, d->retry_after_ms, "%s", d->message);
		else
			aas_reply_failure(out, d->rc, d->klass, d->message);
		download_free(d);
		return;
	}
	out->status = 200;
	out->response = MHD_create_response_from_callback(d->size >= 0 ? (uint64_t)d->size : MHD_SIZE_UNKNOWN,
	                                                  64 * 1024, download_read, d, download_free);
	if (!out->response) {
		download_free(d);
		aas_reply_error(out, 500, "out_of_memory", "out of memory");
		return;
	}
	MHD_add_response_header(out->response, "Content-Type", "application/octet-stream");
	aas_reply_common_headers(out->response); /* no-store, nosniff: a file is never run as a page */
}
