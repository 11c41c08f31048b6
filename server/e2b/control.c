/*
 * The control plane: E2B's REST API (the calls of e2b 2.51.0 and of the
 * Python SDK, docs/e2b.md) over libsaas's sandbox calls, for the key's
 * account. Shapes and statuses are E2B's: creates answer 201, calls with no
 * answer 204 (a 200 with no body breaks the JS SDK), errors
 * {"code":STATUS,"message":...} with the same HTTP status (the JS SDK reads
 * the body's code, the Python SDK the status).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "e2b/internal.h"

/* The page a list gives when the client names none, and the most it may ask (E2B's). */
#define LIST_LIMIT_DEFAULT 100
#define LIST_LIMIT_MAX 100
/* Pages of the engine's list one E2B page may read while filtering: a bound on one request's work. */
#define LIST_ROUNDS_MAX 20
/* The longest metadata filter a list takes. */
#define FILTER_MAX 4096

/* ---- shapes ---- */

static json_t *iso_time(int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char buf[80]; /* the most a struct tm of any int year prints */

	if (ms <= 0 || !gmtime_r(&t, &tm))
		return json_null();
	snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
	         tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
	return json_string(buf);
}

static bool is_paused(const saas_sandbox *s)
{
	return s->status == SAAS_SANDBOX_PAUSED || s->status == SAAS_SANDBOX_PAUSING;
}

enum shape { SHAPE_CREATED, SHAPE_DETAIL, SHAPE_LISTED };

/* The E2B template a sandbox was made from (its metadata's AAS_E2B_META_TEMPLATE), or NULL. */
static const char *template_of(const saas_sandbox *s)
{
	for (char **kv = s->metadata; kv && *kv; kv++)
		if (strncmp(*kv, AAS_E2B_META_TEMPLATE "=", sizeof(AAS_E2B_META_TEMPLATE)) == 0)
			return *kv + sizeof(AAS_E2B_META_TEMPLATE);
	return NULL;
}

/* The tenant's metadata as an object, less the face's own keys (AAS_E2B_META_PREFIX); NULL: out of memory. */
static json_t *metadata_json(const saas_sandbox *s)
{
	json_t *o = json_object();

	for (char **kv = s->metadata; o && kv && *kv; kv++) {
		const char *eq = strchr(*kv, '=');
		char *key;
		if (!eq || strncmp(*kv, AAS_E2B_META_PREFIX, strlen(AAS_E2B_META_PREFIX)) == 0)
			continue;
		if (!(key = strndup(*kv, (size_t)(eq - *kv))) || json_object_set_new(o, key, json_string(eq + 1)) < 0) {
			json_decref(o);
			o = NULL;
		}
		free(key);
	}
	return o;
}

/*
 * A sandbox in E2B's shapes: Sandbox (create, connect), SandboxDetail (get),
 * ListedSandbox (list). Every key the Python SDK's models require is there.
 */
static json_t *sandbox_json(const saas_sandbox *s, const char *account_id, enum shape shape)
{
	char token[AAS_E2B_ENVD_TOKEN_SIZE];
	const char *tpl = template_of(s);
	json_t *o = NULL, *metadata;

	if (!(metadata = metadata_json(s)))
		return NULL;
	/* A sandbox made through the REST API has no E2B template: its image names it. */
	if (!tpl)
		tpl = s->image ? s->image : "";
	o = json_pack("{s:s,s:s,s:s,s:s,s:s}", "sandboxID", aas_e2b_id_from_saas(s->id), "templateID", tpl, "alias", tpl,
	              "clientID", AAS_E2B_CLIENT_ID, "envdVersion", AAS_E2B_ENVD_VERSION);
	if (!o)
		goto out;
	if (shape != SHAPE_LISTED) {
		aas_e2b_envd_token(token, s->id, account_id);
		json_object_set_new(o, "envdAccessToken", json_string(token));
		/* With --e2b-domain the SDK then dials PORT-ID.DOMAIN (getHost too); without, E2B_SANDBOX_URL. */
		json_object_set_new(o, "domain", aas_e2b_state.cfg->e2b_domain ? json_string(aas_e2b_state.cfg->e2b_domain)
		                                                               : json_null());
	}
	if (shape == SHAPE_CREATED) {
		/* Always one: no port of a sandbox is served without it, public traffic or not (urls.c). */
		aas_e2b_traffic_token(token, s->id, account_id);
		json_object_set_new(o, "trafficAccessToken", json_string(token));
		goto out;
	}
	json_object_set_new(o, "startedAt", iso_time(s->ready_at_ms ? s->ready_at_ms : s->created_at_ms));
	json_object_set_new(o, "endAt", iso_time(s->expires_at_ms));
	json_object_set_new(o, "cpuCount", json_integer(s->vcpus));
	json_object_set_new(o, "memoryMB", json_integer(s->memory_mb));
	json_object_set_new(o, "diskSizeMB", json_integer((json_int_t)s->disk_gb * 1024));
	json_object_set_new(o, "state", json_string(is_paused(s) ? "paused" : "running"));
	json_object_set_new(o, "metadata", metadata);
	metadata = NULL;
	json_object_set_new(o, "volumeMounts", json_array());
	if (shape == SHAPE_DETAIL) {
		json_object_set_new(o, "lifecycle", json_pack("{s:s,s:b}", "onTimeout",
		                                              s->on_timeout == SAAS_ON_TIMEOUT_PAUSE ? "pause" : "kill",
		                                              "autoResume", s->auto_resume != 0));
		json_object_set_new(o, "allowInternetAccess",
		                    json_boolean(!s->network || s->network->mode != SAAS_NETWORK_ISOLATED));
	}
out:
	json_decref(metadata);
	return o;
}

