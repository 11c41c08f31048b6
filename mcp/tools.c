/*
 * The MCP tools' table: one entry each (name, description, annotations,
 * the function over the public libsaas API), their input and output schemas
 * (mcp/schemas/, shapes inlined), and the call that runs one (tools.h says
 * where the tools are, by area).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools.h"

/* A tool; its input and output schemas are mcp/schemas/NAME.json. */
struct tool {
	const char *name, *title, *description;
	bool read_only, destructive, idempotent, open_world;
	bool needs_client;
	unsigned int flag; /* offered only with this ctx flag */
	json_t *(*fn)(struct call *c);
};

/* Named fields, so that two hints cannot trade places unseen; a hint not named is false. */
static const struct tool tools[] = {
	{ .name = "create_sandbox",
	  .title = "Create a sandbox",
	  .description =
	  "Create a fresh Linux sandbox: a dedicated virtual machine with its own kernel, never used by anyone "
	  "before. Returns its id once commands can run in it (usually seconds); pass that sandbox_id to the other "
	  "tools. Billing is by the second while it runs. It is destroyed automatically when timeout_seconds run "
	  "out (extend_sandbox pushes that out); call destroy_sandbox when done to stop paying for the rest. Code "
	  "runs as an unprivileged user with no sudo: apt-get does not work; install with `pip install --user "
	  "--break-system-packages <pkg>` or `npm install <pkg>`. Network: `network` \"internet\" or \"isolated\", "
	  "or `allow`/`deny` lists of domain names (\"*.example.com\" for the names below it), addresses and "
	  "CIDRs for only what the job needs (set_network_policy changes it later). `envs`: variables every "
	  "command starts with; `metadata`: labels list_sandboxes shows.",
	  .open_world = true, .needs_client = true, .fn = aas_mcp_tool_create },
	{ .name = "run_command",
	  .title = "Run a shell command",
	  .description =
	  "Run a shell command (/bin/sh -c) in a sandbox as an unprivileged user, in /workspace unless cwd says "
	  "otherwise, and wait for it to finish. Returns stdout, stderr and exit_code; a non-zero exit_code is a "
	  "normal result, read stderr. There is no sudo: use `pip install --user --break-system-packages <pkg>` or "
	  "`npm install <pkg>`, not apt-get. The call holds until the command exits: start servers in the "
	  "background with `&` (e.g. `python3 -m http.server 8000 &`; they keep running after the call, and "
	  "what they print after it is dropped: add `>/tmp/http.log 2>&1` to keep it), or the call waits until "
	  "timeout_seconds and the command is killed with everything it started. Output that is not valid UTF-8 comes back base64 "
	  "(stdout_encoding/stderr_encoding say which). With a progressToken (_meta), the output also comes as "
	  "notifications/progress while the command runs.",
	  .destructive = true, .open_world = true, .needs_client = true, .fn = aas_mcp_tool_run },
	{ .name = "run_code",
	  .title = "Run code, keeping state",
	  .description =
	  "Run Python (default), JavaScript or bash in a sandbox's long-lived interpreter: variables and imports "
	  "stay for the next run_code. Returns stdout, stderr, the error if the code raised (name, value, "
	  "traceback) and results: the last expression's value and each display, in every format (text, HTML, "
	  "JSON); charts (matplotlib) come back as images. Each language has its own interpreter.",
	  .destructive = true, .open_world = true, .needs_client = true, .fn = aas_mcp_tool_code },
	{ .name = "write_file",
	  .title = "Write a file",
	  .description =
	  "Write a file in a sandbox, creating missing parent directories; an existing file is replaced. The content "
	  "travels as data, not through a shell, so quotes and newlines survive. For binary data pass it base64 "
	  "with encoding \"base64\". Relative paths are under /workspace; the sandbox user can write under "
	  "/workspace, its home and /tmp.",
	  .destructive = true, .idempotent = true, .needs_client = true, .fn = aas_mcp_tool_write },
	{ .name = "read_file",
	  .title = "Read a file",
	  .description =
	  "Read a file from a sandbox: how you get at what your code produced. Returns the content as text when it "
	  "is valid UTF-8 (encoding \"utf-8\"), otherwise base64 (encoding \"base64\"). Files over max_bytes "
	  "(default 1 MiB) are refused; read parts of big files with run_command (head, tail).",
	  .read_only = true, .idempotent = true, .needs_client = true, .fn = aas_mcp_tool_read },
	{ .name = "list_files",
	  .title = "List files",
	  .description =
	  "List a directory tree in a sandbox (default /workspace, 3 levels deep), depth first, so you can find what "
	  "a run produced. Each entry has its absolute path, type, size, octal mode and modification time.",
	  .read_only = true, .idempotent = true, .needs_client = true, .fn = aas_mcp_tool_list_files },
	{ .name = "expose_port",
	  .title = "Expose a port",
	  .description =
	  "Give a TCP port of a sandbox a public preview URL, to share a web server or API running in it. Nothing "
	  "needs to listen yet; start the server in the background with run_command (`... &`) and bind it to "
	  "0.0.0.0 or 127.0.0.1. Exposing a port again returns the same URL. Anyone with the URL reaches the port "
	  "while the sandbox lives, and that port only: each exposure has its own unguessable URL. unexpose_port "
	  "takes it back.",
	  .idempotent = true, .open_world = true, .needs_client = true, .fn = aas_mcp_tool_expose },
	{ .name = "unexpose_port",
	  .title = "Stop exposing a port",
	  .description =
	  "Take a port's preview URL back: it stops working at once, open connections (WebSockets) included. "
	  "Exposing the port again gives a new URL, so one shared before stays dead. A port that is not exposed "
	  "is fine.",
	  .destructive = true, .idempotent = true, .needs_client = true, .fn = aas_mcp_tool_unexpose },
	{ .name = "get_sandbox",
	  .title = "Get a sandbox",
	  .description =
	  "A sandbox's status (creating, ready, paused, destroyed and why), size, exposed ports, expiry and cost so "
	  "far; while it runs, its CPU, memory and disk use as the host sees it (usage).",
	  .read_only = true, .idempotent = true, .needs_client = true, .fn = aas_mcp_tool_get },
	{ .name = "list_sandboxes",
	  .title = "List sandboxes",
	  .description =
	  "Every sandbox on the account, newest first, with status, expiry and cost: useful for finding strays to "
	  "destroy. Pass next_cursor back as cursor for the next page.",
	  .read_only = true, .idempotent = true, .needs_client = true, .fn = aas_mcp_tool_list },
	{ .name = "extend_sandbox",
	  .title = "Extend a sandbox",
	  .description =
	  "Push a sandbox's expiry out by `seconds` from its current expiry, when a job outgrows its timeout. The "
	  "new lifetime may not pass the account's maximum (get_service_info shows it).",
	  .needs_client = true, .fn = aas_mcp_tool_extend },
	{ .name = "set_network_policy",
	  .title = "Change a sandbox's network access",
	  .description =
	  "Replace what a running sandbox may reach on the network: \"isolated\" (nothing), \"internet\", or "
	  "a policy: only the names and addresses in `allow` (\"pypi.org\", \"*.pythonhosted.org\" for every "
	  "name below it, \"203.0.113.0/24\", \"*\" for everything) less those in `deny`. The new policy replaces "
	  "the old one whole and applies to new connections at once. Names not allowed do not even resolve. The "
	  "host's own services and private networks are never reachable. The result shows the policy in force and "
	  "how many connections and lookups were refused.",
	  .idempotent = true, .open_world = true, .needs_client = true, .fn = aas_mcp_tool_network },
	{ .name = "destroy_sandbox",
	  .title = "Destroy a sandbox",
	  .description =
	  "Destroy a sandbox: its VM, files and running processes are gone and billing stops; the result shows the "
	  "final cost. A sandbox is destroyed anyway when it expires, but destroying it when done returns the "
	  "minutes you were not going to use. Destroying a destroyed sandbox changes nothing.",
	  .destructive = true, .idempotent = true, .needs_client = true, .fn = aas_mcp_tool_destroy },
	{ .name = "fork_sandbox",
	  .title = "Fork a sandbox",
	  .description =
	  "Make `count` (1 to 10, default 1) new sandboxes from a running one, each with its memory, running "
	  "processes and files as they are now: explore several alternatives from one prepared state. Each child is "
	  "a machine of its own (its own id, hostname and random seed), of the parent's size and image, with its "
	  "own expiry (timeout_seconds, default the account's) and billed on its own like a new sandbox. The parent "
	  "pauses only while its state is taken, then runs on. All or nothing: if one child cannot be made, none is.",
	  .open_world = true, .needs_client = true, .fn = aas_mcp_tool_fork },
	{ .name = "pause_sandbox",
	  .title = "Pause a sandbox",
	  .description =
	  "Pause a running sandbox: its memory, processes and files are saved and its VM stops. It then costs only "
	  "its paused price (get_service_info shows each size's), not its running price. Commands running in it "
	  "end (their results say so); exposed ports keep their URLs and work again after resume_sandbox. Its "
	  "expiry keeps running while it is paused (extend_sandbox works): a paused sandbox that expires is "
	  "destroyed.",
	  .needs_client = true, .fn = aas_mcp_tool_pause },
	{ .name = "resume_sandbox",
	  .title = "Resume a sandbox",
	  .description =
	  "Resume a paused sandbox on a new VM, with its processes, files and exposed ports as they were when it "
	  "was paused. Running billing starts again.",
	  .needs_client = true, .fn = aas_mcp_tool_resume },
	{ .name = "get_usage",
	  .title = "Get balance and usage",
	  .description =
	  "The account's remaining credit, limits, and what each sandbox cost over a period: the last 30 days "
	  "unless `from`/`to` (RFC 3339 times, YYYY-MM-DD dates or unix seconds, UTC; a date `to` includes that day) or `days` "
	  "say otherwise. `days` counts back from `to` (or now) and cannot be combined with `from`.",
	  .read_only = true, .idempotent = true, .needs_client = true, .fn = aas_mcp_tool_usage },
	{ .name = "get_service_info",
	  .title = "Service information",
	  .description =
	  "What this service offers, without an API key: sizes and their prices, limits, the default image, the "
	  "credit new accounts get, and how to authenticate.",
	  .read_only = true, .idempotent = true, .flag = AAS_MCP_SERVICE_INFO, .fn = aas_mcp_tool_service },
};

