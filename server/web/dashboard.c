/*
 * The dashboard: a signed-in person's API keys, sandboxes, usage and balance,
 * and the operator's pages. Every page acts for the session's account through
 * a client of its own (saas_client_open_account), so tenancy is the engine's,
 * as for the API. Forms post and redirect back (POST-redirect-GET), with one
 * exception: a new key is shown on the page that answers its form, once.
 *
 * Pages work without JavaScript; /static/dashboard.js only adds live
 * countdowns (elements with data-expires, milliseconds since the epoch) and
 * copy buttons (data-copy names the element whose text is copied). A
 * sandbox's own page (terminal, files, use) is dashboard_sandbox.c's.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "preview/preview.h"
#include "web/html.h"
#include "web/internal.h"

/* Sandboxes each list shows: the live ones, then the most recent that ended. */
#define LIST_LIVE_MAX 100
#define LIST_RECENT_MAX 20
/* Days the spend chart covers, by default and at most. */
#define CHART_DAYS_DEFAULT 14
#define CHART_DAYS_MAX 90
#define DAY_MS 86400000LL
/* What the extend form adds unless told otherwise, and at most (the engine bounds it further). */
#define EXTEND_MINUTES_DEFAULT 30
#define EXTEND_MINUTES_MAX 1440

/* "$4.987500": dollars to the micro-dollar, as billed (a sandbox's minutes cost fractions of a cent). */
static const char *usd(char buf[40], int64_t micro)
{
	char n[32];

	saas_usd_format(n, sizeof(n), micro);
	if (n[0] == '-')
		snprintf(buf, 40, "-$%s", n + 1);
	else
		snprintf(buf, 40, "$%s", n);
	return buf;
}

static const char *when(char buf[40], int64_t ms)
{
	return ms ? saas_time_format(buf, 40, ms) : "never";
}

/* "3 h 20 min", "45 s": a span for people. */
static const char *span(char buf[40], int64_t ms)
{
	int64_t s = ms > 0 ? ms / 1000 : 0;

	if (s >= 86400)
		snprintf(buf, 40, "%lld d %lld h", (long long)(s / 86400), (long long)(s % 86400 / 3600));
	else if (s >= 3600)
		snprintf(buf, 40, "%lld h %lld min", (long long)(s / 3600), (long long)(s % 3600 / 60));
	else if (s >= 60)
		snprintf(buf, 40, "%lld min", (long long)(s / 60));
	else
		snprintf(buf, 40, "%lld s", (long long)s);
	return buf;
}

/* The start of a page for the viewer, and its script (countdowns, copy buttons). */
static void page_begin(struct aas_html *h, const struct aas_viewer *v, const char *title, const char *nav)
{
	struct aas_page page;

	aas_viewer_page(v, &page, title, nav);
	aas_html_begin(h, &page);
	aas_html_raw(h, "<script src=\"/static/dashboard.js\" defer></script>"
	                "<nav aria-label=\"Dashboard\" class=\"subnav\"><ul>"
	                "<li><a href=\"/dashboard\">Sandboxes</a></li>"
	                "<li><a href=\"/dashboard/keys\">API keys</a></li>"
	                "<li><a href=\"/dashboard/usage\">Usage and balance</a></li>");
	if (v->user->is_operator)
		aas_html_raw(h, "<li><a href=\"/dashboard/operator\">Operator</a></li>");
	aas_html_raw(h, "</ul></nav>");
}

/* A form posting to `action` with the session's token, a button, and optional fields before it. */
static void form_begin(struct aas_html *h, const struct aas_viewer *v, const char *cls, const char *action)
{
	aas_html_printf(h, "<form method=\"post\" class=\"%s\" action=\"%s\"><input type=\"hidden\" name=\"csrf\" "
	                   "value=\"%s\">", cls, action, v->csrf);
}

/* Parse a posted form and check it comes from a page of ours; false after replying. */
static bool form_ok(struct aas_req *r, struct aas_reply *out, const struct aas_viewer *v, struct aas_form *f)
{
	return aas_form_parse(r, out, f) && aas_form_allowed(r, out, f, v->csrf);
}

/* ---- sandboxes ---- */

/* Extend and Destroy forms; from the sandbox's own page (`back`), they come back to it. */
static void sandbox_actions(struct aas_html *h, const struct aas_viewer *v, const saas_sandbox *sb, bool back)
{
	const char *here = back ? "<input type=\"hidden\" name=\"back\" value=\"sandbox\">" : "";
	char action[128];

	if (sb->status == SAAS_SANDBOX_DESTROYED)
		return;
	if (sb->status == SAAS_SANDBOX_READY) {
		snprintf(action, sizeof(action), "/dashboard/sandboxes/%s/extend", sb->id);
		form_begin(h, v, "extend", action);
		aas_html_raw(h, here);
		aas_html_printf(h, "<label>Minutes <input name=\"minutes\" type=\"number\" min=\"1\" max=\"%d\" "
		                   "value=\"%d\" required></label> <button type=\"submit\">Extend</button></form>",
		                EXTEND_MINUTES_MAX, EXTEND_MINUTES_DEFAULT);
	}
	snprintf(action, sizeof(action), "/dashboard/sandboxes/%s/destroy", sb->id);
	form_begin(h, v, "destroy", action);
	aas_html_raw(h, here);
	aas_html_printf(h, "<button type=\"submit\" aria-label=\"Destroy %s\">Destroy</button></form>", sb->id);
}

