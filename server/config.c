/*
 * Configuration: environment first, then the command line.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "forwarded.h"
#include "server.h"

const char *aas_config_usage(void)
{
	return "usage: aas-server [options]                 serve the REST API\n"
	       "       aas-server account|key ... --help      administer accounts and keys (beside a running server)\n"
	       "       aas-server user|invite ... --help      administer the dashboard's people and invite codes\n"
	       "       aas-server host ... --help             register, drain and list VM hosts (docs/operations.md)\n"
	       "       aas-server routes                      print the routes served\n"
	       "       aas-server e2b-key < KEYFILE           print a key's E2B spelling, e2b_... (docs/e2b.md)\n"
	       "\n"
	       "options (environment variable in brackets):\n"
	       "  --listen ADDR:PORT      address to listen on; default 127.0.0.1:8080 [AAS_LISTEN]\n"
	       "  --state-dir DIR         engine state directory [AAS_STATE_DIR]\n"
	       "  --store URL             sqlite:PATH or postgresql://...; default aas.db in the state dir [AAS_STORE_URL]\n"
	       "  --image NAME            image used when create names none; default \"default\" [AAS_IMAGE]\n"
	       "  --libvirt-uri URI       libvirt connection URI [AAS_LIBVIRT_URI]\n"
	       "  --driver-config OPTS    more VM driver options, after the ones above: e.g. the cluster's\n"
	       "                          \"owner=prod ssh_key=/etc/aas/cluster_key\" (docs/vm-hosts.md)\n"
	       "                          [AAS_DRIVER_CONFIG]\n"
	       "  --images DIR            guest image directory [AAS_IMAGE_DIR]\n"
	       "  --preview-domain D      preview URLs are http://NAME.D:PORT/, NAME each exposure's own\n"
	       "                          unguessable label; default localhost [AAS_PREVIEW_DOMAIN]\n"
	       "  --preview-url TEMPLATE  full preview URL template with {name} (behind a TLS proxy), e.g.\n"
	       "                          https://{name}.example-preview.com/ [AAS_PREVIEW_URL]\n"
	       "  --preview-connect-timeout SECS     a guest port that does not take the connection: 504;\n"
	       "                          default 10 [AAS_PREVIEW_CONNECT_TIMEOUT]\n"
	       "  --preview-first-byte-timeout SECS  a guest server that has not answered (its whole head): 504;\n"
	       "                          default 60 [AAS_PREVIEW_FIRST_BYTE_TIMEOUT]\n"
	       "  --preview-idle-timeout SECS        a body or WebSocket silent both ways this long is closed;\n"
	       "                          default 300 [AAS_PREVIEW_IDLE_TIMEOUT]\n"
	       "  --pty-per-sandbox N     terminals open at once per sandbox; more get 429; default 4\n"
	       "                          [AAS_PTY_PER_SANDBOX]\n"
	       "  --pty-per-account N     terminals open at once per account; default 16 [AAS_PTY_PER_ACCOUNT]\n"
	       "  --pty-frame-max BYTES   the largest WebSocket frame a terminal's client may send (larger:\n"
	       "                          close 1009); default 65536 [AAS_PTY_FRAME_MAX]\n"
	       "  --pty-idle-timeout SECS a terminal silent both ways this long is closed (1001); default 3600\n"
	       "                          [AAS_PTY_IDLE_TIMEOUT]\n"
	       "  --pty-write-timeout SECS a terminal whose shell takes none of its input this long is closed\n"
	       "                          (1008); default 30 [AAS_PTY_WRITE_TIMEOUT]\n"
	       "  --templates on|off      make sandboxes as clones of snapshot templates; default on [AAS_TEMPLATES]\n"
	       "  --pool SPEC             keep ready VMs for fast creates: SIZE=N[,SIZE=N...], or SIZE:IMAGE=N\n"
	       "                          (N at most 64; e.g. small=4,medium=1); default none [AAS_POOL]\n"
	       "  --e2b-templates MAP     E2B templates (/e2b, docs/e2b.md) as NAME=SIZE[:IMAGE],...;\n"
	       "                          default base=small,code-interpreter-v1=small [AAS_E2B_TEMPLATES]\n"
	       "  --e2b-secret-file FILE  the secret E2B access tokens derive from (at least 32 random bytes;\n"
	       "                          servers on one store share it); default: random at each start\n"
	       "                          [AAS_E2B_SECRET_FILE]\n"
	       "  --e2b-domain DOMAIN     serve E2B's sandbox hosts PORT-ID.DOMAIN and api.DOMAIN (E2B_DOMAIN;\n"
	       "                          wildcard DNS and TLS in front: docs/operations.md) [AAS_E2B_DOMAIN]\n"
	       "  --min-free-mb N         refuse creates (503) while the state filesystem has less than N MiB free;\n"
	       "                          default 1024 [AAS_MIN_FREE_MB]\n"
	       "  --disk-budget-gb N      refuse creates (503) whose disk would take the sandboxes' disks, all full,\n"
	       "                          past N GiB; default 4 times the overlays' filesystem [AAS_DISK_BUDGET_GB]\n"
	       "  --lease-ttl SECS        how long this server's leases in the store last unrenewed (renewed every\n"
	       "                          third of it): with many servers on one database, a dead one's work is\n"
	       "                          taken over this long after it died; default 15 [AAS_LEASE_TTL]\n"
	       "  --host-heartbeat SECS   how often each VM host is asked what it has; default 5 [AAS_HOST_HEARTBEAT]\n"
	       "  --host-grace SECS       a VM host no server reached this long is lost: its sandboxes are closed,\n"
	       "                          billed to when it was last reached; default 60 [AAS_HOST_GRACE]\n"
	       "  --paused-price USD      what a paused sandbox costs per GiB-hour of its size's memory and disk,\n"
	       "                          up to 1000 with at most six decimals, 0 for free; default 0.0001\n"
	       "                          [AAS_PAUSED_PRICE]\n"
	       "  --metrics-interval MS   how often each running sandbox's CPU, memory and disk are sampled;\n"
	       "                          default 5000 [AAS_METRICS_INTERVAL]\n"
	       "  --metrics-window SECS   how long a sandbox's samples are kept; default 3600 [AAS_METRICS_WINDOW]\n"
	       "  --log-level LEVEL       error, warn, info or debug; default info [AAS_LOG_LEVEL]\n"
	       "  --key-cache-ttl SECS    how long an API key check is trusted; default 5 [AAS_KEY_CACHE_TTL]\n"
	       "  --shutdown-grace SECS   how long SIGTERM waits for requests in flight; default 10\n"
	       "  --max-connections N     connections at once (one thread each); default 8192\n"
	       "  --per-ip-connections N  connections one client address (IPv6: one /64) may hold; more are\n"
	       "                          refused at accept; default 24 [AAS_PER_IP_CONNECTIONS]\n"
	       "  --connection-stack-kb K each connection thread's stack, in KiB; default 1024\n"
	       "                          [AAS_CONNECTION_STACK_KB]\n"
	       "  --preview-connections N preview requests at once, the rest of --max-connections kept for the\n"
	       "                          API; more get 503; default a quarter of --max-connections [AAS_PREVIEW_CONNECTIONS]\n"
	       "  --header-timeout SECS   a request's headers must arrive within SECS of the connection (or of\n"
	       "                          the previous request on it), or it is closed (responses announce half\n"
	       "                          as Keep-Alive: timeout=N); default 10 [AAS_HEADER_TIMEOUT]\n"
	       "  --body-timeout SECS     a request's body must arrive within SECS, plus 1 s per 64 KiB received,\n"
	       "                          or the connection is closed; default 60 [AAS_BODY_TIMEOUT]\n"
	       "  --port-file FILE        write the port listened on to FILE once listening\n"
	       "  --mcp-sessions N        MCP sessions kept, every server's on one store together; a new one past\n"
	       "                          N ends the least recently used (its client initializes again);\n"
	       "                          default 4096 [AAS_MCP_SESSIONS]\n"
	       "  --mcp-allowed-origins L browser Origins allowed on /v1/mcp besides this server's loopback ones,\n"
	       "                          comma-separated, \"*\" for any; default none [AAS_MCP_ALLOWED_ORIGINS]\n"
	       "  --docs-viewer DIR       where the API viewer of /docs/api was installed (npm ci of server/viewer);\n"
	       "                          default ../share/libsaas/api-viewer from the executable's directory\n"
	       "                          [AAS_DOCS_VIEWER]\n"
	       "  --public-url URL        the origin clients reach this server at, e.g. https://sandbox.example.com:\n"
	       "                          what the npm package of /mcp.tgz points at; default the request's Host\n"
	       "                          (https with --secure-cookies) [AAS_PUBLIC_URL]\n"
	       "accounts for people (the dashboard, docs/dashboard.md):\n"
	       "  --signup MODE           who may sign up on /signup: closed (only `aas-server user create`),\n"
	       "                          invite (with a code of `aas-server invite create`) or open;\n"
	       "                          default closed [AAS_SIGNUP]\n"
	       "  --secure-cookies on|off the server is reached over HTTPS (a TLS proxy in front): Secure\n"
	       "                          \"__Host-\" cookies and https Origins only; default off [AAS_SECURE_COOKIES]\n"
	       "  --session-idle SECS     a session unused this long ends; default 28800 (8 h) [AAS_SESSION_IDLE]\n"
	       "  --session-max SECS      every session ends this long after log-in; default 604800 (7 days)\n"
	       "                          [AAS_SESSION_MAX]\n"
	       "  --login-attempts N      log-ins and sign-ups an address may try for one e-mail at once, refilled\n"
	       "                          N an hour (for all e-mails: 3 N); default 10 [AAS_LOGIN_ATTEMPTS]\n"
	       "  --max-password-hashes N password hashes (Argon2id, 64 MiB each) at once; as many more wait up to\n"
	       "                          1 s, the rest get 503; default the number of CPUs [AAS_MAX_PASSWORD_HASHES]\n"
	       "  --signups-per-hour N    sign-ups taken from everyone together in an hour; more get 503;\n"
	       "                          default 100 [AAS_SIGNUPS_PER_HOUR]\n"
	       "  --signup-credit MODE    auto: accounts made on /signup get the free credit at once; approval:\n"
	       "                          with --signup open, only once `aas-server user approve` (an invite\n"
	       "                          counts as approval); default auto [AAS_SIGNUP_CREDIT]\n"
	       "load balancers (docs/operations.md, \"Behind a load balancer\"):\n"
	       "  --trusted-proxies CIDR[,CIDR...]\n"
	       "                          proxies whose client-address header is believed (at most 64 networks;\n"
	       "                          an address alone is a /32 or /128): the per-address limits then count\n"
	       "                          the client it names, and their connections skip --per-ip-connections;\n"
	       "                          default none: no header is read [AAS_TRUSTED_PROXIES]\n"
	       "  --forwarded-header H    the header they write: x-forwarded-for or forwarded (RFC 7239);\n"
	       "                          only that one is read; default x-forwarded-for [AAS_FORWARDED_HEADER]\n"
	       "tenant limits, every account's default (`aas-server account limits` sets one account's):\n"
	       "  --max-sandboxes N       sandboxes not yet destroyed, per account; default 10 [AAS_MAX_SANDBOXES]\n"
	       "  --max-executions N      executions running at once, per account; default 8 [AAS_MAX_EXECUTIONS]\n"
	       "  --max-transfers N       file uploads and downloads under way at once, per account (every\n"
	       "                          account's, not set per account); default 4 [AAS_MAX_TRANSFERS]\n"
	       "  --creates-per-minute N  sandbox creates per account per minute; default 20 [AAS_CREATES_PER_MINUTE]\n"
	       "  --requests-per-second N API requests per second per key (bursts of 2 s); default 100\n"
	       "                          [AAS_REQUESTS_PER_SECOND]\n"
	       "  --address-requests-per-second N\n"
	       "                          requests per second per client address without a valid key (MCP\n"
	       "                          discovery, bad keys; IPv6 by /64); default 20\n"
	       "                          [AAS_ADDRESS_REQUESTS_PER_SECOND]\n"
	       "  --preview-requests-per-second N\n"
	       "                          preview requests per second per client address (IPv6 by /64), a\n"
	       "                          budget apart from the API's; default 100 [AAS_PREVIEW_REQUESTS_PER_SECOND]\n"
	       "  --execution-retention SECS\n"
	       "                          finished executions and their output are deleted after this long;\n"
	       "                          default 86400 (24 h) [AAS_EXECUTION_RETENTION]\n"
	       "  --help, --version\n";
}

static int set(char **dst, const char *val)
{
	free(*dst);
	*dst = val ? strdup(val) : NULL;
	return val && !*dst ? -1 : 0;
}

static int parse_listen(struct aas_config *cfg, const char *s)
{
	const char *colon;
	char *end;
	unsigned long port;

	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (!close || close[1] != ':')
			return -1;
		free(cfg->listen_host);
		cfg->listen_host = strndup(s + 1, (size_t)(close - s - 1));
		colon = close + 1;
	} else if ((colon = strrchr(s, ':'))) {
		free(cfg->listen_host);
		cfg->listen_host = strndup(s, (size_t)(colon - s));
	} else {
		colon = s - 1; /* a bare port */
	}
	port = strtoul(colon + 1, &end, 10);
	if (!cfg->listen_host || !colon[1] || *end || port > 65535)
		return -1;
	cfg->listen_port = (unsigned int)port;
	return 0;
}

