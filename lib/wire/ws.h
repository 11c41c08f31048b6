/*
 * WebSocket framing (RFC 6455), pure: the handshake's accept value and the
 * frame head, for aas-server's terminal route and the remote client's side
 * of it. Payloads are whole frames in the caller's buffer; the caller bounds
 * a frame's length before it waits for the rest.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef SAAS_WIRE_WS_H
#define SAAS_WIRE_WS_H

#include <stddef.h>
#include <stdint.h>

enum { SAAS_WS_CONT = 0, SAAS_WS_TEXT = 1, SAAS_WS_BINARY = 2, SAAS_WS_CLOSE = 8, SAAS_WS_PING = 9, SAAS_WS_PONG = 10 };

/* The longest frame head: 2 bytes, 8 of length, 4 of mask. */
#define SAAS_WS_HEAD_MAX 14

/* Sec-WebSocket-Accept for a Sec-WebSocket-Key: 28 characters and a NUL. */
void saas__ws_accept(const char *key, char out[29]);

/* The head of one final frame; mask: 4 bytes (a client's frame, the payload then masked by the caller) or NULL. */
size_t saas__ws_head(unsigned char out[SAAS_WS_HEAD_MAX], int opcode, uint64_t len, const unsigned char *mask);

struct saas__ws_frame {
	int fin;
	int opcode;
	int masked;
	unsigned char mask[4];
	uint64_t len;            /* the payload's */
	size_t head;             /* the head's length: the payload starts there */
};

/*
 * Read a frame's head from buf[0..len): 1 when whole, 0 when more bytes are
 * needed, -1 when it breaks the protocol (reserved bits, an unknown opcode, a
 * control frame fragmented or over 125 bytes).
 */
int saas__ws_frame_parse(const unsigned char *buf, size_t len, struct saas__ws_frame *f);

/* Unmask a payload in place; `offset` is its first byte's place in the frame's payload. */
void saas__ws_unmask(unsigned char *data, size_t len, const unsigned char mask[4], uint64_t offset);

#endif
