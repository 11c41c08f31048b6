/*
 * aas-server's options (config.c): struct aas_config as the environment and
 * the command line fill it, and each option's default and bounds. Every room
 * that is started with the options reads its own from here.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_CONFIG_H
#define AAS_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

struct aas_config {
	char *listen_host;         /* "127.0.0.1" */
	unsigned int listen_port;  /* 8080; 0 picks a free port (tests read it from the log) */
	char *state_dir;
	char *store_url;
	bool store_url_argv;       /* store_url came from --store: every local user can read it in /proc */
	char *image;
	char *libvirt_uri;
	char *driver_config;       /* --driver-config: more driver options, appended; NULL: none */
	char *image_dir;
	int templates;             /* clones of snapshot templates: -1 the driver's default (on), 0 off, 1 on */
	char *preview_domain;      /* "localhost" */
	char *preview_url;         /* engine template; NULL: derived from domain and port */
	int log_level;             /* SAAS_LOG_* */
	unsigned int key_ttl_s;    /* how long a cached client is trusted (revocation delay) */
	unsigned int grace_s;      /* how long shutdown waits for in-flight requests */
	unsigned int max_connections;
	unsigned int header_timeout_s;    /* a request's headers must arrive within this (conn.c) */
	unsigned int body_timeout_s;      /* and its body within this, plus 1 s per AAS_BODY_MIN_RATE bytes */
	unsigned int per_ip_connections;  /* connections one address (IPv6: one /64) may hold at once */
	unsigned int preview_connections; /* preview requests at once; the rest of max_connections is the API's */
	unsigned int connection_stack_kb; /* each connection thread's stack (conn.c) */
	char *port_file;           /* write the bound port here once listening (tests) */
	char *mcp_origins;         /* extra Origins allowed on /v1/mcp, comma-separated ("*": any); NULL: none */
	char *pool;                /* warm pools, "SIZE=N,..." (the engine checks it); NULL: none */
	char *e2b_templates;       /* the E2B face's templates, "NAME=SIZE[:IMAGE],..." (e2b/); NULL: its default */
	char *e2b_secret_file;     /* the E2B face's token secret; NULL: random at each start */
	char *e2b_domain;          /* E2B's domain mode: PORT-ID.DOMAIN and api.DOMAIN are the face's; NULL: off */
	char *docs_viewer;         /* where /docs/api's viewer is; NULL: next to the executable (web/pages.c) */
	char *public_url;          /* the origin clients reach the server at; NULL: a request's Host (web/mcp_package.c) */
	/* Tenant limits: every account's defaults (0: the library's); `aas-server limits` sets one account's. */
	unsigned int max_sandboxes;
	unsigned int max_executions;
	unsigned int max_transfers;
	unsigned int creates_per_minute;
	unsigned int requests_per_second;  /* per API key */
	unsigned int retention_s;          /* finished executions are kept this long */
	/* Requests per second per client address without a valid key (MCP discovery, previews, bad keys). */
	unsigned int address_rate;
	unsigned int preview_rate;     /* requests per second per client address to previews */
	unsigned int min_free_mb;  /* creates refused below this free on the state filesystem; 0: the engine's default */
	unsigned int disk_budget_gb; /* creates refused past this disk held by sandboxes; 0: the engine's default */
	unsigned int lease_ttl_s;  /* the engine's leases in the store; 0: the engine's default (15 s) */
	unsigned int host_heartbeat_s; /* how often the VM hosts are asked what they have; 0: the engine's default */
	unsigned int host_grace_s;     /* a VM host unreached this long is lost; 0: the engine's default */
	unsigned int mcp_sessions;     /* MCP sessions the store keeps; 0: the engine's default */
	unsigned int metrics_interval_ms; /* how often running sandboxes are sampled; 0: the engine's default */
	unsigned int metrics_window_s;    /* how long their samples are kept; 0: the engine's default */
	/* Micro-dollars per GiB-hour a paused sandbox costs: 0 the engine's default, SAAS_ENGINE_PAUSED_PRICE_FREE free. */
	int64_t paused_price;
	/* The preview proxy's bounds on a guest's server, in seconds (AAS_PREVIEW_*_TIMEOUT_DEFAULT). */
	unsigned int preview_connect_timeout_s;    /* to open the tunnel */
	unsigned int preview_first_byte_timeout_s; /* from the request sent to the answer's whole head */
	unsigned int preview_idle_timeout_s;       /* no byte either way, in a body or a WebSocket */
	/* Accounts for people and their pages (web/people.c). */
	int signup;                      /* AAS_SIGNUP_*: who may make an account on /signup */
	int secure_cookies;              /* 1 behind TLS: Secure "__Host-" cookies, https Origins only */
	unsigned int session_idle_s;     /* a session not used this long ends */
	unsigned int session_max_s;      /* and every session ends this long after log-in */
	unsigned int login_attempts;     /* log-ins and sign-ups one account may try at once (refilled hourly) */
	unsigned int max_password_hashes; /* Argon2id hashes at once (64 MiB each); 0: the CPUs (web/people.c) */
	unsigned int signups_per_hour;   /* sign-ups taken from everyone together, per hour */
	int signup_credit;               /* AAS_SIGNUP_CREDIT_*: when an account made on /signup gets its credit */
	/* Terminals (api/pty.c): AAS_PTY_*_DEFAULT. */
	unsigned int pty_per_sandbox;
	unsigned int pty_per_account;
	unsigned int pty_frame_max;      /* bytes */
	unsigned int pty_idle_timeout_s;
	unsigned int pty_write_timeout_s;
	/* Load balancers (forwarded.c): whose client-address header is read, and which header. */
	char *trusted_proxies;           /* --trusted-proxies "CIDR[,CIDR...]"; NULL: none, no header is read */
	int forwarded_header;            /* AAS_FORWARDED_XFF or AAS_FORWARDED_RFC7239 (forwarded.h) */
};

