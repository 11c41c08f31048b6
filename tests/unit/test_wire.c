/*
 * The JSON wire shapes (lib/wire): each encoder's output for fixed values is
 * pinned byte for byte by a golden file in tests/fixtures/wire/, and every
 * shape survives encode -> decode -> encode unchanged.
 *
 * The golden files are written by this test, never by hand: after changing a
 * shape on purpose, run it once with SAAS_WIRE_REGENERATE=1 in the
 * environment (e.g. `SAAS_WIRE_REGENERATE=1 ctest -R '^unit.wire$'`), review
 * the diff, and update server/openapi.json and the docs to match.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "saas.h"
#include "wire.h"

/* 2025-01-02T03:04:05.678Z and later instants: fixed, so that the files are. */
#define T0 1735787045678LL
#define T(s) (T0 + (s) * 1000LL)

/* ---- fixed values ---- */

static saas_port_info port_values[] = {
	{ 8000, "http://p-0123456789abcdef.preview.example:8080/" },
	{ 3000, "http://p-fedcba9876543210.preview.example:8080/" },
};
static saas_port_info *ports[] = { &port_values[0], &port_values[1] };

static char *allow_rules[] = { (char *)"api.example.com", (char *)"*.pypi.org", (char *)"203.0.113.0/24", NULL };
static char *deny_rules[] = { (char *)"203.0.113.9/32", NULL };
static char *no_rules[] = { NULL };
static saas_network_info policy_net = { SAAS_NETWORK_POLICY, allow_rules, deny_rules, 3, 7 };
static saas_network_info isolated_net = { SAAS_NETWORK_ISOLATED, no_rules, no_rules, 0, 0 };

/* A value with '=' in it is split at the first '=' only. */
static char *sandbox_metadata[] = { (char *)"stage=dev=1", (char *)"team=blue", NULL };
static char *sandbox_envs[] = { (char *)"GREETING=hello", NULL };

static saas_sandbox ready_sandbox(void)
{
	saas_sandbox sb = { 0 };

	sb.id = (char *)"sbx-0a1b2c3d4e5f";
	sb.status = SAAS_SANDBOX_READY;
	sb.end_reason = SAAS_END_NONE;
	sb.size = (char *)"small";
	sb.vcpus = 1;
	sb.memory_mb = 1024;
	sb.disk_gb = 10;
	sb.image = (char *)"debian-12";
	sb.created_at_ms = T(0);
	sb.ready_at_ms = T(3);
	sb.expires_at_ms = T(900);
	sb.cost_usd_micro = 125;
	sb.nports = 2;
	sb.ports = ports;
	sb.network = &policy_net;
	sb.metadata = sandbox_metadata;
	sb.envs = sandbox_envs;
	sb.on_timeout = SAAS_ON_TIMEOUT_PAUSE;
	sb.auto_resume = 1;
	return sb;
}

static saas_sandbox destroyed_sandbox(void)
{
	saas_sandbox sb = ready_sandbox();

	sb.id = (char *)"sbx-ffeeddccbbaa";
	sb.status = SAAS_SANDBOX_DESTROYED;
	sb.end_reason = SAAS_END_EXPIRED;
	sb.destroyed_at_ms = T(900);
	sb.cost_usd_micro = 12500;
	sb.nports = 0;
	sb.ports = NULL;
	sb.network = &isolated_net;
	return sb;
}

static saas_execution execution(int status, const char *out, size_t out_len)
{
	saas_execution x = { 0 };

	x.id = (char *)"exe-1122334455";
	x.sandbox_id = (char *)"sbx-0a1b2c3d4e5f";
	x.status = status;
	x.exit_code = status == SAAS_EXEC_RUNNING ? -1 : 3;
	x.stdout_data = (char *)out;
	x.stdout_len = out_len;
	x.stderr_data = (char *)"warning: \"quoted\"\n";
	x.stderr_len = strlen(x.stderr_data);
	x.stdout_truncated = status == SAAS_EXEC_EXITED;
	x.started_at_ms = T(10);
	x.finished_at_ms = status == SAAS_EXEC_RUNNING ? 0 : T(12);
	x.duration_ms = status == SAAS_EXEC_RUNNING ? 0 : 2000;
	x.error = (char *)"";
	return x;
}

