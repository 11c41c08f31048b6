/*
 * The dashboard: a signed-in person's sandboxes, usage and balance, and the
 * shell the dashboard's other pages share (API keys in keys.c, the operator's
 * in operator.c, through internal.h). Every page acts for the session's account through
 * a client of its own (saas_client_open_account), so tenancy is the engine's,
 * as for the API. Forms post and redirect back (POST-redirect-GET), with one
 * exception: a new key is shown on the page that answers its form, once.
 *
 * Pages work without JavaScript; /static/dashboard.js only adds live
 * countdowns (elements with data-expires, milliseconds since the epoch), copy
 * buttons (data-copy names the element whose text is copied), a dialog that
 * asks before Destroy and Revoke (without it, their links lead to a page that
 * asks), and the spend chart's tooltip. A sandbox's own page (terminal,
 * files, use) is dashboard_sandbox.c's; the keys' pages keys.c's, the
 * operator's operator.c's.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "preview/preview.h"
#include "web/chart.h"
#include "web/html.h"
#include "web/internal.h"

/* Sandboxes each list shows: the live ones, then the most recent that ended. */
#define LIST_LIVE_MAX 100
#define LIST_RECENT_MAX 20
/* Days the spend chart covers, by default and at most. */
#define CHART_DAYS_DEFAULT 14
#define CHART_DAYS_MAX AAS_CHART_DAYS_MAX
#define DAY_MS AAS_DAY_MS
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

/* "2025-06-01 14:05 UTC": a time for people, to the minute ("never" for 0). */
static const char *minute(char buf[40], int64_t ms)
{
	if (!ms)
		return "never";
	saas_time_format(buf, 40, ms);
	buf[10] = ' ';
	snprintf(buf + 16, 24, "%s", " UTC");
	return buf;
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

/*
 * The dashboard's tabs, the current one marked: aria-current="page" on its own
 * page, "true" on a page inside it (a sandbox's page is inside Sandboxes).
 */
static void tabs(struct aas_html *h, const struct aas_viewer *v, const char *tab, bool inside)
{
	static const struct {
		const char *id, *href, *label;
		bool operator_only;
	} all[] = {
		{ "sandboxes", "/dashboard", "Sandboxes", false },
		{ "keys", "/dashboard/keys", "API keys", false },
		{ "usage", "/dashboard/usage", "Usage and billing", false },
		{ "operator", "/dashboard/operator", "Operator", true },
	};

	aas_html_raw(h, "<nav aria-label=\"Dashboard\" class=\"tabs\"><ul>");
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		if (all[i].operator_only && !v->user->is_operator)
			continue;
		aas_html_printf(h, "<li><a href=\"%s\"", all[i].href);
		if (strcmp(all[i].id, tab) == 0)
			aas_html_raw(h, inside ? " aria-current=\"true\"" : " aria-current=\"page\"");
		aas_html_printf(h, ">%s</a></li>", all[i].label);
	}
	aas_html_raw(h, "</ul></nav>");
}

/*
 * The start of a page for the viewer: the shell, the tabs with `tab` current
 * ("sandboxes", "keys", "usage", "operator"; "dashboard" is a page inside
 * Sandboxes, as a sandbox's own), and the script (countdowns, copy buttons,
 * confirmations, the chart's tooltip).
 */
