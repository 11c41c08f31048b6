/*
 * VM hosts: the machines running libvirtd that sandboxes are placed on when
 * one machine is not enough (docs/operations.md, "Many VM hosts").
 *
 * The registry is the store's, shared by every engine on one database. Each
 * engine opens its driver once per host, with the host's URI and address
 * after its own driver configuration, and routes every call for a sandbox by
 * its row's host_id (saas__vm_driver). Placement is the store's
 * sandbox_place: one transaction, so two engines never overfill a host.
 *
 * Liveness: every engine asks every host what it has once a heartbeat
 * (host_info, then host_seen, whose last_seen_ms only moves forward). A host
 * that no engine reached within the grace period is marked lost by one engine
 * (under the lease "host:<id>", by a conditional state change), which closes
 * its sandboxes billed up to last_seen_ms: the last moment anyone knew they
 * ran. When a lost host answers again, the lease holder destroys every VM on
 * it that no live row owns, and it is active again. While a lost host still
 * has sandboxes to close, nobody records it as seen, so that what they are
 * billed cannot run past the moment it was lost.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/core.h"

SAAS_EXTERN(const char *) saas_host_state_name(int state)
{
	switch (state) {
	case SAAS_HOST_ACTIVE: return "active";
	case SAAS_HOST_DRAINING: return "draining";
	case SAAS_HOST_LOST: return "lost";
	}
	return "unknown";
}

_Static_assert((int)SAAS_HOST_ACTIVE == (int)SAAS_STORE_HOST_ACTIVE &&
                       (int)SAAS_HOST_DRAINING == (int)SAAS_STORE_HOST_DRAINING &&
                       (int)SAAS_HOST_LOST == (int)SAAS_STORE_HOST_LOST,
               "the public host states are the store's");

/* ---- validation ---- */

/* One DNS label, lower case: it names the host in logs, metrics labels and commands. */
static bool valid_name(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > SAAS_STORE_HOST_NAME_MAX || s[0] == '-' || s[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

/*
 * The libvirt transports an engine may reach a host by. ssh and tls
 * authenticate both ends; unix reaches a libvirtd on the engine's own
 * machine (the socket's permissions guard it), by its socket's path only
 * (local_socket). tcp is neither encrypted nor authenticated: only when the
 * caller says so (tests).
 */

static int hexdigit(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : (tolower((unsigned char)c) - 'a' + 10);
}

/* One %XX-decoded query field (libvirt decodes them so) into out; false if it does not fit or is malformed. */
static bool query_decode(char *out, size_t size, const char *s, size_t len)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		int c = (unsigned char)s[i];

		if (c == '%') {
			if (len - i < 3 || !isxdigit((unsigned char)s[i + 1]) || !isxdigit((unsigned char)s[i + 2]))
				return false;
			c = hexdigit(s[i + 1]) * 16 + hexdigit(s[i + 2]);
			i += 2;
		}
		if (n + 1 >= size)
			return false;
		out[n++] = (char)c;
	}
	out[n] = '\0';
	return true;
}

/*
 * Does the URI's query turn off the check of who answers? libvirt's
 * no_verify=N (N not 0: the TLS server's certificate is not checked) and
 * known_hosts_verify=ignore or auto (the libssh/libssh2 transports: any host
 * key is taken, or any key not seen before) let whoever sits on the path be
 * the host, and be handed every VM.
 * libvirt splits the query at '&' and ';', decodes %XX and matches names
 * without regard to case: so does this. 1 with the field in `field`, 0 when
 * none does, -1 (`field` set) for a field this cannot read, which is refused
 * too: the engine cannot vouch for what it cannot read.
 */
