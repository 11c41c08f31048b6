/*
 * The engine's reader of a code server's answers: HTTP/1.1 response framing
 * and E2B's code-interpreter events (code_wire.h). The guest is hostile: a
 * head, a line, a result, a run's output are each bounded, and nothing of a
 * run is held but its current line and what the execution keeps.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "core/code_wire.h"
#include "util/error.h"

enum { ST_STATUS, ST_HEADERS, ST_BODY, ST_CHUNK_SIZE, ST_CHUNK_DATA, ST_CHUNK_END, ST_TRAILERS, ST_DONE };

void saas__code_reader_init(struct saas__code_reader *r, bool lines, size_t line_max, saas__code_line_fn on_line,
                            void *ud)
{
	memset(r, 0, sizeof(*r));
	r->lines = lines;
	r->line_max = line_max;
	r->on_line = on_line;
	r->ud = ud;
	r->state = ST_STATUS;
}

void saas__code_reader_free(struct saas__code_reader *r)
{
	saas__buf_free(&r->body);
	saas__buf_free(&r->head);
	saas__buf_free(&r->line);
}

static int bad(struct saas__code_reader *r, const char *what)
{
	snprintf(r->why, sizeof(r->why), "%s", what);
	return SAAS_EPROTOCOL;
}

/* Does this response's body go to on_line (a 200 of a run), rather than into r->body? */
static bool to_lines(const struct saas__code_reader *r)
{
	return r->lines && r->status == 200;
}

/* A line of the body, complete: told (a run's), or nothing (empty lines are tolerated, not E2B's). */
static int body_line(struct saas__code_reader *r)
{
	size_t n = r->line.len;
	int rc = 0;

	if (n && r->line.data[n - 1] == '\r')
		n--;
	if (n)
		rc = r->on_line(r->ud, r->line.data, n);
	r->line.len = 0;
	return rc;
}

/* Bytes of the body, whatever the framing. */
static int body_bytes(struct saas__code_reader *r, const char *p, size_t n)
{
	if (!to_lines(r)) {
		size_t cap = r->status == 200 ? SAAS__CODE_BODY_MAX : SAAS__CODE_ERROR_BODY_MAX;
		size_t take = n;
		if (r->body.len + n > cap) {
			if (r->status == 200)
				return SAAS_ETOOBIG;
			take = cap - r->body.len; /* an error's text: its start says enough */
		}
		return take && saas__buf_put(&r->body, p, take) < 0 ? SAAS_ENOMEM : 0;
	}
	while (n) {
		const char *nl = memchr(p, '\n', n);
		size_t k = nl ? (size_t)(nl - p) : n;
		int rc;

		if (r->skipping) {
			/* The rest of a line over the bound: dropped up to its end. */
		} else if (r->line.len + k > r->line_max) {
			r->skipping = true;
			r->dropped++;
			r->line.len = 0;
		} else if (saas__buf_put(&r->line, p, k) < 0) {
			return SAAS_ENOMEM;
		}
		p += k, n -= k;
		if (!nl)
			break;
		p++, n--;
		if (r->skipping) {
			r->skipping = false;
			continue;
		}
		if ((rc = body_line(r)) != 0)
			return rc;
	}
	return 0;
}

static int body_end(struct saas__code_reader *r)
{
	r->state = ST_DONE;
	r->done = true;
	/* A last line without its '\n' is a line all the same. */
	if (to_lines(r) && !r->skipping && r->line.len)
		return body_line(r);
	return 0;
}

