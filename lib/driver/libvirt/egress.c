/*
 * Per-VM egress, the nftables side. Each VM's QEMU runs under a uid of its
 * own (uid.c), so one table of this engine's, keyed on `meta skuid`, decides
 * every connection a guest opens through slirp, and a policy swaps in one
 * nft transaction while the VM runs:
 *
 *   output (filter, just before the guard's chain): established and related
 *       packets pass (the SSH forward's replies); then the uid's chain f_UID
 *       through the map filter_uids.
 *   f_UID: the guard's refusals first, counted in the uid's counter c_UID
 *       (the guard's own table refuses them too: it always wins); then by
 *       mode: isolated refuses everything; internet accepts (and the host's
 *       resolvers for slirp's DNS); a policy accepts its redirected DNS, then
 *       refuses d4_/d6_UID (deny CIDRs), accepts a4_/a6_UID (allow CIDRs) and
 *       l4_/l6_UID (addresses its lookups answered, each with a timeout),
 *       and refuses the rest, counted.
 *   nat_output (nat): a policy uid's DNS (port 53, UDP and TCP, to any
 *       address) is redirected to its resolver on loopback (resolver.c).
 *
 * Every rule has its IPv6 twin. The text is made by pure functions
 * (tests/unit/test_libvirt.c pins it by golden files) and loaded by nft -f.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "driver/libvirt/egress.h"
#include "driver/libvirt/nftnl.h"
#include "util/file.h"
#include "util/spawn.h"

#define REJECT "reject with icmpx type admin-prohibited"

/* ---- policies -------------------------------------------------------------------------------- */

static bool is_cidr(const char *rule)
{
	return strchr(rule, '/') != NULL;
}

/* Does the name rule (not a CIDR) match name? */
static bool rule_matches(const char *rule, const char *name)
{
	size_t n, r;

	if (strcmp(rule, "*") == 0)
		return true;
	if (is_cidr(rule))
		return false;
	if (strncmp(rule, "*.", 2) != 0)
		return strcmp(rule, name) == 0;
	/* "*.example.com": strictly below example.com, on a label boundary. */
	n = strlen(name);
	r = strlen(rule + 1); /* ".example.com" */
	return n > r && strcmp(name + n - r, rule + 1) == 0;
}

static bool any_matches(const char *const *rules, const char *name)
{
	for (; rules && *rules; rules++)
		if (rule_matches(*rules, name))
			return true;
	return false;
}

bool saas__lv_egress_name_allowed(const char *const *allow, const char *const *deny, const char *name)
{
	return !any_matches(deny, name) && any_matches(allow, name);
}

/* A CIDR in canonical form: the address with no bit set past its length. family out. */
static bool cidr_ok(const char *rule, int *family)
{
	uint8_t addr[16];
	unsigned int len;
	bool canonical;

	return saas__lv_cidr_parse(rule, family, addr, &len, &canonical) && canonical;
}

static bool name_ok(const char *rule)
{
	const char *p = rule;
	size_t len = strlen(rule);

	if (strcmp(rule, "*") == 0)
		return true;
	if (strncmp(p, "*.", 2) == 0)
		p += 2;
	if (!*p || len > DNS_NAME_MAX)
		return false;
	for (const char *label = p; *label;) {
		size_t n = strcspn(label, ".");
		if (n == 0 || n > DNS_LABEL_MAX)
			return false;
		for (size_t i = 0; i < n; i++)
			if (!((label[i] >= 'a' && label[i] <= 'z') || (label[i] >= '0' && label[i] <= '9') ||
			      label[i] == '-' || label[i] == '_'))
				return false;
		label += n;
		if (*label == '.' && !*++label)
			return false;
	}
	return true;
}

static int list_check(const char *const *rules, const char *which)
{
	size_t n = 0;
	int family;

	for (; rules && *rules; rules++, n++) {
		if (n >= EGRESS_RULES_MAX)
			return saas__inval("network policy: at most %d %s rules", EGRESS_RULES_MAX, which);
		if (is_cidr(*rules) ? !cidr_ok(*rules, &family) : !name_ok(*rules))
			return saas__inval("network policy: bad %s rule '%.300s' (a lowercase name of at most %d characters, "
			                   "*.name, a canonical CIDR or *)", which, *rules, DNS_NAME_MAX);
	}
	return SAAS_OK;
}

int saas__lv_egress_check(const saas_vm_network *net)
{
	int rc;

	if (!net)
		return SAAS_OK;
	if (net->mode != SAAS_NET_ISOLATED && net->mode != SAAS_NET_INTERNET && net->mode != SAAS_NET_POLICY)
		return saas__inval("network mode %d is unknown", net->mode);
	if (net->mode != SAAS_NET_POLICY)
		return SAAS_OK;
	if ((rc = list_check(net->allow, "allow")) < 0)
		return rc;
	return list_check(net->deny, "deny");
}

