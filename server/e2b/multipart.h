/*
 * multipart/form-data (RFC 7578), as E2B's SDKs upload files: a whole body
 * in memory, its parts pointing into it. Pure; bounded: the boundary, the
 * parts, each part's head.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_E2B_MULTIPART_H
#define AAS_E2B_MULTIPART_H

#include <stdbool.h>
#include <stddef.h>

/* RFC 2046's longest boundary. */
#define AAS_MULTIPART_BOUNDARY_MAX 70
/* The largest head of one part (its header lines), and the most parts a body may have. */
#define AAS_MULTIPART_HEAD_MAX ((size_t)8 << 10)
#define AAS_MULTIPART_PARTS_MAX 256

struct aas_multipart_part {
	const char *name;        /* Content-Disposition's name, or NULL */
	size_t name_len;
	const char *filename;    /* its filename (as sent, between the quotes), or NULL */
	size_t filename_len;
	const char *data;        /* the part's bytes */
	size_t len;
};

/*
 * The boundary of a Content-Type "multipart/form-data; boundary=..." (quoted
 * or not) into out: true, or false when it is not that or the boundary is
 * empty, too long or holds a character RFC 2046 does not allow.
 */
bool aas_multipart_boundary(char out[AAS_MULTIPART_BOUNDARY_MAX + 1], const char *content_type);
/*
 * The parts of body[0..len) (at most max of them, at most
 * AAS_MULTIPART_PARTS_MAX): true with *count set, or false with *why (static
 * text) for a body that is not well formed or has too many parts.
 */
bool aas_multipart_parse(const char *body, size_t len, const char *boundary, struct aas_multipart_part *parts,
                         size_t max, size_t *count, const char **why);
/*
 * A filename as browsers and undici send it (a '"' as %22, CR and LF as %0D
 * and %0A; nothing else escaped) into out (at least len + 1 bytes): false
 * for a NUL or a control character, which no path holds.
 */
bool aas_multipart_filename(char *out, const char *filename, size_t len);

#endif
