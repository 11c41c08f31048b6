/*
 * Internal: a store's listings as arrays, for the core.
 *
 * The store table (saas/sys/store.h) lists through callbacks, so that a
 * store never has to hold a whole listing for its caller. Most of the
 * core's callers want the rows in hand all the same (to translate them to
 * public records, or to act on each with the store free again): these copy
 * a listing into a growing array, over any store's table, built-in or not.
 *
 * Each returns 0 with *out (free() it; NULL when there are no rows) and
 * *count, or a negative code with *out NULL and *count 0. An execution's
 * strings are copies too: free the array with saas__store_executions_free.
 */
#ifndef SAAS_STORE_LIST_H
#define SAAS_STORE_LIST_H

#include <stddef.h>
#include <stdint.h>

#include "saas/sys/store.h"

int saas__store_accounts(const saas_store *st, void *ctx, saas_store_account **out, size_t *count);
int saas__store_keys(const saas_store *st, void *ctx, const char *account_id, saas_store_key **out, size_t *count);
int saas__store_users(const saas_store *st, void *ctx, saas_store_user **out, size_t *count);
int saas__store_sandboxes(const saas_store *st, void *ctx, const saas_store_filter *filter, saas_store_sandbox **out,
                          size_t *count);
int saas__store_ports(const saas_store *st, void *ctx, const char *sandbox_id, saas_store_port **out, size_t *count);
int saas__store_hosts(const saas_store *st, void *ctx, saas_store_host **out, size_t *count);
/* Without the output (execution_list gives none): command and error are copied. */
int saas__store_executions(const saas_store *st, void *ctx, const char *sandbox_id, int64_t before_started_ms,
                           const char *before_id, unsigned int limit, saas_store_execution **out, size_t *count);
/* Free an array of saas__store_executions; NULL-safe. */
void saas__store_executions_free(saas_store_execution *items, size_t count);

#endif
