#!/bin/bash
# The service's pages over plain HTTP (no browser): each answers HTML with
# the pages' CSP; the docs are the repository's Markdown, without its raw
# HTML; /docs/api without an installed viewer still lists the operations;
# /static/ serves its own files and nothing else, the viewer's directory
# only the viewer's two files. tests/browser checks the pages in Chromium.
#
# usage: test_pages.sh AAS_SERVER
. "$(dirname "$0")/common.sh"
SERVER=$1

mkdir -p "${WORK}/viewer"
echo secret >"${WORK}/viewer/package.json"
# A few limits away from their defaults: /docs/limits shows the configuration the server runs with.
# Sign-up open, as a newcomer's server has it: the pages offer it (closed, they do not: server.dashboard).
start_server "$SERVER" --docs-viewer "${WORK}/viewer" --max-sandboxes 7 --max-transfers 3 \
	--preview-requests-per-second 55 --pty-per-sandbox 2 --signup open

for p in / /docs /docs/rest /docs/mcp /docs/c-api /docs/api /docs/limits /docs/pages /security; do
	req GET "$p"
	expect_status 200 "GET $p"
	check "$p is HTML" grep -qi '^content-type: text/html; charset=utf-8' <<<"$HEADERS"
	check "$p has the pages' CSP" grep -qi "^content-security-policy: default-src 'self'; script-src 'self'" <<<"$HEADERS"
	check "$p uses the style sheet" grep -q 'href="/static/style.css"' <<<"$BODY"
	# Raw HTML of the Markdown (README's badges, comments) never reaches a page; cmark says where it left it out.
	check "$p has no script but the viewer's" test "$(grep -o '<script[^>]*>' <<<"$BODY" | grep -cv 'src="/static/')" = 0
done

req GET /docs/rest
check "a guide is its Markdown, tables included" grep -q '<h2 id="sandboxes">Sandboxes</h2>' <<<"$BODY"
check "a guide's tables are tables, which the keyboard reaches (they may scroll)" grep -q '<table tabindex="0">' <<<"$BODY"
check "links between guides go to their pages" grep -q 'href="/docs/errors"' <<<"$BODY"
check "no link to a Markdown file is left" test "$(grep -c 'href="[^":]*\.md' <<<"$BODY")" = 0
req GET /docs/limits
check "the limits show the sizes" grep -q '<th scope="row">small (default)</th>' <<<"$BODY"
check "the limits show the measured startup times" grep -q 'a cold boot (no template)' <<<"$BODY"
check "... with their date and machine" grep -q 'Measured on 2026-12-03 on a machine with 2 cores' <<<"$BODY"
check "the limits say where the times come from" grep -q 'not on this server' <<<"$BODY"
check "the limits are not the engineering log (bench/RESULTS.md)" test "$(grep -c 'Issue #15\|baseline (same run)' <<<"$BODY")" = 0
check "the limits are the server's options" \
	grep -q '<th scope="row">Sandboxes not yet destroyed</th><td>7</td>' <<<"$BODY"
check "... every one" grep -q '<th scope="row">Uploads and downloads under way at once, per account</th><td>3</td>' <<<"$BODY"
check "... the previews' too" grep -q '<td>55, apart from the API' <<<"$BODY"
check "... and the terminals'" grep -q '<td>2 per sandbox, 16 per account</td>' <<<"$BODY"
check "each limit says what happens past it" \
	grep -q '<code>429 limit_exceeded</code>, <code>"limit": "max_sandboxes"</code>' <<<"$BODY"
check "... a file's" grep -q '<th scope="row">A file moved in or out</th><td>1024 MiB</td><td><code>413 too_large</code>' <<<"$BODY"
req GET /
check "the home page sends people to sign up and to the API keys" \
	grep -q 'href="/signup".*href="/dashboard/keys"' <<<"$BODY"
check "the home page gives the MCP package's npx line for this server" \
	grep -q "npx -y ${BASE}/mcp.tgz" <<<"$BODY"
check "... and E2B's variables, with their guide" \
	grep -q "E2B_API_URL=${BASE}/e2b .*href=\"/docs/e2b#the-environment\"\|href=\"/docs/e2b#the-environment\".*E2B_API_URL=${BASE}/e2b " <<<"$BODY"
req GET / -H 'Host: localhost:1234'
check "the origin is the request's Host, as /mcp.tgz's" grep -q 'npx -y http://localhost:1234/mcp.tgz' <<<"$BODY"
req GET / -H 'Host: a"<b>'
expect_status 200 "a home page for a Host that is no name"
check "... names no such host, but a placeholder" grep -q 'npx -y https://THIS-SERVER/mcp.tgz' <<<"$BODY"

# No viewer installed in its directory: the page says so and lists the operations.
req GET /docs/api
check "without the viewer, /docs/api says so" grep -q 'The interactive viewer is not installed' <<<"$BODY"
check "without the viewer, /docs/api lists the operations" grep -q '<code>POST</code></td><td><code>/v1/sandboxes</code>' <<<"$BODY"
check "without the viewer, no viewer script" test "$(grep -c 'swagger-ui-bundle' <<<"$BODY")" = 0
req GET /static/viewer/swagger-ui-bundle.js
expect_status 404 "a viewer file not installed"
req GET /static/viewer/package.json
expect_status 404 "only the viewer's own files are served from its directory"
check "its content is not" test "$(grep -c secret <<<"$BODY")" = 0

# Installed while the server runs: used at once.
mkdir -p "${WORK}/viewer/node_modules/swagger-ui-dist"
echo 'window.SwaggerUIBundle = function () {};' >"${WORK}/viewer/node_modules/swagger-ui-dist/swagger-ui-bundle.js"
echo '.swagger-ui {}' >"${WORK}/viewer/node_modules/swagger-ui-dist/swagger-ui.css"
req GET /docs/api
check "an installed viewer is used" grep -q 'src="/static/viewer/swagger-ui-bundle.js"' <<<"$BODY"
req GET /static/viewer/swagger-ui-bundle.js
expect_status 200 "the viewer's script"
check "as JavaScript" grep -qi '^content-type: text/javascript' <<<"$HEADERS"
check "as installed" test "$BODY" = 'window.SwaggerUIBundle = function () {};'
req GET /static/viewer/swagger-ui.css
expect_status 200 "the viewer's style"

req GET /static/style.css
expect_status 200 "the style sheet"
check "as CSS" grep -qi '^content-type: text/css' <<<"$HEADERS"
req GET /static/api.js
expect_status 200 "the viewer's start"
for p in /static/nope.css /static/..%2fopenapi.json /static/viewer/..%2f..%2fpackage.json /docs/nope /docs/limits/x; do
	req GET "$p"
	expect_status 404 "GET $p"
done
req GET /docs/nope
check "an unknown doc is a page that lists the guides" grep -q 'aria-label="Guides"' <<<"$BODY"
req POST /docs
expect_status 405 "pages take GET only"
req HEAD /security -I
expect_status 200 "HEAD of a page"

# The pages are not the API: the OpenAPI document's route list leaves them out.
check "aas-server routes lists no page" test "$("$SERVER" routes | grep -cE ' /($|docs|security|static)')" = 0

finish