/* ---- the ruleset ----------------------------------------------------------------------------- */

char *saas__lv_egress_table_text(const char *table, const char *resolv_conf, const struct saas__lv_prefix6 *host6,
                                 size_t n_host6)
{
	saas__buf b = SAAS__BUF_INIT, r4 = SAAS__BUF_INIT, r6 = SAAS__BUF_INIT;

	saas__lv_resolvers(resolv_conf, &r4, &r6);
	saas__buf_printf(&b, "# Written by libsaas (the libvirt driver's per-VM egress); see docs/sandboxes.md.\n"
	                     "table inet %s {}\ndelete table inet %s\ntable inet %s {\n", table, table, table);
	saas__lv_guard_sets(&b, r4.len ? r4.data : "", r6.len ? r6.data : "", host6, n_host6);
	/*
	 * One priority ahead of the guard's chain, so that what both refuse is
	 * counted against the VM here. An accept here only ends this chain: the
	 * guard still sees every packet.
	 */
	saas__buf_puts(&b, "\tmap filter_uids {\n\t\ttype uid : verdict;\n\t}\n"
	                   "\tmap nat_uids {\n\t\ttype uid : verdict;\n\t}\n"
	                   "\tchain output {\n"
	                   "\t\ttype filter hook output priority filter - 1; policy accept;\n"
	                   "\t\tct state established,related accept\n"
	                   "\t\tmeta skuid vmap @filter_uids\n"
	                   "\t}\n"
	                   "\tchain nat_output {\n"
	                   "\t\ttype nat hook output priority -100; policy accept;\n"
	                   "\t\tmeta skuid vmap @nat_uids\n"
	                   "\t}\n"
	                   "}\n");
	saas__buf_free(&r4);
	saas__buf_free(&r6);
	return saas__buf_detach(&b, NULL);
}

static const char *const vm_sets[] = { "a4", "a6", "d4", "d6", "l4", "l6" };
#define VM_SETS (sizeof(vm_sets) / sizeof(vm_sets[0]))

/* uid's sets, declared inside a table block: made when missing, left as they are when there. */
static void vm_sets_declare(saas__buf *b, unsigned int uid)
{
	for (size_t i = 0; i < VM_SETS; i++) {
		saas__buf_printf(b, "\tset %s_%u {\n\t\ttype %s; ", vm_sets[i], uid,
		                 vm_sets[i][1] == '4' ? "ipv4_addr" : "ipv6_addr");
		if (vm_sets[i][0] == 'l')
			saas__buf_printf(b, "size %d; flags timeout;\n\t}\n", EGRESS_LEARNED_MAX);
		else
			saas__buf_puts(b, "flags interval; auto-merge;\n\t}\n");
	}
}

/*
 * The declarations of uid's objects: made when missing, left as they are
 * when there. Its sets only when asked: a policy's (allowed, denied and
 * learned addresses). VMs of the other modes have none, because every nft
 * run reads the whole table before it acts, and six sets a VM were most of
 * what it read (bench/RESULTS.md, "Measured density").
 */
static void vm_objects(saas__buf *b, const char *table, unsigned int uid, bool sets)
{
	saas__buf_printf(b, "table inet %s {\n\tcounter c_%u {\n\t}\n", table, uid);
	if (sets)
		vm_sets_declare(b, uid);
	saas__buf_printf(b, "\tchain f_%u {\n\t}\n\tchain n_%u {\n\t}\n}\n", uid, uid);
}

/*
 * uid's sets gone, whether they were there or not: declared first, so that
 * the delete never fails. After the flush or delete of the chain whose rules
 * name them, in the same transaction.
 */
static void vm_sets_delete(saas__buf *b, const char *table, unsigned int uid)
{
	saas__buf_printf(b, "table inet %s {\n", table);
	vm_sets_declare(b, uid);
	saas__buf_puts(b, "}\n");
	for (size_t i = 0; i < VM_SETS; i++)
		saas__buf_printf(b, "delete set inet %s %s_%u\n", table, vm_sets[i], uid);
}

