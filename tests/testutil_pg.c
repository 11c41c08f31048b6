/*
 * Test helper: a new, empty database on the throwaway PostgreSQL server that
 * tests/pg-server started. Each test gets its own database, so tests never see
 * each other's rows and nothing needs cleaning: the whole cluster is removed
 * when the suite ends.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* asprintf, getline; the build usually defines it */
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#ifdef SAAS_WITH_POSTGRES

#include <fcntl.h>
#include <unistd.h>

#include <libpq-fe.h>

/* The first line of `path`, malloc()ed, or NULL. */
static char *read_line(const char *path)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	if (!f) {
		perror(path);
		return NULL;
	}
	n = getline(&line, &cap, f);
	fclose(f);
	if (n <= 0) {
		fprintf(stderr, "%s: empty\n", path);
		free(line);
		return NULL;
	}
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = '\0';
	return line;
}

/* A database name nobody else will pick: t_ and 16 random hex digits. */
static int random_name(char out[32])
{
	unsigned char bytes[8];
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	size_t i;

	if (fd < 0 || read(fd, bytes, sizeof(bytes)) != (ssize_t)sizeof(bytes)) {
		perror("/dev/urandom");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	strcpy(out, "t_");
	for (i = 0; i < sizeof(bytes); i++)
		sprintf(out + 2 + 2 * i, "%02x", bytes[i]);
	return 0;
}

/*
 * The admin URL with its database replaced by `dbname`:
 * "postgresql://AUTHORITY/DB?PARAMS" -> "postgresql://AUTHORITY/dbname?PARAMS".
 */
static char *replace_dbname(const char *url, const char *dbname)
{
	const char *rest = strstr(url, "://");
	const char *slash, *end;
	char *out;

	if (!rest) {
		fprintf(stderr, "pg test URL '%s' is not a postgresql:// URL\n", url);
		return NULL;
	}
	rest += 3;
	end = rest + strcspn(rest, "/?");
	slash = *end == '/' ? end : NULL;
	if (slash)
		end = slash + 1 + strcspn(slash + 1, "?");
	if (asprintf(&out, "%.*s/%s%s", (int)((slash ? slash : end) - url), url, dbname, end) < 0)
		return NULL;
	return out;
}

char *saas_test_pg_fresh_url(const char *pgdir)
{
	char *path = NULL, *admin = NULL, *url = NULL;
	PGconn *conn = NULL;
	PGresult *res = NULL;
	char name[32], sql[64];

	if (asprintf(&path, "%s/url", pgdir) < 0) {
		path = NULL;
		goto out;
	}
	admin = read_line(path);
	if (!admin) {
		fprintf(stderr, "no test PostgreSQL server in %s (run tests/pg-server start %s)\n", pgdir, pgdir);
		goto out;
	}
	conn = PQconnectdb(admin);
	if (PQstatus(conn) != CONNECTION_OK) {
		fprintf(stderr, "connecting to %s: %s", admin, PQerrorMessage(conn));
		goto out;
	}
	if (random_name(name) < 0)
		goto out;
	/* The name is ours (t_ and hex digits), so formatting it in is safe;
	 * CREATE DATABASE takes no parameters. */
	snprintf(sql, sizeof(sql), "CREATE DATABASE %s", name);
	res = PQexec(conn, sql);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		fprintf(stderr, "%s: %s", sql, PQerrorMessage(conn));
		goto out;
	}
	url = replace_dbname(admin, name);

out:
	PQclear(res);
	PQfinish(conn);
	free(admin);
	free(path);
	return url;
}

#else

char *saas_test_pg_fresh_url(const char *pgdir)
{
	(void)pgdir;
	fprintf(stderr, "this libsaas was built without PostgreSQL support (SAAS_WITH_POSTGRES)\n");
	return NULL;
}

#endif
