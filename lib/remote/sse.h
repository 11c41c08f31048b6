/*
 * Internal: the remote provider's reader of the server's event streams
 * (docs/rest.md, "Output as it comes"): bytes into lines, lines into events,
 * events to a streaming exec's or a follower's callbacks. Pure but for the
 * cancel a stopping exec sends, so that it can be fuzzed on its own.
 */
#ifndef SAAS_REMOTE_SSE_H
#define SAAS_REMOTE_SSE_H

#include <stdbool.h>

#include "client/provider.h"

/* The largest event the server sends is a 64 KiB chunk in base64 and JSON; more is not the API talking. */
#define SAAS_SSE_EVENT_MAX ((size_t)1 << 20)

/* An event stream being read: zeroed, then the first four members set. */
struct saas__sse {
	saas_client *client;          /* for the cancel (cancel_on_stop) */
	const saas_exec_callbacks *cb;
	saas_exec_cursor *cur;        /* advanced past every chunk delivered */
	bool cancel_on_stop;          /* a callback that stops cancels the command (an exec) */
	bool follow;                  /* ... or ends the read (a follow) */
	char id[SAAS_ID_MAX + 1];     /* the execution: from "started", or the follower's */
	bool ended;                   /* "exit" came */
	bool stopped;                 /* a callback asked to stop */
	int fail;                     /* a saas_status that ended the read, or 0 */
	saas__buf line, data;
	char event[16];
};

/* A saas_write_fn: the next bytes of the stream's body; non-zero ends the read (s->fail says why, if it failed). */
int saas__sse_write(void *s, const void *data, size_t len);

/* Free what the reader holds (the struct is the caller's). */
void saas__sse_free(struct saas__sse *s);

#endif
