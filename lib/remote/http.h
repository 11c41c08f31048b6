/*
 * Internal: the remote provider's HTTP layer (libcurl) and JSON helpers.
 */
#ifndef SAAS_REMOTE_HTTP_H
#define SAAS_REMOTE_HTTP_H

#include <pthread.h>
#include <stdbool.h>

#include <curl/curl.h>
#include <jansson.h>

#include "client/provider.h"

#define SAAS_REMOTE_POOL 8

/*
 * The largest answer read whole (a JSON body, an error's body): an execution
 * with both streams at SAAS_EXEC_OUTPUT_MAX fits even when every byte is
 * escaped as \u00XX (control characters: 6 bytes a byte; CJK text, 2), which
 * the 64 MiB this was did not; more is not the API talking, and the read stops
 * there with SAAS_EPROTOCOL (docs/api.md). Streamed bodies have their own
 * bounds: a file its max, an event stream its events' (SAAS_SSE_EVENT_MAX)
 * and its time.
 */
#define SAAS_REMOTE_ANSWER_MAX ((size_t)256 << 20)

struct saas_remote {
	char *base;            /* "http://host:port", no trailing slash */
	char *auth_header;     /* "Authorization: Bearer ..." */
	char *user_agent;
	char *ca_file;
	long connect_timeout_ms;
	long timeout_ms;
	int verify_tls;
	unsigned int retries;

	/*
	 * Idle multi handles, one taken per request: each keeps its connection
	 * cache, so connections stay alive, while every request gets an easy
	 * handle of its own (a reused one keeps state from the answer before:
	 * libcurl before 8.1.0 unfolds a header into the previous transfer's
	 * freed one, curl/curl#11101).
	 */
	pthread_mutex_t mu;
	CURLM *pool[SAAS_REMOTE_POOL];
	size_t npool;
};

/* One request. Exactly one of body / reader may be set; writer streams a 2xx body instead of buffering it. */
struct saas_http_req {
	const char *method;
	const char *path;        /* "/v1/...", already escaped */
	json_t *body;            /* sent as application/json, or NULL */
	saas_read_fn reader;     /* streamed PUT body */
	void *reader_ud;
	int64_t upload_size;     /* -1: unknown (chunked) */
	saas_write_fn writer;    /* streamed 200 body */
	void *writer_ud;
	int (*idle)(void *writer_ud); /* while the writer streams: about once a second, and
	                               * on each read; non-zero stops the read as the writer's would */
	bool writer_says;        /* the writer records why it stopped (saas__error): that error stands */
	int64_t max;             /* largest body the writer accepts */
	int64_t *size;           /* [out] the body's length, before the first byte */
	bool idempotent;
	bool transfer;           /* bounded by stalls, not by total time */
	long timeout_ms;         /* 0: the client's */
	const char *accept;      /* the Accept header's value; NULL: application/json */
};

/*
 * Perform a request. On a 2xx answer returns SAAS_OK and, unless a writer took
 * the body, *json is the parsed object (the caller's); otherwise returns the
 * mapped error with saas_error_last() set.
 */
int saas__http(struct saas_remote *r, const struct saas_http_req *req, json_t **json);

/*
 * The error a non-2xx answer says (its JSON error body, else its status), set
 * and returned; with its Retry-After in seconds (0: none), which fills
 * saas_error.retry_after_ms when the body does not say it.
 */
int saas__http_error_from_body(long status, const saas__buf *body);
int saas__http_error_from(long status, const saas__buf *body, int64_t retry_after_s);

/* The terminal (pty.c). */
int saas__remote_pty_open(saas_client *c, const char *id, const struct saas__pty_req *req, saas_pty **out);

/* The remote operations on executions as they run (remote_exec.c). */
int saas__remote_exec_stream(saas_client *c, const char *id, const char *command, const saas_exec_options *o,
                             const saas_exec_callbacks *cb, unsigned int flags, saas_execution **out);
int saas__remote_execution_follow(saas_client *c, const char *id, saas_exec_cursor *cur,
                                  const saas_exec_callbacks *cb, unsigned int wait_ms, unsigned int flags,
                                  saas_execution **out);
int saas__remote_execution_stdin(saas_client *c, const char *id, const void *data, size_t len, unsigned int flags);
int saas__remote_execution_signal(saas_client *c, const char *id, int signum, unsigned int flags);
int saas__remote_execution_cancel(saas_client *c, const char *id);
int saas__remote_execution_list_running(saas_client *c, const char *sandbox_id, saas_execution_list **out);
int saas__remote_execution_list(saas_client *c, const char *sandbox_id, const char *cursor, unsigned int limit,
                                saas_execution_list **out);
/* Code contexts (code.c). */
int saas__remote_code_context_create(saas_client *c, const char *id, const saas_code_context_options *o,
                                     saas_code_context **out);
int saas__remote_code_context_list(saas_client *c, const char *id, saas_code_context_list **out);
int saas__remote_code_context_restart(saas_client *c, const char *id, const char *context_id);
int saas__remote_code_context_delete(saas_client *c, const char *id, const char *context_id);
int saas__remote_code_run(saas_client *c, const char *id, const char *code, const saas_code_run_options *o,
                          saas_code_execution **out);
/* Shared with remote.c: the JSON body of an exec, "/v1/COLLECTION/ID" + suffix, a decoder's verdict. */
int saas__remote_exec_body(const char *command, const saas_exec_options *o, unsigned int flags, json_t **out);
char *saas__remote_path(const char *collection, const char *id, const char *suffix);
int saas__remote_decoded(int rc, const char *bad);
#define SAAS_REMOTE_EXEC_MARGIN_MS 60000L

/* Percent-encode everything but RFC 3986 unreserved characters; NULL on OOM. */
char *saas__url_escape(const char *s);

/* The status code whose saas_error_name() is `name`, or 0. */
int saas__error_from_name(const char *name);

#endif