static void page_begin(struct aas_html *h, const struct aas_viewer *v, const char *title, const char *tab)
{
	struct aas_html t = { 0 };
	struct aas_page page;
	bool inside = strcmp(tab, "dashboard") == 0;

	tabs(&t, v, inside ? "sandboxes" : tab, inside);
	aas_viewer_page(v, &page, title, "dashboard");
	page.tabs = t.failed ? NULL : t.buf;
	aas_html_begin(h, &page);
	if (t.failed)
		h->failed = true;
	aas_html_free(&t);
	aas_html_raw(h, "<script src=\"/static/dashboard.js\" defer></script>");
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

/*
 * A link to the page that asks before `post` acts (GET of the same path). With
 * JavaScript, dashboard.js asks in a dialog instead, from the data- attributes:
 * the question, the button's word, the token and the "back" field of the form
 * it posts.
 */
static void confirm_link(struct aas_html *h, const struct aas_viewer *v, const char *post, const char *back,
                         const char *label, const char *aria, const char *question, const char *verb)
{
	aas_html_printf(h, "<a class=\"button danger small confirm\" href=\"%s%s%s\" aria-label=\"%s\" "
	                   "data-confirm=\"%s\" data-confirm-verb=\"%s\" data-post=\"%s\" data-csrf=\"%s\"",
	                post, back ? "?back=" : "", back ? back : "", aria, question, verb, post, v->csrf);
	if (back)
		aas_html_printf(h, " data-back=\"%s\"", back);
	aas_html_printf(h, ">%s</a>", label);
}

/* ---- sandboxes ---- */

/* Extend and Destroy; from the sandbox's own page (`back`), they come back to it. */
static void sandbox_actions(struct aas_html *h, const struct aas_viewer *v, const saas_sandbox *sb, bool back)
{
	const char *here = back ? "<input type=\"hidden\" name=\"back\" value=\"sandbox\">" : "";
	char action[128], aria[SAAS_ID_MAX + 16], question[SAAS_ID_MAX + 160];

	if (sb->status == SAAS_SANDBOX_DESTROYED)
		return;
	aas_html_raw(h, "<div class=\"actions\">");
	if (sb->status == SAAS_SANDBOX_READY) {
		snprintf(action, sizeof(action), "/dashboard/sandboxes/%s/extend", sb->id);
		form_begin(h, v, "extend", action);
		aas_html_raw(h, here);
		aas_html_printf(h, "<label class=\"vh\" for=\"extend-%s\">Minutes to add to %s</label>"
		                   "<input id=\"extend-%s\" name=\"minutes\" type=\"number\" min=\"1\" max=\"%d\" "
		                   "value=\"%d\" required class=\"minutes\"><span class=\"unit\" aria-hidden=\"true\">min"
		                   "</span> <button type=\"submit\" class=\"secondary small\">Extend</button></form>",
		                sb->id, sb->id, sb->id, EXTEND_MINUTES_MAX, EXTEND_MINUTES_DEFAULT);
	}
	snprintf(action, sizeof(action), "/dashboard/sandboxes/%s/destroy", sb->id);
	snprintf(aria, sizeof(aria), "Destroy %s", sb->id);
	snprintf(question, sizeof(question), "Destroy sandbox %s? Its VM stops and its disk is deleted, with every file "
	                                     "in it. This cannot be undone.", sb->id);
	confirm_link(h, v, action, back ? "sandbox" : NULL, "Destroy", aria, question, "Destroy sandbox");
	aas_html_raw(h, "</div>");
}

/* A status as a badge; the cell's text is still the status' name. */
static void status_badge(struct aas_html *h, const char *status)
{
	aas_html_printf(h, "<span class=\"badge badge-%s\">%s</span>", status, status);
}

static void sandbox_row(struct aas_html *h, const struct aas_viewer *v, const saas_sandbox *sb, int64_t now)
{
	const char *status = saas_sandbox_status_name(sb->status);
	char b1[40], b2[40], b3[40];

	/* The image under the id, so that the row fits a laptop's width with its actions. */
	aas_html_printf(h, "<tr id=\"sandbox-%s\" data-status=\"%s\"><th scope=\"row\" data-label=\"Sandbox\">"
	                   "<span class=\"two-lines\"><a href=\"/dashboard/sandboxes/%s\" class=\"id\">%s</a> "
	                   "<span class=\"muted\"><span class=\"vh\">image </span>%s</span></span></th>"
	                   "<td class=\"status\" data-label=\"Status\">",
	                sb->id, status, sb->id, sb->id, sb->image);
	status_badge(h, status);
	aas_html_printf(h, "</td><td data-label=\"Size\"><span class=\"two-lines\">%s <span class=\"muted\">%u vCPU · "
	                   "%u MiB · %u GiB</span></span></td>"
	                   "<td data-label=\"Age\"><time datetime=\"%s\">%s</time></td>",
	                sb->size, sb->vcpus, sb->memory_mb, sb->disk_gb, when(b2, sb->created_at_ms),
	                span(b1, now - sb->created_at_ms));
	if (sb->status == SAAS_SANDBOX_DESTROYED)
		aas_html_printf(h, "<td data-label=\"Expires\" class=\"muted\">ended %s ago (%s)</td>",
		                span(b2, now - sb->destroyed_at_ms), saas_end_reason_name(sb->end_reason));
	else
		aas_html_printf(h, "<td data-label=\"Expires\"><time datetime=\"%s\" data-expires=\"%lld\">in %s</time></td>",
		                when(b3, sb->expires_at_ms), (long long)sb->expires_at_ms, span(b2, sb->expires_at_ms - now));
	aas_html_printf(h, "<td class=\"cost num\" data-label=\"Cost so far\">%s</td><td data-label=\"Actions\">",
	                usd(b1, sb->cost_usd_micro));
	sandbox_actions(h, v, sb, false);
	aas_html_raw(h, "</td></tr>");
}

/* What a person does first, when there is nothing to list: the call that makes a sandbox. */
static void no_sandboxes(struct aas_html *h)
{
	aas_html_raw(h, "<div class=\"empty\" id=\"no-sandboxes\"><p><strong>No sandboxes yet</strong> — create one "
	                "with the API, using a key from <a href=\"/dashboard/keys\">API keys</a>:</p>"
	                "<pre><code>curl -X POST -H \"Authorization: Bearer $AAS_API_KEY\" \\\n"
	                "     -H 'Content-Type: application/json' -d '{}' $AAS_BASE_URL/v1/sandboxes</code></pre>"
	                "<p>or <code>aas create</code>, or an agent over <a href=\"/docs/mcp\">MCP</a>. The "
	                "<a href=\"/docs\">quick start</a> goes from there to a command running in it.</p></div>");
}

/* The account's live sandboxes and its most recent ended ones, as one table. */
static void sandbox_table(struct aas_html *h, const struct aas_viewer *v, const saas_sandbox_list *live,
                          const saas_sandbox_list *ended)
{
	int64_t now = aas_now_ms();

	if (!live->count && !ended->count) {
		no_sandboxes(h);
		return;
	}
	aas_html_raw(h, "<div class=\"table-wrap\"><table id=\"sandboxes\" class=\"cards-narrow\"><caption class=\"vh\">"
	                "Live sandboxes, then the latest that ended</caption><thead><tr>"
	                "<th scope=\"col\">Sandbox and image</th><th scope=\"col\">Status</th><th scope=\"col\">Size</th>"
	                "<th scope=\"col\">Age</th><th scope=\"col\">Expires</th>"
	                "<th scope=\"col\" class=\"num\">Cost so far</th><th scope=\"col\">Actions</th></tr></thead><tbody>");
	for (size_t i = 0; i < live->count; i++)
		sandbox_row(h, v, live->items[i], now);
	for (size_t i = 0; i < ended->count; i++)
		sandbox_row(h, v, ended->items[i], now);
	aas_html_raw(h, "</tbody></table></div>");
}

/*
 * The account at a glance: balance (#balance), what was credited and spent,
 * and, given live >= 0, the live sandboxes of the most it may run at once.
 */
static void stats(struct aas_html *h, const saas_account_info *ai, long live)
{
	char b1[40], b2[40], b3[40];

	aas_html_printf(h, "<dl class=\"stats\"><div class=\"stat\"><dt>Balance</dt><dd id=\"balance\">%s</dd>",
	                usd(b1, ai->balance_usd_micro));
	if (live >= 0)
		aas_html_raw(h, "<dd class=\"sub\"><a href=\"/dashboard/usage\">Usage and billing</a></dd>");
	aas_html_printf(h, "</div><div class=\"stat\"><dt>Credited</dt><dd>%s</dd></div>"
	                   "<div class=\"stat\"><dt>Spent</dt><dd>%s</dd></div>",
	                usd(b2, ai->credit_usd_micro), usd(b3, ai->spent_usd_micro));
	if (live >= 0)
		aas_html_printf(h, "<div class=\"stat\"><dt>Live sandboxes</dt><dd id=\"live-count\">%ld</dd>"
		                   "<dd class=\"sub\">of %u at once</dd></div>",
		                live, ai->limits->max_sandboxes);
	aas_html_raw(h, "</dl>");
}

/* Reply with the page, or with the failure that cut it short. */
static void page_end(struct aas_req *r, struct aas_reply *out, struct aas_html *h, int rc, unsigned int status)
{
	if (rc < 0) {
		aas_html_free(h);
		aas_reply_page_saas(r, out, rc, "Cannot show this page");
		return;
	}
	aas_html_end(h);
	aas_reply_html(out, status, h);
}

void aas_h_dashboard(struct aas_req *r, struct aas_reply *out)
{
	struct aas_html h = { 0 };
	struct aas_viewer v;
	saas_account_info *ai = NULL;
	saas_sandbox_list *live = NULL, *ended = NULL;
	int rc;

	if (!aas_viewer_get(r, out, &v, true))
		return;
	if ((rc = saas_account_info_get(&ai, v.client)) < 0 ||
	    (rc = saas_sandbox_list_get(&live, v.client, NULL, LIST_LIVE_MAX, SAAS_LIST_ACTIVE)) < 0 ||
	    (rc = saas_sandbox_list_get(&ended, v.client, NULL, LIST_RECENT_MAX, SAAS_LIST_DESTROYED)) < 0)
		goto out;
	page_begin(&h, &v, "Sandboxes", "sandboxes");
	stats(&h, ai, (long)live->count);
	aas_html_raw(&h, "<section class=\"panel\" aria-labelledby=\"sandboxes-heading\"><div class=\"panel-head\">"
	                 "<h2 id=\"sandboxes-heading\">Sandboxes</h2><p class=\"muted\">Live ones first, then the latest "
	                 "that ended</p></div>");
	sandbox_table(&h, &v, live, ended);
	aas_html_raw(&h, "</section>");
out:
	page_end(r, out, &h, rc, 200);
	saas_sandbox_list_free(live);
	saas_sandbox_list_free(ended);
	saas_account_info_free(ai);
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

/* The path the confirmation's Cancel goes back to: the sandbox's page when it came from there. */
static const char *cancel_to(char where[128], const char *back, const char *id)
{
	if (back && strcmp(back, "sandbox") == 0)
		snprintf(where, 128, "/dashboard/sandboxes/%s", id);
	else
		snprintf(where, 128, "%s", "/dashboard");
	return where;
}

/*
 * GET of the destroy path: the question Destroy asks without JavaScript, a
 * page with the sandbox and a form that posts to the same path, or Cancel.
 */
void aas_h_dash_sandbox_destroy_page(struct aas_req *r, struct aas_reply *out)
{
	struct aas_html h = { 0 };
	struct aas_viewer v;
	saas_sandbox *sb = NULL;
	const char *back = NULL;
	char action[128], where[128], b1[40], b2[40];
	int rc;

	if (!aas_query(r, "back", &back, out) || !aas_viewer_get(r, out, &v, true))
		return;
	if ((rc = saas_sandbox_get(&sb, v.client, r->route_id)) == SAAS_ENOTFOUND || rc == SAAS_EINVAL) {
		aas_reply_page_error(r, out, 404, "No such sandbox", "This account has no sandbox with that id.");
		goto out;
	}
	page_begin(&h, &v, "Destroy this sandbox?", "dashboard");
	if (rc < 0)
		goto end;
	if (sb->status == SAAS_SANDBOX_DESTROYED) {
		aas_html_printf(&h, "<p id=\"already-destroyed\">Sandbox <code>%s</code> has ended already (%s).</p>"
		                    "<p><a class=\"button secondary\" href=\"%s\">Back</a></p>",
		                sb->id, saas_end_reason_name(sb->end_reason), cancel_to(where, back, sb->id));
		goto end;
	}
	aas_html_printf(&h, "<section class=\"panel confirm-panel\" aria-labelledby=\"confirm-what\">"
	                    "<p id=\"confirm-what\">Sandbox <code>%s</code> (%s, %s) stops, and its disk is deleted with "
	                    "every file in it. Its preview links stop working. This cannot be undone.</p>"
	                    "<dl class=\"facts\"><dt>Status</dt><dd>%s</dd><dt>Created</dt><dd>%s</dd>"
	                    "<dt>Cost so far</dt><dd>%s</dd></dl>",
	                sb->id, sb->size, sb->image, saas_sandbox_status_name(sb->status), minute(b1, sb->created_at_ms),
	                usd(b2, sb->cost_usd_micro));
	snprintf(action, sizeof(action), "/dashboard/sandboxes/%s/destroy", sb->id);
	form_begin(&h, &v, "destroy confirm-form", action);
	if (back && strcmp(back, "sandbox") == 0)
		aas_html_raw(&h, "<input type=\"hidden\" name=\"back\" value=\"sandbox\">");
	aas_html_printf(&h, "<div class=\"buttons\"><button type=\"submit\" class=\"danger\" id=\"confirm-destroy\">"
	                    "Destroy sandbox</button> <a class=\"button secondary\" id=\"cancel\" href=\"%s\">Cancel</a>"
	                    "</div></form></section>",
	                cancel_to(where, back, sb->id));
end:
	page_end(r, out, &h, rc, 200);
out:
	saas_sandbox_free(sb);
	aas_viewer_free(&v);
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
		aas_reply_page_saas(r, out, rc, "Cannot destroy");
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
		aas_reply_page_saas(r, out, rc, "Cannot extend");
		goto out;
	}
	back_to(out, &f, r->route_id);
out:
	aas_form_free(&f);
	aas_viewer_free(&v);
}

/* ---- usage and balance ---- */

/* The spans the chart offers beside `days`, which may be any other from 1 to CHART_DAYS_MAX. */
static const unsigned int chart_spans[] = { 7, 14, 30, 90 };

/*
 * Spend per day over the last `days` days (UTC), as the SVG chart of chart.c,
 * with the same numbers in a table for screen readers and text browsers.
 */
static int spend_chart(struct aas_html *h, const struct aas_viewer *v, unsigned int days)
{
	int64_t now = aas_now_ms(), today = now - now % DAY_MS, first = today - (int64_t)(days - 1) * DAY_MS;
	int64_t spend[CHART_DAYS_MAX];
	char b1[40], b2[40];
	int rc = SAAS_OK;

	for (unsigned int i = 0; i < days; i++) {
		saas_usage *u = NULL;
		int64_t from = first + (int64_t)i * DAY_MS;

		if ((rc = saas_usage_get(&u, v->client, from, from + DAY_MS, 0)) < 0)
			return rc;
		spend[i] = u->total_usd_micro;
		saas_usage_free(u);
	}
	aas_html_raw(h, "<section class=\"panel\" aria-labelledby=\"spend-heading\"><div class=\"panel-head\">"
	                "<h2 id=\"spend-heading\">Spend per day</h2><nav aria-label=\"Days the chart shows\" "
	                "class=\"segmented\"><ul>");
	for (size_t i = 0; i < sizeof(chart_spans) / sizeof(chart_spans[0]); i++) {
		aas_html_printf(h, "<li><a href=\"/dashboard/usage?days=%u\"", chart_spans[i]);
		if (chart_spans[i] == days)
			aas_html_raw(h, " aria-current=\"page\"");
		aas_html_printf(h, ">%u days</a></li>", chart_spans[i]);
	}
	aas_html_raw(h, "</ul></nav></div>");
	aas_chart_spend(h, spend, days, first);
	aas_html_raw(h, "<details><summary>Spend per day as a table</summary><table id=\"spend-per-day\"><thead><tr>"
	                "<th scope=\"col\">Day</th><th scope=\"col\" class=\"num\">Spend</th></tr></thead><tbody>");
	for (unsigned int i = days; i-- > 0;) {
		saas_time_format(b1, sizeof(b1), first + (int64_t)i * DAY_MS);
		b1[10] = '\0';
		aas_html_printf(h, "<tr><td>%s</td><td class=\"num\">%s</td></tr>", b1, usd(b2, spend[i]));
	}
	aas_html_raw(h, "</tbody></table></details></section>");
	return rc;
}

/* The period's form, its dates as given (or empty), and its sandboxes with what each cost. */
static int usage_lines(struct aas_html *h, const struct aas_viewer *v, int64_t from, int64_t to, const char *from_text,
                       const char *to_text)
{
	saas_usage *u = NULL;
	char b1[40], b2[40], b3[40], b4[40];
	int rc;

	if ((rc = saas_usage_get(&u, v->client, from, to, 0)) < 0)
		return rc;
	aas_html_printf(h, "<section class=\"panel\" aria-labelledby=\"period-heading\"><h2 id=\"period-heading\">"
	                   "Sandboxes in a period</h2><form method=\"get\" action=\"/dashboard/usage\" id=\"period\" "
	                   "class=\"inline-form\"><div class=\"field\"><label for=\"from\">From</label> <input id=\"from\" "
	                   "name=\"from\" type=\"date\" value=\"%s\"></div><div class=\"field\"><label for=\"to\">To</label> "
	                   "<input id=\"to\" name=\"to\" type=\"date\" value=\"%s\"></div>"
	                   "<button type=\"submit\" class=\"secondary\">Show</button></form>"
	                   "<p id=\"period-total\">From %s to %s: <strong>%s</strong> for %s of sandbox time.</p>",
	                from_text ? from_text : "", to_text ? to_text : "", minute(b1, u->from_ms), minute(b2, u->to_ms),
	                usd(b3, u->total_usd_micro), span(b4, u->total_seconds * 1000));
	if (!u->count) {
		aas_html_raw(h, "<div class=\"empty\" id=\"no-usage\"><p><strong>No sandbox ran in this period.</strong> "
		                "A sandbox costs only while it runs, by the second.</p></div>");
	} else {
		aas_html_raw(h, "<div class=\"table-wrap\"><table id=\"usage-lines\" class=\"cards-narrow\"><thead><tr>"
		                "<th scope=\"col\">Sandbox</th><th scope=\"col\">Size</th><th scope=\"col\">Time run</th>"
		                "<th scope=\"col\" class=\"num\">Cost</th></tr></thead><tbody>");
		for (size_t i = 0; i < u->count; i++) {
			const saas_usage_line *l = u->lines[i];

			aas_html_printf(h, "<tr><td data-label=\"Sandbox\"><span><a href=\"/dashboard/sandboxes/%s\" class=\"id\">"
			                   "%s</a>", l->sandbox_id, l->sandbox_id);
			if (l->running)
				aas_html_raw(h, " <span class=\"badge badge-ready\">running</span>");
			aas_html_printf(h, "</span></td><td data-label=\"Size\">%s</td><td data-label=\"Time run\">%s</td>"
			                   "<td data-label=\"Cost\" class=\"num\">%s</td></tr>",
			                l->size, span(b1, l->seconds * 1000), usd(b2, l->cost_usd_micro));
		}
		aas_html_raw(h, "</tbody></table></div>");
	}
	aas_html_raw(h, "</section>");
	saas_usage_free(u);
	return SAAS_OK;
}

static void prices_and_limits(struct aas_html *h, const saas_account_info *ai)
{
	const saas_limits *l = ai->limits;
	char b1[40], b2[40];

	aas_html_raw(h, "<div class=\"columns\"><section class=\"panel\" aria-labelledby=\"prices-heading\">"
	                "<h2 id=\"prices-heading\">Prices</h2><div class=\"table-wrap\"><table id=\"prices\" class=\"cards-narrow\"><thead><tr>"
	                "<th scope=\"col\">Size</th><th scope=\"col\">vCPU</th><th scope=\"col\">Memory</th>"
	                "<th scope=\"col\">Disk</th><th scope=\"col\" class=\"num\">Per hour</th></tr></thead><tbody>");
	for (size_t i = 0; i < ai->nsizes; i++)
		aas_html_printf(h, "<tr><th scope=\"row\" data-label=\"Size\">%s</th><td data-label=\"vCPU\">%u</td>"
		                   "<td data-label=\"Memory\">%u MiB</td><td data-label=\"Disk\">%u GiB</td>"
		                   "<td data-label=\"Per hour\" class=\"num\">%s</td></tr>",
		                ai->sizes[i]->name, ai->sizes[i]->vcpus, ai->sizes[i]->memory_mb, ai->sizes[i]->disk_gb,
		                usd(b1, ai->sizes[i]->usd_micro_per_hour));
	aas_html_printf(h, "</tbody></table></div></section><section class=\"panel\" aria-labelledby=\"limits-heading\">"
	                   "<h2 id=\"limits-heading\">Limits</h2><dl id=\"limits\" class=\"facts\">"
	                   "<dt>Sandboxes at once</dt><dd>%u</dd><dt>Lifetime</dt><dd>%s by default, at most %s</dd>"
	                   "<dt>Executions at once</dt><dd>%u</dd><dt>Creates per minute</dt><dd>%u</dd>"
	                   "<dt>API requests per second, per key</dt><dd>%u</dd></dl></section></div>",
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
	if ((rc = saas_account_info_get(&ai, v.client)) < 0)
		goto out;
	page_begin(&h, &v, "Usage and billing", "usage");
	stats(&h, ai, -1);
	if ((rc = spend_chart(&h, &v, days)) < 0 || (rc = usage_lines(&h, &v, from, to, from_text, to_text)) < 0)
		goto out;
	prices_and_limits(&h, ai);
	aas_html_raw(&h, "<p>Every limit of this server, and what happens past it: <a href=\"/docs/limits\">Limits, "
	                 "prices and startup times</a>.</p>");
out:
	page_end(r, out, &h, rc, 200);
	saas_account_info_free(ai);
	aas_viewer_free(&v);
}

/* ---- for the dashboard's other files (internal.h) ---- */

void aas_dash_begin(struct aas_html *h, const struct aas_viewer *v, const char *title, const char *tab)
{
	page_begin(h, v, title, tab);
}

void aas_dash_end(struct aas_req *r, struct aas_reply *out, struct aas_html *h, int rc, unsigned int status)
{
	page_end(r, out, h, rc, status);
}

void aas_dash_form(struct aas_html *h, const struct aas_viewer *v, const char *cls, const char *action)
{
	form_begin(h, v, cls, action);
}

bool aas_dash_form_ok(struct aas_req *r, struct aas_reply *out, const struct aas_viewer *v, struct aas_form *f)
{
	return form_ok(r, out, v, f);
}

const char *aas_dash_usd(char buf[40], int64_t micro)
{
	return usd(buf, micro);
}

const char *aas_dash_minute(char buf[40], int64_t ms)
{
	return minute(buf, ms);
}

void aas_dash_confirm_link(struct aas_html *h, const struct aas_viewer *v, const char *post, const char *back,
                           const char *label, const char *aria, const char *question, const char *verb)
{
	confirm_link(h, v, post, back, label, aria, question, verb);
}

void aas_dash_badge(struct aas_html *h, const char *status)
{
	status_badge(h, status);
}

/* ---- for the sandbox's page (dashboard_sandbox.c, dashboard_files.c) ---- */

const char *aas_dash_when(char buf[40], int64_t ms)
{
	return when(buf, ms);
}

const char *aas_dash_span(char buf[40], int64_t ms)
{
	return span(buf, ms);
}

void aas_dash_sandbox_actions(struct aas_html *h, const struct aas_viewer *v, const saas_sandbox *sb, bool back)
{
	sandbox_actions(h, v, sb, back);
}