/* "add element" of the CIDR rules of one family into set (nothing when there are none). */
static void cidr_elements(saas__buf *b, const char *table, const char *set, const char *const *rules, int family)
{
	size_t n = 0;
	int f;

	for (; rules && *rules; rules++) {
		const char *e = NULL;
		if (strcmp(*rules, "*") == 0)
			e = family == AF_INET ? "0.0.0.0/0" : "::/0";
		else if (is_cidr(*rules) && cidr_ok(*rules, &f) && f == family)
			e = *rules;
		if (!e)
			continue;
		if (n++)
			saas__buf_printf(b, ", %s", e);
		else
			saas__buf_printf(b, "add element inet %s %s { %s", table, set, e);
	}
	if (n)
		saas__buf_puts(b, " }\n");
}

char *saas__lv_egress_vm_text(const char *table, unsigned int uid, const saas_vm_network *net,
                              unsigned int dns_port)
{
	saas__buf b = SAAS__BUF_INIT;
	char set[32];
	int mode = net ? net->mode : SAAS_NET_ISOLATED;

	vm_objects(&b, table, uid, mode == SAAS_NET_POLICY);
	saas__buf_printf(&b, "flush chain inet %s f_%u\nflush chain inet %s n_%u\n", table, uid, table, uid);
	/* A swap forgets what lookups under the old policy allowed; a swap to another mode, the sets too. */
	if (mode != SAAS_NET_POLICY)
		vm_sets_delete(&b, table, uid);
	if (mode == SAAS_NET_POLICY) {
		for (size_t i = 0; i < VM_SETS; i++)
			saas__buf_printf(&b, "flush set inet %s %s_%u\n", table, vm_sets[i], uid);
		snprintf(set, sizeof(set), "a4_%u", uid);
		cidr_elements(&b, table, set, net->allow, AF_INET);
		snprintf(set, sizeof(set), "a6_%u", uid);
		cidr_elements(&b, table, set, net->allow, AF_INET6);
		snprintf(set, sizeof(set), "d4_%u", uid);
		cidr_elements(&b, table, set, net->deny, AF_INET);
		snprintf(set, sizeof(set), "d6_%u", uid);
		cidr_elements(&b, table, set, net->deny, AF_INET6);
		/* Its DNS went to its resolver (nat_output): let that through before the guard's loopback refusal. */
		saas__buf_printf(&b,
		                 "add rule inet %s f_%u meta l4proto { tcp, udp } ct status dnat ip daddr 127.0.0.1 th dport %u "
		                 "accept\n"
		                 "add rule inet %s f_%u meta l4proto { tcp, udp } ct status dnat ip6 daddr ::1 th dport %u accept\n",
		                 table, uid, dns_port, table, uid, dns_port);
	} else if (mode == SAAS_NET_INTERNET) {
		/* Slirp forwards the guest's DNS to the host's resolvers, as the guard lets it. */
		saas__buf_printf(&b,
		                 "add rule inet %s f_%u ip daddr @resolvers4 meta l4proto { tcp, udp } th dport 53 accept\n"
		                 "add rule inet %s f_%u ip6 daddr @resolvers6 meta l4proto { tcp, udp } th dport 53 accept\n",
		                 table, uid, table, uid);
	}
	if (mode != SAAS_NET_ISOLATED)
		saas__buf_printf(&b,
		                 "add rule inet %s f_%u fib daddr type { local, broadcast, anycast, multicast } counter name "
		                 "\"c_%u\" " REJECT "\n"
		                 "add rule inet %s f_%u ip daddr @blocked4 counter name \"c_%u\" " REJECT "\n"
		                 "add rule inet %s f_%u ip6 daddr @blocked6 counter name \"c_%u\" " REJECT "\n"
		                 "add rule inet %s f_%u ip6 daddr @host6 counter name \"c_%u\" " REJECT "\n",
		                 table, uid, uid, table, uid, uid, table, uid, uid, table, uid, uid);
	if (mode == SAAS_NET_POLICY)
		saas__buf_printf(&b,
		                 "add rule inet %s f_%u ip daddr @d4_%u counter name \"c_%u\" " REJECT "\n"
		                 "add rule inet %s f_%u ip6 daddr @d6_%u counter name \"c_%u\" " REJECT "\n"
		                 "add rule inet %s f_%u ip daddr @a4_%u accept\n"
		                 "add rule inet %s f_%u ip6 daddr @a6_%u accept\n"
		                 "add rule inet %s f_%u ip daddr @l4_%u accept\n"
		                 "add rule inet %s f_%u ip6 daddr @l6_%u accept\n"
		                 "add rule inet %s n_%u meta l4proto { tcp, udp } th dport 53 redirect to :%u\n",
		                 table, uid, uid, uid, table, uid, uid, uid, table, uid, uid, table, uid, uid, table, uid, uid,
		                 table, uid, uid, table, uid, dns_port);
	if (mode == SAAS_NET_INTERNET)
		saas__buf_printf(&b, "add rule inet %s f_%u accept\n", table, uid);
	else
		saas__buf_printf(&b, "add rule inet %s f_%u counter name \"c_%u\" " REJECT "\n", table, uid, uid);
	/* Added first so that the delete never fails: one transaction whether it was there or not. */
	saas__buf_printf(&b, "add element inet %s filter_uids { %u : jump f_%u }\n"
	                     "add element inet %s nat_uids { %u : jump n_%u }\n",
	                 table, uid, uid, table, uid, uid);
	if (mode != SAAS_NET_POLICY)
		saas__buf_printf(&b, "delete element inet %s nat_uids { %u }\n", table, uid);
	return saas__buf_detach(&b, NULL);
}

