#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include "saas/sys/store.h"
#include "util/error.h"
#include "util/sha256.h"
#include "util/util.h"

int64_t saas__now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void saas__deadline(struct timespec *ts, clockid_t clock, int64_t ms)
{
	clock_gettime(clock, ts);
	ts->tv_sec += (time_t)(ms / 1000);
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

void saas__sleep_ms(int64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

	/* A signal cuts nanosleep short and leaves what is left in ts. */
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int saas__cond_init_monotonic(pthread_cond_t *cond)
{
	pthread_condattr_t attr;
	int rc;

	if ((rc = pthread_condattr_init(&attr)) != 0)
		return rc;
	if ((rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)) == 0)
		rc = pthread_cond_init(cond, &attr);
	pthread_condattr_destroy(&attr);
	return rc;
}

int saas__random(void *buf, size_t len)
{
	unsigned char *p = buf;

	while (len > 0) {
		ssize_t n = getrandom(p, len, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "getrandom: %s", strerror(errno));
		}
		p += n;
		len -= (size_t)n;
	}
	return SAAS_OK;
}

/* Ids' characters: lowercase base32, 5 bits each. */
static const char id_alphabet[] = "abcdefghijklmnopqrstuvwxyz234567";

int saas__id_new(char *out, const char *prefix, size_t nchars)
{
	unsigned char rnd[SAAS_ID_MAX];
	size_t plen = strlen(prefix);
	int rc;

	if (plen + nchars > SAAS_ID_MAX)
		return saas__inval("id too long");
	if ((rc = saas__random(rnd, nchars)) < 0)
		return rc;
	memcpy(out, prefix, plen);
	for (size_t i = 0; i < nchars; i++)
		out[plen + i] = id_alphabet[rnd[i] & 31];
	out[plen + nchars] = '\0';
	return SAAS_OK;
}

bool saas__id_valid(const char *id, const char *prefix, size_t nchars)
{
	size_t plen = strlen(prefix);

	return strncmp(id, prefix, plen) == 0 && strlen(id + plen) == nchars && strspn(id + plen, id_alphabet) == nchars;
}

bool saas__is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

bool saas__strlcpy(char *dst, const char *src, size_t size)
{
	size_t n = strlen(src);

	if (size == 0)
		return false;
	if (n >= size) {
		memcpy(dst, src, size - 1);
		dst[size - 1] = '\0';
		return false;
	}
	memcpy(dst, src, n + 1);
	return true;
}

char *saas__strdup(const char *s)
{
	char *p = strdup(s ? s : "");

	if (!p)
		saas__oom();
	return p;
}

int saas__output_discard(void *ud, int stream, const void *data, size_t len)
{
	(void)ud;
	(void)stream;
	(void)data;
	(void)len;
	return 0;
}

bool saas__valid_text(const char *s, size_t max)
{
	size_t n = 0;

	if (!s || !*s)
		return false;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++, n++) {
		if (n >= max || *p < 0x20 || *p == 0x7f)
			return false;
	}
	return true;
}

bool saas__valid_image(const char *s)
{
	if (!s || !*s || strlen(s) > SAAS_STORE_IMAGE_MAX || s[0] == '.' || s[0] == '-')
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' || *s == '.'))
			return false;
	return true;
}

bool saas__valid_utf8(const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str, *end = s + len;

	while (s < end) {
		unsigned char c = *s;
		size_t n;
		uint32_t cp;

		if (c < 0x80) {
			s++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			n = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 3;
			cp = c & 0x07;
		} else {
			return false;
		}
		if ((size_t)(end - s) <= n)
			return false;
		for (size_t i = 1; i <= n; i++) {
			if ((s[i] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i] & 0x3f);
		}
		if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		s += n + 1;
	}
	return true;
}

int saas__buf_grow(saas__buf *buf, size_t extra)
{
	size_t need, cap;
	char *p;

	if (extra > SIZE_MAX - buf->len - 1)
		return saas__oom();
	need = buf->len + extra + 1;
	if (need <= buf->cap)
		return SAAS_OK;
	cap = buf->cap ? buf->cap : 64;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	if (!(p = realloc(buf->data, cap)))
		return saas__oom();
	buf->data = p;
	buf->cap = cap;
	return SAAS_OK;
}

int saas__array_reserve(void *itemsp, size_t *cap, size_t need, size_t size)
{
	size_t ncap = *cap ? *cap : 8;
	void *items, *p;

	if (need <= *cap)
		return SAAS_OK;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return saas__oom();
		ncap *= 2;
	}
	if (size && ncap > SIZE_MAX / size)
		return saas__oom();
	/* itemsp is a T **: object pointers share one representation on every
	 * platform we build for (POSIX requires it), so it is read and written as
	 * a void * through memcpy rather than a cast that would break aliasing. */
	memcpy(&items, itemsp, sizeof(items));
	if (!(p = realloc(items, ncap * size)))
		return saas__oom();
	memcpy(itemsp, &p, sizeof(p));
	*cap = ncap;
	return SAAS_OK;
}

int saas__buf_put(saas__buf *buf, const void *data, size_t len)
{
	int rc;

	if ((rc = saas__buf_grow(buf, len)) < 0)
		return rc;
	if (len)
		memcpy(buf->data + buf->len, data, len);
	buf->len += len;
	buf->data[buf->len] = '\0';
	return SAAS_OK;
}

int saas__buf_puts(saas__buf *buf, const char *s)
{
	return saas__buf_put(buf, s, strlen(s));
}

int saas__buf_printf(saas__buf *buf, const char *fmt, ...)
{
	va_list ap;
	int n, rc;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return saas__inval("bad format");
	if ((rc = saas__buf_grow(buf, (size_t)n)) < 0)
		return rc;
	va_start(ap, fmt);
	vsnprintf(buf->data + buf->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	buf->len += (size_t)n;
	return SAAS_OK;
}

char *saas__buf_detach(saas__buf *buf, size_t *len)
{
	char *p = buf->data;

	if (!p)
		p = calloc(1, 1);
	if (len)
		*len = buf->len;
	buf->data = NULL;
	buf->len = buf->cap = 0;
	return p;
}

void saas__buf_free(saas__buf *buf)
{
	free(buf->data);
	buf->data = NULL;
	buf->len = buf->cap = 0;
}

int saas__options_read(void *copy, const void *options, const size_t *sizes, unsigned int current,
                       const char *what)
{
	unsigned int version;

	if (!options)
		return SAAS_OK;
	/* Every options struct starts with its version; read it alone first. */
	memcpy(&version, options, sizeof(version));
	if (version < 1 || version > current)
		return saas__inval("%s options version %u is not 1 to %u", what, version, current);
	memcpy(copy, options, sizes[version]);
	memcpy(copy, &current, sizeof(current));
	return SAAS_OK;
}

int saas__mkdir_p(const char *path, unsigned int mode)
{
	char tmp[4096];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(tmp))
		return -ENAMETOOLONG;
	memcpy(tmp, path, n + 1);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

void saas__sha256(uint8_t out[32], const void *data, size_t len)
{
	saas__sha256_ctx c;

	saas__sha256_init(&c);
	saas__sha256_update(&c, data, len);
	saas__sha256_final(&c, out);
}

void saas__sha256_hex(char out[65], const void *data, size_t len)
{
	uint8_t d[SAAS_SHA256_LEN];

	saas__sha256(d, data, len);
	saas__sha256_tohex(out, d);
}
