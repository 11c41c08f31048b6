/*
 * A gate for tests of an upload that is blocked in its client: the data source
 * gives one chunk, then waits at the gate until the test opens it, and then
 * gives one more and ends. The test waits for the upload to reach the gate,
 * does what it must while the upload is held, and opens it.
 */
#ifndef SAAS_TEST_GATE_H
#define SAAS_TEST_GATE_H

#include <pthread.h>
#include <string.h>

struct saas_test_gate {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	int calls;
	int waiting;       /* the upload is blocked in its reader */
	int open;
};

#define SAAS_TEST_GATE_INIT { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0 }

/* A saas_read_fn: 4 KiB of 'x', then the gate, then 4 KiB more, then the end. */
static inline long saas_test_gate_read(void *ud, void *buf, size_t size)
{
	struct saas_test_gate *g = ud;
	long n = size < 4096 ? (long)size : 4096;

	pthread_mutex_lock(&g->mu);
	if (g->calls++ == 1) {
		g->waiting = 1;
		pthread_cond_broadcast(&g->cond);
		while (!g->open)
			pthread_cond_wait(&g->cond, &g->mu);
	}
	pthread_mutex_unlock(&g->mu);
	if (g->calls > 2)
		return 0;
	memset(buf, 'x', (size_t)n);
	return n;
}

/* Wait until the upload is held at the gate. */
static inline void saas_test_gate_reached(struct saas_test_gate *g)
{
	pthread_mutex_lock(&g->mu);
	while (!g->waiting)
		pthread_cond_wait(&g->cond, &g->mu);
	pthread_mutex_unlock(&g->mu);
}

/* Let the upload go on. */
static inline void saas_test_gate_open(struct saas_test_gate *g)
{
	pthread_mutex_lock(&g->mu);
	g->open = 1;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->mu);
}

#endif
