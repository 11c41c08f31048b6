/*
 * The dashboard's own parsing, through the whole server (aas-server
 * in-process on the fake driver): the Cookie header (libmicrohttpd splits it;
 * the pages read the session and the before-log-in token from it), posted
 * form bodies (aas_form_decode and what each form's handler makes of its
 * fields), the query strings of the usage page and of Destroy's question, and
 * the Files section's upload (multipart/form-data, boundary "XB": the
 * server's multipart reader and what the form makes of its parts: the token
 * before the file, the field names, the bounded fields, the file's name).
 * The input's first byte picks where the rest goes; "@SESSION@", "@CSRF@" and
 * "@SB@" in it become the tenant's operator session, its CSRF token and its
 * sandbox (fuzz.h), so the fuzzer reaches the pages behind the log-in and the
 * forms behind the token.
 *
 * Forms that would end the run's state (log-out, disable, destroy, revoke)
 * are left to fuzz_http, which sends whole requests without a session.
 *
 * Oracle: the sanitizers, and no 500 answer: bad input is the sender's fault.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake/fake_driver.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fuzz_tenant tenant;

/* The before-log-in token the sign-up and log-in posts carry, in their cookie (seeds put it in their csrf field). */
#define FUZZ_FORM_TOKEN "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* Where the input goes: after `head`, as a header's value (0), the body (1) or the query string (2). */
static const struct {
	const char *head;                /* up to the place of the input */
	int in_body;
} targets[] = {
	{ "GET /dashboard HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: ", 0 },
	{ "GET /dashboard/sandboxes/@SB@ HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: ", 0 },
	{ "GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: ", 0 },
	{ "POST /dashboard/sandboxes/@SB@/extend HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: aas_session=@SESSION@\r\n"
	  "Content-Type: application/x-www-form-urlencoded\r\n", 1 },
	{ "POST /dashboard/keys HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: aas_session=@SESSION@\r\n"
	  "Content-Type: application/x-www-form-urlencoded\r\n", 1 },
	{ "POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: aas_form=" FUZZ_FORM_TOKEN "\r\n"
	  "Content-Type: application/x-www-form-urlencoded\r\n", 1 },
	{ "POST /signup HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: aas_form=" FUZZ_FORM_TOKEN "\r\n"
	  "Content-Type: application/x-www-form-urlencoded\r\n", 1 },
	{ "GET /dashboard/usage?", 2 },
	{ "GET /dashboard/sandboxes/@SB@/destroy?", 2 },
	{ "POST /dashboard/sandboxes/@SB@/files/upload HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: aas_session=@SESSION@\r\n"
	  "Content-Type: multipart/form-data; boundary=XB\r\n", 1 },
};

/* The upload, the last target: its files are forgotten after each input (the fake driver keeps at most 256). */
#define TARGET_UPLOAD (sizeof(targets) / sizeof(targets[0]) - 1)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_server_start(fuzz_driver(NULL), &tenant);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char answer[64], *in, *head, *req;
	size_t len, hlen, rlen, got, t;

	if (size == 0)
		return 0;
	t = data[0] % (sizeof(targets) / sizeof(targets[0]));
	len = size - 1;
	in = fuzz_substitute(data + 1, &len, &tenant);
	hlen = strlen(targets[t].head);
	head = fuzz_substitute((const uint8_t *)targets[t].head, &hlen, &tenant);
	if (!(req = malloc(hlen + len + 128)))
		abort();
	if (targets[t].in_body == 1)
		rlen = (size_t)sprintf(req, "%sContent-Length: %zu\r\n\r\n", head, len);
	else
		rlen = (size_t)sprintf(req, "%s", head);
	memcpy(req + rlen, in, len);
	rlen += len;
	if (targets[t].in_body == 0)
		rlen += (size_t)sprintf(req + rlen, "\r\n\r\n");
	else if (targets[t].in_body == 2)
		rlen += (size_t)sprintf(req + rlen, " HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: aas_session=%s\r\n\r\n",
		                        tenant.session);
	got = fuzz_server_exchange(req, rlen, answer, sizeof(answer) - 1);
	answer[got] = '\0';
	if (strncmp(answer, "HTTP/1.", 7) == 0 && strncmp(answer + 8, " 500 ", 5) == 0)
		abort();
	if (t == TARGET_UPLOAD)
		saas_fake_forget_files();
	free(req);
	free(head);
	free(in);
	return 0;
}
