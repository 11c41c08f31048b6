/*
 * A counter, a chain or a table's marked rules asked of the kernel over
 * netfilter's netlink: one get request (NFT_MSG_GETOBJ, NFT_MSG_GETCHAIN,
 * a dump of NFT_MSG_GETRULE), its answer (the object, then the ack it
 * asked for; a dump's rules, then its end) read here. See nftnl.h for why this is not nft.
 */
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include "driver/libvirt/nftnl.h"
#include "util/util.h"

#define NEWOBJ ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWOBJ)
#define NEWCHAIN ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWCHAIN)
#define NEWRULE ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWRULE)
/* libnftnl's user data of a rule (its udata.h): entries of a type byte, a length byte, the value; a comment, NUL ended. */
#define UDATA_RULE_COMMENT 0

/* A netlink attribute read from untrusted bytes. */
struct attr {
	uint16_t type;
	const uint8_t *data;
	size_t len;  /* the payload's */
	size_t step; /* to the next attribute: aligned, never past the end */
};

/* The attribute at the start of left bytes at p: false when it does not fit in them. */
static bool attr_read(const uint8_t *p, size_t left, struct attr *a)
{
	struct nlattr h;

	if (left < NLA_HDRLEN)
		return false;
	memcpy(&h, p, sizeof(h));
	if (h.nla_len < NLA_HDRLEN || h.nla_len > left)
		return false;
	a->type = h.nla_type & NLA_TYPE_MASK;
	a->data = p + NLA_HDRLEN;
	a->len = h.nla_len - NLA_HDRLEN;
	a->step = (size_t)NLA_ALIGN(h.nla_len) < left ? (size_t)NLA_ALIGN(h.nla_len) : left;
	return true;
}

/* The attribute of type want among len bytes of attributes at p: false when absent or unreadable. */
static bool attr_find(const uint8_t *p, size_t len, uint16_t want, struct attr *out)
{
	for (size_t off = 0; off < len; off += out->step) {
		if (!attr_read(p + off, len - off, out))
			return false;
		if (out->type == want)
			return true;
	}
	return false;
}

/*
 * A rule's attributes (len bytes at p): 1 when its user data has the
 * comment, 0 when it has none or another, -EPROTO when its user data does
 * not read (an entry past its end).
 */
static int rule_marked(const uint8_t *p, size_t len, const char *comment, struct attr *ud)
{
	size_t want = comment ? strlen(comment) + 1 : 0;
	int marked = 0;

	if (!attr_find(p, len, NFTA_RULE_USERDATA, ud))
		return 0;
	for (size_t off = 0; off < ud->len;) {
		uint8_t type, n;
		if (ud->len - off < 2)
			return -EPROTO;
		type = ud->data[off];
		n = ud->data[off + 1];
		if ((size_t)n > ud->len - off - 2)
			return -EPROTO;
		if (type == UDATA_RULE_COMMENT && want && n == want && memcmp(ud->data + off + 2, comment, want) == 0)
			marked = 1;
		off += 2 + (size_t)n;
	}
	return marked;
}

int saas__nftnl_reply(const uint8_t *buf, size_t len, uint32_t seq, struct saas__nftnl_answer *a)
{
	size_t off = 0;

	while (off < len) {
		struct nlmsghdr h;
		const uint8_t *body;
		size_t body_len, step;

		if (len - off < NLMSG_HDRLEN)
			return -EPROTO;
		memcpy(&h, buf + off, sizeof(h));
		if (h.nlmsg_len < NLMSG_HDRLEN || h.nlmsg_len > len - off)
			return -EPROTO;
		body = buf + off + NLMSG_HDRLEN;
		body_len = h.nlmsg_len - NLMSG_HDRLEN;
		step = (size_t)NLMSG_ALIGN(h.nlmsg_len) < len - off ? (size_t)NLMSG_ALIGN(h.nlmsg_len) : len - off;
		off += step;
		if (h.nlmsg_seq != seq)
			continue;
		if (h.nlmsg_type == NLMSG_DONE)
			return 1;
		if (h.nlmsg_type == NLMSG_ERROR) {
			struct nlmsgerr e;
			if (body_len < sizeof(e))
				return -EPROTO;
			memcpy(&e, body, sizeof(e));
			if (e.error == 0)
				return 1;
			/* A kernel's errno is small and negative; anything else is no answer. */
			return e.error < 0 && e.error > -4096 ? e.error : -EPROTO;
		}
		if (h.nlmsg_type != a->want)
			continue;
		if (body_len < sizeof(struct nfgenmsg))
			return -EPROTO;
		body += sizeof(struct nfgenmsg);
		body_len -= sizeof(struct nfgenmsg);
		if (a->want == NEWOBJ) {
			struct attr type, data, pk;
			uint32_t be32;
			uint64_t be64;
			if (!attr_find(body, body_len, NFTA_OBJ_TYPE, &type) || type.len != sizeof(be32))
				return -EPROTO;
			memcpy(&be32, type.data, sizeof(be32));
			if (be32toh(be32) != NFT_OBJECT_COUNTER || !attr_find(body, body_len, NFTA_OBJ_DATA, &data) ||
			    !attr_find(data.data, data.len, NFTA_COUNTER_PACKETS, &pk) || pk.len != sizeof(be64))
				return -EPROTO;
			memcpy(&be64, pk.data, sizeof(be64));
			a->packets = (int64_t)(be64toh(be64) & INT64_MAX);
		}
		if (a->want == NEWRULE) {
			struct attr ud;
			int rc = rule_marked(body, body_len, a->comment, &ud);
			if (rc < 0)
				return rc;
			a->marked += (unsigned int)rc;
		}
		a->found = true;
	}
	return 0;
}