/* ---- the sandbox a path names ---- */

/*
 * The caller's sandbox with E2B id `e2b_id`, not destroyed: true with *out,
 * or false after a 404 (an id that cannot be one, another account's, gone).
 */
static bool find(struct aas_req *r, struct aas_reply *out, const char *e2b_id, saas_sandbox **sb)
{
	char id[SAAS_ID_MAX + 1];
	int rc;

	*sb = NULL;
	if (!aas_e2b_id_to_saas(id, e2b_id)) {
		aas_e2b_error(out, 404, "sandbox \"%s\" not found", e2b_id);
		return false;
	}
	rc = saas_sandbox_get_ext(sb, r->client, id, SAAS_GET_RECORDED);
	if (rc == SAAS_ENOTFOUND || (rc == SAAS_OK && (*sb)->status == SAAS_SANDBOX_DESTROYED)) {
		saas_sandbox_free(*sb);
		*sb = NULL;
		aas_e2b_error(out, 404, "sandbox \"%s\" not found", e2b_id);
		return false;
	}
	if (rc < 0) {
		aas_e2b_error_saas(out, rc, "e2b: looking a sandbox up");
		return false;
	}
	return true;
}

/* A JSON field that must be an integer (or absent): false after a 400. */
static bool field_int(json_t *obj, const char *name, int64_t min, int64_t max, int64_t *val, bool *present,
                      struct aas_reply *out)
{
	json_t *v = json_object_get(obj, name);

	*present = false;
	if (!v || json_is_null(v))
		return true;
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
		aas_e2b_error(out, 400, "\"%s\" must be an integer from %lld to %lld", name, (long long)min,
		              (long long)max);
		return false;
	}
	*val = json_integer_value(v);
	*present = true;
	return true;
}

/*
 * An object of strings (metadata, envVars) as "KEY=VALUE" strings into
 * list[0..max) (NULL-terminated; absent: empty), the count bounded here
 * before a byte is copied; the engine checks each key and value against its
 * bounds and says which. A key under AAS_E2B_META_PREFIX is refused when
 * `reserved` (the face keeps its own there). false after a 400.
 */
static bool pairs_of(json_t *obj, const char *name, size_t max, bool reserved, char **list, struct aas_reply *out)
{
	json_t *v = json_object_get(obj, name), *val;
	const char *key;
	size_t n = 0;

	list[0] = NULL;
	if (!v || json_is_null(v))
		return true;
	if (!json_is_object(v) || json_object_size(v) > max) {
		aas_e2b_error(out, 400, "\"%s\" must be an object of at most %zu strings", name, max);
		return false;
	}
	json_object_foreach(v, key, val) {
		if (!json_is_string(val) || !*key || strchr(key, '=') ||
		    strlen(json_string_value(val)) != json_string_length(val)) {
			aas_e2b_error(out, 400, "\"%s\": each key must be non-empty without '=' and each value a string "
			              "(no NUL)", name);
			return false;
		}
		if (reserved && strncmp(key, AAS_E2B_META_PREFIX, strlen(AAS_E2B_META_PREFIX)) == 0) {
			aas_e2b_error(out, 400, "\"%s\": keys starting \"%s\" are this server's own (docs/e2b.md)", name,
			              AAS_E2B_META_PREFIX);
			return false;
		}
		if (asprintf(&list[n], "%s=%s", key, json_string_value(val)) < 0) {
			list[n] = NULL;
			aas_e2b_error(out, 500, "out of memory");
			return false;
		}
		list[++n] = NULL;
	}
	return true;
}

static void pairs_free(char **list)
{
	for (size_t i = 0; list[i]; i++)
		free(list[i]);
}

/* An array of strings (absent: count 0), at most SAAS_NETWORK_RULES_MAX: false after a 400. */
static bool string_list(json_t *obj, const char *name, const char *list[SAAS_NETWORK_RULES_MAX + 2], size_t *count,
                        struct aas_reply *out)
{
	json_t *v = json_object_get(obj, name), *item;
	size_t i;

	*count = 0;
	list[0] = NULL;
	if (!v || json_is_null(v))
		return true;
	if (!json_is_array(v) || json_array_size(v) > SAAS_NETWORK_RULES_MAX) {
		aas_e2b_error(out, 400, "network.%s must be an array of at most %d strings", name, SAAS_NETWORK_RULES_MAX);
		return false;
	}
	json_array_foreach(v, i, item) {
		if (!json_is_string(item)) {
			aas_e2b_error(out, 400, "network.%s must hold strings", name);
			return false;
		}
		list[(*count)++] = json_string_value(item);
	}
	list[*count] = NULL;
	return true;
}

/*
 * E2B's egress (allow_internet_access, network.allowOut/denyOut: all is
 * allowed unless denied, and allowOut wins over denyOut) as libsaas's
 * (only what allow names, less what deny names). spec is filled when a
 * policy is needed (*policy true), else *mode names one ("isolated",
 * "internet") or NULL (the engine's default). false after a 400.
 */
