/*
 * Administrative calls on the engine: accounts, credit, API keys.
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

#define NAME_MAX_BYTES 200
#define KEY_PREFIX "aas_sk_"
#define KEY_RANDOM_CHARS 43 /* base62-ish over 256 random bits: ~256 bits of entropy */
_Static_assert(sizeof(KEY_PREFIX) - 1 + KEY_RANDOM_CHARS == SAAS_KEY_LEN, "SAAS_KEY_LEN is a key's length");
_Static_assert(sizeof("e2b_") - 1 + 2 * KEY_RANDOM_CHARS == SAAS_KEY_E2B_LEN, "SAAS_KEY_E2B_LEN is its E2B spelling's");

static bool valid_id(const char *id)
{
	return saas__valid_text(id, SAAS_ID_MAX);
}

static int fill_account(saas_engine *e, const saas_store_account *row, saas_account **out)
{
	saas_account *a;
	int64_t balance, spent, credit;
	unsigned int live;
	int rc;

	rc = saas__account_live_balance(e, row->id, saas__engine_now(e), &balance, &spent, &credit, &live);
	if (rc < 0)
		return rc;
	if (!(a = calloc(1, sizeof(*a))))
		return saas__oom();
	if (!(a->id = saas__strdup(row->id)) || !(a->name = saas__strdup(row->name))) {
		saas_account_free(a);
		return SAAS_ENOMEM;
	}
	a->created_at_ms = row->created_at_ms;
	a->credit_usd_micro = credit;
	a->spent_usd_micro = spent;
	a->balance_usd_micro = balance;
	a->disabled_at_ms = row->disabled_at_ms;
	*out = a;
	return SAAS_OK;
}

SAAS_EXTERN(int) saas_account_create(saas_account **out, saas_engine *e, const char *name, int64_t credit,
                                     unsigned int flags)
{
	saas_store_account row;
	int rc;

	saas__error_clear();
	if (out)
		*out = NULL;
	if (!e)
		return saas__inval("engine is NULL");
	if (!saas__valid_text(name, NAME_MAX_BYTES))
		return saas__inval("account name must be 1 to %d bytes with no control characters", NAME_MAX_BYTES);
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	if (credit == SAAS_CREDIT_DEFAULT)
		credit = e->new_account_credit;
	if (credit < 0 || credit > SAAS_USD(1000000))
		return saas__inval("initial credit must be between 0 and 1000000 USD");

	memset(&row, 0, sizeof(row));
	if ((rc = saas__id_new(row.id, "acc-", 20)) < 0)
		return rc;
	saas__strlcpy(row.name, name, sizeof(row.name));
	row.created_at_ms = saas__engine_now(e);
	if ((rc = e->store->account_insert(e->store_ctx, &row, credit)) < 0)
		return rc;
	saas__log(e, SAAS_LOG_INFO, "account %s created with %lld micro-USD", row.id, (long long)credit);
	if (!out)
		return SAAS_OK;
	if ((rc = e->store->account_get(e->store_ctx, row.id, &row)) < 0)
		return rc;
	return fill_account(e, &row, out);
}

SAAS_EXTERN(int) saas_account_get(saas_account **out, saas_engine *e, const char *account_id)
{
	saas_store_account row;
	int rc;

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	if (!e)
		return saas__inval("engine is NULL");
	if (!valid_id(account_id))
		return saas__inval("account id is empty, too long or not printable");
	if ((rc = e->store->account_get(e->store_ctx, account_id, &row)) < 0)
		return rc;
	return fill_account(e, &row, out);
}

SAAS_EXTERN(int) saas_account_list_get(saas_account_list **out, saas_engine *e)
{
	saas_account_list *list = NULL;
	saas_store_account *rows = NULL;
	size_t n = 0;
	int rc;

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	if (!e)
		return saas__inval("engine is NULL");
	if ((rc = saas__store_accounts(e->store, e->store_ctx, &rows, &n)) < 0)
		return rc;
	if (!(list = calloc(1, sizeof(*list))) || (n && !(list->items = calloc(n, sizeof(*list->items))))) {
		rc = saas__oom();
		goto out;
	}
	for (; list->count < n; list->count++)
		if ((rc = fill_account(e, &rows[list->count], &list->items[list->count])) < 0)
			goto out;
	*out = list;
	list = NULL;
out:
	saas_account_list_free(list);
	free(rows);
	return rc;
}

