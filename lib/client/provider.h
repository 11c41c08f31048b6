/*
 * Internal: what a client provider implements. A client is one table of
 * operations and the provider's own state; the local engine (core/) and the
 * REST client (remote/) each fill one. The public calls in client/ check
 * their arguments once for both and then call the table. Neither client/ nor
 * a provider other than the local one includes core/core.h: the engine's
 * insides are not their business.
 */
#ifndef SAAS_CLIENT_PROVIDER_H
#define SAAS_CLIENT_PROVIDER_H

#include "saas.h"
#include "util/error.h"
#include "util/util.h"

/* Where a relative guest path lands. */
#define SAAS_WORKSPACE "/workspace"

/* A list of "KEY=VALUE" within bounds, keys unique (shell names when `shell`): SAAS_EINVAL naming `what` otherwise. */
int saas__pairs_check(const char *const *list, size_t max, size_t key_max, size_t value_max, bool shell,
                      const char *what);
/* A guest path within the guest's bounds (client/client.c); NULL or "" is SAAS_EINVAL when required. */
int saas__check_path(const char *path, bool required);
/* An execution's or a terminal's "NAME=VALUE" list within exec's bounds (client/client.c); NULL is none. */
int saas__check_env(const char *const *env);

/* Frees what the engine's saas__sizes_public() made (client/free.c); NULL-safe. */
void saas__sizes_public_free(saas_size **sizes, size_t n);

/* Longest domain name in a network rule (RFC 1035), and longest normalised rule ("*." and a name). */
#define SAAS_NETWORK_NAME_MAX 253
#define SAAS_NETWORK_RULE_MAX (SAAS_NETWORK_NAME_MAX + 2)

/* An egress policy after validation (client/network.c): what providers pass on. */
struct saas__network {
	int mode;                      /* saas_network_mode */
	char **allow;                  /* NULL-terminated normalised rules; never NULL once read */
	char **deny;
	size_t nallow, ndeny;
};

/* Validate and normalise a spec; every bad rule is SAAS_EINVAL naming it. Clear *out after. */
int saas__network_read(struct saas__network *out, const saas_network_spec *spec);
/* The same for the create options' "isolated" / "internet". */
int saas__network_of_name(struct saas__network *out, const char *name);
void saas__network_clear(struct saas__network *net);
/* One rule of `list` ("allow" or "deny") normalised into out. */
int saas__network_rule(const char *list, const char *in, char out[SAAS_NETWORK_RULE_MAX + 1]);
/* "isolated" -> SAAS_NETWORK_ISOLATED ...; -1 for anything else. */
int saas__network_mode_parse(const char *name);
/* Rules joined by '\n' (the store's form), and back; NULL / SAAS_ENOMEM when out of memory. */
char *saas__network_join(char *const *rules);
int saas__network_split(const char *text, char ***out);
void saas__rules_free(char **rules);
/* A saas_network_info holding copies of the lists (NULL: empty); counters 0. */
int saas__network_info_new(saas_network_info **out, int mode, char *const *allow, char *const *deny);
void saas__network_info_free(saas_network_info *ni);

/* A terminal session as a provider made it (client/pty.c holds the public calls on it). */
struct saas__pty_ops {
	int (*resize)(saas_pty *pty, unsigned int cols, unsigned int rows);
	/* Hang up, give the exit status and free what the provider holds (not fd, not pty). */
	void (*close)(saas_pty *pty, int *exit_status);
};

struct saas_pty {
	const struct saas__pty_ops *ops;
	int fd;                        /* a stream socket: the terminal's bytes both ways, EOF once it ended */
	unsigned int write_timeout_ms; /* saas_pty_write() without progress this long fails; 0: never */
	void *provider;                /* provider-private state */
};

/* A terminal to open, validated by client/pty.c. */
struct saas__pty_req {
	const char *term;              /* never NULL */
	unsigned int cols, rows;
	int tty;
	const char *cwd;               /* as given (relative: under the workspace), or NULL: the home */
	const char *const *env;        /* NULL-terminated "NAME=VALUE", or NULL */
};

