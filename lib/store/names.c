/*
 * The names of a sandbox's states and end reasons, part of the public API
 * (saas/sandbox.h). They live beside the store, which records both, so that
 * the store's own messages name a state without calling the core above it.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include "saas/sandbox.h"

SAAS_EXTERN(const char *) saas_sandbox_status_name(int status)
{
	switch (status) {
	case SAAS_SANDBOX_CREATING: return "creating";
	case SAAS_SANDBOX_READY: return "ready";
	case SAAS_SANDBOX_DESTROYED: return "destroyed";
	case SAAS_SANDBOX_PAUSED: return "paused";
	case SAAS_SANDBOX_PAUSING: return "pausing";
	case SAAS_SANDBOX_RESUMING: return "resuming";
	}
	return "unknown";
}

SAAS_EXTERN(const char *) saas_end_reason_name(int reason)
{
	switch (reason) {
	case SAAS_END_NONE: return "";
	case SAAS_END_USER: return "destroyed";
	case SAAS_END_EXPIRED: return "expired";
	case SAAS_END_CREDIT: return "credit";
	case SAAS_END_FAILED: return "failed";
	case SAAS_END_LOST: return "lost";
	case SAAS_END_DISABLED: return "disabled";
	}
	return "unknown";
}