static int unverified_param(const char *uri, char *field, size_t size)
{
	const char *q = strchr(uri, '?');

	if (!q)
		return 0;
	for (q++; *q; q += *q != '\0') {
		size_t len = strcspn(q, "&;");
		const char *eq = memchr(q, '=', len);
		size_t nlen = eq ? (size_t)(eq - q) : len;
		char name[64], value[64];

		snprintf(field, size, "%.*s", (int)(len > 128 ? 128 : len), q);
		/* Either name takes at most 54 bytes however it is escaped: a longer one is some other field. */
		if (!query_decode(name, sizeof(name), q, nlen)) {
			if (nlen < sizeof(name))
				return -1;
		} else if (strcasecmp(name, "no_verify") == 0 || strcasecmp(name, "known_hosts_verify") == 0) {
			if (!query_decode(value, sizeof(value), eq ? eq + 1 : "", eq ? len - nlen - 1 : 0))
				return -1;
			if (strcasecmp(name, "known_hosts_verify") == 0) {
				/* auto takes a key it has never seen (and writes it down): whoever answers first. */
				if (strcasecmp(value, "ignore") == 0 || strcasecmp(value, "auto") == 0)
					return 1;
			} else {
				/* A decimal int to libvirt: anything but a zero turns the check off (or fails there). */
				const char *v = value + (value[0] == '+' || value[0] == '-');

				if (!*v || v[strspn(v, "0")] != '\0')
					return 1;
			}
		}
		q += len;
	}
	return 0;
}

/*
 * Does a local URI name its daemon's socket (socket=/PATH)? A server's
 * process holds libvirt's embedded QEMU driver (its own sandboxes), which
 * libvirt then takes for every qemu:// URI ("Missing URI parameter
 * 'root'"), and its remote driver declines a qemu+unix:// one without a
 * socket as a URI for a driver inside the process ("no connection driver
 * available"). Only qemu+unix:///...?socket=PATH reaches the daemon whatever
 * else the process opened (libvirt 9.0's remote driver, remoteConnectOpen).
 * A socket field this cannot read is no socket.
 */
static bool local_socket(const char *uri)
{
	const char *q = strchr(uri, '?');

	for (q = q ? q + 1 : ""; *q; q += *q != '\0') {
		size_t len = strcspn(q, "&;");
		const char *eq = memchr(q, '=', len);
		size_t nlen = eq ? (size_t)(eq - q) : len;
		char name[16], value[SAAS_STORE_URI_MAX + 1];

		if (query_decode(name, sizeof(name), q, nlen) && strcmp(name, "socket") == 0)
			return eq && query_decode(value, sizeof(value), eq + 1, len - nlen - 1) && value[0] == '/';
		q += len;
	}
	return false;
}

static int check_uri(const char *uri, unsigned int flags)
{
	static const char *const schemes[] = { "qemu+ssh", "qemu+libssh", "qemu+tls", "qemu+unix", "qemu", "qemu+tcp" };
	const char *sep;
	char field[160];
	size_t n;
	int bad;

	if (!uri || !*uri)
		return saas__inval("a libvirt URI is required (e.g. qemu+ssh://root@10.0.0.2/system)");
	if (strlen(uri) > SAAS_STORE_URI_MAX)
		return saas__inval("uri is over %d bytes", SAAS_STORE_URI_MAX);
	/* It is passed on in the driver's configuration, whose options are separated by spaces and commas. */
	for (const char *p = uri; *p; p++)
		if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f || *p == '"' || *p == '\'' || *p == '\\' ||
		    *p == ',')
			return saas__inval("uri must be printable ASCII with no spaces, commas, quotes or backslashes "
			                   "(percent-encode them)");
	if (!(sep = strstr(uri, "://")) || sep == uri)
		return saas__inval("uri '%s' is not a libvirt URI (scheme://[user@]host/system)", uri);
	n = (size_t)(sep - uri);
	for (size_t i = 0; i < SAAS_ARRAY_SIZE(schemes); i++) {
		if (strlen(schemes[i]) != n || strncmp(uri, schemes[i], n) != 0)
			continue;
		if (strcmp(schemes[i], "qemu") == 0 ||
		    (strcmp(schemes[i], "qemu+unix") == 0 && !local_socket(uri)))
			return saas__inval("uri '%.*s' cannot reach a libvirtd from a server: the server's own embedded "
			                   "libvirt driver answers qemu:// in its process. Name the daemon by its socket: "
			                   "qemu+unix:///system?socket=/run/libvirt/libvirt-sock (libvirtd), or "
			                   ".../virtqemud-sock (the modular daemons)",
			                   64, uri);
		if (strcmp(schemes[i], "qemu+tcp") == 0 && !(flags & SAAS_HOST_ALLOW_TCP))
			return saas__inval("qemu+tcp:// is neither encrypted nor authenticated: anyone who reaches the port "
			                   "owns the host; use qemu+ssh:// or qemu+tls:// (qemu+tcp only for a test network, "
			                   "allowed explicitly)");
		if (flags & SAAS_HOST_ALLOW_UNVERIFIED)
			return SAAS_OK;
		if ((bad = unverified_param(uri, field, sizeof(field))) < 0)
			return saas__inval("the uri's query field '%s' cannot be read (a bad %%-escape, or too long): give "
			                   "its value plainly", field);
		if (bad > 0)
			return saas__inval("the uri's '%s' turns off the check of the host's identity: whoever sits between "
			                   "the engine and the host could pose as it and be handed every sandbox; remove it "
			                   "(install the host's certificate or key) or, on a test network only, allow it "
			                   "explicitly", field);
		return SAAS_OK;
	}
	return saas__inval("uri scheme '%.*s' is not one of qemu+ssh, qemu+libssh, qemu+tls, qemu+unix (qemu+tcp only for "
	                   "tests)",
	                   (int)(n > 32 ? 32 : n), uri);
}