static bool egress(json_t *body, const char **mode, bool *policy, saas_network_spec *spec, const char **allow,
                   const char **deny, struct aas_reply *out)
{
	static const char *const everything[] = { "*", NULL };
	json_t *net = json_object_get(body, "network"), *internet = json_object_get(body, "allow_internet_access");
	size_t nallow = 0, ndeny = 0, kept = 0;
	bool deny_all;

	*mode = NULL;
	*policy = false;
	if (internet && !json_is_boolean(internet) && !json_is_null(internet)) {
		aas_e2b_error(out, 400, "\"allow_internet_access\" must be true or false");
		return false;
	}
	if (net && !json_is_null(net)) {
		static const char *const unsupported[] = { "rules", "egressProxy", "maskRequestHost", "httpsPorts" };
		json_t *pub = json_object_get(net, "allowPublicTraffic");
		if (!json_is_object(net)) {
			aas_e2b_error(out, 400, "\"network\" must be an object");
			return false;
		}
		for (size_t i = 0; i < sizeof(unsupported) / sizeof(unsupported[0]); i++) {
			json_t *v = json_object_get(net, unsupported[i]);
			if (v && !json_is_null(v) && !(json_is_array(v) && json_array_size(v) == 0) &&
			    !(json_is_object(v) && json_object_size(v) == 0)) {
				aas_e2b_error(out, 400, "network.%s is not supported by libsaas (docs/e2b.md)", unsupported[i]);
				return false;
			}
		}
		/* false is what libsaas always does (every port needs the trafficAccessToken); true is refused, not ignored. */
		if (pub && !json_is_boolean(pub) && !json_is_null(pub)) {
			aas_e2b_error(out, 400, "network.allowPublicTraffic must be true or false");
			return false;
		}
		if (json_is_true(pub)) {
			aas_e2b_error(out, 400, "network.allowPublicTraffic: libsaas serves a sandbox's ports only with its "
			              "trafficAccessToken (header e2b-traffic-access-token); leave it out or false, and share "
			              "a port publicly with a libsaas preview URL (docs/e2b.md)");
			return false;
		}
		if (!string_list(net, "allowOut", allow, &nallow, out) || !string_list(net, "denyOut", deny, &ndeny, out))
			return false;
	} else {
		allow[0] = deny[0] = NULL;
	}
	deny_all = internet && json_is_false(internet);
	for (size_t i = 0; i < ndeny; i++)
		if (strcmp(deny[i], "0.0.0.0/0") == 0)
			deny_all = true;
	if (deny_all) {
		if (nallow == 0) {
			*mode = "isolated";
			return true;
		}
		spec->mode = SAAS_NETWORK_POLICY;
		spec->allow = allow;
		*policy = true;
		return true;
	}
	if (ndeny > 0) {
		/* Allow wins in E2B: a destination in both lists is allowed, so it leaves the deny list. */
		for (size_t i = 0; i < ndeny; i++) {
			bool allowed = false;
			for (size_t j = 0; j < nallow; j++)
				allowed = allowed || strcmp(deny[i], allow[j]) == 0;
			if (!allowed)
				deny[kept++] = deny[i];
		}
		deny[kept] = NULL;
		spec->mode = SAAS_NETWORK_POLICY;
		spec->allow = everything;
		spec->deny = deny;
		*policy = true;
		return true;
	}
	if (internet && json_is_true(internet))
		*mode = "internet";
	return true;
}

/* Fields of a create that name what libsaas does not do (yet): a 400 naming the feature. */
static bool refuse_unsupported(json_t *body, struct aas_reply *out)
{
	json_t *v;

	if ((v = json_object_get(body, "volumeMounts")) && !json_is_null(v) &&
	    !(json_is_array(v) && json_array_size(v) == 0)) {
		aas_e2b_error(out, 400, "volumes (volumeMounts) are not supported by libsaas yet (docs/e2b.md)");
		return false;
	}
	if ((v = json_object_get(body, "mcp")) && !json_is_null(v)) {
		aas_e2b_error(out, 400, "the MCP gateway (mcp) is not supported: E2B runs it as root, and libsaas "
		              "sandboxes have no root (docs/e2b.md)");
		return false;
	}
	return true;
}

/*
 * E2B's lifecycle: autoPause (onTimeout 'pause') and autoResume {"enabled"}.
 * autoPauseMemory is taken either way: a libsaas pause always keeps memory,
 * more than E2B's filesystem-only pause asks. false after a 400.
 */
static bool lifecycle(json_t *body, saas_create_options *o, struct aas_reply *out)
{
	json_t *pause = json_object_get(body, "autoPause"), *resume = json_object_get(body, "autoResume"), *enabled;

	if (pause && !json_is_null(pause) && !json_is_boolean(pause)) {
		aas_e2b_error(out, 400, "\"autoPause\" must be true or false");
		return false;
	}
	enabled = json_is_object(resume) ? json_object_get(resume, "enabled") : NULL;
	if (resume && !json_is_null(resume) && (!json_is_object(resume) || (enabled && !json_is_boolean(enabled)))) {
		aas_e2b_error(out, 400, "\"autoResume\" must be {\"enabled\": true or false}");
		return false;
	}
	o->on_timeout = json_is_true(pause) ? SAAS_ON_TIMEOUT_PAUSE : SAAS_ON_TIMEOUT_DESTROY;
	o->auto_resume = json_is_true(enabled);
	if (o->auto_resume && o->on_timeout != SAAS_ON_TIMEOUT_PAUSE) {
		aas_e2b_error(out, 400, "autoResume needs lifecycle.onTimeout 'pause' (autoPause): a sandbox that ends "
		              "at its timeout has nothing to resume");
		return false;
	}
	return true;
}

