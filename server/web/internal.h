/*
 * What the pages' files share and no other room may call: the built-in
 * files, the password hashes' turns, forms, sessions and who is looking.
 * The page buffer and shell are html.h's.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_WEB_INTERNAL_H
#define AAS_WEB_INTERNAL_H

#include "config.h"
#include "server.h"
#include "web/web.h"

struct aas_html;

/* ---- built-in files (pages.c) ---- */

/* A file built into the binary (embed_files.cmake): its path in the source tree, its bytes (NUL-terminated). */
struct aas_embedded_file {
	const char *path;
	const char *text;
	size_t len;
};
/* README.md, the docs/ pages and bench/STARTUP.md, by their path in the repository (docs_data.c, generated). */
extern const struct aas_embedded_file aas_embedded_docs[];
extern const size_t aas_embedded_docs_count;
/* server/static/: the style sheet and the viewer's start, by file name (static_data.c, generated). */
extern const struct aas_embedded_file aas_embedded_static[];
extern const size_t aas_embedded_static_count;
/* mcp/npm/: the MCP package's package.json and bin/aas-mcp.js, by their path in it (mcp_package_data.c, generated). */
extern const struct aas_embedded_file aas_embedded_mcp_package[];
extern const size_t aas_embedded_mcp_package_count;

/* ---- accounts for people (people.c) ---- */

/* The default of --max-password-hashes: the machine's CPUs, at most AAS_PASSWORD_HASHES_MAX. */
unsigned int aas_password_hashes_default(void);
/* How long a log-in or sign-up waits for a hash's turn before 503 (as many may wait as may run). */
#define AAS_HASH_WAIT_MS 1000
/*
 * Take a turn to hash (within --max-password-hashes, waiting at most
 * AAS_HASH_WAIT_MS): true, then aas_hash_leave() after; false when the server
 * is busy (aas_reply_hash_busy() says so).
 */
bool aas_hash_enter(void);
void aas_hash_leave(void);
/* 503 with Retry-After: every password hash's turn is taken. */
void aas_reply_hash_busy(struct aas_req *r, struct aas_reply *out);
bool aas_password_verify(const char *hash, const char *password);

/* A parsed form: fields point into its own copy of the body. */
#define AAS_FORM_FIELDS_MAX 16
struct aas_form {
	char *buf;
	size_t len;                      /* of buf, whose fields are NUL-separated once parsed */
	size_t n;
	const char *name[AAS_FORM_FIELDS_MAX];
	const char *value[AAS_FORM_FIELDS_MAX];
};
/*
 * Parse an application/x-www-form-urlencoded body of len bytes into f:
 * SAAS_OK, SAAS_EINVAL (a NUL, a field given twice, more than
 * AAS_FORM_FIELDS_MAX, a bad %-escape or "%00") with *why the page's words for
 * it, or SAAS_ENOMEM. f is empty on failure; aas_form_free() it either way.
 */
int aas_form_decode(struct aas_form *f, const char *body, size_t len, const char **why);
/* Parse the request's form body; false after replying 400 (a field twice, too many, a NUL, bad %-escapes). */
bool aas_form_parse(struct aas_req *r, struct aas_reply *out, struct aas_form *f);
/* A field's value, or NULL when absent. */
const char *aas_form_get(const struct aas_form *f, const char *name);
void aas_form_free(struct aas_form *f);

/* Who is looking at a page: the session's user, its account's client and the session's CSRF token. */
struct aas_viewer {
	saas_user *user;
	saas_client *client;
	char csrf[65];
};
/*
 * The viewer of a page from its session cookie. false when there is none
 * (or it ended): then, if `required`, a 303 to /login has been replied.
 */
bool aas_viewer_get(struct aas_req *r, struct aas_reply *out, struct aas_viewer *v, bool required);
void aas_viewer_free(struct aas_viewer *v);
/* The page shell's description of the viewer (v may be NULL: nobody signed in). */
struct aas_page;
void aas_viewer_page(const struct aas_viewer *v, struct aas_page *page, const char *title, const char *nav);
/*
 * May this state-changing form post be acted on? Its Origin (or
 * Sec-Fetch-Site) must be this server's own, and its "csrf" field `token`.
 * false after replying 403.
 */
bool aas_form_allowed(struct aas_req *r, struct aas_reply *out, const struct aas_form *f, const char *token);
/*
 * May this request act for the session? Its Origin, when sent (always, if
 * `required`: a WebSocket's handshake, which browsers send with an Origin),
 * must be this server's, and its Sec-Fetch-Site, when sent, same-origin.
 * false after replying 403. A session's WebSocket or multipart upload
 * checks this first, then its token with aas_csrf_ok().
 */
