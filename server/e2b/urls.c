/*
 * What reaches a sandbox without the SDK in between: signed file URLs
 * (sandbox.uploadUrl/downloadUrl, used by curl or a browser with no header)
 * and, in domain mode, a guest's ports at PORT-ID.DOMAIN.
 *
 * A signed URL carries no sandbox when the SDK was given E2B_SANDBOX_URL: it
 * resolves "/files" against that URL, dropping its path, so the URL reaches
 * /files at the root with path, username, signature and
 * signature_expiration only (docs/e2b-wire.md 1.4). The signature is
 * SHA-256 over the path, the operation, the user and the sandbox's
 * envdAccessToken, so the sandbox is found by checking the signature against
 * each candidate's token, in constant time: the one the Host (domain mode) or
 * E2b-Sandbox-Id names (its owner found by the engine: one store lookup, one
 * HMAC and one hash), else every sandbox not destroyed of every account, at
 * most AAS_E2B_SIGNED_SCAN_MAX accounts and sandboxes together. The request is then served as
 * one with that token (data.c, files.c), so a signature opens only its
 * sandbox, its path, its operation and its user, until its expiry.
 *
 * A guest port in domain mode needs the sandbox's trafficAccessToken in
 * e2b-traffic-access-token, always: libsaas serves no port of a sandbox to
 * anyone who only knows its id (ids are not secrets here). The port is then
 * exposed for the sandbox's account (saas_port_expose: the same exposure a
 * preview URL has) and the request proxied as a preview is (server/preview:
 * streams and WebSockets; the tokens never reach the guest).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "e2b/internal.h"
#include "preview/preview.h"

/* ---- signed file URLs ---- */

#define UNAUTHORIZED                                                                                                   \
	"unauthorized access, please provide a valid access token or method signing if supported"

/* Is sig the signature of this request's fields under sandbox_id's envd token for account? Then token holds it. */
static bool signed_by(const char *sig, const char *sandbox_id, const char *account, const char *path, const char *op,
                      const char *user, const char *exp, char token[AAS_E2B_ENVD_TOKEN_SIZE])
{
	char expected[AAS_E2B_SIGNATURE_SIZE];

	aas_e2b_envd_token(token, sandbox_id, account);
	aas_e2b_signature(expected, path, op, user, token, exp);
	if (aas_e2b_token_equal(sig, expected))
		return true;
	sodium_memzero(token, AAS_E2B_ENVD_TOKEN_SIZE);
	return false;
}

/*
 * The sandbox the request named: signed by its token under its owner? 1
 * (into t), 0 (no such sandbox, or not its signature: one answer for both),
 * -1 after a reply. Whatever the owner's state, its sandbox is checked here
 * as any other's; serving it (data.c) refuses a disabled account and a
 * sandbox that does not run.
 */
static int find_named(struct aas_reply *out, struct aas_e2b_target *t, const char *id, const char *sig,
                      const char *path, const char *op, const char *user, const char *exp)
{
	char account[SAAS_ID_MAX + 1];
	int rc = saas_engine_sandbox_owner(account, aas_e2b_state.engine, id, 0);

	if (rc == SAAS_ENOTFOUND)
		return 0;
	if (rc < 0) {
		aas_e2b_error_saas(out, rc, "e2b: finding a signed URL's sandbox");
		return -1;
	}
	if (!signed_by(sig, id, account, path, op, user, exp, t->token))
		return 0;
	snprintf(t->e2b_id, sizeof(t->e2b_id), "%s", aas_e2b_id_from_saas(id));
	return 1;
}

/*
 * Every sandbox not destroyed of every account (at most
 * AAS_E2B_SIGNED_SCAN_MAX), for a request that names none: the first whose
 * token signs the request. 1 found (into t), 0 none, -1 after a reply.
 */