char *saas__lv_egress_remove_text(const char *table, unsigned int uid)
{
	saas__buf b = SAAS__BUF_INIT;

	vm_objects(&b, table, uid, false);
	saas__buf_printf(&b, "add element inet %s filter_uids { %u : jump f_%u }\n"
	                     "add element inet %s nat_uids { %u : jump n_%u }\n"
	                     "delete element inet %s filter_uids { %u }\n"
	                     "delete element inet %s nat_uids { %u }\n"
	                     "delete chain inet %s f_%u\ndelete chain inet %s n_%u\n",
	                 table, uid, uid, table, uid, uid, table, uid, table, uid, table, uid, table, uid);
	vm_sets_delete(&b, table, uid);
	saas__buf_printf(&b, "delete counter inet %s c_%u\n", table, uid);
	return saas__buf_detach(&b, NULL);
}

/* ---- the table on the host ------------------------------------------------------------------- */

struct evm *saas__lv_egress_find_uid(struct saas__lv_egress *e, unsigned int uid)
{
	for (struct evm *v = e->vms; v; v = v->next)
		if (v->uid == uid)
			return v;
	return NULL;
}

static struct evm *find_name(struct saas__lv_egress *e, const char *name)
{
	for (struct evm *v = e->vms; v; v = v->next)
		if (strcmp(v->name, name) == 0)
			return v;
	return NULL;
}

int saas__lv_egress_refused(const char *what)
{
	return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_ARGS, 0,
	                   "%s are not available on this server (its operator's log says why)", what);
}

struct eacct *saas__lv_acct_get(struct eacct **list, const char *id)
{
	struct eacct *a;
	size_t len = strlen(id);

	for (a = *list; a; a = a->next)
		if (strcmp(a->id, id) == 0)
			return a;
	if (!(a = calloc(1, sizeof(*a) + len + 1)))
		return NULL;
	memcpy(a->id, id, len + 1);
	a->next = *list;
	*list = a;
	return a;
}

void saas__lv_acct_drop(struct eacct **list, struct eacct *a)
{
	if (!a || a->vms || a->pending)
		return;
	for (struct eacct **pp = list; *pp; pp = &(*pp)->next)
		if (*pp == a) {
			*pp = a->next;
			break;
		}
	free(a);
}

unsigned int saas__lv_acct_share(const struct eacct *list)
{
	unsigned int n = 0, share;

	for (const struct eacct *a = list; a; a = a->next)
		if (a->policy_vms)
			n++;
	share = EGRESS_PENDING_MAX / (n ? n : 1);
	return share < EGRESS_PENDING_ACCOUNT_MIN ? EGRESS_PENDING_ACCOUNT_MIN : share;
}

/* The entry of account id, made (unreferenced) when there is none. NULL: out of memory. Under e->mu. */
static struct eacct *acct_get(struct saas__lv_egress *e, const char *id)
{
	return saas__lv_acct_get(&e->accts, id);
}

void saas__lv_egress_acct_drop(struct saas__lv_egress *e, struct eacct *a)
{
	saas__lv_acct_drop(&e->accts, a);
}

unsigned int saas__lv_egress_share(const struct saas__lv_egress *e)
{
	return saas__lv_acct_share(e->accts);
}

/* v leaves its account (it goes, or moves to another). Under e->mu. */
static void acct_leave(struct saas__lv_egress *e, struct evm *v)
{
	struct eacct *a = v->acct;

	if (!a)
		return;
	if (v->mode == SAAS_NET_POLICY)
		a->policy_vms--;
	a->vms--;
	v->acct = NULL;
	saas__lv_egress_acct_drop(e, a);
}

void saas__lv_rules_free(char **rules)
{
	for (char **r = rules; r && *r; r++)
		free(*r);
	free(rules);
}

