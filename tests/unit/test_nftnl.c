/*
 * An egress counter and chain, and a table's marked rules, asked of the
 * kernel over netlink (lib/driver/libvirt/nftnl.c): the reader of its
 * answer against made datagrams (an object and its ack, a chain, a dump's
 * rules and their comments, an error, other requests' messages, every
 * length that lies), and, as root in a network namespace of the test's
 * own, real ones against what nft made.
 */
#include <endian.h>
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include <cmocka.h>

#include "driver/libvirt/nftnl.h"

#define SEQ 77

/* Datagrams under construction. */
struct dgram {
	uint8_t b[1024];
	size_t n;
};

static size_t put(struct dgram *d, const void *p, size_t n)
{
	size_t at = d->n;

	assert_true(d->n + NLA_ALIGN(n) <= sizeof(d->b));
	memcpy(d->b + d->n, p, n);
	memset(d->b + d->n + n, 0, NLA_ALIGN(n) - n);
	d->n += NLA_ALIGN(n);
	return at;
}

/* A message header of type for seq; its length is set by msg_end. */
static size_t msg_begin(struct dgram *d, uint16_t type, uint32_t seq)
{
	struct nlmsghdr h = { .nlmsg_type = type, .nlmsg_seq = seq };

	return put(d, &h, sizeof(h));
}

static void msg_end(struct dgram *d, size_t at)
{
	uint32_t len = (uint32_t)(d->n - at);

	memcpy(d->b + at, &len, sizeof(len));
}

static size_t attr(struct dgram *d, uint16_t type, const void *p, size_t n)
{
	struct nlattr a = { .nla_len = (uint16_t)(NLA_HDRLEN + n), .nla_type = type };
	size_t at = put(d, &a, sizeof(a));

	if (n)
		put(d, p, n);
	return at;
}

/* A nested attribute's header; its length is set by nest_end. */
static size_t nest_begin(struct dgram *d, uint16_t type)
{
	return attr(d, type | NLA_F_NESTED, NULL, 0);
}

static void nest_end(struct dgram *d, size_t at)
{
	uint16_t len = (uint16_t)(d->n - at);

	memcpy(d->b + at, &len, sizeof(len));
}