static int scan(struct aas_reply *out, struct aas_e2b_target *t, const char *sig, const char *path, const char *op,
                const char *user, const char *exp)
{
	saas_account_list *accounts = NULL;
	size_t seen = 0;
	int found = 0, rc;

	if ((rc = saas_account_list_get(&accounts, aas_e2b_state.engine)) < 0) {
		aas_e2b_error_saas(out, rc, "e2b: listing accounts for a signed URL");
		return -1;
	}
	for (size_t i = 0; i < accounts->count && !found; i++) {
		const char *account = accounts->items[i]->id;
		saas_client *client = NULL;
		char *cursor = NULL;

		/* A disabled account's sandboxes serve nothing: they are no candidates. Each account looked in counts. */
		if (!accounts->items[i]->disabled_at_ms && ++seen <= AAS_E2B_SIGNED_SCAN_MAX &&
		    saas_client_open_account(&client, aas_e2b_state.engine, account, 0) == SAAS_OK) {
			do {
				saas_sandbox_list *page = NULL;
				/* Ids are all it needs: recorded counters keep the VMs' host out of it (SAAS_LIST_RECORDED). */
				if (saas_sandbox_list_get(&page, client, cursor, 1000, SAAS_LIST_ACTIVE | SAAS_LIST_RECORDED) < 0)
					break;
				free(cursor);
				cursor = page->next_cursor ? strdup(page->next_cursor) : NULL;
				for (size_t j = 0; j < page->count && !found && seen < AAS_E2B_SIGNED_SCAN_MAX; j++, seen++) {
					const char *sid = page->items[j]->id, *e2b = aas_e2b_id_from_saas(sid);
					if (e2b && (found = signed_by(sig, sid, account, path, op, user, exp, t->token)))
						snprintf(t->e2b_id, sizeof(t->e2b_id), "%s", e2b);
				}
				saas_sandbox_list_free(page);
			} while (cursor && !found && seen < AAS_E2B_SIGNED_SCAN_MAX);
			free(cursor);
			saas_client_free(client);
		}
		if (!found && seen >= AAS_E2B_SIGNED_SCAN_MAX) {
			aas_e2b_error(out, 503, "this server runs too many sandboxes to find a signed URL's by its signature "
			              "(%d): serve E2B with --e2b-domain, whose URLs name their sandbox (docs/e2b.md)",
			              AAS_E2B_SIGNED_SCAN_MAX);
			found = -1;
		}
	}
	saas_account_list_free(accounts);
	return found;
}

bool aas_e2b_signed_find(struct aas_req *r, struct aas_reply *out, struct aas_e2b_target *t)
{
	const char *path, *user, *sig, *exp, *op, *named;
	char id[SAAS_ID_MAX + 1];
	int found;

	if (!aas_query(r, "path", &path, out) || !aas_query(r, "username", &user, out) ||
	    !aas_query(r, "signature", &sig, out) || !aas_query(r, "signature_expiration", &exp, out))
		return false;
	if (strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0) {
		op = "read";
	} else if (strcmp(r->method, "POST") == 0) {
		op = "write";
	} else {
		aas_e2b_error(out, 405, "%s is not allowed on /files", r->method);
		return false;
	}
	if (!sig || strlen(sig) != AAS_E2B_SIGNATURE_SIZE - 1) {
		aas_e2b_error(out, 401, "%s (the signature is not a v1_ signature)", UNAUTHORIZED);
		return false;
	}
	if ((path && strlen(path) >= SAAS_PATH_MAX) || (user && strlen(user) > 64)) {
		aas_e2b_error(out, 400, "the path is over %d bytes, or the user over 64", SAAS_PATH_MAX - 1);
		return false;
	}
	if (exp) {
		/* Decimal unix seconds as the SDK writes them: digits only, and signed as sent. */
		size_t n = strlen(exp);
		if (n == 0 || n > 12 || strspn(exp, "0123456789") != n) {
			aas_e2b_error(out, 400, "signature_expiration must be unix seconds");
			return false;
		}
		if (strtoll(exp, NULL, 10) < aas_now_ms() / 1000) {
			aas_e2b_error(out, 401, "signature is already expired");
			return false;
		}
	}
	/* The sandbox the Host names (domain mode), or that the header does: the owner is the only unknown. */
	named = t->e2b_id[0] ? t->e2b_id : MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "E2b-Sandbox-Id");
	if (named && !aas_e2b_id_to_saas(id, named)) {
		aas_e2b_error(out, 401, "%s", UNAUTHORIZED);
		return false;
	}
	t->e2b_id[0] = '\0';
	found = named ? find_named(out, t, id, sig, path ? path : "", op, user ? user : "", exp)
	              : scan(out, t, sig, path ? path : "", op, user ? user : "", exp);
	if (found < 0)
		return false;
	if (!found) {
		aas_e2b_error(out, 401, "%s: the signature is no running sandbox's for this path, operation (%s) and user",
		              UNAUTHORIZED, op);
		return false;
	}
	return true;
}

