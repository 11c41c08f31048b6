/*
 * Sign-up, log-in and log-out pages (GET shows the form, POST acts on it and
 * redirects: POST-redirect-GET). A form that fails is shown again, with what
 * was wrong in a role="alert" paragraph and the e-mail kept.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdio.h>
#include <string.h>

#include "web/html.h"
#include "web/internal.h"

/*
 * What a sign-up answers, whether the e-mail had an account or not: the
 * log-in page, saying both. Telling them apart would tell anyone which
 * e-mails have accounts here.
 */
#define SIGNED_UP_PATH "/login?signed-up=1"
#define SIGNED_UP_NOTICE                                                                                          \
	"If that e-mail had no account here, it has one now: log in with the password you chose. If it had one "  \
	"already, nothing was changed: log in with that account's password."

/* The sign-up or log-in form, with its own token (set as a cookie beside it). */
static void credentials_page(struct aas_req *r, struct aas_reply *out, unsigned int status, bool signup,
                             const char *email, const char *error, const char *notice)
{
	const struct aas_config *cfg = aas_people_config();
	struct aas_html h = { 0 };
	struct aas_page page;
	char token[65];

	aas_prelogin_token(r, token, true);
	aas_viewer_page(NULL, &page, signup ? "Sign up" : "Log in", signup ? "signup" : "login");
	aas_html_begin(&h, &page);
	if (error)
		aas_html_printf(&h, "<p role=\"alert\" id=\"error\">%s</p>", error);
	if (notice)
		aas_html_printf(&h, "<p role=\"status\" id=\"notice\">%s</p>", notice);
	if (signup && cfg->signup == AAS_SIGNUP_CLOSED) {
		aas_html_raw(&h, "<p id=\"signup-closed\">Sign-up is closed on this server: ask its operator for an "
		                 "account.</p><p><a href=\"/login\">Log in</a></p>");
		goto end;
	}
	aas_html_printf(&h, "<form id=\"%s-form\" method=\"post\" action=\"/%s\">"
	                    "<input type=\"hidden\" name=\"csrf\" value=\"%s\">"
	                    "<p><label for=\"email\">E-mail</label> "
	                    "<input id=\"email\" name=\"email\" type=\"email\" autocomplete=\"email\" required "
	                    "maxlength=\"%d\" value=\"%s\"></p>"
	                    "<p><label for=\"password\">Password</label> "
	                    "<input id=\"password\" name=\"password\" type=\"password\" required "
	                    "autocomplete=\"%s\" minlength=\"%d\" maxlength=\"%d\"></p>",
	                signup ? "signup" : "login", signup ? "signup" : "login", token, SAAS_EMAIL_MAX, email ? email : "",
	                signup ? "new-password" : "current-password", signup ? AAS_PASSWORD_MIN : 1, AAS_PASSWORD_MAX);
	if (signup && cfg->signup == AAS_SIGNUP_INVITE)
		aas_html_raw(&h, "<p><label for=\"invite\">Invite code</label> "
		                 "<input id=\"invite\" name=\"invite\" required autocomplete=\"off\" maxlength=\"128\"></p>");
	aas_html_printf(&h, "<p><button id=\"%s-submit\" type=\"submit\">%s</button></p></form>",
	                signup ? "signup" : "login", signup ? "Sign up" : "Log in");
	if (signup && cfg->signup == AAS_SIGNUP_OPEN && cfg->signup_credit == AAS_SIGNUP_CREDIT_APPROVAL)
		aas_html_raw(&h, "<p>New accounts get their free credit once this server's operator approves them; no "
		                 "card. Already have an account? <a href=\"/login\">Log in</a>.</p>");
	else if (signup)
		aas_html_raw(&h, "<p>New accounts start with free credit and no card. Already have an account? "
		                 "<a href=\"/login\">Log in</a>.</p>");
	else if (cfg->signup != AAS_SIGNUP_CLOSED)
		aas_html_raw(&h, "<p>No account yet? <a href=\"/signup\">Sign up</a>.</p>");
end:
	aas_html_end(&h);
	aas_reply_html(out, status, &h);
	aas_prelogin_cookie(out, token);
}