static void sandbox_row(struct aas_html *h, const struct aas_viewer *v, const saas_sandbox *sb, int64_t now)
{
	char b1[40], b2[40], b3[40];

	aas_html_printf(h, "<tr id=\"sandbox-%s\" data-status=\"%s\"><td><a href=\"/dashboard/sandboxes/%s\">%s</a></td>"
	                   "<td class=\"status\">%s</td><td>%s (%u vCPU, %u MiB, %u GiB)</td><td>%s</td><td>%s</td>",
	                sb->id, saas_sandbox_status_name(sb->status), sb->id, sb->id, saas_sandbox_status_name(sb->status),
	                sb->size, sb->vcpus, sb->memory_mb, sb->disk_gb, sb->image, span(b1, now - sb->created_at_ms));
	if (sb->status == SAAS_SANDBOX_DESTROYED)
		aas_html_printf(h, "<td>ended %s ago (%s)</td>", span(b2, now - sb->destroyed_at_ms),
		                saas_end_reason_name(sb->end_reason));
	else
		aas_html_printf(h, "<td><time datetime=\"%s\" data-expires=\"%lld\">in %s</time></td>",
		                when(b3, sb->expires_at_ms), (long long)sb->expires_at_ms, span(b2, sb->expires_at_ms - now));
	aas_html_printf(h, "<td class=\"cost\">%s</td><td>", usd(b1, sb->cost_usd_micro));
	sandbox_actions(h, v, sb, false);
	aas_html_raw(h, "</td></tr>");
}

/* The account's live sandboxes and its most recent ended ones, as one table. */
static int sandbox_table(struct aas_html *h, const struct aas_viewer *v)
{
	saas_sandbox_list *live = NULL, *ended = NULL;
	int64_t now = aas_now_ms();
	int rc;

	if ((rc = saas_sandbox_list_get(&live, v->client, NULL, LIST_LIVE_MAX, SAAS_LIST_ACTIVE)) < 0 ||
	    (rc = saas_sandbox_list_get(&ended, v->client, NULL, LIST_RECENT_MAX, SAAS_LIST_DESTROYED)) < 0)
		goto out;
	if (!live->count && !ended->count) {
		aas_html_raw(h, "<p id=\"no-sandboxes\">No sandboxes yet. Make one with an <a href=\"/dashboard/keys\">API "
		                "key</a> and the API (<a href=\"/docs\">quick start</a>).</p>");
		goto out;
	}
	aas_html_raw(h, "<table id=\"sandboxes\"><caption>Live sandboxes, then the latest that ended</caption><thead><tr>"
	                "<th scope=\"col\">Sandbox</th><th scope=\"col\">Status</th><th scope=\"col\">Size</th>"
	                "<th scope=\"col\">Image</th><th scope=\"col\">Age</th><th scope=\"col\">Expires</th>"
	                "<th scope=\"col\">Cost so far</th><th scope=\"col\">Actions</th></tr></thead><tbody>");
	for (size_t i = 0; i < live->count; i++)
		sandbox_row(h, v, live->items[i], now);
	for (size_t i = 0; i < ended->count; i++)
		sandbox_row(h, v, ended->items[i], now);
	aas_html_raw(h, "</tbody></table>");
out:
	saas_sandbox_list_free(live);
	saas_sandbox_list_free(ended);
	return rc;
}

/* The balance line; *keep gets the account's information if not NULL (free it). */
static int balance_line(struct aas_html *h, const struct aas_viewer *v, saas_account_info **keep)
{
	saas_account_info *ai = NULL;
	char b1[40], b2[40], b3[40];
	int rc;

	if ((rc = saas_account_info_get(&ai, v->client)) < 0)
		return rc;
	aas_html_printf(h, "<p class=\"balance\">Balance: <strong id=\"balance\">%s</strong> "
	                   "(credited %s, spent %s)</p>",
	                usd(b1, ai->balance_usd_micro), usd(b2, ai->credit_usd_micro), usd(b3, ai->spent_usd_micro));
	if (keep)
		*keep = ai;
	else
		saas_account_info_free(ai);
	return SAAS_OK;
}

