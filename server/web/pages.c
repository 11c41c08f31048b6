/*
 * The service's own pages: / (what this server is), /docs (the quick start
 * and the guides, the repository's Markdown as built in), /docs/api (the
 * interactive reference of /openapi.json), /docs/limits (this server's sizes,
 * prices and limits, and the measured startup times), /security (the
 * security model), and /static/ (the style sheet and the viewer's files).
 *
 * Everything is served by this server: the Markdown and the style sheet are
 * built into the binary (embed_files.cmake), so they always match its
 * version; the API viewer (Swagger UI) is installed beside it by the
 * scripts, from npm, and served read-only from --docs-viewer: a page
 * without it still lists the operations.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "web/html.h"
#include "web/internal.h"

/* One document of the repository and its page. */
struct doc {
	const struct aas_embedded_file *file;
	char *url;   /* "/docs/rest" */
	char *title; /* its first heading's text */
	char *html;  /* rendered once, at start */
};

static const struct aas_config *config;
static struct doc *docs;
static size_t ndocs;
static char *viewer_dir;
static char *operations_html; /* the operations of openapi.json, as a table: the page without the viewer */

/*
 * The files /docs/api's viewer and the dashboard's terminal load, and the only
 * ones /static/viewer/ serves: each by its name there, from where it is under
 * --docs-viewer (the npm packages' own layout, as `npm ci` left it).
 */
#define VIEWER_JS "text/javascript; charset=utf-8"
#define VIEWER_CSS "text/css; charset=utf-8"
static const struct {
	const char *name, *path, *type;
} viewer_files[] = {
	{ "swagger-ui-bundle.js", "node_modules/swagger-ui-dist/swagger-ui-bundle.js", VIEWER_JS },
	{ "swagger-ui.css", "node_modules/swagger-ui-dist/swagger-ui.css", VIEWER_CSS },
	/* xterm.js's browser builds (UMD: a <script> sets window.Terminal, window.FitAddon). */
	{ "xterm.js", "node_modules/@xterm/xterm/lib/xterm.js", VIEWER_JS },
	{ "xterm.css", "node_modules/@xterm/xterm/css/xterm.css", VIEWER_CSS },
	{ "addon-fit.js", "node_modules/@xterm/addon-fit/lib/addon-fit.js", VIEWER_JS },
};
#define VIEWER_SWAGGER 0 /* viewer_files[] of Swagger UI's bundle */
#define VIEWER_XTERM 2   /* of xterm.js */

/*
 * The page of each document: the README is the quick start (/docs), the
 * security model has its own place (/security), the measured startup times
 * (bench/STARTUP.md) are part of /docs/limits, and the C API's guide
 * (docs/api.md) gives /docs/api to the REST reference. Every other
 * docs/NAME.md is /docs/NAME.
 */
static char *url_for(const char *path)
{
	static const struct {
		const char *path, *url;
	} fixed[] = {
		{ "README.md", "/docs" },
		{ "docs/security.md", "/security" },
		{ "bench/STARTUP.md", "/docs/limits" },
		{ "docs/api.md", "/docs/c-api" },
	};
	size_t n = strlen(path);
	char *url;

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		if (strcmp(path, fixed[i].path) == 0)
			return strdup(fixed[i].url);
	if (strncmp(path, "docs/", 5) != 0 || n < 9 || strcmp(path + n - 3, ".md") != 0 || strchr(path + 5, '/'))
		return NULL;
	if (asprintf(&url, "/docs/%.*s", (int)(n - 8), path + 5) < 0)
		return NULL;
	return url;
}

static const char *doc_url(const char *path)
{
	for (size_t i = 0; i < ndocs; i++)
		if (strcmp(docs[i].file->path, path) == 0)
			return docs[i].url;
	return strcmp(path, "server/openapi.json") == 0 ? "/openapi.json" : NULL;
}

static const struct doc *doc_at(const char *url)
{
	for (size_t i = 0; i < ndocs; i++)
		if (strcmp(docs[i].url, url) == 0)
			return &docs[i];
	return NULL;
}