/* Start a session for `email` and go to `next`, with the cookie. */
static void log_in(struct aas_req *r, struct aas_reply *out, const char *email, const char *next)
{
	const struct aas_config *cfg = aas_people_config();
	char *token = NULL;
	int rc;

	if ((rc = saas_session_create(&token, aas_people_engine(), email, 0)) < 0) {
		aas_reply_page_saas(r, out, rc, "Cannot log in");
		return;
	}
	/* A log-in is a good moment to sweep the sessions that ended by time; it is one statement. */
	(void)saas_session_prune(aas_people_engine(), (int64_t)cfg->session_idle_s * 1000,
	                         (int64_t)cfg->session_max_s * 1000);
	aas_reply_redirect(out, next);
	aas_session_cookie(out, token, cfg->session_max_s);
	saas_free(token);
}

/* The checks every credentials form shares; false after replying. */
static bool credentials_form(struct aas_req *r, struct aas_reply *out, struct aas_form *f, bool signup,
                             const char **email, const char **password)
{
	char token[65];

	if (!aas_form_parse(r, out, f))
		return false;
	if (!aas_form_allowed(r, out, f, aas_prelogin_token(r, token, false) ? token : NULL))
		return false;
	*email = aas_form_get(f, "email");
	*password = aas_form_get(f, "password");
	if (!*email || !**email || !*password || !**password) {
		credentials_page(r, out, 400, signup, *email, "Give an e-mail and a password.", NULL);
		return false;
	}
	if (strlen(*password) > AAS_PASSWORD_MAX || strlen(*email) > SAAS_EMAIL_MAX) {
		credentials_page(r, out, 400, signup, NULL, "The e-mail or the password is too long.", NULL);
		return false;
	}
	return aas_login_admit(r, out, *email);
}

void aas_h_signup_page(struct aas_req *r, struct aas_reply *out)
{
	credentials_page(r, out, 200, true, NULL, NULL, NULL);
}

/* The one global sign-up budget (--signups-per-hour); false after a 503 with Retry-After. */
static bool signup_admit(struct aas_req *r, struct aas_reply *out)
{
	static const char name[] = "signups";
	int64_t wait = aas_ratelimit_take_hourly(name, sizeof(name) - 1, aas_people_config()->signups_per_hour,
	                                         aas_now_ms());

	if (wait <= 0)
		return true;
	aas_log(SAAS_LOG_WARN, "sign-up refused: this server's %u sign-ups an hour are taken (--signups-per-hour)",
	        aas_people_config()->signups_per_hour);
	aas_reply_page_retry(r, out, 503, "Sign-up is busy",
	                     "This server takes only so many sign-ups an hour, and they are taken.", wait);
	return false;
}

