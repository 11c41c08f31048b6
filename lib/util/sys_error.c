/*
 * saas_sys_error_set(): the error call of saas/sys/, for backends built
 * outside the library. It records through the library's own per-thread error
 * (util/error.c), so saas_error_last() cannot tell a backend's detail from
 * the core's.
 */
#include <stdarg.h>
#include <stdio.h>

#include "saas/sys/error.h"
#include "util/error.h"

/* Room for the message util/error.c keeps; longer is cut there too. */
#define MESSAGE_MAX 1024

SAAS_EXTERN(int) saas_sys_error_set(int code, int klass, long backend_code, const char *fmt, ...)
{
	char message[MESSAGE_MAX];
	va_list ap;

	/* A backend's mistake must not turn a failure into success, nor into a code nobody can name. */
	if (code >= SAAS_OK || code < saas__error_code_last())
		code = SAAS_ERROR;
	if (klass < SAAS_ERRCLASS_NONE || klass > SAAS_ERRCLASS_AUTH)
		klass = SAAS_ERRCLASS_NONE;
	if (!fmt)
		return saas__error(code, klass, backend_code, "%s", saas_strerror(code));
	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	return saas__error(code, klass, backend_code, "%s", message);
}
