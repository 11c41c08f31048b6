#include <stdarg.h>
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
	last.pub.code = code;
	last.pub.klass = klass;
	last.pub.backend_code = backend_code;
	vsnprintf(last.message, sizeof(last.message), fmt, ap);
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

SAAS_EXTERN(const saas_error *) saas_error_last(void)
{
	set_pointers();
	return &last.pub;
}

SAAS_EXTERN(const char *) saas_strerror(int code)
{
	switch (code) {
	case SAAS_OK: return "success";
	case SAAS_ERROR: return "error";
	case SAAS_EINVAL: return "invalid argument";
	case SAAS_ENOMEM: return "out of memory";
	case SAAS_ENOTFOUND: return "not found";
	case SAAS_EEXISTS: return "already exists";
	case SAAS_EAUTH: return "authentication failed";
	case SAAS_ECREDIT: return "insufficient credit";
	case SAAS_ELIMIT: return "limit exceeded";
	case SAAS_ESTATE: return "wrong state";
	case SAAS_ETIMEOUT: return "timed out";
	case SAAS_EBACKEND: return "VM backend failure";
	case SAAS_ESTORE: return "state store failure";
	case SAAS_EIO: return "input/output error";
	case SAAS_ENOTSUP: return "not supported";
	case SAAS_ETOOBIG: return "too large";
	case SAAS_EISDIR: return "is a directory";
	case SAAS_ENETWORK: return "network failure";
	case SAAS_EPROTOCOL: return "protocol error";
	case SAAS_EBUSY: return "resource busy";
	}
	return "unknown error";
}

SAAS_EXTERN(const char *) saas_error_name(int code)
{
	switch (code) {
	case SAAS_OK: return "ok";
	case SAAS_ERROR: return "error";
	case SAAS_EINVAL: return "invalid_argument";
	case SAAS_ENOMEM: return "out_of_memory";
	case SAAS_ENOTFOUND: return "not_found";
	case SAAS_EEXISTS: return "already_exists";
	case SAAS_EAUTH: return "unauthorized";
	case SAAS_ECREDIT: return "insufficient_credit";
	case SAAS_ELIMIT: return "limit_exceeded";
	case SAAS_ESTATE: return "conflict";
	case SAAS_ETIMEOUT: return "timeout";
	case SAAS_EBACKEND: return "backend_error";
	case SAAS_ESTORE: return "store_error";
	case SAAS_EIO: return "io_error";
	case SAAS_ENOTSUP: return "not_supported";
	case SAAS_ETOOBIG: return "too_large";
	case SAAS_EISDIR: return "is_a_directory";
	case SAAS_ENETWORK: return "network_error";
	case SAAS_EPROTOCOL: return "protocol_error";
	case SAAS_EBUSY: return "busy";
	}
	return "unknown";
}
