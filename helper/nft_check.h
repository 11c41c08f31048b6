/*
 * aas-nft's one decision: is a piece of nftables input confined to the
 * engine's own tables? Pure (no I/O), so the unit tests hold it to its word.
 */
#ifndef AAS_NFT_CHECK_H
#define AAS_NFT_CHECK_H

#include <stdbool.h>
#include <stddef.h>

/* The most input the helper takes: the engine's largest text (a guard or egress table) is a few KiB. */
#define AAS_NFT_INPUT_MAX (1024 * 1024)

/* Is `name` one of the engine's tables: "aas_guard", or "aas_egress_" and 1 to 32 of [a-z0-9_]? */
bool aas_nft_table_ok(const char *name, size_t len);

/*
 * Does `text` (NUL-terminated, at most AAS_NFT_INPUT_MAX bytes) only add to,
 * flush, delete or list objects of the engine's tables in family inet? Each
 * command, at the top level, must be `table inet T [{ ... }]` or
 * `add|delete|flush|list table|chain|rule|set|map|element|counter inet T ...`
 * with T an engine table; nothing may include a file or define a variable,
 * anywhere. Returns true, or false with why (a message naming the command).
 */
bool aas_nft_check(const char *text, char *why, size_t why_len);

#endif