/* A header line of the head (without CRLF); an empty one ends the head. */
static int head_line(struct saas__code_reader *r, const char *s, size_t n)
{
	if (r->state == ST_STATUS) {
		/* "HTTP/1.x NNN reason" */
		if (n < 12 || strncmp(s, "HTTP/1.", 7) != 0 || (s[7] != '0' && s[7] != '1') || s[8] != ' ' ||
		    !isdigit((unsigned char)s[9]) || !isdigit((unsigned char)s[10]) || !isdigit((unsigned char)s[11]) ||
		    (n > 12 && s[12] != ' '))
			return bad(r, "the code server's answer is not HTTP/1.x");
		r->status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
		if (r->status < 100)
			return bad(r, "the code server's answer has no valid status");
		r->state = ST_HEADERS;
		return 0;
	}
	if (r->state == ST_TRAILERS) {
		if (n == 0)
			return body_end(r);
		return 0;
	}
	if (n == 0) {
		if (r->status >= 100 && r->status < 200) {
			/* An interim answer (100 Continue): the real one follows. */
			r->state = ST_STATUS;
			r->chunked = r->has_length = false;
			return 0;
		}
		if (r->chunked) {
			r->state = ST_CHUNK_SIZE;
		} else if (r->has_length) {
			r->state = ST_BODY;
			if (r->remaining == 0)
				return body_end(r);
		} else {
			r->state = ST_BODY; /* to the close */
		}
		return 0;
	}
	const char *colon = memchr(s, ':', n);
	if (!colon || colon == s)
		return bad(r, "the code server sent a header line without a name");
	size_t nlen = (size_t)(colon - s);
	const char *v = colon + 1, *end = s + n;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	if (nlen == 17 && strncasecmp(s, "Transfer-Encoding", 17) == 0) {
		if ((size_t)(end - v) != 7 || strncasecmp(v, "chunked", 7) != 0)
			return bad(r, "the code server sent a transfer coding other than chunked");
		if (r->has_length)
			return bad(r, "the code server sent both Content-Length and chunked");
		r->chunked = true;
	} else if (nlen == 14 && strncasecmp(s, "Content-Length", 14) == 0) {
		uint64_t v64 = 0;
		if (v == end || end - v > 19 || r->chunked || r->has_length)
			return bad(r, "the code server sent a bad or repeated Content-Length");
		for (const char *p = v; p < end; p++) {
			if (!isdigit((unsigned char)*p))
				return bad(r, "the code server sent a Content-Length that is not a number");
			v64 = v64 * 10 + (uint64_t)(*p - '0');
		}
		r->has_length = true;
		r->remaining = v64;
	}
	return 0;
}

/* Feed the head: consumes up to its end; *used says how much. */
static int head_feed(struct saas__code_reader *r, const char *p, size_t n, size_t *used)
{
	size_t i = 0;

	while (i < n && (r->state == ST_STATUS || r->state == ST_HEADERS || r->state == ST_TRAILERS)) {
		const char *nl = memchr(p + i, '\n', n - i);
		size_t k = nl ? (size_t)(nl - (p + i)) : n - i;
		int rc;

		if (r->head.len + k > SAAS__CODE_HEAD_LINE_MAX || (r->head_total += k + 1) > SAAS__CODE_HEAD_MAX) {
			*used = i;
			return bad(r, "the code server's answer has a head over its bound");
		}
		if (saas__buf_put(&r->head, p + i, k) < 0)
			return SAAS_ENOMEM;
		i += k;
		if (!nl)
			break;
		i++;
		size_t len = r->head.len;
		if (len && r->head.data[len - 1] == '\r')
			len--;
		rc = head_line(r, r->head.data ? r->head.data : "", len);
		r->head.len = 0;
		if (rc)
			return rc;
	}
	*used = i;
	return 0;
}