/* ---- the calls ---- */

/* POST /v2/sandboxes, POST /sandboxes (Python). */
static void h_create(struct aas_req *r, struct aas_reply *out)
{
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_network_spec spec = SAAS_NETWORK_SPEC_INIT;
	const char *allow[SAAS_NETWORK_RULES_MAX + 2], *deny[SAAS_NETWORK_RULES_MAX + 2];
	/* The tenant's pairs, the template's after them, and the NULL. */
	char *metadata[AAS_E2B_METADATA_MAX + 2] = { NULL }, *envs[SAAS_ENVS_MAX + 1] = { NULL };
	const struct aas_e2b_template *tpl;
	json_t *body = NULL, *v;
	saas_sandbox *sb = NULL;
	int64_t timeout = AAS_E2B_TIMEOUT_DEFAULT;
	bool present, policy;
	size_t n;
	int rc;

	if (!aas_e2b_body(r, out, &body))
		goto out;
	v = json_object_get(body, "templateID");
	if (!json_is_string(v)) {
		aas_e2b_error(out, 400, "\"templateID\" (a string) is required");
		goto out;
	}
	if (!(tpl = aas_e2b_template_find(&aas_e2b_state.templates, json_string_value(v)))) {
		char known[512] = "";
		for (size_t i = 0; i < aas_e2b_state.templates.count; i++)
			snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s", i ? ", " : "",
			         aas_e2b_state.templates.items[i].name);
		aas_e2b_error(out, 400, "unknown template \"%.100s\": this server has %s (--e2b-templates; template builds "
		              "are not supported yet)", json_string_value(v), known);
		goto out;
	}
	if (!field_int(body, "timeout", 1, INT32_MAX, &timeout, &present, out) || !refuse_unsupported(body, out) ||
	    !lifecycle(body, &o, out) || !pairs_of(body, "metadata", AAS_E2B_METADATA_MAX, true, metadata, out) ||
	    !pairs_of(body, "envVars", SAAS_ENVS_MAX, false, envs, out) ||
	    !egress(body, &o.network, &policy, &spec, allow, deny, out))
		goto out;
	/* The template rides with the sandbox as metadata: any server, after any restart, shows it. */
	for (n = 0; metadata[n]; n++)
		;
	if (asprintf(&metadata[n], "%s=%s", AAS_E2B_META_TEMPLATE, tpl->name) < 0) {
		metadata[n] = NULL;
		aas_e2b_error(out, 500, "out of memory");
		goto out;
	}
	o.size = tpl->size;
	o.image = tpl->image;
	o.timeout_s = timeout;
	o.metadata = (const char *const *)metadata;
	o.envs = (const char *const *)envs;
	if (policy)
		o.network_spec = &spec;
	if ((rc = saas_sandbox_create(&sb, r->client, &o, 0)) < 0) {
		aas_e2b_error_saas(out, rc, "e2b: create");
		goto out;
	}
	/* A client that left gets no answer: destroy rather than leave a VM running for nobody (as /v1 does). */
	if (aas_client_gone(r)) {
		aas_log(SAAS_LOG_INFO, "e2b: the client of create %s left; destroying it", sb->id);
		if ((rc = saas_sandbox_destroy(NULL, r->client, sb->id, 0)) < 0)
			aas_log(SAAS_LOG_WARN, "e2b: destroying %s: %s", sb->id, saas_error_last()->message);
		goto out;
	}
	aas_e2b_json(out, 201, sandbox_json(sb, r->account_id, SHAPE_CREATED));
out:
	pairs_free(metadata);
	pairs_free(envs);
	saas_sandbox_free(sb);
	json_decref(body);
}

/* Push the expiry to at least now + seconds (libsaas extends, never shortens: docs/e2b.md). */
static int at_least(struct aas_req *r, saas_sandbox **sb, int64_t seconds)
{
	int64_t want = aas_now_ms() + seconds * 1000, delta = want - (*sb)->expires_at_ms;
	saas_sandbox *n = NULL;
	int rc;

	if (delta <= 0)
		return SAAS_OK;
	if ((rc = saas_sandbox_extend(&n, r->client, (*sb)->id, (delta + 999) / 1000, 0)) < 0)
		return rc;
	saas_sandbox_free(*sb);
	*sb = n;
	return SAAS_OK;
}

