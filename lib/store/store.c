#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "store/dialect.h"
#include "store/store.h"
#include "util/error.h"
#include "util/util.h"

const char *saas__sqlite_path(const char *url)
{
	if (strncmp(url, "sqlite://", 9) == 0)
		return url + 9;
	if (strncmp(url, "sqlite:", 7) == 0)
		return url + 7;
	return url;
}

int saas__store_for_url(const saas_store **out, const char *url)
{
	if (!url || !*url)
		return saas__inval("empty store URL");
	if (strncmp(url, "postgresql://", 13) == 0 || strncmp(url, "postgres://", 11) == 0) {
#ifdef SAAS_WITH_POSTGRES
		*out = &saas__store_postgres;
		return SAAS_OK;
#else
		return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_ARGS, 0,
		                   "this libsaas was built without PostgreSQL support");
#endif
	}
	/* The scheme alone: what follows it may hold a password. */
	if (strstr(url, "://") && strncmp(url, "sqlite://", 9) != 0)
		return saas__inval("unknown store URL scheme '%.*s' (use a path, sqlite:PATH or postgresql://...)",
		                   (int)(strstr(url, "://") - url > 32 ? 32 : strstr(url, "://") - url), url);
	if (!*saas__sqlite_path(url))
		return saas__inval("empty SQLite path");
	*out = &saas__store_sqlite;
	return SAAS_OK;
}

/* Every slot of the table this library takes (SAAS_STORE_VERSION), by name, for saas__store_check's message. */
#define SLOT(name) { #name, offsetof(saas_store, name) }
static const struct {
	const char *name;
	size_t offset;
} store_slots[] = {
	SLOT(open), SLOT(close), SLOT(schema_version),
	SLOT(account_insert), SLOT(account_get), SLOT(account_list), SLOT(credit_add),
	SLOT(key_insert), SLOT(key_find), SLOT(key_revoke), SLOT(key_list),
	SLOT(sandbox_insert), SLOT(sandbox_get), SLOT(sandbox_list), SLOT(sandbox_set_ready),
	SLOT(sandbox_set_expiry), SLOT(sandbox_close), SLOT(sandbox_delete),
	SLOT(execution_insert), SLOT(execution_finish), SLOT(execution_get), SLOT(execution_fail_running),
	SLOT(port_insert), SLOT(port_list),
	SLOT(execution_prune), SLOT(limits_get), SLOT(limits_set),
	SLOT(port_find), SLOT(port_delete),
	SLOT(sandbox_network_get), SLOT(sandbox_network_set),
	SLOT(account_disable), SLOT(key_touch), SLOT(user_insert), SLOT(user_find), SLOT(user_list),
	SLOT(user_update), SLOT(session_insert), SLOT(session_find), SLOT(session_touch), SLOT(session_delete),
	SLOT(session_prune), SLOT(invite_insert),
	SLOT(sandbox_set_state),
	SLOT(sandbox_egress_record), SLOT(sandbox_egress_rebase), SLOT(execution_list),
	SLOT(lease_take), SLOT(lease_release), SLOT(lease_get),
	SLOT(host_insert), SLOT(host_get), SLOT(host_list), SLOT(host_set_state), SLOT(host_seen), SLOT(host_delete),
	SLOT(sandbox_place),
	SLOT(mcp_session_insert), SLOT(mcp_session_touch), SLOT(mcp_session_delete), SLOT(mcp_session_prune),
	SLOT(sandbox_values), SLOT(lease_purge),
};
#undef SLOT
/* A slot appended to struct saas_store and not here would go unchecked. */
_Static_assert(offsetof(saas_store, lease_purge) + sizeof(void (*)(void)) == sizeof(saas_store),
               "store_slots must name every slot of struct saas_store");

