/*
 * A sandbox's page in the dashboard, /dashboard/sandboxes/{id}: its facts and
 * actions, a terminal, its files (dashboard_files.c), its preview links, its
 * live CPU and memory, and its running and recent executions. Like the other
 * pages it acts through the session's own client, so another account's
 * sandbox is a 404 here as in the API.
 *
 *   GET /dashboard/sandboxes/{id}       the page (?dir=D: the Files section lists D)
 *   GET /dashboard/sandboxes/{id}/use   the Use section alone, which /static/use.js fetches again
 *                                       every few seconds to redraw it
 *   GET /dashboard/sandboxes/{id}/executions/{eid}
 *                                       one execution: its command, how it ended and its output
 *                                       (so far, while it runs), as GET /v1/executions/{id} reads it;
 *                                       while it runs, /static/execution.js fetches the page again
 *                                       every few seconds to follow it, and a link reloads it
 *   GET /dashboard/sandboxes/{id}/pty   the terminal: the REST API's WebSocket (api/pty.c,
 *                                       the same bounds), opened by /static/terminal.js
 *
 * The terminal's WebSocket carries the session cookie, which a browser sends
 * from any page of the same site (another port of this host is the same
 * site). So the handshake must come from this server's own origin, exactly
 * (browsers always send Origin on one, and another site cannot forge it), and
 * carry the session's CSRF token in ?csrf=, which no other page can read.
 *
 * Everything but the terminal works without JavaScript. The terminal is
 * xterm.js and its fit addon from npm, pinned in server/viewer/package.json and
 * served from --docs-viewer with the API viewer (pages.c); a server without
 * them says so on the page.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "web/html.h"
#include "web/internal.h"

/* Executions the sandbox's page lists, newest first; and the bytes of a command it shows (up to 128 KiB each). */
#define EXECUTIONS_RECENT_MAX 20
#define COMMAND_SHOWN_MAX 200
/* The bytes of each stream an execution's page shows: the first 64 KiB (the API has them all). */
#define OUTPUT_SHOWN_MAX (64u << 10)
/* Samples in the sparklines: five minutes at the default interval (SAAS_METRICS_INTERVAL_MS_DEFAULT). */
#define USE_SHOWN 60
/* Samples in the table under them: a minute. */
#define METRICS_SHOWN 12

/* The commands running in the sandbox now, with how much they have written. */
static void executions_running(struct aas_html *h, const struct aas_viewer *v, const saas_sandbox *sb)
{
	saas_execution_list *list = NULL;
	char b1[64];
	int rc;

	aas_html_raw(h, "<h2>Running executions</h2>");
	if (sb->status == SAAS_SANDBOX_DESTROYED) {
		aas_html_raw(h, "<p>None: the sandbox has ended.</p>");
	} else if ((rc = saas_execution_list_running(&list, v->client, sb->id, 0)) < 0) {
		aas_html_printf(h, "<p class=\"error\">The running executions cannot be read now: %s.</p>",
		                aas_tenant_message(rc, "the running executions of a sandbox page"));
	} else if (!list->count) {
		aas_html_raw(h, "<p id=\"no-executions\">None.</p>");
	} else {
		aas_html_raw(h, "<table id=\"executions\"><thead><tr><th scope=\"col\">Execution</th>"
		                "<th scope=\"col\">Started</th><th scope=\"col\">Output so far (stdout, stderr)</th>"
		                "</tr></thead><tbody>");
		for (size_t i = 0; i < list->count; i++) {
			const saas_execution *e = list->items[i];

			aas_html_printf(h, "<tr id=\"execution-%s\"><td><a href=\"/dashboard/sandboxes/%s/executions/%s\">"
			                   "<code>%s</code></a></td><td>%s</td><td>%llu B, %llu B</td></tr>",
			                e->id, sb->id, e->id, e->id, aas_dash_when(b1, e->started_at_ms),
			                (unsigned long long)e->stdout_total, (unsigned long long)e->stderr_total);
		}
		aas_html_raw(h, "</tbody></table>");
	}
	saas_execution_list_free(list);
}

