/*
 * Accounts for people: passwords, sessions by cookie, CSRF, form bodies and
 * the log-in rate, for the pages of login.c and dashboard.c.
 *
 * A session is a cookie holding a token of libsaas's (saas_session_create):
 * HttpOnly, SameSite=Strict, Path=/, and with --secure-cookies (the server is
 * reached over HTTPS through a proxy) Secure and named "__Host-...", which a
 * browser only accepts from a secure origin for this host alone. The API
 * never reads the cookie, and the pages never read an API key.
 *
 * Every state-changing form is checked twice: its Origin (or Sec-Fetch-Site,
 * when a browser sends that and no Origin) must be this server's, and its
 * "csrf" field must equal the session's CSRF token, a hash of the session
 * token (so it needs no storage and dies with the session). Another site can
 * neither read that token nor make a browser send a matching Origin. The
 * sign-up and log-in forms, before any session, carry a token of their own
 * that must match a cookie set with the form (a double-submit token).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "web/html.h"
#include "web/internal.h"

#define SESSION_COOKIE "aas_session"
#define SESSION_COOKIE_SECURE "__Host-aas_session"
#define PRELOGIN_COOKIE "aas_form"
#define PRELOGIN_COOKIE_SECURE "__Host-aas_form"
#define FORM_TYPE "application/x-www-form-urlencoded"

static saas_engine *engine;
static const struct aas_config *config;
/* A hash of a password nobody has: unknown e-mails are verified against it, so they take as long as known ones. */
static char decoy_hash[SAAS_PASSWORD_HASH_MAX + 1];

/*
 * The password hashes running at once. Each Argon2id takes 64 MiB and a core
 * for a good part of a second, on a connection's thread: without a bound, a
 * flood of log-ins from a few addresses (each under its rate, which refills)
 * runs hundreds at once, gigabytes on the machine that runs the VMs, and the
 * server stops answering anything. With hash_max at once, and as many more
 * waiting at most AAS_HASH_WAIT_MS for a turn, the hashes' memory is
 * hash_max x 64 MiB; the rest are told to come back (503, Retry-After).
 */
static pthread_mutex_t hash_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hash_cond;
static pthread_once_t hash_once = PTHREAD_ONCE_INIT;
static unsigned int hash_max = 1, hash_running, hash_waiting;

static void hash_cond_init(void)
{
	pthread_condattr_t a;

	/* Waits are measured on the monotonic clock: a clock set back must not hold a waiter for hours. */
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&hash_cond, &a);
	pthread_condattr_destroy(&a);
}

unsigned int aas_password_hashes_default(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > AAS_PASSWORD_HASHES_MAX ? AAS_PASSWORD_HASHES_MAX : (unsigned int)n;
}

bool aas_hash_enter(void)
{
	struct timespec until;
	bool ok = false;
	int rc = 0;

	pthread_once(&hash_once, hash_cond_init);
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += (long)(AAS_HASH_WAIT_MS % 1000) * 1000000L;
	until.tv_sec += AAS_HASH_WAIT_MS / 1000 + until.tv_nsec / 1000000000L;
	until.tv_nsec %= 1000000000L;
	pthread_mutex_lock(&hash_mu);
	/* The queue is bounded too: each waiter is a connection's thread held. */
	if (hash_running >= hash_max && hash_waiting >= hash_max)
		goto out;
	hash_waiting++;
	while (hash_running >= hash_max && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&hash_cond, &hash_mu, &until);
	hash_waiting--;
	if (hash_running < hash_max) {
		hash_running++;
		ok = true;
	}
out:
	pthread_mutex_unlock(&hash_mu);
	return ok;
}

void aas_hash_leave(void)
{
	pthread_mutex_lock(&hash_mu);
	hash_running--;
	pthread_cond_signal(&hash_cond);
	pthread_mutex_unlock(&hash_mu);
}

void aas_reply_hash_busy(struct aas_req *r, struct aas_reply *out)
{
	static int64_t logged_ms;
	static unsigned int unlogged;
	int64_t now = aas_now_ms();
	unsigned int n = 0;

	/* A flood is told once a second, with how many were refused, not once a request. */
	pthread_mutex_lock(&hash_mu);
	unlogged++;
	if (now - logged_ms >= 1000) {
		logged_ms = now;
		n = unlogged;
		unlogged = 0;
	}
	pthread_mutex_unlock(&hash_mu);
	if (n)
		aas_log(SAAS_LOG_WARN, "%u log-ins or sign-ups refused (503, latest %s): %u password hashes running, as "
		        "many waiting (--max-password-hashes)", n, r->path, hash_max);
	aas_reply_page_retry(r, out, 503, "Busy", "Too many people are logging in or signing up right now.", 1000);
}

