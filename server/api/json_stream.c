/*
 * JSON replies written as they are sent.
 *
 * An execution carries up to 16 MiB of output per stream, and a JSON string
 * of control bytes is six times its size once escaped: json_dumps() of one
 * execution built a ~200 MB buffer for 32 MiB of output. Here the top-level
 * members of the object are written one by one, and a long string member is
 * escaped piece by piece into libmicrohttpd's send buffer, so a reply costs
 * the object it was built from and one block, whatever the escaping. The bytes
 * are the ones json_dumps(JSON_COMPACT | JSON_ENSURE_ASCII) would give.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

/* Strings at least this long are escaped as they are sent; shorter members are dumped whole. */
#define STREAM_STRING_MIN ((size_t)64 * 1024)
/* libmicrohttpd asks for at most this much at a time. */
#define STREAM_BLOCK ((size_t)64 * 1024)
/* The longest escape of one character: a surrogate pair, "\uD83D\uDE00". */
#define ESCAPE_MAX 12

struct json_stream {
	json_t *obj;
	void *iter;      /* the next member to write */
	bool opened;     /* "{" is written */
	bool closed;     /* "}" is queued */
	char *text;      /* queued text: a member's key and small value, an escape, or "}" */
	size_t text_len, text_off;
	bool text_heap;  /* text is malloc'ed, else it points into small */
	char small[ESCAPE_MAX];
	const unsigned char *str; /* a long string member being escaped */
	size_t str_len, str_off;
};

static void drop_text(struct json_stream *s)
{
	if (s->text_heap)
		free(s->text);
	s->text = NULL;
	s->text_heap = false;
}

static void queue_small(struct json_stream *s, const char *text, size_t len)
{
	drop_text(s);
	memcpy(s->small, text, len);
	s->text = s->small;
	s->text_len = len;
	s->text_off = 0;
}

static size_t u_escape(char *out, unsigned int v)
{
	static const char hex[] = "0123456789ABCDEF";

	out[0] = '\\';
	out[1] = 'u';
	for (int i = 0; i < 4; i++)
		out[2 + i] = hex[(v >> (12 - 4 * i)) & 0xF];
	return 6;
}

/* Bytes that go out as they are: printable ASCII but the quote and the backslash. */
static bool plain(unsigned char c)
{
	return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/*
 * One character of a valid UTF-8 string that is not plain(), escaped as
 * jansson's JSON_ENSURE_ASCII does; returns the escape's length and sets
 * *used to the bytes of input it took.
 */
static size_t escape_char(const unsigned char *p, size_t left, size_t *used, char out[ESCAPE_MAX])
{
	unsigned int c = p[0], n = 1;

	if (c >= 0x80) {
		/* jansson validated the string: the lead byte says how many follow, and they are there. */
		n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
		if (n > left)
			n = (unsigned int)left;
		c &= n == 4 ? 0x07 : n == 3 ? 0x0F : 0x1F;
		for (unsigned int i = 1; i < n; i++)
			c = (c << 6) | (p[i] & 0x3F);
	}
	*used = n;
	out[0] = '\\';
	switch (c) {
	case '"': out[1] = '"'; return 2;
	case '\\': out[1] = '\\'; return 2;
	case '\b': out[1] = 'b'; return 2;
	case '\f': out[1] = 'f'; return 2;
	case '\n': out[1] = 'n'; return 2;
	case '\r': out[1] = 'r'; return 2;
	case '\t': out[1] = 't'; return 2;
	default: break;
	}
	if (c < 0x10000)
		return u_escape(out, c);
	c -= 0x10000;
	u_escape(out, 0xD800 | (c >> 10));
	return 6 + u_escape(out + 6, 0xDC00 | (c & 0x3FF));
}

/* Queue the text of the next member (or the closing brace): 1, 0 when everything is written, -1 out of memory. */
static int next_member(struct json_stream *s)
{
	const char *key;
	json_t *val, *k;
	char *ktext = NULL, *vtext = NULL;
	bool stream_it;

	if (!s->iter) {
		if (s->closed)
			return 0;
		s->closed = true;
		queue_small(s, s->opened ? "}" : "{}", s->opened ? 1 : 2);
		return 1;
	}
	key = json_object_iter_key(s->iter);
	val = json_object_iter_value(s->iter);
	s->iter = json_object_iter_next(s->obj, s->iter);
	stream_it = json_is_string(val) && json_string_length(val) >= STREAM_STRING_MIN;
	k = json_string(key);
	ktext = k ? json_dumps(k, JSON_ENCODE_ANY | JSON_ENSURE_ASCII) : NULL;
	json_decref(k);
	if (!stream_it)
		vtext = json_dumps(val, JSON_COMPACT | JSON_ENCODE_ANY | JSON_ENSURE_ASCII);
	drop_text(s);
	if (!ktext || (!stream_it && !vtext) ||
	    asprintf(&s->text, "%s%s:%s", s->opened ? "," : "{", ktext, stream_it ? "\"" : vtext) < 0) {
		s->text = NULL;
		free(ktext);
		free(vtext);
		return -1;
	}
	free(ktext);
	free(vtext);
	s->opened = true;
	s->text_heap = true;
	s->text_len = strlen(s->text);
	s->text_off = 0;
	if (stream_it) {
		s->str = (const unsigned char *)json_string_value(val);
		s->str_len = json_string_length(val);
		s->str_off = 0;
	}
	return 1;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct json_stream *s = cls;
	size_t n = 0;
	int rc;

	(void)pos;
	while (n < max) {
		if (s->text && s->text_off < s->text_len) {
			size_t take = s->text_len - s->text_off < max - n ? s->text_len - s->text_off : max - n;
			memcpy(buf + n, s->text + s->text_off, take);
			s->text_off += take;
			n += take;
		} else if (s->str && s->str_off == s->str_len) {
			s->str = NULL;
			queue_small(s, "\"", 1);
		} else if (s->str && plain(s->str[s->str_off])) {
			size_t run = 0;
			while (n + run < max && s->str_off + run < s->str_len && plain(s->str[s->str_off + run]))
				run++;
			memcpy(buf + n, s->str + s->str_off, run);
			s->str_off += run;
			n += run;
		} else if (s->str) {
			char esc[ESCAPE_MAX];
			size_t used, len = escape_char(s->str + s->str_off, s->str_len - s->str_off, &used, esc);
			s->str_off += used;
			if (len <= max - n) {
				memcpy(buf + n, esc, len);
				n += len;
			} else {
				queue_small(s, esc, len);
			}
		} else if ((rc = next_member(s)) <= 0) {
			if (rc < 0)
				return MHD_CONTENT_READER_END_WITH_ERROR; /* a cut body, never a short one */
			break;
		}
	}
	return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void stream_free(void *cls)
{
	struct json_stream *s = cls;

	drop_text(s);
	json_decref(s->obj);
	free(s);
}

void aas_reply_json_stream(struct aas_reply *out, unsigned int status, json_t *body)
{
	struct json_stream *s;

	if (!json_is_object(body) || !(s = calloc(1, sizeof(*s)))) {
		aas_reply_json(out, status, body);
		return;
	}
	s->obj = body;
	s->iter = json_object_iter(body);
	out->status = status;
	out->response = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK, stream_read, s, stream_free);
	if (!out->response) {
		stream_free(s);
		aas_reply_error(out, 500, "out_of_memory", "out of memory");
		return;
	}
	MHD_add_response_header(out->response, "Content-Type", "application/json");
	aas_reply_common_headers(out->response);
}