int saas__code_reader_feed(struct saas__code_reader *r, const void *data, size_t len)
{
	const char *p = data;
	int rc;

	while (len && r->state != ST_DONE) {
		size_t used = 0, k;

		switch (r->state) {
		case ST_STATUS:
		case ST_HEADERS:
		case ST_TRAILERS:
			rc = head_feed(r, p, len, &used);
			p += used, len -= used;
			if (rc)
				return rc;
			break;
		case ST_BODY:
			k = len;
			if (r->has_length && k > r->remaining)
				k = (size_t)r->remaining;
			if ((rc = body_bytes(r, p, k)) != 0)
				return rc;
			p += k, len -= k;
			if (r->has_length && (r->remaining -= k) == 0 && (rc = body_end(r)) != 0)
				return rc;
			break;
		case ST_CHUNK_SIZE: {
			/* "HEX[;ext]\r\n", read into head (bounded like a header line). */
			const char *nl = memchr(p, '\n', len);
			k = nl ? (size_t)(nl - p) : len;
			if (r->head.len + k > 64)
				return bad(r, "the code server sent a chunk size line over 64 bytes");
			if (saas__buf_put(&r->head, p, k) < 0)
				return SAAS_ENOMEM;
			p += k, len -= k;
			if (!nl)
				break;
			p++, len--;
			uint64_t size = 0;
			size_t i = 0, digits = 0;
			for (; i < r->head.len && isxdigit((unsigned char)r->head.data[i]); i++, digits++) {
				if (digits >= 15)
					return bad(r, "the code server sent a chunk size too large");
				char c = r->head.data[i];
				size = size * 16 + (uint64_t)(isdigit((unsigned char)c) ? c - '0' : (tolower((unsigned char)c) - 'a' + 10));
			}
			if (!digits || (i < r->head.len && r->head.data[i] != ';' && r->head.data[i] != '\r'))
				return bad(r, "the code server sent a bad chunk size");
			r->head.len = 0;
			if (size == 0) {
				r->state = ST_TRAILERS;
			} else {
				r->remaining = size;
				r->state = ST_CHUNK_DATA;
			}
			break;
		}
		case ST_CHUNK_DATA:
			k = len < r->remaining ? len : (size_t)r->remaining;
			if ((rc = body_bytes(r, p, k)) != 0)
				return rc;
			p += k, len -= k;
			if ((r->remaining -= k) == 0)
				r->state = ST_CHUNK_END;
			break;
		case ST_CHUNK_END:
			/* "\r\n" (a bare "\n" tolerated) after a chunk's data. */
			if (*p == '\r' && r->head.len == 0) {
				r->head.len = 1; /* a flag: the CR was seen */
				p++, len--;
			} else if (*p == '\n') {
				r->head.len = 0;
				r->state = ST_CHUNK_SIZE;
				p++, len--;
			} else {
				return bad(r, "the code server sent a chunk without its CRLF");
			}
			break;
		default:
			return bad(r, "the code server's answer is past its end");
		}
	}
	return 0;
}

int saas__code_reader_eof(struct saas__code_reader *r)
{
	if (r->state == ST_DONE)
		return 0;
	if (r->state == ST_BODY && !r->has_length) {
		int rc = body_end(r);
		return rc > 0 ? 0 : rc;
	}
	return bad(r, r->state == ST_STATUS && r->status == 0 && r->head.len == 0
	                      ? "the code server closed the connection without an answer"
	                      : "the code server closed the connection in the middle of its answer");
}

/* ---- a run's events ---- */

size_t saas__utf8_cut(const char *s, size_t len, size_t max)
{
	size_t n = len < max ? len : max;

	if (n == len)
		return n;
	/* Back off continuation bytes (10xxxxxx) to the start of the character cut in two. */
	while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--;
	return n;
}

int saas__code_run_init(struct saas__code_run *s, size_t max_output, size_t max_result, saas_code_event_fn on_event,
                        void *userdata)
{
	memset(s, 0, sizeof(*s));
	if (!(s->x = calloc(1, sizeof(*s->x))) || !(s->x->stdout_data = calloc(1, 1)) ||
	    !(s->x->stderr_data = calloc(1, 1))) {
		saas_code_execution_free(s->x);
		s->x = NULL;
		return saas__oom();
	}
	s->x->execution_count = -1;
	s->max_output = max_output;
	s->max_result = max_result;
	s->on_event = on_event;
	s->userdata = userdata;
	return SAAS_OK;
}

static int proto(struct saas__code_run *s, const char *fmt, const char *arg)
{
	snprintf(s->why, sizeof(s->why), fmt, arg);
	return SAAS_EPROTOCOL;
}

static int tell(struct saas__code_run *s, const saas_code_event *ev)
{
	s->told++;
	if (s->on_event && s->on_event(s->userdata, ev)) {
		s->cancelled = true;
		return 1;
	}
	return 0;
}

int saas__code_run_tick(struct saas__code_run *s)
{
	saas_code_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.type = SAAS_CODE_EVENT_TICK;
	return tell(s, &ev);
}