/* POST /v2/sandboxes/{id}/connect, POST /sandboxes/{id}/connect (Python): resumes a paused one (201). */
static void h_connect(struct aas_req *r, struct aas_reply *out, const char *e2b_id)
{
	json_t *body = NULL;
	saas_sandbox *sb = NULL, *resumed = NULL;
	int64_t timeout = 0;
	unsigned int status = 200;
	bool present;
	int rc;

	if (!aas_e2b_body(r, out, &body) || !field_int(body, "timeout", 0, INT32_MAX, &timeout, &present, out) ||
	    !find(r, out, e2b_id, &sb))
		goto out;
	if (sb->status == SAAS_SANDBOX_PAUSED) {
		if ((rc = saas_sandbox_resume(&resumed, r->client, sb->id, 0)) < 0) {
			aas_e2b_error_saas(out, rc, "e2b: connect (resume)");
			goto out;
		}
		saas_sandbox_free(sb);
		sb = resumed;
		status = 201;
	}
	if (present && timeout > 0 && (rc = at_least(r, &sb, timeout)) < 0) {
		aas_e2b_error_saas(out, rc, "e2b: connect (timeout)");
		goto out;
	}
	aas_e2b_json(out, status, sandbox_json(sb, r->account_id, SHAPE_CREATED));
out:
	saas_sandbox_free(sb);
	json_decref(body);
}

/* POST /sandboxes/{id}/resume (Python's older call): 201, or 409 when it is not paused. */
static void h_resume(struct aas_req *r, struct aas_reply *out, const char *e2b_id)
{
	json_t *body = NULL;
	saas_sandbox *sb = NULL, *resumed = NULL;
	int64_t timeout = 0;
	bool present;
	int rc;

	if (!aas_e2b_body(r, out, &body) || !field_int(body, "timeout", 0, INT32_MAX, &timeout, &present, out) ||
	    !find(r, out, e2b_id, &sb))
		goto out;
	if (sb->status != SAAS_SANDBOX_PAUSED) {
		aas_e2b_error(out, 409, "sandbox \"%s\" is not paused", e2b_id);
		goto out;
	}
	if ((rc = saas_sandbox_resume(&resumed, r->client, sb->id, 0)) < 0) {
		aas_e2b_error_saas(out, rc, "e2b: resume");
		goto out;
	}
	saas_sandbox_free(sb);
	sb = resumed;
	if (present && timeout > 0 && (rc = at_least(r, &sb, timeout)) < 0) {
		aas_e2b_error_saas(out, rc, "e2b: resume (timeout)");
		goto out;
	}
	aas_e2b_json(out, 201, sandbox_json(sb, r->account_id, SHAPE_CREATED));
out:
	saas_sandbox_free(sb);
	json_decref(body);
}

static void h_get(struct aas_req *r, struct aas_reply *out, const char *e2b_id)
{
	saas_sandbox *sb = NULL;

	if (find(r, out, e2b_id, &sb))
		aas_e2b_json(out, 200, sandbox_json(sb, r->account_id, SHAPE_DETAIL));
	saas_sandbox_free(sb);
}

static void h_kill(struct aas_req *r, struct aas_reply *out, const char *e2b_id)
{
	saas_sandbox *sb = NULL;
	int rc;

	if (!find(r, out, e2b_id, &sb))
		goto out;
	if ((rc = saas_sandbox_destroy(NULL, r->client, sb->id, 0)) < 0) {
		aas_e2b_error_saas(out, rc, "e2b: kill");
		goto out;
	}
	aas_e2b_json(out, 204, NULL);
out:
	saas_sandbox_free(sb);
}

/* POST /sandboxes/{id}/timeout {"timeout": seconds}: the sandbox ends that long from now. */
static void h_timeout(struct aas_req *r, struct aas_reply *out, const char *e2b_id)
{
	json_t *body = NULL;
	saas_sandbox *sb = NULL;
	int64_t timeout = 0;
	bool present;
	int rc;

	if (!aas_e2b_body(r, out, &body) || !field_int(body, "timeout", 0, INT32_MAX, &timeout, &present, out))
		goto out;
	if (!present) {
		aas_e2b_error(out, 400, "\"timeout\" (seconds) is required");
		goto out;
	}
	if (!find(r, out, e2b_id, &sb))
		goto out;
	/* E2B's setTimeout sets the end from now, sooner or later than it was. */
	if ((rc = saas_sandbox_extend(NULL, r->client, sb->id, timeout, SAAS_EXTEND_FROM_NOW)) < 0) {
		aas_e2b_error_saas(out, rc, "e2b: timeout");
		goto out;
	}
	aas_e2b_json(out, 204, NULL);
out:
	saas_sandbox_free(sb);
	json_decref(body);
}

static void h_pause(struct aas_req *r, struct aas_reply *out, const char *e2b_id)
{
	json_t *body = NULL;
	saas_sandbox *sb = NULL;
	int rc;

	if (!aas_e2b_body(r, out, &body) || !find(r, out, e2b_id, &sb))
		goto out;
	if (is_paused(sb)) {
		aas_e2b_error(out, 409, "sandbox \"%s\" is already paused", e2b_id);
		goto out;
	}
	if ((rc = saas_sandbox_pause(NULL, r->client, sb->id, 0)) < 0) {
		aas_e2b_error_saas(out, rc, "e2b: pause");
		goto out;
	}
	aas_e2b_json(out, 204, NULL);
out:
	saas_sandbox_free(sb);
	json_decref(body);
}

/*
 * PUT /sandboxes/{id}/network (updateNetwork): the new egress replaces the
 * old, as saas_sandbox_network_set does. E2B puts allowOut and denyOut at
 * the top of this body (in create's, under "network"): read as create's.
 */
