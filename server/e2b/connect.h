/*
 * The Connect protocol's floor (connectrpc.com/docs/protocol), as E2B's
 * in-sandbox daemon speaks it and its SDKs expect it: the JSON codec over
 * HTTP/1.1, unary calls and server streams. Pure code, no HTTP library: the
 * gateway (gateway.c) puts it on the wire, the unit tests and the fuzzer call
 * it directly.
 *
 * A stream is a sequence of envelopes, each `flags:u8 | length:u32 BE |
 * payload`. Flag 0x01 says the payload is compressed (never sent by the
 * SDKs, never by us: refused), 0x02 marks the end-stream frame whose payload
 * is {} or {"error":{"code","message"}}. Every length a client sends is
 * bounded here, next to the parser.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_E2B_CONNECT_H
#define AAS_E2B_CONNECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* Connect's codes, numbered as gRPC's (the SDKs print the number: "SandboxError: 2: [unknown] ..."). */
enum aas_connect_code {
	AAS_CONNECT_OK = 0,
	AAS_CONNECT_CANCELED = 1,
	AAS_CONNECT_UNKNOWN = 2,
	AAS_CONNECT_INVALID_ARGUMENT = 3,
	AAS_CONNECT_DEADLINE_EXCEEDED = 4,
	AAS_CONNECT_NOT_FOUND = 5,
	AAS_CONNECT_ALREADY_EXISTS = 6,
	AAS_CONNECT_PERMISSION_DENIED = 7,
	AAS_CONNECT_RESOURCE_EXHAUSTED = 8,
	AAS_CONNECT_FAILED_PRECONDITION = 9,
	AAS_CONNECT_ABORTED = 10,
	AAS_CONNECT_OUT_OF_RANGE = 11,
	AAS_CONNECT_UNIMPLEMENTED = 12,
	AAS_CONNECT_INTERNAL = 13,
	AAS_CONNECT_UNAVAILABLE = 14,
	AAS_CONNECT_DATA_LOSS = 15,
	AAS_CONNECT_UNAUTHENTICATED = 16
};
#define AAS_CONNECT_CODE_MAX AAS_CONNECT_UNAUTHENTICATED

#define AAS_CONNECT_FLAG_COMPRESSED 0x01u
#define AAS_CONNECT_FLAG_END 0x02u
#define AAS_CONNECT_HEADER_LEN 5

/*
 * The largest message either side may put in one envelope: a file chunk or
 * a command's stdin, base64 in JSON, fits with room. connect-go's default
 * read limit is unbounded; envd's clients send far less.
 */
#define AAS_CONNECT_MESSAGE_MAX ((size_t)4 << 20)

/* The wire name of a code ("invalid_argument"); NULL for one that is not Connect's. */
const char *aas_connect_code_name(int code);
/* The code a wire name names, or -1. */
int aas_connect_code_from_name(const char *name);
/* The HTTP status a unary error with this code is sent with (Connect's table; 499 for canceled). */
unsigned int aas_connect_http_status(int code);
/* The code a client reads from an HTTP status when the body names none (Connect's table). */
int aas_connect_code_from_http(unsigned int status);
/* The code for a libsaas status (SAAS_E*): what the SDK should make of it. */
int aas_connect_code_from_saas(int rc);

/* An envelope reader: feed it bytes in any pieces. Zero it to start. */
struct aas_connect_reader {
	size_t max;                  /* the largest payload taken; 0: AAS_CONNECT_MESSAGE_MAX */
	unsigned char head[AAS_CONNECT_HEADER_LEN];
	size_t head_have;
	uint32_t len;                /* the current frame's payload length, once head_have == 5 */
	char *payload;               /* its bytes so far (NUL-terminated for the JSON parser) */
	size_t have;
	bool failed;
};

/* Called for each whole frame; payload is borrowed for the call. Nonzero stops the reading. */
typedef int (*aas_connect_frame_cb)(void *ud, unsigned int flags, const char *payload, size_t len);

/*
 * Take len more bytes. 0 when they were taken (frames completed in them
 * given to cb), the callback's nonzero value when it stopped, or -1 with
 * *why (static text) for a frame refused: a payload over max, a compressed
 * one, unknown flags. Once it failed, every later call fails.
 */
int aas_connect_read(struct aas_connect_reader *r, const void *data, size_t len, aas_connect_frame_cb cb, void *ud,
                     const char **why);
/* Is the reader between frames (nothing of a frame read)? A stream that ends elsewhere was cut short. */
bool aas_connect_reader_idle(const struct aas_connect_reader *r);
void aas_connect_reader_free(struct aas_connect_reader *r);

/*
 * One envelope of flags and payload: malloc'd, *out_len bytes (5 + len);
 * NULL when out of memory or len is over 4 GiB - 1.
 */
unsigned char *aas_connect_frame(unsigned int flags, const void *payload, size_t len, size_t *out_len);
/*
 * The end-stream frame's payload: "{}" for AAS_CONNECT_OK, else
 * {"error":{"code":NAME,"message":MESSAGE}} (bytes of the message that are
 * not UTF-8 become '?'). malloc'd, NULL when out of memory.
 */
char *aas_connect_end_payload(int code, const char *message);
/* The body of a unary error, {"code":NAME,"message":MESSAGE}; malloc'd or NULL. */
char *aas_connect_error_body(int code, const char *message);

/*
 * A request message: a JSON object of at most max bytes, with the JSON
 * bounds the REST API has (values, depth) and no key given twice.
 * AAS_CONNECT_OK with *out (json_decref it), or INVALID_ARGUMENT (or
 * RESOURCE_EXHAUSTED for a size or bound) with why filled.
 */
int aas_connect_json(json_t **out, const char *text, size_t len, size_t max, char *why, size_t whysize);
/*
 * The body of a server-streaming call: exactly one envelope, not compressed,
 * not end-stream, its payload a request message as aas_connect_json takes.
 */
int aas_connect_unwrap(json_t **out, const char *body, size_t len, size_t max, char *why, size_t whysize);

#endif
