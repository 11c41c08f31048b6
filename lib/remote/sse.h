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

/*
 * An event stream's framing as the HTML standard's "Server-sent events"
 * reads one, for both readers of the remote client (this one, an exec's;
 * code.c's, a code run's): bytes into lines, each ended by CR LF, LF or a
 * lone CR; a line into a field ("name:value", one space after the colon
 * dropped; a line without a colon is a name with an empty value); a blank
 * line into an event: its "event" name and its "data" lines joined with LF
 * (the last line's LF removed). A blank line after no data line is no
 * event; other fields change nothing. Zeroed before use.
 */
struct saas__sse_frame {
	saas__buf line;               /* the line being read */
	saas__buf data;               /* the event's data lines so far, each with its LF */
	char name[24];                /* the event's name, cut to fit; "" for none */
	bool after_cr;                /* the last line ended with a CR: a LF next belongs to it */
};

/* What a frame tells its reader: a comment line (": keepalive"), or an event that ended. */
enum { SAAS__SSE_COMMENT = 1, SAAS__SSE_EVENT = 2 };

/*
 * Feed the stream's next bytes: on(ud, SAAS__SSE_COMMENT) for each comment
 * and on(ud, SAAS__SSE_EVENT) for each event, in order (f->name its name,
 * f->data.len bytes of f->data its data; both reset once on returns). 0;
 * 1 once on returned non-zero (the rest is not read); SAAS_ETOOBIG when a
 * line or an event's data would pass max bytes; SAAS_ENOMEM.
 */
int saas__sse_frame_write(struct saas__sse_frame *f, const void *data, size_t len, size_t max,
                          int (*on)(void *ud, int what), void *ud);
void saas__sse_frame_free(struct saas__sse_frame *f);

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
	struct saas__sse_frame frame;
};

/* A saas_write_fn: the next bytes of the stream's body; non-zero ends the read (s->fail says why, if it failed). */
int saas__sse_write(void *s, const void *data, size_t len);

/* Free what the reader holds (the struct is the caller's). */
void saas__sse_free(struct saas__sse *s);

#endif