int aas_people_init(saas_engine *e, const struct aas_config *cfg)
{
	unsigned char pw[16];
	char text[33];

	engine = e;
	config = cfg;
	pthread_mutex_lock(&hash_mu);
	hash_max = cfg->max_password_hashes ? cfg->max_password_hashes : aas_password_hashes_default();
	pthread_mutex_unlock(&hash_mu);
	if (sodium_init() < 0) {
		aas_log(SAAS_LOG_ERROR, "libsodium cannot start: no password can be checked");
		return -1;
	}
	randombytes_buf(pw, sizeof(pw));
	sodium_bin2hex(text, sizeof(text), pw, sizeof(pw));
	if (aas_password_hash(decoy_hash, text) < 0) {
		aas_log(SAAS_LOG_ERROR, "cannot hash a password: out of memory");
		return -1;
	}
	return 0;
}

const struct aas_config *aas_people_config(void)
{
	return config;
}

bool aas_signup_offered(void)
{
	return config && config->signup != AAS_SIGNUP_CLOSED;
}

saas_engine *aas_people_engine(void)
{
	return engine;
}

/* ---- passwords ---- */

_Static_assert(crypto_pwhash_STRBYTES <= SAAS_PASSWORD_HASH_MAX + 1, "an Argon2id string fits the store's field");

int aas_password_hash(char out[SAAS_PASSWORD_HASH_MAX + 1], const char *password)
{
	/* Safe to repeat, and from any thread: the admin commands hash without the rest of aas_people_init(). */
	if (sodium_init() < 0)
		return -1;
	/*
	 * libsodium's interactive limits (64 MiB, 2 passes): each log-in runs on
	 * its connection's thread, and several at once must not take the
	 * machine's memory; the per-address and per-e-mail rate bounds guessing.
	 */
	if (crypto_pwhash_str(out, password, strlen(password), crypto_pwhash_OPSLIMIT_INTERACTIVE,
	                      crypto_pwhash_MEMLIMIT_INTERACTIVE) != 0)
		return -1;
	return 0;
}

bool aas_password_verify(const char *hash, const char *password)
{
	if (!hash || !*hash)
		hash = decoy_hash;
	return crypto_pwhash_str_verify(hash, password, strlen(password)) == 0 && hash != decoy_hash;
}

/* ---- form bodies ---- */