/* Append a stdout/stderr text within max_output, and tell what was kept. */
static int output(struct saas__code_run *s, int type, const char *text, size_t len)
{
	char **data = type == SAAS_CODE_EVENT_STDOUT ? &s->x->stdout_data : &s->x->stderr_data;
	size_t *have = type == SAAS_CODE_EVENT_STDOUT ? &s->x->stdout_len : &s->x->stderr_len;
	int *cut = type == SAAS_CODE_EVENT_STDOUT ? &s->x->stdout_truncated : &s->x->stderr_truncated;
	size_t room = s->max_output - *have, k = saas__utf8_cut(text, len, room);
	saas_code_event ev;
	char *p;

	if (k < len)
		*cut = 1;
	if (!k)
		return 0;
	if (!(p = realloc(*data, *have + k + 1)))
		return saas__oom();
	memcpy(p + *have, text, k);
	memset(&ev, 0, sizeof(ev));
	ev.type = type;
	ev.text = p + *have;
	ev.len = k;
	*data = p;
	*have += k;
	p[*have] = '\0';
	/* The event's text is NUL-terminated where it ends in the kept data, which is where the data ends. */
	return tell(s, &ev);
}

/* E2B's result keys and our MIME types; binary ones come base64. */
static const struct {
	const char *key, *mime;
	bool base64, json;
} formats[] = {
	{ "text", "text/plain", false, false },
	{ "html", "text/html", false, false },
	{ "markdown", "text/markdown", false, false },
	{ "svg", "image/svg+xml", false, false },
	{ "png", "image/png", true, false },
	{ "jpeg", "image/jpeg", true, false },
	{ "pdf", "application/pdf", true, false },
	{ "latex", "text/latex", false, false },
	{ "json", "application/json", false, true },
	{ "javascript", "application/javascript", false, false },
	{ "data", "e2b/data", false, true },
	{ "chart", "e2b/chart", false, true },
};

static void format_free(saas_code_format *f)
{
	if (f) {
		free(f->mime);
		free(f->data);
		free(f);
	}
}

static void result_free(saas_code_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->count; i++)
		format_free(r->formats[i]);
	free(r->formats);
	free(r);
}

/*
 * One format into r, within max_result (a format that does not fit is
 * dropped and the result flagged): 0, SAAS_EPROTOCOL, SAAS_ENOMEM.
 */
static int add_format(struct saas__code_run *s, saas_code_result *r, size_t *bytes, size_t *cap, const char *mime,
                      json_t *v, bool base64, bool json_ok)
{
	saas_code_format *f = NULL;
	void *data = NULL;
	size_t len = 0;
	int rc = SAAS_ENOMEM;

	if (json_is_string(v)) {
		const char *t = json_string_value(v);
		size_t tl = json_string_length(v);
		if (base64) {
			if (tl / 4 * 3 > s->max_result - *bytes) {
				r->truncated = 1; /* too large decoded: dropped before the work of decoding it */
				return 0;
			}
			if ((rc = saas_base64_decode(&data, &len, t, tl)) == SAAS_EINVAL) {
				saas__error_clear();
				return proto(s, "the code server sent a %s result that is not base64", mime);
			}
			if (rc < 0)
				return rc;
		} else {
			if (!(data = malloc(tl + 1)))
				return saas__oom();
			memcpy(data, t, tl);
			((char *)data)[tl] = '\0';
			len = tl;
		}
	} else if (json_ok && !json_is_null(v)) {
		if (!(data = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY)))
			return saas__oom();
		len = strlen(data);
	} else {
		return proto(s, "the code server sent a %s result that is not a string", mime);
	}
	if (len > s->max_result - *bytes) {
		free(data);
		r->truncated = 1;
		return 0;
	}
	if (SAAS__ARRAY_RESERVE(r->formats, *cap, r->count + 1) < 0 || !(f = calloc(1, sizeof(*f))) ||
	    !(f->mime = saas__strdup(mime))) {
		free(f);
		free(data);
		return saas__oom();
	}
	f->data = data;
	f->len = len;
	r->formats[r->count++] = f;
	*bytes += len;
	return 0;
}

