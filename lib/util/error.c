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

/*
 * The one table of what a status code means: its text, its name (the REST
 * API's error "code") and its HTTP status. A switch over the enum, with no
 * default, so that a code added to saas_status and forgotten here fails the
 * build (-Wswitch); the frontends' maps (CLI exit codes, MCP hints) are
 * switches of the same kind.
 */
struct code_info {
	const char *text;
	const char *name;
	int http;
};

static const struct code_info *code_info(int code)
{
	static const struct code_info
		ok = { "success", "ok", 200 },
		error = { "error", "error", 500 },
		inval = { "invalid argument", "invalid_argument", 400 },
		nomem = { "out of memory", "out_of_memory", 500 },
		notfound = { "not found", "not_found", 404 },
		exists = { "already exists", "already_exists", 409 },
		auth = { "authentication failed", "unauthorized", 401 },
		credit = { "insufficient credit", "insufficient_credit", 402 },
		limit = { "limit exceeded", "limit_exceeded", 429 },
		state = { "wrong state", "conflict", 409 },
		timeout = { "timed out", "timeout", 504 },
		backend = { "VM backend failure", "backend_error", 502 },
		store = { "state store failure", "store_error", 503 },
		io = { "input/output error", "io_error", 500 },
		notsup = { "not supported", "not_supported", 501 },
		toobig = { "too large", "too_large", 413 },
		isdir = { "is a directory", "is_a_directory", 409 },
		network = { "network failure", "network_error", 502 },
		protocol = { "protocol error", "protocol_error", 502 },
		busy = { "resource busy", "busy", 503 },
		perm = { "permission denied", "permission_denied", 403 };

	switch ((saas_status)code) {
	case SAAS_OK: return &ok;
	case SAAS_ERROR: return &error;
	case SAAS_EINVAL: return &inval;
	case SAAS_ENOMEM: return &nomem;
	case SAAS_ENOTFOUND: return &notfound;
	case SAAS_EEXISTS: return &exists;
	case SAAS_EAUTH: return &auth;
	case SAAS_ECREDIT: return &credit;
	case SAAS_ELIMIT: return &limit;
	case SAAS_ESTATE: return &state;
	case SAAS_ETIMEOUT: return &timeout;
	case SAAS_EBACKEND: return &backend;
	case SAAS_ESTORE: return &store;
	case SAAS_EIO: return &io;
	case SAAS_ENOTSUP: return &notsup;
	case SAAS_ETOOBIG: return &toobig;
	case SAAS_EISDIR: return &isdir;
	case SAAS_ENETWORK: return &network;
	case SAAS_EPROTOCOL: return &protocol;
	case SAAS_EBUSY: return &busy;
	case SAAS_EPERM: return &perm;
	}
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
	int code = SAAS_OK;

	/* Codes are dense and append-only: the last is the one before the first gap. */
	while (code_info(code - 1))
		code--;
	return code;
}
