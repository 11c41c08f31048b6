/*
 * What the E2B face's files share: the pure spellings (names.c: keys, ids,
 * tokens, templates, escapes; the unit tests and fuzzers reach them here),
 * its state and its replies. Not for the rest of the server
 * (e2b.h is).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_E2B_INTERNAL_H
#define AAS_E2B_INTERNAL_H

#include <jansson.h>

#include "config.h"
#include "e2b/e2b.h"
#include "server.h"

/* ---- spellings (names.c): pure ---- */

/* E2B's id of a libsaas sandbox: its id without "sbx-" (borrowed from id), or NULL when it has no such prefix. */
const char *aas_e2b_id_from_saas(const char *id);
/* The libsaas id of an E2B id ("sbx-" put back): false when it cannot be one (not [a-z0-9], empty, too long). */
bool aas_e2b_id_to_saas(char out[SAAS_ID_MAX + 1], const char *e2b_id);

/* The server secret tokens are derived from. */
#define AAS_E2B_SECRET_LEN 32
/* Labels that keep the tokens of one sandbox apart. */
#define AAS_E2B_TOKEN_ENVD "e2b-envd-token"
#define AAS_E2B_TOKEN_TRAFFIC "e2b-traffic-token"
/* A sandbox's token: hex(HMAC-SHA256(secret, label "\0" sandbox_id)), 64 digits and a NUL. */
void aas_e2b_token(char out[65], const unsigned char secret[AAS_E2B_SECRET_LEN], const char *label,
                   const char *sandbox_id);
/* Is given the token expected (compared in constant time; a length that differs is false)? */
bool aas_e2b_token_equal(const char *given, const char *expected);

/* A template: an E2B name and the libsaas size and image (NULL: the server's default) it makes. */
struct aas_e2b_template {
	char *name;
	char *size;
	char *image;
};
struct aas_e2b_templates {
	size_t count;
	struct aas_e2b_template *items;
};
#define AAS_E2B_TEMPLATES_DEFAULT "base=small,code-interpreter-v1=small"
#define AAS_E2B_TEMPLATES_MAX 64
#define AAS_E2B_TEMPLATE_NAME_MAX 64
/*
 * Parse "NAME=SIZE[:IMAGE],..." (names [a-z0-9._-], each once, at most
 * AAS_E2B_TEMPLATES_MAX). 0, or -1 with why filled; free with
 * aas_e2b_templates_free() either way.
 */
int aas_e2b_templates_parse(struct aas_e2b_templates *out, const char *spec, char *why, size_t whysize);
const struct aas_e2b_template *aas_e2b_template_find(const struct aas_e2b_templates *t, const char *name);
void aas_e2b_templates_free(struct aas_e2b_templates *t);

/*
 * Decode %XX escapes and '+' (a space) of s[0..len) into out, as Go's
 * QueryUnescape (E2B's server) does: false for a bad escape or a NUL.
 * out holds at least len + 1 bytes; *out_len gets the length.
 */
bool aas_e2b_unescape(char *out, size_t *out_len, const char *s, size_t len);

/* The envd port: on it a sandbox's host (PORT-ID.DOMAIN) is the data plane; any other is the guest's. */
#define AAS_E2B_ENVD_PORT 49983
/*
 * Domain mode's host of a sandbox port, PORT-ID under domain (server.h's
 * aas_host_label reads the host): the port (1..65535, no leading zero) and
 * the E2B id ([a-z0-9], one a libsaas id can be). false for any other host.
 */
bool aas_e2b_host_parse(const char *host, const char *domain, unsigned int *port, char e2b_id[SAAS_ID_MAX + 1]);

/* A signed file URL's signature: "v1_" and 43 base64 digits, and a NUL. */
#define AAS_E2B_SIGNATURE_SIZE 47
/*
 * E2B's signature of a file URL (docs/e2b-wire.md 1.4): "v1_" and the
 * unpadded base64 of SHA-256(path ":" operation ":" user ":" token), with
 * ":" expiration appended when there is one (decimal unix seconds, as sent).
 * operation is "read" or "write"; user "" when the URL names none.
 */