static void h_network(struct aas_req *r, struct aas_reply *out, const char *e2b_id)
{
	saas_network_spec spec = SAAS_NETWORK_SPEC_INIT;
	const char *allow[SAAS_NETWORK_RULES_MAX + 2], *deny[SAAS_NETWORK_RULES_MAX + 2], *mode = NULL;
	json_t *body = NULL, *as_create = NULL, *net = NULL;
	saas_sandbox *sb = NULL;
	bool policy = false;
	int rc;

	if (!aas_e2b_body(r, out, &body))
		goto out;
	if (!(as_create = json_object()) || !(net = json_object())) {
		aas_e2b_error(out, 500, "out of memory");
		goto out;
	}
	static const char *const moved[] = { "allowOut", "denyOut", "rules", "egressProxy" };
	for (size_t i = 0; i < sizeof(moved) / sizeof(moved[0]); i++)
		if (json_object_get(body, moved[i]))
			json_object_set(net, moved[i], json_object_get(body, moved[i]));
	if (json_object_get(body, "allow_internet_access"))
		json_object_set(as_create, "allow_internet_access", json_object_get(body, "allow_internet_access"));
	json_object_set(as_create, "network", net);
	if (!egress(as_create, &mode, &policy, &spec, allow, deny, out) || !find(r, out, e2b_id, &sb))
		goto out;
	/* Nothing denied is E2B's default: every destination the internet policy allows. */
	if (!policy)
		spec.mode = mode && strcmp(mode, "isolated") == 0 ? SAAS_NETWORK_ISOLATED : SAAS_NETWORK_INTERNET;
	if ((rc = saas_sandbox_network_set(NULL, r->client, sb->id, &spec, 0)) < 0) {
		aas_e2b_error_saas(out, rc, "e2b: network");
		goto out;
	}
	aas_e2b_json(out, 204, NULL);
out:
	saas_sandbox_free(sb);
	json_decref(net);
	json_decref(as_create);
	json_decref(body);
}

/*
 * POST /sandboxes/{id}/fork {"timeout"?, "count"?}: 201 with a
 * SandboxForkResult per child ({"sandbox": Sandbox}). libsaas forks all or
 * nothing, so a failure is the whole call's. The engine gives the children
 * the parent's metadata (its template with it), envs and lifecycle.
 */