/* Append attribute type with len bytes of data to the request in buf (used bytes *n of size). */
static bool put_attr(uint8_t *buf, size_t size, size_t *n, uint16_t type, const void *data, size_t len)
{
	struct nlattr h;

	if (len > UINT16_MAX - NLA_HDRLEN || *n + NLA_ALIGN(NLA_HDRLEN + len) > size)
		return false;
	h.nla_len = (uint16_t)(NLA_HDRLEN + len);
	h.nla_type = type;
	memcpy(buf + *n, &h, sizeof(h));
	memcpy(buf + *n + NLA_HDRLEN, data, len);
	memset(buf + *n + NLA_HDRLEN + len, 0, NLA_ALIGN(NLA_HDRLEN + len) - (NLA_HDRLEN + len));
	*n += NLA_ALIGN(NLA_HDRLEN + len);
	return true;
}

/* A string attribute of a request: its type and text. */
struct str_attr {
	uint16_t type;
	const char *text;
};

/*
 * One get request of message msg for the strings given (and an object
 * type, when not 0), its answer read into *a (a->want set by the caller):
 * 0 with a->found, or -errno (nftnl.h). A dump asks for every one that
 * matches: 0 however many came.
 */
static int ask(uint16_t msg, const struct str_attr *strs, size_t n, uint32_t obj_type, bool dump,
               struct saas__nftnl_answer *a)
{
	_Alignas(struct nlmsghdr) uint8_t req[NLMSG_HDRLEN + 3 * NLA_ALIGN(NLA_HDRLEN + NFTNL_NAME_MAX + 1) + 64];
	_Alignas(struct nlmsghdr) uint8_t ans[8192];
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	struct nlmsghdr h;
	struct nfgenmsg g = { .nfgen_family = NFPROTO_INET, .version = NFNETLINK_V0, .res_id = 0 };
	struct timespec t0;
	uint32_t type = htobe32(obj_type), seq;
	size_t len = NLMSG_HDRLEN;
	int fd, rc = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	seq = (uint32_t)t0.tv_nsec;

	memcpy(req + len, &g, sizeof(g));
	len += NLMSG_ALIGN(sizeof(g));
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(strs[i].text);
		if (l > NFTNL_NAME_MAX || !put_attr(req, sizeof(req), &len, strs[i].type, strs[i].text, l + 1))
			return -EINVAL;
	}
	if (obj_type && !put_attr(req, sizeof(req), &len, NFTA_OBJ_TYPE, &type, sizeof(type)))
		return -EINVAL;
	memset(&h, 0, sizeof(h));
	h.nlmsg_len = (uint32_t)len;
	h.nlmsg_type = (uint16_t)((NFNL_SUBSYS_NFTABLES << 8) | msg);
	h.nlmsg_flags = (uint16_t)(NLM_F_REQUEST | NLM_F_ACK | (dump ? NLM_F_DUMP : 0));
	h.nlmsg_seq = seq;
	memcpy(req, &h, sizeof(h));
	if ((fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER)) < 0)
		return -errno;
	if (sendto(fd, req, len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
		rc = -errno;
	while (rc == 0) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		struct sockaddr_nl from;
		socklen_t from_len = sizeof(from);
		int64_t left = NFTNL_TIMEOUT_MS - saas__ms_since(&t0);
		ssize_t got;

		if (left <= 0 || (rc = poll(&p, 1, (int)left)) == 0) {
			rc = -ETIMEDOUT;
			break;
		}
		if (rc < 0) {
			rc = errno == EINTR ? 0 : -errno;
			continue;
		}
		if ((got = recvfrom(fd, ans, sizeof(ans), MSG_TRUNC, (struct sockaddr *)&from, &from_len)) < 0) {
			rc = errno == EINTR ? 0 : -errno;
			continue;
		}
		/* A datagram larger than the buffer (a dump's): its tail is lost, so the answer is. */
		if ((size_t)got > sizeof(ans)) {
			rc = -EMSGSIZE;
			break;
		}
		/* Only the kernel's own datagrams (port 0) are an answer. */
		if (from_len < sizeof(from) || from.nl_family != AF_NETLINK || from.nl_pid != 0) {
			rc = 0;
			continue;
		}
		rc = saas__nftnl_reply(ans, (size_t)got, seq, a);
	}
	close(fd);
	if (rc < 0)
		return rc;
	return a->found || dump ? 0 : -EPROTO;
}

int saas__nftnl_counter(const char *table, const char *name, int64_t *packets)
{
	const struct str_attr strs[] = { { NFTA_OBJ_TABLE, table }, { NFTA_OBJ_NAME, name } };
	struct saas__nftnl_answer a = { .want = NEWOBJ };
	int rc;

	if ((rc = ask(NFT_MSG_GETOBJ, strs, 2, NFT_OBJECT_COUNTER, false, &a)) == 0)
		*packets = a.packets;
	return rc;
}

int saas__nftnl_chain(const char *table, const char *chain)
{
	const struct str_attr strs[] = { { NFTA_CHAIN_TABLE, table }, { NFTA_CHAIN_NAME, chain } };
	struct saas__nftnl_answer a = { .want = NEWCHAIN };

	return ask(NFT_MSG_GETCHAIN, strs, 2, 0, false, &a);
}

int saas__nftnl_rules_marked(const char *table, const char *comment, unsigned int *count)
{
	const struct str_attr strs[] = { { NFTA_RULE_TABLE, table } };
	struct saas__nftnl_answer a = { .want = NEWRULE, .comment = comment };
	int rc;

	if ((rc = ask(NFT_MSG_GETRULE, strs, 1, 0, true, &a)) == 0)
		*count = a.marked;
	return rc;
}
