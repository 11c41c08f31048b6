/*
 * Internal: the engine's reader of a code server's answers (code_wire.c):
 * an HTTP/1.1 response (length-delimited, chunked, or to the close) and, for
 * a run, its NDJSON body of E2B's code-interpreter events, line by line into
 * a saas_code_execution. Pure: no I/O, so the unit tests and fuzz_code feed
 * it any bytes, whole or cut anywhere. Everything it reads is the guest's,
 * so everything is bounded here (docs/code.md, "Limits").
 */
#ifndef SAAS_CORE_CODE_WIRE_H
#define SAAS_CORE_CODE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "saas.h"
#include "util/util.h"

/* The longest header line, and all of a response's head. */
#define SAAS__CODE_HEAD_LINE_MAX 8192
#define SAAS__CODE_HEAD_MAX (64u << 10)
/* The most of a non-200 answer's body kept (as the error's text). */
#define SAAS__CODE_ERROR_BODY_MAX 4096
/* The largest whole body (a context, a list of them). */
#define SAAS__CODE_BODY_MAX (1u << 20)

/* One line of the body (without its '\n'): 0 to go on, non-zero to stop with that value. */
typedef int (*saas__code_line_fn)(void *ud, const char *line, size_t len);

struct saas__code_reader {
	/* Set before the first feed. */
	bool lines;                 /* a 200's body is NDJSON (on_line), else it is kept whole */
	size_t line_max;            /* longer lines are dropped (on_line is not told; `dropped` counts them) */
	saas__code_line_fn on_line;
	void *ud;
	/* What was read. */
	int status;                 /* the HTTP status, once the head is read */
	bool done;                  /* the body ended as its framing says */
	unsigned long dropped;      /* lines over line_max */
	saas__buf body;             /* a kept body: a non-200's (first SAAS__CODE_ERROR_BODY_MAX bytes) or a whole one */
	char why[256];              /* what was wrong, after SAAS_EPROTOCOL */
	/* Where it is. */
	int state;
	bool chunked, has_length, head_seen_status;
	uint64_t remaining;         /* of the Content-Length body, or of the current chunk */
	size_t head_total;
	saas__buf head;             /* the head's current line */
	saas__buf line;             /* the body's current line */
	bool skipping;              /* dropping a line over line_max up to its '\n' */
};

/* Zero r and set its fields above "What was read" before feeding. */
void saas__code_reader_init(struct saas__code_reader *r, bool lines, size_t line_max, saas__code_line_fn on_line,
                            void *ud);
void saas__code_reader_free(struct saas__code_reader *r);
/*
 * Feed bytes: 0 (more wanted, or r->done: the rest is ignored), a callback's
 * non-zero, SAAS_EPROTOCOL (r->why: not HTTP, a bad framing, a head too
 * large), SAAS_ETOOBIG (a whole body over SAAS__CODE_BODY_MAX) or SAAS_ENOMEM.
 * No error is recorded: the caller says it in its words.
 */
int saas__code_reader_feed(struct saas__code_reader *r, const void *data, size_t len);
/* The connection closed: 0 if the body was done (or runs to the close), else SAAS_EPROTOCOL. */
int saas__code_reader_eof(struct saas__code_reader *r);

/* A run's events read into an execution, and told to a callback, within the run's bounds. */
struct saas__code_run {
	saas_code_execution *x;     /* filled as lines come (made by saas__code_run_init) */
	size_t max_output, max_result;
	size_t results_bytes, results_cap;
	saas_code_event_fn on_event;
	void *userdata;
	bool ended;                 /* end_of_execution came */
	bool cancelled;             /* the callback asked to stop */
	unsigned long told;         /* events told so far: the caller's clock of silence (SAAS_CODE_EVENT_TICK) */
	char why[256];              /* what was wrong, after SAAS_EPROTOCOL */
};

/* 0, or SAAS_ENOMEM (recorded). */
int saas__code_run_init(struct saas__code_run *s, size_t max_output, size_t max_result, saas_code_event_fn on_event,
                        void *userdata);
/*
 * One NDJSON line (a saas__code_line_fn): 0; 1 when the callback cancelled;
 * SAAS_EPROTOCOL (s->why) for a line that is not an event's JSON object or
 * a known event without its fields; SAAS_ENOMEM (recorded). Unknown types
 * (keepalive, ...) are ignored; lines after end_of_execution too. What the
 * code server says it cut (a stderr event's "cut", a result's "truncated")
 * sets the execution's flags as the engine's own bounds do.
 */
int saas__code_run_line(void *s, const char *line, size_t len);
/* Tell SAAS_CODE_EVENT_TICK (the caller keeps the time): 0, or 1 when the callback cancelled. */
int saas__code_run_tick(struct saas__code_run *s);

/* A context's JSON ({"id","language","cwd"}) into *out: 0, SAAS_EPROTOCOL (why) or SAAS_ENOMEM. */
int saas__code_context_parse(saas_code_context **out, const char *text, size_t len, char *why, size_t whysize);
/* A list of them (at most `max`; more is SAAS_EPROTOCOL). */
int saas__code_context_list_parse(saas_code_context_list **out, const char *text, size_t len, size_t max, char *why,
                                  size_t whysize);

/* The longest prefix of s[0..len) that ends on a UTF-8 character boundary and is at most max bytes. */
size_t saas__utf8_cut(const char *s, size_t len, size_t max);

#endif
