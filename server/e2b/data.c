/*
 * The data plane: what E2B's SDKs send to the daemon in a sandbox (envd),
 * under /e2b-sandbox with the sandbox named by the E2b-Sandbox-Id header,
 * or in domain mode at the root of 49983-ID.DOMAIN, the Host naming it; a
 * signed /files URL is found by its signature (urls.c).
 * This file is its front: finding the sandbox and checking the access
 * token before the body is read, the replies in the forms the SDKs read,
 * and the routing of Connect RPC calls to process.c, files.c and watch.c;
 * GET /health is answered here.
 *
 * There is no API key here: the sandbox's envdAccessToken (X-Access-Token)
 * names the account to act for and proves it (gateway.c), and the sandbox
 * must be that account's and running.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sodium.h>

#include "e2b/connect.h"
#include "e2b/internal.h"

/* ---- replies ---- */

/* E2B's proxy's answer for a sandbox it cannot reach: 502, which the SDKs read as "not running". */
static void reply_gone(struct aas_reply *out, const char *e2b_id, const char *why)
{
	aas_reply_json(out, 502, json_pack("{s:s,s:s,s:i}", "sandboxId", e2b_id ? e2b_id : "", "message", why,
	                                   "code", 502));
}

void aas_e2b_reply_unary(struct aas_reply *out, json_t *msg)
{
	aas_reply_json(out, 200, msg ? msg : json_object());
}

void aas_e2b_reply_unary_error(struct aas_reply *out, int code, const char *fmt, ...)
{
	char msg[1024], *body;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	out->status = aas_connect_http_status(code);
	if (!(body = aas_connect_error_body(code, msg))) {
		out->response = NULL;
		return;
	}
	out->response = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
	if (out->response) {
		MHD_add_response_header(out->response, "Content-Type", "application/json");
		aas_reply_common_headers(out->response);
	}
}

/* A server stream that ends before its first message: 200 and a lone end-stream frame with the error. */
void aas_e2b_reply_stream_error(struct aas_reply *out, int code, const char *fmt, ...)
{
	char msg[1024], *payload;
	unsigned char *frame = NULL;
	size_t len = 0;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if ((payload = aas_connect_end_payload(code, msg)))
		frame = aas_connect_frame(AAS_CONNECT_FLAG_END, payload, strlen(payload), &len);
	free(payload);
	out->status = 200;
	out->response = frame ? MHD_create_response_from_buffer(len, frame, MHD_RESPMEM_MUST_FREE) : NULL;
	if (!out->response) {
		free(frame);
		return;
	}
	MHD_add_response_header(out->response, "Content-Type", "application/connect+json");
	aas_reply_common_headers(out->response);
}

/* ---- the request's sandbox ---- */

/* An error in the form the request's kind reads (REST JSON, unary Connect, or a stream's status). */
static void reply_auth(struct aas_reply *out, const struct aas_e2b_target *t, const char *msg)
{
	if (t->rpc)
		aas_e2b_reply_unary_error(out, AAS_CONNECT_UNAUTHENTICATED, "%s", msg);
	else
		aas_e2b_error(out, 401, "%s", msg);
}

/*
 * A paused sandbox that asked to be resumed on use (autoResume), resumed for
 * this request, which waits for it. The engine resumes one at a time (a
 * second request meanwhile finds it resuming, and is told to retry), and
 * the sandbox then keeps at least AAS_E2B_AUTORESUME_KEEP_S: a stream of
 * requests resumes it once, not once a timeout. false after a reply.
 */
