/*
 * Internal: what a client provider implements. A client is one table of
 * operations and the provider's own state; the local engine (core/) and the
 * REST client (remote/) each fill one. A provider other than the local one
 * includes this header and never core/core.h: the engine's insides are not
 * its business.
 */
#ifndef SAAS_CORE_PROVIDER_H
#define SAAS_CORE_PROVIDER_H

#include "saas.h"
#include "util/error.h"
#include "util/util.h"

/* What a client is: the same calls, served locally (core/) or over REST (remote/). */
struct saas__client_ops {
	int (*account)(saas_client *c, saas_account_info **out);
	int (*usage)(saas_client *c, int64_t from_ms, int64_t to_ms, saas_usage **out);
	int (*sandbox_create)(saas_client *c, const saas_create_options *opts, saas_sandbox **out);
	int (*sandbox_get)(saas_client *c, const char *id, saas_sandbox **out);
	int (*sandbox_list)(saas_client *c, const char *cursor, unsigned int limit, unsigned int flags,
	                    saas_sandbox_list **out);
	int (*sandbox_extend)(saas_client *c, const char *id, int64_t seconds, saas_sandbox **out);
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
};

struct saas_client {
	const struct saas__client_ops *ops;
	char account_id[SAAS_ID_MAX + 1];
	saas_engine *engine;           /* local provider; opaque to the others */
	void *provider;                /* provider-private state */
};

#endif
