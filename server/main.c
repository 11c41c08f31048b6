/*
 * aas-server: the REST API v1 of libsaas, its preview proxy, and the admin
 * commands for accounts and keys.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include "app.h"

int main(int argc, char **argv)
{
	return aas_main(argc, argv, NULL);
}