int saas__lv_egress_take(const saas_vm_network *net, char ***allow, char ***deny)
{
	int rc;

	*allow = *deny = NULL;
	if ((rc = saas__lv_egress_check(net)) < 0 || !net || net->mode != SAAS_NET_POLICY)
		return rc;
	if (!(*allow = saas__lv_rules_dup(net->allow)) || !(*deny = saas__lv_rules_dup(net->deny))) {
		saas__lv_rules_free(*allow);
		*allow = NULL;
		return saas__oom();
	}
	return SAAS_OK;
}

char **saas__lv_rules_dup(const char *const *rules)
{
	size_t n = 0;
	char **copy;

	while (rules && rules[n])
		n++;
	if (!(copy = calloc(n + 1, sizeof(*copy))))
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!(copy[i] = strdup(rules[i]))) {
			saas__lv_rules_free(copy);
			return NULL;
		}
	return copy;
}

static void evm_free(struct evm *v)
{
	saas__lv_resolver_unbind(v);
	saas__lv_rules_free(v->allow);
	saas__lv_rules_free(v->deny);
	free(v);
}

/* v's rules as they stand, loaded. Caller holds e->mu. */
static int vm_load(struct drv *d, const struct evm *v)
{
	saas_vm_network net = { v->mode, (const char *const *)v->allow, (const char *const *)v->deny };
	char *text = saas__lv_egress_vm_text(d->egress->table, v->uid, &net, v->port), why[512];
	int rc;

	if (!text)
		return saas__oom();
	if ((rc = saas__lv_nft_load(d, text, NULL, why, sizeof(why))) == SAAS_ENOTSUP)
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "VM %s: setting its egress rules failed: %s",
		                 v->name, why);
	free(text);
	return rc;
}

/* The table, replaced, with every VM's rules. Caller holds e->mu. */
static int table_load(struct drv *d, char *why, size_t why_len)
{
	struct saas__lv_prefix6 *host6 = NULL;
	char *resolv_conf = NULL, *text = NULL;
	size_t n_host6 = 0;
	int rc;

	if ((rc = saas__lv_host_now(&resolv_conf, &host6, &n_host6, why, why_len)) < 0)
		goto out;
	if (!(text = saas__lv_egress_table_text(d->egress->table, resolv_conf, host6, n_host6))) {
		rc = saas__oom();
		goto out;
	}
	if ((rc = saas__lv_nft_load(d, text, "egress.nft", why, why_len)) < 0)
		goto out;
	for (struct evm *v = d->egress->vms; v && rc == SAAS_OK; v = v->next)
		if ((rc = vm_load(d, v)) < 0)
			snprintf(why, why_len, "%s", saas_error_last()->message);
out:
	free(resolv_conf);
	free(host6);
	free(text);
	return rc;
}

/*
 * Reads asked of the kernel over netlink (nftnl.h: one object, where nft
 * reads the whole table first): only when this process runs nft itself
 * (not aas-nft), and until the kernel refuses it (no CAP_NET_ADMIN).
 */
static bool netlink_may(const struct drv *d)
{
	return !d->nft && !__atomic_load_n(&d->egress->netlink_refused, __ATOMIC_RELAXED);
}

/* A netlink read's rc as it is, but -EPERM: remembered (nft from then on) and 1, "ask nft". */
static int netlink_rc(struct drv *d, int rc)
{
	if (rc != -EPERM)
		return rc;
	__atomic_store_n(&d->egress->netlink_refused, 1, __ATOMIC_RELAXED);
	return 1;
}

/* Is the table there, its output chain with it (a flushed ruleset has neither)? 0 or an error. Under e->mu. */
static int table_there(struct drv *d, const char *const *argv)
{
	int rc;

	if (netlink_may(d) && (rc = netlink_rc(d, saas__nftnl_chain(d->egress->table, "output"))) <= 0)
		return rc == 0 ? SAAS_OK
		               : saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, -rc, "the egress table's output chain: %s",
		                             strerror(-rc));
	return saas__run(argv, NULL) < 0 ? SAAS_EBACKEND : SAAS_OK;
}

int saas__lv_egress_ensure(struct drv *d)
{
	struct saas__lv_egress *e = d->egress;
	const char *argv[] = { saas__lv_nft(d), "list", "chain", "inet", e ? e->table : "", "output", NULL };
	char why[512];
	int rc = SAAS_OK;

	if (!e)
		return SAAS_OK;
	pthread_mutex_lock(&e->mu);
	if (table_there(d, argv) < 0) {
		saas__error_clear();
		saas__lv_log(d, SAAS_LOG_WARN, "the egress table (table inet %s) is gone (was the ruleset flushed?): "
		             "loading it again with every VM's rules", e->table);
		if ((rc = table_load(d, why, sizeof(why))) < 0)
			rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "the egress table cannot be loaded again: %s",
			                 why);
	}
	pthread_mutex_unlock(&e->mu);
	return rc;
}

