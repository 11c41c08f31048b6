/*
 * toy: an example VM driver for libsaas, built outside the library against
 * its installed headers (saas/sys/driver.h), to show what a backend is.
 *
 * Its "VMs" are names in memory and its "guest" a toy shell that knows one
 * command, `echo WORDS`; everything else exits 127, as a shell would. It
 * isolates nothing and is not a sandbox: read it, then write a real one.
 */
#ifndef TOY_DRIVER_H
#define TOY_DRIVER_H

#include <saas/sys/driver.h>

/* The driver table, to put in saas_engine_options.driver. */
extern const saas_driver toy_driver;

#endif