/* The operations of the OpenAPI document as a table, for readers without the viewer (or JavaScript). */
static char *operations_table(void)
{
	static const char *const methods[] = { "get", "post", "put", "delete", "patch" };
	json_t *doc = json_loads(aas_openapi_json, 0, NULL), *paths = json_object_get(doc, "paths"), *ops;
	struct aas_html h = { 0 };
	const char *path;

	if (!json_is_object(paths)) {
		json_decref(doc);
		return NULL;
	}
	aas_html_raw(&h, "<table class=\"operations\"><caption>Operations of the REST API</caption>"
	                 "<thead><tr><th scope=\"col\">Method</th><th scope=\"col\">Path</th>"
	                 "<th scope=\"col\">What it does</th></tr></thead><tbody>");
	json_object_foreach(paths, path, ops) {
		for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
			json_t *op = json_object_get(ops, methods[i]);
			char upper[8];
			size_t k;

			if (!op)
				continue;
			for (k = 0; methods[i][k] && k + 1 < sizeof(upper); k++)
				upper[k] = (char)(methods[i][k] - 'a' + 'A');
			upper[k] = '\0';
			aas_html_printf(&h, "<tr><td><code>%s</code></td><td><code>%s</code></td><td>%s</td></tr>", upper, path,
			                json_string_value(json_object_get(op, "summary")));
		}
	}
	aas_html_raw(&h, "</tbody></table>");
	json_decref(doc);
	if (h.failed)
		aas_html_free(&h);
	return h.buf;
}

/* The executable's directory joined with AAS_DOCS_VIEWER_RELATIVE: a build tree and an install each find their own. */
static char *default_viewer_dir(void)
{
	char exe[PATH_MAX], *slash, *dir;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		return NULL;
	exe[n] = '\0';
	if (!(slash = strrchr(exe, '/')))
		return NULL;
	*slash = '\0';
	if (asprintf(&dir, "%s/%s", exe, AAS_DOCS_VIEWER_RELATIVE) < 0)
		return NULL;
	return dir;
}

/* Is the viewer there now? Asked at each request: installing it needs no restart. */
/* Is viewer_files[i] there to serve? */
static bool viewer_file_installed(size_t i)
{
	char path[PATH_MAX];

	if (!viewer_dir || snprintf(path, sizeof(path), "%s/%s", viewer_dir, viewer_files[i].path) >= (int)sizeof(path))
		return false;
	return access(path, R_OK) == 0;
}

static bool viewer_installed(void)
{
	return viewer_file_installed(VIEWER_SWAGGER);
}

bool aas_pages_terminal_installed(void)
{
	return viewer_file_installed(VIEWER_XTERM);
}

int aas_pages_init(const struct aas_config *cfg)
{
	config = cfg;
	if (!(docs = calloc(aas_embedded_docs_count, sizeof(*docs))))
		goto oom;
	/* Every URL first: a document's links may name one rendered after it. */
	for (size_t i = 0; i < aas_embedded_docs_count; i++) {
		docs[ndocs].file = &aas_embedded_docs[i];
		if ((docs[ndocs].url = url_for(aas_embedded_docs[i].path)))
			ndocs++;
	}
	for (size_t i = 0; i < ndocs; i++) {
		docs[i].html = aas_markdown_html(docs[i].file->text, docs[i].file->len, docs[i].file->path, doc_url,
		                                 &docs[i].title);
		if (!docs[i].html)
			goto oom;
	}
	if (!(operations_html = operations_table()))
		goto oom;
	viewer_dir = cfg->docs_viewer ? strdup(cfg->docs_viewer) : default_viewer_dir();
	if (!viewer_dir && cfg->docs_viewer)
		goto oom;
	if (aas_mcp_package_init(cfg) < 0) {
		aas_pages_free();
		return -1;
	}
	if (viewer_installed())
		aas_log(SAAS_LOG_INFO, "/docs/api: the API viewer in %s", viewer_dir);
	else
		aas_log(SAAS_LOG_INFO, "/docs/api: no API viewer in %s (it lists the operations instead; docs/pages.md)",
		        viewer_dir ? viewer_dir : "(no directory)");
	if (!aas_pages_terminal_installed())
		aas_log(SAAS_LOG_INFO, "the dashboard's terminal: no xterm.js in %s (the sandbox's page says so; "
		        "docs/pages.md)", viewer_dir ? viewer_dir : "(no directory)");
	return 0;
oom:
	aas_log(SAAS_LOG_ERROR, "out of memory rendering the docs pages");
	aas_pages_free();
	return -1;
}

void aas_pages_free(void)
{
	for (size_t i = 0; i < ndocs; i++) {
		free(docs[i].url);
		free(docs[i].title);
		free(docs[i].html);
	}
	free(docs);
	docs = NULL;
	ndocs = 0;
	free(viewer_dir);
	viewer_dir = NULL;
	free(operations_html);
	operations_html = NULL;
	aas_mcp_package_free();
	config = NULL;
}

/* ---- the pages ---- */

/* "5.000000" -> "5.00", "0.012500" -> "0.0125": dollars with the cents always, and no zeros past them. */
static const char *usd(char buf[32], int64_t micro)
{
	char *dot, *end;

	saas_usd_format(buf, 32, micro);
	if ((dot = strchr(buf, '.'))) {
		end = buf + strlen(buf);
		while (end > dot + 3 && end[-1] == '0')
			*--end = '\0';
	}
	return buf;
}

