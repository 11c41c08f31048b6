/*
 * JSON shapes of the REST API, and the money parser it needs (times are
 * the library's saas_time_parse/saas_time_format). Times are RFC 3339 UTC
 * with milliseconds; money is both an exact
 * decimal string ("cost_usd": "0.000125") and integer micro-dollars
 * ("cost_usd_micro": 125). Never a binary float.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server.h"

json_t *aas_json_time(int64_t ms)
{
	char buf[64];

	if (!ms)
		return json_null();
	return json_string(saas_time_format(buf, sizeof(buf), ms));
}

void aas_json_money(json_t *obj, const char *base, int64_t micro)
{
	char name[96], buf[40];

	json_object_set_new(obj, base, json_string(saas_usd_format(buf, sizeof(buf), micro)));
	snprintf(name, sizeof(name), "%s_micro", base);
	json_object_set_new(obj, name, json_integer(micro));
}

json_t *aas_json_sandbox(const saas_sandbox *sb)
{
	json_t *o = json_object(), *ports = json_array();

	json_object_set_new(o, "id", json_string(sb->id));
	json_object_set_new(o, "status", json_string(saas_sandbox_status_name(sb->status)));
	json_object_set_new(o, "end_reason",
	                    sb->end_reason ? json_string(saas_end_reason_name(sb->end_reason)) : json_null());
	json_object_set_new(o, "size", json_string(sb->size));
	json_object_set_new(o, "vcpus", json_integer(sb->vcpus));
	json_object_set_new(o, "memory_mb", json_integer(sb->memory_mb));
	json_object_set_new(o, "disk_gb", json_integer(sb->disk_gb));
	json_object_set_new(o, "image", json_string(sb->image ? sb->image : ""));
	json_object_set_new(o, "created_at", aas_json_time(sb->created_at_ms));
	json_object_set_new(o, "ready_at", aas_json_time(sb->ready_at_ms));
	json_object_set_new(o, "expires_at", aas_json_time(sb->expires_at_ms));
	json_object_set_new(o, "destroyed_at", aas_json_time(sb->destroyed_at_ms));
	aas_json_money(o, "cost_usd", sb->cost_usd_micro);
	for (size_t i = 0; i < sb->nports; i++)
		json_array_append_new(ports, json_pack("{s:i,s:s}", "port", (json_int_t)sb->ports[i]->port, "url",
		                                       sb->ports[i]->url ? sb->ports[i]->url : ""));
	json_object_set_new(o, "ports", ports);
	return o;
}

/*
 * Output is bytes. Valid UTF-8 (NULs included, as \u0000) travels as a JSON
 * string in "stdout"; anything else travels base64 in "stdout_base64" with
 * "stdout" null. "stdout_encoding" says which: "utf-8" or "base64".
 */
static void set_output(json_t *o, const char *name, const char *data, size_t len)
{
	char key[64];
	json_t *s = json_stringn(data ? data : "", data ? len : 0);

	if (s) {
		json_object_set_new(o, name, s);
		snprintf(key, sizeof(key), "%s_encoding", name);
		json_object_set_new(o, key, json_string("utf-8"));
		return;
	}
	char *b64 = saas_base64_encode(data, len);
	json_object_set_new(o, name, json_null());
	snprintf(key, sizeof(key), "%s_base64", name);
	json_object_set_new(o, key, b64 ? json_string(b64) : json_null());
	snprintf(key, sizeof(key), "%s_encoding", name);
	json_object_set_new(o, key, json_string("base64"));
	saas_free(b64);
}

json_t *aas_json_execution(const saas_execution *x)
{
	json_t *o = json_object();
	bool finished = x->status != SAAS_EXEC_RUNNING;

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
	json_object_set_new(o, "started_at", aas_json_time(x->started_at_ms));
	json_object_set_new(o, "finished_at", aas_json_time(x->finished_at_ms));
	json_object_set_new(o, "duration_ms", finished ? json_integer(x->duration_ms) : json_null());
	json_object_set_new(o, "error", x->error && *x->error ? json_string(x->error) : json_null());
	return o;
}

json_t *aas_json_size(const saas_size *s)
{
	json_t *o = json_pack("{s:s,s:i,s:i,s:i}", "name", s->name, "vcpus", (json_int_t)s->vcpus, "memory_mb",
	                      (json_int_t)s->memory_mb, "disk_gb", (json_int_t)s->disk_gb);
	aas_json_money(o, "usd_per_hour", s->usd_micro_per_hour);
	return o;
}

