/*
 * multipart/form-data for E2B's uploads (multipart.h).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <string.h>
#include <strings.h>

#include "e2b/multipart.h"

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

	part->name = part->filename = NULL;
	part->name_len = part->filename_len = 0;
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

bool aas_multipart_parse(const char *body, size_t len, const char *boundary, struct aas_multipart_part *parts,
                         size_t max, size_t *count, const char **why)
{
	char delim[AAS_MULTIPART_BOUNDARY_MAX + 5];
	size_t dlen = strlen(boundary) + 2;
	const char *p, *end = body + len;

	*count = 0;
	*why = NULL;
	if (dlen < 3 || dlen > AAS_MULTIPART_BOUNDARY_MAX + 2) {
		*why = "a bad boundary";
		return false;
	}
	if (max > AAS_MULTIPART_PARTS_MAX)
		max = AAS_MULTIPART_PARTS_MAX;
	/* Every delimiter but the first follows a CRLF; the first may open the body. */
	delim[0] = '\r';
	delim[1] = '\n';
	delim[2] = '-';
	delim[3] = '-';
	memcpy(delim + 4, boundary, dlen - 2);
	if (len >= dlen && memcmp(body, delim + 2, dlen) == 0)
		p = body + dlen;
	else if ((p = find(body, len, delim, dlen + 2)))
		p += dlen + 2;
	else {
		*why = "no boundary in the body";
		return false;
	}
	for (;;) {
		const char *head_end, *next;

		/* After a delimiter: "--" ends the body, CRLF starts a part (transport padding is not sent by clients). */
		if (end - p >= 2 && p[0] == '-' && p[1] == '-')
			return true;
		if (end - p < 2 || p[0] != '\r' || p[1] != '\n') {
			*why = "a delimiter not followed by CRLF or \"--\"";
			return false;
		}
		p += 2;
		if (*count == max) {
			*why = "too many parts";
			return false;
		}
		/* An empty head is a CRLF right away. */
		if (end - p >= 2 && p[0] == '\r' && p[1] == '\n')
			head_end = p;
		else if (!(head_end = find(p, (size_t)(end - p) < AAS_MULTIPART_HEAD_MAX ? (size_t)(end - p)
		                                                                         : AAS_MULTIPART_HEAD_MAX,
		                           "\r\n\r\n", 4))) {
			*why = "a part's head has no end (or is over 8 KiB)";
			return false;
		} else {
			head_end += 2;
		}
		if (!head_parse(p, (size_t)(head_end - p), &parts[*count])) {
			*why = "a part's head is not header lines with a form-data Content-Disposition";
			return false;
		}
		p = head_end + 2;
		/* A delimiter is followed by "--" or CRLF: "\r\n--XBnot" in a part is its data (as Go's reader has it). */
		for (const char *from = p;; from = next + 1) {
			const char *after;
			if (!(next = find(from, (size_t)(end - from), delim, dlen + 2))) {
				*why = "a part with no closing boundary";
				return false;
			}
			after = next + dlen + 2;
			if (end - after >= 2 && ((after[0] == '-' && after[1] == '-') || (after[0] == '\r' && after[1] == '\n')))
				break;
		}
		parts[*count].data = p;
		parts[*count].len = (size_t)(next - p);
		(*count)++;
		p = next + dlen + 2;
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
