/*
 * The network policy and the guard. Slirp's connections are QEMU's own
 * sockets on the host, so an internet guest can reach whatever the host can:
 * its loopback services (the API, the database, libvirt), every host address,
 * and the networks behind it. QEMU therefore runs under GUEST_GROUP, and the
 * nftables table GUARD_TABLE rejects that group's new connections to
 * host-local addresses and to the ranges below; replies on connections made
 * to QEMU (the SSH forward) pass as established, and DNS passes to the host's
 * resolvers only (slirp forwards the guest's queries there).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver/libvirt/libvirt_driver.h"
#include "util/spawn.h"

/* What the guard reads of /etc/resolv.conf at most: far more than any real one. */
#define RESOLV_CONF_MAX (64 << 10)

/* Never the internet: loopback, private, shared, link-local, multicast and reserved. */
static const char *const guard_blocked_v4[] = {
	"0.0.0.0/8",      /* "this network": a connect to 0.0.0.0 lands on the host */
	"10.0.0.0/8",     /* private (RFC 1918) */
	"100.64.0.0/10",  /* carrier-grade NAT (RFC 6598): the provider's side of the host */
	"127.0.0.0/8",    /* loopback */
	"169.254.0.0/16", /* link-local, and cloud metadata services (169.254.169.254) */
	"172.16.0.0/12",  /* private (RFC 1918) */
	"192.168.0.0/16", /* private (RFC 1918) */
	"224.0.0.0/4",    /* multicast: looped back to the host's own listeners */
	"240.0.0.0/4",    /* reserved, and the limited broadcast */
};
static const char *const guard_blocked_v6[] = {
	"::/128",         /* unspecified: a connect to :: lands on the host */
	"::1/128",        /* loopback */
	"fc00::/7",       /* unique local (private) */
	"fe80::/10",      /* link-local */
	"fec0::/10",      /* site-local (deprecated, still routed by some) */
	"ff00::/8",       /* multicast */
};

bool saas__lv_guest_gid(gid_t *gid)
{
	struct group gr, *res = NULL;
	char buf[4096];

	if (getgrnam_r(GUEST_GROUP, &gr, buf, sizeof(buf), &res) != 0 || !res)
		return false;
	if (gid)
		*gid = res->gr_gid;
	return true;
}

/* The nameservers of a resolv.conf text, as nft set elements: only well-formed addresses reach the ruleset. */
static void resolvers(const char *resolv_conf, saas__buf *v4, saas__buf *v6)
{
	char line[512], addr[64];
	unsigned char bin[sizeof(struct in6_addr)];

	for (const char *p = resolv_conf; p && *p;) {
		size_t n = strcspn(p, "\n");
		char *pct;
		snprintf(line, sizeof(line), "%.*s", (int)(n < sizeof(line) - 1 ? n : sizeof(line) - 1), p);
		p += n + (p[n] == '\n');
		if (sscanf(line, " nameserver %63s", addr) != 1)
			continue;
		if ((pct = strchr(addr, '%')))
			*pct = '\0';
		if (inet_pton(AF_INET, addr, bin) == 1)
			saas__buf_printf(v4, "%s%s", v4->len ? ", " : "", addr);
		else if (inet_pton(AF_INET6, addr, bin) == 1)
			saas__buf_printf(v6, "%s%s", v6->len ? ", " : "", addr);
	}
}

char *saas__lv_guard_ruleset(unsigned int gid, const char *resolv_conf)
{
	saas__buf b = SAAS__BUF_INIT, r4 = SAAS__BUF_INIT, r6 = SAAS__BUF_INIT;

	resolvers(resolv_conf, &r4, &r6);
	/* Created, deleted and made again in one transaction: an atomic replace, whether it existed or not. */
	saas__buf_puts(&b, "# Written by libsaas (the libvirt driver's guard); see docs/sandboxes.md.\n"
	                   "table inet " GUARD_TABLE " {}\ndelete table inet " GUARD_TABLE "\n"
	                   "table inet " GUARD_TABLE " {\n"
	                   "\tset blocked4 {\n\t\ttype ipv4_addr; flags interval;\n\t\telements = { ");
	for (size_t i = 0; i < sizeof(guard_blocked_v4) / sizeof(guard_blocked_v4[0]); i++)
		saas__buf_printf(&b, "%s%s", i ? ", " : "", guard_blocked_v4[i]);
	saas__buf_puts(&b, " }\n\t}\n\tset blocked6 {\n\t\ttype ipv6_addr; flags interval;\n\t\telements = { ");
	for (size_t i = 0; i < sizeof(guard_blocked_v6) / sizeof(guard_blocked_v6[0]); i++)
		saas__buf_printf(&b, "%s%s", i ? ", " : "", guard_blocked_v6[i]);
	saas__buf_puts(&b, " }\n\t}\n\tset resolvers4 {\n\t\ttype ipv4_addr;\n");
	if (r4.len)
		saas__buf_printf(&b, "\t\telements = { %s }\n", r4.data);
	saas__buf_puts(&b, "\t}\n\tset resolvers6 {\n\t\ttype ipv6_addr;\n");
	if (r6.len)
		saas__buf_printf(&b, "\t\telements = { %s }\n", r6.data);
	/*
	 * Only packets of QEMU's sockets go to the guest chain: the host's own
	 * traffic, and packets of no socket (kernel replies), are never touched.
	 */
	saas__buf_printf(&b,
	                 "\t}\n"
	                 "\tchain output {\n"
	                 "\t\ttype filter hook output priority filter; policy accept;\n"
	                 "\t\tmeta skgid %u jump guest\n"
	                 "\t}\n"
	                 "\tchain guest {\n"
	                 "\t\tct state established,related accept\n"
	                 "\t\tip daddr @resolvers4 meta l4proto { tcp, udp } th dport 53 accept\n"
	                 "\t\tip6 daddr @resolvers6 meta l4proto { tcp, udp } th dport 53 accept\n"
	                 "\t\tfib daddr type { local, broadcast, anycast, multicast } counter reject with icmpx "
	                 "type admin-prohibited\n"
	                 "\t\tip daddr @blocked4 counter reject with icmpx type admin-prohibited\n"
	                 "\t\tip6 daddr @blocked6 counter reject with icmpx type admin-prohibited\n"
	                 "\t}\n"
	                 "}\n",
	                 gid);
	saas__buf_free(&r4);
	saas__buf_free(&r6);
	return saas__buf_detach(&b, NULL);
}