SAAS_EXTERN(int) saas_account_add_credit(saas_engine *e, const char *account_id, int64_t amount, const char *note,
                                         unsigned int flags)
{
	int rc;

	saas__error_clear();
	if (!e)
		return saas__inval("engine is NULL");
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	if (!valid_id(account_id))
		return saas__inval("account id is empty, too long or not printable");
	if (amount <= 0 || amount > SAAS_USD(1000000))
		return saas__inval("credit must be more than 0 and at most 1000000 USD");
	if (note && *note && !saas__valid_text(note, NAME_MAX_BYTES))
		return saas__inval("note must be at most %d bytes with no control characters", NAME_MAX_BYTES);
	rc = e->store->credit_add(e->store_ctx, account_id, amount, note && *note ? note : NULL,
	                          saas__engine_now(e));
	if (rc == SAAS_OK)
		saas__log(e, SAAS_LOG_INFO, "account %s credited %lld micro-USD", account_id, (long long)amount);
	return rc;
}

static int key_public(const saas_store_key *row, saas_key **out)
{
	saas_key *k = calloc(1, sizeof(*k));

	if (!k)
		return saas__oom();
	k->created_at_ms = row->created_at_ms;
	k->revoked_at_ms = row->revoked_at_ms;
	k->last_used_at_ms = row->last_used_at_ms;
	if (!(k->id = saas__strdup(row->id)) || !(k->account_id = saas__strdup(row->account_id)) ||
	    !(k->prefix = saas__strdup(row->prefix)) || !(k->name = saas__strdup(row->name))) {
		saas_key_free(k);
		return SAAS_ENOMEM;
	}
	*out = k;
	return SAAS_OK;
}

/* A key: "aas_sk_" and 43 characters from [A-Za-z0-9], each from one random byte (rejection sampled). */
static int new_key_text(char *key, size_t size)
{
	static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	size_t n = strlen(KEY_PREFIX), filled = 0;
	unsigned char rnd[64];
	int rc;

	if (size < n + KEY_RANDOM_CHARS + 1)
		return saas__inval("key buffer too small");
	memcpy(key, KEY_PREFIX, n);
	while (filled < KEY_RANDOM_CHARS) {
		if ((rc = saas__random(rnd, sizeof(rnd))) < 0)
			return rc;
		for (size_t i = 0; i < sizeof(rnd) && filled < KEY_RANDOM_CHARS; i++) {
			if (rnd[i] >= 248) /* 248 = 4 * 62: keep the draw uniform */
				continue;
			key[n + filled++] = alphabet[rnd[i] % 62];
		}
	}
	key[n + filled] = '\0';
	return SAAS_OK;
}

SAAS_EXTERN(int) saas_key_create(char **key_out, saas_key **info, saas_engine *e, const char *account_id,
                                 const char *name, unsigned int flags)
{
	char key[128];
	saas_store_key row;
	saas_store_account acc;
	int rc;

	saas__error_clear();
	if (info)
		*info = NULL;
	if (!key_out)
		return saas__inval("key_out is NULL");
	*key_out = NULL;
	if (!e)
		return saas__inval("engine is NULL");
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	if (!valid_id(account_id))
		return saas__inval("account id is empty, too long or not printable");
	if (name && *name && !saas__valid_text(name, NAME_MAX_BYTES))
		return saas__inval("key name must be at most %d bytes with no control characters", NAME_MAX_BYTES);
	if ((rc = e->store->account_get(e->store_ctx, account_id, &acc)) < 0)
		return rc;

	memset(&row, 0, sizeof(row));
	if ((rc = saas__id_new(row.id, "key-", 20)) < 0 || (rc = new_key_text(key, sizeof(key))) < 0)
		goto out;
	saas__strlcpy(row.account_id, account_id, sizeof(row.account_id));
	saas__strlcpy(row.name, name ? name : "", sizeof(row.name));
	saas__strlcpy(row.prefix, key, strlen(KEY_PREFIX) + 5);
	saas_key_fingerprint(row.hash, key);
	row.created_at_ms = saas__engine_now(e);
	if ((rc = e->store->key_insert(e->store_ctx, &row)) < 0)
		goto out;
	if (info && (rc = key_public(&row, info)) < 0)
		goto out;
	if (!(*key_out = saas__strdup(key))) {
		rc = SAAS_ENOMEM;
		if (info) {
			saas_key_free(*info);
			*info = NULL;
		}
		goto out;
	}
	saas__log(e, SAAS_LOG_INFO, "key %s (%s...) issued for account %s", row.id, row.prefix, account_id);
out:
	memset(key, 0, sizeof(key));
	return rc;
}

