/*
 * A guest's HTTP/1.x answer, read the way browsers and curl read it (RFC 9112),
 * for the preview proxy: pure, no I/O, in place.
 *
 * Accepted, as HTTP/1.x clients accept them: lines ended by a bare LF as well
 * as CRLF (§2.2), empty lines before the status line, a status line without a
 * reason phrase, whitespace between a field name and its colon (removed, as
 * §5.1 asks of a proxy), obs-fold (each replaced by one SP, §5.2), lines that
 * are no field at all (dropped, never forwarded), interim 1xx answers (the
 * caller skips them), and chunked bodies with extensions and trailers.
 *
 * Refused, because a reader could frame them more than one way (the shapes
 * of request smuggling and response splitting): a NUL or a CR not followed by
 * LF anywhere in the head, Content-Length with Transfer-Encoding, Content-
 * Lengths that differ or are not a plain number, a transfer coding we cannot
 * remove (anything but one "chunked"), and in a chunked body a size that is
 * not 1 to 16 hex digits or data not followed by its line end.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "preview/internal.h"

/* Longest chunk extension, and all trailer fields together, we skip over. */
#define CHUNK_EXT_MAX 4096
#define CHUNK_TRAILER_MAX 16384
/* Most hex digits in a chunk size (curl's bound too). */
#define CHUNK_DIGITS_MAX 16

size_t aas_http_head_end(const char *buf, size_t len, size_t *from)
{
	size_t i = *from;

	/* Empty lines before the status line are no end (skipped again while nothing else came). */
	if (i == 0) {
		while (i < len && (buf[i] == '\r' || buf[i] == '\n'))
			i++;
		if (i == len)
			return 0;
	}
	for (; i < len; i++) {
		if (buf[i] != '\n')
			continue;
		if (i + 1 >= len || (buf[i + 1] == '\r' && i + 2 >= len)) {
			*from = i; /* look at this line end again when more came */
			return 0;
		}
		if (buf[i + 1] == '\n')
			return i + 2;
		if (buf[i + 1] == '\r' && buf[i + 2] == '\n')
			return i + 3;
	}
	*from = i;
	return 0;
}

static bool tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("!#$%&'*+-.^_`|~", c);
}

static bool ows(char c)
{
	return c == ' ' || c == '\t';
}

/* s with its leading and trailing OWS cut, NUL-ended in place. */
static char *trim(char *s)
{
	size_t n;

	while (ows(*s))
		s++;
	n = strlen(s);
	while (n && ows(s[n - 1]))
		s[--n] = '\0';
	return s;
}

/* One Content-Length field value: a list of equal numbers (RFC 9112 §6.3). -1 if invalid. */
static int64_t content_length(const char *v)
{
	int64_t n = -1;

	for (;;) {
		int64_t one = 0;
		size_t digits = 0;

		while (ows(*v))
			v++;
		for (; *v >= '0' && *v <= '9'; v++, digits++) {
			if (one > (INT64_MAX - (*v - '0')) / 10)
				return -1;
			one = one * 10 + (*v - '0');
		}
		while (ows(*v))
			v++;
		if (!digits || (n >= 0 && one != n) || (*v && *v != ','))
			return -1;
		n = one;
		if (!*v++)
			return n;
	}
}

/* The transfer codings of one field value, appended to *codings (a count of "chunked" seen so far and of others). */
static void transfer_codings(const char *v, unsigned int *chunked, unsigned int *other, bool *chunked_last)
{
	while (*v) {
		size_t n;

		while (ows(*v) || *v == ',')
			v++;
		if (!*v)
			break;
		n = strcspn(v, ",");
		while (n && ows(v[n - 1]))
			n--;
		if (n == 7 && strncasecmp(v, "chunked", 7) == 0) {
			(*chunked)++;
			*chunked_last = true;
		} else {
			(*other)++;
			*chunked_last = false;
		}
		v += strcspn(v, ",");
	}
}

