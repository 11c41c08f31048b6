/*
 * saas_client_open_remote() in a build without the remote provider
 * (SAAS_WITH_REMOTE=OFF): the symbol stays, so programs link either way.
 */
#include "client/provider.h"

SAAS_EXTERN(int) saas_client_open_remote(saas_client **out, const char *base_url, const char *api_key,
                                         const saas_remote_options *options, unsigned int flags)
{
	(void)base_url;
	(void)api_key;
	(void)options;
	(void)flags;
	saas__error_clear();
	if (out)
		*out = NULL;
	return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_ARGS, 0, "libsaas was built without the remote client (SAAS_WITH_REMOTE=OFF)");
}
