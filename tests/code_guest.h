/*
 * A test double of a HOSTILE code server, not the real one (the guest's is
 * images/guest/aas-code): a loopback listener that answers each connection
 * with canned bytes, as slowly and as wrongly as a test asks, and records
 * the request it got. The fake driver reaches it as guest port 49999
 * through SAAS_FAKE_PORTS, which code_guest_start() sets.
 */
#ifndef SAAS_TEST_CODE_GUEST_H
#define SAAS_TEST_CODE_GUEST_H

#include <stdbool.h>
#include <stddef.h>

/* Listen on 127.0.0.1 (a free port) and map guest port 49999 to it; the port. Aborts on failure. */
int code_guest_start(void);
void code_guest_stop(void);
/*
 * Answer the next connections with len bytes of `bytes` (copied), written
 * `drip` bytes at a time (0: at once) with drip_ms between; then close, or
 * (hold) wait until the client closes.
 */
void code_guest_answer(const char *bytes, size_t len, size_t drip, int drip_ms, bool hold);
/* The same for a 200 whose body is `ndjson`, chunked (in chunks of `chunk` bytes; 0: one). */
void code_guest_answer_ndjson(const char *ndjson, size_t chunk);
/* Answer POSTs with `text` instead (NULL: as the others). */
void code_guest_answer_post(const char *text);
/* The last request read (head and body), NUL-terminated; valid until the next connection. */
const char *code_guest_request(void);
/* Connections the client closed before the answer was all written, or while held (an interrupt), so far. */
unsigned int code_guest_hangups(void);

#endif