int saas__lv_egress_upstreams(struct drv *d, struct sockaddr_storage *up, unsigned int *n)
{
	saas__buf v4 = SAAS__BUF_INIT, v6 = SAAS__BUF_INIT;
	char *resolv_conf = NULL, *list[2];
	int rc = SAAS_OK;

	*n = 0;

	if (d->dns_upstream) {
		char addr[INET6_ADDRSTRLEN + 1], *hash;
		unsigned long port = 53;
		struct sockaddr_in *s4 = (struct sockaddr_in *)&up[0];
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&up[0];
		snprintf(addr, sizeof(addr), "%s", d->dns_upstream);
		if ((hash = strchr(addr, '#'))) {
			char *end;
			*hash = '\0';
			port = strtoul(hash + 1, &end, 10);
			if (*end || port == 0 || port > 65535)
				return saas__inval("dns_upstream must be ADDR or ADDR#PORT, not '%s'", d->dns_upstream);
		}
		memset(&up[0], 0, sizeof(up[0]));
		if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
			s4->sin_family = AF_INET;
			s4->sin_port = htons((uint16_t)port);
		} else if (inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1) {
			s6->sin6_family = AF_INET6;
			s6->sin6_port = htons((uint16_t)port);
		} else {
			return saas__inval("dns_upstream must be ADDR or ADDR#PORT, not '%s'", d->dns_upstream);
		}
		*n = 1;
		return SAAS_OK;
	}
	/* The system's, often a link (a resolver daemon's stub file): followed. None when it cannot be read. */
	(void)saas__file_read(&resolv_conf, NULL, AT_FDCWD, "/etc/resolv.conf", 64 << 10, SAAS__FILE_QUIET);
	saas__lv_resolvers(resolv_conf, &v4, &v6);
	list[0] = v4.data;
	list[1] = v6.data;
	for (int f = 0; f < 2; f++) {
		char *save = NULL;
		for (char *a = list[f] ? strtok_r(list[f], ", ", &save) : NULL; a && *n < EGRESS_UPSTREAMS_MAX;
		     a = strtok_r(NULL, ", ", &save)) {
			struct sockaddr_storage *ss = &up[*n];
			memset(ss, 0, sizeof(*ss));
			if (f == 0 && inet_pton(AF_INET, a, &((struct sockaddr_in *)ss)->sin_addr) == 1) {
				ss->ss_family = AF_INET;
				((struct sockaddr_in *)ss)->sin_port = htons(53);
				(*n)++;
			} else if (f == 1 && inet_pton(AF_INET6, a, &((struct sockaddr_in6 *)ss)->sin6_addr) == 1) {
				ss->ss_family = AF_INET6;
				((struct sockaddr_in6 *)ss)->sin6_port = htons(53);
				(*n)++;
			}
		}
	}
	if (!*n)
		saas__lv_log(d, SAAS_LOG_WARN, "egress: no nameserver in /etc/resolv.conf and no dns_upstream: policy "
		             "VMs resolve nothing");
	saas__buf_free(&v4);
	saas__buf_free(&v6);
	free(resolv_conf);
	return rc;
}