/* A command's first COMMAND_SHOWN_MAX bytes, cut before a UTF-8 character's continuation, then "…". */
static const char *command_shown(char buf[COMMAND_SHOWN_MAX + 4], const char *command)
{
	size_t n = strlen(command);

	if (n <= COMMAND_SHOWN_MAX)
		return command;
	n = COMMAND_SHOWN_MAX;
	while (n > 0 && ((unsigned char)command[n] & 0xc0) == 0x80)
		n--;
	memcpy(buf, command, n);
	memcpy(buf + n, "\xe2\x80\xa6", 4);
	return buf;
}

/* How an execution ended, for people: "exited 0", "failed: why", "timeout", "running". */
static void outcome(struct aas_html *h, const saas_execution *e)
{
	if (e->status == SAAS_EXEC_EXITED)
		aas_html_printf(h, "exited %d", e->exit_code);
	else if (e->status == SAAS_EXEC_FAILED && e->error && *e->error)
		aas_html_printf(h, "failed: %s", e->error);
	else
		aas_html_printf(h, "%s", saas_exec_status_name(e->status));
}

/* The sandbox's history: its latest executions, running or ended, newest first. */
static void executions_recent(struct aas_html *h, const struct aas_viewer *v, const saas_sandbox *sb)
{
	saas_execution_list *list = NULL;
	char cmd[COMMAND_SHOWN_MAX + 4], b2[40], b3[64];
	int rc;

	aas_html_raw(h, "<h2>Recent executions</h2>");
	if ((rc = saas_execution_list_get(&list, v->client, sb->id, NULL, EXECUTIONS_RECENT_MAX, 0)) < 0) {
		aas_html_printf(h, "<p class=\"error\">The executions cannot be read now: %s.</p>",
		                aas_tenant_message(rc, "the executions of a sandbox page"));
	} else if (!list->count) {
		aas_html_raw(h, "<p id=\"no-history\">None yet.</p>");
	} else {
		aas_html_raw(h, "<table id=\"history\"><thead><tr><th scope=\"col\">Command</th>"
		                "<th scope=\"col\">Status</th><th scope=\"col\">Duration</th>"
		                "<th scope=\"col\">Started</th><th scope=\"col\">Execution</th></tr></thead><tbody>");
		for (size_t i = 0; i < list->count; i++) {
			const saas_execution *e = list->items[i];

			if (e->finished_at_ms && e->duration_ms < 1000)
				snprintf(b2, sizeof(b2), "%lld ms", (long long)e->duration_ms);
			else if (e->finished_at_ms)
				aas_dash_span(b2, e->duration_ms);
			else
				snprintf(b2, sizeof(b2), "%s", "still running");
			aas_html_printf(h, "<tr id=\"ran-%s\" data-status=\"%s\"><td><code>%s</code></td><td>", e->id,
			                saas_exec_status_name(e->status), command_shown(cmd, e->command ? e->command : ""));
			outcome(h, e);
			aas_html_printf(h, "</td><td>%s</td><td>%s</td><td><a class=\"execution\" "
			                   "href=\"/dashboard/sandboxes/%s/executions/%s\"><code>%s</code></a></td></tr>",
			                b2, aas_dash_when(b3, e->started_at_ms), sb->id, e->id, e->id);
		}
		aas_html_raw(h, "</tbody></table>");
		if (list->next_cursor)
			aas_html_printf(h, "<p>The latest %u; every one: <code>GET /v1/sandboxes/%s/executions</code>.</p>",
			                (unsigned int)EXECUTIONS_RECENT_MAX, sb->id);
	}
	aas_html_raw(h, "<p>An execution's id opens its output, running or ended; the API has it too: "
	                "<code>GET /v1/executions/{id}</code>.</p>");
	saas_execution_list_free(list);
}

/* ---- use: CPU and memory ---- */

/*
 * A sparkline of n values from 0 to max, newest last: an SVG polyline, a
 * point with its value (a <title>, shown on hover) per sample, and the
 * newest value as text beside it.
 */
