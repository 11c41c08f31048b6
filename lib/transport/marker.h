/*
 * Internal: the exec wrapper's markers, taken out of a command's stderr.
 *
 * The wrapper (ssh_exec.c) reports the command's PID on stderr and its exit
 * status on both stdout and stderr, framed as "\036aas-TOKEN:pid=N\036" and
 * "\036aas-TOKEN:exit=N\036" with a random TOKEN; "\036aas-TOKEN:held\036"
 * before the exit says the command left processes that may hold its output. The filter takes every well-formed frame out of the stream,
 * however the stream is split into pieces, so the user's stderr stays
 * byte-exact; anything else, a frame with another token or a malformed one
 * included, passes through unchanged. Pure: no I/O, no locks, no allocation
 * but the output buffer's.
 */
#ifndef SAAS_TRANSPORT_MARKER_H
#define SAAS_TRANSPORT_MARKER_H

#include <stddef.h>

#include "util/util.h"

/* The frame's first and last byte (ASCII RS). */
#define SAAS_MARKER_SEP '\036'
/* Longest token a filter takes. */
#define SAAS_MARKER_TOKEN_MAX 24
/*
 * Longest frame taken out, separators included; a longer one passes through.
 * The payload ("pid=N", "held", "exit=N") is made of [a-z0-9=].
 */
#define SAAS_MARKER_FRAME_MAX 64

typedef struct {
	char prefix[SAAS_MARKER_TOKEN_MAX + 8]; /* "\036aas-TOKEN:" */
	size_t plen;
	char hold[SAAS_MARKER_FRAME_MAX];       /* the frame read so far, when it may be one */
	size_t hlen;
	long pid;                               /* from "pid=N" (N > 1); 0 until then */
	int held;                               /* "held" came */
	int exit_seen;                          /* "exit=N" (0 <= N <= 255) came */
	int exit_code;
} saas__marker_filter;

/* Start a filter for the frames of `token` ([0-9a-z], 1 to SAAS_MARKER_TOKEN_MAX chars). 0 or SAAS_EINVAL. */
int saas__marker_init(saas__marker_filter *f, const char *token);
/* Filter the next n bytes of the stream, appending what is not a frame to out. */
void saas__marker_feed(saas__marker_filter *f, const char *d, size_t n, saas__buf *out);
/* The stream ended: what is held (the start of a frame that never ended) goes to out. */
void saas__marker_flush(saas__marker_filter *f, saas__buf *out);

#endif