static int hexval(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Decode application/x-www-form-urlencoded in place ('+' is a space); -1 on a bad escape or a NUL. */
static int form_decode(char *s)
{
	char *w = s;

	for (char *p = s; *p; p++) {
		if (*p == '+') {
			*w++ = ' ';
		} else if (*p == '%') {
			int hi = hexval((unsigned char)p[1]), lo = hi < 0 ? -1 : hexval((unsigned char)p[2]);

			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
				return -1;
			*w++ = (char)(hi * 16 + lo);
			p += 2;
		} else {
			*w++ = *p;
		}
	}
	*w = '\0';
	return 0;
}

int aas_form_decode(struct aas_form *f, const char *body, size_t len, const char **why)
{
	char *p, *save = NULL;

	memset(f, 0, sizeof(*f));
	if (memchr(body ? body : "", '\0', len)) {
		*why = "The form holds a NUL byte.";
		return SAAS_EINVAL;
	}
	if (!(f->buf = strndup(body ? body : "", len))) {
		*why = "Out of memory.";
		return SAAS_ENOMEM;
	}
	f->len = len;
	for (p = strtok_r(f->buf, "&", &save); p; p = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(p, '=');

		if (eq)
			*eq++ = '\0';
		if (f->n == AAS_FORM_FIELDS_MAX || form_decode(p) < 0 || (eq && form_decode(eq) < 0) ||
		    aas_form_get(f, p)) {
			aas_form_free(f);
			*why = "The form is malformed: a field given twice, too many fields, or a bad %-escape.";
			return SAAS_EINVAL;
		}
		f->name[f->n] = p;
		f->value[f->n++] = eq ? eq : "";
	}
	return SAAS_OK;
}

bool aas_form_parse(struct aas_req *r, struct aas_reply *out, struct aas_form *f)
{
	const char *ct = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
	const char *why = NULL;
	int rc;

	memset(f, 0, sizeof(*f));
	if (r->too_big) {
		aas_reply_page_error(r, out, 413, "Too large", "The form sent is larger than any form of this site.");
		return false;
	}
	/*
	 * The media type exactly, then its parameters if any ("; charset=UTF-8"),
	 * not a longer name it begins (strchr finds the terminator too: the end is fine).
	 */
	if (r->body_len && (!ct || strncasecmp(ct, FORM_TYPE, strlen(FORM_TYPE)) != 0 ||
	                    !strchr("; \t", ct[strlen(FORM_TYPE)]))) {
		aas_reply_page_error(r, out, 415, "Not a form", "Send the form as application/x-www-form-urlencoded.");
		return false;
	}
	if ((rc = aas_form_decode(f, r->body, r->body_len, &why)) == SAAS_ENOMEM) {
		aas_reply_error(out, 500, "out_of_memory", "out of memory");
		return false;
	}
	if (rc < 0) {
		aas_reply_page_error(r, out, 400, "Bad form", why);
		return false;
	}
	return true;
}

const char *aas_form_get(const struct aas_form *f, const char *name)
{
	for (size_t i = 0; i < f->n; i++)
		if (strcmp(f->name[i], name) == 0)
			return f->value[i];
	return NULL;
}

void aas_form_free(struct aas_form *f)
{
	if (f->buf) {
		/* It held a password: all of it, past the NULs that parsing wrote between the fields. */
		sodium_memzero(f->buf, f->len);
		free(f->buf);
	}
	memset(f, 0, sizeof(*f));
}

/* ---- cookies and sessions ---- */

static const char *session_cookie_name(void)
{
	return config->secure_cookies ? SESSION_COOKIE_SECURE : SESSION_COOKIE;
}

static void set_cookie(struct aas_reply *out, const char *name, const char *value, unsigned int max_age_s)
{
	char header[256];

	if (!out->response)
		return;
	snprintf(header, sizeof(header), "%s=%s; Path=/; Max-Age=%u; HttpOnly; SameSite=Strict%s", name, value,
	         max_age_s, config->secure_cookies ? "; Secure" : "");
	MHD_add_response_header(out->response, MHD_HTTP_HEADER_SET_COOKIE, header);
}

void aas_session_cookie(struct aas_reply *out, const char *token, unsigned int max_age_s)
{
	set_cookie(out, session_cookie_name(), token ? token : "", token ? max_age_s : 0);
}

void aas_session_csrf(char out[65], const char *token)
{
	char buf[160];

	snprintf(buf, sizeof(buf), "csrf:%s", token);
	saas_key_fingerprint(out, buf);
	sodium_memzero(buf, sizeof(buf));
}

const char *aas_session_token(struct aas_req *r)
{
	return MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND, session_cookie_name());
}

bool aas_viewer_get(struct aas_req *r, struct aas_reply *out, struct aas_viewer *v, bool required)
{
	const char *token = aas_session_token(r);
	int rc;

	memset(v, 0, sizeof(*v));
	if (token && *token) {
		rc = saas_session_get(&v->user, engine, token, (int64_t)config->session_idle_s * 1000,
		                      (int64_t)config->session_max_s * 1000);
		if (rc == SAAS_OK && (rc = saas_client_open_account(&v->client, engine, v->user->account_id, 0)) < 0) {
			saas_user_free(v->user);
			v->user = NULL;
		}
		if (rc == SAAS_OK) {
			aas_session_csrf(v->csrf, token);
			snprintf(r->account_id, sizeof(r->account_id), "%s", v->user->account_id);
			return true;
		}
		if (rc != SAAS_EAUTH) {
			if (required)
				aas_reply_page_saas(r, out, rc, "Cannot open the session");
			return false;
		}
	}
	if (required) {
		aas_reply_redirect(out, "/login");
		/*
		 * Clear only a cookie that was sent and is no longer good. A request
		 * without one may be a cross-site one, which the browser sends
		 * without the SameSite=Strict cookie: clearing it there would let
		 * any site log the person out.
		 */
		if (token && *token)
			aas_session_cookie(out, NULL, 0);
	}
	return false;
}

void aas_viewer_free(struct aas_viewer *v)
{
	saas_client_free(v->client);
	saas_user_free(v->user);
	memset(v, 0, sizeof(*v));
}

