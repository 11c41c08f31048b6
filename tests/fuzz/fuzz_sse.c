/*
 * The remote client's reader of the server's event streams (lib/remote/sse.c):
 * the input is the body of a streaming exec's answer, as the server (or
 * anything in its place) sends it.
 *
 * Oracles, besides the sanitizers: the body read in one piece and read in
 * pieces cut where the input says gives the same calls to the callbacks and
 * the same verdict (lines and events may span any number of writes); the
 * cursor is past the last chunk of each stream; and a stream that is not the
 * API's is refused as a protocol error, never as anything else (the only
 * other verdict is what a well-formed "error" event says).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remote/http.h"
#include "remote/sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What the callbacks were told, in order: a digest of the calls (bounded: the sequence's hash). */
struct record {
	uint64_t hash;
	unsigned int calls;
	uint64_t last_end[3]; /* per stream: where its last chunk ended */
};

static void mix(struct record *r, const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		r->hash = (r->hash ^ c[i]) * 1099511628211ULL;
	r->calls++;
}

static int on_started(void *ud, const char *id)
{
	mix(ud, "S", 1);
	mix(ud, id, strlen(id));
	return 0;
}

static int on_output(void *ud, int stream, uint64_t offset, const void *data, size_t len)
{
	struct record *r = ud;

	if (stream != SAAS_EXEC_STDOUT && stream != SAAS_EXEC_STDERR)
		abort();
	mix(r, &stream, sizeof(stream));
	mix(r, &offset, sizeof(offset));
	mix(r, data, len);
	r->last_end[stream] = offset + len;
	return 0;
}

static void on_lost(void *ud, int stream, uint64_t offset, uint64_t len)
{
	mix(ud, "L", 1);
	mix(ud, &stream, sizeof(stream));
	mix(ud, &offset, sizeof(offset));
	mix(ud, &len, sizeof(len));
}

/* Read body in pieces: a cut after every `step` bytes (0: in one piece). Returns the verdict. */
static int read_body(const uint8_t *body, size_t len, size_t step, struct record *r, saas_exec_cursor *cur,
                     bool *ended)
{
	saas_exec_callbacks cb = SAAS_EXEC_CALLBACKS_INIT;
	struct saas__sse s;
	int rc = 0;

	memset(r, 0, sizeof(*r));
	memset(cur, 0, sizeof(*cur));
	cb.started = on_started;
	cb.output = on_output;
	cb.lost = on_lost;
	cb.userdata = r;
	memset(&s, 0, sizeof(s));
	s.cb = &cb;
	s.cur = cur;
	for (size_t off = 0; off < len && !rc;) {
		size_t k = step && len - off > step ? step : len - off;
		rc = saas__sse_write(&s, body + off, k);
		off += k;
	}
	*ended = s.ended;
	if (rc) {
		const saas_error *e = saas_error_last();
		if (!s.fail)
			abort(); /* stopped without a verdict: no callback asked to */
		/* Not the API talking is a protocol error; an "error" event's own code comes as an HTTP-class error. */
		if (s.fail != SAAS_EPROTOCOL && e->klass != SAAS_ERRCLASS_HTTP)
			abort();
		rc = s.fail;
	}
	saas__sse_free(&s);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct record whole, cut;
	saas_exec_cursor cw, cc;
	bool ew, ec;
	size_t step;
	int rw, rcut;

	if (size < 1)
		return 0;
	/* The first byte says where to cut: every 1 to 256 bytes. */
	step = (size_t)data[0] + 1;
	data++, size--;
	rw = read_body(data, size, 0, &whole, &cw, &ew);
	rcut = read_body(data, size, step, &cut, &cc, &ec);
	if (rw != rcut || whole.hash != cut.hash || whole.calls != cut.calls || ew != ec ||
	    memcmp(&cw, &cc, sizeof(cw)) != 0)
		abort();
	if ((whole.last_end[SAAS_EXEC_STDOUT] && cw.stdout_offset != whole.last_end[SAAS_EXEC_STDOUT]) ||
	    (whole.last_end[SAAS_EXEC_STDERR] && cw.stderr_offset != whole.last_end[SAAS_EXEC_STDERR]))
		abort();
	return 0;
}