/* ---- a guest's port in domain mode ---- */

/* E2B's proxy's refusal (its shape: sandboxId, message, code). */
static enum MHD_Result refuse(struct aas_req *r, unsigned int status, const char *e2b_id, const char *msg)
{
	struct aas_reply rep = { 0, NULL };

	aas_reply_json(&rep, status, json_pack("{s:s,s:s,s:i}", "sandboxId", e2b_id, "message", msg, "code", (int)status));
	return aas_queue(r, &rep);
}

/* The exposure's name in its preview URL, "http://NAME.DOMAIN[:PORT]/": false when it has no such shape. */
static bool url_name(const char *url, char name[SAAS_PREVIEW_NAME_LEN + 1])
{
	const char *p = strstr(url, "://");
	size_t n;

	if (!p)
		return false;
	p += 3;
	n = strcspn(p, ".:/");
	if (n != SAAS_PREVIEW_NAME_LEN)
		return false;
	memcpy(name, p, n);
	name[n] = '\0';
	return true;
}

enum MHD_Result aas_e2b_port_handle(struct aas_req *r, const char *upload, size_t *upload_size)
{
	const char *host = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Host");
	const char *token = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "e2b-traffic-access-token");
	char e2b_id[SAAS_ID_MAX + 1], id[SAAS_ID_MAX + 1], account[SAAS_ID_MAX + 1], name[SAAS_PREVIEW_NAME_LEN + 1];
	char msg[256], *url = NULL;
	saas_client *client = NULL;
	saas_sandbox *sb = NULL;
	unsigned int port;
	enum MHD_Result ret;
	int rc;

	if (!aas_e2b_host_parse(host, aas_e2b_state.cfg->e2b_domain, &port, e2b_id) || !aas_e2b_id_to_saas(id, e2b_id))
		return refuse(r, 404, "", "no sandbox host here");
	if (!token)
		return refuse(r, 403, e2b_id, "Sandbox is secured with traffic access token. Token header "
		              "'e2b-traffic-access-token' is missing (libsaas requires it on every port: the sandbox's "
		              "trafficAccessToken)");
	if (!aas_e2b_traffic_token_check(token, id, account))
		return refuse(r, 403, e2b_id, "Sandbox is secured with traffic access token. The token in header "
		              "'e2b-traffic-access-token' is not this sandbox's");
	snprintf(r->account_id, sizeof(r->account_id), "%s", account);
	if (saas_client_open_account(&client, aas_e2b_state.engine, account, 0) < 0) {
		client = NULL;
		ret = refuse(r, 403, e2b_id, "the sandbox's account is disabled");
		goto out;
	}
	rc = saas_sandbox_get_ext(&sb, client, id, SAAS_GET_RECORDED);
	if (rc < 0 || sb->status != SAAS_SANDBOX_READY) {
		ret = refuse(r, 502, e2b_id, rc == SAAS_OK && sb->status == SAAS_SANDBOX_PAUSED
		                             ? "The sandbox is paused: connect to it to resume it"
		                             : "The sandbox was not found, or is not running");
		goto out;
	}
	/* The port's exposure (made once, then the same): what the preview proxy opens tunnels to. */
	if ((rc = saas_port_expose(&url, client, id, port, 0)) < 0 || !url_name(url, name)) {
		snprintf(msg, sizeof(msg), "port %u cannot be reached: %s", port,
		         rc < 0 ? aas_tenant_message(rc, "e2b: exposing a port") : "the exposure has no name");
		ret = refuse(r, rc == SAAS_EINVAL ? 400 : 502, e2b_id, msg);
		goto out;
	}
	ret = aas_preview_handle(r, name, upload, upload_size);
out:
	saas_free(url);
	saas_sandbox_free(sb);
	saas_client_free(client);
	return ret;
}