bool aas_origin_allowed(struct aas_req *r, struct aas_reply *out, bool required);
/* Is `sent` the session's CSRF token (compared in constant time)? NULLs are not. */
bool aas_csrf_ok(const char *sent, const char *token);
/* 303 See Other to `location` (a path of ours), the end of every form post that worked. */
void aas_reply_redirect(struct aas_reply *out, const char *location);
/* The session token the request's cookie holds, or NULL. */
const char *aas_session_token(struct aas_req *r);
/* The CSRF token of a session: a hash of its token, domain-separated from the hash the store keeps. */
void aas_session_csrf(char out[65], const char *token);
/* Set (token non-NULL, for max_age_s) or clear the session cookie on a reply. */
void aas_session_cookie(struct aas_reply *out, const char *token, unsigned int max_age_s);
/* The "before log-in" token of the sign-up and log-in forms (a cookie of its own): read, or make and set. */
bool aas_prelogin_token(struct aas_req *r, char out[65], bool make);
void aas_prelogin_cookie(struct aas_reply *out, const char *token);
/* Take one log-in attempt for this address and e-mail; false after a 429 page. */
bool aas_login_admit(struct aas_req *r, struct aas_reply *out, const char *email);
const struct aas_config *aas_people_config(void);
/* Does this server take sign-ups (open, or with an invite code)? The pages offer "Sign up" only then. */
bool aas_signup_offered(void);
saas_engine *aas_people_engine(void);

/* ---- the dashboard's page shell and forms, for its files beside dashboard.c (keys.c, operator.c) ---- */

struct aas_html;
/* The shell with the dashboard's tabs, `tab` current ("sandboxes", "keys", "usage", "operator"). */
void aas_dash_begin(struct aas_html *h, const struct aas_viewer *v, const char *title, const char *tab);
/*
 * Reply with the page, or with the failure rc < 0 that cut it short as an
 * error page (aas_reply_page_saas: when to come back, if it says; the page
 * is dropped).
 */
void aas_dash_end(struct aas_req *r, struct aas_reply *out, struct aas_html *h, int rc, unsigned int status);
/* <form method="post" class="cls" action="action"> with the session's CSRF token; the caller ends it. */
void aas_dash_form(struct aas_html *h, const struct aas_viewer *v, const char *cls, const char *action);
/* Parse a posted form and check it comes from a page of ours (aas_form_allowed); false after replying. */
bool aas_dash_form_ok(struct aas_req *r, struct aas_reply *out, const struct aas_viewer *v, struct aas_form *f);
/* "$4.987500" into buf: micro-dollars as billed. */
const char *aas_dash_usd(char buf[40], int64_t micro);
/* "2025-06-01 14:05 UTC" into buf, or "never" for 0. */
const char *aas_dash_minute(char buf[40], int64_t ms);
/*
 * A link (labelled `label`, named `aria`) to the page that asks `question`
 * before a form posts to `post` (GET of that path, with ?back=BACK when back
 * is not NULL); with JavaScript, a dialog asks instead, its button `verb`.
 */
void aas_dash_confirm_link(struct aas_html *h, const struct aas_viewer *v, const char *post, const char *back,
                           const char *label, const char *aria, const char *question, const char *verb);
/* A status as a badge (span.badge.badge-STATUS). */
void aas_dash_badge(struct aas_html *h, const char *status);

/* ---- more of the dashboard's pieces, for the sandbox's page (dashboard_sandbox.c, dashboard_files.c) ---- */

/* An RFC 3339 time or "never"; "3 h 20 min". Into buf, which they return. */
const char *aas_dash_when(char buf[40], int64_t ms);
const char *aas_dash_span(char buf[40], int64_t ms);
/* A sandbox's Extend and Destroy (`back`: they come back to its page). */
void aas_dash_sandbox_actions(struct aas_html *h, const struct aas_viewer *v, const saas_sandbox *sb, bool back);
/*
 * The viewer (signed in, else a 303 to /login) and the route's sandbox, the
 * viewer's own: into *sb, or freed when sb is NULL. false after replying
 * (404 for another account's sandbox, as for an unknown one); *v is then freed.
 */
bool aas_dash_viewer_sandbox(struct aas_req *r, struct aas_reply *out, struct aas_viewer *v, saas_sandbox **sb);

/* ---- the sandbox's files on its page (dashboard_files.c) ---- */

/* The Files section of the sandbox's page: the directory `dir` (NULL: /workspace) and its forms. */
void aas_dash_files_section(struct aas_html *h, const struct aas_viewer *v, const saas_sandbox *sb, const char *dir);

/* ---- the files of --docs-viewer (pages.c) ---- */

/* Is xterm.js there for the dashboard's terminal (served at /static/viewer/xterm.js)? */
bool aas_pages_terminal_installed(void);

/* ---- the MCP package of /mcp.tgz (mcp_package.c) ---- */

/*
 * Check --public-url and that the package can be made; 0, or -1 after
 * logging. aas_mcp_package_free() drops the archives made since.
 */
int aas_mcp_package_init(const struct aas_config *cfg);
void aas_mcp_package_free(void);
/*
 * "scheme://host" into out (cap bytes), host lowercased, if host is a DNS
 * name, an IPv4 address or a bracketed IPv6 address, with an optional :PORT
 * (1 to 65535), and nothing else; false otherwise (NULL, empty, too long).
 */
bool aas_mcp_package_origin(char *out, size_t cap, const char *scheme, const char *host);
/*
 * The origin clients reach this server at, as the package names it: --public-url,
 * else the request's Host checked by aas_mcp_package_origin(); false when the
 * Host is not one (the pages then show a placeholder). The home page shows it.
 */
bool aas_public_origin(char *out, size_t cap, struct aas_req *r);
/* An origin's longest length and its NUL ("https://", a DNS name's 253 bytes, ":65535"). */
#define AAS_ORIGIN_MAX 272

#endif
