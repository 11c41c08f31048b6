/*
 * The operator's pages of the dashboard (/dashboard/operator): the host's
 * load, the VM hosts (each with its load, pooled VMs and templates, and a
 * page of its sandboxes) and templates, and every account with forms to add
 * credit and to disable it. Operators only: anyone else gets 403. The page
 * shell and forms are the dashboard's (dashboard.c, through internal.h).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdio.h>
#include <string.h>

#include "web/html.h"
#include "web/internal.h"

/* The viewer of an operator page; false after a redirect to /login or a 403. */
static bool operator_get(struct aas_req *r, struct aas_reply *out, struct aas_viewer *v)
{
	if (!aas_viewer_get(r, out, v, true))
		return false;
	if (v->user->is_operator)
		return true;
	aas_viewer_free(v);
	aas_reply_page_error(r, out, 403, "Operators only", "This page is for the server's operators.");
	return false;
}

/* A host's templates in a cell: each "image (size): state", or "none" (none reached, or none made yet). */
static void host_templates(struct aas_html *h, const saas_host *x)
{
	if (!x->ntemplates) {
		aas_html_raw(h, "none");
		return;
	}
	aas_html_raw(h, "<ul class=\"host-templates\">");
	for (size_t i = 0; i < x->ntemplates; i++) {
		const saas_engine_template *t = x->templates[i];

		aas_html_printf(h, "<li data-state=\"%s\">%s%s%s%s: %s</li>", saas_template_state_name(t->state), t->image,
		                *t->size ? " (" : "", t->size, *t->size ? ")" : "", saas_template_state_name(t->state));
	}
	aas_html_raw(h, "</ul>");
}

/*
 * The VM hosts, when sandboxes run on several (none on a single machine):
 * what an operator reads before adding, draining or removing one. Each
 * host's name leads to its sandboxes (aas_h_dash_op_host).
 */
static int vm_hosts(struct aas_html *h)
{
	saas_host_list *l = NULL;
	char when[40];
	int rc;

	if ((rc = saas_host_list_get(&l, aas_people_engine())) < 0)
		return rc;
	if (l->count) {
		aas_html_raw(h, "<h3>VM hosts</h3><table id=\"vm-hosts\"><thead><tr><th scope=\"col\">Host</th>"
		                "<th scope=\"col\">State</th><th scope=\"col\">Sandboxes</th><th scope=\"col\">vCPUs</th>"
		                "<th scope=\"col\">Memory (MiB)</th><th scope=\"col\">Pooled VMs</th>"
		                "<th scope=\"col\">Templates</th><th scope=\"col\">Last seen</th></tr></thead><tbody>");
		for (size_t i = 0; i < l->count; i++) {
			const saas_host *x = l->items[i];

			aas_html_printf(h, "<tr id=\"host-%s\" data-state=\"%s\"><td><a href=\"/dashboard/operator/hosts/%s\" "
			                   "aria-label=\"Sandboxes on %s\">%s</a></td><td class=\"status\">%s</td><td>%u</td>"
			                   "<td>%u of %u</td><td>%llu of %llu</td><td>%u</td><td>",
			                x->name, saas_host_state_name(x->state), x->name, x->name, x->name,
			                saas_host_state_name(x->state), x->sandboxes, x->vcpus_used, x->vcpus_capacity,
			                (unsigned long long)x->memory_mb_used, (unsigned long long)x->memory_mb_capacity,
			                x->pool_vms);
			host_templates(h, x);
			aas_html_printf(h, "</td><td>%s</td></tr>",
			                x->last_seen_ms ? saas_time_format(when, sizeof(when), x->last_seen_ms) : "never");
		}
		aas_html_raw(h, "</tbody></table>");
	}
	saas_host_list_free(l);
	return SAAS_OK;
}