int aas_http_head_parse(char *buf, size_t len, struct aas_http_head *h, const char **why)
{
	char *p = buf, *end = buf + len, *last_value = NULL;
	unsigned int chunked = 0, other = 0;
	bool chunked_last = false, have_te = false, first = true;
	int64_t length = -1;

	memset(h, 0, sizeof(*h));
	h->length = -1;
	if (memchr(buf, '\0', len)) {
		*why = "a NUL byte in its head";
		return -1;
	}
	/* Empty lines (LF or CRLF) before the status line; a lone CR there is refused below, as anywhere. */
	while (p < end && (*p == '\n' || (*p == '\r' && p + 1 < end && p[1] == '\n')))
		p += *p == '\r' ? 2 : 1;
	if (!(h->fields = calloc(len / 2 + 1, sizeof(*h->fields)))) {
		*why = "out of memory";
		return -1;
	}
	while (p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p)), *line = p, *colon;
		size_t n;

		if (!nl)
			break;
		p = nl + 1;
		n = (size_t)(nl - line);
		if (n && line[n - 1] == '\r')
			n--;
		line[n] = '\0';
		if (memchr(line, '\r', n)) {
			*why = "a CR without LF in its head";
			goto bad;
		}
		if (first) {
			/* HTTP/1.x SP 3DIGIT [SP reason]: what curl takes. */
			first = false;
			if (n < 12 || strncmp(line, "HTTP/1.", 7) != 0 || line[7] < '0' || line[7] > '9' || line[8] != ' ' ||
			    line[9] < '1' || line[9] > '9' || line[10] < '0' || line[10] > '9' || line[11] < '0' ||
			    line[11] > '9' || (n > 12 && line[12] != ' ')) {
				*why = "no HTTP/1.x status line";
				goto bad;
			}
			h->status = (unsigned int)((line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0'));
			continue;
		}
		if (n == 0)
			break;
		if (ows(line[0])) {
			/* obs-fold: the previous field's value goes on after one SP; before any field, ignored. */
			char *more = trim(line);
			if (last_value && *more) {
				size_t vl = strlen(last_value);
				last_value[vl] = ' ';
				memmove(last_value + vl + 1, more, strlen(more) + 1);
			}
			continue;
		}
		if (!(colon = strchr(line, ':'))) {
			last_value = NULL;
			continue; /* no field: dropped, and a fold after it too */
		}
		*colon = '\0';
		line = trim(line);
		{
			bool token = *line != '\0';
			for (const char *c = line; *c && token; c++)
				token = tchar((unsigned char)*c);
			if (!token) {
				last_value = NULL;
				continue; /* not a field name: dropped */
			}
		}
		h->fields[h->nfields].name = line;
		h->fields[h->nfields].value = last_value = trim(colon + 1);
		h->nfields++;
	}
	if (first) {
		*why = "no HTTP/1.x status line";
		goto bad;
	}
	/* Framing, from the values as unfolded. */
	for (size_t i = 0; i < h->nfields; i++) {
		const char *name = h->fields[i].name, *value = h->fields[i].value;
		if (strcasecmp(name, "Content-Length") == 0) {
			int64_t one = content_length(value);
			if (one < 0 || (length >= 0 && one != length)) {
				*why = one < 0 ? "an invalid Content-Length" : "Content-Length fields that differ";
				goto bad;
			}
			length = one;
		} else if (strcasecmp(name, "Transfer-Encoding") == 0) {
			have_te = true;
			transfer_codings(value, &chunked, &other, &chunked_last);
		}
	}
	if (have_te && length >= 0) {
		*why = "both Content-Length and Transfer-Encoding";
		goto bad;
	}
	if (have_te && (chunked != 1 || other || !chunked_last)) {
		*why = "a transfer coding other than chunked";
		goto bad;
	}
	h->length = length;
	if (h->status < 200 || h->status == 204 || h->status == 304)
		h->body = AAS_HTTP_BODY_NONE;
	else if (have_te)
		h->body = AAS_HTTP_BODY_CHUNKED;
	else if (length >= 0)
		h->body = AAS_HTTP_BODY_LENGTH;
	else
		h->body = AAS_HTTP_BODY_CLOSE;
	return 0;
bad:
	aas_http_head_free(h);
	return -1;
}

