/*
 * Internal: one counter of this engine's egress table, whether one of its
 * chains is there, or how many of a table's rules carry a comment (the
 * guard's check), asked of the kernel over netfilter's netlink
 * (NFT_MSG_GETOBJ, NFT_MSG_GETCHAIN, a dump of NFT_MSG_GETRULE), not
 * through nft.
 * nft reads the whole ruleset into its cache before it answers anything, so
 * `nft list counter` costs what the table holds (every VM's chains and
 * rules: tens to hundreds of milliseconds at hundreds of VMs), and a list
 * of sandboxes with their live counts paid that once a sandbox. This asks
 * for the one object. The kernel answers it only to CAP_NET_ADMIN: an
 * engine that loads its rules through the aas-nft helper reads through it.
 *
 * The reply's reader is pure (no sockets, no allocation) and reads its
 * buffer as untrusted: every length is checked against what is left
 * (tests/unit/test_nftnl.c, tests/fuzz/fuzz_nftnl.c).
 */
#ifndef SAAS_DRIVER_LIBVIRT_NFTNL_H
#define SAAS_DRIVER_LIBVIRT_NFTNL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How long a read waits for the kernel's answer (it comes at once; a bound all the same). */
#define NFTNL_TIMEOUT_MS 2000
/* Longest table or counter name asked for (nft's own limit is 256 bytes with the NUL). */
#define NFTNL_NAME_MAX 255

/*
 * Counter `name` of inet table `table`: its packets into *packets. 0, or
 * -errno: -EPERM without CAP_NET_ADMIN, -ENOENT when there is no such
 * table or counter, -ETIMEDOUT, -EPROTO for an answer that does not read
 * as one, -EINVAL for a name too long. Sets no library error: the caller
 * says what it was reading.
 */
int saas__nftnl_counter(const char *table, const char *name, int64_t *packets);

/* Whether inet table `table` has chain `chain`: 0 it has, -ENOENT it (or the table) has not, else as above. */
int saas__nftnl_chain(const char *table, const char *chain);

/*
 * How many rules of inet table `table` carry comment `comment` (as nft
 * stores it: the rule's user data), into *count: 0 for a table that has
 * none or is not there. 0, or -errno as above. One dump of that table's
 * rules, where `nft list table` reads every table first and prints them.
 */
int saas__nftnl_rules_marked(const char *table, const char *comment, unsigned int *count);

/* The kernel's answer to one request, as read so far. */
struct saas__nftnl_answer {
	uint16_t want;       /* the message type that answers (NFT_MSG_NEWOBJ, _NEWCHAIN or _NEWRULE, with the subsystem) */
	bool found;          /* one came */
	int64_t packets;     /* a counter object's */
	const char *comment; /* rules: the comment counted in marked */
	unsigned int marked; /* rules: how many carried it */
};

/*
 * One datagram of the kernel's answer to request seq (len bytes of buf):
 * 1 when it ended the answer (its ack, an error, or a done), 0 when more is
 * to come; -errno for an error the kernel sent or -EPROTO for bytes that do
 * not read. Messages of other sequence numbers or types are skipped. One of
 * a->want's type sets a->found (and, a counter object, a->packets; a rule
 * whose comment is a->comment, a->marked one more).
 */
int saas__nftnl_reply(const uint8_t *buf, size_t len, uint32_t seq, struct saas__nftnl_answer *a);

#endif