static int host_load(struct aas_html *h)
{
	saas_engine_stats *st = NULL;
	int rc;

	if ((rc = saas_engine_stats_get(&st, aas_people_engine())) < 0)
		return rc;
	aas_html_printf(h, "<h2>Host load</h2><dl id=\"host-load\"><dt>Sandboxes running</dt><dd>%u</dd>"
	                   "<dt>Sandboxes being made</dt><dd>%u</dd><dt>Accounts with sandboxes</dt><dd>%u</dd>"
	                   "<dt>Pooled VMs ready</dt><dd>%u of %u</dd></dl>",
	                st->ready, st->creating, st->accounts_with_sandboxes, st->pool_ready, st->pool_target);
	if (st->npools) {
		aas_html_raw(h, "<table id=\"pools\"><thead><tr><th scope=\"col\">Size</th><th scope=\"col\">Image</th>"
		                "<th scope=\"col\">Ready</th><th scope=\"col\">Target</th><th scope=\"col\">Claims</th>"
		                "<th scope=\"col\">Failures</th></tr></thead><tbody>");
		for (size_t i = 0; i < st->npools; i++) {
			const saas_engine_pool *p = st->pools[i];

			aas_html_printf(h, "<tr><td>%s</td><td>%s</td><td>%u</td><td>%u</td><td>%llu</td><td>%llu</td></tr>",
			                p->size, p->image, p->ready, p->target, (unsigned long long)p->claims,
			                (unsigned long long)p->failures);
		}
		aas_html_raw(h, "</tbody></table>");
	}
	if ((rc = vm_hosts(h)) < 0) {
		saas_engine_stats_free(st);
		return rc;
	}
	aas_html_raw(h, "<h3>Templates</h3>");
	if (!st->ntemplates) {
		aas_html_raw(h, "<p id=\"no-templates\">None: sandboxes boot cold (the driver makes no templates, or none "
		                "was asked for yet).</p>");
	} else {
		aas_html_raw(h, "<table id=\"templates\"><caption>The VMs sandboxes are cloned from, by image and size"
		                "</caption><thead><tr><th scope=\"col\">Image</th><th scope=\"col\">Size</th>"
		                "<th scope=\"col\">State</th><th scope=\"col\">Saved state</th></tr></thead><tbody>");
		for (size_t i = 0; i < st->ntemplates; i++) {
			const saas_engine_template *t = st->templates[i];

			aas_html_printf(h, "<tr data-state=\"%s\"><td>%s</td><td>%s%s(%u vCPU, %u MiB, %u GiB)</td>"
			                   "<td class=\"status\">%s</td><td>",
			                saas_template_state_name(t->state), t->image, t->size, *t->size ? " " : "", t->vcpus,
			                t->memory_mb, t->disk_gb, saas_template_state_name(t->state));
			if (t->state == SAAS_TEMPLATE_READY)
				aas_html_printf(h, "%lld MiB", (long long)((t->state_bytes + (1 << 20) - 1) >> 20));
			else
				aas_html_raw(h, "-");
			aas_html_raw(h, "</td></tr>");
		}
		aas_html_raw(h, "</tbody></table>");
	}
	saas_engine_stats_free(st);
	return SAAS_OK;
}