static int check_address(const char *address)
{
	unsigned char buf[sizeof(struct in6_addr)];

	if (!address || !*address)
		return saas__inval("the host's address is required: the IP its guests' forwards listen on");
	if (strlen(address) <= SAAS_STORE_ADDRESS_MAX && inet_pton(AF_INET6, address, buf) == 1)
		return saas__inval("address '%s' is IPv6: the guests' SSH forwards on a VM host listen on an IPv4 "
		                   "address only (give the host's IPv4 cluster address)", address);
	if (strlen(address) > SAAS_STORE_ADDRESS_MAX || inet_pton(AF_INET, address, buf) != 1)
		return saas__inval("address '%.*s' is not an IPv4 literal (no names: an address cannot be spoofed by a "
		                   "DNS answer)", 64, address);
	return SAAS_OK;
}

static int overcommit(unsigned int *out, unsigned int given, unsigned int def, const char *what)
{
	if (given == 0)
		given = def;
	if (given < 100 || given > SAAS_HOST_OVERCOMMIT_MAX)
		return saas__inval("%s overcommit %u.%03u is out of range (0.1 to %u)", what, given / 1000, given % 1000,
		                   SAAS_HOST_OVERCOMMIT_MAX / 1000);
	*out = given;
	return SAAS_OK;
}

static int check_ref(const char *id_or_name)
{
	if (!saas__valid_text(id_or_name, SAAS_ID_MAX))
		return saas__inval("host id or name is empty, too long or not printable");
	return SAAS_OK;
}

/* ---- the public form ---- */

/* What runs on each host: sandboxes not destroyed, by host_id. */
struct usage {
	const char *host_id;       /* NULL: every host's, into `hosts` */
	saas_host_list *hosts;
	saas_host *one;
};

static void use(saas_host *h, const saas_store_sandbox *sb)
{
	h->sandboxes++;
	h->vcpus_used += sb->vcpus;
	h->memory_mb_used += sb->memory_mb;
}

static int add_usage(void *ud, const saas_store_sandbox *sb)
{
	struct usage *u = ud;

	if (u->one) {
		use(u->one, sb);
		return 0;
	}
	for (size_t i = 0; i < u->hosts->count; i++)
		if (strcmp(u->hosts->items[i]->id, sb->host_id) == 0)
			use(u->hosts->items[i], sb);
	return 0;
}

static int usage_read(saas_engine *e, struct usage *u)
{
	saas_store_filter f;

	memset(&f, 0, sizeof(f));
	f.live = 1;
	f.host_id = u->host_id;
	return e->store->sandbox_list(e->store_ctx, &f, add_usage, u);
}