static bool auto_resume(struct aas_reply *out, struct aas_e2b_target *t, const saas_sandbox *sb)
{
	saas_sandbox *resumed = NULL;
	int rc;

	if ((rc = saas_sandbox_resume(&resumed, t->client, t->id, 0)) < 0 && rc == SAAS_EBUSY) {
		/*
		 * No room to resume it now (it stays paused): not "not running",
		 * which the SDKs read as a sandbox timed out, but the data plane's
		 * one error that says to retry later, 429 / resource_exhausted (the
		 * SDKs' RateLimitError), with when in Retry-After and in words.
		 */
		long long secs = aas_e2b_retry_after_s(rc);
		char when[48] = "";

		if (secs > 0)
			snprintf(when, sizeof(when), "; try again in %lld s", secs);
		/* A stream's in its end-stream frame: connect-es reads a stream's HTTP 429 as unavailable. */
		if (t->streaming)
			aas_e2b_reply_stream_error(out, AAS_CONNECT_RESOURCE_EXHAUSTED, "The sandbox is paused: %s%s",
			                           aas_tenant_message(rc, "e2b: resuming a sandbox on use"), when);
		else if (t->rpc)
			aas_e2b_reply_unary_error(out, AAS_CONNECT_RESOURCE_EXHAUSTED, "The sandbox is paused: %s%s",
			                          aas_tenant_message(rc, "e2b: resuming a sandbox on use"), when);
		else
			aas_e2b_error(out, 429, "The sandbox is paused: %s%s",
			              aas_tenant_message(rc, "e2b: resuming a sandbox on use"), when);
		aas_e2b_retry_after(out, secs);
		return false;
	}
	if (rc < 0) {
		reply_gone(out, t->e2b_id, rc == SAAS_ESTATE ? "The sandbox is being resumed: try again in a moment"
		                                              : aas_tenant_message(rc, "e2b: resuming a sandbox on use"));
		return false;
	}
	aas_log(SAAS_LOG_INFO, "e2b: sandbox %s resumed on use (autoResume)", sb->id);
	if (resumed->expires_at_ms < aas_now_ms() + AAS_E2B_AUTORESUME_KEEP_S * 1000 &&
	    (rc = saas_sandbox_extend(NULL, t->client, t->id, AAS_E2B_AUTORESUME_KEEP_S, SAAS_EXTEND_FROM_NOW)) < 0)
		aas_log(SAAS_LOG_WARN, "e2b: sandbox %s: resumed, but not kept %d s: %s", sb->id, AAS_E2B_AUTORESUME_KEEP_S,
		        saas_error_last()->message);
	saas_sandbox_free(resumed);
	return true;
}

/*
 * Find the request's sandbox and the client to act for: false after a reply
 * (401 for a token that is not the sandbox's, 502 for a sandbox that is not
 * there or not running). Its status is read with the egress counters as
 * recorded: a live read runs nft on the libvirt driver, on every request.
 */
bool aas_e2b_target_open(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t)
{
	const char *port = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "E2b-Sandbox-Port");
	const char *sid = t->e2b_id, *token = t->token;
	saas_sandbox *sb = NULL;
	int rc;

	/* The Host's sandbox (domain mode) or a signed URL's comes first; the SDK's header then says the same. */
	if (!*sid)
		sid = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "E2b-Sandbox-Id");
	if (!*token)
		token = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Access-Token");
	if (!sid || !aas_e2b_id_to_saas(t->id, sid)) {
		reply_gone(out, sid, "The sandbox was not found (send its id in E2b-Sandbox-Id)");
		return false;
	}
	if (sid != t->e2b_id)
		snprintf(t->e2b_id, sizeof(t->e2b_id), "%s", sid);
	/* In domain mode the Host names the port: 49983 or 49999, or the request never came here. */
	if (port && strcmp(port, "49983") != 0 && !t->from_host && !t->code) {
		aas_reply_json(out, 502, json_pack("{s:s,s:s,s:s,s:i}", "sandboxId", sid, "message",
		                                   "only the daemon's port 49983 is served through the E2B data plane yet; "
		                                   "reach a guest port at PORT-ID.DOMAIN (--e2b-domain) or through a "
		                                   "preview (docs/e2b.md)",
		                                   "port", port, "code", 502));
		return false;
	}
	if (!token || !aas_e2b_envd_token_check(token, t->id, t->account)) {
		reply_auth(out, t, "unauthorized access, please provide a valid access token (X-Access-Token: the "
		           "sandbox's envdAccessToken)");
		return false;
	}
	if ((rc = saas_client_open_account(&t->client, aas_e2b_state.engine, t->account, 0)) < 0) {
		t->client = NULL;
		if (rc == SAAS_EAUTH || rc == SAAS_ENOTFOUND)
			reply_auth(out, t, "the sandbox's account is disabled");
		else
			reply_gone(out, sid, aas_tenant_message(rc, "e2b: opening a sandbox's account"));
		return false;
	}
	snprintf(r->account_id, sizeof(r->account_id), "%s", t->account);
	rc = saas_sandbox_get_ext(&sb, t->client, t->id, SAAS_GET_RECORDED);
	if (rc < 0 || sb->status == SAAS_SANDBOX_DESTROYED) {
		reply_gone(out, sid, "The sandbox was not found");
		saas_sandbox_free(sb);
		return false;
	}
	if (sb->status == SAAS_SANDBOX_PAUSED && sb->auto_resume && t->may_resume && !auto_resume(out, t, sb)) {
		saas_sandbox_free(sb);
		return false;
	}
	if (sb->status != SAAS_SANDBOX_READY && !(sb->status == SAAS_SANDBOX_PAUSED && sb->auto_resume && t->may_resume)) {
		reply_gone(out, sid, sb->status == SAAS_SANDBOX_PAUSED     ? "The sandbox is paused: connect to it to resume it"
		                     : sb->status == SAAS_SANDBOX_RESUMING ? "The sandbox is being resumed: try again in a moment"
		                                                           : "The sandbox is not running");
		saas_sandbox_free(sb);
		return false;
	}
	saas_sandbox_free(sb);
	return true;
}