void aas_h_signup(struct aas_req *r, struct aas_reply *out)
{
	const struct aas_config *cfg = aas_people_config();
	char hash[SAAS_PASSWORD_HASH_MAX + 1];
	const char *email, *password, *invite;
	struct aas_form f;
	int64_t credit = SAAS_CREDIT_DEFAULT;
	int rc;

	if (cfg->signup == AAS_SIGNUP_CLOSED) {
		aas_reply_page_error(r, out, 403, "Sign-up is closed",
		                     "Sign-up is closed on this server: ask its operator for an account.");
		return;
	}
	if (!credentials_form(r, out, &f, true, &email, &password))
		goto out;
	invite = aas_form_get(&f, "invite");
	if (cfg->signup == AAS_SIGNUP_INVITE && (!invite || !*invite)) {
		credentials_page(r, out, 403, true, email, "Sign-up on this server takes an invite code.", NULL);
		goto out;
	}
	if (strlen(password) < AAS_PASSWORD_MIN) {
		char msg[80];

		snprintf(msg, sizeof(msg), "Choose a password of at least %d characters.", AAS_PASSWORD_MIN);
		credentials_page(r, out, 400, true, email, msg, NULL);
		goto out;
	}
	/* Hashed whether or not the e-mail has an account: the answer takes as long either way. */
	if (!aas_hash_enter()) {
		aas_reply_hash_busy(r, out);
		goto out;
	}
	/* Taken once the hash may run: a sign-up turned away busy has not spent the hour's budget. */
	if (!signup_admit(r, out)) {
		aas_hash_leave();
		goto out;
	}
	rc = aas_password_hash(hash, password);
	aas_hash_leave();
	if (rc < 0) {
		aas_reply_error(out, 500, "out_of_memory", "out of memory");
		goto out;
	}
	/* An invite is the operator's approval given ahead; open sign-up may wait for theirs (aas-server user approve). */
	if (cfg->signup == AAS_SIGNUP_OPEN && cfg->signup_credit == AAS_SIGNUP_CREDIT_APPROVAL)
		credit = 0;
	rc = saas_user_create(NULL, aas_people_engine(), email, hash, NULL, credit,
	                      cfg->signup == AAS_SIGNUP_INVITE ? invite : NULL, 0);
	if (rc == SAAS_ENOTFOUND)
		credentials_page(r, out, 403, true, email, "That invite code is unknown or was used already.", NULL);
	else if (rc == SAAS_EINVAL)
		credentials_page(r, out, 400, true, NULL, saas_error_last()->message, NULL);
	else if (rc < 0 && rc != SAAS_EEXISTS)
		aas_reply_page_saas(r, out, rc, "Cannot sign up");
	else
		/*
		 * Made, or the e-mail had an account (then nothing changed): the same
		 * answer, with no session, so that nothing tells the two apart. The
		 * owner of an account logs in as always; a new one logs in once.
		 */
		aas_reply_redirect(out, SIGNED_UP_PATH);
out:
	aas_form_free(&f);
}

void aas_h_login_page(struct aas_req *r, struct aas_reply *out)
{
	struct aas_viewer v;

	/* Someone logged in already goes on to the dashboard. */
	if (aas_viewer_get(r, out, &v, false)) {
		aas_viewer_free(&v);
		aas_reply_redirect(out, "/dashboard");
		return;
	}
	credentials_page(r, out, 200, false, NULL, NULL,
	                 MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "signed-up") ? SIGNED_UP_NOTICE
	                                                                                          : NULL);
}

void aas_h_login(struct aas_req *r, struct aas_reply *out)
{
	const char *email, *password;
	saas_user *u = NULL;
	struct aas_form f;
	bool good;
	int rc;

	if (!credentials_form(r, out, &f, false, &email, &password))
		goto out;
	rc = saas_user_get(&u, aas_people_engine(), email);
	if (rc < 0 && rc != SAAS_ENOTFOUND && rc != SAAS_EINVAL) {
		aas_reply_page_saas(r, out, rc, "Cannot log in");
		goto out;
	}
	if (!aas_hash_enter()) {
		aas_reply_hash_busy(r, out);
		goto out;
	}
	/* An unknown e-mail is checked against a decoy hash: it takes as long, and says the same. */
	good = aas_password_verify(u ? u->password_hash : NULL, password);
	aas_hash_leave();
	if (!good) {
		credentials_page(r, out, 401, false, email, "Wrong e-mail or password.", NULL);
		goto out;
	}
	if (u->disabled_at_ms) {
		credentials_page(r, out, 403, false, email, "This account is disabled: ask the server's operator.", NULL);
		goto out;
	}
	log_in(r, out, u->email, "/dashboard");
out:
	saas_user_free(u);
	aas_form_free(&f);
}

void aas_h_logout(struct aas_req *r, struct aas_reply *out)
{
	const char *token = aas_session_token(r);
	struct aas_viewer v;
	struct aas_form f;

	if (!aas_viewer_get(r, out, &v, true))
		return;
	if (aas_form_parse(r, out, &f) && aas_form_allowed(r, out, &f, v.csrf)) {
		int rc = saas_session_end(aas_people_engine(), token);

		if (rc < 0) {
			aas_reply_page_saas(r, out, rc, "Cannot log out");
		} else {
			aas_reply_redirect(out, "/");
			aas_session_cookie(out, NULL, 0);
		}
	}
	aas_form_free(&f);
	aas_viewer_free(&v);
}
