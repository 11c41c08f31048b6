/*
 * multipart/form-data, read as it comes (multipart.h): E2B's uploads and the dashboard's.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <string.h>
#include <strings.h>

#include "multipart.h"

/* RFC 2046's bchars (a space only inside, which is not checked here: it is harmless). */
static bool bchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("'()+_,-./:=? ", c);
}

bool aas_multipart_boundary(char out[AAS_MULTIPART_BOUNDARY_MAX + 1], const char *ct)
{
	const char *p, *end;
	size_t n;

	out[0] = '\0';
	if (!ct || strncasecmp(ct, "multipart/form-data", 19) != 0)
		return false;
	for (p = ct + 19; (p = strchr(p, ';'));) {
		p++;
		while (*p == ' ' || *p == '\t')
			p++;
		if (strncasecmp(p, "boundary=", 9) != 0)
			continue;
		p += 9;
		if (*p == '"') {
			p++;
			if (!(end = strchr(p, '"')))
				return false;
		} else {
			end = p + strcspn(p, "; \t");
		}
		n = (size_t)(end - p);
		if (n == 0 || n > AAS_MULTIPART_BOUNDARY_MAX)
			return false;
		for (size_t i = 0; i < n; i++)
			if (!bchar(p[i]))
				return false;
		memcpy(out, p, n);
		out[n] = '\0';
		return true;
	}
	return false;
}

static const char *find(const char *hay, size_t hlen, const char *needle, size_t nlen)
{
	const char *last;

	if (nlen == 0 || hlen < nlen)
		return NULL;
	last = hay + (hlen - nlen);
	for (const char *p = hay; p <= last; p++) {
		if (!(p = memchr(p, needle[0], (size_t)(last - p) + 1)))
			return NULL;
		if (memcmp(p, needle, nlen) == 0)
			return p;
	}
	return NULL;
}

/* A parameter of Content-Disposition's value ("form-data; name=\"file\"; filename=\"a\""), quoted. */
static void disposition_param(const char *v, size_t vlen, const char *param, const char **out, size_t *out_len)
{
	size_t plen = strlen(param);

	*out = NULL;
	*out_len = 0;
	for (size_t i = 0; i + plen + 2 <= vlen; i++) {
		/* The parameter starts after ';' and spaces: "filename" must not match inside another name. */
		if ((i == 0 || v[i - 1] == ';' || v[i - 1] == ' ') && strncasecmp(v + i, param, plen) == 0 &&
		    v[i + plen] == '=' && v[i + plen + 1] == '"') {
			const char *s = v + i + plen + 2, *e = memchr(s, '"', (size_t)(v + vlen - s));
			if (!e)
				return;
			*out = s;
			*out_len = (size_t)(e - s);
			return;
		}
	}
}

static bool head_parse(const char *head, size_t len, struct aas_multipart_part *part)
{
	const char *line = head, *end = head + len;

	memset(part, 0, sizeof(*part));
	while (line < end) {
		const char *eol = find(line, (size_t)(end - line), "\r\n", 2);
		const char *colon;
		size_t n = eol ? (size_t)(eol - line) : (size_t)(end - line);

		colon = memchr(line, ':', n);
		if (!colon)
			return false;
		if ((size_t)(colon - line) == 19 && strncasecmp(line, "Content-Disposition", 19) == 0) {
			const char *v = colon + 1;
			size_t vlen = (size_t)(line + n - v);
			while (vlen && (*v == ' ' || *v == '\t')) {
				v++;
				vlen--;
			}
			if (vlen < 9 || strncasecmp(v, "form-data", 9) != 0)
				return false;
			disposition_param(v, vlen, "name", &part->name, &part->name_len);
			disposition_param(v, vlen, "filename", &part->filename, &part->filename_len);
		}
		line += n + 2;
	}
	return true;
}

enum { S_PREAMBLE, S_FIRST_AFTER, S_HEAD, S_DATA, S_DATA_AFTER, S_DONE, S_FAILED, S_STOPPED };

#define AFTER_WHY "a delimiter not followed by CRLF or \"--\""