/* A length of time as people say it: "1 h", "30 min", "90 s". */
static void duration(struct aas_html *h, int64_t s)
{
	if (s >= 86400 && s % 86400 == 0)
		aas_html_printf(h, "%lld d", (long long)(s / 86400));
	else if (s >= 3600 && s % 3600 == 0)
		aas_html_printf(h, "%lld h", (long long)(s / 3600));
	else if (s >= 60 && s % 60 == 0)
		aas_html_printf(h, "%lld min", (long long)(s / 60));
	else
		aas_html_printf(h, "%lld s", (long long)s);
}

static void guides_nav(struct aas_html *h, const char *current)
{
	aas_html_raw(h, "<nav class=\"guides\" aria-label=\"Guides\"><h2>Guides</h2><ul>");
	for (size_t i = 0; i < ndocs; i++) {
		if (strcmp(docs[i].url, "/docs/limits") == 0)
			continue; /* the startup times are part of the limits page, linked below and from the main navigation */
		aas_html_printf(h, "<li><a href=\"%s\"", docs[i].url);
		if (current && strcmp(current, docs[i].url) == 0)
			aas_html_raw(h, " aria-current=\"page\"");
		aas_html_printf(h, ">%s</a></li>", docs[i].title);
	}
	aas_html_raw(h, "<li><a href=\"/docs/api\">Interactive API reference</a></li>"
	                "<li><a href=\"/docs/limits\">Limits and startup times</a></li></ul></nav>");
}

/*
 * The shell of a page for whoever looks: signed in, its header names the
 * account with "Log out", as the dashboard's does; *signed_in says which.
 */
static void page_begin(struct aas_req *r, struct aas_html *h, const char *title, const char *nav, bool *signed_in)
{
	struct aas_viewer v;
	struct aas_page page;
	bool in = aas_viewer_get(r, NULL, &v, false);

	aas_viewer_page(in ? &v : NULL, &page, title, nav);
	aas_html_begin(h, &page);
	if (signed_in)
		*signed_in = in;
	aas_viewer_free(&v);
}

/* A document's page: its rendered Markdown beside the list of guides. */
static void doc_page(struct aas_req *r, struct aas_reply *out, const struct doc *d, const char *nav)
{
	struct aas_html h = { 0 };

	page_begin(r, &h, d->title, nav, NULL);
	aas_html_raw(&h, "<div class=\"doc-layout\"><article class=\"doc\">");
	aas_html_raw(&h, d->html);
	aas_html_raw(&h, "</article>");
	guides_nav(&h, d->url);
	aas_html_raw(&h, "</div>");
	aas_html_end(&h);
	aas_reply_html(out, 200, &h);
}

static void not_found_page(struct aas_req *r, struct aas_reply *out, const char *path)
{
	struct aas_html h = { 0 };

	page_begin(r, &h, "No such page", "docs", NULL);
	aas_html_printf(&h, "<p>This server has no page at <code>%s</code>. The guides it has:</p>", path);
	guides_nav(&h, NULL);
	aas_html_end(&h);
	aas_reply_html(out, 404, &h);
}