/* Reply with the page, or with the failure that cut it short. */
static void page_end(struct aas_reply *out, struct aas_html *h, int rc, unsigned int status)
{
	if (rc < 0) {
		aas_html_free(h);
		aas_reply_saas(out, rc);
		return;
	}
	aas_html_end(h);
	aas_reply_html(out, status, h);
}

void aas_h_dashboard(struct aas_req *r, struct aas_reply *out)
{
	struct aas_html h = { 0 };
	struct aas_viewer v;
	int rc;

	if (!aas_viewer_get(r, out, &v, true))
		return;
	page_begin(&h, &v, "Dashboard", "dashboard");
	if ((rc = balance_line(&h, &v, NULL)) == SAAS_OK) {
		aas_html_raw(&h, "<h2>Sandboxes</h2>");
		rc = sandbox_table(&h, &v);
	}
	page_end(out, &h, rc, 200);
	aas_viewer_free(&v);
}

/* Go back to where the form was: the sandbox's page if it came from there, else the list. */
static void back_to(struct aas_reply *out, const struct aas_form *f, const char *id)
{
	char where[128];

	if (aas_form_get(f, "back") && strcmp(aas_form_get(f, "back"), "sandbox") == 0) {
		snprintf(where, sizeof(where), "/dashboard/sandboxes/%s", id);
		aas_reply_redirect(out, where);
	} else {
		aas_reply_redirect(out, "/dashboard");
	}
}

void aas_h_dash_sandbox_destroy(struct aas_req *r, struct aas_reply *out)
{
	struct aas_viewer v;
	struct aas_form f = { 0 };
	int rc;

	if (!aas_viewer_get(r, out, &v, true))
		return;
	if (!form_ok(r, out, &v, &f))
		goto out;
	if ((rc = saas_sandbox_destroy(NULL, v.client, r->route_id, 0)) < 0) {
		aas_reply_page_error(r, out, aas_status_for(rc), "Cannot destroy", aas_tenant_message(rc, r->path));
		goto out;
	}
	aas_preview_revoke(r->route_id, 0);
	aas_metrics_destroy();
	back_to(out, &f, r->route_id);
out:
	aas_form_free(&f);
	aas_viewer_free(&v);
}

void aas_h_dash_sandbox_extend(struct aas_req *r, struct aas_reply *out)
{
	struct aas_viewer v;
	struct aas_form f = { 0 };
	const char *m;
	char *end;
	long minutes;
	int rc;

	if (!aas_viewer_get(r, out, &v, true))
		return;
	if (!form_ok(r, out, &v, &f))
		goto out;
	m = aas_form_get(&f, "minutes");
	minutes = m && *m >= '0' && *m <= '9' ? strtol(m, &end, 10) : -1;
	if (minutes < 1 || minutes > EXTEND_MINUTES_MAX || *end) {
		char msg[80];

		snprintf(msg, sizeof(msg), "Extend by 1 to %d minutes.", EXTEND_MINUTES_MAX);
		aas_reply_page_error(r, out, 400, "Cannot extend", msg);
		goto out;
	}
	if ((rc = saas_sandbox_extend(NULL, v.client, r->route_id, (int64_t)minutes * 60, 0)) < 0) {
		aas_reply_page_error(r, out, aas_status_for(rc), "Cannot extend", aas_tenant_message(rc, r->path));
		goto out;
	}
	back_to(out, &f, r->route_id);
out:
	aas_form_free(&f);
	aas_viewer_free(&v);
}

/* ---- API keys ---- */