bool aas_multipart_init(struct aas_multipart *mp, const char *boundary, size_t max,
                        const struct aas_multipart_sink *sink, void *ud)
{
	size_t n = boundary ? strlen(boundary) : 0;

	mp->state = S_FAILED;
	mp->why = "a bad boundary";
	/* No CR in the boundary is what lets the data's scan restart at the byte that broke a match (feed). */
	if (n == 0 || n > AAS_MULTIPART_BOUNDARY_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!bchar(boundary[i]))
			return false;
	memcpy(mp->delim, "\r\n--", 4);
	memcpy(mp->delim + 4, boundary, n);
	mp->dlen = n + 4;
	mp->sink = sink;
	mp->ud = ud;
	mp->state = S_PREAMBLE;
	/* Every delimiter follows a CRLF but the first, which may open the body: as if one came before it. */
	mp->match = 2;
	mp->has_after = false;
	mp->preamble = 0;
	mp->count = 0;
	mp->max = max < AAS_MULTIPART_PARTS_MAX ? max : AAS_MULTIPART_PARTS_MAX;
	mp->head_len = 0;
	mp->why = NULL;
	return true;
}

static int fail(struct aas_multipart *mp, const char *why)
{
	mp->state = S_FAILED;
	mp->why = why;
	return AAS_MULTIPART_FAILED;
}

static int stop(struct aas_multipart *mp)
{
	mp->state = S_STOPPED;
	mp->why = "stopped by the sink";
	return AAS_MULTIPART_STOPPED;
}

/* After a delimiter and its CRLF: a part's head comes. */
static int next_part(struct aas_multipart *mp)
{
	if (mp->count == mp->max)
		return fail(mp, "too many parts");
	mp->state = S_HEAD;
	mp->head_len = 0;
	return AAS_MULTIPART_MORE;
}

/*
 * The bytes read but not yet given to the sink: first what the last piece
 * held back (carry), then this piece's from *s. Give the oldest n of them.
 */
struct pending {
	const char *carry;
	size_t carry_len, cpos;
	const char *data;
	size_t s;
};

static size_t pending_len(const struct pending *p, size_t i)
{
	return p->carry_len - p->cpos + (i - p->s);
}

static int give(struct aas_multipart *mp, struct pending *p, size_t n)
{
	size_t take = p->carry_len - p->cpos < n ? p->carry_len - p->cpos : n;

	if (take && mp->sink->data(mp->ud, p->carry + p->cpos, take))
		return stop(mp);
	p->cpos += take;
	n -= take;
	if (n && mp->sink->data(mp->ud, p->data + p->s, n))
		return stop(mp);
	p->s += n;
	return AAS_MULTIPART_MORE;
}

/* Drop what is pending (a delimiter, a head): nothing of it is data. */
static void drop(struct pending *p, size_t i)
{
	p->cpos = p->carry_len;
	p->s = i;
}

/* A part's head is read (len bytes, its last line's CRLF included): begin the part. */
static int head_done(struct aas_multipart *mp, size_t len)
{
	struct aas_multipart_part part;

	if (!head_parse(mp->head, len, &part))
		return fail(mp, "a part's head is not header lines with a form-data Content-Disposition");
	mp->count++;
	if (mp->sink->begin(mp->ud, &part))
		return stop(mp);
	mp->state = S_DATA;
	mp->match = 0;
	mp->has_after = false;
	return AAS_MULTIPART_MORE;
}

/*
 * The data's scan: a part ends at a delimiter ("\r\n--" boundary) followed
 * by "--" or CRLF; one followed by anything else is data (as Go's reader
 * has it). What may be the start of a delimiter is held back (mp->match
 * bytes of it, and the byte after it) and given as data once it is not;
 * since the boundary has no CR, the scan goes on from the byte that broke
 * the match. The held-back bytes are always delim's prefix (and `after`),
 * so nothing of a piece is kept once feed returns.
 */
