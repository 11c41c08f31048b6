/*
 * The JSON wire shapes of the REST API: one encoder and one decoder each
 * (wire.h).
 *
 * One file of ~1,000 lines on purpose: each shape's encoder sits beside its
 * decoder (a change to one is seen next to the other), and the shapes share
 * the scalars at the top; the golden fixtures pin them together. Split it by
 * resource, behind wire.h, when a new family of shapes arrives.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

/* ---- scalars ---- */

json_t *saas__wire_time(int64_t ms)
{
	char buf[64];

	if (ms <= 0)
		return json_null();
	return json_string(saas_time_format(buf, sizeof(buf), ms));
}

void saas__wire_money(json_t *obj, const char *base, int64_t micro)
{
	char name[96], buf[40];

	json_object_set_new(obj, base, json_string(saas_usd_format(buf, sizeof(buf), micro)));
	snprintf(name, sizeof(name), "%s_micro", base);
	json_object_set_new(obj, name, json_integer(micro));
}

static const char *jstr(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static int64_t jint(const json_t *o, const char *key)
{
	return (int64_t)json_integer_value(json_object_get(o, key));
}

/* A time saas__wire_time() wrote; 0 when null, absent or malformed. */
static int64_t jtime(const json_t *o, const char *key)
{
	const char *s = jstr(o, key);
	int64_t t = 0;

	return s && saas_time_parse(&t, s, 0) == 0 && t > 0 ? t : 0;
}

/* A copy of member `key` (absent or null: ""), or NULL when out of memory. */
static char *jdup(const json_t *o, const char *key)
{
	const char *s = jstr(o, key);

	return strdup(s ? s : "");
}

/* A copy of an id the answer must hold: present, not empty, at most SAAS_ID_MAX bytes; or SAAS_EPROTOCOL. */
static int copy_id(char **dst, const json_t *o, const char *key, const char **bad)
{
	const char *s = jstr(o, key);

	if (!s || !*s || strlen(s) > SAAS_ID_MAX) {
		*bad = key;
		return SAAS_EPROTOCOL;
	}
	return (*dst = strdup(s)) ? SAAS_OK : SAAS_ENOMEM;
}

/* A zeroed element of `size` bytes stored at items[i]; the list's count then covers it, so its free sees it. */
static void *element(void *items, size_t i, size_t *count, size_t size)
{
	void *e = calloc(1, size);

	if (e) {
		memcpy((char *)items + i * sizeof(void *), &e, sizeof(e));
		*count = i + 1;
	}
	return e;
}

static int enum_of(const char *s, const char *(*name)(int), int lo, int hi)
{
	if (!s)
		return -1;
	for (int v = lo; v <= hi; v++)
		if (strcmp(name(v), s) == 0)
			return v;
	return -1;
}

/* calloc(n, size), but NULL for n == 0 too: the structs hold no array then. */
static void *array_of(size_t n, size_t size, int *rc)
{
	void *p;

	*rc = SAAS_OK;
	if (!n)
		return NULL;
	if (!(p = calloc(n, size)))
		*rc = SAAS_ENOMEM;
	return p;
}

/* ---- network ---- */

static json_t *rules_json(char *const *rules)
{
	json_t *a = json_array();

	for (size_t i = 0; a && rules && rules[i]; i++)
		json_array_append_new(a, json_string(rules[i]));
	return a;
}

json_t *saas__wire_network(const saas_network_info *ni)
{
	return json_pack("{s:s,s:o,s:o,s:{s:I,s:I}}", "mode", saas_network_mode_name(ni->mode), "allow",
	                 rules_json(ni->allow), "deny", rules_json(ni->deny), "denied", "connections",
	                 (json_int_t)ni->denied_connections, "lookups", (json_int_t)ni->denied_lookups);
}

json_t *saas__wire_network_spec(const saas_network_spec *spec)
{
	return json_pack("{s:s,s:o,s:o}", "mode", saas_network_mode_name(spec->mode), "allow",
	                 rules_json((char *const *)spec->allow), "deny", rules_json((char *const *)spec->deny));
}

/* A NULL-terminated copy of an array of strings; absent or null: empty. */
static int rules_copy(char ***out, const json_t *a, const char **bad, const char *what)
{
	size_t i, n = json_is_array(a) ? json_array_size(a) : 0;
	const json_t *r;

	if (a && !json_is_null(a) && !json_is_array(a)) {
		*bad = what;
		return SAAS_EPROTOCOL;
	}
	if (!(*out = calloc(n + 1, sizeof(char *))))
		return SAAS_ENOMEM;
	json_array_foreach(a, i, r) {
		if (!json_is_string(r)) {
			*bad = what;
			return SAAS_EPROTOCOL;
		}
		if (!((*out)[i] = strdup(json_string_value(r))))
			return SAAS_ENOMEM;
	}
	return SAAS_OK;
}

/* The string form of a rules bound, for messages that are static text. */
#define STR_(x) #x
#define STR(x) STR_(x)

static int rules_req(const char **dst, const json_t *a, const char **bad, const char *not_array,
                     const char *too_many, const char *not_string)
{
	size_t i;
	const json_t *r;

	dst[0] = NULL;
	if (!a || json_is_null(a))
		return SAAS_OK;
	if (!json_is_array(a)) {
		*bad = not_array;
		return SAAS_EINVAL;
	}
	/* Bounded here, before anything is copied or checked: the core counts again, the same way. */
	if (json_array_size(a) > SAAS_NETWORK_RULES_MAX) {
		*bad = too_many;
		return SAAS_EINVAL;
	}
	json_array_foreach(a, i, r) {
		/* A rule with a NUL in it would be read as a shorter one. */
		if (!json_is_string(r) || strlen(json_string_value(r)) != json_string_length(r)) {
			*bad = not_string;
			return SAAS_EINVAL;
		}
		dst[i] = json_string_value(r);
	}
	dst[json_array_size(a)] = NULL;
	return SAAS_OK;
}

int saas__wire_network_req_decode(saas__wire_network_req *out, const json_t *v, const char **bad)
{
	const char *key, *mode;
	const json_t *m;
	int rc;

	memset(out, 0, sizeof(*out));
	out->spec.version = SAAS_NETWORK_SPEC_VERSION;
	out->spec.mode = SAAS_NETWORK_POLICY;
	out->spec.allow = out->allow;
	out->spec.deny = out->deny;
	if (json_is_string(v)) {
		out->spec.mode = enum_of(json_string_value(v), saas_network_mode_name, SAAS_NETWORK_ISOLATED,
		                         SAAS_NETWORK_INTERNET);
		if (out->spec.mode < 0) {
			*bad = "network must be \"isolated\", \"internet\", or an object {\"allow\": [...], \"deny\": [...]}";
			return SAAS_EINVAL;
		}
		return SAAS_OK;
	}
	if (!json_is_object(v)) {
		*bad = "network must be \"isolated\", \"internet\", or an object {\"allow\": [...], \"deny\": [...]}";
		return SAAS_EINVAL;
	}
	json_object_foreach((json_t *)v, key, m) {
		/* "denied" is what a sandbox reports: a policy read back can be sent again as it is. */
		if (strcmp(key, "mode") != 0 && strcmp(key, "allow") != 0 && strcmp(key, "deny") != 0 &&
		    strcmp(key, "denied") != 0) {
			*bad = "network has an unknown member; it takes mode, allow and deny";
			return SAAS_EINVAL;
		}
	}
	if ((m = json_object_get(v, "mode")) && !json_is_null(m)) {
		mode = json_string_value(m);
		if ((out->spec.mode = enum_of(mode, saas_network_mode_name, SAAS_NETWORK_ISOLATED, SAAS_NETWORK_POLICY)) < 0) {
			*bad = "network mode must be \"isolated\", \"internet\" or \"policy\"";
			return SAAS_EINVAL;
		}
	}
	if ((rc = rules_req(out->allow, json_object_get(v, "allow"), bad, "network allow must be an array of rules",
	                    "network allow has more than " STR(SAAS_NETWORK_RULES_MAX) " rules",
	                    "network allow holds something that is not a rule (a string)")) < 0)
		return rc;
	return rules_req(out->deny, json_object_get(v, "deny"), bad, "network deny must be an array of rules",
	                 "network deny has more than " STR(SAAS_NETWORK_RULES_MAX) " rules",
	                 "network deny holds something that is not a rule (a string)");
}

static int network_decode(saas_network_info **out, const json_t *n, const char **bad)
{
	saas_network_info *ni;
	int rc;

	*out = NULL;
	/* An older server reports none; a mode this client does not know yet is left unreported. */
	if (!json_is_object(n))
		return SAAS_OK;
	if (!(ni = calloc(1, sizeof(*ni))))
		return SAAS_ENOMEM;
	ni->mode = enum_of(jstr(n, "mode"), saas_network_mode_name, SAAS_NETWORK_ISOLATED, SAAS_NETWORK_POLICY);
	if ((rc = rules_copy(&ni->allow, json_object_get(n, "allow"), bad, "network allow")) == SAAS_OK &&
	    (rc = rules_copy(&ni->deny, json_object_get(n, "deny"), bad, "network deny")) == SAAS_OK) {
		ni->denied_connections = jint(json_object_get(n, "denied"), "connections");
		ni->denied_lookups = jint(json_object_get(n, "denied"), "lookups");
	}
	if (rc == SAAS_OK && ni->mode >= 0) {
		*out = ni;
		return SAAS_OK;
	}
	for (size_t i = 0; ni->allow && ni->allow[i]; i++)
		free(ni->allow[i]);
	for (size_t i = 0; ni->deny && ni->deny[i]; i++)
		free(ni->deny[i]);
	free(ni->allow);
	free(ni->deny);
	free(ni);
	return rc;
}

/* ---- sandboxes ---- */

json_t *saas__wire_port(const char *sandbox_id, unsigned int port, const char *url)
{
	return json_pack("{s:s,s:I,s:s}", "sandbox_id", sandbox_id, "port", (json_int_t)port, "url", url ? url : "");
}

/* "KEY=VALUE" strings (metadata, an environment) as a JSON object of strings. */
json_t *saas__wire_pairs(const char *const *list)
{
	json_t *o = json_object();

	for (size_t i = 0; o && list && list[i]; i++) {
		const char *eq = strchr(list[i], '=');
		char *key;
		if (!eq)
			continue;
		if (!(key = strndup(list[i], (size_t)(eq - list[i]))) || json_object_set_new(o, key, json_string(eq + 1)) < 0) {
			free(key);
			json_decref(o);
			return NULL;
		}
		free(key);
	}
	return o;
}

static void pairs_free(char **list)
{
	for (size_t i = 0; list && list[i]; i++)
		free(list[i]);
	free(list);
}

/* Its inverse, for a sandbox read: NULL for an absent member (a server too old to say), else a list, maybe empty. */
static int pairs_decode(char ***out, const json_t *o, const char *name, const char **bad)
{
	const json_t *v = json_object_get(o, name), *val;
	const char *key;
	char **list;
	size_t n = 0;

	*out = NULL;
	if (!v || json_is_null(v))
		return SAAS_OK;
	if (!json_is_object(v)) {
		*bad = name;
		return SAAS_EPROTOCOL;
	}
	if (!(list = calloc(json_object_size(v) + 1, sizeof(*list))))
		return SAAS_ENOMEM;
	json_object_foreach((json_t *)v, key, val) {
		if (!json_is_string(val)) {
			pairs_free(list);
			*bad = name;
			return SAAS_EPROTOCOL;
		}
		if (asprintf(&list[n], "%s=%s", key, json_string_value(val)) < 0) {
			list[n] = NULL;
			pairs_free(list);
			return SAAS_ENOMEM;
		}
		n++;
	}
	*out = list;
	return SAAS_OK;
}

json_t *saas__wire_sandbox(const saas_sandbox *sb)
{
	json_t *o = json_object(), *ports = json_array();

	if (!o || !ports) {
		json_decref(o);
		json_decref(ports);
		return NULL;
	}
	json_object_set_new(o, "id", json_string(sb->id));
	json_object_set_new(o, "status", json_string(saas_sandbox_status_name(sb->status)));
	json_object_set_new(o, "end_reason",
	                    sb->end_reason ? json_string(saas_end_reason_name(sb->end_reason)) : json_null());
	json_object_set_new(o, "size", json_string(sb->size));
	json_object_set_new(o, "vcpus", json_integer(sb->vcpus));
	json_object_set_new(o, "memory_mb", json_integer(sb->memory_mb));
	json_object_set_new(o, "disk_gb", json_integer(sb->disk_gb));
	json_object_set_new(o, "image", json_string(sb->image ? sb->image : ""));
	json_object_set_new(o, "created_at", saas__wire_time(sb->created_at_ms));
	json_object_set_new(o, "ready_at", saas__wire_time(sb->ready_at_ms));
	json_object_set_new(o, "expires_at", saas__wire_time(sb->expires_at_ms));
	json_object_set_new(o, "destroyed_at", saas__wire_time(sb->destroyed_at_ms));
	saas__wire_money(o, "cost_usd", sb->cost_usd_micro);
	for (size_t i = 0; i < sb->nports; i++)
		json_array_append_new(ports, json_pack("{s:I,s:s}", "port", (json_int_t)sb->ports[i]->port, "url",
		                                       sb->ports[i]->url ? sb->ports[i]->url : ""));
	json_object_set_new(o, "ports", ports);
	if (sb->network)
		json_object_set_new(o, "network", saas__wire_network(sb->network));
	json_object_set_new(o, "parent_id", sb->parent_id ? json_string(sb->parent_id) : json_null());
	json_object_set_new(o, "paused_at", saas__wire_time(sb->paused_at_ms));
	json_object_set_new(o, "paused_seconds", json_integer(sb->paused_seconds));
	json_object_set_new(o, "metadata", saas__wire_pairs((const char *const *)sb->metadata));
	json_object_set_new(o, "envs", saas__wire_pairs((const char *const *)sb->envs));
	json_object_set_new(o, "on_timeout", json_string(sb->on_timeout == SAAS_ON_TIMEOUT_PAUSE ? "pause" : "destroy"));
	json_object_set_new(o, "auto_resume", json_boolean(sb->auto_resume));
	return o;
}

int saas__wire_sandbox_decode(saas_sandbox **out, const json_t *o, const char **bad)
{
	saas_sandbox *sb = calloc(1, sizeof(*sb));
	const json_t *ports = json_object_get(o, "ports"), *p;
	const char *end = jstr(o, "end_reason");
	size_t i;
	int rc;

	*out = NULL;
	if (!sb)
		return SAAS_ENOMEM;
	if ((rc = copy_id(&sb->id, o, "id", bad)) < 0)
		goto out;
	sb->status = enum_of(jstr(o, "status"), saas_sandbox_status_name, SAAS_SANDBOX_CREATING, SAAS_SANDBOX_RESUMING);
	if (sb->status < 0) {
		*bad = "sandbox status";
		rc = SAAS_EPROTOCOL;
		goto out;
	}
	/* A reason this client does not know yet reads as none rather than failing the whole answer. */
	sb->end_reason = end ? enum_of(end, saas_end_reason_name, SAAS_END_USER, SAAS_END_DISABLED) : SAAS_END_NONE;
	if (sb->end_reason < 0)
		sb->end_reason = SAAS_END_NONE;
	sb->vcpus = (unsigned int)jint(o, "vcpus");
	sb->memory_mb = (unsigned int)jint(o, "memory_mb");
	sb->disk_gb = (unsigned int)jint(o, "disk_gb");
	sb->created_at_ms = jtime(o, "created_at");
	sb->ready_at_ms = jtime(o, "ready_at");
	sb->expires_at_ms = jtime(o, "expires_at");
	sb->destroyed_at_ms = jtime(o, "destroyed_at");
	sb->cost_usd_micro = jint(o, "cost_usd_micro");
	sb->paused_at_ms = jtime(o, "paused_at");
	sb->paused_seconds = jint(o, "paused_seconds");
	if (jstr(o, "parent_id") && (rc = copy_id(&sb->parent_id, o, "parent_id", bad)) < 0)
		goto out;
	if (!(sb->size = jdup(o, "size")) || !(sb->image = jdup(o, "image"))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	if (!(sb->ports = array_of(json_array_size(ports), sizeof(*sb->ports), &rc)) && rc < 0)
		goto out;
	json_array_foreach(ports, i, p) {
		saas_port_info *pi = element(sb->ports, i, &sb->nports, sizeof(*pi));

		if (!pi || !(pi->url = jdup(p, "url"))) {
			rc = SAAS_ENOMEM;
			goto out;
		}
		pi->port = (unsigned int)jint(p, "port");
	}
	if ((rc = network_decode(&sb->network, json_object_get(o, "network"), bad)) < 0 ||
	    (rc = pairs_decode(&sb->metadata, o, "metadata", bad)) < 0 || (rc = pairs_decode(&sb->envs, o, "envs", bad)) < 0)
		goto out;
	sb->on_timeout = jstr(o, "on_timeout") && strcmp(jstr(o, "on_timeout"), "pause") == 0 ? SAAS_ON_TIMEOUT_PAUSE
	                                                                                       : SAAS_ON_TIMEOUT_DESTROY;
	sb->auto_resume = json_is_true(json_object_get(o, "auto_resume"));
	*out = sb;
	sb = NULL;
out:
	saas_sandbox_free(sb);
	return rc;
}

json_t *saas__wire_sandbox_list(const saas_sandbox_list *list)
{
	json_t *items = json_array();

	for (size_t i = 0; items && i < list->count; i++)
		json_array_append_new(items, saas__wire_sandbox(list->items[i]));
	return json_pack("{s:o,s:o}", "sandboxes", items, "next_cursor",
	                 list->next_cursor ? json_string(list->next_cursor) : json_null());
}

int saas__wire_sandbox_list_decode(saas_sandbox_list **out, const json_t *o, const char **bad)
{
	const json_t *items = json_object_get(o, "sandboxes"), *it, *next = json_object_get(o, "next_cursor");
	saas_sandbox_list *list = NULL;
	size_t i;
	int rc;

	*out = NULL;
	if (!json_is_array(items)) {
		*bad = "sandboxes";
		return SAAS_EPROTOCOL;
	}
	if (!(list = calloc(1, sizeof(*list))))
		return SAAS_ENOMEM;
	if (!(list->items = array_of(json_array_size(items), sizeof(*list->items), &rc)) && rc < 0)
		goto out;
	json_array_foreach(items, i, it) {
		if ((rc = saas__wire_sandbox_decode(&list->items[i], it, bad)) < 0)
			goto out;
		list->count = i + 1;
	}
	if (json_is_string(next) && !(list->next_cursor = strdup(json_string_value(next)))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	*out = list;
	list = NULL;
out:
	saas_sandbox_list_free(list);
	return rc;
}

/* ---- executions ---- */

/*
 * Output is bytes. Valid UTF-8 (NULs included, as \u0000) travels as a JSON
 * string in "stdout"; anything else travels base64 in "stdout_base64" with
 * "stdout" null. "stdout_encoding" says which: "utf-8" or "base64".
 */
static void set_output(json_t *o, const char *name, const char *data, size_t len)
{
	char key[64];
	json_t *s = json_stringn(data ? data : "", data ? len : 0);
	char *b64;

	if (s) {
		json_object_set_new(o, name, s);
	} else {
		b64 = saas_base64_encode(data, len);
		json_object_set_new(o, name, json_null());
		snprintf(key, sizeof(key), "%s_base64", name);
		json_object_set_new(o, key, b64 ? json_string(b64) : json_null());
		saas_free(b64);
	}
	snprintf(key, sizeof(key), "%s_encoding", name);
	json_object_set_new(o, key, json_string(s ? "utf-8" : "base64"));
}

/* "stdout" (a UTF-8 string, NULs included) or "stdout_base64"; NUL-terminated either way. */
static int get_output(const json_t *o, const char *name, char **data, size_t *len, const char **bad)
{
	char key[32];
	const json_t *s = json_object_get(o, name);
	const char *b64;
	void *bytes = NULL;

	snprintf(key, sizeof(key), "%s_base64", name);
	b64 = jstr(o, key);
	if (!json_is_string(s) && b64) {
		if (saas_base64_decode(&bytes, len, b64, strlen(b64)) < 0) {
			*bad = name;
			return SAAS_EPROTOCOL;
		}
		/* saas_base64_decode()'s memory is the library's: copy it into ours, with the NUL. */
		*data = malloc(*len + 1);
		if (*data) {
			memcpy(*data, bytes, *len);
			(*data)[*len] = '\0';
		}
		saas_free(bytes);
		return *data ? SAAS_OK : SAAS_ENOMEM;
	}
	*len = json_is_string(s) ? json_string_length(s) : 0;
	if (!(*data = malloc(*len + 1)))
		return SAAS_ENOMEM;
	if (*len)
		memcpy(*data, json_string_value(s), *len);
	(*data)[*len] = '\0';
	return SAAS_OK;
}

json_t *saas__wire_execution(const saas_execution *x)
{
	json_t *o = json_object();
	bool finished = x->status != SAAS_EXEC_RUNNING;

	if (!o)
		return NULL;
	json_object_set_new(o, "execution_id", json_string(x->id));
	json_object_set_new(o, "sandbox_id", json_string(x->sandbox_id));
	json_object_set_new(o, "status", json_string(saas_exec_status_name(x->status)));
	json_object_set_new(o, "exit_code",
	                    finished && x->exit_code >= 0 ? json_integer(x->exit_code) : json_null());
	set_output(o, "stdout", x->stdout_data, x->stdout_len);
	set_output(o, "stderr", x->stderr_data, x->stderr_len);
	json_object_set_new(o, "truncated", json_boolean(x->stdout_truncated || x->stderr_truncated));
	json_object_set_new(o, "stdout_truncated", json_boolean(x->stdout_truncated));
	json_object_set_new(o, "stderr_truncated", json_boolean(x->stderr_truncated));
	json_object_set_new(o, "started_at", saas__wire_time(x->started_at_ms));
	json_object_set_new(o, "finished_at", saas__wire_time(x->finished_at_ms));
	json_object_set_new(o, "duration_ms", finished ? json_integer(x->duration_ms) : json_null());
	json_object_set_new(o, "error", x->error && *x->error ? json_string(x->error) : json_null());
	json_object_set_new(o, "stdout_total", json_integer((json_int_t)x->stdout_total));
	json_object_set_new(o, "stderr_total", json_integer((json_int_t)x->stderr_total));
	json_object_set_new(o, "stdin_open", json_boolean(x->stdin_open));
	/* Absent where the engine does not know it (a running execution). */
	if (x->command)
		json_object_set_new(o, "command", json_string(x->command));
	return o;
}

json_t *saas__wire_execution_brief(const saas_execution *x)
{
	json_t *o = saas__wire_execution(x);

	if (o) {
		static const char *const output[] = { "stdout", "stdout_base64", "stdout_encoding",
		                                      "stderr", "stderr_base64", "stderr_encoding" };
		for (size_t i = 0; i < sizeof(output) / sizeof(output[0]); i++)
			json_object_del(o, output[i]);
	}
	return o;
}

json_t *saas__wire_execution_list(const saas_execution_list *list)
{
	json_t *o = json_object(), *a = json_array();

	if (!o || !a) {
		json_decref(o);
		json_decref(a);
		return NULL;
	}
	for (size_t i = 0; i < list->count; i++)
		json_array_append_new(a, saas__wire_execution_brief(list->items[i]));
	json_object_set_new(o, "executions", a);
	json_object_set_new(o, "next_cursor", list->next_cursor ? json_string(list->next_cursor) : json_null());
	return o;
}

json_t *saas__wire_exec_chunk(int stream, uint64_t offset, const void *data, size_t len)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	json_object_set_new(o, "stream", json_string(stream == SAAS_EXEC_STDERR ? "stderr" : "stdout"));
	json_object_set_new(o, "offset", json_integer((json_int_t)offset));
	set_output(o, "data", data, len);
	return o;
}

int saas__wire_exec_chunk_decode(int *stream, uint64_t *offset, char **data, size_t *len, const json_t *o,
                                 const char **bad)
{
	const char *name = jstr(o, "stream");
	const json_t *off = json_object_get(o, "offset");

	if (!name || (strcmp(name, "stdout") && strcmp(name, "stderr"))) {
		*bad = "chunk stream";
		return SAAS_EPROTOCOL;
	}
	if (!json_is_integer(off) || json_integer_value(off) < 0) {
		*bad = "chunk offset";
		return SAAS_EPROTOCOL;
	}
	*stream = strcmp(name, "stderr") ? SAAS_EXEC_STDOUT : SAAS_EXEC_STDERR;
	*offset = (uint64_t)json_integer_value(off);
	return get_output(o, "data", data, len, bad);
}

int saas__wire_execution_decode(saas_execution **out, const json_t *o, const char **bad)
{
	saas_execution *x = calloc(1, sizeof(*x));
	const json_t *code = json_object_get(o, "exit_code");
	int rc;

	*out = NULL;
	if (!x)
		return SAAS_ENOMEM;
	if ((rc = copy_id(&x->id, o, "execution_id", bad)) < 0 ||
	    (rc = copy_id(&x->sandbox_id, o, "sandbox_id", bad)) < 0)
		goto out;
	x->status = enum_of(jstr(o, "status"), saas_exec_status_name, SAAS_EXEC_RUNNING, SAAS_EXEC_FAILED);
	if (x->status < 0) {
		*bad = "execution status";
		rc = SAAS_EPROTOCOL;
		goto out;
	}
	x->exit_code = json_is_integer(code) ? (int)json_integer_value(code) : -1;
	if ((rc = get_output(o, "stdout", &x->stdout_data, &x->stdout_len, bad)) < 0 ||
	    (rc = get_output(o, "stderr", &x->stderr_data, &x->stderr_len, bad)) < 0)
		goto out;
	x->stdout_truncated = json_is_true(json_object_get(o, "stdout_truncated"));
	x->stderr_truncated = json_is_true(json_object_get(o, "stderr_truncated"));
	x->started_at_ms = jtime(o, "started_at");
	/* The wire does not say when the guest took a running one: it counts as started. */
	x->started = x->status != SAAS_EXEC_FAILED;
	x->finished_at_ms = jtime(o, "finished_at");
	x->duration_ms = jint(o, "duration_ms");
	/* A server before 0.2.0 sends no totals: what it sent is all there is. */
	x->stdout_total = json_is_integer(json_object_get(o, "stdout_total")) ? (uint64_t)jint(o, "stdout_total")
	                                                                       : x->stdout_len;
	x->stderr_total = json_is_integer(json_object_get(o, "stderr_total")) ? (uint64_t)jint(o, "stderr_total")
	                                                                       : x->stderr_len;
	x->stdin_open = json_is_true(json_object_get(o, "stdin_open"));
	if (!(x->error = jdup(o, "error")) || (jstr(o, "command") && !(x->command = jdup(o, "command")))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	*out = x;
	x = NULL;
out:
	saas_execution_free(x);
	return rc;
}

/* ---- sizes, limits, the account ---- */

json_t *saas__wire_size(const saas_size *s, int64_t paused_usd_micro_per_gib_hour)
{
	json_t *o = json_pack("{s:s,s:I,s:I,s:I}", "name", s->name ? s->name : "", "vcpus", (json_int_t)s->vcpus,
	                      "memory_mb", (json_int_t)s->memory_mb, "disk_gb", (json_int_t)s->disk_gb);

	if (o) {
		saas__wire_money(o, "usd_per_hour", s->usd_micro_per_hour);
		saas__wire_money(o, "paused_usd_per_hour",
		                 saas_size_paused_usd_micro_per_hour(s, paused_usd_micro_per_gib_hour));
	}
	return o;
}

/* The per-call bounds are the library's constants, sent so that a client can size its calls. */
json_t *saas__wire_limits(const saas_limits *l)
{
	return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "max_sandboxes",
	                 (json_int_t)l->max_sandboxes, "default_timeout", (json_int_t)l->default_timeout_s,
	                 "max_timeout", (json_int_t)l->max_timeout_s, "min_balance_seconds",
	                 (json_int_t)l->min_balance_s, "max_file_bytes", (json_int_t)SAAS_FILE_MAX, "max_exec_timeout",
	                 (json_int_t)SAAS_EXEC_TIMEOUT_MAX, "max_output_bytes", (json_int_t)SAAS_EXEC_OUTPUT_MAX,
	                 "max_stdin_bytes", (json_int_t)SAAS_EXEC_STDIN_MAX, "max_executions",
	                 (json_int_t)l->max_executions, "creates_per_minute", (json_int_t)l->creates_per_minute,
	                 "requests_per_second", (json_int_t)l->requests_per_second, "execution_retention",
	                 (json_int_t)l->execution_retention_s);
}

saas_limits *saas__wire_limits_decode(const json_t *o)
{
	saas_limits *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->max_sandboxes = (unsigned int)jint(o, "max_sandboxes");
	l->default_timeout_s = jint(o, "default_timeout");
	l->max_timeout_s = jint(o, "max_timeout");
	l->min_balance_s = jint(o, "min_balance_seconds");
	l->max_executions = (unsigned int)jint(o, "max_executions");
	l->creates_per_minute = (unsigned int)jint(o, "creates_per_minute");
	l->requests_per_second = (unsigned int)jint(o, "requests_per_second");
	l->execution_retention_s = jint(o, "execution_retention");
	return l;
}

json_t *saas__wire_account(const saas_account_info *ai)
{
	json_t *o = json_object(), *sizes = json_array();

	if (!o || !sizes) {
		json_decref(o);
		json_decref(sizes);
		return NULL;
	}
	json_object_set_new(o, "id", json_string(ai->id));
	json_object_set_new(o, "name", json_string(ai->name ? ai->name : ""));
	saas__wire_money(o, "credit_usd", ai->credit_usd_micro);
	saas__wire_money(o, "spent_usd", ai->spent_usd_micro);
	saas__wire_money(o, "balance_usd", ai->balance_usd_micro);
	json_object_set_new(o, "active_sandboxes", json_integer(ai->active_sandboxes));
	json_object_set_new(o, "running_executions", json_integer(ai->running_executions));
	if (ai->limits)
		json_object_set_new(o, "limits", saas__wire_limits(ai->limits));
	for (size_t i = 0; i < ai->nsizes; i++)
		json_array_append_new(sizes, saas__wire_size(ai->sizes[i], ai->paused_usd_micro_per_gib_hour));
	saas__wire_money(o, "paused_usd_per_gib_hour", ai->paused_usd_micro_per_gib_hour);
	json_object_set_new(o, "sizes", sizes);
	return o;
}

int saas__wire_account_decode(saas_account_info **out, const json_t *o, const char **bad)
{
	saas_account_info *ai = calloc(1, sizeof(*ai));
	const json_t *sizes = json_object_get(o, "sizes"), *s;
	size_t i;
	int rc;

	*out = NULL;
	if (!ai)
		return SAAS_ENOMEM;
	if ((rc = copy_id(&ai->id, o, "id", bad)) < 0)
		goto out;
	if (!(ai->name = jdup(o, "name"))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	ai->credit_usd_micro = jint(o, "credit_usd_micro");
	ai->spent_usd_micro = jint(o, "spent_usd_micro");
	ai->balance_usd_micro = jint(o, "balance_usd_micro");
	ai->active_sandboxes = (unsigned int)jint(o, "active_sandboxes");
	ai->running_executions = (unsigned int)jint(o, "running_executions");
	ai->paused_usd_micro_per_gib_hour = jint(o, "paused_usd_per_gib_hour_micro");
	if (!(ai->limits = saas__wire_limits_decode(json_object_get(o, "limits")))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	if (!(ai->sizes = array_of(json_array_size(sizes), sizeof(*ai->sizes), &rc)) && rc < 0)
		goto out;
	json_array_foreach(sizes, i, s) {
		saas_size *z = element(ai->sizes, i, &ai->nsizes, sizeof(*z));

		if (!z || !(z->name = jdup(s, "name"))) {
			rc = SAAS_ENOMEM;
			goto out;
		}
		z->vcpus = (unsigned int)jint(s, "vcpus");
		z->memory_mb = (unsigned int)jint(s, "memory_mb");
		z->disk_gb = (unsigned int)jint(s, "disk_gb");
		z->usd_micro_per_hour = jint(s, "usd_per_hour_micro");
	}
	*out = ai;
	ai = NULL;
out:
	saas_account_info_free(ai);
	return rc;
}

/* ---- usage ---- */

json_t *saas__wire_usage(const saas_usage *u)
{
	json_t *o = json_object(), *lines = json_array();

	if (!o || !lines) {
		json_decref(o);
		json_decref(lines);
		return NULL;
	}
	json_object_set_new(o, "from", saas__wire_time(u->from_ms));
	json_object_set_new(o, "to", saas__wire_time(u->to_ms));
	json_object_set_new(o, "total_seconds", json_integer(u->total_seconds));
	saas__wire_money(o, "total_usd", u->total_usd_micro);
	for (size_t i = 0; i < u->count; i++) {
		const saas_usage_line *l = u->lines[i];
		json_t *line = json_pack("{s:s,s:s,s:I,s:b}", "sandbox_id", l->sandbox_id, "size", l->size, "seconds",
		                         (json_int_t)l->seconds, "running", l->running);
		if (line)
			saas__wire_money(line, "cost_usd", l->cost_usd_micro);
		json_array_append_new(lines, line);
	}
	json_object_set_new(o, "sandboxes", lines);
	return o;
}

int saas__wire_usage_decode(saas_usage **out, const json_t *o, const char **bad)
{
	saas_usage *u = calloc(1, sizeof(*u));
	const json_t *lines = json_object_get(o, "sandboxes"), *l;
	size_t i;
	int rc;

	*out = NULL;
	if (!u)
		return SAAS_ENOMEM;
	u->from_ms = jtime(o, "from");
	u->to_ms = jtime(o, "to");
	u->total_seconds = jint(o, "total_seconds");
	u->total_usd_micro = jint(o, "total_usd_micro");
	if (!(u->lines = array_of(json_array_size(lines), sizeof(*u->lines), &rc)) && rc < 0)
		goto out;
	json_array_foreach(lines, i, l) {
		saas_usage_line *x = element(u->lines, i, &u->count, sizeof(*x));

		if (!x) {
			rc = SAAS_ENOMEM;
			goto out;
		}
		if ((rc = copy_id(&x->sandbox_id, l, "sandbox_id", bad)) < 0)
			goto out;
		if (!(x->size = jdup(l, "size"))) {
			rc = SAAS_ENOMEM;
			goto out;
		}
		x->seconds = jint(l, "seconds");
		x->cost_usd_micro = jint(l, "cost_usd_micro");
		x->running = json_is_true(json_object_get(l, "running"));
	}
	*out = u;
	u = NULL;
out:
	saas_usage_free(u);
	return rc;
}

/* ---- file listings ---- */

static const char *const file_types[] = {
	[SAAS_FILE_REGULAR] = "file",
	[SAAS_FILE_DIRECTORY] = "directory",
	[SAAS_FILE_SYMLINK] = "symlink",
	[SAAS_FILE_OTHER] = "other",
};

static const char *file_type_name(int type)
{
	return type >= SAAS_FILE_REGULAR && type <= SAAS_FILE_OTHER ? file_types[type] : "other";
}

static int file_type_of(const char *s)
{
	for (int t = SAAS_FILE_REGULAR; s && t <= SAAS_FILE_OTHER; t++)
		if (strcmp(file_types[t], s) == 0)
			return t;
	return SAAS_FILE_OTHER;
}

json_t *saas__wire_file_list(const saas_file_list *list)
{
	json_t *o = json_object(), *entries = json_array();
	char mode[8];

	if (!o || !entries) {
		json_decref(o);
		json_decref(entries);
		return NULL;
	}
	json_object_set_new(o, "root", json_string(list->root ? list->root : ""));
	for (size_t i = 0; i < list->count; i++) {
		const saas_file_entry *e = list->entries[i];
		/* A guest's file name need not be UTF-8; it then travels as null rather than breaking the listing. */
		json_t *path = json_string(e->path ? e->path : "");
		snprintf(mode, sizeof(mode), "%04o", e->mode & 07777);
		json_array_append_new(entries, json_pack("{s:o,s:s,s:I,s:s,s:o}", "path", path ? path : json_null(),
		                                         "type", file_type_name(e->type), "size", (json_int_t)e->size,
		                                         "mode", mode, "modified_at", saas__wire_time(e->mtime_ms)));
	}
	json_object_set_new(o, "entries", entries);
	json_object_set_new(o, "count", json_integer((json_int_t)list->count));
	json_object_set_new(o, "truncated", json_boolean(list->truncated));
	return o;
}

int saas__wire_file_list_decode(saas_file_list **out, const json_t *o, const char **bad)
{
	const json_t *entries = json_object_get(o, "entries"), *e;
	saas_file_list *list = NULL;
	size_t i;
	int rc;

	*out = NULL;
	if (!json_is_array(entries) || !jstr(o, "root")) {
		*bad = "file listing";
		return SAAS_EPROTOCOL;
	}
	if (!(list = calloc(1, sizeof(*list))) || !(list->root = jdup(o, "root"))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	if (!(list->entries = array_of(json_array_size(entries), sizeof(*list->entries), &rc)) && rc < 0)
		goto out;
	list->truncated = json_is_true(json_object_get(o, "truncated"));
	json_array_foreach(entries, i, e) {
		saas_file_entry *fe = element(list->entries, i, &list->count, sizeof(*fe));
		const char *mode = jstr(e, "mode");

		if (!fe || !(fe->path = jdup(e, "path"))) {
			rc = SAAS_ENOMEM;
			goto out;
		}
		fe->type = file_type_of(jstr(e, "type"));
		fe->size = jint(e, "size");
		fe->mode = mode ? (unsigned int)strtoul(mode, NULL, 8) & 07777 : 0;
		fe->mtime_ms = jtime(e, "modified_at");
	}
	*out = list;
	list = NULL;
out:
	saas_file_list_free(list);
	return rc;
}

/* ---- metrics ---- */

json_t *saas__wire_metric_list(const saas_metric_list *list)
{
	json_t *o = json_object(), *a = json_array();

	if (!o || !a) {
		json_decref(o);
		json_decref(a);
		return NULL;
	}
	for (size_t i = 0; i < list->count; i++) {
		const saas_metric *m = list->items[i];
		/* The percentage is the one float of the wire: a measure, not money, two decimals. */
		json_array_append_new(a, json_pack("{s:o,s:I,s:f,s:I,s:I,s:I,s:I}", "at", saas__wire_time(m->at_ms), "vcpus",
		                                   (json_int_t)m->vcpus, "cpu_used_pct", m->cpu_used_pct, "memory_used",
		                                   (json_int_t)m->memory_used, "memory_total", (json_int_t)m->memory_total,
		                                   "disk_used", (json_int_t)m->disk_used, "disk_total",
		                                   (json_int_t)m->disk_total));
	}
	json_object_set_new(o, "metrics", a);
	json_object_set_new(o, "count", json_integer((json_int_t)list->count));
	return o;
}

int saas__wire_metric_list_decode(saas_metric_list **out, const json_t *o, const char **bad)
{
	const json_t *a = json_object_get(o, "metrics"), *e;
	saas_metric_list *list = NULL;
	size_t i;
	int rc;

	*out = NULL;
	if (!json_is_array(a)) {
		*bad = "metrics";
		return SAAS_EPROTOCOL;
	}
	if (!(list = calloc(1, sizeof(*list)))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	if (!(list->items = array_of(json_array_size(a), sizeof(*list->items), &rc)) && rc < 0)
		goto out;
	json_array_foreach(a, i, e) {
		saas_metric *m = element(list->items, i, &list->count, sizeof(*m));
		const json_t *pct = json_object_get(e, "cpu_used_pct");

		if (!m) {
			rc = SAAS_ENOMEM;
			goto out;
		}
		m->at_ms = jtime(e, "at");
		m->vcpus = (unsigned int)jint(e, "vcpus");
		m->cpu_used_pct = json_is_number(pct) ? json_number_value(pct) : 0;
		m->memory_used = jint(e, "memory_used");
		m->memory_total = jint(e, "memory_total");
		m->disk_used = jint(e, "disk_used");
		m->disk_total = jint(e, "disk_total");
	}
	*out = list;
	list = NULL;
out:
	saas_metric_list_free(list);
	return rc;
}

/* ---- MCP ---- */

json_t *saas__wire_drop_nulls(json_t *v)
{
	const char *key;
	json_t *m;
	void *tmp;
	size_t i;

	if (json_is_object(v)) {
		json_object_foreach_safe(v, tmp, key, m) {
			if (json_is_null(m))
				json_object_del(v, key);
			else
				saas__wire_drop_nulls(m);
		}
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, m)
			saas__wire_drop_nulls(m);
	}
	return v;
}