static int parse_level(const char *s)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	for (int i = 0; i < 4; i++)
		if (strcasecmp(s, names[i]) == 0)
			return i;
	return -1;
}

/* AAS_SIGNUP_* for its name, -1 for anything else. */
static int parse_signup(const char *s)
{
	return strcmp(s, "closed") == 0 ? AAS_SIGNUP_CLOSED
	       : strcmp(s, "invite") == 0 ? AAS_SIGNUP_INVITE
	       : strcmp(s, "open") == 0 ? AAS_SIGNUP_OPEN : -1;
}

/* AAS_SIGNUP_CREDIT_* for its name, -1 for anything else. */
static int parse_signup_credit(const char *s)
{
	return strcmp(s, "auto") == 0 ? AAS_SIGNUP_CREDIT_AUTO : strcmp(s, "approval") == 0 ? AAS_SIGNUP_CREDIT_APPROVAL : -1;
}

/* AAS_FORWARDED_* for its name (any case), -1 for anything else. */
static int parse_forwarded_header(const char *s)
{
	return strcasecmp(s, "x-forwarded-for") == 0 ? AAS_FORWARDED_XFF
	       : strcasecmp(s, "forwarded") == 0     ? AAS_FORWARDED_RFC7239
	                                             : -1;
}

/* --trusted-proxies: checked here, so a typo stops the start with its reason; 0, or -1 after printing it. */
static int set_trusted_proxies(struct aas_config *cfg, const char *val, const char *from)
{
	struct aas_trust t;
	char err[160];

	if (aas_trust_parse(&t, val, err, sizeof(err)) < 0) {
		fprintf(stderr, "aas-server: %s: %s (expected CIDR[,CIDR...], e.g. 10.0.0.0/8,2001:db8::/32)\n", from, err);
		return -1;
	}
	return set(&cfg->trusted_proxies, val);
}

