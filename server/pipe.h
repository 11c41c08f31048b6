/*
 * A bounded byte pipe between two threads (AAS_PIPE_CAP bytes): how a file
 * streams between a connection's thread and a worker running libsaas's
 * stream calls, in both directions (api/files.c, e2b/files.c). The writer
 * waits while it is full, so TCP pushes back on a client that sends faster
 * than the guest takes; either side may give up (aborted), which wakes the
 * other.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_PIPE_H
#define AAS_PIPE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

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

#endif
