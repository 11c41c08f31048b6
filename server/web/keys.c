/*
 * The dashboard's API keys (/dashboard/keys): the account's keys, a form that
 * makes one (shown once, on the page that answers the form, with its E2B
 * spelling), and Revoke, which asks first. Keys are the engine's, across
 * accounts: every page looks a key up among this account's own. The page
 * shell and forms are the dashboard's (dashboard.c, through internal.h).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "web/html.h"
#include "web/internal.h"

/* The longest key name saas_key_create takes, for the words that name a key. */
#define KEY_NAME_MAX 200

static void keys_page(struct aas_req *r, struct aas_reply *out, const struct aas_viewer *v, const char *new_key, const char *new_name)
{
	struct aas_html h = { 0 };
	saas_key_list *l = NULL;
	char b1[40], b2[40], action[128], e2b[SAAS_KEY_E2B_LEN + 1];
	char aria[KEY_NAME_MAX + 16], question[KEY_NAME_MAX + 160];
	int rc;

	aas_dash_begin(&h, v, "API keys", "keys");
	if (new_key) {
		aas_html_printf(&h, "<section id=\"new-key-box\" class=\"panel success\" aria-live=\"polite\"><h2>New key \"%s\"</h2>"
		                    "<p>Copy it now: it is shown once, and only its hash is kept.</p>"
		                    "<p><output id=\"new-key\">%s</output> "
		                    "<button type=\"button\" class=\"copy\" data-copy=\"new-key\">Copy</button></p>"
		                    "<p>Use it as <code>Authorization: Bearer ...</code>; see the <a href=\"/docs\">quick "
		                    "start</a>.</p>",
		                new_name, new_key);
		/* The same secret in E2B's shape, for code written for E2B's SDKs (docs/e2b.md): nothing more is kept. */
		if (saas_key_to_e2b(e2b, new_key) == SAAS_OK)
			aas_html_printf(&h, "<div id=\"new-key-e2b-box\"><h3>For E2B's SDKs</h3>"
			                    "<p>The same key in E2B's shape, revoked with it. Set these where code written for "
			                    "E2B runs, with <code>AAS_BASE_URL</code> this server's address:</p>"
			                    "<pre><output id=\"new-key-e2b\">export E2B_API_KEY=%s\n"
			                    "export E2B_API_URL=$AAS_BASE_URL" AAS_E2B_API_PREFIX "\n"
			                    "export E2B_SANDBOX_URL=$AAS_BASE_URL" AAS_E2B_SANDBOX_PREFIX "</output></pre>"
			                    "<button type=\"button\" class=\"copy\" data-copy=\"new-key-e2b\">Copy</button>"
			                    "</div>",
			                e2b);
		sodium_memzero(e2b, sizeof(e2b));
		aas_html_raw(&h, "</section>");
	}
	aas_html_raw(&h, "<section class=\"panel\" aria-labelledby=\"create-heading\"><h2 id=\"create-heading\">"
	                 "Create a key</h2>");
	aas_dash_form(&h, v, "key-create inline-form", "/dashboard/keys");
	aas_html_raw(&h, "<div class=\"field\"><label for=\"key-name\">Name</label> <input id=\"key-name\" name=\"name\" "
	                 "maxlength=\"200\" required placeholder=\"laptop\" aria-describedby=\"key-name-hint\">"
	                 "<p class=\"hint\" id=\"key-name-hint\">Where it is used, to know it again later.</p></div>"
	                 "<button id=\"key-submit\" type=\"submit\">Create key</button></form></section>");
	if ((rc = saas_key_list_get(&l, aas_people_engine(), v->user->account_id)) < 0)
		goto end;
	aas_html_raw(&h, "<section class=\"panel\" aria-labelledby=\"keys-heading\"><div class=\"panel-head\"><h2 "
	                 "id=\"keys-heading\">Keys</h2><p class=\"muted\">Every API request and MCP client sends one: "
	                 "<code>Authorization: Bearer KEY</code></p></div>");
	if (!l->count) {
		aas_html_raw(&h, "<div class=\"empty\" id=\"no-keys\"><p><strong>No API keys yet</strong> — create one "
		                 "above to call the API, the <code>aas</code> command or MCP.</p></div></section>");
		goto end;
	}
	aas_html_raw(&h, "<div class=\"table-wrap\"><table id=\"keys\" class=\"cards-narrow\"><caption class=\"vh\">"
	                 "This account's API keys</caption><thead><tr>"
	                 "<th scope=\"col\">Name</th><th scope=\"col\">Prefix</th><th scope=\"col\">Created</th>"
	                 "<th scope=\"col\">Last used</th><th scope=\"col\">Status</th><th scope=\"col\">Actions</th>"
	                 "</tr></thead><tbody>");
	/* Newest first: the list comes oldest first. */
	for (size_t i = l->count; i-- > 0;) {
		const saas_key *k = l->items[i];

		aas_html_printf(&h, "<tr id=\"key-%s\"><td data-label=\"Name\">%s</td><td data-label=\"Prefix\">"
		                    "<code>%s...</code></td><td data-label=\"Created\">%s</td><td data-label=\"Last used\">%s"
		                    "</td><td data-label=\"Status\" class=\"status\">",
		                k->id, k->name, k->prefix, aas_dash_minute(b1, k->created_at_ms), aas_dash_minute(b2, k->last_used_at_ms));
		aas_dash_badge(&h, k->revoked_at_ms ? "revoked" : "active");
		aas_html_raw(&h, "</td><td data-label=\"Actions\">");
		if (!k->revoked_at_ms) {
			snprintf(action, sizeof(action), "/dashboard/keys/%s/revoke", k->id);
			snprintf(aria, sizeof(aria), "Revoke %s", k->name);
			snprintf(question, sizeof(question), "Revoke the key \"%s\"? Every program that uses it is refused "
			                                     "from now on. This cannot be undone.", k->name);
			aas_dash_confirm_link(&h, v, action, NULL, "Revoke", aria, question, "Revoke key");
		}
		aas_html_raw(&h, "</td></tr>");
	}
	aas_html_raw(&h, "</tbody></table></div></section>");
end:
	saas_key_list_free(l);
	aas_dash_end(r, out, &h, rc, new_key ? 201 : 200);
}