/* 1 for "on", 0 for "off", -1 for anything else. */
static int parse_on_off(const char *s)
{
	return strcasecmp(s, "on") == 0 ? 1 : strcasecmp(s, "off") == 0 ? 0 : -1;
}

/*
 * --paused-price: dollars per GiB-hour, as aas_parse_usd reads money, into the
 * engine's micro-dollars (0: free); 0, or -1 after printing why, named `from`.
 */
static int parse_paused_price(struct aas_config *cfg, const char *val, const char *from)
{
	int64_t micro;

	if (aas_parse_usd(&micro, val) < 0 || micro > SAAS_ENGINE_PAUSED_PRICE_MAX) {
		fprintf(stderr, "aas-server: %s: expected US dollars per GiB-hour, 0 to %lld with at most six decimals "
		                "(e.g. 0.0001), got \"%s\"\n", from, (long long)(SAAS_ENGINE_PAUSED_PRICE_MAX / 1000000), val);
		return -1;
	}
	cfg->paused_price = micro ? micro : SAAS_ENGINE_PAUSED_PRICE_FREE;
	return 0;
}

static int parse_uint(const char *s, unsigned int *out, unsigned int max)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (!*s || *end || v > max)
		return -1;
	*out = (unsigned int)v;
	return 0;
}

/*
 * The numeric options: one table for their flags, variables and bounds. Each
 * sets an unsigned int of struct aas_config; 0 there means "not given".
 * Filled in by field name: min and max have one type, so a swap by position
 * would compile.
 */
