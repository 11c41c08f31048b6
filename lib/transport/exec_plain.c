/*
 * Commands the guest can run with no shell (the control port's "run",
 * control_proto.h). Under TCG a bash start costs the `default` image
 * 30-170 ms a command (bench/RESULTS.md, issue #36), most of a pooled
 * sandbox's `true`. A command qualifies only when a shell could do nothing
 * to it but split it at blanks and run it: every word made of characters
 * no shell treats specially, its first word no builtin, keyword or
 * assignment, its environment no variable the shell gives a meaning of its
 * own. The guest's helper then checks what only the guest can know (the
 * user's shell is bash, ~/.bashrc would change nothing but what it knows),
 * and falls back to the shell itself for anything the shell would say
 * something of (a missing command, a directory it cannot enter): what the
 * user sees is bash's, by construction.
 */
#include <stdbool.h>
#include <string.h>

#include "transport/ssh.h"
#include "util/util.h"

/*
 * The characters a word may hold: none a shell expands, quotes, splits at or
 * redirects with (no $ ` ' " \ * ? [ ] ~ { } ( ) < > | & ; # ! ^ and no
 * blank but the separators), ASCII only (bash's multibyte handling depends
 * on the locale).
 */
static bool word_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-_./,:+@%=", c);
}

/* bash 5.2's builtins and reserved words (`help`, `compgen -b -k`): run by the shell, never without it. */
static const char *const shell_words[] = {
	".", ":", "[", "[[", "]]", "!", "{", "}", "alias", "bg", "bind", "break", "builtin", "caller", "case", "cd",
	"command", "compgen", "complete", "compopt", "continue", "coproc", "declare", "dirs", "disown", "do", "done",
	"echo", "elif", "else", "enable", "esac", "eval", "exec", "exit", "export", "false", "fc", "fg", "fi", "for",
	"function", "getopts", "hash", "help", "history", "if", "in", "jobs", "kill", "let", "local", "logout",
	"mapfile", "popd", "printf", "pushd", "pwd", "read", "readarray", "readonly", "return", "select", "set",
	"shift", "shopt", "source", "suspend", "test", "then", "time", "times", "trap", "true", "type", "typeset",
	"ulimit", "umask", "unalias", "unset", "until", "wait", "while",
};

/*
 * Variables the shell itself gives a meaning (or a value, or a warning when
 * set): exported by the script, they are the shell's business.
 */
static const char *const shell_vars[] = {
	"_", "CDPATH", "COMP_WORDBREAKS", "DIRSTACK", "ENV", "EPOCHREALTIME", "EPOCHSECONDS", "EUID", "FUNCNAME",
	"GLOBIGNORE", "GROUPS", "HISTCMD", "HISTFILE", "HISTFILESIZE", "HISTSIZE", "HOSTNAME", "HOSTTYPE", "IFS",
	"LANG", "LANGUAGE", "LINENO", "MACHTYPE", "MAILCHECK", "MAILPATH", "OPTERR", "OPTIND", "OSTYPE",
	"POSIXLY_CORRECT", "PPID", "PROMPT_COMMAND", "PS1", "PS2", "PS3", "PS4", "RANDOM", "SECONDS", "SHELLOPTS",
	"SRANDOM", "TERM", "TEXTDOMAIN", "TEXTDOMAINDIR", "TMOUT", "UID",
};

static bool listed(const char *s, size_t n, const char *const *list, size_t count)
{
	for (size_t i = 0; i < count; i++)
		if (strlen(list[i]) == n && memcmp(list[i], s, n) == 0)
			return true;
	return false;
}

/* NAME=VALUE whose NAME is an identifier the shell leaves alone. */
static bool env_plain(const char *e)
{
	const char *eq = strchr(e, '=');
	size_t n = eq ? (size_t)(eq - e) : 0;

	if (n == 0 || (e[0] >= '0' && e[0] <= '9'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((e[i] >= 'a' && e[i] <= 'z') || (e[i] >= 'A' && e[i] <= 'Z') || (e[i] >= '0' && e[i] <= '9') || e[i] == '_'))
			return false;
	/* BASH_FUNC_NAME%% is an exported function, BASH* the shell's own; LC_* warn when the locale is unknown. */
	return strncmp(e, "BASH", 4) != 0 && strncmp(e, "LC_", 3) != 0 &&
	       !listed(e, n, shell_vars, SAAS_ARRAY_SIZE(shell_vars));
}

/* An absolute directory the shell's `cd` would name as given: no . or .. part, no // and no trailing /. */
static bool cwd_plain(const char *cwd)
{
	if (cwd[0] != '/')
		return false;
	if (strcmp(cwd, "/") == 0)
		return true;
	for (const char *p = cwd; *p; p++) {
		if (*p != '/')
			continue;
		if (p[1] == '/' || p[1] == '\0' || (p[1] == '.' && (p[2] == '/' || p[2] == '\0')) ||
		    (p[1] == '.' && p[2] == '.' && (p[3] == '/' || p[3] == '\0')))
			return false;
	}
	return true;
}

int saas__exec_plain(saas__buf *words, const saas_driver_exec *req)
{
	const char *s = req->command;
	size_t n = s ? strlen(s) : 0, nenv = 0, had = words->len;
	int argc = 0, rc;

	if (n == 0 || n > SAAS_EXEC_PLAIN_MAX || (req->cwd && !cwd_plain(req->cwd)))
		return 0;
	for (const char *const *e = req->env; e && *e; e++, nenv++)
		if (nenv == SAAS_EXEC_PLAIN_ENV_MAX || !env_plain(*e))
			return 0;
	for (size_t i = 0; i < n;) {
		size_t start, len;
		if (s[i] == ' ' || s[i] == '\t') {
			i++;
			continue;
		}
		for (start = i; i < n && s[i] != ' ' && s[i] != '\t'; i++)
			if (!word_char((unsigned char)s[i]))
				goto refuse;
		len = i - start;
		/* The first word: no assignment, no job (%1), no builtin or keyword but true, false and : alone. */
		if (argc == 0 && (memchr(s + start, '=', len) || s[start] == '%' ||
		                  (!memchr(s + start, '/', len) &&
		                   listed(s + start, len, shell_words, SAAS_ARRAY_SIZE(shell_words)) &&
		                   !((len == 4 && memcmp(s + start, "true", 4) == 0) ||
		                     (len == 5 && memcmp(s + start, "false", 5) == 0) || (len == 1 && s[start] == ':')))))
			goto refuse;
		if (argc == SAAS_EXEC_PLAIN_ARGS_MAX)
			goto refuse;
		if ((rc = saas__buf_put(words, s + start, len)) < 0 || (rc = saas__buf_put(words, "", 1)) < 0) {
			words->len = had;
			return rc;
		}
		argc++;
	}
	/* true, false and : answer at once only alone: with arguments, the shell's (they ignore them; it is rare). */
	if (argc == 0 || (argc > 1 && !strchr(words->data + had, '/') &&
	                  listed(words->data + had, strlen(words->data + had), shell_words, SAAS_ARRAY_SIZE(shell_words))))
		goto refuse;
	return argc;
refuse:
	words->len = had;
	return 0;
}

bool saas__exec_port_first(const saas_driver_exec *req, int execs, bool session_up)
{
	saas__buf words = SAAS__BUF_INIT;
	bool plain;

	if (!session_up)
		return true;
	if (execs < 0 || execs > 2)
		return false;
	plain = saas__exec_plain(&words, req) > 0;
	saas__buf_free(&words);
	return plain;
}