json_t *aas_json_limits(const saas_limits *l)
{
	return json_pack("{s:i,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "max_sandboxes",
	                 (json_int_t)l->max_sandboxes, "default_timeout", (json_int_t)l->default_timeout_s,
	                 "max_timeout", (json_int_t)l->max_timeout_s, "min_balance_seconds",
	                 (json_int_t)l->min_balance_s, "max_file_bytes", (json_int_t)SAAS_FILE_MAX, "max_exec_timeout",
	                 (json_int_t)SAAS_EXEC_TIMEOUT_MAX, "max_output_bytes", (json_int_t)SAAS_EXEC_OUTPUT_MAX,
	                 "max_stdin_bytes", (json_int_t)SAAS_EXEC_STDIN_MAX, "max_executions",
	                 (json_int_t)l->max_executions, "creates_per_minute", (json_int_t)l->creates_per_minute,
	                 "requests_per_second", (json_int_t)l->requests_per_second, "execution_retention",
	                 (json_int_t)l->execution_retention_s);
}

json_t *aas_json_account(const saas_account_info *ai)
{
	json_t *o = json_object(), *sizes = json_array();

	json_object_set_new(o, "id", json_string(ai->id));
	json_object_set_new(o, "name", json_string(ai->name ? ai->name : ""));
	aas_json_money(o, "credit_usd", ai->credit_usd_micro);
	aas_json_money(o, "spent_usd", ai->spent_usd_micro);
	aas_json_money(o, "balance_usd", ai->balance_usd_micro);
	json_object_set_new(o, "active_sandboxes", json_integer(ai->active_sandboxes));
	json_object_set_new(o, "running_executions", json_integer(ai->running_executions));
	json_object_set_new(o, "limits", aas_json_limits(ai->limits));
	for (size_t i = 0; i < ai->nsizes; i++)
		json_array_append_new(sizes, aas_json_size(ai->sizes[i]));
	json_object_set_new(o, "sizes", sizes);
	return o;
}

json_t *aas_json_usage(const saas_usage *u)
{
	json_t *o = json_object(), *lines = json_array();

	json_object_set_new(o, "from", aas_json_time(u->from_ms));
	json_object_set_new(o, "to", aas_json_time(u->to_ms));
	json_object_set_new(o, "total_seconds", json_integer(u->total_seconds));
	aas_json_money(o, "total_usd", u->total_usd_micro);
	for (size_t i = 0; i < u->count; i++) {
		const saas_usage_line *l = u->lines[i];
		json_t *line = json_pack("{s:s,s:s,s:I,s:b}", "sandbox_id", l->sandbox_id, "size", l->size, "seconds",
		                         (json_int_t)l->seconds, "running", l->running);
		aas_json_money(line, "cost_usd", l->cost_usd_micro);
		json_array_append_new(lines, line);
	}
	json_object_set_new(o, "sandboxes", lines);
	return o;
}

static const char *type_name(int type)
{
	switch (type) {
	case SAAS_FILE_REGULAR:
		return "file";
	case SAAS_FILE_DIRECTORY:
		return "directory";
	case SAAS_FILE_SYMLINK:
		return "symlink";
	default:
		return "other";
	}
}

json_t *aas_json_file_list(const saas_file_list *list)
{
	json_t *o = json_object(), *entries = json_array();
	char mode[8];

	json_object_set_new(o, "root", json_string(list->root ? list->root : ""));
	for (size_t i = 0; i < list->count; i++) {
		const saas_file_entry *e = list->entries[i];
		json_t *path = json_string(e->path ? e->path : "");
		snprintf(mode, sizeof(mode), "%04o", e->mode & 07777);
		json_array_append_new(entries, json_pack("{s:o,s:s,s:I,s:s,s:o}", "path",
		                                         path ? path : json_null(), "type", type_name(e->type), "size",
		                                         (json_int_t)e->size, "mode", mode, "modified_at",
		                                         aas_json_time(e->mtime_ms)));
	}
	json_object_set_new(o, "entries", entries);
	json_object_set_new(o, "count", json_integer((json_int_t)list->count));
	json_object_set_new(o, "truncated", json_boolean(list->truncated));
	return o;
}

/* "12", "12.5", "0.000001": at most six decimals, no sign, no exponent, at most AAS_USD_MAX. */
int aas_parse_usd(int64_t *micro, const char *s)
{
	int64_t whole = 0, frac = 0;
	int nfrac = 0;
	const char *p = s;

	if (!s || !isdigit((unsigned char)*p))
		return -1;
	for (; isdigit((unsigned char)*p); p++) {
		whole = whole * 10 + (*p - '0');
		if (whole > AAS_USD_MAX)
			return -1;
	}
	if (*p == '.') {
		for (p++; isdigit((unsigned char)*p); p++) {
			if (++nfrac > 6)
				return -1;
			frac = frac * 10 + (*p - '0');
		}
	}
	if (*p)
		return -1;
	for (; nfrac < 6; nfrac++)
		frac *= 10;
	if (whole * 1000000 + frac > AAS_USD_MAX * 1000000)
		return -1;
	*micro = whole * 1000000 + frac;
	return 0;
}