#define NUM_FIELD(field) offsetof(struct aas_config, field)

static const struct num_option {
	const char *flag;    /* without "--" */
	const char *env;
	size_t offset;       /* of an unsigned int in struct aas_config */
	unsigned int min, max;
	const char *unit;
} num_options[] = {
	/* The tenant limits (the engine's defaults for every account). */
	{ .flag = "max-sandboxes", .env = "AAS_MAX_SANDBOXES",
	  .offset = NUM_FIELD(max_sandboxes), .min = 1, .max = SAAS_LIMIT_MAX, .unit = "sandboxes" },
	{ .flag = "max-executions", .env = "AAS_MAX_EXECUTIONS",
	  .offset = NUM_FIELD(max_executions), .min = 1, .max = SAAS_LIMIT_MAX, .unit = "executions" },
	{ .flag = "max-transfers", .env = "AAS_MAX_TRANSFERS",
	  .offset = NUM_FIELD(max_transfers), .min = 1, .max = SAAS_LIMIT_MAX, .unit = "transfers" },
	{ .flag = "creates-per-minute", .env = "AAS_CREATES_PER_MINUTE",
	  .offset = NUM_FIELD(creates_per_minute), .min = 1, .max = SAAS_LIMIT_MAX, .unit = "creates" },
	{ .flag = "requests-per-second", .env = "AAS_REQUESTS_PER_SECOND",
	  .offset = NUM_FIELD(requests_per_second), .min = 1, .max = SAAS_LIMIT_MAX, .unit = "requests" },
	{ .flag = "address-requests-per-second", .env = "AAS_ADDRESS_REQUESTS_PER_SECOND",
	  .offset = NUM_FIELD(address_rate), .min = 1, .max = SAAS_LIMIT_MAX, .unit = "requests" },
	{ .flag = "preview-requests-per-second", .env = "AAS_PREVIEW_REQUESTS_PER_SECOND",
	  .offset = NUM_FIELD(preview_rate), .min = 1, .max = SAAS_LIMIT_MAX, .unit = "requests" },
	{ .flag = "execution-retention", .env = "AAS_EXECUTION_RETENTION",
	  .offset = NUM_FIELD(retention_s), .min = 1, .max = 10u * 366 * 86400, .unit = "seconds" },
	{ .flag = "min-free-mb", .env = "AAS_MIN_FREE_MB",
	  .offset = NUM_FIELD(min_free_mb), .min = 1, .max = SAAS_ENGINE_MIN_FREE_MB_MAX, .unit = "MiB" },
	{ .flag = "disk-budget-gb", .env = "AAS_DISK_BUDGET_GB",
	  .offset = NUM_FIELD(disk_budget_gb), .min = 1, .max = SAAS_ENGINE_DISK_BUDGET_GB_MAX, .unit = "GiB" },
	/* Many servers on one database (docs/operations.md). */
	{ .flag = "lease-ttl", .env = "AAS_LEASE_TTL",
	  .offset = NUM_FIELD(lease_ttl_s), .min = 1, .max = SAAS_ENGINE_LEASE_TTL_MS_MAX / 1000, .unit = "seconds" },
	/* VM hosts (aas-server host add): the engine checks heartbeat * 2 <= grace. */
	{ .flag = "host-heartbeat", .env = "AAS_HOST_HEARTBEAT",
	  .offset = NUM_FIELD(host_heartbeat_s), .min = 1, .max = 600, .unit = "seconds" },
	{ .flag = "host-grace", .env = "AAS_HOST_GRACE",
	  .offset = NUM_FIELD(host_grace_s), .min = 2, .max = 86400, .unit = "seconds" },
	/* MCP sessions in the store, every server's together (an initialize needs no key). */
	{ .flag = "mcp-sessions", .env = "AAS_MCP_SESSIONS",
	  .offset = NUM_FIELD(mcp_sessions), .min = 1, .max = SAAS_ENGINE_MCP_SESSIONS_MAX, .unit = "sessions" },
	/* Sandbox metrics (saas/metrics.h): the engine checks window / interval <= 100000. */
	{ .flag = "metrics-interval", .env = "AAS_METRICS_INTERVAL",
	  .offset = NUM_FIELD(metrics_interval_ms), .min = 100, .max = 3600000, .unit = "ms" },
	{ .flag = "metrics-window", .env = "AAS_METRICS_WINDOW",
	  .offset = NUM_FIELD(metrics_window_s), .min = 1, .max = 86400, .unit = "seconds" },
	/* The connection policy. */
	{ .flag = "per-ip-connections", .env = "AAS_PER_IP_CONNECTIONS",
	  .offset = NUM_FIELD(per_ip_connections), .min = 1, .max = 100000, .unit = "connections" },
	{ .flag = "preview-connections", .env = "AAS_PREVIEW_CONNECTIONS",
	  .offset = NUM_FIELD(preview_connections), .min = 1, .max = 100000, .unit = "connections" },
	{ .flag = "connection-stack-kb", .env = "AAS_CONNECTION_STACK_KB",
	  .offset = NUM_FIELD(connection_stack_kb), .min = AAS_CONNECTION_STACK_KB_MIN,
	  .max = AAS_CONNECTION_STACK_KB_MAX, .unit = "KiB" },
	{ .flag = "header-timeout", .env = "AAS_HEADER_TIMEOUT",
	  .offset = NUM_FIELD(header_timeout_s), .min = 1, .max = 3600, .unit = "seconds" },
	{ .flag = "body-timeout", .env = "AAS_BODY_TIMEOUT",
	  .offset = NUM_FIELD(body_timeout_s), .min = 1, .max = 3600, .unit = "seconds" },
	/* Accounts for people. */
	{ .flag = "session-idle", .env = "AAS_SESSION_IDLE",
	  .offset = NUM_FIELD(session_idle_s), .min = 60, .max = 366u * 86400, .unit = "seconds" },
	{ .flag = "session-max", .env = "AAS_SESSION_MAX",
	  .offset = NUM_FIELD(session_max_s), .min = 60, .max = 366u * 86400, .unit = "seconds" },
	{ .flag = "login-attempts", .env = "AAS_LOGIN_ATTEMPTS",
	  .offset = NUM_FIELD(login_attempts), .min = 1, .max = 100000, .unit = "attempts" },
	{ .flag = "max-password-hashes", .env = "AAS_MAX_PASSWORD_HASHES",
	  .offset = NUM_FIELD(max_password_hashes), .min = 1, .max = AAS_PASSWORD_HASHES_MAX, .unit = "hashes" },
	{ .flag = "signups-per-hour", .env = "AAS_SIGNUPS_PER_HOUR",
	  .offset = NUM_FIELD(signups_per_hour), .min = 1, .max = 1000000, .unit = "sign-ups" },
	/* The preview proxy's bounds on a guest's server. */
	{ .flag = "preview-connect-timeout", .env = "AAS_PREVIEW_CONNECT_TIMEOUT",
	  .offset = NUM_FIELD(preview_connect_timeout_s), .min = 1, .max = AAS_PREVIEW_TIMEOUT_MAX, .unit = "seconds" },
	{ .flag = "preview-first-byte-timeout", .env = "AAS_PREVIEW_FIRST_BYTE_TIMEOUT",
	  .offset = NUM_FIELD(preview_first_byte_timeout_s), .min = 1,
	  .max = AAS_PREVIEW_TIMEOUT_MAX, .unit = "seconds" },
	{ .flag = "preview-idle-timeout", .env = "AAS_PREVIEW_IDLE_TIMEOUT",
	  .offset = NUM_FIELD(preview_idle_timeout_s), .min = 1, .max = AAS_PREVIEW_TIMEOUT_MAX, .unit = "seconds" },
	/* Terminals. */
	{ .flag = "pty-per-sandbox", .env = "AAS_PTY_PER_SANDBOX",
	  .offset = NUM_FIELD(pty_per_sandbox), .min = 1, .max = 1024, .unit = "terminals" },
	{ .flag = "pty-per-account", .env = "AAS_PTY_PER_ACCOUNT",
	  .offset = NUM_FIELD(pty_per_account), .min = 1, .max = 100000, .unit = "terminals" },
	/* A frame is held whole (its bytes and a head) while it is read: 16 MiB per terminal at most. */
	{ .flag = "pty-frame-max", .env = "AAS_PTY_FRAME_MAX",
	  .offset = NUM_FIELD(pty_frame_max), .min = 1024, .max = AAS_PTY_FRAME_MAX_MAX, .unit = "bytes" },
	{ .flag = "pty-idle-timeout", .env = "AAS_PTY_IDLE_TIMEOUT",
	  .offset = NUM_FIELD(pty_idle_timeout_s), .min = 1, .max = 86400, .unit = "seconds" },
	{ .flag = "pty-write-timeout", .env = "AAS_PTY_WRITE_TIMEOUT",
	  .offset = NUM_FIELD(pty_write_timeout_s), .min = 1, .max = 3600, .unit = "seconds" },
};