static void sparkline(struct aas_html *h, const char *id, const char *label, const double *val, char (*shown)[32],
                      size_t n, double max)
{
	enum { W = 300, H = 60, PAD = 3 };

	aas_html_printf(h, "<figure class=\"spark\" id=\"%s\"><figcaption>%s <strong class=\"now\">%s</strong></figcaption>"
	                   "<svg viewBox=\"0 0 %d %d\" preserveAspectRatio=\"none\" role=\"img\" aria-label=\"%s over the last %zu samples, now %s\">"
	                   "<line class=\"axis\" x1=\"0\" y1=\"%d\" x2=\"%d\" y2=\"%d\"></line><polyline points=\"",
	                id, label, n ? shown[n - 1] : "-", W, H, label, n, n ? shown[n - 1] : "-", H - PAD, W, H - PAD);
	for (size_t i = 0; i < n; i++) {
		double x = n > 1 ? (double)i * W / (double)(n - 1) : W, y = H - PAD - (max > 0 ? val[i] / max : 0) * (H - 2 * PAD);
		aas_html_printf(h, "%s%.1f,%.1f", i ? " " : "", x, y);
	}
	aas_html_raw(h, "\"></polyline>");
	for (size_t i = 0; i < n; i++) {
		double x = n > 1 ? (double)i * W / (double)(n - 1) : W, y = H - PAD - (max > 0 ? val[i] / max : 0) * (H - 2 * PAD);
		aas_html_printf(h, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\"><title>%s</title></circle>", x, y, shown[i]);
	}
	aas_html_raw(h, "</svg></figure>");
}

/* A running sandbox's last samples (saas/metrics.h) as a table: CPU, memory and disk as its host sees them. */
static void metrics_table(struct aas_html *h, const saas_sandbox *sb, const saas_metric_list *l)
{
	char b1[40];

	{
		aas_html_raw(h, "<details class=\"samples\"><summary>The last samples as a table</summary>"
		                "<div class=\"table-scroll\"><table id=\"metrics\"><thead><tr><th scope=\"col\">Sampled</th>"
		                "<th scope=\"col\">CPU</th><th scope=\"col\">Memory (MiB)</th>"
		                "<th scope=\"col\">Disk written (MiB)</th></tr></thead><tbody>");
		/* Newest first, as the executions are. */
		for (size_t i = l->count; i-- > (l->count > METRICS_SHOWN ? l->count - METRICS_SHOWN : 0);) {
			const saas_metric *m = l->items[i];

			aas_html_printf(h, "<tr><td>%s</td><td class=\"cpu\">%.2f %%</td><td class=\"memory\">%lld of %lld</td>"
			                   "<td class=\"disk\">%lld of %lld</td></tr>",
			                aas_dash_when(b1, m->at_ms), m->cpu_used_pct, (long long)(m->memory_used >> 20),
			                (long long)(m->memory_total >> 20), (long long)(m->disk_used >> 20),
			                (long long)(m->disk_total >> 20));
		}
		aas_html_printf(h, "</tbody></table></div><p>Every sample of the last hour: "
		                   "<code>GET /v1/sandboxes/%s/metrics</code>.</p></details>",
		                sb->id);
	}
}