/* The kernel's NEWOBJ for a counter object (type otype) with packets. */
static void newobj(struct dgram *d, uint32_t seq, uint32_t otype, uint64_t packets)
{
	struct nfgenmsg g = { .nfgen_family = NFPROTO_INET, .version = NFNETLINK_V0 };
	uint32_t type = htobe32(otype);
	uint64_t pk = htobe64(packets), bytes = htobe64(packets * 60);
	size_t m = msg_begin(d, (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWOBJ, seq), n;

	put(d, &g, sizeof(g));
	attr(d, NFTA_OBJ_TABLE, "aas_egress_x", 13);
	attr(d, NFTA_OBJ_NAME, "c_200001", 9);
	attr(d, NFTA_OBJ_TYPE, &type, sizeof(type));
	n = nest_begin(d, NFTA_OBJ_DATA);
	attr(d, NFTA_COUNTER_BYTES, &bytes, sizeof(bytes));
	attr(d, NFTA_COUNTER_PACKETS, &pk, sizeof(pk));
	nest_end(d, n);
	msg_end(d, m);
}

/* An NLMSG_ERROR for seq: error 0 is the ack. */
static void error_msg(struct dgram *d, uint32_t seq, int error)
{
	struct nlmsgerr e = { .error = error };
	size_t m = msg_begin(d, NLMSG_ERROR, seq);

	put(d, &e, sizeof(e));
	msg_end(d, m);
}

#define NEWOBJ ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWOBJ)
#define NEWCHAIN ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWCHAIN)

/* The datagram read as the answer to a counter's request. */
static int reply(const struct dgram *d, int64_t *packets, bool *found)
{
	struct saas__nftnl_answer a = { .want = NEWOBJ, .packets = -1 };
	int rc = saas__nftnl_reply(d->b, d->n, SEQ, &a);

	*packets = a.packets;
	*found = a.found;
	return rc;
}

static void test_answer(void **state)
{
	struct dgram d = { .n = 0 };
	int64_t packets;
	bool found;

	(void)state;
	/* The object and its ack in one datagram. */
	newobj(&d, SEQ, NFT_OBJECT_COUNTER, 42);
	error_msg(&d, SEQ, 0);
	assert_int_equal(reply(&d, &packets, &found), 1);
	assert_true(found);
	assert_int_equal(packets, 42);
	/* In two: the first says more is to come. */
	d.n = 0;
	newobj(&d, SEQ, NFT_OBJECT_COUNTER, UINT64_C(1) << 40);
	assert_int_equal(reply(&d, &packets, &found), 0);
	assert_true(found);
	assert_int_equal(packets, INT64_C(1) << 40);
	/* Another request's messages are not this one's answer. */
	d.n = 0;
	newobj(&d, SEQ + 1, NFT_OBJECT_COUNTER, 9);
	error_msg(&d, SEQ + 1, -ENOENT);
	assert_int_equal(reply(&d, &packets, &found), 0);
	assert_false(found);
	/* A counter above what an int64_t holds is read as its low 63 bits, never negative. */
	d.n = 0;
	newobj(&d, SEQ, NFT_OBJECT_COUNTER, UINT64_MAX);
	assert_int_equal(reply(&d, &packets, &found), 0);
	assert_true(packets >= 0);
}

static void test_errors(void **state)
{
	struct dgram d = { .n = 0 };
	int64_t packets;
	bool found;

	(void)state;
	error_msg(&d, SEQ, -ENOENT);
	assert_int_equal(reply(&d, &packets, &found), -ENOENT);
	assert_false(found);
	d.n = 0;
	error_msg(&d, SEQ, -EPERM);
	assert_int_equal(reply(&d, &packets, &found), -EPERM);
	/* Not an errno: no answer at all. */
	d.n = 0;
	error_msg(&d, SEQ, 5);
	assert_int_equal(reply(&d, &packets, &found), -EPROTO);
	d.n = 0;
	error_msg(&d, SEQ, -100000);
	assert_int_equal(reply(&d, &packets, &found), -EPROTO);
	/* An object that is not a counter. */
	d.n = 0;
	newobj(&d, SEQ, NFT_OBJECT_COUNTER + 1, 3);
	assert_int_equal(reply(&d, &packets, &found), -EPROTO);
	assert_false(found);
	/* A done ends it too. */
	d.n = 0;
	msg_end(&d, msg_begin(&d, NLMSG_DONE, SEQ));
	assert_int_equal(reply(&d, &packets, &found), 1);
}

/* A chain's answer: any NEWCHAIN of the request is one; a counter's NEWOBJ is not. */
static void test_chain(void **state)
{
	struct nfgenmsg g = { .nfgen_family = NFPROTO_INET, .version = NFNETLINK_V0 };
	struct saas__nftnl_answer a = { .want = NEWCHAIN };
	struct dgram d = { .n = 0 };
	size_t m;

	(void)state;
	newobj(&d, SEQ, NFT_OBJECT_COUNTER, 1);
	error_msg(&d, SEQ, 0);
	assert_int_equal(saas__nftnl_reply(d.b, d.n, SEQ, &a), 1);
	assert_false(a.found);
	d.n = 0;
	m = msg_begin(&d, NEWCHAIN, SEQ);
	put(&d, &g, sizeof(g));
	attr(&d, NFTA_CHAIN_TABLE, "aas_egress_x", 13);
	attr(&d, NFTA_CHAIN_NAME, "output", 7);
	msg_end(&d, m);
	error_msg(&d, SEQ, 0);
	assert_int_equal(saas__nftnl_reply(d.b, d.n, SEQ, &a), 1);
	assert_true(a.found);
	/* Shorter than its nfgenmsg: no answer. */
	d.n = 0;
	a.found = false;
	msg_end(&d, msg_begin(&d, NEWCHAIN, SEQ));
	assert_int_equal(saas__nftnl_reply(d.b, d.n, SEQ, &a), -EPROTO);
	assert_false(a.found);
}

#define NEWRULE ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWRULE)

/* A rule of a dump for seq, its user data as given (udlen bytes; none when 0). */
static void newrule(struct dgram *d, uint32_t seq, const uint8_t *ud, size_t udlen)
{
	struct nfgenmsg g = { .nfgen_family = NFPROTO_INET, .version = NFNETLINK_V0 };
	size_t m = msg_begin(d, NEWRULE, seq);

	put(d, &g, sizeof(g));
	attr(d, NFTA_RULE_TABLE, "aas_guard", 10);
	attr(d, NFTA_RULE_CHAIN, "forward", 8);
	if (udlen)
		attr(d, NFTA_RULE_USERDATA, ud, udlen);
	msg_end(d, m);
}

/* A dump's rules: those whose comment is the one asked for are counted, whatever else their user data holds. */
static void test_rules(void **state)
{
	/* As nft writes them: a comment entry (type 0, its length with the NUL), then others. */
	static const uint8_t marked[] = { 0, 5, 'a', 'a', 's', '1', 0, 7, 2, 0, 1 };
	static const uint8_t other[] = { 0, 5, 'a', 'a', 's', '2', 0 };
	static const uint8_t prefix[] = { 0, 4, 'a', 'a', 's', 0 };
	static const uint8_t after[] = { 1, 1, 9, 0, 5, 'a', 'a', 's', '1', 0 };
	static const uint8_t past[] = { 0, 9, 'a', 'a', 's', '1', 0 };
	static const uint8_t half[] = { 0, 5, 'a', 'a', 's', '1', 0, 3 };
	struct saas__nftnl_answer a = { .want = NEWRULE, .comment = "aas1" };
	struct dgram d = { .n = 0 };

	(void)state;
	newrule(&d, SEQ, marked, sizeof(marked));
	newrule(&d, SEQ, other, sizeof(other));
	newrule(&d, SEQ, NULL, 0);
	newrule(&d, SEQ, prefix, sizeof(prefix));
	newrule(&d, SEQ + 1, marked, sizeof(marked)); /* another request's */
	assert_int_equal(saas__nftnl_reply(d.b, d.n, SEQ, &a), 0);
	assert_true(a.found);
	assert_int_equal(a.marked, 1);
	/* The next datagram: one more, then the dump's end. */
	d.n = 0;
	newrule(&d, SEQ, after, sizeof(after));
	msg_end(&d, msg_begin(&d, NLMSG_DONE, SEQ));
	assert_int_equal(saas__nftnl_reply(d.b, d.n, SEQ, &a), 1);
	assert_int_equal(a.marked, 2);
	/* User data whose entry runs past its end, or stops inside its header, does not read. */
	d.n = 0;
	newrule(&d, SEQ, past, sizeof(past));
	assert_int_equal(saas__nftnl_reply(d.b, d.n, SEQ, &a), -EPROTO);
	d.n = 0;
	newrule(&d, SEQ, half, sizeof(half));
	assert_int_equal(saas__nftnl_reply(d.b, d.n, SEQ, &a), -EPROTO);
	assert_int_equal(a.marked, 2);
}

/* Every length that lies: each cut of a good datagram, and lengths past the end. */
static void test_lengths(void **state)
{
	struct dgram d = { .n = 0 }, cut;
	int64_t packets;
	bool found;
	uint32_t big = 4096;
	uint16_t big16 = 1000;

	(void)state;
	newobj(&d, SEQ, NFT_OBJECT_COUNTER, 42);
	error_msg(&d, SEQ, 0);
	for (size_t n = 1; n < d.n; n++) {
		cut = d;
		cut.n = n;
		int rc = reply(&cut, &packets, &found);
		/* Whole messages read as before; a cut one never reads as an answer. */
		assert_true(rc == -EPROTO || rc == 0);
		assert_true(!found || packets == 42);
	}
	/* A message longer than the datagram. */
	cut = d;
	memcpy(cut.b, &big, sizeof(big));
	assert_int_equal(reply(&cut, &packets, &found), -EPROTO);
	/* An attribute longer than its message (the first attribute after the nfgenmsg). */
	cut = d;
	memcpy(cut.b + NLMSG_HDRLEN + sizeof(struct nfgenmsg), &big16, sizeof(big16));
	assert_int_equal(reply(&cut, &packets, &found), -EPROTO);
	/* A header shorter than a header. */
	cut = d;
	big = 4;
	memcpy(cut.b, &big, sizeof(big));
	assert_int_equal(reply(&cut, &packets, &found), -EPROTO);
}

/* The real thing, in a network namespace of the test's own: a counter as nft made it. */
static void test_kernel(void **state)
{
	int64_t packets = -1;
	char name[NFTNL_NAME_MAX + 2];
	unsigned int marked = 99;
	int rc;

	(void)state;
	if (geteuid() != 0 || unshare(CLONE_NEWNET) != 0) {
		print_message("skipped: reading a counter from the kernel needs root (a network namespace of its own)\n");
		skip();
	}
	assert_int_equal(saas__nftnl_counter("aas_egress_t", "c_1", &packets), -ENOENT);
	assert_int_equal(system("nft add table inet aas_egress_t && nft add counter inet aas_egress_t c_1 "
	                        "'{ packets 12345 bytes 678 }' && nft add counter inet aas_egress_t c_2"),
	                 0);
	assert_int_equal(saas__nftnl_counter("aas_egress_t", "c_1", &packets), 0);
	assert_int_equal(packets, 12345);
	assert_int_equal(saas__nftnl_counter("aas_egress_t", "c_2", &packets), 0);
	assert_int_equal(packets, 0);
	assert_int_equal(saas__nftnl_counter("aas_egress_t", "c_3", &packets), -ENOENT);
	memset(name, 'c', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	assert_int_equal(saas__nftnl_counter("aas_egress_t", name, &packets), -EINVAL);
	/* Chains: the table's own, one it has not, a table that is not. */
	assert_int_equal(saas__nftnl_chain("aas_egress_t", "output"), -ENOENT);
	assert_int_equal(system("nft add chain inet aas_egress_t output"), 0);
	assert_int_equal(saas__nftnl_chain("aas_egress_t", "output"), 0);
	assert_int_equal(saas__nftnl_chain("aas_egress_u", "output"), -ENOENT);
	assert_int_equal(saas__nftnl_chain("aas_egress_t", name), -EINVAL);
	/* Rules with a comment, as the guard marks its own: counted by it, in this table only. */
	assert_int_equal(saas__nftnl_rules_marked("aas_guard_t", "aas-guard m1", &marked), 0);
	assert_int_equal(marked, 0);
	assert_int_equal(system("nft add table inet aas_guard_t && nft add chain inet aas_guard_t forward && "
	                        "nft add rule inet aas_guard_t forward ip daddr 10.0.0.0/8 drop comment '\"aas-guard m1\"' && "
	                        "nft add rule inet aas_guard_t forward ip6 daddr fc00::/7 drop comment '\"aas-guard m1\"' && "
	                        "nft add rule inet aas_guard_t forward counter comment '\"aas-guard m2\"' && "
	                        "nft add rule inet aas_guard_t forward counter && "
	                        "nft add rule inet aas_egress_t output counter comment '\"aas-guard m1\"'"),
	                 0);
	assert_int_equal(saas__nftnl_rules_marked("aas_guard_t", "aas-guard m1", &marked), 0);
	assert_int_equal(marked, 2);
	assert_int_equal(saas__nftnl_rules_marked("aas_guard_t", "aas-guard m2", &marked), 0);
	assert_int_equal(marked, 1);
	assert_int_equal(saas__nftnl_rules_marked("aas_guard_t", "aas-guard m", &marked), 0);
	assert_int_equal(marked, 0);
	/* A table that is not there has none. */
	marked = 99;
	rc = saas__nftnl_rules_marked("aas_guard_u", "aas-guard m1", &marked);
	assert_true(rc == 0 || rc == -ENOENT);
	assert_true(rc != 0 || marked == 0);
	assert_int_equal(saas__nftnl_rules_marked(name, "aas-guard m1", &marked), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_answer),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_chain),
		cmocka_unit_test(test_rules),
		cmocka_unit_test(test_lengths),
		cmocka_unit_test(test_kernel),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
