/*
 * Freeing what the library hands out. Every function takes NULL.
 */
#include <stdlib.h>

#include "client/provider.h"

SAAS_EXTERN(void) saas_account_free(saas_account *a)
{
	if (!a)
		return;
	free(a->id);
	free(a->name);
	free(a);
}

SAAS_EXTERN(void) saas_account_list_free(saas_account_list *list)
{
	if (!list)
		return;
	for (size_t i = 0; i < list->count; i++)
		saas_account_free(list->items[i]);
	free(list->items);
	free(list);
}

SAAS_EXTERN(void) saas_key_free(saas_key *key)
{
	if (!key)
		return;
	free(key->id);
	free(key->account_id);
	free(key->prefix);
	free(key->name);
	free(key);
}

SAAS_EXTERN(void) saas_key_list_free(saas_key_list *list)
{
	if (!list)
		return;
	for (size_t i = 0; i < list->count; i++)
		saas_key_free(list->items[i]);
	free(list->items);
	free(list);
}

void saas__sizes_public_free(saas_size **sizes, size_t n)
{
	for (size_t i = 0; sizes && i < n; i++) {
		free((char *)sizes[i]->name);
		free(sizes[i]);
	}
	free(sizes);
}

SAAS_EXTERN(void) saas_account_info_free(saas_account_info *info)
{
	if (!info)
		return;
	saas__sizes_public_free(info->sizes, info->nsizes);
	free(info->limits);
	free(info->id);
	free(info->name);
	free(info);
}

SAAS_EXTERN(void) saas_usage_free(saas_usage *usage)
{
	if (!usage)
		return;
	for (size_t i = 0; i < usage->count; i++) {
		free(usage->lines[i]->sandbox_id);
		free(usage->lines[i]->size);
		free(usage->lines[i]);
	}
	free(usage->lines);
	free(usage);
}

SAAS_EXTERN(void) saas_sandbox_free(saas_sandbox *sb)
{
	if (!sb)
		return;
	for (size_t i = 0; i < sb->nports; i++) {
		free(sb->ports[i]->url);
		free(sb->ports[i]);
	}
	free(sb->ports);
	free(sb->id);
	free(sb->size);
	free(sb->image);
	free(sb->parent_id);
	saas__network_info_free(sb->network);
	saas__rules_free(sb->metadata);
	saas__rules_free(sb->envs);
	free(sb);
}

SAAS_EXTERN(void) saas_sandbox_list_free(saas_sandbox_list *list)
{
	if (!list)
		return;
	for (size_t i = 0; i < list->count; i++)
		saas_sandbox_free(list->items[i]);
	free(list->items);
	free(list->next_cursor);
	free(list);
}

SAAS_EXTERN(void) saas_execution_free(saas_execution *x)
{
	if (!x)
		return;
	free(x->id);
	free(x->sandbox_id);
	free(x->stdout_data);
	free(x->stderr_data);
	free(x->error);
	free(x->command);
	free(x);
}

SAAS_EXTERN(void) saas_execution_list_free(saas_execution_list *list)
{
	if (!list)
		return;
	for (size_t i = 0; i < list->count; i++)
		saas_execution_free(list->items[i]);
	free(list->items);
	free(list->next_cursor);
	free(list);
}

SAAS_EXTERN(void) saas_file_list_free(saas_file_list *list)
{
	if (!list)
		return;
	for (size_t i = 0; i < list->count; i++) {
		free(list->entries[i]->path);
		free(list->entries[i]);
	}
	free(list->entries);
	free(list->root);
	free(list);
}

SAAS_EXTERN(void) saas_metric_list_free(saas_metric_list *list)
{
	if (!list)
		return;
	for (size_t i = 0; i < list->count; i++)
		free(list->items[i]);
	free(list->items);
	free(list);
}