static int host_public(const saas_store_host *row, saas_host **out)
{
	saas_host *h = calloc(1, sizeof(*h));

	*out = NULL;
	if (!h)
		return saas__oom();
	if (!(h->id = saas__strdup(row->id)) || !(h->name = saas__strdup(row->name)) ||
	    !(h->uri = saas__strdup(row->uri)) || !(h->address = saas__strdup(row->address))) {
		saas_host_free(h);
		return SAAS_ENOMEM;
	}
	h->state = row->state;
	h->cpu_overcommit_milli = row->cpu_overcommit_milli;
	h->mem_overcommit_milli = row->mem_overcommit_milli;
	h->cpus = row->cpus;
	h->memory_mb = row->memory_mb;
	h->vcpus_capacity = (unsigned int)((uint64_t)row->cpus * row->cpu_overcommit_milli / 1000);
	h->memory_mb_capacity = row->memory_mb * row->mem_overcommit_milli / 1000;
	h->created_at_ms = row->created_at_ms;
	h->last_seen_ms = row->last_seen_ms;
	h->state_at_ms = row->state_at_ms;
	*out = h;
	return SAAS_OK;
}

/* A host is asked for its templates only if some engine reached it within this many heartbeats (as placement). */
#define TEMPLATES_FRESH_BEATS 3

/*
 * What this engine keeps on each of n hosts beside the sandboxes: its
 * pooled VMs there, and the templates its driver there reports. Hosts it
 * has not opened (a command-line engine opens none), lost ones and ones no
 * engine reached lately report no templates: asking a host that does not
 * answer would hold the caller (an operator's page, a metrics scrape) for
 * the driver's timeouts, and it builds nothing meanwhile.
 */
static int kept_read(saas_engine *e, saas_host **hosts, size_t n)
{
	int64_t seen_after = saas__engine_now(e) - (int64_t)TEMPLATES_FRESH_BEATS * e->hosts.heartbeat_ms;
	struct saas__pool_use u;
	void *ctx;
	int rc;

	if ((rc = saas__pool_use(e, NULL, &u)) < 0)
		return rc;
	for (size_t i = 0; i < u.count; i++)
		for (size_t j = 0; j < n; j++)
			if (strcmp(u.items[i].host_id, hosts[j]->id) == 0)
				hosts[j]->pool_vms++;
	saas__pool_use_free(&u);
	for (size_t j = 0; j < n; j++) {
		if (hosts[j]->state == SAAS_HOST_LOST || hosts[j]->last_seen_ms < seen_after ||
		    !saas__vm_driver_opened(e, hosts[j]->id, &ctx))
			continue;
		if ((rc = saas__templates_read(e, ctx, &hosts[j]->templates, &hosts[j]->ntemplates)) < 0)
			return rc;
	}
	return SAAS_OK;
}

SAAS_EXTERN(void) saas_host_free(saas_host *h)
{
	if (!h)
		return;
	saas__templates_free(h->templates, h->ntemplates);
	free(h->id);
	free(h->name);
	free(h->uri);
	free(h->address);
	free(h);
}

SAAS_EXTERN(void) saas_host_list_free(saas_host_list *list)
{
	if (!list)
		return;
	for (size_t i = 0; i < list->count; i++)
		saas_host_free(list->items[i]);
	free(list->items);
	free(list);
}

/* ---- the registry ---- */