void aas_http_head_free(struct aas_http_head *h)
{
	free(h->fields);
	h->fields = NULL;
	h->nfields = 0;
}

enum {
	CH_SIZE,       /* hex digits of a chunk size */
	CH_EXT,        /* the rest of the size line */
	CH_DATA,
	CH_DATA_CR,    /* the line end after a chunk's data */
	CH_DATA_LF,
	CH_TRAILER,    /* at the start of a trailer line */
	CH_TRAILER_IN, /* inside one */
	CH_LAST_LF,    /* CR of the final empty line seen */
	CH_DONE,
	CH_BAD         /* bad framing: the payload before it went out, nothing more does */
};

ssize_t aas_http_chunked(struct aas_http_chunked *c, char *buf, size_t len)
{
	size_t out = 0;

	if (c->state == CH_BAD)
		goto bad;
	for (size_t i = 0; i < len && c->state != CH_DONE;) {
		char ch = buf[i];

		switch (c->state) {
		case CH_SIZE: {
			int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
			      : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
			if (d < 0) {
				if (!c->digits)
					goto bad;
				c->state = CH_EXT;
				c->ext = 0;
				c->cr = false;
				continue; /* this byte is the extension's (or the line end) */
			}
			if (++c->digits > CHUNK_DIGITS_MAX || c->left > (UINT64_MAX >> 4))
				goto bad;
			c->left = c->left << 4 | (uint64_t)d;
			i++;
			break;
		}
		case CH_EXT:
			/*
			 * Whitespace, then ";name=value..." (skipped) up to the line end; a
			 * CR only right before it. Anything else after the digits ("0x5",
			 * "5 6") is no size.
			 */
			i++;
			if (ch == '\n') {
				c->digits = 0;
				c->state = c->left ? CH_DATA : CH_TRAILER;
				c->ext = 0;
				c->semi = false;
			} else if (c->cr || ch == '\0' || ++c->ext > CHUNK_EXT_MAX ||
			           (!c->semi && ch != ';' && ch != '\r' && ch != ' ' && ch != '\t')) {
				goto bad;
			} else {
				c->cr = ch == '\r';
				c->semi |= ch == ';';
			}
			break;
		case CH_DATA: {
			size_t k = len - i;
			if (k > c->left)
				k = (size_t)c->left;
			memmove(buf + out, buf + i, k);
			out += k;
			i += k;
			if (!(c->left -= k))
				c->state = CH_DATA_CR;
			break;
		}
		case CH_DATA_CR:
			if (ch != '\r' && ch != '\n')
				goto bad;
			c->state = ch == '\r' ? CH_DATA_LF : CH_SIZE;
			i++;
			break;
		case CH_DATA_LF:
			if (ch != '\n')
				goto bad;
			c->state = CH_SIZE;
			i++;
			break;
		case CH_TRAILER:
			i++;
			if (ch == '\n')
				c->state = CH_DONE;
			else if (ch == '\r')
				c->state = CH_LAST_LF;
			else if (ch == '\0' || ++c->ext > CHUNK_TRAILER_MAX)
				goto bad;
			else
				c->state = CH_TRAILER_IN;
			break;
		case CH_TRAILER_IN:
			/* Trailer fields are dropped: browsers do not expose them either. */
			i++;
			if (ch == '\0' || ++c->ext > CHUNK_TRAILER_MAX)
				goto bad;
			if (ch == '\n')
				c->state = CH_TRAILER;
			break;
		case CH_LAST_LF:
			if (ch != '\n')
				goto bad;
			c->state = CH_DONE;
			i++;
			break;
		}
	}
	return (ssize_t)out;
bad:
	c->state = CH_BAD;
	return out ? (ssize_t)out : -1;
}

bool aas_http_chunked_done(const struct aas_http_chunked *c)
{
	return c->state == CH_DONE;
}