static void keys_page(struct aas_reply *out, const struct aas_viewer *v, const char *new_key, const char *new_name)
{
	struct aas_html h = { 0 };
	saas_key_list *l = NULL;
	char b1[40], b2[40], action[128], e2b[SAAS_KEY_E2B_LEN + 1];
	int rc;

	page_begin(&h, v, "API keys", "dashboard");
	if (new_key) {
		aas_html_printf(&h, "<section id=\"new-key-box\" aria-live=\"polite\"><h2>New key \"%s\"</h2>"
		                    "<p>Copy it now: it is shown once, and only its hash is kept.</p>"
		                    "<p><output id=\"new-key\">%s</output> "
		                    "<button type=\"button\" class=\"copy\" data-copy=\"new-key\">Copy</button></p>"
		                    "<p>Use it as <code>Authorization: Bearer ...</code>; see the <a href=\"/docs\">quick "
		                    "start</a>.</p>",
		                new_name, new_key);
		/* The same secret in E2B's shape, for code written for E2B's SDKs (docs/e2b.md): nothing more is kept. */
		if (saas_key_to_e2b(e2b, new_key) == SAAS_OK)
			aas_html_printf(&h, "<div id=\"new-key-e2b-box\"><h3>For E2B's SDKs</h3>"
			                    "<p>The same key in E2B's shape, revoked with it. Set these where code written for "
			                    "E2B runs, with <code>AAS_BASE_URL</code> this server's address:</p>"
			                    "<pre><output id=\"new-key-e2b\">export E2B_API_KEY=%s\n"
			                    "export E2B_API_URL=$AAS_BASE_URL" AAS_E2B_API_PREFIX "\n"
			                    "export E2B_SANDBOX_URL=$AAS_BASE_URL" AAS_E2B_SANDBOX_PREFIX "</output></pre>"
			                    "<button type=\"button\" class=\"copy\" data-copy=\"new-key-e2b\">Copy</button>"
			                    "</div>",
			                e2b);
		sodium_memzero(e2b, sizeof(e2b));
		aas_html_raw(&h, "</section>");
	}
	form_begin(&h, v, "key-create", "/dashboard/keys");
	aas_html_raw(&h, "<p><label for=\"key-name\">Name</label> <input id=\"key-name\" name=\"name\" maxlength=\"200\" "
	                 "required placeholder=\"laptop\"> <button id=\"key-submit\" type=\"submit\">Create key</button></p>"
	                 "</form>");
	if ((rc = saas_key_list_get(&l, aas_people_engine(), v->user->account_id)) < 0)
		goto end;
	aas_html_raw(&h, "<table id=\"keys\"><caption>This account's API keys</caption><thead><tr>"
	                 "<th scope=\"col\">Name</th><th scope=\"col\">Prefix</th><th scope=\"col\">Created</th>"
	                 "<th scope=\"col\">Last used</th><th scope=\"col\">Status</th><th scope=\"col\">Actions</th>"
	                 "</tr></thead><tbody>");
	/* Newest first: the list comes oldest first. */
	for (size_t i = l->count; i-- > 0;) {
		const saas_key *k = l->items[i];

		aas_html_printf(&h, "<tr id=\"key-%s\"><td>%s</td><td><code>%s...</code></td><td>%s</td><td>%s</td><td>%s</td><td>",
		                k->id, k->name, k->prefix, when(b1, k->created_at_ms), when(b2, k->last_used_at_ms),
		                k->revoked_at_ms ? "revoked" : "active");
		if (!k->revoked_at_ms) {
			snprintf(action, sizeof(action), "/dashboard/keys/%s/revoke", k->id);
			form_begin(&h, v, "revoke", action);
			aas_html_printf(&h, "<button type=\"submit\" aria-label=\"Revoke %s\">Revoke</button></form>", k->name);
		}
		aas_html_raw(&h, "</td></tr>");
	}
	aas_html_raw(&h, "</tbody></table>");
end:
	saas_key_list_free(l);
	page_end(out, &h, rc, new_key ? 201 : 200);
}

void aas_h_dash_keys(struct aas_req *r, struct aas_reply *out)
{
	struct aas_viewer v;

	if (!aas_viewer_get(r, out, &v, true))
		return;
	keys_page(out, &v, NULL, NULL);
	aas_viewer_free(&v);
}

void aas_h_dash_key_create(struct aas_req *r, struct aas_reply *out)
{
	struct aas_viewer v;
	struct aas_form f = { 0 };
	const char *name;
	char *key = NULL;
	int rc;

	if (!aas_viewer_get(r, out, &v, true))
		return;
	if (!form_ok(r, out, &v, &f))
		goto out;
	name = aas_form_get(&f, "name");
	if ((rc = saas_key_create(&key, NULL, aas_people_engine(), v.user->account_id, name, 0)) < 0) {
		aas_reply_page_error(r, out, aas_status_for(rc), "Cannot create the key", aas_tenant_message(rc, r->path));
		goto out;
	}
	keys_page(out, &v, key, name ? name : "");
	memset(key, 0, strlen(key));
	saas_free(key);
out:
	aas_form_free(&f);
	aas_viewer_free(&v);
}

void aas_h_dash_key_revoke(struct aas_req *r, struct aas_reply *out)
{
	struct aas_viewer v;
	struct aas_form f = { 0 };
	saas_key_list *l = NULL;
	bool ours = false;
	int rc;

	if (!aas_viewer_get(r, out, &v, true))
		return;
	if (!form_ok(r, out, &v, &f))
		goto out;
	/* Key ids are the engine's, across accounts: revoke only one of this account's. */
	if ((rc = saas_key_list_get(&l, aas_people_engine(), v.user->account_id)) < 0) {
		aas_reply_saas(out, rc);
		goto out;
	}
	for (size_t i = 0; i < l->count && !ours; i++)
		ours = strcmp(l->items[i]->id, r->route_id) == 0;
	if (!ours) {
		aas_reply_page_error(r, out, 404, "No such key", "This account has no key with that id.");
		goto out;
	}
	if ((rc = saas_key_revoke(aas_people_engine(), r->route_id)) < 0) {
		aas_reply_saas(out, rc);
		goto out;
	}
	aas_reply_redirect(out, "/dashboard/keys");
out:
	saas_key_list_free(l);
	aas_form_free(&f);
	aas_viewer_free(&v);
}

