/*
 * aas: what each libsaas status code means on the command line, its exit
 * code (docs/cli.md) and what to do about it.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include "common.h"

/*
 * One row per code of SAAS_STATUS_LIST (saas/errors.h), indexed by -code.
 * Each row names its code, so a code appended to the list without a row here
 * fails the build when it is the last (the size check below) and the error
 * table test (unit.errors) wherever it is.
 */
struct cli_code {
	int code;
	int exit;
	/* ERROR, ENOMEM, EIO: the server's own failure (HTTP 5xx) is the server's; a local one is not. */
	bool server_if_5xx;
	const char *hint; /* NULL: the message says enough */
};

static const char server_failed[] = "the server failed; try again later or ask its operator";

static const struct cli_code codes[] = {
	[-SAAS_OK] = { SAAS_OK, AAS_EXIT_OK, false, NULL },
	[-SAAS_ERROR] = { SAAS_ERROR, AAS_EXIT_ERROR, true, NULL },
	[-SAAS_EINVAL] = { SAAS_EINVAL, AAS_EXIT_USAGE, false, "check the arguments (see `aas COMMAND --help`)" },
	[-SAAS_ENOMEM] = { SAAS_ENOMEM, AAS_EXIT_ERROR, true, NULL },
	[-SAAS_ENOTFOUND] = { SAAS_ENOTFOUND, AAS_EXIT_NOTFOUND, false, "check the id with `aas ls --all`" },
	[-SAAS_EEXISTS] = { SAAS_EEXISTS, AAS_EXIT_ERROR, false, NULL },
	[-SAAS_EAUTH] = { SAAS_EAUTH, AAS_EXIT_AUTH, false, "run `aas login` or set AAS_API_KEY" },
	[-SAAS_ECREDIT] = { SAAS_ECREDIT, AAS_EXIT_CREDIT, false, "add credit to the account (see `aas account`)" },
	[-SAAS_ELIMIT] = { SAAS_ELIMIT, AAS_EXIT_CREDIT, false, "destroy sandboxes with `aas rm` (see `aas account`)" },
	[-SAAS_ESTATE] = { SAAS_ESTATE, AAS_EXIT_ERROR, false, "check the sandbox's status with `aas get`" },
	[-SAAS_ETIMEOUT] = { SAAS_ETIMEOUT, AAS_EXIT_SERVER, false, server_failed },
	[-SAAS_EBACKEND] = { SAAS_EBACKEND, AAS_EXIT_SERVER, false, server_failed },
	[-SAAS_ESTORE] = { SAAS_ESTORE, AAS_EXIT_SERVER, false, server_failed },
	[-SAAS_EIO] = { SAAS_EIO, AAS_EXIT_ERROR, true, NULL }, /* local or remote: the message says which */
	[-SAAS_ENOTSUP] = { SAAS_ENOTSUP, AAS_EXIT_ERROR, false, NULL },
	[-SAAS_ETOOBIG] = { SAAS_ETOOBIG, AAS_EXIT_ERROR, false, "send less (see the limits in `aas account`)" },
	[-SAAS_EISDIR] = { SAAS_EISDIR, AAS_EXIT_ERROR, false,
	                   "name a file, not a directory (`aas files` lists what is there)" },
	[-SAAS_ENETWORK] = { SAAS_ENETWORK, AAS_EXIT_SERVER, false,
	                     "check that the server runs and --url / AAS_BASE_URL points at it" },
	[-SAAS_EPROTOCOL] = { SAAS_EPROTOCOL, AAS_EXIT_SERVER, false, server_failed },
	[-SAAS_EBUSY] = { SAAS_EBUSY, AAS_EXIT_SERVER, false, server_failed },
	[-SAAS_EPERM] = { SAAS_EPERM, AAS_EXIT_ERROR, false,
	                  "commands run as an unprivileged user: use paths under /workspace, its home or /tmp" },
};

_Static_assert(sizeof(codes) / sizeof(codes[0]) == SAAS_STATUS_COUNT, "a status code without its CLI row");

/* The row of rc; a code newer than this program (or a missing row) reads as SAAS_ERROR's. */
static const struct cli_code *row(int rc)
{
	if (rc > 0 || rc <= -SAAS_STATUS_COUNT || codes[-rc].code != rc)
		return &codes[-SAAS_ERROR];
	return &codes[-rc];
}

int aas_exit_code(int rc)
{
	const struct cli_code *c = row(rc);
	const saas_error *e = saas_error_last();

	if (c->server_if_5xx && e->code == rc && e->klass == SAAS_ERRCLASS_HTTP && e->backend_code >= 500)
		return AAS_EXIT_SERVER;
	return c->exit;
}

const char *aas_hint(int rc)
{
	return row(rc)->hint;
}

bool aas_status_known(int rc)
{
	return rc <= 0 && rc > -SAAS_STATUS_COUNT && codes[-rc].code == rc;
}