enum { AAS_SIGNUP_CLOSED, AAS_SIGNUP_INVITE, AAS_SIGNUP_OPEN };
#define AAS_SESSION_IDLE_DEFAULT 28800    /* 8 hours */
#define AAS_SESSION_MAX_DEFAULT 604800    /* 7 days */
#define AAS_LOGIN_ATTEMPTS_DEFAULT 10
/* Sign-ups every client together may make in an hour: the free credit they give away is bounded. */
#define AAS_SIGNUPS_PER_HOUR_DEFAULT 100
/* An account made on /signup gets the new-account credit at once, or (open sign-up) when approved. */
enum { AAS_SIGNUP_CREDIT_AUTO, AAS_SIGNUP_CREDIT_APPROVAL };

/*
 * The bound on password hashes at once (--max-password-hashes): each takes
 * 64 MiB. Its default is the machine's CPUs (at most AAS_PASSWORD_HASHES_MAX).
 */
#define AAS_PASSWORD_HASHES_MAX 1024

/*
 * The front end's defaults (conn.c has the reasoning): connections in all,
 * per address, and each one's thread stack. 8192 x 1 MiB bounds the stacks at
 * 8 GiB of address space, of which an idle connection touches a few pages;
 * 342 addresses are needed to fill it. 24 per address holds what one
 * account may legitimately keep open (16 streamed execs, a browser's 6) with
 * 2 to spare. 1 MiB holds jansson's deepest parse (2048 levels, about
 * 640 KiB) with room to spare: an escaped QEMU or a guest may send that, and
 * a stack overflow would end the whole server.
 */
#define AAS_MAX_CONNECTIONS_DEFAULT 8192
#define AAS_PER_IP_CONNECTIONS_DEFAULT 24
#define AAS_CONNECTION_STACK_KB_DEFAULT 1024
#define AAS_CONNECTION_STACK_KB_MIN 256
#define AAS_CONNECTION_STACK_KB_MAX 65536
#define AAS_HEADER_TIMEOUT_DEFAULT 10     /* seconds */
#define AAS_BODY_TIMEOUT_DEFAULT 60       /* seconds, plus 1 per AAS_BODY_MIN_RATE bytes */
/* Default of --address-requests-per-second. */
#define AAS_ADDRESS_RATE_DEFAULT 20
/* Default of --preview-requests-per-second. */
#define AAS_PREVIEW_RATE_DEFAULT 100

#define AAS_PREVIEW_CONNECT_TIMEOUT_DEFAULT 10
#define AAS_PREVIEW_FIRST_BYTE_TIMEOUT_DEFAULT 60
#define AAS_PREVIEW_IDLE_TIMEOUT_DEFAULT 300
#define AAS_PREVIEW_TIMEOUT_MAX 86400

/* The bounds' defaults (struct aas_config's pty_* and --pty-*; docs/operations.md). */
#define AAS_PTY_PER_SANDBOX_DEFAULT 4      /* terminals open at once per sandbox; more get 429 "pty_sessions" */
#define AAS_PTY_PER_ACCOUNT_DEFAULT 16     /* ... and per account */
#define AAS_PTY_FRAME_MAX_DEFAULT (64u << 10) /* the largest frame a client may send; larger closes with 1009 */
#define AAS_PTY_FRAME_MAX_MAX (16u << 20)
#define AAS_PTY_IDLE_TIMEOUT_DEFAULT 3600  /* seconds silent both ways before a close with 1001 */
#define AAS_PTY_WRITE_TIMEOUT_DEFAULT 30   /* seconds a shell may take no input before a close with 1008 */


/* Fill from the environment, then argv; 0, or -1 after printing a one-line error. */
int aas_config_parse(struct aas_config *cfg, int argc, char **argv);
void aas_config_free(struct aas_config *cfg);
/* "uri=... images=..." for the libvirt driver, or NULL; free(). */
char *aas_config_driver_string(const struct aas_config *cfg);
const char *aas_config_usage(void);
/*
 * Does a store URL carry a password (postgresql://user:PASSWORD@... or a
 * password= parameter)? On a command line, every local uid, the QEMUs'
 * included, can read it in /proc/PID/cmdline.
 */
bool aas_store_url_has_password(const char *url);
/* The warning said at start when it does (docs/operations.md: PGPASSFILE, PGPASSWORD, AAS_STORE_URL). */
#define AAS_STORE_PASSWORD_WARNING                                                                                 \
	"--store carries a password, which every local user (each VM's QEMU too) can read in /proc: give it in "   \
	"PGPASSFILE or PGPASSWORD instead, or the whole URL in AAS_STORE_URL (docs/operations.md)"

#endif