/* The Use section's content: sparklines of CPU and memory, and the last samples as a table. */
static void use_body(struct aas_html *h, const struct aas_viewer *v, const saas_sandbox *sb)
{
	saas_metric_list *l = NULL;
	double cpu[USE_SHOWN], mem[USE_SHOWN];
	char cpu_shown[USE_SHOWN][32], mem_shown[USE_SHOWN][32], b1[40];
	size_t n, first;
	int rc;

	if (sb->status != SAAS_SANDBOX_READY) {
		aas_html_raw(h, "<p>Not running.</p>");
		return;
	}
	if ((rc = saas_sandbox_metrics_get(&l, v->client, sb->id, 0, 0, 0)) < 0) {
		aas_html_printf(h, "<p class=\"error\">Its use cannot be read now: %s.</p>",
		                aas_tenant_message(rc, "the metrics of a sandbox page"));
		return;
	}
	if (!l->count) {
		aas_html_raw(h, "<p id=\"no-metrics\">No sample yet.</p>");
		saas_metric_list_free(l);
		return;
	}
	first = l->count > USE_SHOWN ? l->count - USE_SHOWN : 0;
	n = l->count - first;
	for (size_t i = 0; i < n; i++) {
		const saas_metric *m = l->items[first + i];

		cpu[i] = m->cpu_used_pct;
		mem[i] = (double)(m->memory_used >> 20);
		snprintf(cpu_shown[i], sizeof(cpu_shown[i]), "%.1f %%", m->cpu_used_pct);
		snprintf(mem_shown[i], sizeof(mem_shown[i]), "%lld MiB", (long long)(m->memory_used >> 20));
	}
	aas_html_raw(h, "<div class=\"sparks\">");
	sparkline(h, "cpu-chart", "CPU", cpu, cpu_shown, n, 100);
	sparkline(h, "memory-chart", "Memory", mem, mem_shown, n, (double)(l->items[l->count - 1]->memory_total >> 20));
	aas_html_printf(h, "</div><p class=\"note\">Sampled every few seconds, as its host sees it; the newest at %s. "
	                   "CPU is the share of its %u vCPU used since the sample before (100 %%: all of them); memory "
	                   "what its VM holds of its %u MiB.</p>",
	                aas_dash_when(b1, l->items[l->count - 1]->at_ms), sb->vcpus, sb->memory_mb);
	metrics_table(h, sb, l);
	saas_metric_list_free(l);
}


/* ---- the terminal ---- */

static void terminal_section(struct aas_html *h, const struct aas_viewer *v, const saas_sandbox *sb)
{
	aas_html_raw(h, "<section id=\"terminal-section\" aria-labelledby=\"terminal-h\"><h2 id=\"terminal-h\">Terminal</h2>");
	if (sb->status != SAAS_SANDBOX_READY) {
		aas_html_raw(h, "<p>The sandbox is not running: no terminal.</p></section>");
		return;
	}
	if (!aas_pages_terminal_installed()) {
		aas_html_raw(h, "<p class=\"notice\" id=\"terminal-unavailable\" role=\"note\">The terminal is unavailable: "
		                "xterm.js is not installed beside this server. Its operator installs it with the API "
		                "viewer (<code>install_api_viewer</code>, see <a href=\"/docs/pages\">the pages' guide</a>). "
		                "<code>aas shell</code> opens one from the command line.</p></section>");
		return;
	}
	/* The token goes in the WebSocket's URL (?csrf=): a handshake carries no form. */
	aas_html_printf(h, "<link rel=\"stylesheet\" href=\"/static/viewer/xterm.css\">"
	                   "<div class=\"terminal-bar\"><button type=\"button\" id=\"terminal-connect\" hidden>Connect"
	                   "</button> <span id=\"terminal-status\" role=\"status\">Not connected.</span></div>"
	                   "<div id=\"terminal\" class=\"terminal\" data-ws=\"/dashboard/sandboxes/%s/pty\" "
	                   "data-csrf=\"%s\"></div><noscript><p>The terminal needs JavaScript; without it, "
	                   "<code>aas shell %s</code> opens one from the command line.</p></noscript>"
	                   "<script src=\"/static/viewer/xterm.js\" defer></script>"
	                   "<script src=\"/static/viewer/addon-fit.js\" defer></script>"
	                   "<script src=\"/static/terminal.js\" defer></script></section>",
	                sb->id, v->csrf, sb->id);
}

/* ---- the page ---- */