static int result(struct saas__code_run *s, json_t *o)
{
	saas_code_execution *x = s->x;
	saas_code_result *r = NULL;
	json_t *main = json_object_get(o, "is_main_result"), *extra, *v, *cut;
	const char *k;
	size_t bytes = 0, cap = 0;
	saas_code_event ev;
	int rc;

	if (main && !json_is_boolean(main))
		return proto(s, "the code server sent a result whose %s is not a boolean", "is_main_result");
	cut = json_object_get(o, "truncated");
	if (cut && !json_is_null(cut) && !json_is_array(cut))
		return proto(s, "the code server sent a result whose %s is not a list", "truncated");
	if (x->result_count >= SAAS_CODE_RESULTS_MAX || s->results_bytes >= SAAS_CODE_RESULTS_BYTES_MAX) {
		x->results_truncated = 1;
		return 0;
	}
	if (!(r = calloc(1, sizeof(*r))))
		return saas__oom();
	r->is_main = json_is_true(main);
	/* The formats the code server left out for its own bound (--max-result): cut all the same. */
	r->truncated = json_array_size(cut) > 0;
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		v = json_object_get(o, formats[i].key);
		if (!v || json_is_null(v))
			continue;
		if ((rc = add_format(s, r, &bytes, &cap, formats[i].mime, v, formats[i].base64, formats[i].json)) < 0)
			goto fail;
	}
	/* "extra": other MIME types, keyed by their names; kept as text (strings) or JSON. */
	extra = json_object_get(o, "extra");
	if (extra && json_is_object(extra)) {
		json_object_foreach(extra, k, v) {
			if (!*k || strlen(k) > 255 || !strchr(k, '/') || json_is_null(v))
				continue;
			if ((rc = add_format(s, r, &bytes, &cap, k, v, false, true)) < 0)
				goto fail;
		}
	}
	if (s->results_bytes + bytes > SAAS_CODE_RESULTS_BYTES_MAX) {
		x->results_truncated = 1;
		result_free(r);
		return 0;
	}
	if (SAAS__ARRAY_RESERVE(x->results, s->results_cap, x->result_count + 1) < 0) {
		rc = SAAS_ENOMEM;
		goto fail;
	}
	x->results[x->result_count++] = r;
	s->results_bytes += bytes;
	memset(&ev, 0, sizeof(ev));
	ev.type = SAAS_CODE_EVENT_RESULT;
	ev.result = r;
	return tell(s, &ev);
fail:
	result_free(r);
	return rc;
}

static char *field_text(json_t *o, const char *key, bool *ok)
{
	json_t *v = json_object_get(o, key);

	if (!v || json_is_null(v))
		return saas__strdup("");
	if (!json_is_string(v)) {
		*ok = false;
		return NULL;
	}
	return saas__strdup(json_string_value(v));
}

static void error_free(saas_code_error *e)
{
	if (e)
		free(e->name), free(e->value), free(e->traceback), free(e);
}

/* Where a traceback's middle was cut (the code server's own cut says so in its words). */
#define TRACEBACK_CUT "\n[... cut ...]\n"

/*
 * Cut t (NUL-terminated, ours) to max bytes at UTF-8 boundaries, in place:
 * its start, or (middle) its first and last halves around TRACEBACK_CUT, the
 * outermost frames and the raise. Returns whether it was cut.
 */
static bool cut_text(char *t, size_t max, bool middle)
{
	const size_t mark = sizeof(TRACEBACK_CUT) - 1;
	size_t len = strlen(t), head, tail, room;

	if (len <= max)
		return false;
	if (!middle || max < mark) {
		t[saas__utf8_cut(t, len, max)] = '\0';
		return true;
	}
	room = max - mark;
	head = saas__utf8_cut(t, len, room / 2);
	/* len > max: the tail starts past head + mark, so the mark clobbers none of it. */
	tail = len - (room - head);
	while (tail < len && ((unsigned char)t[tail] & 0xC0) == 0x80)
		tail++;
	memcpy(t + head, TRACEBACK_CUT, mark);
	memmove(t + head + mark, t + tail, len - tail + 1);
	return true;
}