void aas_h_page_home(struct aas_req *r, struct aas_reply *out)
{
	const saas_engine_info *info = aas_service_info();
	struct aas_html h = { 0 };
	char credit[32], origin[AAS_ORIGIN_MAX];
	bool signed_in;

	/* The commands below name this server as its clients reach it; a Host that is no name gets a placeholder. */
	if (!aas_public_origin(origin, sizeof(origin), r))
		snprintf(origin, sizeof(origin), "https://THIS-SERVER");
	page_begin(r, &h, "Sandboxes as a service", "home", &signed_in);
	aas_html_raw(&h, "<p class=\"lead\">This server runs <strong>libsaas</strong>: isolated sandboxes on demand, "
	                 "each a virtual machine of its own. Create one, run commands in it, move files in and out, "
	                 "share a server running inside it, and destroy it, through a REST API, MCP for agents, or "
	                 "the <code>aas</code> command line. You pay for the time a sandbox runs, from your credit.</p>");
	/* Signed in, the way on is the dashboard, not the sign-up. */
	if (signed_in)
		aas_html_raw(&h, "<p><a class=\"button\" id=\"to-dashboard\" href=\"/dashboard\">Go to your dashboard</a>"
		                 "</p><h2>Your account</h2><ul class=\"cards\">"
		                 "<li><a href=\"/dashboard\">Sandboxes</a><p>The live ones and the latest that ended, with "
		                 "their status, cost and expiry; extend or destroy them.</p></li>"
		                 "<li><a href=\"/dashboard/keys\">API keys</a><p>Make the key that every API request and MCP "
		                 "client sends; revoke the ones you no longer use.</p></li>"
		                 "<li><a href=\"/dashboard/usage\">Usage and billing</a><p>Your balance, spend per day, "
		                 "and what each sandbox cost.</p></li></ul><h2>Guides</h2><ul class=\"cards\">");
	else
		aas_html_raw(&h, "<h2>Start here</h2><ul class=\"cards\">");
	/* Sign-up closed: no way in offered but the log-in, and who makes accounts. */
	if (!signed_in && aas_signup_offered()) {
		aas_html_raw(&h, "<li><a href=\"/signup\">Sign up</a><p>Make an account with your email.");
		if (info && info->new_account_credit_usd_micro > 0)
			aas_html_printf(&h, " New accounts start with $%s of credit, and no card.",
			                usd(credit, info->new_account_credit_usd_micro));
		aas_html_raw(&h, "</p></li>");
	}
	if (!signed_in)
		aas_html_printf(&h, "<li><a href=\"/login\">Log in</a><p>To your dashboard: API keys, sandboxes, usage and "
		                    "balance.%s</p></li>"
		                    "<li><a href=\"/dashboard/keys\">Dashboard → API keys</a><p>Make the key that every API "
		                    "request and MCP client sends.</p></li>",
		                aas_signup_offered() ? "" : " Sign-up is closed on this server: its operator makes accounts.");
	aas_html_raw(&h, "<li><a href=\"/docs\">Quick start and guides</a><p>From a key to a sandbox running your "
	                 "command, then the REST API, MCP, the command line and the C library.</p></li>"
	                 "<li><a href=\"/docs/api\">API reference</a><p>Every operation, interactive, from "
	                 "<a href=\"/openapi.json\">/openapi.json</a> (OpenAPI 3.0).</p></li>"
	                 "<li><a href=\"/docs/mcp\">MCP for agents</a><p>Streamable HTTP at <code>/v1/mcp</code>, "
	                 "or the stdio server <code>aas-mcp</code>.</p></li>"
	                 "<li><a href=\"/docs/limits\">Limits and prices</a><p>Sizes, prices and limits in force "
	                 "here, and the measured startup times.</p></li>"
	                 "<li><a href=\"/security\">Security model</a><p>What isolates one sandbox from another and "
	                 "from this host.</p></li></ul>");
	aas_html_printf(&h, "<h2>A first sandbox</h2><p>With a key from the dashboard, the API is at <code>/v1</code> "
	                    "on this server:</p><pre><code>export AAS_API_KEY=aas_sk_... AAS_BASE_URL=%s\n"
	                    "curl -s -X POST -H \"Authorization: Bearer $AAS_API_KEY\" \\\n"
	                    "     -H 'Content-Type: application/json' -d '{}' $AAS_BASE_URL/v1/sandboxes\n"
	                    "curl -s -X POST -H \"Authorization: Bearer $AAS_API_KEY\" \\\n"
	                    "     -H 'Content-Type: application/json' -d '{\"command\": \"uname -a\"}' \\\n"
	                    "     $AAS_BASE_URL/v1/sandboxes/SANDBOX_ID/exec</code></pre>"
	                    "<p>What the server offers, without a key: <a href=\"/v1/service\">/v1/service</a>.</p>",
	                origin);
	/* The MCP package's install line, as the product description gives it, for this server (web/mcp_package.c). */
	aas_html_printf(&h, "<h2 id=\"mcp\">An agent's MCP client</h2><p>A client that launches its servers as "
	                    "processes (Claude Desktop, Claude Code, ...) runs this server's MCP package with Node "
	                    "and nothing else installed:</p><pre><code>AAS_API_KEY=aas_sk_... npx -y %s/mcp.tgz</code></pre>"
	                    "<p>A client that speaks Streamable HTTP connects to <code>%s/v1/mcp</code> with the key "
	                    "in <code>Authorization: Bearer</code>. The tools and the setup of each client: "
	                    "<a href=\"/docs/mcp\">MCP</a>.</p>",
	                origin, origin);
	aas_html_printf(&h, "<h2 id=\"e2b\">E2B's SDKs</h2><p>Code written for E2B runs here unchanged with "
	                    "<a href=\"/docs/e2b#the-environment\">the environment variables of the E2B-compatible "
	                    "API</a>:</p><pre><code>export E2B_API_KEY=e2b_... E2B_API_URL=%s/e2b "
	                    "E2B_SANDBOX_URL=%s/e2b-sandbox</code></pre><p>The dashboard shows a new key's E2B "
	                    "spelling beside it.</p>",
	                origin, origin);
	aas_html_end(&h);
	aas_reply_html(out, 200, &h);
}