void aas_h_dash_keys(struct aas_req *r, struct aas_reply *out)
{
	struct aas_viewer v;

	if (!aas_viewer_get(r, out, &v, true))
		return;
	keys_page(r, out, &v, NULL, NULL);
	aas_viewer_free(&v);
}

void aas_h_dash_key_create(struct aas_req *r, struct aas_reply *out)
{
	struct aas_viewer v;
	struct aas_form f = { 0 };
	const char *name;
	char *key = NULL;
	int rc;

	if (!aas_viewer_get(r, out, &v, true))
		return;
	if (!aas_dash_form_ok(r, out, &v, &f))
		goto out;
	name = aas_form_get(&f, "name");
	if ((rc = saas_key_create(&key, NULL, aas_people_engine(), v.user->account_id, name, 0)) < 0) {
		aas_reply_page_saas(r, out, rc, "Cannot create the key");
		goto out;
	}
	keys_page(r, out, &v, key, name ? name : "");
	memset(key, 0, strlen(key));
	saas_free(key);
out:
	aas_form_free(&f);
	aas_viewer_free(&v);
}

/* One of this account's keys by id, in *list (free it): SAAS_OK, or SAAS_ENOTFOUND when the account has none such. */
static int key_of_account(saas_key_list **list, const saas_key **key, const struct aas_viewer *v, const char *id)
{
	int rc;

	*key = NULL;
	/* Key ids are the engine's, across accounts: only one of this account's. */
	if ((rc = saas_key_list_get(list, aas_people_engine(), v->user->account_id)) < 0)
		return rc;
	for (size_t i = 0; i < (*list)->count; i++)
		if (strcmp((*list)->items[i]->id, id) == 0) {
			*key = (*list)->items[i];
			return SAAS_OK;
		}
	return SAAS_ENOTFOUND;
}

