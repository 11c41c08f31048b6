/*
 * aas-server's test seam: the VM driver its engine opens on, for the
 * programs that run the server in process with a fake driver (the fake
 * server of the REST tests, the fuzz harnesses). The real program never sets
 * one; that is why this lives apart from server.h, which needs no driver table.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_SERVER_TESTING_H
#define AAS_SERVER_TESTING_H

#include <saas/sys/driver.h>

/*
 * Open the serving engine on `driver` instead of the built-in one (NULL: the
 * built-in one again). Call before aas_main() or aas_start(); the table must
 * outlive the server.
 */
void aas_testing_driver_set(const saas_driver *driver);

#endif