#define NUM_OPTIONS (sizeof(num_options) / sizeof(num_options[0]))

/* Set numeric option i from `val` (named `from` in the error); 0, or -1 after printing it. */
static int set_num(struct aas_config *cfg, size_t i, const char *val, const char *from)
{
	const struct num_option *o = &num_options[i];
	unsigned int *dst = (unsigned int *)(void *)((char *)cfg + o->offset);

	if (parse_uint(val, dst, o->max) < 0 || *dst < o->min) {
		fprintf(stderr, "aas-server: %s: expected %u to %u %s, got \"%s\"\n", from, o->min, o->max, o->unit, val);
		return -1;
	}
	return 0;
}

/* Defaults that follow --max-connections, and the one rule between them. */
static int conn_defaults(struct aas_config *cfg)
{
	if (!cfg->per_ip_connections)
		cfg->per_ip_connections = AAS_PER_IP_CONNECTIONS_DEFAULT;
	if (!cfg->preview_connections)
		cfg->preview_connections = cfg->max_connections / 4 ? cfg->max_connections / 4 : 1;
	if (cfg->preview_connections >= cfg->max_connections) {
		fprintf(stderr, "aas-server: --preview-connections (%u) must be below --max-connections (%u): the rest "
		                "is kept for the API\n", cfg->preview_connections, cfg->max_connections);
		return -1;
	}
	return 0;
}