/* ---- messages ---- */

/* The user an RPC names (Authorization: Basic base64("user:")): E2B's default user, or ours, only. */
bool aas_e2b_user_ok(const char *name, char *why, size_t whysize)
{
	bool ok = !name || !*name || strcmp(name, "user") == 0 || strcmp(name, "sandbox") == 0;

	if (!ok)
		snprintf(why, whysize, "user \"%.64s\" is refused: libsaas runs commands and file operations as the "
		         "unprivileged sandbox user (there is no root); leave user unset (docs/e2b.md)", name);
	return ok;
}

static bool user_ok(struct aas_req *r, char *why, size_t whysize)
{
	const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Authorization");
	char *name = NULL;
	size_t len = 0;
	bool ok;

	if (!h)
		return true;
	if (strncasecmp(h, "Basic ", 6) != 0 || strlen(h + 6) > 512 ||
	    saas_base64_decode((void **)&name, &len, h + 6, strlen(h + 6)) < 0) {
		snprintf(why, whysize, "the Authorization header must be Basic with a user name");
		return false;
	}
	name[strcspn(name, ":")] = '\0';
	ok = aas_e2b_user_ok(name, why, whysize);
	saas_free(name);
	return ok;
}

/* Content-Type's media type is `want` (parameters after ';' allowed). */
static bool content_type(struct aas_req *r, const char *want)
{
	const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Type");
	size_t n = strlen(want);

	return h && strncasecmp(h, want, n) == 0 && (h[n] == '\0' || h[n] == ';' || h[n] == ' ');
}

static void rpc(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t, const char *method)
{
	char why[512];
	json_t *msg = NULL;
	int code;

	if (strcmp(r->method, "POST") != 0) {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_UNIMPLEMENTED, "Connect calls are POSTs");
		return;
	}
	if (!content_type(r, t->streaming ? "application/connect+json" : "application/json")) {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_INVALID_ARGUMENT, "Content-Type must be %s (the JSON codec)",
		                  t->streaming ? "application/connect+json" : "application/json");
		return;
	}
	if (r->too_big) {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_RESOURCE_EXHAUSTED, "the request is over %zu bytes",
		                  (size_t)AAS_CONNECT_MESSAGE_MAX);
		return;
	}
	code = t->streaming ? aas_connect_unwrap(&msg, r->body, r->body_len, AAS_CONNECT_MESSAGE_MAX, why, sizeof(why))
	                    : aas_connect_json(&msg, r->body, r->body_len, AAS_CONNECT_MESSAGE_MAX, why, sizeof(why));
	if (code != AAS_CONNECT_OK) {
		if (t->streaming)
			aas_e2b_reply_stream_error(out, code, "%s", why);
		else
			aas_e2b_reply_unary_error(out, code, "%s", why);
		return;
	}
	if (!user_ok(r, why, sizeof(why))) {
		if (t->streaming)
			aas_e2b_reply_stream_error(out, AAS_CONNECT_INVALID_ARGUMENT, "%s", why);
		else
			aas_e2b_reply_unary_error(out, AAS_CONNECT_INVALID_ARGUMENT, "%s", why);
	} else if (strncmp(method, "process.Process/", 16) == 0) {
		aas_e2b_process(r, out, t, method + 16, msg);
	} else if (strcmp(method, "filesystem.Filesystem/WatchDir") == 0 ||
	           strcmp(method, "filesystem.Filesystem/CreateWatcher") == 0 ||
	           strcmp(method, "filesystem.Filesystem/GetWatcherEvents") == 0 ||
	           strcmp(method, "filesystem.Filesystem/RemoveWatcher") == 0) {
		aas_e2b_watch(r, out, t, method + 22, msg);
	} else if (strncmp(method, "filesystem.Filesystem/", 22) == 0 && !t->streaming) {
		aas_e2b_filesystem(out, t, method + 22, msg);
	} else if (t->streaming) {
		aas_e2b_reply_stream_error(out, AAS_CONNECT_UNIMPLEMENTED, "%s is not served by this server yet (docs/e2b.md)",
		                   method);
	} else {
		aas_e2b_reply_unary_error(out, AAS_CONNECT_UNIMPLEMENTED, "%s is not served by this server yet (docs/e2b.md)",
		                  method);
	}
	json_decref(msg);
}

