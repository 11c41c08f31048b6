/*
 * Egress policies: the one place a network rule is validated and normalised.
 * Every way in (the C API, REST, MCP, the CLI, the remote client) reaches
 * saas__network_read() before anything is stored or handed to a driver, so
 * a driver sees only rules of the forms saas/sys/driver.h promises, and a
 * sandbox reports them in the form it was given them.
 */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/provider.h"

/* A rule as given may carry a trailing dot and "*." before the longest name. */
#define RULE_IN_MAX (SAAS_NETWORK_NAME_MAX + 3)
/* Longest DNS label (RFC 1035). */
#define LABEL_MAX 63

SAAS_EXTERN(const char *) saas_network_mode_name(int mode)
{
	switch (mode) {
	case SAAS_NETWORK_ISOLATED: return "isolated";
	case SAAS_NETWORK_INTERNET: return "internet";
	case SAAS_NETWORK_POLICY: return "policy";
	}
	return "unknown";
}

int saas__network_mode_parse(const char *name)
{
	for (int mode = SAAS_NETWORK_ISOLATED; mode <= SAAS_NETWORK_POLICY; mode++)
		if (strcmp(name, saas_network_mode_name(mode)) == 0)
			return mode;
	return -1;
}

/* The rule as a message may quote it: printable ASCII, at most 64 bytes, the rest '?'. */
static const char *quotable(const char *rule, char buf[72])
{
	size_t i;

	for (i = 0; rule[i] && i < 64; i++)
		buf[i] = rule[i] >= 0x20 && rule[i] < 0x7f && rule[i] != '"' ? rule[i] : '?';
	if (rule[i]) {
		memcpy(buf + i, "...", 3);
		i += 3;
	}
	buf[i] = '\0';
	return buf;
}

/* SAAS_EINVAL naming the rule, its list and what is wrong with it. */
static int bad_rule(const char *list, const char *rule, const char *fmt, ...) SAAS_PRINTF(3, 4);
static int bad_rule(const char *list, const char *rule, const char *fmt, ...)
{
	char q[72], why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return saas__inval("network rule \"%s\" in %s: %s", quotable(rule, q), list, why);
}

#define BAD_RULE(...) return bad_rule(__VA_ARGS__)

/*
 * An address or a CIDR: canonical text with its prefix always written, so
 * that "203.0.113.7" and "203.0.113.7/32" are one rule. Host bits set past
 * the prefix are refused: "10.0.0.1/8" more likely means a typo than 10/8.
 * Returns 1 when `in` is not an address at all (then it may be a name).
 */
static int read_cidr(const char *list, const char *in, char out[SAAS_NETWORK_RULE_MAX + 1])
{
	unsigned char addr[16];
	char host[INET6_ADDRSTRLEN + 1], text[INET6_ADDRSTRLEN];
	const char *slash = strchr(in, '/');
	size_t hostlen = slash ? (size_t)(slash - in) : strlen(in);
	int af, bits, prefix;

	if (hostlen >= sizeof(host))
		return slash ? saas__inval("network rule in %s: an address before '/' is too long", list) : 1;
	memcpy(host, in, hostlen);
	host[hostlen] = '\0';
	if (inet_pton(AF_INET, host, addr) == 1)
		af = AF_INET, bits = 32;
	else if (inet_pton(AF_INET6, host, addr) == 1)
		af = AF_INET6, bits = 128;
	else if (slash)
		BAD_RULE(list, in, "the part before '/' is not an IPv4 or IPv6 address");
	else
		return 1;
	prefix = bits;
	if (slash) {
		const char *p = slash + 1;
		size_t n = strspn(p, "0123456789");

		/* Three digits at most: "/0032" is as suspect as "/033". */
		if (n == 0 || n > 3 || p[n] || (n > 1 && p[0] == '0'))
			BAD_RULE(list, in, "the prefix length after '/' must be a number from 0 to %d", bits);
		prefix = atoi(p);
		if (prefix > bits)
			BAD_RULE(list, in, "the prefix length after '/' must be a number from 0 to %d", bits);
	}
	for (int i = prefix; i < bits; i++)
		if (addr[i / 8] & (0x80 >> (i % 8)))
			BAD_RULE(list, in, "the address has bits set past the /%d prefix (did you mean the network's first address?)",
			         prefix);
	if (!inet_ntop(af, addr, text, sizeof(text)))
		return saas__inval("network rule in %s: cannot write the address back", list);
	snprintf(out, SAAS_NETWORK_RULE_MAX + 1, "%s/%d", text, prefix);
	return SAAS_OK;
}