static int from_env(struct aas_config *cfg)
{
	const char *v;

	for (size_t i = 0; i < NUM_OPTIONS; i++)
		if ((v = getenv(num_options[i].env)) && *v && set_num(cfg, i, v, num_options[i].env) < 0)
			return -1;

	if ((v = getenv("AAS_LISTEN")) && *v && parse_listen(cfg, v) < 0) {
		fprintf(stderr, "aas-server: AAS_LISTEN: expected ADDRESS:PORT, got \"%s\"\n", v);
		return -1;
	}
	if ((v = getenv("AAS_LOG_LEVEL")) && *v && (cfg->log_level = parse_level(v)) < 0) {
		fprintf(stderr, "aas-server: AAS_LOG_LEVEL: expected error, warn, info or debug\n");
		return -1;
	}
	if ((v = getenv("AAS_PAUSED_PRICE")) && *v && parse_paused_price(cfg, v, "AAS_PAUSED_PRICE") < 0)
		return -1;
	if ((v = getenv("AAS_KEY_CACHE_TTL")) && *v && parse_uint(v, &cfg->key_ttl_s, 3600) < 0) {
		fprintf(stderr, "aas-server: AAS_KEY_CACHE_TTL: expected seconds (0 to 3600)\n");
		return -1;
	}
	if (((v = getenv("AAS_STATE_DIR")) && *v && set(&cfg->state_dir, v) < 0) ||
	    ((v = getenv("AAS_STORE_URL")) && *v && set(&cfg->store_url, v) < 0) ||
	    ((v = getenv("AAS_IMAGE")) && *v && set(&cfg->image, v) < 0) ||
	    ((v = getenv("AAS_IMAGE_DIR")) && *v && set(&cfg->image_dir, v) < 0) ||
	    ((v = getenv("AAS_LIBVIRT_URI")) && *v && set(&cfg->libvirt_uri, v) < 0) ||
	    ((v = getenv("AAS_DRIVER_CONFIG")) && *v && set(&cfg->driver_config, v) < 0) ||
	    ((v = getenv("AAS_PREVIEW_DOMAIN")) && *v && set(&cfg->preview_domain, v) < 0) ||
	    ((v = getenv("AAS_PREVIEW_URL")) && *v && set(&cfg->preview_url, v) < 0) ||
	    ((v = getenv("AAS_MCP_ALLOWED_ORIGINS")) && *v && set(&cfg->mcp_origins, v) < 0) ||
	    ((v = getenv("AAS_POOL")) && *v && set(&cfg->pool, v) < 0) ||
	    ((v = getenv("AAS_E2B_TEMPLATES")) && *v && set(&cfg->e2b_templates, v) < 0) ||
	    ((v = getenv("AAS_E2B_SECRET_FILE")) && *v && set(&cfg->e2b_secret_file, v) < 0) ||
	    ((v = getenv("AAS_E2B_DOMAIN")) && *v && set(&cfg->e2b_domain, v) < 0) ||
	    ((v = getenv("AAS_DOCS_VIEWER")) && *v && set(&cfg->docs_viewer, v) < 0) ||
	    ((v = getenv("AAS_PUBLIC_URL")) && *v && set(&cfg->public_url, v) < 0))
		return -1;
	if ((v = getenv("AAS_SIGNUP")) && *v && (cfg->signup = parse_signup(v)) < 0) {
		fprintf(stderr, "aas-server: AAS_SIGNUP: expected closed, invite or open, got \"%s\"\n", v);
		return -1;
	}
	if ((v = getenv("AAS_SIGNUP_CREDIT")) && *v && (cfg->signup_credit = parse_signup_credit(v)) < 0) {
		fprintf(stderr, "aas-server: AAS_SIGNUP_CREDIT: expected auto or approval, got \"%s\"\n", v);
		return -1;
	}
	if ((v = getenv("AAS_SECURE_COOKIES")) && *v && (cfg->secure_cookies = parse_on_off(v)) < 0) {
		fprintf(stderr, "aas-server: AAS_SECURE_COOKIES: expected on or off, got \"%s\"\n", v);
		return -1;
	}
	if ((v = getenv("AAS_TRUSTED_PROXIES")) && *v && set_trusted_proxies(cfg, v, "AAS_TRUSTED_PROXIES") < 0)
		return -1;
	if ((v = getenv("AAS_FORWARDED_HEADER")) && *v && (cfg->forwarded_header = parse_forwarded_header(v)) < 0) {
		fprintf(stderr, "aas-server: AAS_FORWARDED_HEADER: expected x-forwarded-for or forwarded, got \"%s\"\n", v);
		return -1;
	}
	if ((v = getenv("AAS_TEMPLATES")) && *v && (cfg->templates = parse_on_off(v)) < 0) {
		fprintf(stderr, "aas-server: AAS_TEMPLATES: expected on or off, got \"%s\"\n", v);
		return -1;
	}
	return 0;
}

