/*
 * Egress policies against the fake driver and a real store
 * (SQLite, or PostgreSQL with SAAS_TEST_STORE=postgres): the rules' one
 * validator, the policy stored and reported, changed at runtime, given again
 * to the driver after a restart, and what happens when the driver cannot.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/core.h"
#include "fake/fake_driver.h"
#include "fixture.h"
#include "testutil.h"

static int setup(void **state)
{
	struct saas_test_fixture *f = saas_test_fixture_new(&saas_fake_driver, 0);

	saas_test_fixture_open(f);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	saas_test_fixture_free(*state);
	return 0;
}

/* Normalise one rule; NULL when refused (the message is then in saas_error_last()). */
static const char *norm(const char *list, const char *rule)
{
	static char out[SAAS_NETWORK_RULE_MAX + 1];

	return saas__network_rule(list, rule, out) == SAAS_OK ? out : NULL;
}

static void assert_refused(const char *rule, const char *why)
{
	const char *got = norm("allow", rule);

	if (got)
		fail_msg("rule \"%s\" was taken as \"%s\"", rule, got);
	assert_int_equal(saas_error_last()->code, SAAS_EINVAL);
	if (!strstr(saas_error_last()->message, why))
		fail_msg("rule \"%s\": message \"%s\" does not say \"%s\"", rule, saas_error_last()->message, why);
}

static void test_rules_normalised(void **state)
{
	static const char *const cases[][2] = {
		{ "Example.COM", "example.com" },
		{ "example.com.", "example.com" },
		{ "*.Example.com", "*.example.com" },
		{ "*", "*" },
		{ "xn--bcher-kva.example", "xn--bcher-kva.example" },
		{ "a-b.c0", "a-b.c0" },
		{ "203.0.113.7", "203.0.113.7/32" },
		{ "203.0.113.0/24", "203.0.113.0/24" },
		{ "0.0.0.0/0", "0.0.0.0/0" },
		{ "2001:DB8:0:0::1", "2001:db8::1/128" },
		{ "2001:db8::/32", "2001:db8::/32" },
	};

	(void)state;
	for (size_t i = 0; i < SAAS_ARRAY_SIZE(cases); i++) {
		const char *got = norm("allow", cases[i][0]);

		if (!got)
			fail_msg("rule \"%s\" refused: %s", cases[i][0], saas_error_last()->message);
		assert_string_equal(got, cases[i][1]);
	}
}

static void test_rules_refused(void **state)
{
	char label64[80], long_name[300];

	(void)state;
	assert_refused("", "empty");
	assert_refused("10.0.0.1/8", "bits set past the /8");
	assert_refused("2001:db8::1/32", "bits set past the /32");
	assert_refused("10.0.0.0/33", "from 0 to 32");
	assert_refused("10.0.0.0/", "from 0 to 32");
	assert_refused("10.0.0.0/08", "from 0 to 32");
	assert_refused("::/129", "from 0 to 128");
	assert_refused("10.0.0/8", "not an IPv4 or IPv6 address");
	assert_refused("1.2.3", "last label is not all digits");
	assert_refused("01.2.3.4", "last label is not all digits");
	assert_refused("foo.*.com", "'*' may only be the whole leftmost label");
	assert_refused("*example.com", "'*' may only be");
	assert_refused("*.", "'*' may only be");
	assert_refused("*.*.com", "'*' may only be");
	assert_refused("bücher.example", "punycode");
	assert_refused("under_score.com", "letters, digits, '-'");
	assert_refused("exa mple.com", "letters, digits, '-'");
	assert_refused("a..b", "empty label");
	assert_refused(".a.b", "empty label");
	assert_refused("-a.com", "start or end with '-'");
	assert_refused("a-.com", "start or end with '-'");
	memset(label64, 'a', 64);
	snprintf(label64 + 64, sizeof(label64) - 64, ".com");
	assert_refused(label64, "at most 63");
	for (size_t i = 0; i < 150; i++)
		memcpy(long_name + 2 * i, "a.", 2);
	long_name[298] = 'b';
	long_name[299] = '\0';
	assert_refused(long_name, "at most 253");
	/* A rule is quoted in the message, printable and cut short. */
	assert_refused("bad\x01rule", "\"bad?rule\" in allow");
}

