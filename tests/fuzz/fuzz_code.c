/*
 * The engine's reader of a code server's answers (lib/core/code_wire.c):
 * the input is what the guest's code server sends back for a run, head and
 * body, as hostile as it likes.
 *
 * Oracles, besides the sanitizers: the answer read whole and read in pieces
 * cut where the input says gives the same verdict, the same events and the
 * same execution (a line, a chunk and a head may span any number of reads);
 * what the execution keeps stays within the run's bounds; and a verdict is
 * only ever a protocol error (or out of memory), never anything else.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/code_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Small bounds, so that inputs reach them. */
#define MAX_OUTPUT 64
#define MAX_RESULT 256

struct record {
	uint64_t hash;
	unsigned int calls;
};

static void mix(struct record *r, const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		r->hash = (r->hash ^ c[i]) * 1099511628211ULL;
}

static int on_event(void *ud, const saas_code_event *ev)
{
	struct record *r = ud;

	r->calls++;
	mix(r, &ev->type, sizeof(ev->type));
	switch (ev->type) {
	case SAAS_CODE_EVENT_STDOUT:
	case SAAS_CODE_EVENT_STDERR:
		if (strlen(ev->text) != ev->len)
			abort();
		mix(r, ev->text, ev->len);
		break;
	case SAAS_CODE_EVENT_RESULT:
		for (size_t i = 0; i < ev->result->count; i++) {
			mix(r, ev->result->formats[i]->mime, strlen(ev->result->formats[i]->mime));
			mix(r, ev->result->formats[i]->data, ev->result->formats[i]->len);
		}
		break;
	case SAAS_CODE_EVENT_ERROR:
		mix(r, ev->error->name, strlen(ev->error->name));
		mix(r, ev->error->traceback, strlen(ev->error->traceback));
		break;
	case SAAS_CODE_EVENT_COUNT:
		mix(r, &ev->execution_count, sizeof(ev->execution_count));
		break;
	default:
		abort();
	}
	return 0;
}

static void check_bounds(const saas_code_execution *x)
{
	size_t total = 0;

	if (x->stdout_len > MAX_OUTPUT || x->stderr_len > MAX_OUTPUT || strlen(x->stdout_data) > x->stdout_len ||
	    x->result_count > SAAS_CODE_RESULTS_MAX)
		abort();
	for (size_t i = 0; i < x->result_count; i++) {
		size_t one = 0;
		for (size_t j = 0; j < x->results[i]->count; j++)
			one += x->results[i]->formats[j]->len;
		if (one > MAX_RESULT)
			abort();
		total += one;
	}
	if (total > SAAS_CODE_RESULTS_BYTES_MAX)
		abort();
}

/* Read the answer in pieces of `step` bytes (0: whole); the verdict, the record, and whether it ended. */
static int read_answer(const uint8_t *in, size_t len, size_t step, struct record *rec, bool *ended, int *status)
{
	struct saas__code_reader r;
	struct saas__code_run s;
	int rc = 0;

	memset(rec, 0, sizeof(*rec));
	if (saas__code_run_init(&s, MAX_OUTPUT, MAX_RESULT, on_event, rec) < 0)
		abort();
	saas__code_reader_init(&r, true, MAX_RESULT / 3 * 4 + 64, saas__code_run_line, &s);
	for (size_t off = 0; off < len && !rc && !r.done;) {
		size_t k = step && len - off > step ? step : len - off;
		rc = saas__code_reader_feed(&r, in + off, k);
		off += k;
	}
	if (!rc)
		rc = saas__code_reader_eof(&r);
	if (rc != 0 && rc != SAAS_EPROTOCOL && rc != SAAS_ETOOBIG && rc != SAAS_ENOMEM)
		abort();
	if (rc == SAAS_EPROTOCOL && !r.why[0] && !s.why[0])
		abort(); /* a protocol error always says why */
	check_bounds(s.x);
	mix(rec, s.x->stdout_data, s.x->stdout_len);
	mix(rec, s.x->stderr_data, s.x->stderr_len);
	mix(rec, &s.x->result_count, sizeof(s.x->result_count));
	mix(rec, &s.x->execution_count, sizeof(s.x->execution_count));
	mix(rec, &r.dropped, sizeof(r.dropped));
	mix(rec, r.body.data ? r.body.data : "", r.body.len);
	*ended = s.ended;
	*status = r.status;
	saas_code_execution_free(s.x);
	saas__code_reader_free(&r);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct record whole, cut;
	bool ew, ec;
	int rw, rc, sw, sc;
	size_t step;

	if (size < 1)
		return 0;
	/* The first byte says where to cut: every 1 to 256 bytes. */
	step = (size_t)data[0] + 1;
	data++, size--;
	rw = read_answer(data, size, 0, &whole, &ew, &sw);
	rc = read_answer(data, size, step, &cut, &ec, &sc);
	if (rw != rc || whole.hash != cut.hash || whole.calls != cut.calls || ew != ec || sw != sc)
		abort();
	/* The context readers on the same bytes: a verdict, never a crash. */
	{
		saas_code_context *c = NULL;
		saas_code_context_list *l = NULL;
		char why[256];
		saas__code_context_parse(&c, (const char *)data, size, why, sizeof(why));
		saas__code_context_list_parse(&l, (const char *)data, size, 8, why, sizeof(why));
		saas_code_context_free(c);
		saas_code_context_list_free(l);
	}
	return 0;
}