size_t aas_mcp_ntools(void)
{
	return sizeof(tools) / sizeof(tools[0]);
}

bool aas_mcp_tool_offered(const aas_mcp_ctx *ctx, size_t i)
{
	return i < aas_mcp_ntools() && (!tools[i].flag || (ctx->flags & tools[i].flag));
}

static const char *schema_text(const char *name)
{
	for (const struct aas_mcp_schema_file *f = aas_mcp_schema_files; f->name; f++)
		if (strcmp(f->name, name) == 0)
			return f->text;
	return NULL;
}

/* Shapes name shapes (a sandbox holds times) but never this many deep: more is a loop. */
#define SHAPE_DEPTH_MAX 8

/*
 * v with every {"$ref": "shapes.json#/NAME"} replaced by a copy of that shape,
 * so that clients get whole schemas; a new reference, or NULL for an unknown
 * shape (a typo in schemas/: the tests list every tool) or no memory.
 */
static json_t *inline_shapes(json_t *v, const json_t *shapes, int depth)
{
	static const char prefix[] = "shapes.json#/";
	const char *ref = json_string_value(json_object_get(v, "$ref")), *key;
	json_t *m, *r;
	size_t i;

	if (depth > SHAPE_DEPTH_MAX)
		return NULL;
	if (ref) {
		json_t *shape = strncmp(ref, prefix, sizeof(prefix) - 1) == 0
		                    ? json_object_get(shapes, ref + sizeof(prefix) - 1) : NULL;
		json_t *copy = shape ? json_deep_copy(shape) : NULL;
		r = copy ? inline_shapes(copy, shapes, depth + 1) : NULL;
		json_decref(copy);
		return r;
	}
	if (json_is_object(v)) {
		json_object_foreach(v, key, m) {
			if (!(r = inline_shapes(m, shapes, depth)) || json_object_set_new(v, key, r) < 0)
				return NULL;
		}
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, m) {
			if (!(r = inline_shapes(m, shapes, depth)) || json_array_set_new(v, i, r) < 0)
				return NULL;
		}
	}
	return json_incref(v);
}