int aas_config_parse(struct aas_config *cfg, int argc, char **argv)
{
	enum { O_LISTEN = 256, O_STATE, O_STORE, O_IMAGE, O_URI, O_IMAGES, O_DOMAIN, O_PURL, O_LEVEL, O_TTL,
	       O_GRACE, O_MAXCONN, O_PORTFILE, O_ORIGINS, O_POOL, O_E2B_TEMPLATES, O_E2B_SECRET, O_E2B_DOMAIN, O_TEMPLATES, O_VIEWER, O_SIGNUP, O_SECURE, O_PAUSED, O_DRIVER, O_HELP, O_VERSION,
	       O_SIGNUP_CREDIT, O_PUBLIC_URL, O_TRUSTED_PROXIES, O_FORWARDED_HEADER };
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, O_LISTEN },
		{ "state-dir", required_argument, NULL, O_STATE },
		{ "store", required_argument, NULL, O_STORE },
		{ "image", required_argument, NULL, O_IMAGE },
		{ "libvirt-uri", required_argument, NULL, O_URI },
		{ "driver-config", required_argument, NULL, O_DRIVER },
		{ "images", required_argument, NULL, O_IMAGES },
		{ "preview-domain", required_argument, NULL, O_DOMAIN },
		{ "preview-url", required_argument, NULL, O_PURL },
		{ "log-level", required_argument, NULL, O_LEVEL },
		{ "key-cache-ttl", required_argument, NULL, O_TTL },
		{ "shutdown-grace", required_argument, NULL, O_GRACE },
		{ "max-connections", required_argument, NULL, O_MAXCONN },
		{ "port-file", required_argument, NULL, O_PORTFILE },
		{ "mcp-allowed-origins", required_argument, NULL, O_ORIGINS },
		{ "pool", required_argument, NULL, O_POOL },
		{ "e2b-templates", required_argument, NULL, O_E2B_TEMPLATES },
		{ "e2b-secret-file", required_argument, NULL, O_E2B_SECRET },
		{ "e2b-domain", required_argument, NULL, O_E2B_DOMAIN },
		{ "templates", required_argument, NULL, O_TEMPLATES },
		{ "docs-viewer", required_argument, NULL, O_VIEWER },
		{ "signup", required_argument, NULL, O_SIGNUP },
		{ "signup-credit", required_argument, NULL, O_SIGNUP_CREDIT },
		{ "secure-cookies", required_argument, NULL, O_SECURE },
		{ "paused-price", required_argument, NULL, O_PAUSED },
		{ "public-url", required_argument, NULL, O_PUBLIC_URL },
		{ "trusted-proxies", required_argument, NULL, O_TRUSTED_PROXIES },
		{ "forwarded-header", required_argument, NULL, O_FORWARDED_HEADER },
		{ "help", no_argument, NULL, O_HELP },
		{ "version", no_argument, NULL, O_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	/* The fixed options, then one per num_options entry (its index + O_NUM). */
	enum { NFIXED = sizeof(opts) / sizeof(opts[0]) - 1, NNUM = NUM_OPTIONS, O_NUM = 1024 };
	struct option all[NFIXED + NNUM + 1];
	int c, rc = 0;

	memcpy(all, opts, NFIXED * sizeof(opts[0]));
	for (size_t i = 0; i < NNUM; i++)
		all[NFIXED + i] = (struct option){ num_options[i].flag, required_argument, NULL, O_NUM + (int)i };
	all[NFIXED + NNUM] = (struct option){ NULL, 0, NULL, 0 };
	memset(cfg, 0, sizeof(*cfg));
	cfg->listen_host = strdup("127.0.0.1");
	cfg->listen_port = 8080;
	cfg->preview_domain = strdup("localhost");
	cfg->log_level = SAAS_LOG_INFO;
	cfg->key_ttl_s = 5;
	cfg->grace_s = 10;
	cfg->max_connections = AAS_MAX_CONNECTIONS_DEFAULT;
	cfg->connection_stack_kb = AAS_CONNECTION_STACK_KB_DEFAULT;
	cfg->header_timeout_s = AAS_HEADER_TIMEOUT_DEFAULT;
	cfg->body_timeout_s = AAS_BODY_TIMEOUT_DEFAULT;
	cfg->templates = -1;
	cfg->address_rate = AAS_ADDRESS_RATE_DEFAULT;
	cfg->preview_rate = AAS_PREVIEW_RATE_DEFAULT;
	cfg->preview_connect_timeout_s = AAS_PREVIEW_CONNECT_TIMEOUT_DEFAULT;
	cfg->preview_first_byte_timeout_s = AAS_PREVIEW_FIRST_BYTE_TIMEOUT_DEFAULT;
	cfg->preview_idle_timeout_s = AAS_PREVIEW_IDLE_TIMEOUT_DEFAULT;
	cfg->signup = AAS_SIGNUP_CLOSED;
	cfg->session_idle_s = AAS_SESSION_IDLE_DEFAULT;
	cfg->session_max_s = AAS_SESSION_MAX_DEFAULT;
	cfg->login_attempts = AAS_LOGIN_ATTEMPTS_DEFAULT;
	cfg->signups_per_hour = AAS_SIGNUPS_PER_HOUR_DEFAULT;
	cfg->pty_per_sandbox = AAS_PTY_PER_SANDBOX_DEFAULT;
	cfg->pty_per_account = AAS_PTY_PER_ACCOUNT_DEFAULT;
	cfg->pty_frame_max = AAS_PTY_FRAME_MAX_DEFAULT;
	cfg->pty_idle_timeout_s = AAS_PTY_IDLE_TIMEOUT_DEFAULT;
	cfg->pty_write_timeout_s = AAS_PTY_WRITE_TIMEOUT_DEFAULT;
	if (!cfg->listen_host || !cfg->preview_domain || from_env(cfg) < 0)
		return -1;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", all, NULL)) != -1 && rc == 0) {
		if (c >= O_NUM && c < O_NUM + NNUM) {
			char from[64];
			snprintf(from, sizeof(from), "--%s", num_options[c - O_NUM].flag);
			rc = set_num(cfg, (size_t)(c - O_NUM), optarg, from);
			continue;
		}
		switch (c) {
		case O_LISTEN:
			if ((rc = parse_listen(cfg, optarg)) < 0)
				fprintf(stderr, "aas-server: --listen: expected ADDRESS:PORT, got \"%s\"\n", optarg);
			break;
		case O_STATE: rc = set(&cfg->state_dir, optarg); break;
		case O_STORE:
			rc = set(&cfg->store_url, optarg);
			cfg->store_url_argv = true;
			break;
		case O_IMAGE: rc = set(&cfg->image, optarg); break;
		case O_URI: rc = set(&cfg->libvirt_uri, optarg); break;
		case O_DRIVER: rc = set(&cfg->driver_config, optarg); break;
		case O_IMAGES: rc = set(&cfg->image_dir, optarg); break;
		case O_DOMAIN: rc = set(&cfg->preview_domain, optarg); break;
		case O_PURL: rc = set(&cfg->preview_url, optarg); break;
		case O_PORTFILE: rc = set(&cfg->port_file, optarg); break;
		case O_ORIGINS: rc = set(&cfg->mcp_origins, optarg); break;
		case O_POOL: rc = set(&cfg->pool, optarg); break;
		case O_E2B_TEMPLATES: rc = set(&cfg->e2b_templates, optarg); break;
		case O_E2B_SECRET: rc = set(&cfg->e2b_secret_file, optarg); break;
		case O_E2B_DOMAIN: rc = set(&cfg->e2b_domain, optarg); break;
		case O_VIEWER: rc = set(&cfg->docs_viewer, optarg); break;
		case O_PUBLIC_URL: rc = set(&cfg->public_url, optarg); break;
		case O_TRUSTED_PROXIES: rc = set_trusted_proxies(cfg, optarg, "--trusted-proxies"); break;
		case O_FORWARDED_HEADER:
			if ((cfg->forwarded_header = parse_forwarded_header(optarg)) < 0) {
				fprintf(stderr, "aas-server: --forwarded-header: expected x-forwarded-for or forwarded, got \"%s\"\n",
				        optarg);
				rc = -1;
			}
			break;
		case O_TEMPLATES:
			if ((cfg->templates = parse_on_off(optarg)) < 0) {
				fprintf(stderr, "aas-server: --templates: expected on or off, got \"%s\"\n", optarg);
				rc = -1;
			}
			break;
		case O_SIGNUP:
			if ((cfg->signup = parse_signup(optarg)) < 0) {
				fprintf(stderr, "aas-server: --signup: expected closed, invite or open, got \"%s\"\n", optarg);
				rc = -1;
			}
			break;
		case O_SIGNUP_CREDIT:
			if ((cfg->signup_credit = parse_signup_credit(optarg)) < 0) {
				fprintf(stderr, "aas-server: --signup-credit: expected auto or approval, got \"%s\"\n", optarg);
				rc = -1;
			}
			break;
		case O_SECURE:
			if ((cfg->secure_cookies = parse_on_off(optarg)) < 0) {
				fprintf(stderr, "aas-server: --secure-cookies: expected on or off, got \"%s\"\n", optarg);
				rc = -1;
			}
			break;
		case O_PAUSED: rc = parse_paused_price(cfg, optarg, "--paused-price"); break;
		case O_LEVEL:
			if ((cfg->log_level = parse_level(optarg)) < 0) {
				fprintf(stderr, "aas-server: --log-level: expected error, warn, info or debug\n");
				rc = -1;
			}
			break;
		case O_TTL:
			if ((rc = parse_uint(optarg, &cfg->key_ttl_s, 3600)) < 0)
				fprintf(stderr, "aas-server: --key-cache-ttl: expected seconds (0 to 3600)\n");
			break;
		case O_GRACE:
			if ((rc = parse_uint(optarg, &cfg->grace_s, 3600)) < 0)
				fprintf(stderr, "aas-server: --shutdown-grace: expected seconds (0 to 3600)\n");
			break;
		case O_MAXCONN:
			if ((rc = parse_uint(optarg, &cfg->max_connections, 100000)) < 0 || cfg->max_connections == 0) {
				fprintf(stderr, "aas-server: --max-connections: expected 1 to 100000\n");
				rc = -1;
			}
			break;
		case O_HELP:
			fputs(aas_config_usage(), stdout);
			return 1;
		case O_VERSION:
			printf("aas-server %s\n", saas_version());
			return 1;
		default:
			fprintf(stderr, "aas-server: unknown or incomplete option \"%s\" (see --help)\n", argv[optind - 1]);
			rc = -1;
		}
	}
	if (rc == 0 && optind < argc) {
		fprintf(stderr, "aas-server: unexpected argument \"%s\" (see --help)\n", argv[optind]);
		rc = -1;
	}
	if (rc == 0)
		rc = conn_defaults(cfg);
	return rc < 0 ? -1 : 0;
}