void aas_h_dash_operator(struct aas_req *r, struct aas_reply *out)
{
	struct aas_html h = { 0 };
	struct aas_viewer v;
	saas_account_list *l = NULL;
	char b1[40], action[128];
	int rc;

	if (!operator_get(r, out, &v))
		return;
	aas_dash_begin(&h, &v, "Operator", "operator");
	if ((rc = host_load(&h)) < 0 || (rc = saas_account_list_get(&l, aas_people_engine())) < 0)
		goto out;
	aas_html_raw(&h, "<h2>Accounts</h2><table id=\"accounts\"><thead><tr><th scope=\"col\">Account</th>"
	                 "<th scope=\"col\">Name</th><th scope=\"col\">Balance</th><th scope=\"col\">State</th>"
	                 "<th scope=\"col\">Add credit</th><th scope=\"col\">Disable</th></tr></thead><tbody>");
	for (size_t i = 0; i < l->count; i++) {
		const saas_account *a = l->items[i];

		aas_html_printf(&h, "<tr id=\"account-%s\"><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>", a->id, a->id,
		                a->name, aas_dash_usd(b1, a->balance_usd_micro), a->disabled_at_ms ? "disabled" : "active");
		snprintf(action, sizeof(action), "/dashboard/operator/accounts/%s/credit", a->id);
		aas_dash_form(&h, &v, "credit", action);
		aas_html_printf(&h, "<label>USD <input name=\"usd\" inputmode=\"decimal\" required size=\"6\"></label> "
		                    "<button type=\"submit\" aria-label=\"Add credit to %s\">Add</button></form></td><td>",
		                a->id);
		snprintf(action, sizeof(action), "/dashboard/operator/accounts/%s/disable", a->id);
		aas_dash_form(&h, &v, "disable", action);
		aas_html_printf(&h, "<input type=\"hidden\" name=\"disabled\" value=\"%d\"><button type=\"submit\">%s</button>"
		                    "</form></td></tr>",
		                a->disabled_at_ms ? 0 : 1, a->disabled_at_ms ? "Enable" : "Disable");
	}
	aas_html_raw(&h, "</tbody></table>");
out:
	aas_dash_end(r, out, &h, rc, 200);
	saas_account_list_free(l);
	aas_viewer_free(&v);
}

void aas_h_dash_op_credit(struct aas_req *r, struct aas_reply *out)
{
	struct aas_viewer v;
	struct aas_form f = { 0 };
	const char *amount;
	char note[SAAS_EMAIL_MAX + 32];
	int64_t micro;
	int rc;

	if (!operator_get(r, out, &v))
		return;
	if (!aas_dash_form_ok(r, out, &v, &f))
		goto out;
	amount = aas_form_get(&f, "usd");
	if (!amount || aas_parse_usd(&micro, amount) < 0 || micro <= 0) {
		aas_reply_page_error(r, out, 400, "Cannot add credit", "Give a positive amount in dollars, like 20 or 0.5.");
		goto out;
	}
	snprintf(note, sizeof(note), "by %s", v.user->email);
	if ((rc = saas_account_add_credit(aas_people_engine(), r->route_id, micro, note, 0)) < 0) {
		aas_reply_page_saas(r, out, rc, "Cannot add credit");
		goto out;
	}
	aas_reply_redirect(out, "/dashboard/operator");
out:
	aas_form_free(&f);
	aas_viewer_free(&v);
}

void aas_h_dash_op_disable(struct aas_req *r, struct aas_reply *out)
{
	struct aas_viewer v;
	struct aas_form f = { 0 };
	const char *d;
	int rc;

	if (!operator_get(r, out, &v))
		return;
	if (!aas_dash_form_ok(r, out, &v, &f))
		goto out;
	d = aas_form_get(&f, "disabled");
	if (!d || (strcmp(d, "0") != 0 && strcmp(d, "1") != 0)) {
		aas_reply_page_error(r, out, 400, "Bad form", "disabled must be 0 or 1.");
		goto out;
	}
	if ((rc = saas_account_disable(aas_people_engine(), r->route_id, d[0] == '1')) < 0) {
		aas_reply_page_saas(r, out, rc, "Cannot change the account");
		goto out;
	}
	/* A disabled account's keys are refused from their next request on, here (keys.c's revoke does the same). */
	if (d[0] == '1')
		aas_auth_forget(r->route_id, NULL);
	aas_reply_redirect(out, "/dashboard/operator");
out:
	aas_form_free(&f);
	aas_viewer_free(&v);
}

/* Sandboxes on one host's page: at most this many, the newest; the page says how to see the rest. */
#define HOST_SANDBOXES_MAX 200

/*
 * GET /dashboard/operator/hosts/{id}: one VM host (by name or id) and the
 * sandboxes not destroyed on it, every account's, newest first: who would
 * be hit by draining or losing it. Each row names the sandbox's account;
 * the sandbox pages themselves are its owner's.
 */