static void h_fork(struct aas_req *r, struct aas_reply *out, const char *e2b_id)
{
	saas_fork_options o = SAAS_FORK_OPTIONS_INIT;
	saas_sandbox_list *children = NULL;
	json_t *body = NULL, *results = NULL;
	saas_sandbox *sb = NULL;
	int64_t timeout = 0, count = 1;
	bool present;
	int rc;

	if (!aas_e2b_body(r, out, &body) || !field_int(body, "timeout", 1, INT32_MAX, &timeout, &present, out) ||
	    !field_int(body, "count", 1, SAAS_FORK_MAX, &count, &present, out) || !find(r, out, e2b_id, &sb))
		goto out;
	o.timeout_s = timeout;
	if ((rc = saas_sandbox_fork(&children, r->client, sb->id, (unsigned int)count, &o, 0)) < 0) {
		aas_e2b_error_saas(out, rc, "e2b: fork");
		goto out;
	}
	if (!(results = json_array())) {
		aas_e2b_error(out, 500, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < children->count; i++)
		json_array_append_new(results, json_pack("{s:o}", "sandbox",
		                                         sandbox_json(children->items[i], r->account_id, SHAPE_CREATED)));
	aas_e2b_json(out, 201, results);
	results = NULL;
out:
	json_decref(results);
	saas_sandbox_list_free(children);
	saas_sandbox_free(sb);
	json_decref(body);
}

/* ---- list ---- */

/* The most pairs a metadata filter may hold: the engine's. */
#define FILTER_PAIRS_MAX SAAS_LIST_METADATA_MAX

struct filter {
	bool running, paused;
	size_t npairs;
	char *buf;
	/* "KEY=VALUE" (pointing into buf), NULL-terminated, for the engine's list. */
	const char *pair[FILTER_PAIRS_MAX + 1];
};

/*
 * The metadata filter as E2B's server reads it: the parameter (decoded once
 * by the HTTP layer) is unescaped again, split on '&' then '=' (two parts
 * each), and each key and value unescaped once more. false after a 400.
 */
static bool parse_metadata(struct filter *f, const char *param, struct aas_reply *out)
{
	size_t n = strlen(param), len;
	char *save = NULL, *pair;

	if (n > FILTER_MAX) {
		aas_e2b_error(out, 400, "the metadata filter is over %d bytes", FILTER_MAX);
		return false;
	}
	if (!(f->buf = malloc(n + 1))) {
		aas_e2b_error(out, 500, "out of memory");
		return false;
	}
	if (!aas_e2b_unescape(f->buf, &len, param, n)) {
		aas_e2b_error(out, 400, "the metadata filter has a bad %%-escape");
		return false;
	}
	for (pair = strtok_r(f->buf, "&", &save); pair; pair = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(pair, '=');
		size_t klen, vlen;
		if (!eq || strchr(eq + 1, '=') || f->npairs == FILTER_PAIRS_MAX) {
			aas_e2b_error(out, 400, "the metadata filter must be at most %d key=value pairs", FILTER_PAIRS_MAX);
			return false;
		}
		*eq = '\0';
		/* In place: an unescaped text is never longer than its escaped one. */
		if (!aas_e2b_unescape(pair, &klen, pair, strlen(pair)) || !aas_e2b_unescape(eq + 1, &vlen, eq + 1, strlen(eq + 1))) {
			aas_e2b_error(out, 400, "the metadata filter has a bad %%-escape");
			return false;
		}
		/*
		 * Joined again as the engine takes it, "KEY=VALUE", in place: the
		 * value moves up to just after the key's '='. A key holding '=' (no
		 * metadata key can) or under the face's own prefix matches nothing.
		 */
		if (!klen || memchr(pair, '=', klen) || strncmp(pair, AAS_E2B_META_PREFIX, strlen(AAS_E2B_META_PREFIX)) == 0) {
			aas_e2b_error(out, 400, "the metadata filter names a key no sandbox's metadata can hold");
			return false;
		}
		pair[klen] = '=';
		memmove(pair + klen + 1, eq + 1, vlen + 1);
		f->pair[f->npairs++] = pair;
	}
	f->pair[f->npairs] = NULL;
	return true;
}

static bool parse_state(struct filter *f, const char *param, struct aas_reply *out)
{
	const char *p = param;

	f->running = f->paused = false;
	while (*p) {
		size_t n = strcspn(p, ",");
		if (n == 7 && strncmp(p, "running", 7) == 0)
			f->running = true;
		else if (n == 6 && strncmp(p, "paused", 6) == 0)
			f->paused = true;
		else {
			aas_e2b_error(out, 400, "state must be running, paused or both (comma-separated)");
			return false;
		}
		p += n + (p[n] == ',');
	}
	return true;
}

/* The state filter, which the engine's list has not (its metadata filter is the store's). */
static bool matches(const struct filter *f, const saas_sandbox *s)
{
	if (s->status == SAAS_SANDBOX_DESTROYED || !aas_e2b_id_from_saas(s->id))
		return false;
	return is_paused(s) ? f->paused : f->running;
}

/*
 * GET /v2/sandboxes (and the older GET /sandboxes): the account's sandboxes,
 * newest first, filtered; x-next-token when there are more. The token is the
 * engine's cursor: the store filters by metadata, and each engine page read
 * is taken whole, so the next E2B page starts where the last engine page
 * ended. Only the state filter is applied here, over at most LIST_ROUNDS_MAX
 * engine pages.
 */
static void h_list(struct aas_req *r, struct aas_reply *out)
{
	struct filter f = { .running = true, .paused = true };
	saas_list_options lo = SAAS_LIST_OPTIONS_INIT;
	const char *state, *metadata, *token;
	unsigned int limit = LIST_LIMIT_DEFAULT;
	saas_sandbox_list *page = NULL;
	char *cursor = NULL;
	json_t *items = NULL;
	int rc;

	if (!aas_query(r, "state", &state, out) || !aas_query(r, "metadata", &metadata, out) ||
	    !aas_query(r, "nextToken", &token, out) || !aas_query_uint(r, "limit", 1, LIST_LIMIT_MAX, &limit, out))
		goto out;
	if ((state && *state && !parse_state(&f, state, out)) || (metadata && *metadata && !parse_metadata(&f, metadata, out)))
		goto out;
	if (token && *token && !(cursor = strdup(token))) {
		aas_e2b_error(out, 500, "out of memory");
		goto out;
	}
	if (!(items = json_array())) {
		aas_e2b_error(out, 500, "out of memory");
		goto out;
	}
	lo.metadata = f.npairs ? f.pair : NULL;
	for (int round = 0; round < LIST_ROUNDS_MAX && json_array_size(items) < limit; round++) {
		lo.cursor = cursor;
		lo.limit = limit - (unsigned int)json_array_size(items);
		/* E2B's listing shows no egress counters: the recorded ones spare a driver call per sandbox. */
		if ((rc = saas_sandbox_list_query(&page, r->client, &lo, SAAS_LIST_ACTIVE | SAAS_LIST_RECORDED)) < 0) {
			aas_e2b_error_saas(out, rc, "e2b: list");
			goto out;
		}
		for (size_t i = 0; i < page->count; i++)
			if (matches(&f, page->items[i]))
				json_array_append_new(items, sandbox_json(page->items[i], r->account_id, SHAPE_LISTED));
		free(cursor);
		cursor = page->next_cursor ? strdup(page->next_cursor) : NULL;
		saas_sandbox_list_free(page);
		page = NULL;
		if (!cursor)
			break;
	}
	aas_e2b_json(out, 200, items);
	items = NULL;
	if (out->response && cursor)
		MHD_add_response_header(out->response, "x-next-token", cursor);
out:
	json_decref(items);
	saas_sandbox_list_free(page);
	free(cursor);
	free(f.buf);
}

/* ---- routing ---- */

/* Features of E2B's API that libsaas does not have (yet): each a 501 naming it. */
static const struct {
	const char *prefix;
	const char *feature;
} missing[] = {
	{ "/templates", "template builds and template management" },
	{ "/v2/templates", "template builds and template management" },
	{ "/v3/templates", "template builds and template management" },
	{ "/builds", "template builds" },
	{ "/snapshots", "snapshots" },
	{ "/secrets", "secrets" },
	{ "/volumes", "volumes" },
	{ "/teams", "teams" },
	{ "/access-tokens", "access tokens (use your libsaas key)" },
	{ "/api-keys", "API key management (use aas-server key or the dashboard)" },
	{ "/nodes", "cluster nodes" },
};

/* Per-sandbox calls E2B has and this server does not serve yet. */
static const struct {
	const char *tail;
	const char *feature;
} missing_sandbox[] = {
	{ "/logs", "sandbox logs" },
	{ "/snapshots", "snapshots" },
	{ "/refreshes", "refreshes (use setTimeout)" },
};

/* "/sandboxes/ID/TAIL": the id (into id) and the tail ("" or "/..."), or false. */
static bool sandbox_path(const char *path, const char *prefix, char *id, size_t idsize, const char **tail)
{
	size_t n = strlen(prefix), len;

	if (strncmp(path, prefix, n) != 0 || path[n] != '/')
		return false;
	path += n + 1;
	len = strcspn(path, "/");
	if (len == 0 || len >= idsize)
		return false;
	memcpy(id, path, len);
	id[len] = '\0';
	*tail = path + len;
	return true;
}

bool aas_e2b_authenticate(struct aas_req *r, struct aas_reply *out)
{
	const char *key = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-API-KEY");
	int rc;

	if (!key || !*key) {
		aas_e2b_error(out, 401, "an API key is required: send X-API-KEY with your libsaas key (e2b_... or aas_sk_...)");
		return false;
	}
	rc = aas_auth_get(&r->auth, &r->client, key);
	if (rc == SAAS_EAUTH) {
		r->auth = NULL;
		r->client = NULL;
		aas_e2b_error(out, 401, "the API key is unknown or revoked");
		return false;
	}
	if (rc < 0) {
		r->auth = NULL;
		r->client = NULL;
		aas_e2b_error_saas(out, rc, "e2b: authenticating");
		return false;
	}
	snprintf(r->account_id, sizeof(r->account_id), "%s", saas_client_account_id(r->client));
	return true;
}

void aas_e2b_control(struct aas_req *r, struct aas_reply *out, const char *path)
{
	const char *m = strcmp(r->method, "HEAD") == 0 ? "GET" : r->method, *tail;
	char id[SAAS_ID_MAX + 1];

	/* The key was checked before the body was read (aas_e2b_authenticate, gateway.c). */
	if (strcmp(path, "/v2/sandboxes") == 0 || strcmp(path, "/sandboxes") == 0) {
		if (strcmp(m, "POST") == 0)
			h_create(r, out);
		else if (strcmp(m, "GET") == 0)
			h_list(r, out);
		else
			aas_e2b_error(out, 405, "%s is not allowed on %s", r->method, path);
		return;
	}
	/* Before the per-sandbox calls, which would take "metrics" for an id. */
	if (strcmp(path, "/sandboxes/metrics") == 0 && strcmp(m, "GET") == 0) {
		aas_e2b_h_metrics_many(r, out);
		return;
	}
	if (sandbox_path(path, "/v2/sandboxes", id, sizeof(id), &tail) && strcmp(tail, "/connect") == 0 &&
	    strcmp(m, "POST") == 0) {
		h_connect(r, out, id);
		return;
	}
	if (sandbox_path(path, "/sandboxes", id, sizeof(id), &tail)) {
		if (!*tail && strcmp(m, "GET") == 0)
			h_get(r, out, id);
		else if (!*tail && strcmp(m, "DELETE") == 0)
			h_kill(r, out, id);
		else if (strcmp(tail, "/timeout") == 0 && strcmp(m, "POST") == 0)
			h_timeout(r, out, id);
		else if (strcmp(tail, "/pause") == 0 && strcmp(m, "POST") == 0)
			h_pause(r, out, id);
		else if (strcmp(tail, "/resume") == 0 && strcmp(m, "POST") == 0)
			h_resume(r, out, id);
		else if (strcmp(tail, "/connect") == 0 && strcmp(m, "POST") == 0)
			h_connect(r, out, id);
		else if (strcmp(tail, "/fork") == 0 && strcmp(m, "POST") == 0)
			h_fork(r, out, id);
		else if (strcmp(tail, "/network") == 0 && strcmp(m, "PUT") == 0)
			h_network(r, out, id);
		else if (strcmp(tail, "/metrics") == 0 && strcmp(m, "GET") == 0)
			aas_e2b_h_metrics(r, out, id);
		else {
			for (size_t i = 0; i < sizeof(missing_sandbox) / sizeof(missing_sandbox[0]); i++) {
				if (strcmp(tail, missing_sandbox[i].tail) == 0) {
					aas_e2b_error(out, 501, "%s: not supported by this server yet (docs/e2b.md)",
					              missing_sandbox[i].feature);
					return;
				}
			}
			aas_e2b_error(out, 404, "no E2B call %s %s", r->method, path);
		}
		return;
	}
	for (size_t i = 0; i < sizeof(missing) / sizeof(missing[0]); i++) {
		size_t n = strlen(missing[i].prefix);
		if (strncmp(path, missing[i].prefix, n) == 0 && (path[n] == '\0' || path[n] == '/')) {
			aas_e2b_error(out, 501, "%s: not supported by libsaas yet (docs/e2b.md)", missing[i].feature);
			return;
		}
	}
	aas_e2b_error(out, 404, "no E2B call %s %s", r->method, path);
}