/* ---- usage and balance ---- */

/*
 * Spend per day over the last `days` days (UTC), as an SVG bar chart made
 * here, with the same numbers in a table for screen readers and text browsers.
 */
static int spend_chart(struct aas_html *h, const struct aas_viewer *v, unsigned int days)
{
	enum { W = 640, H = 180, TOP = 10, BOTTOM = 24 };
	int64_t now = aas_now_ms(), today = now - now % DAY_MS, spend[CHART_DAYS_MAX], max = 0;
	char b1[40], b2[40];
	int rc = SAAS_OK;

	for (unsigned int i = 0; i < days; i++) {
		saas_usage *u = NULL;
		int64_t from = today - (int64_t)(days - 1 - i) * DAY_MS;

		if ((rc = saas_usage_get(&u, v->client, from, from + DAY_MS, 0)) < 0)
			return rc;
		spend[i] = u->total_usd_micro;
		if (spend[i] > max)
			max = spend[i];
		saas_usage_free(u);
	}
	aas_html_printf(h, "<figure id=\"spend-chart\"><svg role=\"img\" aria-labelledby=\"spend-chart-caption\" "
	                   "viewBox=\"0 0 %d %d\" width=\"100%%\" preserveAspectRatio=\"xMidYMid meet\">", W, H);
	for (unsigned int i = 0; i < days; i++) {
		int bar = W / (int)days, hgt = max ? (int)(spend[i] * (H - TOP - BOTTOM) / max) : 0;
		int64_t day = today - (int64_t)(days - 1 - i) * DAY_MS;

		saas_time_format(b1, sizeof(b1), day);
		b1[10] = '\0'; /* the date of the RFC 3339 time */
		aas_html_printf(h, "<rect class=\"bar\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"><title>%s: %s</title></rect>",
		                (int)i * bar + 1, H - BOTTOM - hgt, bar > 2 ? bar - 2 : 1, hgt, b1, usd(b2, spend[i]));
		if (i == 0 || i == days - 1)
			aas_html_printf(h, "<text x=\"%d\" y=\"%d\" text-anchor=\"%s\">%s</text>", i == 0 ? 0 : W, H - 6,
			                i == 0 ? "start" : "end", b1 + 5);
	}
	aas_html_printf(h, "<text x=\"0\" y=\"%d\">%s</text></svg><figcaption id=\"spend-chart-caption\">Spend per day "
	                   "(UTC), the last %u days; the highest day %s</figcaption></figure>",
	                TOP + 8, usd(b1, max), days, usd(b2, max));
	aas_html_raw(h, "<details><summary>Spend per day as a table</summary><table id=\"spend-per-day\"><thead><tr>"
	                "<th scope=\"col\">Day</th><th scope=\"col\">Spend</th></tr></thead><tbody>");
	for (unsigned int i = 0; i < days; i++) {
		saas_time_format(b1, sizeof(b1), today - (int64_t)(days - 1 - i) * DAY_MS);
		b1[10] = '\0';
		aas_html_printf(h, "<tr><td>%s</td><td>%s</td></tr>", b1, usd(b2, spend[i]));
	}
	aas_html_raw(h, "</tbody></table></details>");
	return rc;
}

static int usage_lines(struct aas_html *h, const struct aas_viewer *v, int64_t from, int64_t to)
{
	saas_usage *u = NULL;
	char b1[40], b2[40], b3[40], b4[40];
	int rc;

	if ((rc = saas_usage_get(&u, v->client, from, to, 0)) < 0)
		return rc;
	aas_html_printf(h, "<p id=\"period-total\">From %s to %s: %s for %s of sandbox time.</p>", when(b1, u->from_ms),
	                when(b2, u->to_ms), usd(b3, u->total_usd_micro), span(b4, u->total_seconds * 1000));
	aas_html_raw(h, "<table id=\"usage-lines\"><thead><tr><th scope=\"col\">Sandbox</th><th scope=\"col\">Size</th>"
	                "<th scope=\"col\">Time run</th><th scope=\"col\">Cost</th></tr></thead><tbody>");
	for (size_t i = 0; i < u->count; i++) {
		const saas_usage_line *l = u->lines[i];

		aas_html_printf(h, "<tr><td><a href=\"/dashboard/sandboxes/%s\">%s</a>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>",
		                l->sandbox_id, l->sandbox_id, l->running ? " (running)" : "", l->size,
		                span(b1, l->seconds * 1000), usd(b2, l->cost_usd_micro));
	}
	aas_html_raw(h, "</tbody></table>");
	saas_usage_free(u);
	return SAAS_OK;
}