/* GET of the revoke path: the question Revoke asks without JavaScript, and a form that posts to the same path. */
void aas_h_dash_key_revoke_page(struct aas_req *r, struct aas_reply *out)
{
	struct aas_html h = { 0 };
	struct aas_viewer v;
	saas_key_list *l = NULL;
	const saas_key *k;
	char action[128], b1[40];
	int rc;

	if (!aas_viewer_get(r, out, &v, true))
		return;
	if ((rc = key_of_account(&l, &k, &v, r->route_id)) == SAAS_ENOTFOUND) {
		aas_reply_page_error(r, out, 404, "No such key", "This account has no key with that id.");
		goto out;
	}
	aas_dash_begin(&h, &v, "Revoke this key?", "keys");
	if (rc < 0)
		goto end;
	if (k->revoked_at_ms) {
		aas_html_printf(&h, "<p id=\"already-revoked\">The key \"%s\" was revoked %s.</p>"
		                    "<p><a class=\"button secondary\" href=\"/dashboard/keys\">Back</a></p>",
		                k->name, aas_dash_minute(b1, k->revoked_at_ms));
		goto end;
	}
	aas_html_printf(&h, "<section class=\"panel confirm-panel\" aria-labelledby=\"confirm-what\">"
	                    "<p id=\"confirm-what\">The key \"%s\" (<code>%s...</code>) stops working: every program "
	                    "that sends it is refused from now on. This cannot be undone.</p>"
	                    "<dl class=\"facts\"><dt>Created</dt><dd>%s</dd>",
	                k->name, k->prefix, aas_dash_minute(b1, k->created_at_ms));
	aas_html_printf(&h, "<dt>Last used</dt><dd>%s</dd></dl>", aas_dash_minute(b1, k->last_used_at_ms));
	snprintf(action, sizeof(action), "/dashboard/keys/%s/revoke", k->id);
	aas_dash_form(&h, &v, "revoke confirm-form", action);
	aas_html_raw(&h, "<div class=\"buttons\"><button type=\"submit\" class=\"danger\" id=\"confirm-revoke\">Revoke key"
	                 "</button> <a class=\"button secondary\" id=\"cancel\" href=\"/dashboard/keys\">Cancel</a></div>"
	                 "</form></section>");
end:
	aas_dash_end(r, out, &h, rc, 200);
out:
	saas_key_list_free(l);
	aas_viewer_free(&v);
}

void aas_h_dash_key_revoke(struct aas_req *r, struct aas_reply *out)
{
	struct aas_viewer v;
	struct aas_form f = { 0 };
	saas_key_list *l = NULL;
	const saas_key *k;
	int rc;

	if (!aas_viewer_get(r, out, &v, true))
		return;
	if (!aas_dash_form_ok(r, out, &v, &f))
		goto out;
	if ((rc = key_of_account(&l, &k, &v, r->route_id)) == SAAS_ENOTFOUND) {
		aas_reply_page_error(r, out, 404, "No such key", "This account has no key with that id.");
		goto out;
	}
	if (rc < 0) {
		aas_reply_page_saas(r, out, rc, "Cannot revoke the key");
		goto out;
	}
	if ((rc = saas_key_revoke(aas_people_engine(), k->id)) < 0) {
		aas_reply_page_saas(r, out, rc, "Cannot revoke the key");
		goto out;
	}
	/* Refused from its next request on, not after this server's key cache has run out. */
	aas_auth_forget(k->account_id, k->prefix);
	aas_reply_redirect(out, "/dashboard/keys");
out:
	saas_key_list_free(l);
	aas_form_free(&f);
	aas_viewer_free(&v);
}