void aas_config_free(struct aas_config *cfg)
{
	free(cfg->listen_host);
	free(cfg->state_dir);
	free(cfg->store_url);
	free(cfg->image);
	free(cfg->libvirt_uri);
	free(cfg->driver_config);
	free(cfg->image_dir);
	free(cfg->preview_domain);
	free(cfg->preview_url);
	free(cfg->port_file);
	free(cfg->mcp_origins);
	free(cfg->e2b_templates);
	free(cfg->e2b_secret_file);
	free(cfg->e2b_domain);
	free(cfg->pool);
	free(cfg->docs_viewer);
	free(cfg->public_url);
	free(cfg->trusted_proxies);
	memset(cfg, 0, sizeof(*cfg));
}

char *aas_config_driver_string(const struct aas_config *cfg)
{
	char *s = NULL;

	if (!cfg->libvirt_uri && !cfg->image_dir && cfg->templates < 0 && !cfg->driver_config)
		return NULL;
	/* --driver-config last: the driver takes the last of an option given twice. */
	if (asprintf(&s, "%s%s %s%s %s %s", cfg->libvirt_uri ? "uri=" : "", cfg->libvirt_uri ? cfg->libvirt_uri : "",
	             cfg->image_dir ? "images=" : "", cfg->image_dir ? cfg->image_dir : "",
	             cfg->templates < 0 ? "" : cfg->templates ? "templates=on" : "templates=off",
	             cfg->driver_config ? cfg->driver_config : "") < 0)
		return NULL;
	return s;
}

bool aas_store_url_has_password(const char *url)
{
	const char *a, *q;
	size_t auth;

	if (!url || !(a = strstr(url, "://")))
		return false;
	a += 3;
	/* As libpq reads it: user info up to the first '@' before the host's end, the password after its ':'. */
	auth = strcspn(a, "/?");
	q = memchr(a, '@', auth);
	if (q && memchr(a, ':', (size_t)(q - a)))
		return true;
	for (q = strchr(url, '?'); q && *q; q = strchr(q, '&')) {
		q++;
		if (strncmp(q, "password=", 9) == 0)
			return true;
	}
	return false;
}