void aas_h_page_docs(struct aas_req *r, struct aas_reply *out)
{
	const struct doc *d = doc_at("/docs");

	if (!d) {
		not_found_page(r, out, r->path);
		return;
	}
	doc_page(r, out, d, "docs");
}

void aas_h_page_doc(struct aas_req *r, struct aas_reply *out)
{
	const struct doc *d = doc_at(r->path);

	/* The limits and the security model have pages of their own, with other names. */
	if (!d || strcmp(d->url, "/docs/limits") == 0) {
		not_found_page(r, out, r->path);
		return;
	}
	doc_page(r, out, d, "docs");
}

void aas_h_page_security(struct aas_req *r, struct aas_reply *out)
{
	const struct doc *d = doc_at("/security");

	if (!d) {
		not_found_page(r, out, r->path);
		return;
	}
	doc_page(r, out, d, "security");
}

void aas_h_page_api(struct aas_req *r, struct aas_reply *out)
{
	struct aas_html h = { 0 };

	page_begin(r, &h, "API reference", "api", NULL);
	aas_html_raw(&h, "<p>The REST API of this server, from its OpenAPI document <a href=\"/openapi.json\">"
	                 "/openapi.json</a>. Every request but a few sends an API key: "
	                 "<code>Authorization: Bearer aas_sk_...</code>. The guide to it, with the errors and the "
	                 "limits, is <a href=\"/docs/rest\">The REST API</a>.</p>");
	if (viewer_installed()) {
		aas_html_raw(&h, "<p>“Authorize” with a key to try an operation: the request goes to this server, "
		                 "and the key stays in this page.</p>"
		                 "<link rel=\"stylesheet\" href=\"/static/viewer/swagger-ui.css\">"
		                 "<div id=\"swagger-ui\" class=\"api-viewer\"></div><noscript><p>The interactive "
		                 "reference needs JavaScript; without it, the operations are:</p>");
		aas_html_raw(&h, operations_html);
		aas_html_raw(&h, "</noscript><script src=\"/static/viewer/swagger-ui-bundle.js\"></script>"
		                 "<script src=\"/static/api.js\"></script>");
	} else {
		aas_html_raw(&h, "<p class=\"notice\" role=\"note\">The interactive viewer is not installed on this "
		                 "server; its operator installs it with the scripts (see <a href=\"/docs/pages\">The "
		                 "service's pages</a>). Meanwhile, here are the operations; any OpenAPI tool reads "
		                 "<a href=\"/openapi.json\">/openapi.json</a>.</p>");
		aas_html_raw(&h, operations_html);
	}
	aas_html_end(&h);
	aas_reply_html(out, 200, &h);
}

/* ---- /docs/limits ---- */

/*
 * A section of the limits page: a table of what is bounded, the bound on this
 * server, and what happens past it. Its tables are focusable, as the guides'
 * (markdown.c): one wider than a phone scrolls sideways, from the keyboard too.
 */
static void limits_begin(struct aas_html *h, const char *id, const char *heading)
{
	aas_html_printf(h, "<h2 id=\"%s\">%s</h2><table tabindex=\"0\"><thead><tr><th scope=\"col\">What</th>"
	                   "<th scope=\"col\">On this server</th><th scope=\"col\">Past it</th></tr></thead><tbody>",
	                id, heading);
}

static void limits_end(struct aas_html *h)
{
	aas_html_raw(h, "</tbody></table>");
}

/* A row is opened with what it bounds, its bound is written, and it is closed with what happens past it (markup). */
static void row_open(struct aas_html *h, const char *what)
{
	aas_html_printf(h, "<tr><th scope=\"row\">%s</th><td>", what);
}

static void row_close(struct aas_html *h, const char *past)
{
	aas_html_raw(h, "</td><td>");
	aas_html_raw(h, past);
	aas_html_raw(h, "</td></tr>");
}

/* "429 limit_exceeded, limit NAME": a tenant limit's answer (docs/rest.md), with its Retry-After. */
#define TOO_MANY(limit)                                                                                               \
	"<code>429 limit_exceeded</code>, <code>\"limit\": \"" limit "\"</code>, with <code>Retry-After</code>"

