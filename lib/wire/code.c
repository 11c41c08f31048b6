/*
 * The REST shapes of code contexts (wire.h): a context, a list of them, a
 * run's execution, result and error, one encoder and decoder each. A
 * result's formats are an object keyed by MIME type; binary ones
 * (saas__wire_code_binary) travel as base64, the others as their text.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdlib.h>
#include <string.h>

#include "wire.h"

bool saas__wire_code_binary(const char *mime)
{
	static const char *const binary[] = { "image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf" };

	for (size_t i = 0; i < sizeof(binary) / sizeof(binary[0]); i++)
		if (strcmp(mime, binary[i]) == 0)
			return true;
	return false;
}

json_t *saas__wire_code_context(const saas_code_context *c)
{
	return json_pack("{s:s,s:s,s:s}", "id", c->id ? c->id : "", "language", c->language ? c->language : "", "cwd",
	                 c->cwd ? c->cwd : "");
}

json_t *saas__wire_code_context_list(const saas_code_context_list *l)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < l->count; i++)
		if (json_array_append_new(a, saas__wire_code_context(l->items[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a ? json_pack("{s:o}", "contexts", a) : NULL;
}

json_t *saas__wire_code_error(const saas_code_error *e)
{
	if (!e)
		return json_null();
	return json_pack("{s:s,s:s,s:s,s:b}", "name", e->name ? e->name : "", "value", e->value ? e->value : "",
	                 "traceback", e->traceback ? e->traceback : "", "truncated", e->truncated);
}

json_t *saas__wire_code_result(const saas_code_result *r)
{
	json_t *f = json_object();

	for (size_t i = 0; f && i < r->count; i++) {
		const saas_code_format *fm = r->formats[i];
		json_t *v;
		if (saas__wire_code_binary(fm->mime)) {
			char *b64 = saas_base64_encode(fm->data, fm->len);
			v = b64 ? json_string(b64) : NULL;
			saas_free(b64);
		} else {
			/* Text the guest sent as a JSON string: UTF-8 already, unless a bad one (then it is left out). */
			v = json_stringn((const char *)fm->data, fm->len);
			if (!v)
				continue;
		}
		if (!v || json_object_set_new(f, fm->mime, v) < 0) {
			json_decref(f);
			return NULL;
		}
	}
	return f ? json_pack("{s:b,s:b,s:o}", "is_main_result", r->is_main, "truncated", r->truncated, "formats", f)
	         : NULL;
}

json_t *saas__wire_code_execution(const saas_code_execution *x, bool brief)
{
	json_t *o = json_pack("{s:s,s:b,s:b,s:b,s:I,s:o}", "status", saas_code_status_name(x->status),
	                      "stdout_truncated", x->stdout_truncated, "stderr_truncated", x->stderr_truncated,
	                      "results_truncated", x->results_truncated, "duration_ms", (json_int_t)x->duration_ms,
	                      "execution_count",
	                      x->execution_count >= 0 ? json_integer((json_int_t)x->execution_count) : json_null());
	json_t *results;

	if (!o || brief)
		return o;
	if (json_object_set_new(o, "stdout", json_stringn(x->stdout_data ? x->stdout_data : "", x->stdout_len)) < 0 ||
	    json_object_set_new(o, "stderr", json_stringn(x->stderr_data ? x->stderr_data : "", x->stderr_len)) < 0 ||
	    json_object_set_new(o, "error", saas__wire_code_error(x->error)) < 0 || !(results = json_array()) ||
	    json_object_set_new(o, "results", results) < 0) {
		json_decref(o);
		return NULL;
	}
	for (size_t i = 0; i < x->result_count; i++)
		if (json_array_append_new(results, saas__wire_code_result(x->results[i])) < 0) {
			json_decref(o);
			return NULL;
		}
	return o;
}

/* ---- decoders ---- */

static char *dup_str(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	const char *s = json_is_string(v) ? json_string_value(v) : "";
	char *d = malloc(strlen(s) + 1);

	if (d)
		memcpy(d, s, strlen(s) + 1);
	return d;
}

int saas__wire_code_context_decode(saas_code_context **out, const json_t *o, const char **bad)
{
	saas_code_context *c;

	*out = NULL;
	if (!json_is_object(o) || !json_is_string(json_object_get(o, "id"))) {
		*bad = "context id";
		return SAAS_EPROTOCOL;
	}
	if (!(c = calloc(1, sizeof(*c))) || !(c->id = dup_str(o, "id")) || !(c->language = dup_str(o, "language")) ||
	    !(c->cwd = dup_str(o, "cwd"))) {
		saas_code_context_free(c);
		return SAAS_ENOMEM;
	}
	*out = c;
	return SAAS_OK;
}

int saas__wire_code_context_list_decode(saas_code_context_list **out, const json_t *o, const char **bad)
{
	const json_t *a = json_object_get(o, "contexts"), *v;
	saas_code_context_list *l;
	size_t i;
	int rc;

	*out = NULL;
	if (!json_is_array(a) || json_array_size(a) > 4 * SAAS_CODE_CONTEXTS_MAX) {
		*bad = "contexts";
		return SAAS_EPROTOCOL;
	}
	if (!(l = calloc(1, sizeof(*l))) || !(l->items = calloc(json_array_size(a) + 1, sizeof(*l->items)))) {
		free(l);
		return SAAS_ENOMEM;
	}
	json_array_foreach(a, i, v) {
		if ((rc = saas__wire_code_context_decode(&l->items[i], v, bad)) < 0) {
			saas_code_context_list_free(l);
			return rc;
		}
		l->count++;
	}
	*out = l;
	return SAAS_OK;
}