void aas_h_dash_op_host(struct aas_req *r, struct aas_reply *out)
{
	struct aas_html h = { 0 };
	struct aas_viewer v;
	saas_host *x = NULL;
	saas_sandbox_list *l = NULL;
	char when[40], expires[40], owner[SAAS_ID_MAX + 1], title[SAAS_ID_MAX + 32];
	int rc;

	if (!operator_get(r, out, &v))
		return;
	if ((rc = saas_host_get(&x, aas_people_engine(), r->route_id)) < 0 ||
	    (rc = saas_host_sandbox_list_get(&l, aas_people_engine(), x->id, NULL, HOST_SANDBOXES_MAX, 0)) < 0) {
		if (rc == SAAS_ENOTFOUND || rc == SAAS_EINVAL)
			aas_reply_page_error(r, out, 404, "No such VM host", "No VM host has this name; the operator page "
			                     "lists them.");
		else
			aas_reply_page_saas(r, out, rc, "Cannot show the VM host");
		goto out;
	}
	snprintf(title, sizeof(title), "VM host %s", x->name);
	aas_dash_begin(&h, &v, title, "operator");
	aas_html_printf(&h, "<p><a href=\"/dashboard/operator\">All hosts</a></p><h2>VM host %s</h2>"
	                    "<dl id=\"host\"><dt>State</dt><dd class=\"status\">%s</dd><dt>Address</dt><dd>%s</dd>"
	                    "<dt>Sandboxes</dt><dd>%u</dd><dt>vCPUs</dt><dd>%u of %u</dd><dt>Memory (MiB)</dt>"
	                    "<dd>%llu of %llu</dd><dt>Pooled VMs</dt><dd>%u</dd><dt>Templates</dt><dd>",
	                x->name, saas_host_state_name(x->state), x->address, x->sandboxes, x->vcpus_used,
	                x->vcpus_capacity, (unsigned long long)x->memory_mb_used,
	                (unsigned long long)x->memory_mb_capacity, x->pool_vms);
	host_templates(&h, x);
	aas_html_printf(&h, "</dd><dt>Last seen</dt><dd>%s</dd></dl>",
	                x->last_seen_ms ? saas_time_format(when, sizeof(when), x->last_seen_ms) : "never");
	aas_html_raw(&h, "<h3>Its sandboxes</h3>");
	if (!l->count) {
		aas_html_raw(&h, "<p id=\"no-sandboxes\">None: nothing runs on this host.</p>");
		goto done;
	}
	aas_html_raw(&h, "<table id=\"host-sandboxes\"><thead><tr><th scope=\"col\">Sandbox</th>"
	                 "<th scope=\"col\">Account</th><th scope=\"col\">State</th><th scope=\"col\">Size</th>"
	                 "<th scope=\"col\">Image</th><th scope=\"col\">Created</th><th scope=\"col\">Expires</th>"
	                 "</tr></thead><tbody>");
	for (size_t i = 0; i < l->count; i++) {
		const saas_sandbox *sb = l->items[i];

		/* Its owner, looked up by id: a row whose owner cannot be read says so rather than failing the page. */
		if (saas_engine_sandbox_owner(owner, aas_people_engine(), sb->id, 0) < 0)
			snprintf(owner, sizeof(owner), "%s", "?");
		aas_html_printf(&h, "<tr id=\"sandbox-%s\"><td>%s</td><td><a href=\"/dashboard/operator#account-%s\">%s</a>"
		                    "</td><td class=\"status\">%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>",
		                sb->id, sb->id, owner, owner, saas_sandbox_status_name(sb->status), sb->size, sb->image,
		                saas_time_format(when, sizeof(when), sb->created_at_ms),
		                sb->expires_at_ms ? saas_time_format(expires, sizeof(expires), sb->expires_at_ms) : "-");
	}
	aas_html_raw(&h, "</tbody></table>");
	if (l->next_cursor)
		aas_html_printf(&h, "<p id=\"more-sandboxes\">The newest %d are shown; the count above is of them all.</p>",
		                HOST_SANDBOXES_MAX);
done:
	aas_dash_end(r, out, &h, SAAS_OK, 200);
out:
	saas_sandbox_list_free(l);
	saas_host_free(x);
	aas_viewer_free(&v);
}