static void sizes_section(struct aas_html *h, const saas_engine_info *info)
{
	char buf[32];

	aas_html_raw(h, "<h2 id=\"sizes\">Sizes and prices</h2><table tabindex=\"0\"><caption>Size classes</caption>"
	                "<thead><tr><th scope=\"col\">Size</th><th scope=\"col\">vCPUs</th><th scope=\"col\">Memory</th>"
	                "<th scope=\"col\">Disk</th><th scope=\"col\">Price per hour</th></tr></thead><tbody>");
	for (size_t i = 0; i < info->nsizes; i++) {
		const saas_size *s = info->sizes[i];
		aas_html_printf(h, "<tr><th scope=\"row\">%s%s</th><td>%u</td><td>%u MiB</td><td>%u GiB</td><td>$%s</td></tr>",
		                s->name, strcmp(s->name, info->default_size) == 0 ? " (default)" : "", s->vcpus,
		                s->memory_mb, s->disk_gb, usd(buf, s->usd_micro_per_hour));
	}
	aas_html_raw(h, "</tbody></table><p>Prepaid credit, charged by the second while a sandbox runs: no minimum, "
	                "no rounding up. ");
	if (info->paused_usd_micro_per_gib_hour > 0)
		aas_html_printf(h, "A paused sandbox costs $%s per GiB-hour of its size's memory and disk. ",
		                usd(buf, info->paused_usd_micro_per_gib_hour));
	else
		aas_html_raw(h, "A paused sandbox costs nothing. ");
	if (info->new_account_credit_usd_micro > 0)
		aas_html_printf(h, "A new account starts with $%s of credit, and no card. ",
		                usd(buf, info->new_account_credit_usd_micro));
	aas_html_printf(h, "A create that names no size gets <code>%s</code>; one that names no image, <code>%s</code>.</p>",
	                info->default_size, info->default_image);
}

static void sandbox_limits(struct aas_html *h, const saas_limits *l)
{
	limits_begin(h, "sandboxes", "Sandboxes, per account");
	row_open(h, "Sandboxes not yet destroyed");
	aas_html_printf(h, "%u", l->max_sandboxes);
	row_close(h, TOO_MANY("max_sandboxes") ": destroy one");
	row_open(h, "Creates per minute");
	aas_html_printf(h, "%u", l->creates_per_minute);
	row_close(h, TOO_MANY("creates_per_minute") " until one is back");
	row_open(h, "Lifetime");
	duration(h, l->default_timeout_s);
	aas_html_raw(h, " unless the create asks for another; at most ");
	duration(h, l->max_timeout_s);
	aas_html_raw(h, " from now, for a create or an extension");
	row_close(h, "a longer one: <code>400 invalid_argument</code>. At its expiry a sandbox is destroyed (or paused, "
	             "if it was created with <code>\"on_timeout\": \"pause\"</code>) and its billing stops");
	row_open(h, "Credit a create needs");
	duration(h, l->min_balance_s);
	aas_html_raw(h, " of its size's price");
	row_close(h, "<code>402 insufficient_credit</code>");
	row_open(h, "Room on this server");
	aas_html_raw(h, "its disk, memory and VM hosts");
	row_close(h, "a create or fork when it is short: <code>503 busy</code>; try again later");
	row_open(h, "Network");
	aas_html_raw(h, "each sandbox's policy, chosen at create: <code>isolated</code>, <code>internet</code> (never this "
	                "host's services nor private networks) or allow and deny lists "
	                "(<a href=\"/docs/sandboxes#network-policy\">network policy</a>)");
	row_close(h, "a connection outside it fails inside the sandbox; a policy the server cannot enforce: "
	             "<code>501 not_supported</code>");
	limits_end(h);
}

static void command_limits(struct aas_html *h, const saas_limits *l)
{
	limits_begin(h, "commands", "Commands");
	row_open(h, "Commands running at once, per account");
	aas_html_printf(h, "%u, background ones included", l->max_executions);
	row_close(h, TOO_MANY("max_executions"));
	row_open(h, "A command's time");
	duration(h, SAAS_EXEC_TIMEOUT_DEFAULT);
	aas_html_raw(h, " unless it asks for another; at most ");
	duration(h, SAAS_EXEC_TIMEOUT_MAX);
	row_close(h, "it is killed with what it started: <code>\"status\": \"timeout\"</code>; asking for more: "
	             "<code>400 invalid_argument</code>");
	row_open(h, "A command line");
	aas_html_printf(h, "%u KiB", SAAS_EXEC_COMMAND_MAX >> 10);
	row_close(h, "<code>400 invalid_argument</code>");
	row_open(h, "Its input (stdin)");
	aas_html_printf(h, "%u MiB", SAAS_EXEC_STDIN_MAX >> 20);
	row_close(h, "<code>413 too_large</code>");
	row_open(h, "Its output kept, each of stdout and stderr");
	aas_html_printf(h, "%u MiB unless it asks for more (<code>max_output</code>), at most %u MiB",
	                SAAS_EXEC_OUTPUT_DEFAULT >> 20, SAAS_EXEC_OUTPUT_MAX >> 20);
	row_close(h, "the rest is cut, and <code>stdout_truncated</code> or <code>stderr_truncated</code> says so");
	row_open(h, "Finished commands and their output are kept");
	duration(h, l->execution_retention_s);
	row_close(h, "deleted: <code>404 not_found</code>");
	limits_end(h);
}

