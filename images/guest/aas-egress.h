/*
 * aas-egress's loop (aas-egress.c), which tests/unit/test_ehost.c runs
 * against the servers' end with a socket pair for the port. The protocol is
 * lib/transport/egress_mux.h, which both ends compile.
 */
#ifndef AAS_EGRESS_H
#define AAS_EGRESS_H

#include "transport/egress_mux.h"

/*
 * Serve until *stop is set or the port ends: port is the egress port (a
 * stream), listener a TCP socket listening where the guest's connections
 * are redirected (each one's SO_ORIGINAL_DST says where it was going), dns
 * a UDP socket the guest's lookups are redirected to. 0 when stopped, -1
 * when the port ended or broke the protocol.
 */
int aas_egress_serve(int port, const int listener[2], const int dns[2], volatile int *stop);

#endif
