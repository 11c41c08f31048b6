/*
 * Internal: small helpers shared by the whole library.
 */
#ifndef SAAS_UTIL_H
#define SAAS_UTIL_H

#include <stdbool.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "saas/common.h"

#define SAAS_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Milliseconds since the epoch, from the real clock. */
int64_t saas__now_ms(void);
/* *ts = now on `clock` plus ms (ms >= 0): a deadline for pthread_cond_timedwait and friends. */
void saas__deadline(struct timespec *ts, clockid_t clock, int64_t ms);
/* Sleep ms milliseconds (ms >= 0), the whole of them even if signals arrive. */
void saas__sleep_ms(int64_t ms);
/* A condition variable whose timed waits take CLOCK_MONOTONIC deadlines (saas__deadline). 0 or an errno. */
int saas__cond_init_monotonic(pthread_cond_t *cond);
/* saas_time_parse() without touching the thread's error: 0, or -1 when text is not a time. */
int saas__time_parse(int64_t *ms, const char *text, unsigned int flags);

/* Milliseconds on CLOCK_MONOTONIC since *t0 (read from that clock). */
static inline int64_t saas__ms_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (int64_t)(t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

/* Fill `buf` with `len` bytes from the kernel's CSPRNG. 0 or SAAS_EIO. */
int saas__random(void *buf, size_t len);

/*
 * A new id: `prefix` followed by `nchars` characters of lowercase base32
 * (a-z, 2-7), each carrying 5 random bits. `out` holds SAAS_ID_MAX + 1.
 */
int saas__id_new(char *out, const char *prefix, size_t nchars);
/* Is id one saas__id_new could have made with this prefix and length? */
bool saas__id_valid(const char *id, const char *prefix, size_t nchars);

/* SHA-256 of `len` bytes as 64 lowercase hex characters and a NUL. */
void saas__sha256_hex(char out[65], const void *data, size_t len);
void saas__sha256(uint8_t out[32], const void *data, size_t len);

/* Are the n bytes at s all lowercase hex digits? */
bool saas__is_hex(const char *s, size_t n);

/* Copy at most size-1 bytes and NUL-terminate; true if it all fit. */
bool saas__strlcpy(char *dst, const char *src, size_t size);

/* strdup that records SAAS_ENOMEM; NULL in gives "" out. */
char *saas__strdup(const char *s);

/* Is `s` non-NULL, non-empty, at most `max` bytes and free of control characters? */
bool saas__valid_text(const char *s, size_t max);

/*
 * Is `s` an image's name: non-NULL, 1 to SAAS_STORE_IMAGE_MAX (63) bytes of
 * [a-z0-9._-], not led by '.' or '-'? Image names become file and directory
 * names on the host (the client's checks, the pools, the libvirt driver's
 * remembered templates), so only this safe alphabet.
 */
bool saas__valid_image(const char *s);

/* Is `s` (len bytes) well-formed UTF-8 (no overlongs, no surrogates)? */
bool saas__valid_utf8(const char *s, size_t len);

/*
 * A command's output sink (saas_output_fn's shape) that drops it: for a command
 * run for its effect, whose output nobody reads (the pools' and the libvirt
 * driver's warming commands). Always 0.
 */
int saas__output_discard(void *ud, int stream, const void *data, size_t len);

/* A growable byte buffer, always NUL-terminated. */
typedef struct {
	char *data;
	size_t len;
	size_t cap;
} saas__buf;

#define SAAS__BUF_INIT { NULL, 0, 0 }

int saas__buf_grow(saas__buf *buf, size_t extra);
int saas__buf_put(saas__buf *buf, const void *data, size_t len);
int saas__buf_puts(saas__buf *buf, const char *s);
int saas__buf_printf(saas__buf *buf, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
	__attribute__((format(printf, 2, 3)))
#endif
	;
/* Hand the data over (caller frees); the buffer is left empty. */
char *saas__buf_detach(saas__buf *buf, size_t *len);
void saas__buf_free(saas__buf *buf);

/*
 * Make room in a growable array: `*itemsp` points to `*cap` elements of `size`
 * bytes; afterwards it holds at least `need`. The capacity doubles (from 8), so
 * appending one at a time is amortised O(1). 0, or SAAS_ENOMEM (recorded) with
 * the array and `*cap` untouched. Use SAAS__ARRAY_RESERVE, which takes the
 * array itself and the element size from its type.
 */
int saas__array_reserve(void *itemsp, size_t *cap, size_t need, size_t size);
#define SAAS__ARRAY_RESERVE(items, cap, need) saas__array_reserve(&(items), &(cap), (need), sizeof(*(items)))

/*
 * Read a caller's options struct of any version from 1 to the current one.
 * `copy` must hold the current version's defaults (its _INIT) and `sizes[v]`
 * is how many bytes version v of the struct has (sizes[current] is its
 * sizeof): a caller built against an older header has a struct that ends
 * earlier, so only that version's bytes are read, never a member past them,
 * and what it lacks keeps its default. `copy->version` becomes current.
 * `options` may be NULL (the defaults stand). 0, or SAAS_EINVAL (recorded,
 * naming `what`) for version 0 or one newer than this library.
 */
int saas__options_read(void *copy, const void *options, const size_t *sizes, unsigned int current,
                       const char *what);

/* Create a directory and its parents with `mode`; existing is fine. 0 or -errno. */
int saas__mkdir_p(const char *path, unsigned int mode);

#endif
