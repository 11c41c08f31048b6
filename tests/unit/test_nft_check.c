/*
 * aas-nft's validator (helper/nft_check.c): every text the libvirt driver
 * writes passes it (its golden files, and the commands it runs), and what
 * would reach past the engine's own tables does not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nft_check.h"

static const char *const goldens[] = {
	"egress-table.nft", "egress-vm-internet.nft", "egress-vm-isolated.nft", "egress-vm-policy-all.nft",
	"egress-vm-policy.nft", "egress-vm-remove.nft", "guard-host-prefixes.nft", "guard-no-resolvers.nft",
	"guard-resolvers.nft",
};

static char *slurp(const char *name)
{
	char path[1024], *buf;
	long len;
	FILE *f;

	snprintf(path, sizeof(path), "%s/libvirt/%s", SAAS_FIXTURES_DIR, name);
	assert_non_null(f = fopen(path, "rb"));
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	assert_true((len = ftell(f)) > 0);
	rewind(f);
	assert_non_null(buf = malloc((size_t)len + 1));
	assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
	buf[len] = '\0';
	fclose(f);
	return buf;
}

static void assert_ok(const char *text)
{
	char why[256] = "";

	if (!aas_nft_check(text, why, sizeof(why)))
		fail_msg("refused (%s): %.200s", why, text);
}

static void assert_refused(const char *text, const char *because)
{
	char why[256] = "";

	if (aas_nft_check(text, why, sizeof(why)))
		fail_msg("taken: %.200s", text);
	if (!strstr(why, because))
		fail_msg("\"%s\" refused with \"%s\", not \"%s\"", text, why, because);
}

static void test_driver_texts_pass(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(goldens) / sizeof(goldens[0]); i++) {
		char *text = slurp(goldens[i]);
		char why[256] = "";

		if (!aas_nft_check(text, why, sizeof(why)))
			fail_msg("%s refused: %s", goldens[i], why);
		free(text);
	}
	/* The commands the driver runs as arguments, joined as aas-nft joins them. */
	assert_ok("list table inet aas_guard");
	assert_ok("list counter inet aas_egress_0123456789abcdef c_200001");
	assert_ok("list chain inet aas_egress_0123456789abcdef output");
	assert_ok("delete table inet aas_egress_0123456789abcdef");
	/* What the resolver adds for a lookup it allowed. */
	assert_ok("add element inet aas_egress_ab l4_200001 { 203.0.113.7 timeout 60s }\n"
	          "delete element inet aas_egress_ab l4_200001 { 203.0.113.7 }\n"
	          "add element inet aas_egress_ab l4_200001 { 203.0.113.7 timeout 60s }\n");
	assert_ok("");
	assert_ok("# only a comment\n\n");
}

static void test_other_tables_refused(void **state)
{
	(void)state;
	assert_refused("flush ruleset", "not a table's object ('ruleset')");
	assert_refused("list ruleset", "('ruleset')");
	assert_refused("list tables", "('tables')");
	assert_refused("delete table inet filter", "a table not the engine's ('filter')");
	assert_refused("table inet filter {\n\tchain input { type filter hook input priority 0; policy drop; }\n}\n",
	               "('filter')");
	assert_refused("add rule ip aas_guard output accept", "a family other than inet ('ip')");
	assert_refused("table netdev aas_guard {}", "('netdev')");
	assert_refused("table inet aas_guardx {}", "('aas_guardx')");
	assert_refused("table inet aas_egress_ {}", "('aas_egress_')");
	assert_refused("table inet aas_egress_ABC {}", "('aas_egress_ABC')");
	assert_refused("table inet aas_egress_0123456789abcdef0123456789abcdef0 {}", "a table not the engine's");
	assert_refused("add table inet", "without family and table");
	/* A bad command after good ones is found, by its line; ; separates commands as a line end does. */
	assert_refused("list table inet aas_guard\nadd rule inet aas_guard output accept\ndelete table ip nat\n",
	               "line 3: a family other than inet");
	assert_refused("list table inet aas_guard; flush ruleset", "('ruleset')");
	/* Nothing may follow a block on its line: nft would not take it, and it would hide a command. */
	assert_refused("table inet aas_guard { } delete table inet filter", "words after a block");
}

static void test_verbs_and_directives_refused(void **state)
{
	(void)state;
	assert_refused("insert rule inet aas_guard output accept", "a command aas-nft does not run ('insert')");
	assert_refused("replace rule inet aas_guard output handle 4 accept", "('replace')");
	assert_refused("monitor", "('monitor')");
	assert_refused("reset counters inet aas_guard", "('reset')");
	assert_refused("include \"/etc/nftables.conf\"", "a directive aas-nft does not take ('include')");
	assert_refused("table inet aas_guard {\n\tinclude \"/etc/nftables.conf\"\n}\n", "line 2: a directive");
	assert_refused("define x = 10.0.0.1", "('define')");
	assert_refused("add rule inet aas_guard output ip daddr $x accept", "a variable");
	assert_refused("{ }", "a block outside a table");
}

static void test_malformed_refused(void **state)
{
	char *big;

	(void)state;
	assert_refused("table inet aas_guard {", "a { without its }");
	assert_refused("table inet aas_guard { } }", "a } without its {");
	assert_refused("add rule inet aas_guard output comment \"open", "unterminated string");
	assert_refused("add rule inet aas_guard output comment \"a\\\" b\"", "with a backslash");
	/* A quote cannot hide a command, nor a # in it start a comment. */
	assert_refused("add rule inet aas_guard output comment \"x # y\"\nflush ruleset", "line 2");
	assert_non_null(big = malloc(AAS_NFT_INPUT_MAX + 2));
	memset(big, '#', AAS_NFT_INPUT_MAX + 1);
	big[AAS_NFT_INPUT_MAX + 1] = '\0';
	assert_refused(big, "more input than aas-nft takes");
	free(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_driver_texts_pass),
		cmocka_unit_test(test_other_tables_refused),
		cmocka_unit_test(test_verbs_and_directives_refused),
		cmocka_unit_test(test_malformed_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
