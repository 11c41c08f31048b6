/*
 * The validator of aas-nft. nftables' grammar scopes everything a command
 * names (chains, sets, maps, counters, jumps, @set references) to the table
 * the command names, and everything in a `table ... { }` block to that
 * table: so checking each top-level command's first words confines the whole
 * input to the tables they name. What the check refuses besides: other
 * families and tables, the ruleset as a whole (`list ruleset`, `flush
 * ruleset`), verbs the engine never uses (insert, replace, create, reset,
 * monitor, import, export), and, at any depth, `include` (reading a file the
 * caller names) and `define`/`redefine`/`undefine`/`$` (variables could hide
 * a name from this check).
 */
#include <stdio.h>
#include <string.h>

#include "nft_check.h"

#define WORDS 4       /* the most a command's check looks at */
#define WORD_MAX 64

struct cmd {
	char word[WORDS][WORD_MAX + 1];
	size_t nwords;
	bool block;       /* a { } block followed the words looked at */
	bool table_block; /* ... and it is a table's: the command ends with it */
	size_t line;
};

static bool in(const char *w, const char *const *set)
{
	for (; *set; set++)
		if (strcmp(w, *set) == 0)
			return true;
	return false;
}

bool aas_nft_table_ok(const char *name, size_t len)
{
	static const char prefix[] = "aas_egress_";
	size_t p = sizeof(prefix) - 1;

	if (len == 9 && memcmp(name, "aas_guard", 9) == 0)
		return true;
	if (len <= p || len > p + 32 || memcmp(name, prefix, p) != 0)
		return false;
	for (size_t i = p; i < len; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') || name[i] == '_'))
			return false;
	return true;
}

static bool fail(char *why, size_t why_len, size_t line, const char *msg, const char *word)
{
	snprintf(why, why_len, "line %zu: %s%s%.64s%s", line, msg, word ? " ('" : "", word ? word : "", word ? "')" : "");
	return false;
}

/* One top-level command, by its first words. */
static bool cmd_ok(const struct cmd *c, char *why, size_t why_len)
{
	static const char *const verbs[] = { "add", "delete", "flush", "list", NULL };
	static const char *const objects[] = { "table", "chain", "rule", "set", "map", "element", "counter", NULL };
	size_t fam;

	if (c->nwords == 0)
		return c->block ? fail(why, why_len, c->line, "a block outside a table", NULL) : true;
	if (strcmp(c->word[0], "table") == 0) {
		fam = 1;
	} else if (in(c->word[0], verbs)) {
		if (c->nwords < 2 || !in(c->word[1], objects))
			return fail(why, why_len, c->line, "not a table's object", c->nwords < 2 ? NULL : c->word[1]);
		fam = 2;
	} else {
		return fail(why, why_len, c->line, "a command aas-nft does not run", c->word[0]);
	}
	if (c->nwords < fam + 2)
		return fail(why, why_len, c->line, "a command without family and table", NULL);
	if (strcmp(c->word[fam], "inet") != 0)
		return fail(why, why_len, c->line, "a family other than inet", c->word[fam]);
	if (!aas_nft_table_ok(c->word[fam + 1], strlen(c->word[fam + 1])))
		return fail(why, why_len, c->line, "a table not the engine's", c->word[fam + 1]);
	return true;
}

static bool word_char(char ch)
{
	return ch && !strchr(" \t\r\n;{}\"#", ch);
}

bool aas_nft_check(const char *text, char *why, size_t why_len)
{
	static const char *const banned[] = { "include", "define", "redefine", "undefine", NULL };
	struct cmd c;
	size_t depth = 0, line = 1;
	const char *p = text;

	if (strlen(text) > AAS_NFT_INPUT_MAX)
		return fail(why, why_len, 0, "more input than aas-nft takes", NULL);
	memset(&c, 0, sizeof(c));
	c.line = 1;
	for (;;) {
		char ch = *p;

		if (ch == '\0' || ((ch == '\n' || ch == ';') && depth == 0)) {
			if (!cmd_ok(&c, why, why_len))
				return false;
			if (ch == '\0')
				break;
			if (ch == '\n')
				line++;
			memset(&c, 0, sizeof(c));
			c.line = line;
			p++;
		} else if (ch == '\n') {
			line++;
			p++;
		} else if (ch == '#') {
			p += strcspn(p, "\n");
		} else if (ch == '"') {
			/* A string (a comment's text): no quote, backslash or line end inside. */
			size_t n = strcspn(p + 1, "\"\\\n");
			if (p[1 + n] != '"')
				return fail(why, why_len, line, "an unterminated string or one with a backslash", NULL);
			p += n + 2;
		} else if (ch == '{') {
			if (depth == 0 && !c.block) {
				c.block = true;
				c.table_block = (c.nwords > 0 && strcmp(c.word[0], "table") == 0) ||
				                (c.nwords > 1 && strcmp(c.word[1], "table") == 0);
			}
			depth++;
			p++;
		} else if (ch == '}') {
			if (depth == 0)
				return fail(why, why_len, line, "a } without its {", NULL);
			depth--;
			p++;
		} else if (word_char(ch)) {
			size_t n = 1;
			while (word_char(p[n]))
				n++;
			if (memchr(p, '$', n))
				return fail(why, why_len, line, "a variable", NULL);
			/* nft ends a table's command at its block's end (a rule goes on past an anonymous set). */
			if (depth == 0 && c.table_block)
				return fail(why, why_len, line, "words after a block, with no ; or line end", NULL);
			if (n <= WORD_MAX) {
				char w[WORD_MAX + 1];
				memcpy(w, p, n);
				w[n] = '\0';
				if (in(w, banned))
					return fail(why, why_len, line, "a directive aas-nft does not take", w);
				/* The command's own words come before any block of it. */
				if (depth == 0 && !c.block && c.nwords < WORDS)
					memcpy(c.word[c.nwords++], w, n + 1);
			} else if (depth == 0 && !c.block && c.nwords < WORDS) {
				return fail(why, why_len, line, "a word too long", NULL);
			}
			p += n;
		} else {
			p++; /* white space */
		}
	}
	if (depth != 0)
		return fail(why, why_len, line, "a { without its }", NULL);
	return true;
}
