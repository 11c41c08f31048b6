/*
 * aas-server's entry points: main.c's, and those of the programs that run the
 * server in process (the fake server of the REST tests, the fuzz harnesses).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_APP_H
#define AAS_APP_H

#include <saas.h>

#include "config.h"

/*
 * Everything main() does: the admin commands, `routes`, or serve until
 * SIGINT/SIGTERM. The engine opens on `driver` (saas_engine_options.driver),
 * as an out-of-tree backend's would; aas-server passes NULL, the built-in
 * driver, and an in-process test its fake. The table must outlive the call.
 */
int aas_main(int argc, char **argv, const struct saas_driver *driver);
/*
 * What aas_main does before it waits for a signal, for in-process tests (the
 * fuzzers): bind, open the engine on `driver` (NULL: the built-in one) and
 * serve in the background. cfg and driver must outlive the server. 0 with
 * *engine and *port set, or -1 after logging; call aas_stop() either way.
 */
int aas_start(const struct aas_config *cfg, const struct saas_driver *driver, saas_engine **engine,
              unsigned int *port);
/* Stop serving (requests in flight end) and free what aas_start made, the engine included. */
void aas_stop(saas_engine *engine);

#endif