/*
 * Install the guard, replacing any older one (every engine on the host writes
 * the same table). Sets d->guard, or d->guard_why. Never fails the open: an
 * engine without a guard still runs isolated guests.
 */
static int guard_install(struct drv *d, bool embedded)
{
	char *path = NULL, *rules = NULL, *out = NULL, *resolv_conf = NULL;
	const char *argv[] = { "nft", "-f", NULL, NULL };
	gid_t gid = 0;
	FILE *f;
	bool written = false;
	int rc = SAAS_OK;

	d->guard = false;
	if (geteuid() != 0) {
		snprintf(d->guard_why, sizeof(d->guard_why), "the engine does not run as root, so it cannot "
		         "install the nftables guard nor run QEMU under the group " GUEST_GROUP);
		goto out;
	}
	if (!embedded) {
		snprintf(d->guard_why, sizeof(d->guard_why), "a custom libvirt URI is set: its qemu.conf, not the "
		         "engine, decides QEMU's group, so the guard cannot be relied on");
		goto out;
	}
	if (!saas__lv_guest_gid(&gid)) {
		snprintf(d->guard_why, sizeof(d->guard_why), "the group " GUEST_GROUP " does not exist "
		         "(create it: groupadd --system " GUEST_GROUP ")");
		goto out;
	}
	/* slirp forwards guest DNS to the resolvers of /etc/resolv.conf (none when it cannot be read). */
	resolv_conf = saas__lv_read_file("/etc/resolv.conf", RESOLV_CONF_MAX);
	if (!(path = saas__lv_path_join(d->dir, "guard.nft")) ||
	    !(rules = saas__lv_guard_ruleset((unsigned int)gid, resolv_conf))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	if ((f = fopen(path, "we"))) {
		written = fputs(rules, f) >= 0;
		written = fclose(f) == 0 && written;
	}
	if (!written) {
		snprintf(d->guard_why, sizeof(d->guard_why), "cannot write %s: %s", path, strerror(errno));
		goto out;
	}
	argv[2] = path;
	if (saas__run(argv, &out) < 0) {
		snprintf(d->guard_why, sizeof(d->guard_why), "installing the nftables guard failed: %s",
		         saas_error_last()->message);
		saas__error_clear();
		goto out;
	}
	d->guard = true;
out:
	free(path);
	free(rules);
	free(out);
	free(resolv_conf);
	return rc;
}

/* Does the host have a default route (IPv4 or IPv6)? */
static bool default_route(void)
{
	char line[512];
	bool found = false;
	FILE *f;

	if ((f = fopen("/proc/net/route", "re"))) {
		unsigned long dst, flags, mask;
		char iface[64];
		/* Iface Destination Gateway Flags RefCnt Use Metric Mask ... */
		while (!found && fgets(line, sizeof(line), f))
			if (sscanf(line, "%63s %lx %*x %lx %*d %*d %*d %lx", iface, &dst, &flags, &mask) == 4)
				found = dst == 0 && mask == 0 && (flags & 0x1) && !(flags & 0x200);
		fclose(f);
	}
	if (!found && (f = fopen("/proc/net/ipv6_route", "re"))) {
		char dst[64];
		unsigned int plen;
		unsigned long flags;
		/* dst plen src src_plen nexthop metric refcnt use flags iface; RTF_UP 0x1, RTF_REJECT 0x200 */
		while (!found && fgets(line, sizeof(line), f))
			if (sscanf(line, "%63s %x %*s %*x %*s %*x %*x %*x %lx", dst, &plen, &flags) == 3)
				found = plen == 0 && strspn(dst, "0") == 32 && (flags & 0x1) && !(flags & 0x200);
		fclose(f);
	}
	return found;
}

int saas__lv_network_setup(struct drv *d, bool embedded)
{
	int rc;

	if ((rc = guard_install(d, embedded)) < 0)
		return rc;
	/* Asked for by name, internet without the guard is refused, never given unguarded. */
	if (d->network == NET_INTERNET && !d->guard)
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER, 0, "network=internet, but %s", d->guard_why);
	if (d->network == NET_INTERNET) {
		d->internet = true;
		saas__lv_log(d, SAAS_LOG_INFO, "network: guests get the internet by default (network=internet; guard "
		             "table inet " GUARD_TABLE ")");
	} else if (d->network == NET_ISOLATED) {
		saas__lv_log(d, SAAS_LOG_INFO, "network: guests are isolated by default (network=isolated)%s%s",
		             d->guard ? "" : "; internet is refused: ", d->guard ? "" : d->guard_why);
	} else if (!d->guard) {
		saas__lv_log(d, SAAS_LOG_INFO, "network: guests are isolated; internet is refused: %s", d->guard_why);
	} else if (!default_route()) {
		saas__lv_log(d, SAAS_LOG_INFO, "network: guests are isolated by default: the host has no default route");
	} else {
		d->internet = true;
		saas__lv_log(d, SAAS_LOG_INFO, "network: guests get the internet by default (guard table inet "
		             GUARD_TABLE ")");
	}
	return SAAS_OK;
}