/* The preview links of its exposed ports: each opens the server running in the sandbox. */
static void previews(struct aas_html *h, const saas_sandbox *sb)
{
	aas_html_raw(h, "<section id=\"previews\" aria-labelledby=\"previews-h\"><h2 id=\"previews-h\">Previews</h2>");
	if (!sb->nports) {
		aas_html_raw(h, "<p id=\"no-ports\">No port is exposed. Expose one with <code>POST /v1/sandboxes/{id}/ports"
		                "</code> (or <code>aas expose</code>) to get a preview link.</p></section>");
		return;
	}
	aas_html_raw(h, "<ul id=\"ports\" class=\"previews\">");
	for (size_t i = 0; i < sb->nports; i++)
		aas_html_printf(h, "<li><span class=\"port\">Port %u</span> <a href=\"%s\" target=\"_blank\" "
		                   "rel=\"noopener noreferrer\">%s</a></li>",
		                sb->ports[i]->port, sb->ports[i]->url, sb->ports[i]->url);
	aas_html_raw(h, "</ul></section>");
}

void aas_h_dash_sandbox(struct aas_req *r, struct aas_reply *out)
{
	struct aas_html h = { 0 };
	struct aas_viewer v;
	saas_sandbox *sb = NULL;
	char title[SAAS_ID_MAX + 16], b1[40], b2[40];
	const char *dir;
	int rc;

	if (!aas_query(r, "dir", &dir, out) || !aas_viewer_get(r, out, &v, true))
		return;
	if ((rc = saas_sandbox_get(&sb, v.client, r->route_id)) == SAAS_ENOTFOUND || rc == SAAS_EINVAL) {
		aas_reply_page_error(r, out, 404, "No such sandbox", "This account has no sandbox with that id.");
		goto out;
	}
	snprintf(title, sizeof(title), "Sandbox %s", r->route_id);
	aas_dash_begin(&h, &v, title, "dashboard");
	aas_html_raw(&h, "<link rel=\"stylesheet\" href=\"/static/sandbox.css\">");
	if (rc < 0)
		goto end;
	aas_html_printf(&h, "<dl id=\"sandbox\"><dt>Status</dt><dd class=\"status\">%s</dd>"
	                    "<dt>Size</dt><dd>%s: %u vCPU, %u MiB memory, %u GiB disk</dd><dt>Image</dt><dd>%s</dd>"
	                    "<dt>Created</dt><dd>%s</dd>",
	                saas_sandbox_status_name(sb->status), sb->size, sb->vcpus, sb->memory_mb, sb->disk_gb, sb->image,
	                aas_dash_when(b1, sb->created_at_ms));
	if (sb->status == SAAS_SANDBOX_DESTROYED)
		aas_html_printf(&h, "<dt>Ended</dt><dd>%s (%s)</dd>", aas_dash_when(b1, sb->destroyed_at_ms),
		                saas_end_reason_name(sb->end_reason));
	else
		aas_html_printf(&h, "<dt>Expires</dt><dd><time datetime=\"%s\" data-expires=\"%lld\">%s</time></dd>",
		                aas_dash_when(b1, sb->expires_at_ms), (long long)sb->expires_at_ms, aas_dash_when(b2, sb->expires_at_ms));
	aas_html_printf(&h, "<dt>Cost so far</dt><dd class=\"cost\">%s</dd></dl>", aas_dash_usd(b1, sb->cost_usd_micro));
	aas_dash_sandbox_actions(&h, &v, sb, true);
	terminal_section(&h, &v, sb);
	aas_dash_files_section(&h, &v, sb, dir);
	previews(&h, sb);
	/* use.js fetches the section's body again from data-refresh, every few seconds. */
	aas_html_printf(&h, "<section id=\"use\" aria-labelledby=\"use-h\"><h2 id=\"use-h\">Use</h2>"
	                    "<div id=\"use-live\" data-refresh=\"/dashboard/sandboxes/%s/use\">", sb->id);
	use_body(&h, &v, sb);
	aas_html_raw(&h, "</div></section><script src=\"/static/use.js\" defer></script>");
	executions_running(&h, &v, sb);
	executions_recent(&h, &v, sb);
end:
	aas_dash_end(r, out, &h, rc, 200);
out:
	saas_sandbox_free(sb);
	aas_viewer_free(&v);
}