static int error_event(struct saas__code_run *s, json_t *o)
{
	saas_code_error *e = calloc(1, sizeof(*e));
	json_t *cut = json_object_get(o, "truncated");
	saas_code_event ev;
	bool ok = true;

	if (!e)
		return saas__oom();
	e->name = field_text(o, "name", &ok);
	e->value = field_text(o, "value", &ok);
	e->traceback = field_text(o, "traceback", &ok);
	if (!ok || !json_is_string(json_object_get(o, "name"))) {
		error_free(e);
		return proto(s, "the code server sent an %s event without its name, or with fields not strings", "error");
	}
	if (cut && !json_is_null(cut) && !json_is_array(cut)) {
		error_free(e);
		return proto(s, "the code server sent an error whose %s is not a list", "truncated");
	}
	if (!e->name || !e->value || !e->traceback) {
		error_free(e);
		return saas__oom();
	}
	/* The fields the code server cut for its own bounds, and ours: a hostile error is text like any other. */
	e->truncated = json_array_size(cut) > 0;
	if (cut_text(e->name, SAAS_CODE_ERROR_NAME_MAX, false))
		e->truncated = 1;
	if (cut_text(e->value, s->max_output, false))
		e->truncated = 1;
	if (cut_text(e->traceback, s->max_output, true))
		e->truncated = 1;
	if (s->x->error) {
		/* The first error is the run's (a later one, e.g. UnexpectedEndOfExecution, is its consequence). */
		error_free(e);
		return 0;
	}
	s->x->error = e;
	memset(&ev, 0, sizeof(ev));
	ev.type = SAAS_CODE_EVENT_ERROR;
	ev.error = e;
	return tell(s, &ev);
}

/*
 * The code server's notice that it cut the run (its own bounds, before
 * ours): "output" (its stdout and stderr together: both are flagged) or
 * "results". Another value is a newer server's, ignored.
 */
static int guest_cut(struct saas__code_run *s, json_t *cut)
{
	const char *what = json_string_value(cut);

	if (!cut || json_is_null(cut))
		return 0;
	if (!what)
		return proto(s, "the code server sent a %s that is not a string", "cut");
	if (strcmp(what, "output") == 0)
		s->x->stdout_truncated = s->x->stderr_truncated = 1;
	else if (strcmp(what, "results") == 0)
		s->x->results_truncated = 1;
	return 0;
}

int saas__code_run_line(void *ud, const char *line, size_t len)
{
	struct saas__code_run *s = ud;
	json_error_t jerr;
	json_t *o, *type;
	const char *t;
	int rc = 0;

	if (s->ended)
		return 0;
	/* Depth is bounded by jansson (2048); duplicate keys would make "which one" a question: refused. */
	if (!(o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr)))
		return proto(s, "the code server sent a line that is not JSON (%s)", jerr.text);
	if (!json_is_object(o) || !json_is_string(type = json_object_get(o, "type"))) {
		json_decref(o);
		return proto(s, "the code server sent a line that is not an event (%s)", "an object with a \"type\"");
	}
	t = json_string_value(type);
	if (strcmp(t, "stdout") == 0 || strcmp(t, "stderr") == 0) {
		json_t *text = json_object_get(o, "text");
		json_t *cut = json_object_get(o, "cut");
		if (!json_is_string(text))
			rc = proto(s, "the code server sent a %s event without its text", t);
		else if ((rc = guest_cut(s, cut)) == 0)
			rc = output(s, t[3] == 'o' ? SAAS_CODE_EVENT_STDOUT : SAAS_CODE_EVENT_STDERR, json_string_value(text),
			            json_string_length(text));
	} else if (strcmp(t, "result") == 0) {
		rc = result(s, o);
	} else if (strcmp(t, "error") == 0) {
		rc = error_event(s, o);
	} else if (strcmp(t, "number_of_executions") == 0) {
		json_t *n = json_object_get(o, "execution_count");
		saas_code_event ev;
		if (!json_is_integer(n) || json_integer_value(n) < 0) {
			rc = proto(s, "the code server sent a %s event without a count", t);
		} else {
			s->x->execution_count = (int64_t)json_integer_value(n);
			memset(&ev, 0, sizeof(ev));
			ev.type = SAAS_CODE_EVENT_COUNT;
			ev.execution_count = s->x->execution_count;
			rc = tell(s, &ev);
		}
	} else if (strcmp(t, "end_of_execution") == 0) {
		s->ended = true;
	}
	/* Any other type (keepalive, unexpected_end_of_execution, ...) says nothing to us: E2B's SDKs ignore them too. */
	json_decref(o);
	return rc;
}

/* ---- contexts ---- */