static saas_size size_values[] = {
	{ "small", 1, 1024, 10, 50000 },
	{ "large", 4, 8192, 40, 400000 },
};
static saas_size *sizes[] = { &size_values[0], &size_values[1] };

static saas_limits limits(void)
{
	saas_limits l = { 0 };

	l.max_sandboxes = 5;
	l.default_timeout_s = 900;
	l.max_timeout_s = 86400;
	l.min_balance_s = 300;
	l.max_executions = 16;
	l.creates_per_minute = 30;
	l.requests_per_second = 100;
	l.execution_retention_s = 86400;
	return l;
}

static saas_limits account_limits;

static saas_account_info account(void)
{
	saas_account_info ai = { 0 };

	ai.id = (char *)"acc-00aa11bb";
	ai.name = "team \"blue\"";
	ai.credit_usd_micro = 10000000;
	ai.spent_usd_micro = 1234567;
	ai.balance_usd_micro = 8765433;
	ai.active_sandboxes = 2;
	ai.running_executions = 1;
	ai.paused_usd_micro_per_gib_hour = 100;
	ai.nsizes = 2;
	ai.sizes = sizes;
	account_limits = limits();
	ai.limits = &account_limits;
	return ai;
}

static saas_usage_line usage_lines[2];
static saas_usage_line *usage_line_ptrs[] = { &usage_lines[0], &usage_lines[1] };

static saas_usage usage(void)
{
	saas_usage u = { 0 };

	memset(usage_lines, 0, sizeof(usage_lines));
	usage_lines[0].sandbox_id = (char *)"sbx-0a1b2c3d4e5f";
	usage_lines[0].size = (char *)"small";
	usage_lines[0].seconds = 90;
	usage_lines[0].cost_usd_micro = 1250;
	usage_lines[0].running = 1;
	usage_lines[1].sandbox_id = (char *)"sbx-ffeeddccbbaa";
	usage_lines[1].size = (char *)"large";
	usage_lines[1].seconds = 3600;
	usage_lines[1].cost_usd_micro = 400000;
	u.from_ms = T(-86400);
	u.to_ms = T(0);
	u.count = 2;
	u.lines = usage_line_ptrs;
	u.total_seconds = 3690;
	u.total_usd_micro = 401250;
	return u;
}

static saas_file_entry file_entry_values[] = {
	{ "/workspace/out", SAAS_FILE_DIRECTORY, 4096, 0755, T(20) },
	{ "/workspace/out/data.bin", SAAS_FILE_REGULAR, 1048576, 0644, T(21) },
	{ "/workspace/run.sh", SAAS_FILE_REGULAR, 120, 04755, T(22) },
	{ "/workspace/link", SAAS_FILE_SYMLINK, 7, 0777, 0 },
};

static saas_file_entry *file_entries[] = { &file_entry_values[0], &file_entry_values[1], &file_entry_values[2],
	                                    &file_entry_values[3] };

static saas_file_list file_list(void)
{
	saas_file_list l = { 0 };

	l.root = "/workspace";
	l.count = 4;
	l.entries = file_entries;
	l.truncated = 1;
	return l;
}

/* ---- golden files ---- */

static char *dump(const json_t *v)
{
	char *text = json_dumps(v, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);

	assert_non_null(text);
	return text;
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *text = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (text = calloc(1, (size_t)n + 1)) && fread(text, 1, (size_t)n, f) != (size_t)n) {
		free(text);
		text = NULL;
	}
	fclose(f);
	return text;
}

/* `v` (stolen) against tests/fixtures/wire/NAME.json, or written there when regenerating. */
static void golden(const char *name, json_t *v)
{
	char path[512], *text, *want;
	const char *regen = getenv("SAAS_WIRE_REGENERATE");

	assert_non_null(v);
	snprintf(path, sizeof(path), "%s/%s.json", SAAS_WIRE_FIXTURES, name);
	text = dump(v);
	json_decref(v);
	if (regen && *regen && strcmp(regen, "0") != 0) {
		FILE *f = fopen(path, "wb");
		assert_non_null(f);
		assert_true(fputs(text, f) >= 0 && fputc('\n', f) == '\n');
		assert_int_equal(fclose(f), 0);
		free(text);
		return;
	}
	want = read_file(path);
	if (!want)
		fail_msg("%s is missing: run this test with SAAS_WIRE_REGENERATE=1 to write it", path);
	if (strlen(want) != strlen(text) + 1 || strncmp(want, text, strlen(text)) != 0)
		fail_msg("%s changed; got:\n%s\n(if on purpose: SAAS_WIRE_REGENERATE=1, then review the diff)", path,
		         text);
	free(want);
	free(text);
}

