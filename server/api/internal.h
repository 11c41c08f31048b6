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

/* Does the client ask for an event stream (and not for JSON)? (exec.c) */
bool aas_wants_events(struct aas_req *r);

/*
 * Make out a 200 text/event-stream answer read by reader from cls, freed with
 * free_cls (exec.c). false after a 500 reply: free_cls(cls) has run then.
 */
bool aas_reply_event_stream(struct aas_reply *out, MHD_ContentReaderCallback reader, void *cls,
                            MHD_ContentReaderFreeCallback free_cls);

#endif
