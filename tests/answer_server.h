/*
 * A server that answers anything: a thread on 127.0.0.1 that reads each
 * request whole (head, then a Content-Length or chunked body; an Expect:
 * 100-continue is answered first) and hands it to a function that writes the
 * answer's bytes, then ends the connection. For the remote client's tests of
 * what a server may send (tests/unit/test_remote_answers.c) and its fuzzer
 * (tests/fuzz/fuzz_remote.c).
 */
#ifndef SAAS_TEST_ANSWER_SERVER_H
#define SAAS_TEST_ANSWER_SERVER_H

#include <stddef.h>

/* Write the answer to `fd`, the request being `req` (NUL-terminated, `len` bytes). */
typedef void (*answer_fn)(void *ud, int fd, const char *req, size_t len);

/* Start it (aborts on failure; it lives until exit); returns its port. */
unsigned short answer_server_start(answer_fn fn, void *ud);

/* Send all of data to fd; false when the client stopped reading (a verdict the test looks at, not an error). */
int answer_send(int fd, const void *data, size_t len);

/* Send an answer with "@ACCEPT@" replaced by the Sec-WebSocket-Accept of the request's key. */
void answer_send_ws(int fd, const char *req, const void *answer, size_t len);

#endif