static void test_spec_read(void **state)
{
	const char *const allow[] = { "Example.com", "example.com.", "10.0.0.0/8", "example.com", NULL };
	const char *const deny[] = { "*.ads.example.com", NULL };
	const char *many[SAAS_NETWORK_RULES_MAX + 2];
	char names[SAAS_NETWORK_RULES_MAX + 1][16];
	saas_network_spec spec = SAAS_NETWORK_SPEC_INIT;
	struct saas__network net;

	(void)state;
	spec.allow = allow;
	spec.deny = deny;
	assert_int_equal(saas__network_read(&net, &spec), SAAS_OK);
	/* Duplicates go, the first place stays. */
	assert_int_equal(net.nallow, 2);
	assert_string_equal(net.allow[0], "example.com");
	assert_string_equal(net.allow[1], "10.0.0.0/8");
	assert_null(net.allow[2]);
	assert_int_equal(net.ndeny, 1);
	saas__network_clear(&net);

	/* Rules outside a policy are refused, not ignored. */
	spec.mode = SAAS_NETWORK_INTERNET;
	assert_int_equal(saas__network_read(&net, &spec), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "network internet takes no allow or deny rules"));
	spec.allow = NULL;
	spec.deny = NULL;
	assert_int_equal(saas__network_read(&net, &spec), SAAS_OK);
	assert_int_equal(net.mode, SAAS_NETWORK_INTERNET);
	assert_non_null(net.allow);
	assert_null(net.allow[0]);
	saas__network_clear(&net);
	spec.mode = 7;
	assert_int_equal(saas__network_read(&net, &spec), SAAS_EINVAL);
	spec.mode = SAAS_NETWORK_POLICY;
	spec.version = 2;
	assert_int_equal(saas__network_read(&net, &spec), SAAS_EINVAL);
	spec.version = SAAS_NETWORK_SPEC_VERSION;

	/* The bound, and one past it. */
	for (size_t i = 0; i <= SAAS_NETWORK_RULES_MAX; i++) {
		snprintf(names[i], sizeof(names[i]), "h%zu.example", i);
		many[i] = names[i];
	}
	many[SAAS_NETWORK_RULES_MAX] = NULL;
	spec.deny = many;
	assert_int_equal(saas__network_read(&net, &spec), SAAS_OK);
	assert_int_equal(net.ndeny, SAAS_NETWORK_RULES_MAX);
	saas__network_clear(&net);
	many[SAAS_NETWORK_RULES_MAX] = names[SAAS_NETWORK_RULES_MAX];
	many[SAAS_NETWORK_RULES_MAX + 1] = NULL;
	assert_int_equal(saas__network_read(&net, &spec), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "deny list has more than 64 rules"));
	/* A bad rule names its list. */
	many[0] = "not a name";
	many[SAAS_NETWORK_RULES_MAX] = NULL;
	assert_int_equal(saas__network_read(&net, &spec), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "\"not a name\" in deny"));
}

static void assert_rules(char *const *got, const char *const *want)
{
	size_t i;

	assert_non_null(got);
	for (i = 0; want[i]; i++) {
		assert_non_null(got[i]);
		assert_string_equal(got[i], want[i]);
	}
	assert_null(got[i]);
}