static void file_limits(struct aas_html *h)
{
	limits_begin(h, "files", "Files");
	row_open(h, "A file moved in or out");
	aas_html_printf(h, "%lld MiB", (long long)(SAAS_FILE_MAX >> 20));
	row_close(h, "<code>413 too_large</code>");
	row_open(h, "Uploads and downloads under way at once, per account");
	aas_html_printf(h, "%u", config->max_transfers ? config->max_transfers : SAAS_MAX_TRANSFERS_DEFAULT);
	row_close(h, TOO_MANY("max_transfers"));
	row_open(h, "A path");
	aas_html_printf(h, "each name at most %u bytes, the whole under %u bytes", SAAS_NAME_MAX, SAAS_PATH_MAX);
	row_close(h, "<code>400 invalid_argument</code>");
	row_open(h, "Where the sandbox's user may read and write");
	aas_html_raw(h, "<code>/workspace</code>, its home and <code>/tmp</code>");
	row_close(h, "elsewhere: <code>403 permission_denied</code>");
	limits_end(h);
}

static void request_limits(struct aas_html *h, const saas_limits *l)
{
	limits_begin(h, "requests", "API requests");
	row_open(h, "Requests per second, per API key");
	aas_html_printf(h, "%u, in bursts of up to 2 s' worth", l->requests_per_second);
	row_close(h, TOO_MANY("requests_per_second"));
	row_open(h, "Requests per second from one address without a valid key");
	aas_html_printf(h, "%u (the pages, MCP discovery, unknown keys; IPv6 by /64)", config->address_rate);
	row_close(h, TOO_MANY("requests_per_address"));
	row_open(h, "Connections one address holds at once");
	aas_html_printf(h, "%u", config->per_ip_connections);
	row_close(h, "more are closed as they open");
	row_open(h, "A JSON request body");
	aas_html_printf(h, "%zu MiB (%zu KiB on <code>/v1/mcp</code> without a key), and a bound on its values and "
	                   "their nesting (<a href=\"/docs/rest#conventions\">the REST guide</a>)",
	                AAS_JSON_BODY_MAX >> 20, AAS_ANON_BODY_MAX >> 10);
	row_close(h, "<code>413 too_large</code>");
	row_open(h, "A request's headers, then its body, arrive within");
	aas_html_printf(h, "%u s, then %u s plus 1 s per 64 KiB", config->header_timeout_s, config->body_timeout_s);
	row_close(h, "the connection is closed");
	limits_end(h);
}

/* A row whose bound is one figure: a count with the words after it, or a duration. */
struct limit_row {
	const char *what;     /* what it bounds */
	bool seconds;         /* value is a duration in seconds, else a count */
	int64_t value;
	const char *after;    /* a count's words after it (markup), or "" */
	const char *past;     /* what happens past it (markup) */
};

static void limit_rows(struct aas_html *h, const struct limit_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		row_open(h, rows[i].what);
		if (rows[i].seconds) {
			duration(h, rows[i].value);
		} else {
			aas_html_printf(h, "%lld", (long long)rows[i].value);
			aas_html_raw(h, rows[i].after);
		}
		row_close(h, rows[i].past);
	}
}

static void terminal_limits(struct aas_html *h)
{
	const struct limit_row rows[] = {
		{ "A frame the terminal's client sends", false, config->pty_frame_max, " bytes",
		  "closed with <code>1009</code>" },
		{ "Silence both ways", true, config->pty_idle_timeout_s, "", "closed with <code>1001</code>" },
		{ "A shell taking none of its input", true, config->pty_write_timeout_s, "", "closed with <code>1008</code>" },
	};

	limits_begin(h, "terminals", "Terminals");
	row_open(h, "Terminals open at once");
	aas_html_printf(h, "%u per sandbox, %u per account", config->pty_per_sandbox, config->pty_per_account);
	row_close(h, TOO_MANY("pty_sessions"));
	limit_rows(h, rows, sizeof(rows) / sizeof(rows[0]));
	limits_end(h);
}