bool aas_dash_viewer_sandbox(struct aas_req *r, struct aas_reply *out, struct aas_viewer *v, saas_sandbox **sb)
{
	saas_sandbox *got = NULL;
	int rc;

	if (!aas_viewer_get(r, out, v, true))
		return false;
	if ((rc = saas_sandbox_get(&got, v->client, r->route_id)) == SAAS_OK) {
		if (sb)
			*sb = got;
		else
			saas_sandbox_free(got);
		return true;
	}
	if (rc == SAAS_ENOTFOUND || rc == SAAS_EINVAL)
		aas_reply_page_error(r, out, 404, "No such sandbox", "This account has no sandbox with that id.");
	else
		aas_reply_page_saas(r, out, rc, "Cannot show the sandbox");
	aas_viewer_free(v);
	return false;
}

void aas_h_dash_sandbox_use(struct aas_req *r, struct aas_reply *out)
{
	struct aas_html h = { 0 };
	struct aas_viewer v;
	saas_sandbox *sb = NULL;

	if (!aas_dash_viewer_sandbox(r, out, &v, &sb))
		return;
	use_body(&h, &v, sb);
	aas_reply_html(out, 200, &h);
	saas_sandbox_free(sb);
	aas_viewer_free(&v);
}

/* One stream of an execution: its first OUTPUT_SHOWN_MAX bytes, escaped (NULs and all), and what was left out. */
static void output_shown(struct aas_html *h, const char *name, const char *data, size_t len, uint64_t total,
                         int truncated)
{
	size_t n = len < OUTPUT_SHOWN_MAX ? len : OUTPUT_SHOWN_MAX;
	char *text;

	aas_html_printf(h, "<section aria-labelledby=\"%s-h\"><h2 id=\"%s-h\">%s</h2>", name, name, name);
	if (!len) {
		aas_html_printf(h, "<p id=\"no-%s\">Nothing%s.</p></section>", name,
		                total ? " kept (the command's output was past its limit)" : "");
		return;
	}
	/* A copy ends at n, and a NUL in the command's bytes shows as U+FFFD: aas_html_text stops at NUL. */
	if (!(text = malloc(n * 3 + 1))) {
		h->failed = true;
		return;
	}
	size_t w = 0;
	for (size_t i = 0; i < n; i++) {
		if (data[i]) {
			text[w++] = data[i];
		} else {
			memcpy(text + w, "\xef\xbf\xbd", 3);
			w += 3;
		}
	}
	text[w] = '\0';
	aas_html_printf(h, "<pre id=\"%s\" class=\"output\" tabindex=\"0\">", name);
	aas_html_text(h, text);
	aas_html_raw(h, "</pre>");
	free(text);
	if (n < len || truncated || total > len)
		aas_html_printf(h, "<p class=\"note\" id=\"%s-cut\">The first %zu bytes of %llu written; the API has "
		                   "the %zu kept.</p>", name, n, (unsigned long long)(total > len ? total : len), len);
	aas_html_raw(h, "</section>");
}

