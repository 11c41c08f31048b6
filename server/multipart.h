/*
 * multipart/form-data (RFC 7578), as E2B's SDKs upload files (e2b/files.c)
 * and the dashboard's upload form sends one (web/dashboard_files.c): an
 * incremental reader, fed the body in whatever pieces the connection gives
 * (a delimiter or a head may be split anywhere), that hands each part's
 * head and bytes to a sink as they come and holds nothing of the data. Pure;
 * bounded: the boundary, the parts, each part's head, the preamble. What it
 * makes of a body does not depend on how the body was cut (fuzz_e2b checks;
 * fuzz_dashboard sends the upload form's bodies through the whole server).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_MULTIPART_H
#define AAS_MULTIPART_H

#include <stdbool.h>
#include <stddef.h>

/* RFC 2046's longest boundary. */
#define AAS_MULTIPART_BOUNDARY_MAX 70
/* The largest head of one part (its header lines), and the most parts a body may have. */
#define AAS_MULTIPART_HEAD_MAX ((size_t)8 << 10)
#define AAS_MULTIPART_PARTS_MAX 256
/* The most bytes before the first delimiter (clients send none). */
#define AAS_MULTIPART_PREAMBLE_MAX ((size_t)8 << 10)

/* A part's head, as a sink's begin sees it: pointers into the reader, valid until begin returns. */
struct aas_multipart_part {
	const char *name;        /* Content-Disposition's name, or NULL */
	size_t name_len;
	const char *filename;    /* its filename (as sent, between the quotes), or NULL */
	size_t filename_len;
};

/* Where the parts go. Each call returns 0 to go on, nonzero to stop the reader (AAS_MULTIPART_STOPPED). */
struct aas_multipart_sink {
	int (*begin)(void *ud, const struct aas_multipart_part *part);
	/* The part's bytes, in order, in pieces of any size (never empty). */
	int (*data)(void *ud, const char *data, size_t len);
	/* The part's closing delimiter was read: it has no more bytes. */
	int (*end)(void *ud);
};

enum {
	AAS_MULTIPART_MORE = 0,     /* well formed so far: feed on */
	AAS_MULTIPART_DONE = 1,     /* the closing delimiter was read; what follows is ignored */
	AAS_MULTIPART_FAILED = -1,  /* not well formed (or too many parts): why says */
	AAS_MULTIPART_STOPPED = -2  /* the sink said stop */
};

struct aas_multipart {
	/* Private: the reader's state. */
	const struct aas_multipart_sink *sink;
	void *ud;
	char delim[AAS_MULTIPART_BOUNDARY_MAX + 4]; /* "\r\n--" boundary */
	size_t dlen;
	int state;
	size_t match;        /* bytes of delim matched (delim[0..match), held back from the data) */
	char after;          /* the first byte after a whole delim, when one is held */
	bool has_after;
	size_t preamble;     /* bytes read before the first delimiter */
	size_t count;        /* parts begun */
	size_t max;
	size_t head_len;
	char head[AAS_MULTIPART_HEAD_MAX];
	/* Public: why the reader failed (static text), once it has. */
	const char *why;
};

/*
 * The boundary of a Content-Type "multipart/form-data; boundary=..." (quoted
 * or not) into out: true, or false when it is not that or the boundary is
 * empty, too long or holds a character RFC 2046 does not allow.
 */
bool aas_multipart_boundary(char out[AAS_MULTIPART_BOUNDARY_MAX + 1], const char *content_type);
/*
 * Start reading a body whose boundary is `boundary` (one
 * aas_multipart_boundary gives), into sink, at most max parts (at most
 * AAS_MULTIPART_PARTS_MAX): false for a boundary RFC 2046 does not allow.
 * Nothing to free.
 */
bool aas_multipart_init(struct aas_multipart *mp, const char *boundary, size_t max,
                        const struct aas_multipart_sink *sink, void *ud);
/* The body's next len bytes: AAS_MULTIPART_MORE, _DONE, _FAILED (mp->why) or _STOPPED; once not MORE, it stays. */
int aas_multipart_feed(struct aas_multipart *mp, const char *data, size_t len);
/* The body's end: AAS_MULTIPART_DONE, or _FAILED (mp->why: the body was cut short) or _STOPPED. */
int aas_multipart_finish(struct aas_multipart *mp);
/*
 * A filename as browsers and undici send it (a '"' as %22, CR and LF as %0D
 * and %0A; nothing else escaped) into out (at least len + 1 bytes): false
 * for a NUL or a control character, which no path holds.
 */
bool aas_multipart_filename(char *out, const char *filename, size_t len);

#endif
