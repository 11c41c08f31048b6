/* Built against an installed libsaas only: the public header and the library. */
#include <saas.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	saas_engine_options o = SAAS_ENGINE_OPTIONS_INIT;
	saas_engine *engine = NULL;
	saas_account *acc = NULL;
	saas_client *client = NULL;
	saas_account_info *info = NULL;
	char *key = NULL, usd[32];
	int rc;

	if (argc != 2) {
		fprintf(stderr, "usage: %s STATE_DIR\n", argv[0]);
		return 2;
	}
	o.state_dir = argv[1];
	o.flags = SAAS_ENGINE_STORE_ONLY;
	if ((rc = saas_engine_open(&engine, &o)) < 0 ||
	    (rc = saas_account_create(&acc, engine, "consumer", SAAS_CREDIT_DEFAULT, 0)) < 0 ||
	    (rc = saas_key_create(&key, NULL, engine, acc->id, "consumer", 0)) < 0 ||
	    (rc = saas_client_open_local(&client, engine, key, 0)) < 0 ||
	    (rc = saas_account_info_get(&info, client)) < 0) {
		fprintf(stderr, "libsaas: %s: %s\n", saas_strerror(rc), saas_error_last()->message);
		return 1;
	}
	printf("libsaas %s: %s has %s USD, %zu sizes\n", saas_version(), info->name,
	       saas_usd_format(usd, sizeof(usd), info->balance_usd_micro), info->nsizes);
	saas_account_info_free(info);
	saas_client_free(client);
	saas_free(key);
	saas_account_free(acc);
	saas_engine_free(engine);
	return 0;
}