int aas_multipart_feed(struct aas_multipart *mp, const char *data, size_t len)
{
	char carry[sizeof(mp->delim) + 1];
	struct pending p = { carry, 0, 0, data, 0 };
	size_t i = 0;
	int rc;

	if (mp->state == S_DATA || mp->state == S_DATA_AFTER) {
		memcpy(carry, mp->delim, mp->match);
		p.carry_len = mp->match;
		if (mp->has_after)
			carry[p.carry_len++] = mp->after;
	}
	while (i < len) {
		char c = data[i];

		switch (mp->state) {
		case S_PREAMBLE:
			if (c != mp->delim[mp->match] && mp->match) {
				mp->match = 0; /* c again, from the start */
				break;
			}
			if (++mp->preamble > AAS_MULTIPART_PREAMBLE_MAX + mp->dlen)
				return fail(mp, "no boundary in the body's first 8 KiB");
			i++;
			if (c == mp->delim[mp->match] && ++mp->match == mp->dlen) {
				mp->state = S_FIRST_AFTER;
				mp->match = 0;
			}
			break;
		case S_FIRST_AFTER:
			i++;
			if (!mp->has_after) {
				if (c != '-' && c != '\r')
					return fail(mp, AFTER_WHY);
				mp->after = c;
				mp->has_after = true;
				break;
			}
			mp->has_after = false;
			if (mp->after == '-' && c == '-') {
				mp->state = S_DONE;
				return AAS_MULTIPART_DONE;
			}
			if (mp->after != '\r' || c != '\n')
				return fail(mp, AFTER_WHY);
			if ((rc = next_part(mp)) != AAS_MULTIPART_MORE)
				return rc;
			break;
		case S_HEAD:
			i++;
			mp->head[mp->head_len++] = c;
			if (mp->head_len == 2 && memcmp(mp->head, "\r\n", 2) == 0)
				rc = head_done(mp, 0); /* no header lines */
			else if (mp->head_len >= 4 && memcmp(mp->head + mp->head_len - 4, "\r\n\r\n", 4) == 0)
				rc = head_done(mp, mp->head_len - 2);
			else if (mp->head_len == AAS_MULTIPART_HEAD_MAX)
				return fail(mp, "a part's head has no end (or is over 8 KiB)");
			else
				break;
			if (rc != AAS_MULTIPART_MORE)
				return rc;
			drop(&p, i);
			break;
		case S_DATA:
			if (mp->match == 0) {
				const char *cr = memchr(data + i, '\r', len - i);
				i = cr ? (size_t)(cr - data) + 1 : len;
				mp->match = cr ? 1 : 0;
			} else if (c == mp->delim[mp->match]) {
				i++;
				if (++mp->match == mp->dlen)
					mp->state = S_DATA_AFTER;
			} else {
				mp->match = 0; /* what matched is data; c again, from the start */
			}
			break;
		case S_DATA_AFTER:
			if (!mp->has_after && (c == '-' || c == '\r')) {
				i++;
				mp->after = c;
				mp->has_after = true;
				break;
			}
			if (!mp->has_after || !((mp->after == '-' && c == '-') || (mp->after == '\r' && c == '\n'))) {
				/* Not a delimiter after all: data; c again, from the start. */
				mp->state = S_DATA;
				mp->match = 0;
				mp->has_after = false;
				break;
			}
			/* A delimiter: what came before it is the part's, all of it; it and its two bytes are not. */
			i++;
			if ((rc = give(mp, &p, pending_len(&p, i) - (mp->dlen + 2))) != AAS_MULTIPART_MORE)
				return rc;
			drop(&p, i);
			mp->match = 0;
			mp->has_after = false;
			if (mp->sink->end(mp->ud))
				return stop(mp);
			if (c == '-') {
				mp->state = S_DONE;
				return AAS_MULTIPART_DONE;
			}
			if ((rc = next_part(mp)) != AAS_MULTIPART_MORE)
				return rc;
			break;
		case S_DONE:
			return AAS_MULTIPART_DONE;
		case S_STOPPED:
			return AAS_MULTIPART_STOPPED;
		default:
			return AAS_MULTIPART_FAILED;
		}
	}
	/* The piece is read: give what cannot be a delimiter's start, hold back what can. */
	if (mp->state == S_DATA || mp->state == S_DATA_AFTER)
		return give(mp, &p, pending_len(&p, i) - (mp->match + (mp->has_after ? 1 : 0)));
	return mp->state == S_DONE      ? AAS_MULTIPART_DONE
	       : mp->state == S_STOPPED ? AAS_MULTIPART_STOPPED
	       : mp->state == S_FAILED  ? AAS_MULTIPART_FAILED
	                                : AAS_MULTIPART_MORE;
}

int aas_multipart_finish(struct aas_multipart *mp)
{
	switch (mp->state) {
	case S_DONE: return AAS_MULTIPART_DONE;
	case S_STOPPED: return AAS_MULTIPART_STOPPED;
	case S_FAILED: return AAS_MULTIPART_FAILED;
	case S_PREAMBLE: return fail(mp, "no boundary in the body");
	case S_FIRST_AFTER: return fail(mp, AFTER_WHY);
	case S_HEAD: return fail(mp, "a part's head has no end (or is over 8 KiB)");
	default: return fail(mp, "a part with no closing boundary");
	}
}

bool aas_multipart_filename(char *out, const char *filename, size_t len)
{
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		char c = filename[i];
		if (c == '%' && len - i >= 3) {
			if (strncasecmp(filename + i, "%22", 3) == 0)
				c = '"';
			else if (strncasecmp(filename + i, "%0D", 3) == 0 || strncasecmp(filename + i, "%0A", 3) == 0)
				return false;
			if (c != '%')
				i += 2;
		}
		if ((unsigned char)c < 0x20 || c == 0x7f)
			return false;
		out[o++] = c;
	}
	out[o] = '\0';
	return true;
}