static void preview_limits(struct aas_html *h, const saas_engine_info *info)
{
	const struct limit_row rows[] = {
		{ "Preview requests per second from one address", false, config->preview_rate, ", apart from the API's",
		  TOO_MANY("preview_requests_per_address") },
		{ "Previews served at once by this server", false, config->preview_connections, "",
		  "<code>503 busy</code>, with <code>Retry-After: 1</code>" },
		{ "The sandbox's server takes the connection within", true, config->preview_connect_timeout_s, "",
		  "<code>504 timeout</code>" },
		{ "... and sends its answer's head within", true, config->preview_first_byte_timeout_s, "",
		  "<code>504 timeout</code>" },
		{ "A body or WebSocket silent both ways", true, config->preview_idle_timeout_s, "",
		  "closed (a body is cut short)" },
	};

	limits_begin(h, "previews", "Preview URLs");
	row_open(h, "A port exposed from a sandbox is served at");
	aas_html_printf(h, "<code>%s</code>", info->preview_url);
	row_close(h, "an unknown name: <code>404</code>");
	limit_rows(h, rows, sizeof(rows) / sizeof(rows[0]));
	limits_end(h);
}

void aas_h_page_limits(struct aas_req *r, struct aas_reply *out)
{
	const saas_engine_info *info = aas_service_info();
	const struct doc *startup = doc_at("/docs/limits");
	struct aas_html h = { 0 };

	(void)r;
	page_begin(r, &h, "Limits, prices and startup times", "limits", NULL);
	aas_html_raw(&h, "<p>What this server allows, as it is configured now. Its operator may set other limits for "
	                 "one account: <a href=\"/dashboard/usage\">the dashboard</a> and <code>GET /v1/account</code> "
	                 "give yours. Past a limit the API answers with the status and error <code>code</code> shown "
	                 "(<a href=\"/docs/rest#errors\">errors</a>); a <code>429</code> says which limit in "
	                 "<code>error.limit</code> and when to try again in <code>Retry-After</code>.</p>");
	if (info) {
		sizes_section(&h, info);
		if (info->limits) {
			sandbox_limits(&h, info->limits);
			command_limits(&h, info->limits);
		}
	}
	file_limits(&h);
	if (info && info->limits)
		request_limits(&h, info->limits);
	terminal_limits(&h);
	if (info)
		preview_limits(&h, info);
	aas_html_raw(&h, "<h2 id=\"startup\">Measured startup times</h2>");
	if (startup)
		aas_html_raw(&h, startup->html);
	aas_html_raw(&h, "<p>These were measured by the project's benchmark, not on this server: its own times depend "
	                 "on its CPUs (KVM or not), its disks and its warm pools.</p>");
	aas_html_end(&h);
	aas_reply_html(out, 200, &h);
}

/* ---- static files ---- */

static void static_reply(struct aas_reply *out, struct MHD_Response *resp, const char *type)
{
	out->status = 200;
	out->response = resp;
	if (!resp) {
		aas_reply_error(out, 500, "out_of_memory", "out of memory");
		return;
	}
	MHD_add_response_header(resp, "Content-Type", type);
	aas_reply_common_headers(resp);
}

/* The name after the route's prefix: one path segment (the router matched it as one). */
static const char *file_name(struct aas_req *r, const char *prefix)
{
	return r->path + strlen(prefix);
}

void aas_h_static(struct aas_req *r, struct aas_reply *out)
{
	const char *name = file_name(r, "/static/");
	size_t n = strlen(name);

	for (size_t i = 0; i < aas_embedded_static_count; i++) {
		const struct aas_embedded_file *f = &aas_embedded_static[i];
		if (strcmp(f->path, name) != 0)
			continue;
		static_reply(out, MHD_create_response_from_buffer(f->len, (void *)f->text, MHD_RESPMEM_PERSISTENT),
		             n > 4 && strcmp(name + n - 4, ".css") == 0 ? "text/css; charset=utf-8"
		                                                        : "text/javascript; charset=utf-8");
		return;
	}
	aas_reply_error(out, 404, "not_found", "no static file %s", name);
}

/* Only the viewer's files named in viewer_files, read from its directory as they are now. */
void aas_h_static_viewer(struct aas_req *r, struct aas_reply *out)
{
	const char *name = file_name(r, "/static/viewer/");
	char path[PATH_MAX];
	struct stat st;
	int fd = -1;

	for (size_t i = 0; i < sizeof(viewer_files) / sizeof(viewer_files[0]); i++) {
		if (strcmp(viewer_files[i].name, name) != 0)
			continue;
		if (!viewer_dir ||
		    snprintf(path, sizeof(path), "%s/%s", viewer_dir, viewer_files[i].path) >= (int)sizeof(path) ||
		    (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
			break;
		struct MHD_Response *resp = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
		if (!resp)
			close(fd); /* else the response owns it */
		static_reply(out, resp, viewer_files[i].type);
		return;
	}
	if (fd >= 0)
		close(fd);
	aas_reply_error(out, 404, "not_found", "no viewer file %s (is the API viewer installed? see /docs/pages)", name);
}