SAAS_EXTERN(int) saas_host_add(saas_host **out, saas_engine *e, const char *name, const char *uri, const char *address,
                               const saas_host_options *options, unsigned int flags)
{
	saas_host_options o = SAAS_HOST_OPTIONS_INIT;
	saas_store_host row;
	int rc;

	saas__error_clear();
	if (out)
		*out = NULL;
	if (!e)
		return saas__inval("engine is NULL");
	if (flags & ~(SAAS_HOST_ALLOW_TCP | SAAS_HOST_ALLOW_UNVERIFIED))
		return saas__inval("unknown flags 0x%x", flags);
	if (options) {
		if (options->version < 1 || options->version > SAAS_HOST_OPTIONS_VERSION)
			return saas__inval("host options of version %u (want 1 to %u)", options->version,
			                   SAAS_HOST_OPTIONS_VERSION);
		o = *options;
	}
	if (!valid_name(name))
		return saas__inval("host name must be one DNS label: 1 to %d of a-z, 0-9 and '-', not starting or "
		                   "ending with '-'", SAAS_STORE_HOST_NAME_MAX);
	if ((rc = check_uri(uri, flags)) < 0 || (rc = check_address(address)) < 0)
		return rc;
	memset(&row, 0, sizeof(row));
	if ((rc = overcommit(&row.cpu_overcommit_milli, o.cpu_overcommit_milli, SAAS_HOST_CPU_OVERCOMMIT_DEFAULT,
	                     "CPU")) < 0 ||
	    (rc = overcommit(&row.mem_overcommit_milli, o.mem_overcommit_milli, SAAS_HOST_MEM_OVERCOMMIT_DEFAULT,
	                     "memory")) < 0)
		return rc;
	if ((rc = saas__id_new(row.id, "host-", 20)) < 0)
		return rc;
	saas__strlcpy(row.name, name, sizeof(row.name));
	saas__strlcpy(row.uri, uri, sizeof(row.uri));
	saas__strlcpy(row.address, address, sizeof(row.address));
	row.state = SAAS_STORE_HOST_ACTIVE;
	row.created_at_ms = row.state_at_ms = saas__engine_now(e);
	if ((rc = e->store->host_insert(e->store_ctx, &row)) < 0) {
		if (rc == SAAS_EEXISTS)
			return saas__error(SAAS_EEXISTS, SAAS_ERRCLASS_ARGS, 0, "a VM host named '%s' is registered already",
			                   name);
		return rc;
	}
	saas__log(e, SAAS_LOG_INFO, "VM host %s (%s) registered: %s, address %s", row.name, row.id, row.uri, row.address);
	return out ? host_public(&row, out) : SAAS_OK;
}

/* A host by id or name, with a message that names what was asked for. */
static int host_find(saas_engine *e, const char *id_or_name, saas_store_host *row)
{
	int rc = e->store->host_get(e->store_ctx, id_or_name, row);

	if (rc == SAAS_ENOTFOUND)
		return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_ARGS, 0, "no VM host '%s' (see the host list)", id_or_name);
	return rc;
}

/* Move a host between active and draining; `to` already is success. */
static int host_move(saas_engine *e, const char *id_or_name, int from, int to)
{
	saas_store_host row;
	int rc;

	saas__error_clear();
	if (!e)
		return saas__inval("engine is NULL");
	if ((rc = check_ref(id_or_name)) < 0 || (rc = host_find(e, id_or_name, &row)) < 0)
		return rc;
	if (row.state == to)
		return SAAS_OK;
	if (row.state == SAAS_STORE_HOST_LOST)
		return saas__error(SAAS_ESTATE, SAAS_ERRCLASS_ARGS, 0,
		                   "VM host '%s' is lost; it becomes active by itself when it answers again", row.name);
	rc = e->store->host_set_state(e->store_ctx, row.id, from, to, saas__engine_now(e));
	if (rc == SAAS_ESTATE)
		return saas__error(SAAS_ESTATE, SAAS_ERRCLASS_ARGS, 0, "VM host '%s' changed state meanwhile; look again",
		                   row.name);
	if (rc == SAAS_OK)
		saas__log(e, SAAS_LOG_INFO, "VM host %s (%s) is %s now", row.name, row.id, saas_host_state_name(to));
	return rc;
}

SAAS_EXTERN(int) saas_host_drain(saas_engine *e, const char *id_or_name)
{
	return host_move(e, id_or_name, SAAS_STORE_HOST_ACTIVE, SAAS_STORE_HOST_DRAINING);
}

