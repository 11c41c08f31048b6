/*
 * A bounded byte pipe between two threads, and the download and upload
 * workers over it that every room's files use (pipe.h).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipe.h"

int aas_pipe_init(struct aas_pipe *p)
{
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->head = p->len = 0;
	p->eof = p->aborted = false;
	return (p->buf = malloc(AAS_PIPE_CAP)) ? 0 : -1;
}

void aas_pipe_destroy(struct aas_pipe *p)
{
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p->buf);
	p->buf = NULL;
}

int aas_pipe_write(struct aas_pipe *p, const void *data, size_t len)
{
	const unsigned char *d = data;

	pthread_mutex_lock(&p->mu);
	while (len) {
		while (p->len == AAS_PIPE_CAP && !p->aborted)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->aborted) {
			pthread_mutex_unlock(&p->mu);
			return -1;
		}
		size_t tail = (p->head + p->len) % AAS_PIPE_CAP;
		size_t n = AAS_PIPE_CAP - p->len;
		if (n > AAS_PIPE_CAP - tail)
			n = AAS_PIPE_CAP - tail;
		if (n > len)
			n = len;
		memcpy(p->buf + tail, d, n);
		p->len += n;
		d += n;
		len -= n;
		pthread_cond_broadcast(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
	return 0;
}

long aas_pipe_read(struct aas_pipe *p, void *buf, size_t size)
{
	size_t n;

	pthread_mutex_lock(&p->mu);
	while (p->len == 0 && !p->eof && !p->aborted)
		pthread_cond_wait(&p->cv, &p->mu);
	if (p->aborted || (p->len == 0 && p->eof)) {
		pthread_mutex_unlock(&p->mu);
		return p->aborted ? -1 : 0;
	}
	n = p->len < size ? p->len : size;
	if (n > AAS_PIPE_CAP - p->head)
		n = AAS_PIPE_CAP - p->head;
	memcpy(buf, p->buf + p->head, n);
	p->head = (p->head + n) % AAS_PIPE_CAP;
	p->len -= n;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return (long)n;
}

void aas_pipe_set(struct aas_pipe *p, bool eof, bool aborted)
{
	pthread_mutex_lock(&p->mu);
	p->eof |= eof;
	p->aborted |= aborted;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

void aas_file_error_saas(struct aas_reply *out, int rc, void *ud)
{
	(void)ud;
	aas_reply_saas(out, rc);
}

/* ---- download: a worker reads the guest's file into the pipe; the response drains it ---- */

struct download {
	struct aas_pipe pipe;
	pthread_t thread;
	void *hold;                    /* what keeps the client open, released at the end */
	void (*release)(void *hold);
	saas_client *client;
	char id[SAAS_ID_MAX + 1];
	char *path;
	aas_file_error_fn on_error;
	void *ud;
	int64_t size;
	bool started;                  /* the first byte is on its way: the status is 200 */
	bool finished;
	int rc;
	struct aas_reply reply;        /* on_error's, for a failure before the first byte */
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
	int rc = saas_file_read_stream(&d->size, d->client, d->id, d->path, download_writer, d);
	const saas_error *e = saas_error_last();

	/* `started` is this thread's to set: read without the lock. The connection's thread waits for `finished`. */
	if (rc < 0 && !d->started)
		d->on_error(&d->reply, rc, d->ud);
	else if (rc < 0)
		aas_log(SAAS_LOG_WARN, "reading %s of %s failed midway: %s", d->path, d->id,
		        e->code == rc && *e->message ? e->message : saas_strerror(rc));
	pthread_mutex_lock(&d->pipe.mu);
	d->rc = rc;
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
	if (d->reply.response)
		MHD_destroy_response(d->reply.response);
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
	return MHD_CONTENT_READER_END_WITH_ERROR; /* the client sees the body cut short of its Content-Length */
}

void aas_file_stream(struct aas_reply *out, saas_client *client, const char *sandbox_id, const char *path,
                     void *hold, void (*release)(void *hold), aas_file_error_fn on_error, void *ud)
{
	struct download *d;
	bool failed;

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
	d->on_error = on_error;
	d->ud = ud;
	d->size = -1;
	snprintf(d->id, sizeof(d->id), "%s", sandbox_id);
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
	failed = !d->started && d->rc < 0;
	if (failed) {
		*out = d->reply;
		d->reply.status = 0;
		d->reply.response = NULL;
	}
	pthread_mutex_unlock(&d->pipe.mu);
	if (failed) {
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

/* ---- upload: the connection's thread feeds the pipe; a worker writes the guest's file from it ---- */

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
	aas_file_error_fn on_error;    /* or NULL */
	void *ud;
	int rc;
	char message[512];
	int64_t retry_ms;              /* aas_retry_after_ms(rc), taken on the writing thread */
	struct aas_reply reply;        /* on_error's */
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
	snprintf(u->message, sizeof(u->message), "%s",
	         u->rc < 0 && e->code == u->rc && *e->message ? e->message : saas_strerror(u->rc));
	u->retry_ms = aas_retry_after_ms(u->rc);
	if (u->rc < 0 && u->on_error)
		u->on_error(&u->reply, u->rc, u->ud);
	/* Whatever happened, the connection's thread must not wait on us any more. */
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
	if (u->reply.response)
		MHD_destroy_response(u->reply.response);
	aas_pipe_destroy(&u->pipe);
	free(u->path);
	free(u);
}

struct aas_upload *aas_upload_start(saas_client *client, const char *sandbox_id, const char *path, unsigned int mode,
                                    int64_t size, aas_file_error_fn on_error, void *ud)
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
	u->on_error = on_error;
	u->ud = ud;
	snprintf(u->id, sizeof(u->id), "%s", sandbox_id);
	if (pthread_create(&u->thread, NULL, upload_main, u) != 0) {
		aas_upload_free(u);
		return NULL;
	}
	u->running = true;
	return u;
}

struct aas_upload *aas_upload_begin(saas_client *client, const char *sandbox_id, const char *path, unsigned int mode,
                                    int64_t size)
{
	return aas_upload_start(client, sandbox_id, path, mode, size, NULL, NULL);
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

void aas_upload_reply(struct aas_upload *u, struct aas_reply *out)
{
	if (!u->reply.status && !u->reply.response) {
		aas_reply_failure(out, u->rc < 0 ? u->rc : SAAS_ERROR, SAAS_ERRCLASS_NONE, u->message);
		return;
	}
	*out = u->reply;
	u->reply.status = 0;
	u->reply.response = NULL;
}

int64_t aas_upload_retry_ms(const struct aas_upload *u)
{
	return u->retry_ms;
}

int64_t aas_upload_received(const struct aas_upload *u)
{
	return u->received;
}