void aas_viewer_page(const struct aas_viewer *v, struct aas_page *page, const char *title, const char *nav)
{
	memset(page, 0, sizeof(*page));
	page->title = title;
	page->nav = nav;
	page->signup = aas_signup_offered();
	if (v && v->user) {
		page->user_email = v->user->email;
		page->csrf = v->csrf;
	}
}

bool aas_prelogin_token(struct aas_req *r, char out[65], bool make)
{
	const char *c = MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND,
	                                            config->secure_cookies ? PRELOGIN_COOKIE_SECURE : PRELOGIN_COOKIE);
	unsigned char rnd[32];

	if (c && strlen(c) == 64 && strspn(c, "0123456789abcdef") == 64) {
		memcpy(out, c, 65);
		return true;
	}
	if (!make)
		return false;
	randombytes_buf(rnd, sizeof(rnd));
	sodium_bin2hex(out, 65, rnd, sizeof(rnd));
	return true;
}

void aas_prelogin_cookie(struct aas_reply *out, const char *token)
{
	/* An hour to fill the form in; the cookie is only ever compared with the form's field. */
	set_cookie(out, config->secure_cookies ? PRELOGIN_COOKIE_SECURE : PRELOGIN_COOKIE, token, 3600);
}

/* ---- the checks of a form post ---- */

/*
 * Is the Origin this server as the browser reached it? Its host:port must be
 * the request's Host, and its scheme https behind TLS (http otherwise).
 */
static bool same_origin(struct aas_req *r, const char *origin)
{
	const char *host = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
	const char *scheme = config->secure_cookies ? "https://" : "http://";
	size_t n = strlen(scheme);

	return host && *host && strncasecmp(origin, scheme, n) == 0 && strcasecmp(origin + n, host) == 0;
}

bool aas_form_allowed(struct aas_req *r, struct aas_reply *out, const struct aas_form *f, const char *token)
{
	const char *origin = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Origin");
	const char *site = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Sec-Fetch-Site");
	const char *sent = aas_form_get(f, "csrf");

	/* Browsers send Origin with every POST; "null" (a sandboxed frame, a redirect across sites) is not ours. */
	if ((origin && !same_origin(r, origin)) || (site && strcmp(site, "same-origin") != 0)) {
		aas_log(SAAS_LOG_WARN, "refused a cross-site form post to %s (Origin %s, Sec-Fetch-Site %s)", r->path,
		        origin ? origin : "-", site ? site : "-");
		aas_reply_page_error(r, out, 403, "Refused", "This form was sent from another site. Open the page on this "
		                                             "site and send it from there.");
		return false;
	}
	if (!token || !sent || strlen(sent) != strlen(token) || sodium_memcmp(sent, token, strlen(token)) != 0) {
		aas_reply_page_error(r, out, 403, "Refused", "The form's security token is missing or out of date. "
		                                             "Reload the page and send it again.");
		return false;
	}
	return true;
}

bool aas_origin_allowed(struct aas_req *r, struct aas_reply *out, bool required)
{
	const char *origin = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Origin");
	const char *site = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Sec-Fetch-Site");

	if ((!origin && required) || (origin && !same_origin(r, origin)) || (site && strcmp(site, "same-origin") != 0)) {
		aas_log(SAAS_LOG_WARN, "refused a cross-site request to %s (Origin %s, Sec-Fetch-Site %s)", r->path,
		        origin ? origin : "-", site ? site : "-");
		aas_reply_page_error(r, out, 403, "Refused", "This request came from another site, or did not say where "
		                                             "from. Open the page on this site and use it from there.");
		return false;
	}
	return true;
}

bool aas_csrf_ok(const char *sent, const char *token)
{
	return token && sent && strlen(sent) == strlen(token) && sodium_memcmp(sent, token, strlen(token)) == 0;
}

void aas_reply_redirect(struct aas_reply *out, const char *location)
{
	out->status = 303;
	out->response = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	if (!out->response)
		return;
	MHD_add_response_header(out->response, MHD_HTTP_HEADER_LOCATION, location);
	aas_reply_common_headers(out->response);
}

/* ---- the log-in rate ---- */

/*
 * Log-ins and sign-ups take from two buckets: the client address's ("l" and
 * its part one client holds, as conn.c groups them) holds 3 x login_attempts,
 * and the pair of that address and the e-mail ("m" and their hash)
 * login_attempts; each refills that many an hour. The e-mail alone is no
 * bucket: anyone could then spend a victim's and keep the owner from logging
 * in. A guesser is bounded by each address's budget and, spread over many
 * addresses, by the password hashes at once (aas_hash_enter()) and Argon2id's
 * cost.
 */