SAAS_EXTERN(int) saas_host_activate(saas_engine *e, const char *id_or_name)
{
	return host_move(e, id_or_name, SAAS_STORE_HOST_DRAINING, SAAS_STORE_HOST_ACTIVE);
}

SAAS_EXTERN(int) saas_host_remove(saas_engine *e, const char *id_or_name)
{
	saas_store_host row;
	int rc;

	saas__error_clear();
	if (!e)
		return saas__inval("engine is NULL");
	if ((rc = check_ref(id_or_name)) < 0 || (rc = host_find(e, id_or_name, &row)) < 0)
		return rc;
	rc = e->store->host_delete(e->store_ctx, row.id);
	if (rc == SAAS_EBUSY) {
		saas_host h = { 0 };
		struct usage u = { row.id, NULL, &h };
		if (usage_read(e, &u) < 0)
			saas__error_clear();
		return saas__error(SAAS_EBUSY, SAAS_ERRCLASS_ARGS, 0,
		                   "VM host '%s' still has %u sandboxes; drain it and remove it once they have ended "
		                   "(or destroy them)", row.name, h.sandboxes);
	}
	if (rc == SAAS_OK)
		saas__log(e, SAAS_LOG_INFO, "VM host %s (%s) removed", row.name, row.id);
	return rc;
}

SAAS_EXTERN(int) saas_host_get(saas_host **out, saas_engine *e, const char *id_or_name)
{
	saas_store_host row;
	struct usage u = { NULL, NULL, NULL };
	int rc;

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	if (!e)
		return saas__inval("engine is NULL");
	if ((rc = check_ref(id_or_name)) < 0 || (rc = host_find(e, id_or_name, &row)) < 0 ||
	    (rc = host_public(&row, &u.one)) < 0)
		return rc;
	u.host_id = row.id;
	if ((rc = usage_read(e, &u)) < 0 || (rc = kept_read(e, &u.one, 1)) < 0) {
		saas_host_free(u.one);
		return rc;
	}
	*out = u.one;
	return SAAS_OK;
}

SAAS_EXTERN(int) saas_host_list_get(saas_host_list **out, saas_engine *e)
{
	struct usage u = { NULL, NULL, NULL };
	saas_host_list *list = NULL;
	saas_store_host *rows = NULL;
	size_t n = 0;
	int rc;

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	if (!e)
		return saas__inval("engine is NULL");
	if ((rc = saas__store_hosts(e->store, e->store_ctx, &rows, &n)) < 0)
		return rc;
	if (!(list = calloc(1, sizeof(*list))) || (n && !(list->items = calloc(n, sizeof(*list->items))))) {
		rc = saas__oom();
		goto out;
	}
	for (; list->count < n; list->count++)
		if ((rc = host_public(&rows[list->count], &list->items[list->count])) < 0)
			goto out;
	u.hosts = list;
	/* One pass over the live sandboxes for every host: the list is an operator's, not a hot path. */
	if (list->count && ((rc = usage_read(e, &u)) < 0 || (rc = kept_read(e, list->items, list->count)) < 0))
		goto out;
	*out = list;
	list = NULL;
out:
	saas_host_list_free(list);
	free(rows);
	return rc;
}

SAAS_EXTERN(int) saas_host_sandbox_list_get(saas_sandbox_list **out, saas_engine *e, const char *id_or_name,
                                            const char *cursor, unsigned int limit, unsigned int flags)
{
	saas_store_host row;
	saas_store_filter f;
	int rc;

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	if (!e)
		return saas__inval("engine is NULL");
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	if (limit > 1000)
		return saas__inval("list limit %u is over 1000", limit);
	if ((rc = check_ref(id_or_name)) < 0 || (rc = host_find(e, id_or_name, &row)) < 0)
		return rc;
	memset(&f, 0, sizeof(f));
	f.live = 1;
	f.host_id = row.id;
	/* Recorded counters: listing asks no driver, so a host that does not answer still lists. */
	return saas__sandbox_page(e, &f, cursor, limit ? limit : 100, SAAS_LIST_ACTIVE | SAAS_LIST_RECORDED, out);
}
