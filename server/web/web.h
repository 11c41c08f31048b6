/*
 * The service's pages for people (web/): what the rest of the server may call
 * of them. HTML, never the REST API: a session cookie, never an API key.
 *
 *   pages.c      /, /docs, /docs/api, /docs/limits, /security, /static/
 *   markdown.c   the repository's Markdown as pages (html.h)
 *   html.c       the page buffer and shell (html.h)
 *   people.c     passwords, sessions, CSRF, forms, the log-in rate (internal.h)
 *   login.c      /signup, /login, /logout
 *   dashboard.c  /dashboard: sandboxes, usage; the dashboard's shell
 *   dashboard_sandbox.c  /dashboard/sandboxes/{id}: a sandbox's page, its terminal and use
 *   dashboard_files.c    its Files section: list, download, upload, delete, make a directory
 *   keys.c       /dashboard/keys: API keys
 *   operator.c   /dashboard/operator: the operator's pages
 *   chart.c      the usage page's spend chart, SVG made on the server (chart.h)
 *   mcp_package.c /mcp.tgz: the npm package of aas-mcp for stdio MCP clients (tgz.c makes it)
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_WEB_H
#define AAS_WEB_H

#include "config.h"
#include "server.h"

/* ---- the service's pages (pages.c) ---- */

/*
 * Render the docs' Markdown once and find the API viewer's directory. 0, or -1
 * after logging. aas_pages_free() at shutdown.
 */
int aas_pages_init(const struct aas_config *cfg);
void aas_pages_free(void);

/* ---- accounts for people (people.c) ---- */

/* The engine and options the pages use; 0, or -1 after logging (libsodium would not start). */
int aas_people_init(saas_engine *engine, const struct aas_config *cfg);
/* The largest form a page posts: an e-mail, a password, a name, a token. */
#define AAS_FORM_BODY_MAX ((size_t)16 << 10)
/* A password: at least this long, and at most the other (Argon2 takes any length; the bound is ours). */
#define AAS_PASSWORD_MIN 10
#define AAS_PASSWORD_MAX 1024

/* Argon2id (libsodium's crypto_pwhash_str, its interactive limits) into out; 0, or -1 (out of memory). */
int aas_password_hash(char out[SAAS_PASSWORD_HASH_MAX + 1], const char *password);
/* An error page (or a form shown again) with the message in a role="alert" paragraph. */
void aas_reply_page_error(struct aas_req *r, struct aas_reply *out, unsigned int status, const char *title,
                          const char *message);
/*
 * The same for a refusal that says when to come back (a 429, a busy 503):
 * the message, then "Try again in N seconds." (minutes past two) in words,
 * and as many seconds in Retry-After; wait_ms rounded up to whole seconds,
 * at least 1.
 */
void aas_reply_page_retry(struct aas_req *r, struct aas_reply *out, unsigned int status, const char *title,
                          const char *message, int64_t wait_ms);
/* Its words: the message, then "Try again in ..." into buf; the whole seconds said (Retry-After's). */
long long aas_retry_words(char *buf, size_t size, const char *message, int64_t wait_ms);
/*
 * A libsaas failure of a page's action (rc < 0) as an error page: its
 * status and the tenant's words (aas_tenant_message), and, when the
 * failure says when to come back (aas_retry_after_ms), that too, in words
 * and in Retry-After, as aas_reply_page_retry.
 */
void aas_reply_page_saas(struct aas_req *r, struct aas_reply *out, int rc, const char *title);

/* ---- the routes' handlers ---- */

void aas_h_page_home(struct aas_req *r, struct aas_reply *out);
void aas_h_page_docs(struct aas_req *r, struct aas_reply *out);
void aas_h_page_doc(struct aas_req *r, struct aas_reply *out);
void aas_h_page_api(struct aas_req *r, struct aas_reply *out);
void aas_h_page_limits(struct aas_req *r, struct aas_reply *out);
void aas_h_page_security(struct aas_req *r, struct aas_reply *out);
void aas_h_static(struct aas_req *r, struct aas_reply *out);
void aas_h_static_viewer(struct aas_req *r, struct aas_reply *out);
void aas_h_mcp_package(struct aas_req *r, struct aas_reply *out);

void aas_h_signup_page(struct aas_req *r, struct aas_reply *out);
void aas_h_signup(struct aas_req *r, struct aas_reply *out);
void aas_h_login_page(struct aas_req *r, struct aas_reply *out);
void aas_h_login(struct aas_req *r, struct aas_reply *out);
void aas_h_logout(struct aas_req *r, struct aas_reply *out);
void aas_h_dashboard(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_keys(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_key_create(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_key_revoke(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_sandbox(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_sandbox_destroy(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_sandbox_extend(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_usage(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_operator(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_op_credit(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_op_disable(struct aas_req *r, struct aas_reply *out);
/* One VM host and its sandboxes, every account's (operator.c). */
void aas_h_dash_op_host(struct aas_req *r, struct aas_reply *out);
/* A sandbox's page: its use, its terminal, its files (dashboard_sandbox.c, dashboard_files.c). */
void aas_h_dash_sandbox_use(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_sandbox_pty(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_execution(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_file_download(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_file_mkdir(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_file_delete(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_file_upload(struct aas_req *r, struct aas_reply *out);
int aas_dash_upload_start(struct aas_req *r, struct aas_reply *out);
int aas_dash_upload_data(struct aas_req *r, const char *data, size_t len);
void aas_h_dash_sandbox_destroy_page(struct aas_req *r, struct aas_reply *out);
void aas_h_dash_key_revoke_page(struct aas_req *r, struct aas_reply *out);

#endif
