/*
 * A bounded byte pipe between two threads (pipe.h).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
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