static bool is_rpc(const char *path)
{
	/* "/pkg.Service/Method" */
	return *path == '/' && strchr(path + 1, '/') && strchr(path + 1, '.') < strchr(path + 1, '/');
}

/* Is the call at path ("/pkg.Service/Method") a server stream, whose errors are its end-stream frame's? */
static bool is_streaming(const char *path)
{
	static const char *const streaming[] = { "/process.Process/Start", "/process.Process/Connect",
		                                 "/filesystem.Filesystem/WatchDir" };

	for (size_t i = 0; i < sizeof(streaming) / sizeof(streaming[0]); i++)
		if (strcmp(path, streaming[i]) == 0)
			return true;
	return false;
}

static void target_free(void *p)
{
	struct aas_e2b_target *t = p;

	if (t) {
		aas_e2b_upload_free(t->upload); /* first: its writer uses the client */
		saas_client_free(t->client);
		sodium_memzero(t->token, sizeof(t->token));
	}
	free(t);
}

/*
 * The data plane's request rate (the route is AAS_R_RATED): a request with
 * the sandbox's token takes from its account's bucket at the account's
 * requests_per_second, as a key's requests do (the rate read once per
 * --key-cache-ttl, as a key's is); any other from its address's, as a
 * request without a valid key does. false after a 429.
 */
static bool rate_ok(struct aas_req *r, struct aas_reply *out, const struct aas_e2b_target *t)
{
	unsigned int rate;
	char bucket[SAAS_ID_MAX + 8];
	int64_t wait;

	if (!t->client)
		return aas_ratelimit_request(r, out, aas_e2b_state.cfg->address_rate);
	/* Cached, as a key's is: reading an account's info is several store queries (its live sandboxes too). */
	rate = aas_auth_account_rate(t->client);
	snprintf(bucket, sizeof(bucket), "e2b:%s", t->account);
	if ((wait = aas_ratelimit_take(bucket, strlen(bucket), rate, aas_now_ms())) > 0) {
		aas_e2b_error(out, 429, "this account's sandboxes may take %u requests a second (requests_per_second); "
		              "slow down", rate);
		if (out->response) {
			char secs[24];
			snprintf(secs, sizeof(secs), "%lld", (long long)((wait + 999) / 1000));
			MHD_add_response_header(out->response, MHD_HTTP_HEADER_RETRY_AFTER, secs);
		}
		return false;
	}
	return true;
}

/* A /files request a plain client sends with a signed URL's query and no token of its own. */
static bool signed_url(struct aas_req *r, const char *path)
{
	return strcmp(path, "/files") == 0 && !MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Access-Token") &&
	       MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "signature");
}