/* A domain name of LDH labels, lowercased, written to out; `in` has no trailing dot. */
static int read_name(const char *list, const char *rule, const char *in, char *out)
{
	size_t len = strlen(in), label = 0, i;
	bool digits_only = true;

	if (len == 0)
		BAD_RULE(list, rule, "a name is empty");
	if (len > SAAS_NETWORK_NAME_MAX)
		BAD_RULE(list, rule, "a name is at most %d characters", SAAS_NETWORK_NAME_MAX);
	for (i = 0; i <= len; i++) {
		unsigned char ch = (unsigned char)in[i];

		if (ch == '.' || ch == '\0') {
			if (label == 0)
				BAD_RULE(list, rule, "a name has an empty label (two dots, or a leading dot)");
			if (in[i - 1] == '-' || in[i - label] == '-')
				BAD_RULE(list, rule, "a label may not start or end with '-'");
			if (ch == '\0' && digits_only)
				BAD_RULE(list, rule, "neither an address nor a name (a name's last label is not all digits)");
			label = 0;
			digits_only = true;
			out[i] = (char)ch;
			continue;
		}
		if (ch >= 0x80)
			BAD_RULE(list, rule, "an internationalised name must be given as punycode (\"xn--...\")");
		if (ch == '*')
			BAD_RULE(list, rule, "'*' may only be the whole leftmost label (\"*.example.com\"), or the whole rule");
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-'))
			BAD_RULE(list, rule, "a name holds only letters, digits, '-' and '.'");
		if (++label > LABEL_MAX)
			BAD_RULE(list, rule, "a label is at most %d characters", LABEL_MAX);
		if (!(ch >= '0' && ch <= '9'))
			digits_only = false;
		out[i] = (char)(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
	}
	return SAAS_OK;
}

int saas__network_rule(const char *list, const char *in, char out[SAAS_NETWORK_RULE_MAX + 1])
{
	char name[RULE_IN_MAX + 1];
	size_t len;
	int rc;

	if (!in)
		return saas__inval("network rule in %s is NULL", list);
	len = strnlen(in, RULE_IN_MAX + 1);
	if (len == 0)
		return saas__inval("network rule in %s is empty", list);
	if (len > RULE_IN_MAX)
		BAD_RULE(list, in, "a rule is at most %d characters", SAAS_NETWORK_NAME_MAX);
	if (strcmp(in, "*") == 0) {
		strcpy(out, "*");
		return SAAS_OK;
	}
	if ((rc = read_cidr(list, in, out)) <= 0)
		return rc;
	/* One trailing dot names the same (fully qualified) name. */
	memcpy(name, in, len + 1);
	if (name[len - 1] == '.')
		name[--len] = '\0';
	if (strncmp(name, "*.", 2) == 0) {
		out[0] = '*';
		out[1] = '.';
		return read_name(list, in, name + 2, out + 2);
	}
	return read_name(list, in, name, out);
}

void saas__network_clear(struct saas__network *net)
{
	for (size_t i = 0; net->allow && net->allow[i]; i++)
		free(net->allow[i]);
	for (size_t i = 0; net->deny && net->deny[i]; i++)
		free(net->deny[i]);
	free(net->allow);
	free(net->deny);
	memset(net, 0, sizeof(*net));
}

/* Normalise one list into a NULL-terminated array; duplicates keep their first place. */
static int read_list(const char *list, const char *const *in, char ***out, size_t *count)
{
	char rule[SAAS_NETWORK_RULE_MAX + 1];
	size_t n = 0, given = 0;
	char **rules;
	int rc;

	while (in && in[given] && given <= SAAS_NETWORK_RULES_MAX)
		given++;
	if (given > SAAS_NETWORK_RULES_MAX)
		return saas__inval("network %s list has more than %d rules", list, SAAS_NETWORK_RULES_MAX);
	if (!(rules = calloc(given + 1, sizeof(*rules))))
		return saas__oom();
	*out = rules;
	for (size_t i = 0; i < given; i++) {
		size_t j;

		if ((rc = saas__network_rule(list, in[i], rule)) < 0)
			return rc;
		for (j = 0; j < n && strcmp(rules[j], rule) != 0; j++)
			;
		if (j < n)
			continue;
		if (!(rules[n] = saas__strdup(rule)))
			return saas__oom();
		n++;
	}
	*count = n;
	return SAAS_OK;
}

int saas__network_read(struct saas__network *out, const saas_network_spec *spec)
{
	static const size_t sizes[] = { 0, sizeof(saas_network_spec) };
	saas_network_spec s = SAAS_NETWORK_SPEC_INIT;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!spec)
		return saas__inval("network spec is NULL");
	if ((rc = saas__options_read(&s, spec, sizes, SAAS_NETWORK_SPEC_VERSION, "network spec")) < 0)
		return rc;
	if (s.mode != SAAS_NETWORK_ISOLATED && s.mode != SAAS_NETWORK_INTERNET && s.mode != SAAS_NETWORK_POLICY)
		return saas__inval("network mode %d is not isolated (0), internet (1) or policy (2)", s.mode);
	if (s.mode != SAAS_NETWORK_POLICY && ((s.allow && s.allow[0]) || (s.deny && s.deny[0])))
		return saas__inval("network %s takes no allow or deny rules; rules need a policy",
		                   saas_network_mode_name(s.mode));
	out->mode = s.mode;
	if ((rc = read_list("allow", s.mode == SAAS_NETWORK_POLICY ? s.allow : NULL, &out->allow, &out->nallow)) < 0 ||
	    (rc = read_list("deny", s.mode == SAAS_NETWORK_POLICY ? s.deny : NULL, &out->deny, &out->ndeny)) < 0) {
		saas__network_clear(out);
		return rc;
	}
	return SAAS_OK;
}