int saas__store_check(const saas_store *store)
{
	if (store->version != SAAS_STORE_VERSION)
		return saas__inval("the store table is of version %u; this libsaas takes version %u (saas/sys/store.h)",
		                   store->version, SAAS_STORE_VERSION);
	if (!store->name || !*store->name)
		return saas__inval("the store table has no name");
	for (size_t i = 0; i < SAAS_ARRAY_SIZE(store_slots); i++) {
		void (*slot)(void);

		/* Every slot is a function pointer: read it as one, whatever its type. */
		memcpy(&slot, (const char *)store + store_slots[i].offset, sizeof(slot));
		if (!slot)
			return saas__inval("the store table \"%s\" has no %s slot; a store implements every one",
			                   store->name, store_slots[i].name);
	}
	return SAAS_OK;
}

int saas__store_lease_check(const char *name, const char *holder)
{
	if (!name || !holder)
		return saas__inval("lease name or holder is NULL");
	if (!*name || !*holder)
		return saas__inval("a lease needs a name and a holder");
	if (strlen(name) > SAAS_STORE_LEASE_NAME_MAX)
		return saas__inval("lease name is too long (at most %d bytes)", SAAS_STORE_LEASE_NAME_MAX);
	if (strlen(holder) > SAAS_STORE_HOLDER_MAX)
		return saas__inval("lease holder is too long (at most %d bytes)", SAAS_STORE_HOLDER_MAX);
	return SAAS_OK;
}

int saas__store_lease_time_check(int64_t now_ms, int64_t ttl_ms)
{
	if (ttl_ms <= 0 || now_ms < 0 || now_ms > INT64_MAX - ttl_ms)
		return saas__inval("lease time %lld + %lld ms is out of range", (long long)now_ms, (long long)ttl_ms);
	return SAAS_OK;
}

int saas__store_host_state_valid(int state)
{
	return state == SAAS_STORE_HOST_ACTIVE || state == SAAS_STORE_HOST_DRAINING || state == SAAS_STORE_HOST_LOST;
}

/* A fixed-size field of a record must be NUL-terminated inside its array, and not empty if `required`. */
static int host_field(const char *field, size_t size, int required, const char *what)
{
	if (!memchr(field, '\0', size))
		return saas__inval("%s is too long (at most %zu bytes)", what, size - 1);
	if (required && !*field)
		return saas__inval("a host needs a %s", what);
	return SAAS_OK;
}

int saas__store_host_check(const saas_store_host *h)
{
	int rc;

	if (!h)
		return saas__inval("host is NULL");
	if ((rc = host_field(h->id, sizeof(h->id), 1, "host id")) < 0 ||
	    (rc = host_field(h->name, sizeof(h->name), 1, "host name")) < 0 ||
	    (rc = host_field(h->uri, sizeof(h->uri), 1, "host URI")) < 0 ||
	    (rc = host_field(h->address, sizeof(h->address), 0, "host address")) < 0)
		return rc;
	if (!saas__store_host_state_valid(h->state))
		return saas__inval("host state %d is not active, draining or lost", h->state);
	if (h->cpu_overcommit_milli < 1 || h->cpu_overcommit_milli > SAAS__OVERCOMMIT_MILLI_MAX ||
	    h->mem_overcommit_milli < 1 || h->mem_overcommit_milli > SAAS__OVERCOMMIT_MILLI_MAX)
		return saas__inval("host overcommit %u/%u thousandths is out of range (1 to %u)", h->cpu_overcommit_milli,
		                   h->mem_overcommit_milli, SAAS__OVERCOMMIT_MILLI_MAX);
	if (h->memory_mb > SAAS__HOST_MEMORY_MB_MAX)
		return saas__inval("host memory %llu MiB is out of range", (unsigned long long)h->memory_mb);
	return SAAS_OK;
}

int saas__store_field(const char *field, size_t size, const char *what)
{
	if (!memchr(field, '\0', size))
		return saas__inval("%s is too long (at most %zu bytes)", what, size - 1);
	return SAAS_OK;
}

int saas__store_arg(const char *arg, size_t max, const char *what)
{
	if (!arg)
		return saas__inval("%s is NULL", what);
	if (strnlen(arg, max + 1) > max)
		return saas__inval("%s is too long (at most %zu bytes)", what, max);
	return SAAS_OK;
}

int saas__store_not_found(const char *what, const char *id)
{
	return saas__error(SAAS_ENOTFOUND, SAAS_ERRCLASS_STORE, 0, "no %s '%.64s'", what, id);
}