void aas_h_dash_execution(struct aas_req *r, struct aas_reply *out)
{
	struct aas_html h = { 0 };
	struct aas_viewer v;
	saas_sandbox *sb = NULL;
	saas_execution *e = NULL;
	char title[SAAS_ID_MAX + 16], eid[SAAS_ID_MAX + 1], b1[64], b2[64];
	const char *seg = strrchr(r->path, '/') + 1; /* the route matched ".../executions/{eid}" */
	int rc;

	if (!aas_dash_viewer_sandbox(r, out, &v, &sb))
		return;
	/* Another account's, or another sandbox's: the same 404 as an unknown one. */
	if (strlen(seg) >= sizeof(eid) || (rc = saas_execution_get(&e, v.client, seg)) == SAAS_ENOTFOUND ||
	    rc == SAAS_EINVAL || (rc == SAAS_OK && strcmp(e->sandbox_id, sb->id) != 0)) {
		aas_reply_page_error(r, out, 404, "No such execution", "This sandbox has no execution with that id.");
		goto out;
	}
	snprintf(eid, sizeof(eid), "%s", seg);
	snprintf(title, sizeof(title), "Execution %s", eid);
	aas_dash_begin(&h, &v, title, "dashboard");
	aas_html_raw(&h, "<link rel=\"stylesheet\" href=\"/static/sandbox.css\">");
	if (rc < 0)
		goto end;
	/* execution.js fetches this page again while it runs and puts its #execution-live in place of this one's. */
	aas_html_printf(&h, "<nav class=\"breadcrumbs\" aria-label=\"Sandbox\"><a href=\"/dashboard/sandboxes/%s\">"
	                    "Sandbox %s</a></nav><div id=\"execution-live\"><dl id=\"execution\" data-status=\"%s\">"
	                    "<dt>Command</dt><dd><code>",
	                sb->id, sb->id, saas_exec_status_name(e->status));
	aas_html_text(&h, e->command ? e->command : "");
	aas_html_raw(&h, "</code></dd><dt>Status</dt><dd class=\"status\">");
	outcome(&h, e);
	aas_html_raw(&h, "</dd><dt>Exit code</dt><dd class=\"exit-code\">");
	if (e->status != SAAS_EXEC_RUNNING && e->exit_code >= 0)
		aas_html_printf(&h, "%d", e->exit_code);
	else
		aas_html_raw(&h, "none");
	aas_html_printf(&h, "</dd><dt>Started</dt><dd>%s</dd>", aas_dash_when(b1, e->started_at_ms));
	if (e->finished_at_ms)
		aas_html_printf(&h, "<dt>Finished</dt><dd>%s (%lld ms)</dd>", aas_dash_when(b2, e->finished_at_ms),
		                (long long)e->duration_ms);
	else
		aas_html_printf(&h, "<dt>Finished</dt><dd>Still running: the output below is what it has written so far "
		                    "(<a id=\"execution-reload\" href=\"/dashboard/sandboxes/%s/executions/%s\">reload</a> "
		                    "for more; with JavaScript the page follows it by itself).</dd>",
		                sb->id, eid);
	aas_html_raw(&h, "</dl>");
	output_shown(&h, "stdout", e->stdout_data, e->stdout_len, e->stdout_total, e->stdout_truncated);
	output_shown(&h, "stderr", e->stderr_data, e->stderr_len, e->stderr_total, e->stderr_truncated);
	aas_html_raw(&h, "</div>");
	if (e->status == SAAS_EXEC_RUNNING)
		aas_html_raw(&h, "<p id=\"execution-follow\" class=\"note\" role=\"status\"></p>"
		                 "<script src=\"/static/execution.js\" defer></script>");
end:
	aas_dash_end(r, out, &h, rc, 200);
out:
	saas_execution_free(e);
	saas_sandbox_free(sb);
	aas_viewer_free(&v);
}

void aas_h_dash_sandbox_pty(struct aas_req *r, struct aas_reply *out)
{
	struct aas_viewer v;
	saas_client *client;
	const char *csrf;

	/* A handshake is no page: no redirect to /login, a refusal. */
	if (!aas_viewer_get(r, out, &v, false)) {
		if (!out->response)
			aas_reply_page_error(r, out, 401, "Log in first", "This terminal needs a session: log in again.");
		return;
	}
	if (!aas_origin_allowed(r, out, true) || !aas_query(r, "csrf", &csrf, out))
		goto refused;
	if (!aas_csrf_ok(csrf, v.csrf)) {
		aas_reply_page_error(r, out, 403, "Refused", "The terminal's security token is missing or out of date. "
		                                             "Reload the page.");
		goto refused;
	}
	/* The terminal holds the client until it ends; the rest of the viewer goes now. */
	client = v.client;
	v.client = NULL;
	aas_viewer_free(&v);
	aas_pty_serve(r, out, client, client);
	return;
refused:
	aas_viewer_free(&v);
}