int aas_e2b_data_start(struct aas_req *r, struct aas_reply *out, const char *path, const char *host_id)
{
	struct aas_e2b_target *t = calloc(1, sizeof(*t));

	if (!t) {
		aas_e2b_error(out, 500, "out of memory");
		return -1;
	}
	r->stream = t;
	r->stream_free = target_free;
	r->body_max = 0;
	t->rpc = is_rpc(path);
	t->streaming = t->rpc && is_streaming(path);
	if (host_id) {
		snprintf(t->e2b_id, sizeof(t->e2b_id), "%s", host_id);
		t->from_host = true;
	}
	/* A health probe (isRunning) is not a use: it says paused, and resumes nothing. */
	t->may_resume = strcmp(path, "/health") != 0;
	/* The code interpreter's port (code.c): its own token rule, then the sandbox as any call finds it. */
	if ((t->code = aas_e2b_code_wanted(r))) {
		if (!aas_e2b_code_token(r, out, t) || !aas_e2b_target_open(r, out, t)) {
			struct aas_reply ignored = { 0, NULL };
			if (!aas_ratelimit_request(r, &ignored, aas_e2b_state.cfg->address_rate) && ignored.response)
				MHD_destroy_response(ignored.response);
			return -1;
		}
		if (!rate_ok(r, out, t))
			return -1;
		r->body_max = AAS_E2B_BODY_MAX;
		return 0;
	}
	if (!t->rpc && strcmp(path, "/health") != 0 && strcmp(path, "/files") != 0 && strcmp(path, "/envs") != 0 &&
	    strcmp(path, "/metrics") != 0)
		return rate_ok(r, out, t) ? 0 : -1; /* answered by aas_e2b_data: nothing of a sandbox is needed */
	/* A signature is checked against every candidate sandbox: the address pays before that work is done. */
	if (signed_url(r, path) && (!rate_ok(r, out, t) || !aas_e2b_signed_find(r, out, t)))
		return -1;
	if (!aas_e2b_target_open(r, out, t)) {
		/* A refused token (or a sandbox not there) is the address's to pay for; the reply stands. */
		struct aas_reply ignored = { 0, NULL };
		if (!aas_ratelimit_request(r, &ignored, aas_e2b_state.cfg->address_rate) && ignored.response)
			MHD_destroy_response(ignored.response);
		return -1;
	}
	if (!rate_ok(r, out, t))
		return -1;
	if (t->rpc)
		r->body_max = AAS_CONNECT_MESSAGE_MAX + AAS_CONNECT_HEADER_LEN;
	else if (strcmp(path, "/files") == 0 && strcmp(r->method, "POST") == 0)
		return aas_e2b_files_start(r, out, t); /* streamed to the guest as it comes, never held */
	return 0;
}

/* GET /envs: the sandbox's default environment (envd's answer from inside; here the engine's, from the create). */
static void envs(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t)
{
	saas_sandbox *sb = NULL;
	json_t *o;
	int rc;

	if (strcmp(r->method, "GET") != 0) {
		aas_e2b_error(out, 405, "%s is not allowed on /envs", r->method);
		return;
	}
	if ((rc = saas_sandbox_get_ext(&sb, t->client, t->id, SAAS_GET_RECORDED)) < 0) {
		aas_e2b_error(out, aas_status_for(rc), "%s", aas_tenant_message(rc, "e2b: reading a sandbox's envs"));
		return;
	}
	if (!(o = json_object())) {
		saas_sandbox_free(sb);
		aas_e2b_error(out, 500, "out of memory");
		return;
	}
	for (char **e = sb->envs; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		if (eq && json_object_setn_new_nocheck(o, *e, (size_t)(eq - *e), json_string(eq + 1)) < 0) {
			json_decref(o);
			saas_sandbox_free(sb);
			aas_e2b_error(out, 500, "out of memory");
			return;
		}
	}
	saas_sandbox_free(sb);
	aas_e2b_json(out, 200, o);
}

void aas_e2b_data(struct aas_req *r, struct aas_reply *out, const char *path)
{
	struct aas_e2b_target *t = r->stream;

	if (t->code) {
		aas_e2b_code(r, out, t, path);
	} else if (t->rpc) {
		rpc(r, out, t, path + 1);
	} else if (strcmp(path, "/health") == 0) {
		if (strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0)
			aas_e2b_json(out, 204, NULL);
		else
			aas_e2b_error(out, 405, "%s is not allowed on /health", r->method);
	} else if (strcmp(path, "/files") == 0) {
		aas_e2b_files(r, out, t);
	} else if (strcmp(path, "/envs") == 0) {
		envs(r, out, t);
	} else if (strcmp(path, "/metrics") == 0) {
		aas_e2b_envd_metrics(r, out, t);
	} else {
		aas_e2b_error(out, 404, "no E2B daemon call %s %s", r->method, *path ? path : "/");
	}
}
