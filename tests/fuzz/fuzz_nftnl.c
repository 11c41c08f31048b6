/*
 * The reader of the kernel's answer to an egress counter's or chain's
 * request, or to a dump of a table's rules counted by their comment
 * (lib/driver/libvirt/nftnl.c). The kernel is no tenant, but the reader
 * takes its bytes as untrusted all the same: any datagram, for the request
 * numbered by its first four bytes (so that a seed's messages can be the
 * request's or another's).
 *
 * Oracle: nothing read outside the datagram (the sanitizers); the result is
 * 1, 0, -EPROTO or a kernel's errno (-1 to -4095); a counter found is never
 * negative, and none is found without the reader saying so; no rule is
 * counted without one found, nor more than the datagram's messages.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>

#include "driver/libvirt/nftnl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t seq = 0;
	uint8_t *copy;
	int rc;

	if (size >= sizeof(seq)) {
		memcpy(&seq, data, sizeof(seq));
		data += sizeof(seq);
		size -= sizeof(seq);
	}
	/* Its own allocation of exactly size bytes: a read past it is the sanitizer's to see. */
	if (!(copy = malloc(size ? size : 1)))
		return 0;
	memcpy(copy, data, size);
	/* Read as a counter's answer, then as a chain's, then as a dump's rules counted by their comment. */
	for (int i = 0; i < 2; i++) {
		struct saas__nftnl_answer a = { .want = (uint16_t)((NFNL_SUBSYS_NFTABLES << 8) |
		                                                   (i ? NFT_MSG_NEWCHAIN : NFT_MSG_NEWOBJ)),
		                                .packets = -1 };
		rc = saas__nftnl_reply(copy, size, seq, &a);
		if (rc > 1 || rc < -4095)
			abort();
		if ((i == 0 && a.found != (a.packets != -1)) || (i == 1 && a.packets != -1) || (a.found && a.packets < -1))
			abort();
	}
	{
		struct saas__nftnl_answer a = { .want = (uint16_t)((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWRULE),
		                                .packets = -1, .comment = "aas-guard m" };
		rc = saas__nftnl_reply(copy, size, seq, &a);
		if (rc > 1 || rc < -4095 || a.packets != -1)
			abort();
		/* A rule is counted at most once, and each takes a message's header at least. */
		if ((!a.found && a.marked) || a.marked > size / 16)
			abort();
	}
	free(copy);
	return 0;
}
