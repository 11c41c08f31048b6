/*
 * A bounded byte pipe between two threads (AAS_PIPE_CAP bytes): how a file
 * streams between a connection's thread and a worker running libsaas's
 * stream calls, in both directions. The writer waits while it is full, so
 * TCP pushes back on a client that sends faster than the guest takes;
 * either side may give up (aborted), which wakes the other.
 *
 * And the two workers over it that every room's files use (/v1's,
 * the dashboard's, E2B's /files): a download and an upload, each a thread
 * running saas_file_read_stream() or saas_file_write_stream(). What a
 * failure answers is the room's: a callback makes the reply on the
 * worker's thread, whose libsaas error state says why.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_PIPE_H
#define AAS_PIPE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "server.h"

#define AAS_PIPE_CAP ((size_t)1 << 20)

struct aas_pipe {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned char *buf;
	size_t head, len;
	bool eof;        /* the writer has no more */
	bool aborted;    /* the reader (or the request) gave up */
};

/* 0, or -1 out of memory (then aas_pipe_destroy all the same). */
int aas_pipe_init(struct aas_pipe *p);
void aas_pipe_destroy(struct aas_pipe *p);
/* Write all of data, waiting for room; -1 if the pipe was aborted. */
int aas_pipe_write(struct aas_pipe *p, const void *data, size_t len);
/* Read up to size bytes, waiting for some: the count, 0 at the end, -1 if aborted. */
long aas_pipe_read(struct aas_pipe *p, void *buf, size_t size);
/* Mark the end of the writes and/or abort, and wake the other side. */
void aas_pipe_set(struct aas_pipe *p, bool eof, bool aborted);

/*
 * What a transfer's failure answers, for the room serving it: called on the
 * worker's thread, whose libsaas error state (saas_error_last()) says why,
 * to make *out. ud is the caller's.
 */
typedef void (*aas_file_error_fn)(struct aas_reply *out, int rc, void *ud);

/* aas_reply_saas() as an aas_file_error_fn: the REST API's answer. */
void aas_file_error_saas(struct aas_reply *out, int rc, void *ud);

/*
 * Reply with the file at `path` of sandbox `sandbox_id` as the guest gives
 * it (200 application/octet-stream, with its Content-Length; no-store,
 * nosniff), or with what on_error makes of a failure before its first byte;
 * one after it cuts the body short of its length, and is logged. `hold`
 * keeps `client` open: release(hold) once the transfer ends, or before this
 * returns when it fails. on_error and ud are used only before this returns.
 */
void aas_file_stream(struct aas_reply *out, saas_client *client, const char *sandbox_id, const char *path,
                     void *hold, void (*release)(void *hold), aas_file_error_fn on_error, void *ud);

/*
 * An upload of at most SAAS_FILE_MAX bytes to `path` in the sandbox: a
 * thread running saas_file_write_stream() through `client` (which must
 * outlive it), fed through a 1 MiB pipe. mode: 0 for the default; size: the
 * bytes to come, or -1 when unknown. on_error (or NULL) makes the reply to
 * a failure, taken with aas_upload_reply(); ud must live until
 * aas_upload_end() or aas_upload_free(). NULL when out of memory or threads.
 */
struct aas_upload;
struct aas_upload *aas_upload_start(saas_client *client, const char *sandbox_id, const char *path, unsigned int mode,
                                    int64_t size, aas_file_error_fn on_error, void *ud);
/* aas_upload_start() without an error reply: aas_upload_end()'s message says why. */
struct aas_upload *aas_upload_begin(saas_client *client, const char *sandbox_id, const char *path, unsigned int mode,
                                    int64_t size);
/* The next bytes; waits while the pipe is full. 0, or -1 once the write stopped (aas_upload_end says why). */
int aas_upload_data(struct aas_upload *u, const void *data, size_t len);
/* No more bytes: wait for the write; its saas_status, *message the tenant's words for it (borrowed until free). */
int aas_upload_end(struct aas_upload *u, const char **message);
/* After aas_upload_end() failed: on_error's reply, moved into *out (a 500 when there is none). */
void aas_upload_reply(struct aas_upload *u, struct aas_reply *out);
/* After aas_upload_end() failed: when to try again (aas_retry_after_ms of its failure), 0 when it says not. */
int64_t aas_upload_retry_ms(const struct aas_upload *u);
/* The bytes given to aas_upload_data() so far. */
int64_t aas_upload_received(const struct aas_upload *u);
/* Stop (the write fails, its partial copy removed, if it had not ended) and free; NULL is ignored. */
void aas_upload_free(struct aas_upload *u);

#endif