int saas__lv_egress_open(struct drv *d, const char *state_dir)
{
	struct saas__lv_egress *e;
	char hash[65];
	int rc;

	if (!d->cf.confined || !d->guard) {
		snprintf(d->egress_why, sizeof(d->egress_why), "%s",
		         !d->cf.confined ? "network policies need each VM's QEMU under a uid of its own (driver option uids; "
		                        "see docs/security.md)"
		                      : d->guard_why);
		return SAAS_OK;
	}
	if (!(e = calloc(1, sizeof(*e))))
		return saas__oom();
	pthread_mutex_init(&e->mu, NULL);
	e->wake = -1;
	saas__sha256_hex(hash, state_dir, strlen(state_dir));
	snprintf(e->table, sizeof(e->table), "aas_egress_%.16s", hash);
	d->egress = e;
	if ((rc = saas__lv_egress_upstreams(d, e->upstream, &e->n_upstream)) < 0)
		goto fail;
	pthread_mutex_lock(&e->mu);
	rc = table_load(d, d->egress_why, sizeof(d->egress_why));
	pthread_mutex_unlock(&e->mu);
	if (rc == SAAS_ENOMEM)
		goto fail;
	if (rc < 0) {
		saas__error_clear();
		rc = SAAS_OK;
		goto off;
	}
	if ((e->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 || saas__lv_resolver_start(d) < 0) {
		snprintf(d->egress_why, sizeof(d->egress_why), "cannot start the resolver: %s", strerror(errno));
		saas__error_clear();
		goto off;
	}
	saas__lv_log(d, SAAS_LOG_INFO, "egress: per-VM policies in table inet %s", e->table);
	return SAAS_OK;
off:
	saas__lv_log(d, SAAS_LOG_INFO, "egress: network policies are refused: %s", d->egress_why);
fail:
	d->egress = NULL;
	if (e->wake >= 0)
		close(e->wake);
	pthread_mutex_destroy(&e->mu);
	free(e);
	return rc;
}

void saas__lv_egress_close(struct drv *d)
{
	struct saas__lv_egress *e = d->egress;

	if (!e)
		return;
	saas__lv_resolver_stop(d);
	/*
	 * With a VM left, the table stays: its rules hold while the engine is
	 * away, and the next open replaces the table. With none, nothing needs
	 * it, and a table left behind by every engine that ever ran would
	 * outlive them all.
	 */
	if (!e->vms) {
		const char *argv[] = { saas__lv_nft(d), "delete", "table", "inet", e->table, NULL };
		if (saas__run(argv, NULL) < 0) {
			saas__lv_log(d, SAAS_LOG_WARN, "egress: removing table inet %s failed: %s", e->table,
			             saas_error_last()->message);
			saas__error_clear();
		}
	}
	while (e->vms) {
		struct evm *v = e->vms;
		e->vms = v->next;
		acct_leave(e, v);
		evm_free(v);
	}
	close(e->wake);
	pthread_mutex_destroy(&e->mu);
	free(e);
	d->egress = NULL;
}

static void wake(struct saas__lv_egress *e)
{
	uint64_t one = 1;

	if (write(e->wake, &one, sizeof(one)) < 0) {
		/* Already signalled (the counter is full): the thread looks anyway. */
	}
}

int saas__lv_egress_vm_set(struct drv *d, const char *name, unsigned int uid, const saas_vm_network *net,
                           bool restricted)
{
	struct saas__lv_egress *e = d->egress;
	int mode = net ? net->mode : SAAS_NET_ISOLATED, rc;
	char **allow = NULL, **deny = NULL;
	struct evm *v, saved;
	struct eacct *acct = NULL;
	char own[SAAS_ID_MAX + 8];
	bool made = false;

	if (!e)
		return saas__lv_egress_refused("network policies");
	if ((rc = saas__lv_egress_take(net, &allow, &deny)) < 0)
		return rc;
	pthread_mutex_lock(&e->mu);
	if (!(v = find_name(e, name))) {
		if (!(v = calloc(1, sizeof(*v)))) {
			rc = saas__oom();
			goto out;
		}
		saas__strlcpy(v->name, name, sizeof(v->name));
		v->uid = uid;
		v->restricted = restricted;
		v->udp4 = v->udp6 = v->tcp4 = v->tcp6 = -1;
		made = true;
	}
	/*
	 * Its account, for its share of the resolver's pool. A call without one
	 * (the driver adopting a running VM at open, before the engine says
	 * whose it is) keeps the one it has; a VM never told is its own.
	 */
	snprintf(own, sizeof(own), "vm %s", name);
	if (net && net->account)
		acct = acct_get(e, net->account);
	else
		acct = v->acct ? v->acct : acct_get(e, own);
	if (!acct) {
		rc = saas__oom();
		goto out;
	}
	if (v->restricted && mode != SAAS_NET_ISOLATED) {
		rc = saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_ARGS, 0, "VM %s was made isolated: its network device has no "
		                 "way out to open (slirp's restrict=on); make it with a policy (an empty allow list is "
		                 "isolated too) to change its egress later", name);
		goto out;
	}
	saved = *v;
	if (mode == SAAS_NET_POLICY && v->udp4 < 0 && (rc = saas__lv_resolver_bind(v)) < 0)
		goto out;
	v->mode = mode;
	v->allow = allow;
	v->deny = deny;
	if ((rc = vm_load(d, v)) < 0) {
		/* The old rules stand (the transaction did nothing): so does the old policy. */
		if (saved.udp4 < 0)
			saas__lv_resolver_unbind(v);
		v->mode = saved.mode;
		v->allow = saved.allow;
		v->deny = saved.deny;
		goto out;
	}
	saas__lv_rules_free(saved.allow);
	saas__lv_rules_free(saved.deny);
	allow = deny = NULL;
	if (mode != SAAS_NET_POLICY)
		saas__lv_resolver_unbind(v);
	/* Counted under its account as it now stands (saved.mode is what it was counted as). */
	v->mode = saved.mode;
	if (acct != v->acct) {
		acct_leave(e, v);
		v->acct = acct;
		acct->vms++;
	} else if (v->mode == SAAS_NET_POLICY) {
		acct->policy_vms--;
	}
	v->mode = mode;
	if (mode == SAAS_NET_POLICY)
		acct->policy_vms++;
	acct = NULL;
	if (made) {
		v->next = e->vms;
		e->vms = v;
		made = false;
	}
	wake(e);
out:
	/* Made for nothing (the VM kept its own, or failed): gone again. */
	saas__lv_egress_acct_drop(e, acct);
	pthread_mutex_unlock(&e->mu);
	if (made)
		evm_free(v);
	saas__lv_rules_free(allow);
	saas__lv_rules_free(deny);
	return rc;
}