int saas__network_of_name(struct saas__network *out, const char *name)
{
	saas_network_spec spec = SAAS_NETWORK_SPEC_INIT;
	int mode = saas__network_mode_parse(name);

	if (mode != SAAS_NETWORK_ISOLATED && mode != SAAS_NETWORK_INTERNET)
		return saas__inval("network must be isolated or internet (or unset for the default)");
	spec.mode = mode;
	return saas__network_read(out, &spec);
}

char *saas__network_join(char *const *rules)
{
	saas__buf b = SAAS__BUF_INIT;

	for (size_t i = 0; rules && rules[i]; i++)
		if (saas__buf_printf(&b, "%s%s", i ? "\n" : "", rules[i]) < 0) {
			saas__buf_free(&b);
			return NULL;
		}
	return b.data ? saas__buf_detach(&b, NULL) : saas__strdup("");
}

int saas__network_split(const char *text, char ***out)
{
	size_t n = 0, k = 0;
	char **rules;

	for (const char *p = text; *p; p++)
		n += *p == '\n';
	n += *text != '\0';
	if (!(rules = calloc(n + 1, sizeof(*rules))))
		return saas__oom();
	for (const char *p = text; *p; k++) {
		size_t len = strcspn(p, "\n");

		if (!(rules[k] = strndup(p, len))) {
			saas__rules_free(rules);
			return saas__oom();
		}
		p += len + (p[len] == '\n');
	}
	*out = rules;
	return SAAS_OK;
}

void saas__rules_free(char **rules)
{
	for (size_t i = 0; rules && rules[i]; i++)
		free(rules[i]);
	free(rules);
}

int saas__network_info_new(saas_network_info **out, int mode, char *const *allow, char *const *deny)
{
	saas_network_info *ni;
	char *const *lists[2] = { allow, deny };
	char **copies[2] = { NULL, NULL };

	*out = NULL;
	if (!(ni = calloc(1, sizeof(*ni))))
		return saas__oom();
	ni->mode = mode;
	for (int l = 0; l < 2; l++) {
		size_t n = 0;

		while (lists[l] && lists[l][n])
			n++;
		if (!(copies[l] = calloc(n + 1, sizeof(char *))))
			goto oom;
		for (size_t i = 0; i < n; i++)
			if (!(copies[l][i] = saas__strdup(lists[l][i])))
				goto oom;
	}
	ni->allow = copies[0];
	ni->deny = copies[1];
	*out = ni;
	return SAAS_OK;
oom:
	saas__rules_free(copies[0]);
	saas__rules_free(copies[1]);
	free(ni);
	return saas__oom();
}

void saas__network_info_free(saas_network_info *ni)
{
	if (!ni)
		return;
	saas__rules_free(ni->allow);
	saas__rules_free(ni->deny);
	free(ni);
}