int saas__wire_code_error_decode(saas_code_error **out, const json_t *o, const char **bad)
{
	saas_code_error *e;

	*out = NULL;
	if (!json_is_object(o) || !json_is_string(json_object_get(o, "name"))) {
		*bad = "error name";
		return SAAS_EPROTOCOL;
	}
	if (!(e = calloc(1, sizeof(*e))) || !(e->name = dup_str(o, "name")) || !(e->value = dup_str(o, "value")) ||
	    !(e->traceback = dup_str(o, "traceback"))) {
		if (e)
			free(e->name), free(e->value), free(e->traceback), free(e);
		return SAAS_ENOMEM;
	}
	e->truncated = json_is_true(json_object_get(o, "truncated"));
	*out = e;
	return SAAS_OK;
}

static void result_free(saas_code_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->count; i++) {
		free(r->formats[i]->mime);
		free(r->formats[i]->data);
		free(r->formats[i]);
	}
	free(r->formats);
	free(r);
}

int saas__wire_code_result_decode(saas_code_result **out, const json_t *o, const char **bad)
{
	const json_t *f = json_object_get(o, "formats"), *v;
	saas_code_result *r;
	const char *mime;

	*out = NULL;
	if (!json_is_object(o) || !json_is_object(f)) {
		*bad = "result formats";
		return SAAS_EPROTOCOL;
	}
	if (!(r = calloc(1, sizeof(*r))) || !(r->formats = calloc(json_object_size(f) + 1, sizeof(*r->formats)))) {
		free(r);
		return SAAS_ENOMEM;
	}
	r->is_main = json_is_true(json_object_get(o, "is_main_result"));
	r->truncated = json_is_true(json_object_get(o, "truncated"));
	json_object_foreach((json_t *)f, mime, v) {
		saas_code_format *fm;
		void *data = NULL;
		size_t len = 0;
		if (!json_is_string(v)) {
			*bad = "result format";
			result_free(r);
			return SAAS_EPROTOCOL;
		}
		if (saas__wire_code_binary(mime)) {
			int rc = saas_base64_decode(&data, &len, json_string_value(v), json_string_length(v));
			if (rc < 0) {
				*bad = "result format (base64)";
				result_free(r);
				return rc == SAAS_ENOMEM ? rc : SAAS_EPROTOCOL;
			}
		} else {
			len = json_string_length(v);
			if ((data = malloc(len + 1))) {
				memcpy(data, json_string_value(v), len);
				((char *)data)[len] = '\0';
			}
		}
		fm = data ? calloc(1, sizeof(*fm)) : NULL;
		if (!fm || !(fm->mime = malloc(strlen(mime) + 1))) {
			free(fm);
			free(data);
			result_free(r);
			return SAAS_ENOMEM;
		}
		memcpy(fm->mime, mime, strlen(mime) + 1);
		fm->data = data;
		fm->len = len;
		r->formats[r->count++] = fm;
	}
	*out = r;
	return SAAS_OK;
}

static int status_of(const char *s)
{
	for (int st = SAAS_CODE_DONE; st <= SAAS_CODE_CANCELLED; st++)
		if (s && strcmp(s, saas_code_status_name(st)) == 0)
			return st;
	return -1;
}

int saas__wire_code_brief_decode(saas_code_execution *x, const json_t *o, const char **bad)
{
	const json_t *n = json_object_get(o, "execution_count");

	if (!json_is_object(o) || (x->status = status_of(json_string_value(json_object_get(o, "status")))) < 0) {
		*bad = "execution status";
		return SAAS_EPROTOCOL;
	}
	x->execution_count = json_is_integer(n) ? (int64_t)json_integer_value(n) : -1;
	x->stdout_truncated = json_is_true(json_object_get(o, "stdout_truncated"));
	x->stderr_truncated = json_is_true(json_object_get(o, "stderr_truncated"));
	x->results_truncated = json_is_true(json_object_get(o, "results_truncated"));
	n = json_object_get(o, "duration_ms");
	x->duration_ms = json_is_integer(n) ? (int64_t)json_integer_value(n) : 0;
	return SAAS_OK;
}

int saas__wire_code_execution_decode(saas_code_execution **out, const json_t *o, const char **bad)
{
	saas_code_execution *x = calloc(1, sizeof(*x));
	const json_t *results = json_object_get(o, "results"), *err = json_object_get(o, "error"), *v;
	size_t i;
	int rc;

	*out = NULL;
	if (!x)
		return SAAS_ENOMEM;
	if ((rc = saas__wire_code_brief_decode(x, o, bad)) < 0)
		goto out;
	rc = SAAS_ENOMEM;
	if (!(x->stdout_data = dup_str(o, "stdout")) || !(x->stderr_data = dup_str(o, "stderr")))
		goto out;
	x->stdout_len = strlen(x->stdout_data);
	x->stderr_len = strlen(x->stderr_data);
	if (err && !json_is_null(err) && (rc = saas__wire_code_error_decode(&x->error, err, bad)) < 0)
		goto out;
	if (json_is_array(results)) {
		if (json_array_size(results) > SAAS_CODE_RESULTS_MAX) {
			*bad = "results";
			rc = SAAS_EPROTOCOL;
			goto out;
		}
		if (!(x->results = calloc(json_array_size(results) + 1, sizeof(*x->results)))) {
			rc = SAAS_ENOMEM;
			goto out;
		}
		json_array_foreach(results, i, v) {
			if ((rc = saas__wire_code_result_decode(&x->results[i], v, bad)) < 0)
				goto out;
			x->result_count++;
		}
	}
	*out = x;
	x = NULL;
	rc = SAAS_OK;
out:
	saas_code_execution_free(x);
	return rc;
}