void saas__lv_egress_vm_remove(struct drv *d, const char *name)
{
	struct saas__lv_egress *e = d->egress;
	struct evm **pp, *v = NULL;
	char *text, why[512];

	if (!e)
		return;
	pthread_mutex_lock(&e->mu);
	for (pp = &e->vms; *pp; pp = &(*pp)->next)
		if (strcmp((*pp)->name, name) == 0) {
			v = *pp;
			*pp = v->next;
			break;
		}
	if (v && (text = saas__lv_egress_remove_text(e->table, v->uid))) {
		if (saas__lv_nft_load(d, text, NULL, why, sizeof(why)) < 0)
			saas__lv_log(d, SAAS_LOG_WARN, "VM %s: removing its egress rules (uid %u) failed: %s", name, v->uid, why);
		free(text);
	}
	if (v) {
		acct_leave(e, v);
		evm_free(v);
		wake(e);
	}
	pthread_mutex_unlock(&e->mu);
}

int saas__lv_egress_vm_stats(struct drv *d, const char *name, saas_vm_network_stats *out)
{
	struct saas__lv_egress *e = d->egress;
	char counter[32], *text = NULL, *p;
	const char *argv[] = { saas__lv_nft(d), "list", "counter", "inet", e ? e->table : "", counter, NULL };
	struct evm *v;
	int64_t packets;
	int rc = SAAS_OK;

	memset(out, 0, sizeof(*out));
	if (!e)
		return SAAS_OK;
	pthread_mutex_lock(&e->mu);
	if ((v = find_name(e, name))) {
		out->denied_lookups = v->denied_lookups;
		snprintf(counter, sizeof(counter), "c_%u", v->uid);
	}
	pthread_mutex_unlock(&e->mu);
	if (!v)
		return SAAS_OK;
	if (netlink_may(d) && (rc = netlink_rc(d, saas__nftnl_counter(e->table, counter, &packets))) <= 0) {
		if (rc < 0)
			return saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, -rc, "VM %s: reading its egress counter: %s",
			                   name, strerror(-rc));
		out->denied_connections = packets;
		return SAAS_OK;
	}
	rc = SAAS_OK;
	if (saas__run(argv, &text) < 0) {
		rc = saas__error_wrap(SAAS_EBACKEND, "VM %s: reading its egress counter", name);
	} else if ((p = strstr(text, "packets "))) {
		out->denied_connections = strtoll(p + 8, NULL, 10);
	}
	free(text);
	return rc;
}

int saas__lv_egress_learn(struct drv *d, const struct evm *v, const struct saas__dns_addr *addrs, size_t n)
{
	saas__buf b = SAAS__BUF_INIT;
	char addr[INET6_ADDRSTRLEN], why[512];
	int rc = SAAS_OK;

	for (size_t i = 0; i < n; i++) {
		uint32_t ttl = addrs[i].ttl < EGRESS_TTL_MIN ? EGRESS_TTL_MIN
		               : addrs[i].ttl > EGRESS_TTL_MAX ? EGRESS_TTL_MAX : addrs[i].ttl;
		const char *set = addrs[i].family == AF_INET ? "l4" : "l6";
		inet_ntop(addrs[i].family, addrs[i].addr, addr, sizeof(addr));
		/* Added, deleted, added: there afterwards with this timeout, whether it was there or not. */
		saas__buf_printf(&b,
		                 "add element inet %s %s_%u { %s timeout %us }\n"
		                 "delete element inet %s %s_%u { %s }\n"
		                 "add element inet %s %s_%u { %s timeout %us }\n",
		                 d->egress->table, set, v->uid, addr, ttl, d->egress->table, set, v->uid, addr,
		                 d->egress->table, set, v->uid, addr, ttl);
	}
	if (b.len && (rc = saas__lv_nft_load(d, b.data, NULL, why, sizeof(why))) < 0)
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "VM %s: allowing what its lookup answered failed: %s",
		                 v->name, why);
	saas__buf_free(&b);
	return rc;
}