static void prices_and_limits(struct aas_html *h, const saas_account_info *ai)
{
	const saas_limits *l = ai->limits;
	char b1[40], b2[40];

	aas_html_raw(h, "<h2>Prices</h2><table id=\"prices\"><thead><tr><th scope=\"col\">Size</th><th scope=\"col\">vCPU</th>"
	                "<th scope=\"col\">Memory</th><th scope=\"col\">Disk</th><th scope=\"col\">Per hour</th></tr></thead><tbody>");
	for (size_t i = 0; i < ai->nsizes; i++)
		aas_html_printf(h, "<tr><td>%s</td><td>%u</td><td>%u MiB</td><td>%u GiB</td><td>%s</td></tr>",
		                ai->sizes[i]->name, ai->sizes[i]->vcpus, ai->sizes[i]->memory_mb, ai->sizes[i]->disk_gb,
		                usd(b1, ai->sizes[i]->usd_micro_per_hour));
	aas_html_printf(h, "</tbody></table><h2>Limits</h2><dl id=\"limits\">"
	                   "<dt>Sandboxes at once</dt><dd>%u</dd><dt>Lifetime</dt><dd>%s by default, at most %s</dd>"
	                   "<dt>Executions at once</dt><dd>%u</dd><dt>Creates per minute</dt><dd>%u</dd>"
	                   "<dt>API requests per second, per key</dt><dd>%u</dd></dl>",
	                l->max_sandboxes, span(b1, l->default_timeout_s * 1000), span(b2, l->max_timeout_s * 1000),
	                l->max_executions, l->creates_per_minute, l->requests_per_second);
}

void aas_h_dash_usage(struct aas_req *r, struct aas_reply *out)
{
	struct aas_html h = { 0 };
	struct aas_viewer v;
	saas_account_info *ai = NULL;
	const char *from_text, *to_text;
	unsigned int days = CHART_DAYS_DEFAULT;
	int64_t now = aas_now_ms(), from = now - 30 * DAY_MS, to = now;
	int rc;

	if (!aas_query(r, "from", &from_text, out) || !aas_query(r, "to", &to_text, out) ||
	    !aas_query_uint(r, "days", 1, CHART_DAYS_MAX, &days, out))
		return;
	if ((from_text && *from_text && saas_time_parse(&from, from_text, 0) < 0) ||
	    (to_text && *to_text && saas_time_parse(&to, to_text, SAAS_TIME_DAY_END) < 0) || from < 0 || to < 0) {
		aas_reply_page_error(r, out, 400, "Bad period", "Give the period as dates (2025-06-01) or RFC 3339 times.");
		return;
	}
	if (!aas_viewer_get(r, out, &v, true))
		return;
	page_begin(&h, &v, "Usage and balance", "dashboard");
	if ((rc = balance_line(&h, &v, &ai)) < 0)
		goto out;
	aas_html_raw(&h, "<h2>Spend per day</h2>");
	if ((rc = spend_chart(&h, &v, days)) < 0)
		goto out;
	aas_html_raw(&h, "<h2>Sandboxes in a period</h2><form method=\"get\" action=\"/dashboard/usage\" id=\"period\">"
	                 "<label for=\"from\">From</label> <input id=\"from\" name=\"from\" type=\"date\"> "
	                 "<label for=\"to\">To</label> <input id=\"to\" name=\"to\" type=\"date\"> "
	                 "<button type=\"submit\">Show</button></form>");
	if ((rc = usage_lines(&h, &v, from, to)) < 0)
		goto out;
	prices_and_limits(&h, ai);
	aas_html_raw(&h, "<p>Every limit of this server, and what happens past it: <a href=\"/docs/limits\">Limits, "
	                 "prices and startup times</a>.</p>");
out:
	page_end(out, &h, rc, 200);
	saas_account_info_free(ai);
	aas_viewer_free(&v);
}

/* ---- the operator's pages ---- */

/* The viewer of an operator page; false after a redirect to /login or a 403. */
static bool operator_get(struct aas_req *r, struct aas_reply *out, struct aas_viewer *v)
{
	if (!aas_viewer_get(r, out, v, true))
		return false;
	if (v->user->is_operator)
		return true;
	aas_viewer_free(v);
	aas_reply_page_error(r, out, 403, "Operators only", "This page is for the server's operators.");
	return false;
}