static void test_create_with_policy(void **state)
{
	struct saas_test_fixture *f = *state;
	const char *const allow[] = { "API.example.com", "203.0.113.0/24", NULL };
	const char *const deny[] = { "203.0.113.9", NULL };
	const char *const want_allow[] = { "api.example.com", "203.0.113.0/24", NULL };
	const char *const want_deny[] = { "203.0.113.9/32", NULL };
	saas_network_spec spec = SAAS_NETWORK_SPEC_INIT;
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb = NULL, *got = NULL;
	char rules[4096];

	spec.allow = allow;
	spec.deny = deny;
	o.network_spec = &spec;
	assert_int_equal(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_OK);
	assert_non_null(sb->network);
	assert_int_equal(sb->network->mode, SAAS_NETWORK_POLICY);
	assert_rules(sb->network->allow, want_allow);
	assert_rules(sb->network->deny, want_deny);
	/* The driver got the normalised rules. */
	assert_int_equal(saas_fake_vm_network(sb->id, rules, sizeof(rules)), SAAS_NET_POLICY);
	assert_string_equal(rules, "allow api.example.com,203.0.113.0/24 deny 203.0.113.9/32");

	/* Counters come from the driver; asked for the recorded ones, the driver is not read. */
	saas_fake_vm_denied(sb->id, 3, 2);
	assert_int_equal(saas_sandbox_get_ext(&got, f->a, sb->id, SAAS_GET_RECORDED), SAAS_OK);
	assert_int_equal(got->network->denied_connections, 0);
	assert_int_equal(got->network->denied_lookups, 0);
	assert_rules(got->network->allow, want_allow);
	saas_sandbox_free(got);
	assert_int_equal(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
	assert_int_equal(got->network->denied_connections, 3);
	assert_int_equal(got->network->denied_lookups, 2);
	assert_rules(got->network->allow, want_allow);
	saas_sandbox_free(got);
	/* The live read recorded them: the recorded ones have caught up. */
	assert_int_equal(saas_sandbox_get_ext(&got, f->a, sb->id, SAAS_GET_RECORDED), SAAS_OK);
	assert_int_equal(got->network->denied_connections, 3);
	assert_int_equal(got->network->denied_lookups, 2);
	saas_sandbox_free(got);

	/* A listing with SAAS_LIST_RECORDED does not read the driver either; one without does, and records. */
	saas_fake_vm_denied(sb->id, 2, 1);
	{
		saas_sandbox_list *l = NULL;
		assert_int_equal(saas_sandbox_list_get(&l, f->a, NULL, 0, SAAS_LIST_ACTIVE | SAAS_LIST_RECORDED), SAAS_OK);
		assert_int_equal(l->count, 1);
		assert_int_equal(l->items[0]->network->denied_connections, 3);
		assert_int_equal(l->items[0]->network->denied_lookups, 2);
		assert_rules(l->items[0]->network->allow, want_allow);
		saas_sandbox_list_free(l);
		assert_int_equal(saas_sandbox_list_get(&l, f->a, NULL, 0, SAAS_LIST_ACTIVE), SAAS_OK);
		assert_int_equal(l->items[0]->network->denied_connections, 5);
		assert_int_equal(l->items[0]->network->denied_lookups, 3);
		saas_sandbox_list_free(l);
		assert_int_equal(saas_sandbox_list_get(&l, f->a, NULL, 0, SAAS_LIST_RECORDED), SAAS_OK);
		assert_int_equal(l->items[0]->network->denied_connections, 5);
		assert_int_equal(l->items[0]->network->denied_lookups, 3);
		saas_sandbox_list_free(l);
	}

	/* Destroyed: the policy and the last counts stay on record, those since the last reading included. */
	saas_fake_vm_denied(sb->id, 1, 0);
	assert_int_equal(saas_sandbox_destroy(&got, f->a, sb->id, 0), SAAS_OK);
	assert_int_equal(got->network->mode, SAAS_NETWORK_POLICY);
	assert_int_equal(got->network->denied_connections, 6);
	assert_int_equal(got->network->denied_lookups, 3);
	saas_sandbox_free(got);
	assert_int_equal(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
	assert_int_equal(got->network->denied_connections, 6);
	saas_sandbox_free(got);
	saas_sandbox_free(sb);
}

/* What a sandbox refused outlives the engine: the next driver counts from zero, the store adds the rest. */
static void test_counts_survive_restart(void **state)
{
	struct saas_test_fixture *f = *state;
	const char *const allow[] = { "example.com", NULL };
	saas_network_spec spec = SAAS_NETWORK_SPEC_INIT;
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb = NULL, *got = NULL;

	spec.allow = allow;
	o.network_spec = &spec;
	assert_int_equal(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_OK);
	saas_fake_vm_denied(sb->id, 3, 2);
	assert_int_equal(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
	assert_int_equal(got->network->denied_connections, 3);
	saas_sandbox_free(got);
	/* Counted after the last reading: recorded as the engine stops. */
	saas_fake_vm_denied(sb->id, 1, 1);
	saas_test_fixture_close(f);
	saas_test_fixture_open(f);
	assert_int_equal(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
	assert_int_equal(got->network->denied_connections, 4);
	assert_int_equal(got->network->denied_lookups, 3);
	saas_sandbox_free(got);
	/* The new driver's counts add to them, through a second restart too. */
	saas_fake_vm_denied(sb->id, 2, 0);
	saas_test_fixture_close(f);
	saas_test_fixture_open(f);
	saas_fake_vm_denied(sb->id, 0, 5);
	assert_int_equal(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
	assert_int_equal(got->network->denied_connections, 6);
	assert_int_equal(got->network->denied_lookups, 8);
	saas_sandbox_free(got);
	/* Listed, the same counts. */
	{
		saas_sandbox_list *list = NULL;

		assert_int_equal(saas_sandbox_list_get(&list, f->a, NULL, 0, 0), SAAS_OK);
		assert_int_equal(list->count, 1);
		assert_int_equal(list->items[0]->network->denied_connections, 6);
		saas_sandbox_list_free(list);
	}
	assert_int_equal(saas_sandbox_destroy(&got, f->a, sb->id, 0), SAAS_OK);
	assert_int_equal(got->network->denied_connections, 6);
	assert_int_equal(got->network->denied_lookups, 8);
	saas_sandbox_free(got);
	/* And a destroyed sandbox's counts stay after the next restart. */
	saas_test_fixture_close(f);
	saas_test_fixture_open(f);
	assert_int_equal(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
	assert_int_equal(got->status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(got->network->denied_connections, 6);
	assert_int_equal(got->network->denied_lookups, 8);
	saas_sandbox_free(got);
	saas_sandbox_free(sb);
}

static void test_create_refused(void **state)
{
	struct saas_test_fixture *f = *state;
	const char *const bad[] = { "ok.example.com", "10.1.2.3/16", NULL };
	saas_network_spec spec = SAAS_NETWORK_SPEC_INIT;
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb = NULL;

	spec.allow = bad;
	o.network_spec = &spec;
	assert_int_equal(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "\"10.1.2.3/16\" in allow"));
	o.network = "internet";
	spec.allow = NULL;
	assert_int_equal(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "not both"));
	assert_null(sb);
	assert_int_equal(saas_fake_create_calls(), 0);
}

/* A create without a network reports what the driver gives by default. */
static void test_default_reported(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_sandbox *sb = NULL;
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;

	saas_fake_network_default(SAAS_NET_INTERNET);
	assert_int_equal(saas_sandbox_create(&sb, f->a, NULL, 0), SAAS_OK);
	assert_int_equal(sb->network->mode, SAAS_NETWORK_INTERNET);
	assert_null(sb->network->allow[0]);
	assert_null(sb->network->deny[0]);
	saas_sandbox_free(sb);
	o.network = "isolated";
	assert_int_equal(saas_sandbox_create(&sb, f->a, &o, 0), SAAS_OK);
	assert_int_equal(sb->network->mode, SAAS_NETWORK_ISOLATED);
	saas_sandbox_free(sb);
	assert_string_equal(saas_network_mode_name(SAAS_NETWORK_POLICY), "policy");
	assert_string_equal(saas_network_mode_name(42), "unknown");
}

static void test_set_at_runtime(void **state)
{
	struct saas_test_fixture *f = *state;
	const char *const allow[] = { "*.Example.org", NULL };
	const char *const want[] = { "*.example.org", NULL };
	saas_network_spec spec = SAAS_NETWORK_SPEC_INIT;
	saas_sandbox *sb = NULL, *got = NULL;
	char rules[4096];

	assert_int_equal(saas_sandbox_create(&sb, f->a, NULL, 0), SAAS_OK);
	spec.allow = allow;
	assert_int_equal(saas_sandbox_network_set(&got, f->a, sb->id, &spec, 0), SAAS_OK);
	assert_int_equal(got->network->mode, SAAS_NETWORK_POLICY);
	assert_rules(got->network->allow, want);
	assert_int_equal(saas_fake_vm_network(sb->id, rules, sizeof(rules)), SAAS_NET_POLICY);
	assert_string_equal(rules, "allow *.example.org deny ");
	saas_sandbox_free(got);

	/* Back to isolated: the rules go. */
	spec.mode = SAAS_NETWORK_ISOLATED;
	spec.allow = NULL;
	assert_int_equal(saas_sandbox_network_set(NULL, f->a, sb->id, &spec, 0), SAAS_OK);
	assert_int_equal(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
	assert_int_equal(got->network->mode, SAAS_NETWORK_ISOLATED);
	assert_null(got->network->allow[0]);
	saas_sandbox_free(got);
	assert_int_equal(saas_fake_vm_network(sb->id, rules, sizeof(rules)), SAAS_NET_ISOLATED);

	/* Bad input. */
	spec.mode = SAAS_NETWORK_POLICY;
	spec.allow = (const char *const[]){ "bad rule!", NULL };
	assert_int_equal(saas_sandbox_network_set(&got, f->a, sb->id, &spec, 0), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "\"bad rule!\" in allow"));
	assert_null(got);
	spec.allow = NULL;
	assert_int_equal(saas_sandbox_network_set(&got, f->a, sb->id, &spec, 1), SAAS_EINVAL);
	assert_int_equal(saas_sandbox_network_set(&got, f->a, sb->id, NULL, 0), SAAS_EINVAL);
	assert_int_equal(saas_sandbox_network_set(&got, f->a, "sbx-nope", &spec, 0), SAAS_ENOTFOUND);

	/* The driver refuses: the sandbox keeps what it had, in the store and in the driver. */
	saas_fake_fail_network_sets(1, 1);
	assert_int_equal(saas_sandbox_network_set(&got, f->a, sb->id, &spec, 0), SAAS_ENOTSUP);
	assert_non_null(strstr(saas_error_last()->message, "keeps its network"));
	assert_int_equal(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
	assert_int_equal(got->network->mode, SAAS_NETWORK_ISOLATED);
	saas_sandbox_free(got);
	assert_int_equal(saas_fake_vm_network(sb->id, rules, sizeof(rules)), SAAS_NET_ISOLATED);
	saas_fake_fail_network_sets(1, 0);
	assert_int_equal(saas_sandbox_network_set(&got, f->a, sb->id, &spec, 0), SAAS_EBACKEND);

	/* Destroyed: no change. */
	assert_int_equal(saas_sandbox_destroy(NULL, f->a, sb->id, 0), SAAS_OK);
	assert_int_equal(saas_sandbox_network_set(&got, f->a, sb->id, &spec, 0), SAAS_ESTATE);
	saas_sandbox_free(sb);
}

/* A store that refuses every network change; with `and_driver`, the driver's undo fails too. */
static int and_driver;

static int refuse_network_set(void *ctx, const char *id, int mode, const char *allow, const char *deny)
{
	(void)ctx, (void)id, (void)mode, (void)allow, (void)deny;
	if (and_driver)
		saas_fake_fail_network_sets(1, 0);
	return saas_sys_error_set(SAAS_ESTORE, SAAS_ERRCLASS_STORE, 0, "test store: refusing the change");
}

/*
 * The change reached the driver, then the store refused it: the driver gets
 * the old policy back; if it cannot, the VM (with a policy no store records)
 * is destroyed rather than left running with it.
 */
static void test_set_store_refuses(void **state)
{
	struct saas_test_fixture *f = *state;
	const char *const allow[] = { "*", NULL };
	saas_network_spec spec = SAAS_NETWORK_SPEC_INIT;
	const saas_store *real = f->engine->store;
	saas_store refusing = *real;
	saas_sandbox *sb = NULL, *got = NULL;
	char rules[4096];

	assert_int_equal(saas_sandbox_create(&sb, f->a, NULL, 0), SAAS_OK);
	spec.allow = allow;
	refusing.sandbox_network_set = refuse_network_set;
	f->engine->store = &refusing;
	and_driver = 0;
	assert_int_equal(saas_sandbox_network_set(&got, f->a, sb->id, &spec, 0), SAAS_ESTORE);
	assert_non_null(strstr(saas_error_last()->message, "refusing the change"));
	assert_int_equal(saas_fake_vm_network(sb->id, rules, sizeof(rules)), SAAS_NET_ISOLATED);

	and_driver = 1;
	assert_int_equal(saas_sandbox_network_set(&got, f->a, sb->id, &spec, 0), SAAS_ESTORE);
	f->engine->store = real;
	assert_false(saas_fake_vm_exists(sb->id));
	assert_int_equal(saas_sandbox_get(&got, f->a, sb->id), SAAS_OK);
	assert_int_equal(got->status, SAAS_SANDBOX_DESTROYED);
	assert_int_equal(got->end_reason, SAAS_END_FAILED);
	saas_sandbox_free(got);
	saas_sandbox_free(sb);
}

/* A restart gives every live VM its stored policy again: the driver kept none. */
static void test_restart_reapplies(void **state)
{
	struct saas_test_fixture *f = *state;
	const char *const allow[] = { "example.com", NULL };
	saas_network_spec spec = SAAS_NETWORK_SPEC_INIT;
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *a = NULL, *b = NULL, *got = NULL;
	char rules[4096];

	spec.allow = allow;
	o.network_spec = &spec;
	assert_int_equal(saas_sandbox_create(&a, f->a, &o, 0), SAAS_OK);
	assert_int_equal(saas_sandbox_create(&b, f->a, &o, 0), SAAS_OK);
	saas_test_fixture_close(f);
	saas_test_fixture_open(f);
	assert_int_equal(saas_fake_vm_network(a->id, rules, sizeof(rules)), SAAS_NET_POLICY);
	assert_string_equal(rules, "allow example.com deny ");
	assert_int_equal(saas_sandbox_get(&got, f->a, a->id), SAAS_OK);
	assert_int_equal(got->status, SAAS_SANDBOX_READY);
	assert_int_equal(got->network->mode, SAAS_NETWORK_POLICY);
	assert_string_equal(got->network->allow[0], "example.com");
	saas_sandbox_free(got);

	/*
	 * The driver cannot give the policy after the next restart: the VM may not
	 * run on with more egress than its policy, so it is ended as lost.
	 */
	saas_test_fixture_close(f);
	saas_fake_fail_network_sets(1, 1);
	saas_test_fixture_open(f);
	/* The first VM reconcile reached lost its policy; which one that was is the store's order. */
	{
		saas_sandbox *ga = NULL, *gb = NULL, *lost, *kept;

		assert_int_equal(saas_sandbox_get(&ga, f->a, a->id), SAAS_OK);
		assert_int_equal(saas_sandbox_get(&gb, f->a, b->id), SAAS_OK);
		lost = ga->status == SAAS_SANDBOX_DESTROYED ? ga : gb;
		kept = lost == ga ? gb : ga;
		assert_int_equal(lost->status, SAAS_SANDBOX_DESTROYED);
		assert_int_equal(lost->end_reason, SAAS_END_LOST);
		assert_false(saas_fake_vm_exists(lost->id));
		assert_int_equal(kept->status, SAAS_SANDBOX_READY);
		assert_int_equal(saas_fake_vm_network(kept->id, rules, sizeof(rules)), SAAS_NET_POLICY);
		/*
		 * Another engine serves the VM's egress (a VM host's guest whose
		 * channel another server holds): left to it, not ended.
		 */
		saas_test_fixture_close(f);
		saas_fake_fail_network_sets(1, 2);
		saas_test_fixture_open(f);
		assert_int_equal(saas_sandbox_get(&got, f->a, kept->id), SAAS_OK);
		assert_int_equal(got->status, SAAS_SANDBOX_READY);
		assert_true(saas_fake_vm_exists(kept->id));
		saas_sandbox_free(got);
		saas_sandbox_free(ga);
		saas_sandbox_free(gb);
	}
	saas_sandbox_free(a);
	saas_sandbox_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rules_normalised),
		cmocka_unit_test(test_rules_refused),
		cmocka_unit_test(test_spec_read),
		cmocka_unit_test_setup_teardown(test_create_with_policy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_default_reported, setup, teardown),
		cmocka_unit_test_setup_teardown(test_set_at_runtime, setup, teardown),
		cmocka_unit_test_setup_teardown(test_set_store_refuses, setup, teardown),
		cmocka_unit_test_setup_teardown(test_restart_reapplies, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counts_survive_restart, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