void aas_e2b_signature(char out[AAS_E2B_SIGNATURE_SIZE], const char *path, const char *operation, const char *user,
                       const char *token, const char *expiration);

/* The envd version the face says its sandboxes run: the SDKs switch features on it (docs/e2b.md). */
#define AAS_E2B_ENVD_VERSION "0.6.4"
/* What E2B's clientID (deprecated, but required by the Python SDK's models) always says. */
#define AAS_E2B_CLIENT_ID "libsaas"
/* A create without a timeout lives E2B's default. */
#define AAS_E2B_TIMEOUT_DEFAULT 300
/* The largest control-plane JSON body: a create with its metadata and envs, and room. */
#define AAS_E2B_BODY_MAX ((size_t)1 << 20)

/*
 * A create's metadata and envVars are the engine's (saas_create_options):
 * their bounds are SAAS_METADATA_* and SAAS_ENV*_MAX. The E2B template a
 * sandbox was made from is kept in its metadata under this key, which the
 * face shows as templateID and hides from metadata; a create whose own
 * metadata uses the prefix is refused. So a tenant has one pair fewer.
 */
#define AAS_E2B_META_PREFIX "e2b."
#define AAS_E2B_META_TEMPLATE AAS_E2B_META_PREFIX "template"
#define AAS_E2B_METADATA_MAX (SAAS_METADATA_MAX - 1)
/*
 * A sandbox that pauses on timeout and resumes on use (autoResume): the data
 * plane resumes it for a request, and then keeps it at least this long, so
 * that a stream of requests resumes it once rather than once a timeout.
 */
#define AAS_E2B_AUTORESUME_KEEP_S 60

struct aas_e2b {
	saas_engine *engine;
	const struct aas_config *cfg;
	struct aas_e2b_templates templates;
	unsigned char secret[AAS_E2B_SECRET_LEN];
};
extern struct aas_e2b aas_e2b_state;

/*
 * A sandbox's envdAccessToken: "ACCOUNT.HEX", HEX the HMAC of the sandbox's
 * id and its account under the server secret. The data plane carries no API
 * key: the token names the account to act for (not a secret), and the HMAC
 * binds it to the sandbox. At most this long, with its NUL.
 */
#define AAS_E2B_ENVD_TOKEN_SIZE (SAAS_ID_MAX + 1 + 64 + 1)
void aas_e2b_envd_token(char out[AAS_E2B_ENVD_TOKEN_SIZE], const char *sandbox_id, const char *account_id);
/* Is token the envd token of sandbox_id (compared in constant time)? Then its account goes into account. */
bool aas_e2b_envd_token_check(const char *token, const char *sandbox_id, char account[SAAS_ID_MAX + 1]);

/*
 * A sandbox's trafficAccessToken, the same shape under its own label: what
 * reaches a guest's port other than envd's in domain mode (the header
 * e2b-traffic-access-token). One sandbox's tokens open nothing of another's,
 * and neither token is the other.
 */
void aas_e2b_traffic_token(char out[AAS_E2B_ENVD_TOKEN_SIZE], const char *sandbox_id, const char *account_id);
bool aas_e2b_traffic_token_check(const char *token, const char *sandbox_id, char account[SAAS_ID_MAX + 1]);