/* encode -> decode -> encode gives the same bytes. */
#define ROUND_TRIP(type, encode, decode, freefn, value)                                                    \
	do {                                                                                               \
		json_t *a_ = encode(value), *b_;                                                           \
		type *d_ = NULL;                                                                           \
		const char *bad_ = NULL;                                                                   \
		char *ta_, *tb_;                                                                           \
		assert_non_null(a_);                                                                       \
		assert_int_equal(decode(&d_, a_, &bad_), SAAS_OK);                                         \
		b_ = encode(d_);                                                                           \
		ta_ = dump(a_);                                                                            \
		tb_ = dump(b_);                                                                            \
		assert_string_equal(ta_, tb_);                                                             \
		free(ta_);                                                                                 \
		free(tb_);                                                                                 \
		json_decref(a_);                                                                           \
		json_decref(b_);                                                                           \
		freefn(d_);                                                                                \
	} while (0)

static void test_sandbox(void **state)
{
	saas_sandbox a = ready_sandbox(), b = destroyed_sandbox(), *items[] = { &a, &b };
	saas_sandbox_list list = { 2, items, "c-42" }, last = { 1, items + 1, NULL };

	(void)state;
	golden("sandbox", saas__wire_sandbox(&a));
	golden("sandbox_destroyed", saas__wire_sandbox(&b));
	golden("sandbox_list", saas__wire_sandbox_list(&list));
	golden("sandbox_list_last", saas__wire_sandbox_list(&last));
	golden("port", saas__wire_port("sbx-0a1b2c3d4e5f", 8000, ports[0]->url));
	ROUND_TRIP(saas_sandbox, saas__wire_sandbox, saas__wire_sandbox_decode, saas_sandbox_free, &a);
	ROUND_TRIP(saas_sandbox, saas__wire_sandbox, saas__wire_sandbox_decode, saas_sandbox_free, &b);
	ROUND_TRIP(saas_sandbox_list, saas__wire_sandbox_list, saas__wire_sandbox_list_decode, saas_sandbox_list_free,
	           &list);
	ROUND_TRIP(saas_sandbox_list, saas__wire_sandbox_list, saas__wire_sandbox_list_decode, saas_sandbox_list_free,
	           &last);
}

static void test_execution(void **state)
{
	static const char text[] = "hello\n\0wörld\n", binary[] = "\x89PNG\r\n\x1a\n\xff";
	saas_execution a = execution(SAAS_EXEC_EXITED, text, sizeof(text) - 1);
	saas_execution b = execution(SAAS_EXEC_TIMEDOUT, binary, sizeof(binary) - 1);
	saas_execution c = execution(SAAS_EXEC_RUNNING, "", 0);
	saas_execution *d = NULL;
	const char *bad = NULL;
	json_t *o;

	(void)state;
	golden("execution", saas__wire_execution(&a));
	golden("execution_binary", saas__wire_execution(&b));
	golden("execution_running", saas__wire_execution(&c));
	ROUND_TRIP(saas_execution, saas__wire_execution, saas__wire_execution_decode, saas_execution_free, &a);
	ROUND_TRIP(saas_execution, saas__wire_execution, saas__wire_execution_decode, saas_execution_free, &b);
	ROUND_TRIP(saas_execution, saas__wire_execution, saas__wire_execution_decode, saas_execution_free, &c);
	/* The bytes themselves come back, NULs and all, NUL-terminated. */
	o = saas__wire_execution(&b);
	assert_int_equal(saas__wire_execution_decode(&d, o, &bad), SAAS_OK);
	assert_int_equal(d->stdout_len, sizeof(binary) - 1);
	assert_memory_equal(d->stdout_data, binary, sizeof(binary));
	saas_execution_free(d);
	json_decref(o);
}