SAAS_EXTERN(int) saas_key_revoke(saas_engine *e, const char *key_id)
{
	int rc;

	saas__error_clear();
	if (!e)
		return saas__inval("engine is NULL");
	if (!valid_id(key_id))
		return saas__inval("key id is empty, too long or not printable");
	rc = e->store->key_revoke(e->store_ctx, key_id, saas__engine_now(e));
	if (rc == SAAS_OK)
		saas__log(e, SAAS_LOG_INFO, "key %s revoked", key_id);
	return rc;
}

SAAS_EXTERN(int) saas_key_list_get(saas_key_list **out, saas_engine *e, const char *account_id)
{
	saas_key_list *list = NULL;
	saas_store_key *rows = NULL;
	saas_store_account acc;
	size_t n = 0;
	int rc;

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	if (!e)
		return saas__inval("engine is NULL");
	if (!valid_id(account_id))
		return saas__inval("account id is empty, too long or not printable");
	if ((rc = e->store->account_get(e->store_ctx, account_id, &acc)) < 0 ||
	    (rc = saas__store_keys(e->store, e->store_ctx, account_id, &rows, &n)) < 0)
		return rc;
	if (!(list = calloc(1, sizeof(*list))) || (n && !(list->items = calloc(n, sizeof(*list->items))))) {
		rc = saas__oom();
		goto out;
	}
	for (; list->count < n; list->count++)
		if ((rc = key_public(&rows[list->count], &list->items[list->count])) < 0)
			goto out;
	*out = list;
	list = NULL;
out:
	saas_key_list_free(list);
	free(rows);
	return rc;
}

SAAS_EXTERN(void) saas_key_fingerprint(char out[65], const char *api_key)
{
	if (!out)
		return;
	if (!api_key)
		api_key = "";
	saas__sha256_hex(out, api_key, strlen(api_key));
}

#define E2B_KEY_PREFIX "e2b_"

static bool key_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* A lower-case hex digit's value, or -1: upper case too, so that a key has one E2B spelling. */
static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

SAAS_EXTERN(int) saas_key_to_e2b(char out[SAAS_KEY_E2B_LEN + 1], const char *key)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = strlen(KEY_PREFIX), m = strlen(E2B_KEY_PREFIX);

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	out[0] = '\0';
	if (!key || strncmp(key, KEY_PREFIX, n) != 0 || strlen(key + n) != KEY_RANDOM_CHARS)
		return saas__inval("not an API key: expected \"" KEY_PREFIX "\" and %d letters or digits", KEY_RANDOM_CHARS);
	for (size_t i = 0; i < KEY_RANDOM_CHARS; i++)
		if (!key_char(key[n + i]))
			return saas__inval("not an API key: expected \"" KEY_PREFIX "\" and %d letters or digits",
			                   KEY_RANDOM_CHARS);
	memcpy(out, E2B_KEY_PREFIX, m);
	for (size_t i = 0; i < KEY_RANDOM_CHARS; i++) {
		out[m + 2 * i] = hex[(unsigned char)key[n + i] >> 4];
		out[m + 2 * i + 1] = hex[(unsigned char)key[n + i] & 15];
	}
	out[m + 2 * KEY_RANDOM_CHARS] = '\0';
	return SAAS_OK;
}

SAAS_EXTERN(int) saas_key_from_e2b(char out[SAAS_KEY_LEN + 1], const char *e2b_key)
{
	size_t n = strlen(KEY_PREFIX), m = strlen(E2B_KEY_PREFIX);

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	out[0] = '\0';
	if (!e2b_key || strncmp(e2b_key, E2B_KEY_PREFIX, m) != 0 || strlen(e2b_key + m) != 2 * KEY_RANDOM_CHARS)
		return saas__inval("not an E2B-spelled key: expected \"" E2B_KEY_PREFIX "\" and %d lower-case hex digits",
		                   2 * KEY_RANDOM_CHARS);
	memcpy(out, KEY_PREFIX, n);
	for (size_t i = 0; i < KEY_RANDOM_CHARS; i++) {
		int hi = hex_digit(e2b_key[m + 2 * i]), lo = hex_digit(e2b_key[m + 2 * i + 1]);
		if (hi < 0 || lo < 0 || !key_char((char)(hi << 4 | lo))) {
			out[0] = '\0';
			return saas__inval("not an E2B-spelled key: its digits are not a key's characters");
		}
		out[n + i] = (char)(hi << 4 | lo);
	}
	out[n + KEY_RANDOM_CHARS] = '\0';
	return SAAS_OK;
}
