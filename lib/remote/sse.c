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
	json_t *o = json_loadb(s->data.data ? s->data.data : "", s->data.len, 0, &jerr);
	int rc = 0;

	if (!o || !json_is_object(o)) {
		json_decref(o);
		return sse_protocol(s, "event");
	}
	if (!strcmp(s->event, "started")) {
		const char *id = json_string_value(json_object_get(o, "execution_id"));
		if (!id || strlen(id) > SAAS_ID_MAX) {
			rc = sse_protocol(s, "started event");
		} else {
			snprintf(s->id, sizeof(s->id), "%s", id);
			if (s->cb->started && s->cb->started(s->cb->userdata, s->id))
				s->stopped = true;
		}
	} else if (!strcmp(s->event, "stdout") || !strcmp(s->event, "stderr")) {
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
	} else if (!strcmp(s->event, "lost")) {
		const char *name = json_string_value(json_object_get(o, "stream"));
		json_int_t off = json_integer_value(json_object_get(o, "offset"));
		json_int_t len = json_integer_value(json_object_get(o, "length"));
		int stream = name && !strcmp(name, "stderr") ? SAAS_EXEC_STDERR : SAAS_EXEC_STDOUT;
		if (off < 0 || len < 0)
			rc = sse_protocol(s, "lost event");
		else if (s->cb->lost && !s->stopped)
			s->cb->lost(s->cb->userdata, stream, (uint64_t)off, (uint64_t)len);
	} else if (!strcmp(s->event, "exit")) {
		s->ended = true;
	} else if (!strcmp(s->event, "error")) {
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

/* A line of the stream (without its end); non-zero stops the read. */
static int sse_line(struct saas__sse *s, const char *l, size_t n)
{
	if (n == 0) {
		int rc = 0;
		if (s->data.len || s->event[0])
			rc = sse_event(s);
		s->data.len = 0;
		s->event[0] = '\0';
		return rc;
	}
	if (l[0] == ':')
		return 0; /* a comment: the keepalive */
	if (n > 6 && !memcmp(l, "event:", 6)) {
		l += 6, n -= 6;
		if (*l == ' ')
			l++, n--;
		if (n >= sizeof(s->event))
			n = sizeof(s->event) - 1; /* a name this long is none of ours: it is skipped */
		memcpy(s->event, l, n);
		s->event[n] = '\0';
	} else if (n >= 5 && !memcmp(l, "data:", 5)) {
		l += 5, n -= 5;
		if (n && *l == ' ')
			l++, n--;
		if (s->data.len + n + 1 > SAAS_SSE_EVENT_MAX)
			return sse_protocol(s, "event (too long)");
		if ((s->data.len && saas__buf_put(&s->data, "\n", 1) < 0) || saas__buf_put(&s->data, l, n) < 0) {
			s->fail = saas__oom();
			return -1;
		}
	}
	/* "id:" needs no reading: the chunks carry their offsets. */
	return 0;
}

int saas__sse_write(void *ud, const void *data, size_t len)
{
	struct saas__sse *s = ud;
	const char *d = data;

	while (len) {
		const char *nl = memchr(d, '\n', len);
		size_t k = nl ? (size_t)(nl - d) : len;
		if (s->line.len + k > SAAS_SSE_EVENT_MAX)
			return sse_protocol(s, "line (too long)");
		if (k && saas__buf_put(&s->line, d, k) < 0) {
			s->fail = saas__oom();
			return -1;
		}
		if (!nl)
			break;
		size_t n = s->line.len;
		if (n && s->line.data[n - 1] == '\r')
			n--;
		if (sse_line(s, s->line.data ? s->line.data : "", n))
			return -1;
		s->line.len = 0;
		d += k + 1;
		len -= k + 1;
	}
	return 0;
}


void saas__sse_free(struct saas__sse *s)
{
	saas__buf_free(&s->line);
	saas__buf_free(&s->data);
}