json_t *aas_mcp_tool_json(const aas_mcp_ctx *ctx, size_t i)
{
	const struct tool *t = &tools[i];
	const char *text = aas_mcp_tool_offered(ctx, i) ? schema_text(t->name) : NULL;
	const char *shapes_text = schema_text("shapes");
	json_t *shapes = NULL, *file = NULL, *in = NULL, *out = NULL, *res = NULL;

	if (!text || !shapes_text)
		return NULL;
	shapes = json_loads(shapes_text, 0, NULL);
	file = json_loads(text, 0, NULL);
	if (!shapes || !file)
		goto out;
	in = inline_shapes(json_object_get(file, "input"), shapes, 0);
	out = inline_shapes(json_object_get(file, "output"), shapes, 0);
	if (!json_is_object(in) || !json_is_object(out))
		goto out;
	res = json_pack("{s:s,s:s,s:s,s:O,s:O,s:{s:s,s:b,s:b,s:b,s:b}}", "name", t->name, "title", t->title,
	                "description", t->description, "inputSchema", in, "outputSchema", out, "annotations",
	                "title", t->title, "readOnlyHint", t->read_only, "destructiveHint", t->destructive,
	                "idempotentHint", t->idempotent, "openWorldHint", t->open_world);
out:
	json_decref(in);
	json_decref(out);
	json_decref(file);
	json_decref(shapes);
	return res;
}

