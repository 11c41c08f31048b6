#include <string.h>

#include "store/store.h"
#include "util/error.h"

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
	if (strstr(url, "://") && strncmp(url, "sqlite://", 9) != 0)
		return saas__inval("unknown store URL scheme in '%.64s' (use a path, sqlite:PATH or postgresql://...)", url);
	if (!*saas__sqlite_path(url))
		return saas__inval("empty SQLite path");
	*out = &saas__store_sqlite;
	return SAAS_OK;
}