/* The VM hosts, when sandboxes run on several (none on a single machine). */
static int vm_hosts(struct aas_html *h)
{
	saas_host_list *l = NULL;
	char when[40];
	int rc;

	if ((rc = saas_host_list_get(&l, aas_people_engine())) < 0)
		return rc;
	if (l->count) {
		aas_html_raw(h, "<h3>VM hosts</h3><table id=\"vm-hosts\"><thead><tr><th scope=\"col\">Host</th>"
		                "<th scope=\"col\">State</th><th scope=\"col\">Sandboxes</th><th scope=\"col\">vCPUs</th>"
		                "<th scope=\"col\">Memory (MiB)</th><th scope=\"col\">Last seen</th></tr></thead><tbody>");
		for (size_t i = 0; i < l->count; i++) {
			const saas_host *x = l->items[i];

			aas_html_printf(h, "<tr data-state=\"%s\"><td>%s</td><td class=\"status\">%s</td><td>%u</td>"
			                   "<td>%u of %u</td><td>%llu of %llu</td><td>%s</td></tr>",
			                saas_host_state_name(x->state), x->name, saas_host_state_name(x->state), x->sandboxes,
			                x->vcpus_used, x->vcpus_capacity, (unsigned long long)x->memory_mb_used,
			                (unsigned long long)x->memory_mb_capacity,
			                x->last_seen_ms ? saas_time_format(when, sizeof(when), x->last_seen_ms) : "never");
		}
		aas_html_raw(h, "</tbody></table>");
	}
	saas_host_list_free(l);
	return SAAS_OK;
}

static int host_load(struct aas_html *h)
{
	saas_engine_stats *st = NULL;
	int rc;

	if ((rc = saas_engine_stats_get(&st, aas_people_engine())) < 0)
		return rc;
	aas_html_printf(h, "<h2>Host load</h2><dl id=\"host-load\"><dt>Sandboxes running</dt><dd>%u</dd>"
	                   "<dt>Sandboxes being made</dt><dd>%u</dd><dt>Accounts with sandboxes</dt><dd>%u</dd>"
	                   "<dt>Pooled VMs ready</dt><dd>%u of %u</dd></dl>",
	                st->ready, st->creating, st->accounts_with_sandboxes, st->pool_ready, st->pool_target);
	if (st->npools) {
		aas_html_raw(h, "<table id=\"pools\"><thead><tr><th scope=\"col\">Size</th><th scope=\"col\">Image</th>"
		                "<th scope=\"col\">Ready</th><th scope=\"col\">Target</th><th scope=\"col\">Claims</th>"
		                "<th scope=\"col\">Failures</th></tr></thead><tbody>");
		for (size_t i = 0; i < st->npools; i++) {
			const saas_engine_pool *p = st->pools[i];

			aas_html_printf(h, "<tr><td>%s</td><td>%s</td><td>%u</td><td>%u</td><td>%llu</td><td>%llu</td></tr>",
			                p->size, p->image, p->ready, p->target, (unsigned long long)p->claims,
			                (unsigned long long)p->failures);
		}
		aas_html_raw(h, "</tbody></table>");
	}
	if ((rc = vm_hosts(h)) < 0) {
		saas_engine_stats_free(st);
		return rc;
	}
	aas_html_raw(h, "<h3>Templates</h3>");
	if (!st->ntemplates) {
		aas_html_raw(h, "<p id=\"no-templates\">None: sandboxes boot cold (the driver makes no templates, or none "
		                "was asked for yet).</p>");
	} else {
		aas_html_raw(h, "<table id=\"templates\"><caption>The VMs sandboxes are cloned from, by image and size"
		                "</caption><thead><tr><th scope=\"col\">Image</th><th scope=\"col\">Size</th>"
		                "<th scope=\"col\">State</th><th scope=\"col\">Saved state</th></tr></thead><tbody>");
		for (size_t i = 0; i < st->ntemplates; i++) {
			const saas_engine_template *t = st->templates[i];

			aas_html_printf(h, "<tr data-state=\"%s\"><td>%s</td><td>%s%s(%u vCPU, %u MiB, %u GiB)</td>"
			                   "<td class=\"status\">%s</td><td>",
			                saas_template_state_name(t->state), t->image, t->size, *t->size ? " " : "", t->vcpus,
			                t->memory_mb, t->disk_gb, saas_template_state_name(t->state));
			if (t->state == SAAS_TEMPLATE_READY)
				aas_html_printf(h, "%lld MiB", (long long)((t->state_bytes + (1 << 20) - 1) >> 20));
			else
				aas_html_raw(h, "-");
			aas_html_raw(h, "</td></tr>");
		}
		aas_html_raw(h, "</tbody></table>");
	}
	saas_engine_stats_free(st);
	return SAAS_OK;
}

