/*
 * The remote provider's event stream reader (sse.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remote/http.h"
#include "remote/sse.h"
#include "wire/wire.h"

static int sse_protocol(struct saas__sse *s, const char *what)
{
	s->fail = saas__error(SAAS_EPROTOCOL, SAAS_ERRCLASS_HTTP, 200, "the server's event stream has a bad %s", what);
	return -1;
}

/* One event; non-zero stops the read. */
static int sse_event(struct saas__sse *s)
{
	const char *bad = NULL;
	json_error_t jerr;
	const saas__buf *d = &s->frame.data;
	const char *event = s->frame.name;
	json_t *o = json_loadb(d->data ? d->data : "", d->len, 0, &jerr);
	int rc = 0;

	if (!o || !json_is_object(o)) {
		json_decref(o);
		return sse_protocol(s, "event");
	}
	if (!strcmp(event, "started")) {
		const char *id = json_string_value(json_object_get(o, "execution_id"));
		if (!id || strlen(id) > SAAS_ID_MAX) {
			rc = sse_protocol(s, "started event");
		} else {
			snprintf(s->id, sizeof(s->id), "%s", id);
			if (s->cb->started && s->cb->started(s->cb->userdata, s->id))
				s->stopped = true;
		}
	} else if (!strcmp(event, "stdout") || !strcmp(event, "stderr")) {
		int stream;
		uint64_t offset;
		char *data = NULL;
		size_t len = 0;
		int dr = saas__wire_exec_chunk_decode(&stream, &offset, &data, &len, o, &bad);
		/* The decoder says which: a chunk that is not the API's (with what is wrong), or our memory. */
		if (dr == SAAS_ENOMEM) {
			s->fail = saas__oom();
			rc = -1;
		} else if (dr < 0) {
			rc = sse_protocol(s, bad ? bad : "chunk");
		} else {
			uint64_t *at = stream == SAAS_EXEC_STDOUT ? &s->cur->stdout_offset : &s->cur->stderr_offset;
			*at = offset + len;
			if (!s->stopped && s->cb->output && s->cb->output(s->cb->userdata, stream, offset, data, len))
				s->stopped = true;
		}
		free(data);
	} else if (!strcmp(event, "lost")) {
		const char *name = json_string_value(json_object_get(o, "stream"));
		json_int_t off = json_integer_value(json_object_get(o, "offset"));
		json_int_t len = json_integer_value(json_object_get(o, "length"));
		int stream = name && !strcmp(name, "stderr") ? SAAS_EXEC_STDERR : SAAS_EXEC_STDOUT;
		if (off < 0 || len < 0)
			rc = sse_protocol(s, "lost event");
		else if (s->cb->lost && !s->stopped)
			s->cb->lost(s->cb->userdata, stream, (uint64_t)off, (uint64_t)len);
	} else if (!strcmp(event, "exit")) {
		s->ended = true;
	} else if (!strcmp(event, "error")) {
		json_t *e = json_object_get(o, "error");
		const char *code = json_string_value(json_object_get(e, "code"));
		const char *msg = json_string_value(json_object_get(e, "message"));
		int st = saas__error_from_name(code);
		s->fail = saas__error(st ? st : SAAS_ERROR, SAAS_ERRCLASS_HTTP, 200, "%s", msg ? msg : "the stream failed");
		rc = -1;
	}
	/* Other events are for later versions: skipped. */
	json_decref(o);
	if (s->stopped && s->cancel_on_stop && s->id[0]) {
		/* Once: the command dies with all it started; the stream goes on to its exit event. */
		s->cancel_on_stop = false;
		saas__remote_execution_cancel(s->client, s->id);
	}
	/* A follower that stops reads no further (sse_read takes that for success). */
	return rc ? rc : s->stopped && s->follow ? -1 : 0;
}

/* The line just read (f->line), as the standard's "process the field" and "dispatch the event" say. */
static int frame_line(struct saas__sse_frame *f, size_t max, int (*on)(void *ud, int what), void *ud)
{
	const char *l = f->line.data ? f->line.data : "", *colon, *v;
	size_t n = f->line.len, k, vn;
	int rc;

	if (n == 0) {
		/* No data line, no event; else its data without the last LF. */
		rc = f->data.len ? (f->data.len--, on(ud, SAAS__SSE_EVENT)) : 0;
		f->data.len = 0;
		f->name[0] = '\0';
		return rc ? 1 : 0;
	}
	if (*l == ':')
		return on(ud, SAAS__SSE_COMMENT) ? 1 : 0;
	colon = memchr(l, ':', n);
	k = colon ? (size_t)(colon - l) : n;
	v = colon ? colon + 1 : l + n;
	vn = colon ? n - k - 1 : 0;
	if (vn && *v == ' ')
		v++, vn--;
	if (k == 5 && !memcmp(l, "event", 5)) {
		if (vn >= sizeof(f->name))
			vn = sizeof(f->name) - 1; /* a name this long is none of ours: its event is skipped */
		memcpy(f->name, v, vn);
		f->name[vn] = '\0';
	} else if (k == 4 && !memcmp(l, "data", 4)) {
		if (f->data.len + vn + 1 > max)
			return SAAS_ETOOBIG;
		if ((vn && saas__buf_put(&f->data, v, vn) < 0) || saas__buf_put(&f->data, "\n", 1) < 0)
			return SAAS_ENOMEM;
	}
	/* "id" and "retry" need no reading here (the chunks carry their offsets), nor does any other field. */
	return 0;
}

int saas__sse_frame_write(struct saas__sse_frame *f, const void *data, size_t len, size_t max,
                          int (*on)(void *ud, int what), void *ud)
{
	const char *p = data;

	while (len) {
		size_t k = 0;
		int rc;

		/* A CR LF cut between two writes is one line end. */
		if (f->after_cr) {
			f->after_cr = false;
			if (*p == '\n') {
				p++, len--;
				continue;
			}
		}
		while (k < len && p[k] != '\n' && p[k] != '\r')
			k++;
		if (f->line.len + k > max)
			return SAAS_ETOOBIG;
		if (k && saas__buf_put(&f->line, p, k) < 0)
			return SAAS_ENOMEM;
		if (k == len)
			break;
		f->after_cr = p[k] == '\r';
		p += k + 1, len -= k + 1;
		rc = frame_line(f, max, on, ud);
		f->line.len = 0;
		if (rc)
			return rc;
	}
	return 0;
}

void saas__sse_frame_free(struct saas__sse_frame *f)
{
	saas__buf_free(&f->line);
	saas__buf_free(&f->data);
}

static int sse_on(void *ud, int what)
{
	return what == SAAS__SSE_EVENT ? sse_event(ud) : 0; /* a comment is the keepalive */
}

int saas__sse_write(void *ud, const void *data, size_t len)
{
	struct saas__sse *s = ud;
	int rc = saas__sse_frame_write(&s->frame, data, len, SAAS_SSE_EVENT_MAX, sse_on, s);

	if (rc == SAAS_ETOOBIG)
		return sse_protocol(s, "event (too long)");
	if (rc == SAAS_ENOMEM) {
		s->fail = saas__oom();
		return -1;
	}
	return rc ? -1 : 0;
}

void saas__sse_free(struct saas__sse *s)
{
	saas__sse_frame_free(&s->frame);
}
