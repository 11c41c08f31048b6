/*
 * What the files of the REST API share and no other room may call.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_API_INTERNAL_H
#define AAS_API_INTERNAL_H

#include "server.h"

/*
 * Like aas_reply_json for an object with long strings (an execution's output):
 * written as it is sent, never whole in memory (json_stream.c). Steals body.
 */
void aas_reply_json_stream(struct aas_reply *out, unsigned int status, json_t *body);

/*
 * An event stream's slot, for exec's streams and code runs' alike (exec.c):
 * AAS_STREAMS_PER_ACCOUNT an account, AAS_STREAMS_MAX in all. false after a
 * 429 or 503.
 */
bool aas_stream_slot_take(const char *account, struct aas_reply *out);
void aas_stream_slot_release(const char *account);

#endif