static void test_account(void **state)
{
	saas_account_info ai = account();
	saas_limits l = limits(), *back;
	json_t *o, *again;
	char *t1, *t2;

	(void)state;
	golden("account", saas__wire_account(&ai));
	golden("size", saas__wire_size(sizes[0], 100));
	golden("limits", saas__wire_limits(&l));
	ROUND_TRIP(saas_account_info, saas__wire_account, saas__wire_account_decode, saas_account_info_free, &ai);
	o = saas__wire_limits(&l);
	assert_non_null(back = saas__wire_limits_decode(o));
	again = saas__wire_limits(back);
	free(back);
	t1 = dump(o);
	t2 = dump(again);
	assert_string_equal(t1, t2);
	free(t1);
	free(t2);
	json_decref(again);
	json_decref(o);
}

static void test_usage(void **state)
{
	saas_usage u = usage();

	(void)state;
	golden("usage", saas__wire_usage(&u));
	ROUND_TRIP(saas_usage, saas__wire_usage, saas__wire_usage_decode, saas_usage_free, &u);
}

static void test_file_list(void **state)
{
	saas_file_list l = file_list();

	(void)state;
	golden("file_list", saas__wire_file_list(&l));
	ROUND_TRIP(saas_file_list, saas__wire_file_list, saas__wire_file_list_decode, saas_file_list_free, &l);
}

static saas_metric metric_values[] = {
	{ T(30), 2, 0, 1073741824, 4294967296, 0, 42949672960 },
	{ T(35), 2, 25.5, 1075838976, 4294967296, 10485760, 42949672960 },
};

static saas_metric *metric_ptrs[] = { &metric_values[0], &metric_values[1] };

static void test_metric_list(void **state)
{
	saas_metric_list l = { 2, metric_ptrs };

	(void)state;
	golden("metric_list", saas__wire_metric_list(&l));
	ROUND_TRIP(saas_metric_list, saas__wire_metric_list, saas__wire_metric_list_decode, saas_metric_list_free, &l);
}

/* MCP's structuredContent: the same shapes without nulls, which decode as the nulls did. */
static void test_mcp_shapes(void **state)
{
	saas_sandbox a = ready_sandbox(), *d = NULL;
	saas_execution c = execution(SAAS_EXEC_RUNNING, "", 0);
	const char *bad = NULL;
	json_t *full = saas__wire_sandbox(&a), *lean = saas__wire_drop_nulls(saas__wire_sandbox(&a)), *again;
	char *t1, *t2;

	(void)state;
	golden("mcp_sandbox", json_incref(lean));
	golden("mcp_execution_running", saas__wire_drop_nulls(saas__wire_execution(&c)));
	assert_null(json_object_get(lean, "end_reason"));
	assert_int_equal(saas__wire_sandbox_decode(&d, lean, &bad), SAAS_OK);
	again = saas__wire_sandbox(d);
	t1 = dump(full);
	t2 = dump(again);
	assert_string_equal(t1, t2);
	free(t1);
	free(t2);
	saas_sandbox_free(d);
	json_decref(again);
	json_decref(lean);
	json_decref(full);
}