bool aas_login_admit(struct aas_req *r, struct aas_reply *out, const char *email)
{
	struct sockaddr_storage ss;
	unsigned int per = config->login_attempts;
	unsigned char key[16];
	char name[80], pair[2 * sizeof(key) + 2 + SAAS_EMAIL_MAX + 1];
	size_t n = 1;
	int64_t wait, now = aas_now_ms();

	/* The client's, behind a trusted proxy (aas_client_address()). */
	aas_client_address(r->conn, &ss);
	aas_address_key((const struct sockaddr *)&ss, key, NULL, 0);
	name[0] = 'l';
	for (size_t i = 0; i < sizeof(key); i++)
		n += (size_t)snprintf(name + n, sizeof(name) - n, "%02x", key[i]);
	wait = aas_ratelimit_take_hourly(name, n, 3 * per, now);
	if (wait <= 0 && email) {
		size_t i, m = n - 1;

		/* The address's hex, a separator no hex digit is, and the e-mail as the store keeps it (lowercase). */
		memcpy(pair, name + 1, m);
		pair[m++] = '/';
		for (i = 0; email[i] && i < SAAS_EMAIL_MAX; i++)
			pair[m++] = (char)tolower((unsigned char)email[i]);
		pair[m] = '\0';
		name[0] = 'm';
		saas_key_fingerprint(name + 1, pair);
		wait = aas_ratelimit_take_hourly(name, 65, per, now);
	}
	if (wait <= 0)
		return true;
	aas_log(SAAS_LOG_WARN, "log-in attempts limited for %s", email ? "an address or an address and e-mail" : "an address");
	aas_reply_page_retry(r, out, 429, "Too many attempts", "Too many log-in or sign-up attempts from here.", wait);
	return false;
}

long long aas_retry_words(char *buf, size_t size, const char *message, int64_t wait_ms)
{
	/* Whole seconds, rounded up and never 0 ("now" would be a busy loop); past two minutes said in minutes. */
	long long secs = wait_ms > 0 ? (wait_ms + 999) / 1000 : 1, mins = (secs + 59) / 60;
	size_t len = strlen(message);
	/* The library's sentences end bare ("...; wait for one to finish"): one full stop before ours. */
	const char *stop = len && !strchr(".!?", message[len - 1]) ? "." : "";
	/* A long message is cut, never the words that say when. */
	int room = size > 64 ? (int)(size - 64) : 0;

	if (secs < 120)
		snprintf(buf, size, "%.*s%s Try again in %lld second%s.", room, message, stop, secs, secs == 1 ? "" : "s");
	else
		snprintf(buf, size, "%.*s%s Try again in %lld minutes.", room, message, stop, mins);
	return secs;
}

void aas_reply_page_retry(struct aas_req *r, struct aas_reply *out, unsigned int status, const char *title,
                          const char *message, int64_t wait_ms)
{
	char text[768], value[24];
	long long secs = aas_retry_words(text, sizeof(text), message, wait_ms);

	aas_reply_page_error(r, out, status, title, text);
	if (out->response) {
		snprintf(value, sizeof(value), "%lld", secs);
		MHD_add_response_header(out->response, MHD_HTTP_HEADER_RETRY_AFTER, value);
	}
}

void aas_reply_page_saas(struct aas_req *r, struct aas_reply *out, int rc, const char *title)
{
	int64_t wait = aas_retry_after_ms(rc); /* the REST API's Retry-After, from the thread's last failure */
	const char *msg = aas_tenant_message(rc, r->path);

	if (wait > 0)
		aas_reply_page_retry(r, out, aas_status_for(rc), title, msg, wait);
	else
		aas_reply_page_error(r, out, aas_status_for(rc), title, msg);
}

void aas_reply_page_error(struct aas_req *r, struct aas_reply *out, unsigned int status, const char *title,
                          const char *message)
{
	struct aas_html h = { 0 };
	struct aas_page page;

	(void)r;
	aas_viewer_page(NULL, &page, title, NULL);
	aas_html_begin(&h, &page);
	aas_html_printf(&h, "<p role=\"alert\" id=\"error\">%s</p>", message);
	aas_html_end(&h);
	aas_reply_html(out, status, &h);
}
