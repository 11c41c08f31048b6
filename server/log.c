/*
 * Log lines to stderr: "TIME LEVEL message". Never an API key: the access log
 * has the path without its query, and the account id.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "aas_mcp.h"
#include "server.h"

static int max_level = SAAS_LOG_INFO;

void aas_log_set_level(int level)
{
	max_level = level;
}

int64_t aas_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void aas_log(int level, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	char when[40], msg[2048];
	va_list ap;

	if (level > max_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	for (char *p = msg; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	saas_time_format(when, sizeof(when), aas_now_ms());
	fprintf(stderr, "%s %s %s\n", when, names[level < 0 ? 0 : level > 3 ? 3 : level], msg);
}

void aas_engine_log(void *ud, int level, const char *msg)
{
	(void)ud;
	aas_log(level, "engine: %s", msg);
}

const char *aas_tenant_message(int rc, const char *where)
{
	const saas_error *e = saas_error_last();
	const char *detail = e->code == rc && e->message[0] ? e->message : saas_strerror(rc);

	if (!aas_error_is_internal(rc, e->code == rc ? e->klass : SAAS_ERRCLASS_NONE))
		return detail;
	aas_log(SAAS_LOG_WARN, "%s: answering %s for: %s", where, saas_error_name(rc), detail);
	return aas_error_tenant_text(rc);
}
