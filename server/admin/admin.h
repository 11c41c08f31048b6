/*
 * The admin commands (admin/): `aas-server account|key|user|invite|host ...`,
 * run beside a live server on a store-only engine.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_ADMIN_H
#define AAS_ADMIN_H

/* Run the command argv[1] names; the process's exit status. */
int aas_admin_main(int argc, char **argv);

#endif