/* What a client is: the same calls, served locally (core/local.c) or over REST (remote/). */
struct saas__client_ops {
	int (*account)(saas_client *c, saas_account_info **out);
	int (*usage)(saas_client *c, int64_t from_ms, int64_t to_ms, saas_usage **out);
	/* net: the validated policy, or NULL for the default. */
	int (*sandbox_create)(saas_client *c, const saas_create_options *opts, const struct saas__network *net,
	                      saas_sandbox **out);
	/* flags: 0 or SAAS_GET_RECORDED. */
	int (*sandbox_get)(saas_client *c, const char *id, unsigned int flags, saas_sandbox **out);
	/* metadata: NULL, or the checked "KEY=VALUE" pairs every sandbox listed must hold. */
	int (*sandbox_list)(saas_client *c, const char *cursor, unsigned int limit, const char *const *metadata,
	                    unsigned int flags, saas_sandbox_list **out);
	/* flags: 0 or SAAS_EXTEND_FROM_NOW. */
	int (*sandbox_extend)(saas_client *c, const char *id, int64_t seconds, unsigned int flags, saas_sandbox **out);
	int (*sandbox_destroy)(saas_client *c, const char *id, saas_sandbox **out);
	int (*exec)(saas_client *c, const char *id, const char *command, const saas_exec_options *opts,
	            unsigned int flags, saas_execution **out);
	int (*execution_get)(saas_client *c, const char *id, saas_execution **out);
	int (*file_write)(saas_client *c, const char *id, const char *path, saas_read_fn reader, void *ud,
	                  int64_t size, unsigned int mode);
	int (*file_read)(saas_client *c, const char *id, const char *path, int64_t max, saas_write_fn writer,
	                 void *ud, int64_t *size);
	int (*file_list)(saas_client *c, const char *id, const char *path, unsigned int depth,
	                 unsigned int max_entries, saas_file_list **out);
	int (*port_expose)(saas_client *c, const char *id, unsigned int port, char **url);
	int (*port_connect)(saas_client *c, const char *id, unsigned int port, int *fd);
	int (*port_unexpose)(saas_client *c, const char *id, unsigned int port);
	void (*free)(saas_client *c);
	int (*sandbox_network_set)(saas_client *c, const char *id, const struct saas__network *net, saas_sandbox **out);
	/* *out is calloc'd by the provider, its fd and ops set. */
	int (*pty_open)(saas_client *c, const char *id, const struct saas__pty_req *req, saas_pty **out);
	/* Executions as they run (0.2.0); NULL: SAAS_ENOTSUP. */
	int (*exec_stream)(saas_client *c, const char *id, const char *command, const saas_exec_options *opts,
	                   const saas_exec_callbacks *cb, unsigned int flags, saas_execution **out);
	int (*execution_follow)(saas_client *c, const char *id, saas_exec_cursor *cursor, const saas_exec_callbacks *cb,
	                        unsigned int wait_ms, unsigned int flags, saas_execution **out);
	int (*execution_stdin)(saas_client *c, const char *id, const void *data, size_t len, unsigned int flags);
	int (*execution_signal)(saas_client *c, const char *id, int signum, unsigned int flags);
	int (*execution_list_running)(saas_client *c, const char *sandbox_id, saas_execution_list **out);
	int (*execution_cancel)(saas_client *c, const char *id);
	/* Fork, pause, resume (0.2.0); net: the children's validated policy, or NULL for the parent's. */
	int (*sandbox_fork)(saas_client *c, const char *id, unsigned int count, int64_t timeout_s,
	                    const struct saas__network *net, saas_sandbox_list **out);
	int (*sandbox_pause)(saas_client *c, const char *id, saas_sandbox **out);
	int (*sandbox_resume)(saas_client *c, const char *id, saas_sandbox **out);
	/* A sandbox's executions, newest first; limit already bounded and defaulted. */
	int (*execution_list)(saas_client *c, const char *sandbox_id, const char *cursor, unsigned int limit,
	                      saas_execution_list **out);
	/* A sandbox's samples in [start_ms, end_ms] (end_ms 0: now), checked; NULL: SAAS_ENOTSUP. */
	int (*sandbox_metrics)(saas_client *c, const char *id, int64_t start_ms, int64_t end_ms, saas_metric_list **out);
	/* Directories, removal and renames (0.2.0); paths checked, flags known; NULL: SAAS_ENOTSUP. */
	int (*file_mkdir)(saas_client *c, const char *id, const char *path, int *created);
	int (*file_remove)(saas_client *c, const char *id, const char *path);
	int (*file_rename)(saas_client *c, const char *id, const char *from, const char *to, unsigned int flags);
	/*
	 * Code contexts (0.2.0; client/code.c checked the arguments: a language
	 * normalised to "python", "javascript" or "bash" or NULL, ids of
	 * [A-Za-z0-9._-], options defaulted and bounded); NULL: SAAS_ENOTSUP.
	 */
	int (*code_context_create)(saas_client *c, const char *id, const saas_code_context_options *o,
	                           saas_code_context **out);
	int (*code_context_list)(saas_client *c, const char *id, saas_code_context_list **out);
	int (*code_context_restart)(saas_client *c, const char *id, const char *context_id);
	int (*code_context_delete)(saas_client *c, const char *id, const char *context_id);
	int (*code_run)(saas_client *c, const char *id, const char *code, const saas_code_run_options *o,
	                saas_code_execution **out);
};

struct saas_client {
	const struct saas__client_ops *ops;
	char account_id[SAAS_ID_MAX + 1];
	saas_engine *engine;           /* local provider; opaque to the others */
	void *provider;                /* provider-private state */
};

#endif