void aas_h_dash_operator(struct aas_req *r, struct aas_reply *out)
{
	struct aas_html h = { 0 };
	struct aas_viewer v;
	saas_account_list *l = NULL;
	char b1[40], action[128];
	int rc;

	if (!operator_get(r, out, &v))
		return;
	page_begin(&h, &v, "Operator", "operator");
	if ((rc = host_load(&h)) < 0 || (rc = saas_account_list_get(&l, aas_people_engine())) < 0)
		goto out;
	aas_html_raw(&h, "<h2>Accounts</h2><table id=\"accounts\"><thead><tr><th scope=\"col\">Account</th>"
	                 "<th scope=\"col\">Name</th><th scope=\"col\">Balance</th><th scope=\"col\">State</th>"
	                 "<th scope=\"col\">Add credit</th><th scope=\"col\">Disable</th></tr></thead><tbody>");
	for (size_t i = 0; i < l->count; i++) {
		const saas_account *a = l->items[i];

		aas_html_printf(&h, "<tr id=\"account-%s\"><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>", a->id, a->id,
		                a->name, usd(b1, a->balance_usd_micro), a->disabled_at_ms ? "disabled" : "active");
		snprintf(action, sizeof(action), "/dashboard/operator/accounts/%s/credit", a->id);
		form_begin(&h, &v, "credit", action);
		aas_html_printf(&h, "<label>USD <input name=\"usd\" inputmode=\"decimal\" required size=\"6\"></label> "
		                    "<button type=\"submit\" aria-label=\"Add credit to %s\">Add</button></form></td><td>",
		                a->id);
		snprintf(action, sizeof(action), "/dashboard/operator/accounts/%s/disable", a->id);
		form_begin(&h, &v, "disable", action);
		aas_html_printf(&h, "<input type=\"hidden\" name=\"disabled\" value=\"%d\"><button type=\"submit\">%s</button>"
		                    "</form></td></tr>",
		                a->disabled_at_ms ? 0 : 1, a->disabled_at_ms ? "Enable" : "Disable");
	}
	aas_html_raw(&h, "</tbody></table>");
out:
	page_end(out, &h, rc, 200);
	saas_account_list_free(l);
	aas_viewer_free(&v);
}

void aas_h_dash_op_credit(struct aas_req *r, struct aas_reply *out)
{
	struct aas_viewer v;
	struct aas_form f = { 0 };
	const char *amount;
	char note[SAAS_EMAIL_MAX + 32];
	int64_t micro;
	int rc;

	if (!operator_get(r, out, &v))
		return;
	if (!form_ok(r, out, &v, &f))
		goto out;
	amount = aas_form_get(&f, "usd");
	if (!amount || aas_parse_usd(&micro, amount) < 0 || micro <= 0) {
		aas_reply_page_error(r, out, 400, "Cannot add credit", "Give a positive amount in dollars, like 20 or 0.5.");
		goto out;
	}
	snprintf(note, sizeof(note), "by %s", v.user->email);
	if ((rc = saas_account_add_credit(aas_people_engine(), r->route_id, micro, note, 0)) < 0) {
		aas_reply_page_error(r, out, aas_status_for(rc), "Cannot add credit", aas_tenant_message(rc, r->path));
		goto out;
	}
	aas_reply_redirect(out, "/dashboard/operator");
out:
	aas_form_free(&f);
	aas_viewer_free(&v);
}

void aas_h_dash_op_disable(struct aas_req *r, struct aas_reply *out)
{
	struct aas_viewer v;
	struct aas_form f = { 0 };
	const char *d;
	int rc;

	if (!operator_get(r, out, &v))
		return;
	if (!form_ok(r, out, &v, &f))
		goto out;
	d = aas_form_get(&f, "disabled");
	if (!d || (strcmp(d, "0") != 0 && strcmp(d, "1") != 0)) {
		aas_reply_page_error(r, out, 400, "Bad form", "disabled must be 0 or 1.");
		goto out;
	}
	if ((rc = saas_account_disable(aas_people_engine(), r->route_id, d[0] == '1')) < 0) {
		aas_reply_page_error(r, out, aas_status_for(rc), "Cannot change the account", aas_tenant_message(rc, r->path));
		goto out;
	}
	aas_reply_redirect(out, "/dashboard/operator");
out:
	aas_form_free(&f);
	aas_viewer_free(&v);
}

/* ---- for the sandbox's page (dashboard_sandbox.c, dashboard_files.c) ---- */

const char *aas_dash_usd(char buf[40], int64_t micro)
{
	return usd(buf, micro);
}

const char *aas_dash_when(char buf[40], int64_t ms)
{
	return when(buf, ms);
}

const char *aas_dash_span(char buf[40], int64_t ms)
{
	return span(buf, ms);
}

void aas_dash_page_begin(struct aas_html *h, const struct aas_viewer *v, const char *title, const char *nav)
{
	page_begin(h, v, title, nav);
}

void aas_dash_page_end(struct aas_reply *out, struct aas_html *h, int rc, unsigned int status)
{
	page_end(out, h, rc, status);
}

void aas_dash_form_begin(struct aas_html *h, const struct aas_viewer *v, const char *cls, const char *action)
{
	form_begin(h, v, cls, action);
}

bool aas_dash_form_ok(struct aas_req *r, struct aas_reply *out, const struct aas_viewer *v, struct aas_form *f)
{
	return form_ok(r, out, v, f);
}

void aas_dash_sandbox_actions(struct aas_html *h, const struct aas_viewer *v, const saas_sandbox *sb, bool back)
{
	sandbox_actions(h, v, sb, back);
}
