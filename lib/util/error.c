#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "util/error.h"
#include "util/util.h"

#define MESSAGE_MAX 1024

struct thread_error {
	saas_error pub;
	char message[MESSAGE_MAX];
	char sqlstate[8];
	char limit[32];
};

static _Thread_local struct thread_error last = { { 0, 0, 0, "", "", "", 0 }, "", "", "" };

static void set_pointers(void)
{
	last.pub.message = last.message;
	last.pub.sqlstate = last.sqlstate;
	last.pub.limit = last.limit;
}

void saas__error_clear(void)
{
	last.pub.code = SAAS_OK;
	last.pub.klass = SAAS_ERRCLASS_NONE;
	last.pub.backend_code = 0;
	last.pub.retry_after_ms = 0;
	last.message[0] = '\0';
	last.sqlstate[0] = '\0';
	last.limit[0] = '\0';
	set_pointers();
}

static int set_v(int code, int klass, long backend_code, const char *sqlstate, const char *fmt, va_list ap)
{
	char message[MESSAGE_MAX];

	/* Formatted aside first: an argument may be the last message itself ("%s", saas_error_last()->message). */
	vsnprintf(message, sizeof(message), fmt, ap);
	memcpy(last.message, message, sizeof(last.message));
	last.pub.code = code;
	last.pub.klass = klass;
	last.pub.backend_code = backend_code;
	snprintf(last.sqlstate, sizeof(last.sqlstate), "%s", sqlstate ? sqlstate : "");
	last.limit[0] = '\0';
	last.pub.retry_after_ms = 0;
	set_pointers();
	return code;
}

int saas__error(int code, int klass, long backend_code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	set_v(code, klass, backend_code, NULL, fmt, ap);
	va_end(ap);
	return code;
}

int saas__error_sqlstate(int code, const char *sqlstate, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	set_v(code, SAAS_ERRCLASS_STORE, 0, sqlstate, fmt, ap);
	va_end(ap);
	return code;
}

int saas__error_limit(const char *limit, int64_t retry_after_ms, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	set_v(SAAS_ELIMIT, SAAS_ERRCLASS_BILLING, 0, NULL, fmt, ap);
	va_end(ap);
	saas__error_set_limit(limit, retry_after_ms);
	return SAAS_ELIMIT;
}

void saas__error_set_limit(const char *limit, int64_t retry_after_ms)
{
	saas__strlcpy(last.limit, limit ? limit : "", sizeof(last.limit));
	last.pub.retry_after_ms = retry_after_ms > 0 ? retry_after_ms : 0;
	set_pointers();
}

int saas__error_wrap(int code, const char *fmt, ...)
{
	char prefix[MESSAGE_MAX / 2];
	char old[MESSAGE_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, last.message, sizeof(old));
	if (last.pub.code == SAAS_OK) {
		last.pub.code = code;
		snprintf(last.message, sizeof(last.message), "%s", prefix);
	} else {
		char joined[sizeof(prefix) + sizeof(old) + 2];
		snprintf(joined, sizeof(joined), "%s: %s", prefix, old);
		saas__strlcpy(last.message, joined, sizeof(last.message));
	}
	set_pointers();
	return code;
}

_Static_assert(sizeof(((struct saas__kept_error *)0)->message) == MESSAGE_MAX, "a kept message is cut");

void saas__error_keep(struct saas__kept_error *k, int code)
{
	bool own = last.pub.code == code;

	k->code = code;
	k->klass = last.pub.klass;
	k->backend_code = last.pub.backend_code;
	memcpy(k->message, last.message, sizeof(k->message));
	saas__strlcpy(k->sqlstate, own ? last.sqlstate : "", sizeof(k->sqlstate));
	saas__strlcpy(k->limit, own ? last.limit : "", sizeof(k->limit));
	k->retry_after_ms = own ? last.pub.retry_after_ms : 0;
}

int saas__error_raise(const struct saas__kept_error *k)
{
	saas__error(k->code, k->klass, k->backend_code, "%s", k->message);
	saas__strlcpy(last.sqlstate, k->sqlstate, sizeof(last.sqlstate));
	if (k->limit[0] || k->retry_after_ms > 0)
		saas__error_set_limit(k->limit, k->retry_after_ms);
	return k->code;
}

SAAS_EXTERN(const saas_error *) saas_error_last(void)
{
	set_pointers();
	return &last.pub;
}

/*
 * What a status code means: SAAS_STATUS_LIST (saas/errors.h) laid out by
 * code. The lookup is a switch over the enum, with no default, generated
 * from the same list: a code added to saas_status and not to the list fails
 * the build (-Wswitch), and a row naming no code does not compile.
 */
struct code_info {
	const char *name;
	const char *text;
	int http;
};

#define CODE_ROW(code, name, text, http) [-(code)] = { name, text, http },
static const struct code_info codes[] = { SAAS_STATUS_LIST(CODE_ROW) };
#undef CODE_ROW

_Static_assert(sizeof(codes) / sizeof(codes[0]) == SAAS_STATUS_COUNT, "SAAS_STATUS_LIST has a gap");

static const struct code_info *code_info(int code)
{
#define CODE_CASE(code, name, text, http) case code:
	switch ((saas_status)code) {
		SAAS_STATUS_LIST(CODE_CASE)
		return &codes[-code];
	}
#undef CODE_CASE
	return NULL;
}

SAAS_EXTERN(const char *) saas_strerror(int code)
{
	const struct code_info *i = code_info(code);
	return i ? i->text : "unknown error";
}

SAAS_EXTERN(const char *) saas_error_name(int code)
{
	const struct code_info *i = code_info(code);
	return i ? i->name : "unknown";
}

SAAS_EXTERN(int) saas_error_http_status(int code)
{
	const struct code_info *i = code_info(code);
	return i ? i->http : 500;
}

int saas__error_code_last(void)
{
	return 1 - SAAS_STATUS_COUNT;
}

int saas__error_from_status(long status)
{
	/* Where codes share a status, the one it means when the body names none. */
	switch (status) {
	case 409: return SAAS_ESTATE;  /* the commonest conflict: a destroyed sandbox */
	case 500: return SAAS_ERROR;   /* not ENOMEM or EIO, which name a cause */
	default: break;
	}
	/* Otherwise the first code in the list that answers with it (502: EBACKEND, 503: ESTORE). */
	for (int code = SAAS_ERROR; code > -SAAS_STATUS_COUNT; code--)
		if (codes[-code].http == status)
			return code;
	return status >= 500 ? SAAS_ERROR : SAAS_EPROTOCOL;
}