bool aas_mcp_tool_reports_progress(const char *name)
{
	return name && (strcmp(name, "create_sandbox") == 0 || strcmp(name, "run_command") == 0);
}

json_t *aas_mcp_tool_call(const aas_mcp_ctx *ctx, const char *name, const json_t *args, const json_t *id,
                          const json_t *progress_token)
{
	struct call c;
	json_t *none = NULL, *res;

	for (size_t i = 0; i < aas_mcp_ntools(); i++) {
		const struct tool *t = &tools[i];
		if (strcmp(t->name, name) != 0 || !aas_mcp_tool_offered(ctx, i))
			continue;
		memset(&c, 0, sizeof(c));
		c.ctx = ctx;
		c.tool = t->name;
		c.id = id;
		c.progress = progress_token;
		if (!args)
			args = none = json_object();
		c.args = args;
		if (t->needs_client && !ctx->client) {
			if (ctx->client_status == SAAS_EAUTH)
				res = aas_mcp_failf(&c, "%s needs a valid API key, and the key sent is unknown or revoked. Send a valid "
				                        "key with %s; make one on %s.", t->name,
				                    ctx->key_hint ? ctx->key_hint : "the request",
				                    ctx->key_source ? ctx->key_source : "the service's dashboard (/dashboard/keys)");
			else if (ctx->client_status < 0 && ctx->client_problem)
				res = aas_mcp_failf(&c, "%s cannot run: %s", t->name, ctx->client_problem);
			else if (ctx->client_status < 0)
				res = aas_mcp_failf(&c, "%s could not check the API key: %s. Retry shortly.", t->name,
				                    saas_strerror(ctx->client_status));
			else if (ctx->flags & AAS_MCP_SERVICE_INFO)
				res = aas_mcp_failf(&c, "%s needs an API key, and none was sent. Configure your MCP client to send "
				                        "%s with every request; initialize, tools/list and get_service_info work "
				                        "without one.", t->name, ctx->key_hint ? ctx->key_hint : "a key");
			else
				res = aas_mcp_failf(&c, "%s needs an API key, and none was set. Set one in %s; initialize and "
				                        "tools/list work without one.", t->name, ctx->key_hint ? ctx->key_hint : "a key");
		} else {
			res = t->fn(&c);
		}
		json_decref(none);
		return res;
	}
	memset(&c, 0, sizeof(c));
	return aas_mcp_failf(&c, "Unknown tool \"%.100s\". Call tools/list to see the tools this server offers.", name);
}