/* What the remote client refuses: an answer without the members it cannot do without. */
static void test_decode_refuses(void **state)
{
	static const char *const sandboxes[] = {
		"{}", "{\"id\":\"\",\"status\":\"ready\"}", "{\"id\":\"sbx-1\",\"status\":\"sleeping\"}",
		"{\"id\":\"sbx-1\",\"status\":\"ready\",\"ports\":[{\"port\":1}],\"image\":null}",
	};
	saas_sandbox *sb = NULL;
	saas_file_list *fl = NULL;
	saas_sandbox_list *sl = NULL;
	const char *bad = NULL;
	json_t *o;

	(void)state;
	for (size_t i = 0; i < 3; i++) {
		o = json_loads(sandboxes[i], 0, NULL);
		assert_int_equal(saas__wire_sandbox_decode(&sb, o, &bad), SAAS_EPROTOCOL);
		assert_null(sb);
		assert_non_null(bad);
		json_decref(o);
	}
	/* Members it can do without read as absent: a port with no URL, a null image. */
	o = json_loads(sandboxes[3], 0, NULL);
	assert_int_equal(saas__wire_sandbox_decode(&sb, o, &bad), SAAS_OK);
	assert_string_equal(sb->image, "");
	assert_string_equal(sb->ports[0]->url, "");
	saas_sandbox_free(sb);
	json_decref(o);
	o = json_loads("{\"entries\":[]}", 0, NULL);
	assert_int_equal(saas__wire_file_list_decode(&fl, o, &bad), SAAS_EPROTOCOL);
	json_decref(o);
	o = json_loads("{\"sandboxes\":[{\"id\":\"sbx-1\",\"status\":\"ready\"},{}]}", 0, NULL);
	assert_int_equal(saas__wire_sandbox_list_decode(&sl, o, &bad), SAAS_EPROTOCOL);
	assert_null(sl);
	json_decref(o);
}

/* A network as requests give it: the shapes and the bound here, the rules in the library. */
static void test_network_req(void **state)
{
	static const char *const bad[] = {
		"7", "\"everywhere\"", "\"policy\"", "[]", "{\"allow\":\"example.com\"}", "{\"allow\":[1]}",
		"{\"deny\":{}}", "{\"mode\":\"open\"}", "{\"allow\":[],\"extra\":true}", "{\"allow\":[\"a\\u0000b\"]}",
	};
	saas__wire_network_req req;
	const char *why = NULL;
	json_t *v, *many;
	char name[32];

	(void)state;
	v = json_loads("\"internet\"", JSON_DECODE_ANY, NULL);
	assert_int_equal(saas__wire_network_req_decode(&req, v, &why), SAAS_OK);
	assert_int_equal(req.spec.mode, SAAS_NETWORK_INTERNET);
	json_decref(v);
	/* A sandbox's reported network goes back as it is. */
	v = saas__wire_network(&policy_net);
	assert_int_equal(saas__wire_network_req_decode(&req, v, &why), SAAS_OK);
	assert_int_equal(req.spec.mode, SAAS_NETWORK_POLICY);
	assert_string_equal(req.spec.allow[2], "203.0.113.0/24");
	assert_null(req.spec.allow[3]);
	assert_string_equal(req.spec.deny[0], "203.0.113.9/32");
	json_decref(v);
	v = json_loads("{\"allow\":[\"x.example\"]}", 0, NULL);
	assert_int_equal(saas__wire_network_req_decode(&req, v, &why), SAAS_OK);
	assert_int_equal(req.spec.mode, SAAS_NETWORK_POLICY);
	assert_null(req.spec.deny[0]);
	json_decref(v);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = json_loads(bad[i], JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
		assert_non_null(v);
		why = NULL;
		if (saas__wire_network_req_decode(&req, v, &why) != SAAS_EINVAL)
			fail_msg("%s was taken", bad[i]);
		assert_non_null(why);
		json_decref(v);
	}
	/* The bound, and one past it. */
	many = json_array();
	for (int i = 0; i < SAAS_NETWORK_RULES_MAX; i++) {
		snprintf(name, sizeof(name), "h%d.example", i);
		json_array_append_new(many, json_string(name));
	}
	v = json_pack("{s:O}", "deny", many);
	assert_int_equal(saas__wire_network_req_decode(&req, v, &why), SAAS_OK);
	json_decref(v);
	json_array_append_new(many, json_string("one.more"));
	v = json_pack("{s:O}", "deny", many);
	assert_int_equal(saas__wire_network_req_decode(&req, v, &why), SAAS_EINVAL);
	assert_string_equal(why, "network deny has more than 64 rules");
	json_decref(v);
	json_decref(many);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sandbox),
		cmocka_unit_test(test_execution),
		cmocka_unit_test(test_account),
		cmocka_unit_test(test_usage),
		cmocka_unit_test(test_file_list),
		cmocka_unit_test(test_metric_list),
		cmocka_unit_test(test_mcp_shapes),
		cmocka_unit_test(test_decode_refuses),
		cmocka_unit_test(test_network_req),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