static int context_of(saas_code_context **out, json_t *o, char *why, size_t whysize)
{
	json_t *id = json_object_get(o, "id"), *lang = json_object_get(o, "language"), *cwd = json_object_get(o, "cwd");
	saas_code_context *c;

	*out = NULL;
	if (!json_is_object(o) || !json_is_string(id) || !json_string_length(id) ||
	    json_string_length(id) > SAAS_CODE_CONTEXT_ID_MAX || (lang && !json_is_string(lang) && !json_is_null(lang)) ||
	    (cwd && !json_is_string(cwd) && !json_is_null(cwd))) {
		snprintf(why, whysize, "the code server sent a context that is not {\"id\",\"language\",\"cwd\"}");
		return SAAS_EPROTOCOL;
	}
	for (const char *p = json_string_value(id); *p; p++)
		if (!(isalnum((unsigned char)*p) || *p == '-' || *p == '_' || *p == '.')) {
			snprintf(why, whysize, "the code server sent a context id that is not [A-Za-z0-9._-]");
			return SAAS_EPROTOCOL;
		}
	if (!(c = calloc(1, sizeof(*c))) || !(c->id = saas__strdup(json_string_value(id))) ||
	    !(c->language = saas__strdup(json_is_string(lang) ? json_string_value(lang) : "")) ||
	    !(c->cwd = saas__strdup(json_is_string(cwd) ? json_string_value(cwd) : ""))) {
		saas_code_context_free(c);
		return saas__oom();
	}
	*out = c;
	return SAAS_OK;
}

int saas__code_context_parse(saas_code_context **out, const char *text, size_t len, char *why, size_t whysize)
{
	json_error_t jerr;
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	int rc;

	*out = NULL;
	if (!o) {
		snprintf(why, whysize, "the code server's context is not JSON (%s)", jerr.text);
		return SAAS_EPROTOCOL;
	}
	rc = context_of(out, o, why, whysize);
	json_decref(o);
	return rc;
}

int saas__code_context_list_parse(saas_code_context_list **out, const char *text, size_t len, size_t max, char *why,
                                  size_t whysize)
{
	json_error_t jerr;
	json_t *a = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr), *v;
	saas_code_context_list *l = NULL;
	size_t i;
	int rc = SAAS_EPROTOCOL;

	*out = NULL;
	if (!a || !json_is_array(a)) {
		snprintf(why, whysize, "the code server's list of contexts is not a JSON array");
		goto out;
	}
	if (json_array_size(a) > max) {
		snprintf(why, whysize, "the code server listed %zu contexts, more than the %zu a sandbox may hold",
		         json_array_size(a), max);
		goto out;
	}
	if (!(l = calloc(1, sizeof(*l))) || !(l->items = calloc(json_array_size(a) + 1, sizeof(*l->items)))) {
		rc = saas__oom();
		goto out;
	}
	json_array_foreach(a, i, v) {
		if ((rc = context_of(&l->items[i], v, why, whysize)) < 0)
			goto out;
		l->count++;
	}
	*out = l;
	l = NULL;
	rc = SAAS_OK;
out:
	saas_code_context_list_free(l);
	json_decref(a);
	return rc;
}

/* ---- freeing (the public calls, here with what they free) ---- */

SAAS_EXTERN(void) saas_code_context_free(saas_code_context *c)
{
	if (!c)
		return;
	free(c->id);
	free(c->language);
	free(c->cwd);
	free(c);
}

SAAS_EXTERN(void) saas_code_context_list_free(saas_code_context_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->count; i++)
		saas_code_context_free(l->items[i]);
	free(l->items);
	free(l);
}

SAAS_EXTERN(void) saas_code_execution_free(saas_code_execution *x)
{
	if (!x)
		return;
	free(x->stdout_data);
	free(x->stderr_data);
	for (size_t i = 0; i < x->result_count; i++)
		result_free(x->results[i]);
	free(x->results);
	error_free(x->error);
	free(x);
}

SAAS_EXTERN(const char *) saas_code_status_name(int status)
{
	switch (status) {
	case SAAS_CODE_DONE:
		return "done";
	case SAAS_CODE_TIMEDOUT:
		return "timeout";
	case SAAS_CODE_CANCELLED:
		return "cancelled";
	default:
		return "unknown";
	}
}