/* An error as E2B sends one: HTTP status and {"code":status,"message":...}. */
void aas_e2b_error(struct aas_reply *out, unsigned int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/*
 * The same for a libsaas status and this thread's last error (its message,
 * or the tenant's text of an internal one), with Retry-After when it says
 * when to come back (aas_e2b_retry_after_s): a limit's 429, a busy 503.
 */
void aas_e2b_error_saas(struct aas_reply *out, int rc, const char *where);
/*
 * When a retry of the failure rc (this thread's last error) can succeed, in
 * whole seconds rounded up: SAAS_ELIMIT at least 1, SAAS_EBUSY when it
 * says (a create, fork or resume refused for room), else 0.
 */
long long aas_e2b_retry_after_s(int rc);
/* Retry-After: secs on out's response, when secs > 0. */
void aas_e2b_retry_after(struct aas_reply *out, long long secs);
/* A JSON reply (steals body); 204 for NULL. */
void aas_e2b_json(struct aas_reply *out, unsigned int status, json_t *body);
/* The request's JSON body as an object (empty: {}): false after a 400 saying why. */
bool aas_e2b_body(struct aas_req *r, struct aas_reply *out, json_t **obj);

/*
 * The control plane (control.c): path is what follows AAS_E2B_API_PREFIX.
 * aas_e2b_authenticate (X-API-KEY) runs first, before a byte of the body is
 * held: false after a 401.
 */
bool aas_e2b_authenticate(struct aas_req *r, struct aas_reply *out);
void aas_e2b_control(struct aas_req *r, struct aas_reply *out, const char *path);
/*
 * The data plane (data.c): path is what follows AAS_E2B_SANDBOX_PREFIX.
 * aas_e2b_data_start runs first, with the headers, before a byte of the
 * body is held: it finds the sandbox and checks the access token (r->stream
 * keeps what it found) and sets the body's bound; -1 after a reply. host_id
 * is the sandbox domain mode's Host names (urls.c), or NULL: the header's.
 */
int aas_e2b_data_start(struct aas_req *r, struct aas_reply *out, const char *path, const char *host_id);
void aas_e2b_data(struct aas_req *r, struct aas_reply *out, const char *path);

/* A data-plane request's sandbox, and the client acting for its account (owned: freed by data.c). */
struct aas_e2b_target {
	char e2b_id[SAAS_ID_MAX + 1];
	char id[SAAS_ID_MAX + 1];
	char account[SAAS_ID_MAX + 1];
	saas_client *client;
	bool rpc;
	bool streaming;
	char token[AAS_E2B_ENVD_TOKEN_SIZE]; /* a signed URL's: the envd token its signature proved (urls.c) */
	bool from_host;                      /* e2b_id is the Host's (domain mode) */
	/* Resume the sandbox when it is paused and asked for it (autoResume): any call but /health. */
	bool may_resume;
	struct aas_e2b_upload *upload;       /* a POST /files under way (files.c), or NULL */
	bool code;                           /* for the code interpreter's port (code.c) */
};
/*
 * Find the request's sandbox (t->e2b_id when set: the Host's or a signed
 * URL's; else E2b-Sandbox-Id) and open its account's client by the access
 * token (t->token when set, else X-Access-Token): false after a reply (401 for a token that is not the
 * sandbox's, 502 for a sandbox that is not there or not running).
 */
bool aas_e2b_target_open(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t);
/* Is a user name E2B sends (Basic auth, ?username=) one we run as (none, "user", "sandbox")? Else why. */
bool aas_e2b_user_ok(const char *name, char *why, size_t whysize);
/* A unary Connect answer: 200 and the message (stolen; NULL: {}), or an error with its status. */
void aas_e2b_reply_unary(struct aas_reply *out, json_t *msg);
void aas_e2b_reply_unary_error(struct aas_reply *out, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* A server stream that fails before its first message: 200 and a lone end-stream frame with the error. */
void aas_e2b_reply_stream_error(struct aas_reply *out, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Commands (process.c): process.Process's calls (method after "process.Process/"), and the pid table's end. */
void aas_e2b_process(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t, const char *method,
                     json_t *msg);
void aas_e2b_process_shutdown(void);

/*
 * Terminals (pty.c): a PTY process, which outlives the stream that started
 * it. Reference counted: open gives one; the pid table and each stream hold
 * their own.
 */
struct aas_e2b_pty;
/* Start the sandbox user's login shell; SAAS_OK, or a libsaas status with why (SAAS_ELIMIT past the bounds). */
int aas_e2b_pty_open(struct aas_e2b_pty **out, saas_client *client, const char *sandbox, const char *account,
                     const saas_pty_options *o, int64_t deadline_ms, char *why, size_t whysize);
void aas_e2b_pty_ref(struct aas_e2b_pty *p);
void aas_e2b_pty_unref(struct aas_e2b_pty *p);
/*
 * Output from *offset (advanced), waiting up to wait_ms for some: 0 with
 * *got bytes (maybe none); once all is read and the shell ended, 1 with its
 * *status, or 2 when it was hung up on (a kill, the deadline).
 */
int aas_e2b_pty_follow(struct aas_e2b_pty *p, uint64_t *offset, unsigned char *buf, size_t cap, size_t *got,
                       int *status, unsigned int wait_ms);
/* The offset output has reached: a new subscriber's start. */
uint64_t aas_e2b_pty_offset(struct aas_e2b_pty *p);
bool aas_e2b_pty_running(struct aas_e2b_pty *p);
/* Ended at least keep_ms before now? */
bool aas_e2b_pty_gone(struct aas_e2b_pty *p, int64_t now, int64_t keep_ms);
/* Keystrokes, a new size, a hang-up: SAAS_ESTATE once the shell ended. */
int aas_e2b_pty_input(struct aas_e2b_pty *p, const void *data, size_t len);
int aas_e2b_pty_resize(struct aas_e2b_pty *p, unsigned int cols, unsigned int rows);
int aas_e2b_pty_kill(struct aas_e2b_pty *p);
/* Hang up on every PTY and wait for their readers. */
void aas_e2b_pty_shutdown(void);

/*
 * Server streams (stream.c): Start, Connect and WatchDir answers, each
 * holding one of its account's slots (taken first: false after a
 * resource_exhausted reply) and following an execution or a terminal.
 */
bool aas_e2b_slot_take(const char *account, struct aas_reply *out);
void aas_e2b_slot_release(const char *account);
/* What a stream follows: a command (exe), a terminal (pty), or a directory watcher (exe, watch). */
struct aas_e2b_follow {
	const char *exe;
	struct aas_e2b_pty *pty;  /* a reference the stream takes */
	uint32_t pid;             /* the start event's (not for a watch) */
	saas_exec_cursor cur;     /* from where; a terminal's offset is cur.stdout_offset */
	bool watch;               /* exe is a watcher (watch.c), released with the stream */
};
/*
 * Answer with the stream: the start event, the output as events, the end
 * and the end-stream frame; keepalives, the deadline (Connect-Timeout-Ms)
 * and a client that leaves. Takes client, the slot and what f holds.
 */
void aas_e2b_reply_stream(struct aas_req *r, struct aas_reply *out, saas_client *client, const char *account,
                          const struct aas_e2b_follow *f);
/* A header's decimal value, at most max; def when absent or not digits. */
uint64_t aas_e2b_header_uint(struct aas_req *r, const char *name, uint64_t max, uint64_t def);

/*
 * Directory watches (watch.c): a watcher program run as a command in the
 * guest, its output parsed here as hostile. The parser is pure (fuzz_e2b):
 * lines "S" (watching), "E WORD" (failed: notfound, notdir, ...) and
 * "T HEX" (an event: T one of C W R M A, HEX the name relative to the
 * watched directory).
 */
/* The longest line: a type, a space and the hex of a 4096-byte path. */
#define AAS_E2B_WATCH_LINE_MAX (2 + 2 * 4096)
/* Events one watch delivers at most (a stream, or a polling watcher over its life). */
#define AAS_E2B_WATCH_EVENTS_MAX 100000
enum { AAS_E2B_WATCH_STARTED = 1, AAS_E2B_WATCH_FAILED, AAS_E2B_WATCH_EVENT };
struct aas_e2b_watch_parser {
	char line[AAS_E2B_WATCH_LINE_MAX + 1];
	size_t len;
};
/*
 * A line: kind; for an event type is E2B's ("EVENT_TYPE_CREATE", ...) and
 * name the UTF-8 name; for a failure name is the word. Non-zero stops.
 */
typedef int (*aas_e2b_watch_cb)(void *ud, int kind, const char *type, const char *name);
/*
 * Feed output: 0; the callback's non-zero; or -1 with why for output that
 * is not a watcher's (a line too long, a bad type or hex). Events whose name
 * is not UTF-8 or holds a NUL are skipped (they cannot be E2B's strings).
 */
int aas_e2b_watch_feed(struct aas_e2b_watch_parser *p, const void *data, size_t len, aas_e2b_watch_cb cb, void *ud,
                       char *why, size_t whysize);
/* filesystem.Filesystem's WatchDir, CreateWatcher, GetWatcherEvents and RemoveWatcher. */
void aas_e2b_watch(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t, const char *method,
                   json_t *msg);
/* A watch stream's end: its watcher is killed and its count given back. */
void aas_e2b_watch_release(saas_client *client, const char *exe);
/* Is exe a watcher's (not a command of the tenant's, so not for process.Process/List)? */
bool aas_e2b_watch_has(const char *exe);
/* Kill every polling watcher left (at the server's end). */
void aas_e2b_watch_shutdown(void);

/*
 * The code interpreter's port, 49999 (code.c): is the request for it
 * (E2b-Sandbox-Port: 49999, or domain mode's 49999-ID host)? Its token: an
 * X-Access-Token (left to aas_e2b_target_open), or a valid
 * E2B-Traffic-Access-Token, which puts the sandbox's envd token in t->token;
 * false after a 401. Then its calls: /execute, /contexts..., /health.
 */
bool aas_e2b_code_wanted(struct aas_req *r);
bool aas_e2b_code_token(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t);
void aas_e2b_code(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t, const char *path);

/* Files (files.c): GET and POST /files, and filesystem.Filesystem's unary calls. */
void aas_e2b_files(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t);
/*
 * A POST /files, streamed: _start with the headers (the query, the
 * encoding; -1 after a reply) sets t->upload, _data takes each piece of the
 * body (nonzero: the upload failed and the rest is dropped; aas_e2b_files
 * answers why), _free ends it (a file still being written is abandoned:
 * its partial copy is removed and its path left as it was). NULL-safe.
 */
int aas_e2b_files_start(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t);
int aas_e2b_files_data(struct aas_e2b_target *t, const char *data, size_t len);
void aas_e2b_upload_free(struct aas_e2b_upload *u);
void aas_e2b_filesystem(struct aas_reply *out, struct aas_e2b_target *t, const char *method, json_t *msg);


/*
 * Signed file URLs and domain mode (urls.c). aas_e2b_signed_find: the
 * sandbox a GET or POST /files without X-Access-Token is for, by its
 * signature (t->e2b_id when the Host or E2b-Sandbox-Id named one, else any
 * running sandbox's), into t->e2b_id and t->token; false after a 401 (or a
 * 400, 503) in E2B's shape.
 */
bool aas_e2b_signed_find(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t);
/* The most accounts and sandboxes, together, a signed URL that names no sandbox is looked for in. */
#define AAS_E2B_SIGNED_SCAN_MAX 10000

/*
 * Metrics (metrics.c): GET /sandboxes/{id}/metrics, GET /sandboxes/metrics
 * (control plane, the caller's key), envd's GET /metrics (data plane).
 */
void aas_e2b_h_metrics(struct aas_req *r, struct aas_reply *out, const char *e2b_id);
void aas_e2b_h_metrics_many(struct aas_req *r, struct aas_reply *out);
void aas_e2b_envd_metrics(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t);
/* Unix seconds as the SDK sends them: 1 to AAS_E2B_SECONDS_DIGITS digits, nothing else. */
#define AAS_E2B_SECONDS_DIGITS 12
bool aas_e2b_seconds_parse(const char *s, int64_t *out);
/* The length of the comma-separated item at *p, *p moved past it and its comma. */
size_t aas_e2b_list_next(const char **p);

#endif
