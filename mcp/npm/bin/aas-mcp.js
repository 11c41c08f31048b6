#!/usr/bin/env node
// aas-mcp as an npm package, served by every libsaas server at /mcp.tgz:
//
//   npx -y https://HOST/mcp.tgz        (AAS_API_KEY set; AAS_BASE_URL optional)
//
// the MCP server for clients that launch theirs as processes (Claude Desktop,
// ...), with nothing but Node 18 or later installed. It holds no tools of its
// own: it carries each JSON-RPC message between stdio and the server's
// Streamable HTTP endpoint, /v1/mcp, so its tools are that server's, as they
// are now. docs/mcp.md describes both sides; mcp/stdio_main.c is the C aas-mcp
// whose framing and error texts this one keeps.
//
// stdio: one message per line on stdin, one per line on stdout, logs on
// stderr only. A line is at most LINE_MAX bytes: a longer one is read to its
// end, dropped and answered with -32600 (id null); a line that is not JSON
// gets -32700 (id null); a blank line is skipped.
//
// HTTP: each message is POSTed on its own with Authorization: Bearer
// $AAS_API_KEY, Accept: application/json, text/event-stream, and, once
// initialize answered, the Mcp-Session-Id and MCP-Protocol-Version it gave.
// The answer is one JSON message, an SSE stream (progress notifications, then
// the response; none for a cancelled request) whose events are written as
// lines as they come, or 202 (a notification or a response: no line). The
// messages run at once, each on its own request, so a notifications/cancelled
// reaches the server while the call it cancels runs; answers may therefore
// come in any order, as JSON-RPC allows. A session the server no longer knows
// (404) is initialized again with the client's own initialize, once, and the
// message sent again.
//
// The end: at EOF on stdin the requests still running finish and are
// answered, the session is ended (DELETE /v1/mcp) and the process exits 0.
// SIGINT or SIGTERM, or stdout closed (the client is gone), abort them first:
// the server sees their connections close, and destroys a sandbox it was
// making for one.
//
// Errors say what to set, as the C aas-mcp's do: AAS_BASE_URL is checked at
// start, the key (GET /v1/account) before the first tool call, and a tool call
// that cannot run answers an isError result naming what to set (AAS_API_KEY,
// AAS_BASE_URL, the server that could not be reached) and where keys are made.
'use strict';

const fs = require('node:fs');
const path = require('node:path');

// One line of stdin: AAS_MCP_MESSAGE_MAX, a write_file of 16 MiB as base64 (mcp/aas_mcp.h).
const LINE_MAX = 24 << 20;
// One message back: the server's AAS_MCP_RESPONSE_MAX (64 MiB), and room for the envelope.
const MESSAGE_MAX = 80 << 20;
// The key check and the DELETE at the end: a server that takes longer is not answering.
const CHECK_TIMEOUT_MS = 30000;
const END_TIMEOUT_MS = 3000;
const FALLBACK_BASE_URL = 'http://127.0.0.1:8080';
const KEY_HINT = 'the AAS_API_KEY environment variable of aas-mcp ("env": {"AAS_API_KEY": "aas_sk_..."} in ' +
  "this server's entry of the MCP client's configuration; restart the server after changing it)";

const log = text => process.stderr.write(`aas-mcp: ${text}\n`);

const USAGE = `usage: aas-mcp [--help | --version]

The libsaas MCP server over stdio: newline-delimited JSON-RPC on stdin and
stdout, logs on stderr, each message carried to the libsaas server's /v1/mcp.
Start it from an MCP client (Claude Desktop, Claude Code, ...) rather than by hand.

Environment:
  AAS_API_KEY   required for tool calls: an "aas_sk_..." key
  AAS_BASE_URL  the server's origin, without /v1 (default DEFAULT)

  --help        print this help
  --version     print the version
`;

// The server that served this package wrote its origin into server.json; a copy run from the
// source tree has none.
function servedFrom() {
  try {
    const s = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'server.json'), 'utf8')).base_url;
    if (typeof s === 'string' && checkBase(s).origin) return s;
  } catch { /* not served: the fallback */ }
  return FALLBACK_BASE_URL;
}

// An origin only: http or https, a host, no path (the bridge adds /v1/mcp), query or credentials.
function checkBase(text) {
  let u;
  try {
    u = new URL(text);
  } catch {
    return { why: 'it is not a URL' };
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    return { why: `its scheme is "${u.protocol.slice(0, -1)}", not http or https` };
  if (u.username || u.password)
    return { why: 'it holds a user name or a password (the key goes in AAS_API_KEY)' };
  if (u.pathname !== '/')
    return { why: `it has a path, "${u.pathname}"; the origin is enough (aas-mcp adds /v1/mcp itself)` };
  if (u.search || u.hash)
    return { why: 'it has a query or a fragment' };
  return { origin: u.origin };
}

const DEFAULT_BASE_URL = servedFrom();
const args = process.argv.slice(2);
if (args.includes('--help') || args.includes('-h')) {
  process.stdout.write(USAGE.replace('DEFAULT', DEFAULT_BASE_URL));
  process.exit(0);
}
if (args.includes('--version')) {
  process.stdout.write(`aas-mcp ${require('../package.json').version} (npm, for ${DEFAULT_BASE_URL})\n`);
  process.exit(0);
}
if (args.length) {
  process.stderr.write(`aas-mcp: unknown argument "${args[0]}"\n${USAGE.replace('DEFAULT', DEFAULT_BASE_URL)}`);
  process.exit(2);
}

const st = {
  baseText: process.env.AAS_BASE_URL || DEFAULT_BASE_URL,
  base: null,           // the checked origin, or null with baseProblem said
  baseProblem: null,
  key: process.env.AAS_API_KEY || null,
  keyOk: false,         // GET /v1/account answered 200 with it
  keyBad: false,        // ... 401: every tool call says so until restarted with another
  problem: null,        // what the last failed check means, and what to set (tried again at the next call)
  session: null,        // Mcp-Session-Id
  version: null,        // the protocol version initialize settled on
  init: null,           // the client's initialize, to open a new session when the server lost ours
  initializing: null,   // a promise while an initialize runs: the messages after it wait for its session
  running: new Set(),   // AbortControllers of the requests under way
  pending: new Set(),   // promises of the messages being handled
  ending: false,
};

{
  const c = checkBase(st.baseText);
  if (c.origin) {
    st.base = c.origin;
  } else {
    st.baseProblem = `AAS_BASE_URL is "${st.baseText.slice(0, 200)}", which aas-mcp cannot use: ${c.why}. Set ` +
      "AAS_BASE_URL to the libsaas server's origin only, such as https://sandbox.example.com (without /v1), " +
      `or leave it unset for ${DEFAULT_BASE_URL}, in this server's "env" in the MCP client's configuration, ` +
      'and restart it; retrying does not help.';
    log(st.baseProblem);
  }
}
const keySource = `the dashboard's API keys page, ${st.base || DEFAULT_BASE_URL}/dashboard/keys`;
if (!st.key)
  log('AAS_API_KEY is not set; tool calls will say how to set it');

// ---- stdout: nothing else writes there ----

let stdoutGone = false;
function send(msg) {
  if (stdoutGone)
    return;
  process.stdout.write(JSON.stringify(msg) + '\n');
}
process.stdout.on('error', e => {
  // The client is gone: nobody reads the answers, so stop the calls (a create then leaves nothing).
  if (!stdoutGone)
    log(`cannot write to stdout (${e.code || e.message}): ending`);
  stdoutGone = true;
  finish(true);
});

const rpcError = (id, code, message) => ({ jsonrpc: '2.0', id: id === undefined ? null : id, error: { code, message } });
const toolError = (id, text) => ({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text }], isError: true } });
const isObject = v => v !== null && typeof v === 'object' && !Array.isArray(v);
const describe = e => (e && e.cause && (e.cause.code || e.cause.message)) || (e && e.message) || String(e);

// ---- lines of bytes, without copying a long line more than once ----

// Calls onLine(text) for each line (ended by \n, or with sse also \r\n or \r), onTooLong() for
// each line longer than max (read to its end, not kept). Returns feed(chunk) and end().
function lineSplitter(max, sse, onLine, onTooLong) {
  let parts = [], size = 0, over = false, skipLF = false;
  const take = bytes => {
    if (over || bytes.length === 0)
      return;
    size += bytes.length;
    if (size > max) {
      over = true;
      parts = [];
    } else {
      parts.push(bytes);
    }
  };
  const done = () => {
    if (over)
      onTooLong();
    else
      onLine(Buffer.concat(parts).toString('utf8'));
    parts = [];
    size = 0;
    over = false;
  };
  const feed = chunk => {
    let start = 0;
    if (skipLF && chunk.length > 0 && chunk[0] === 0x0a)
      start = 1;
    skipLF = false;
    for (;;) {
      let i = chunk.indexOf(0x0a, start);
      if (sse) {
        const r = chunk.indexOf(0x0d, start);
        if (r >= 0 && (i < 0 || r < i))
          i = r;
      }
      if (i < 0)
        break;
      take(chunk.subarray(start, i));
      done();
      if (chunk[i] === 0x0d) {
        if (i + 1 === chunk.length)
          skipLF = true;
        else if (chunk[i + 1] === 0x0a)
          i++;
      }
      start = i + 1;
    }
    take(chunk.subarray(start));
  };
  const end = () => {
    if (size > 0 || over)
      done();
  };
  return { feed, end };
}

// ---- the server ----

// POST one message's text; each message it answers with goes to sink (stdout by default).
// Returns the HTTP status, or throws when the server could not be reached.
async function post(body, sink = send, id = undefined) {
  const ac = new AbortController();
  st.running.add(ac);
  try {
    const headers = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };
    if (st.key)
      headers.Authorization = `Bearer ${st.key}`;
    if (st.session)
      headers['Mcp-Session-Id'] = st.session;
    if (st.version)
      headers['MCP-Protocol-Version'] = st.version;
    // A redirect is not followed: the key would go where it points, and a POST would become a GET.
    const res = await fetch(`${st.base}/v1/mcp`, { method: 'POST', headers, body, signal: ac.signal,
                                                   redirect: 'manual' });
    const type = (res.headers.get('content-type') || '').toLowerCase();
    if (res.status === 404 && headers['Mcp-Session-Id']) {
      // The session is gone: the caller opens another and sends the message again, so no answer yet.
      await res.arrayBuffer();
    } else if (res.status === 202) {
      await res.arrayBuffer();
    } else if (type.startsWith('text/event-stream')) {
      await relayEvents(res, sink);
    } else {
      const text = await readBounded(res);
      let msg = null;
      try {
        msg = JSON.parse(text);
      } catch { /* not JSON: a proxy's page, say */ }
      if (isObject(msg) && msg.jsonrpc === '2.0' || Array.isArray(msg)) {
        // An HTTP error answers the POST, which carried one request: its answer carries its id.
        if (res.status >= 400 && isObject(msg) && msg.id === null && id !== undefined)
          msg.id = id;
        sink(msg, res);
      } else {
        // Not JSON-RPC ({"error":{"code":"too_large",...}}, or not this server at all): the request still gets its answer.
        const why = isObject(msg) && isObject(msg.error) && msg.error.message ? msg.error.message : text.slice(0, 200);
        const message = `the libsaas server at ${st.base} answered HTTP ${res.status}: ${why}`;
        if (id !== undefined)
          sink(rpcError(id, res.status >= 400 && res.status < 500 ? -32600 : -32603, message), res);
        else
          log(message);
      }
    }
    return { status: res.status, sessionId: res.headers.get('mcp-session-id') };
  } finally {
    st.running.delete(ac);
  }
}

async function readBounded(res) {
  const parts = [];
  let size = 0;
  if (!res.body)
    return '';
  for await (const chunk of res.body) {
    size += chunk.length;
    if (size > MESSAGE_MAX)
      throw new Error(`an answer of more than ${MESSAGE_MAX} bytes`);
    parts.push(chunk);
  }
  return Buffer.concat(parts).toString('utf8');
}

// An SSE stream's events, each one message, to sink as they come. Fields other than data are ignored.
async function relayEvents(res, sink) {
  let data = [], size = 0;
  const field = line => {
    if (line === '') {
      if (data.length > 0) {
        const text = data.join('\n');
        data = [];
        size = 0;
        try {
          sink(JSON.parse(text), res);
        } catch (e) {
          log(`an event from the server that is not JSON was dropped (${e.message})`);
        }
      }
      return;
    }
    const colon = line.indexOf(':');
    if (colon === 0 || (colon < 0 ? line : line.slice(0, colon)) !== 'data')
      return;
    const value = colon < 0 ? '' : line.slice(line[colon + 1] === ' ' ? colon + 2 : colon + 1);
    size += value.length;
    if (size > MESSAGE_MAX)
      throw new Error(`an event of more than ${MESSAGE_MAX} bytes`);
    data.push(value);
  };
  const lines = lineSplitter(MESSAGE_MAX, true, field, () => {
    throw new Error(`an event line of more than ${MESSAGE_MAX} bytes`);
  });
  if (!res.body)
    return;
  for await (const chunk of res.body)
    lines.feed(chunk);
  lines.end();
  field('');
}

// Open a session with msg (the client's initialize): its answer goes to sink; the session id and
// version are kept for the messages after it.
async function initialize(msg, sink) {
  let result = null;
  const r = await post(JSON.stringify(msg), (m, res) => {
    if (isObject(m) && m.id === msg.id && isObject(m.result))
      result = m.result;
    sink(m, res);
  }, msg.id);
  if (result && r.sessionId) {
    st.session = r.sessionId;
    st.version = typeof result.protocolVersion === 'string' ? result.protocolVersion : null;
    st.init = msg;
  }
  return result !== null;
}

// The server no longer knows the session (it expired, or was ended): open another with the
// client's initialize and tell it the client is initialized. Once for many messages that found out together.
let reopening = null;
async function reopen(lost) {
  if (st.session !== lost)
    return st.session !== null;
  if (!reopening) {
    reopening = (async () => {
      log('the server ended the MCP session; opening a new one');
      st.session = null;
      st.version = null;
      const ok = await initialize({ ...st.init, id: 'aas-mcp-reopen' }, () => {});
      if (ok)
        await post(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }), () => {});
      return ok;
    })().finally(() => { reopening = null; });
  }
  return reopening;
}

// Before a tool call: is the key set and known? Sets st.problem (for the tool result) when not.
async function checkKey() {
  if (st.keyOk || st.keyBad)
    return;
  const ac = AbortSignal.timeout(CHECK_TIMEOUT_MS);
  let res, body = null;
  try {
    res = await fetch(`${st.base}/v1/account`, { headers: { Authorization: `Bearer ${st.key}` }, signal: ac,
                                                 redirect: 'manual' });
    try {
      body = JSON.parse(await readBounded(res));
    } catch { /* checked below */ }
  } catch (e) {
    st.problem = `aas-mcp cannot reach the libsaas server at ${st.base} (${describe(e)}). Check that the ` +
      'server runs and that AAS_BASE_URL is its origin; the next tool call tries again.';
    log(st.problem);
    return;
  }
  if (res.status === 200 && isObject(body)) {
    st.keyOk = true;
    st.problem = null;
    log(`connected to ${st.base} as account ${body.id || body.account_id || '(unnamed)'}`);
  } else if (res.status === 401) {
    st.keyBad = true;
    log(`the libsaas server at ${st.base} does not know AAS_API_KEY (unknown or revoked)`);
  } else if (res.status >= 300 && res.status < 400) {
    st.problem = `AAS_BASE_URL is "${st.base}", which redirects to ` +
      `"${String(res.headers.get('location') || '(nowhere)').slice(0, 200)}": set AAS_BASE_URL to the origin ` +
      `it redirects to (https, say) in this server's "env" in the MCP client's configuration, and restart it.`;
    log(st.problem);
  } else if (!isObject(body) || !isObject(body.error)) {
    st.problem = `AAS_BASE_URL is "${st.base}", and ${st.base}/v1/account answered HTTP ${res.status} with ` +
      "something not from a libsaas server. Set AAS_BASE_URL to the libsaas server's origin only (without " +
      `/v1) in this server's "env" in the MCP client's configuration, and restart it.`;
    log(st.problem);
  } else {
    st.problem = `aas-mcp could not check the API key with the libsaas server at ${st.base}: HTTP ` +
      `${res.status}, ${String(body.error.message || body.error.code).slice(0, 300)}. The next tool call tries again.`;
    log(st.problem);
  }
}

// Why a tool call cannot run now, or null when it can.
async function toolProblem(name) {
  if (st.baseProblem)
    return `${name} cannot run: ${st.baseProblem}`;
  if (!st.key)
    return `${name} needs an API key, and none was set. Set one in ${KEY_HINT}; make one on ${keySource}. ` +
      'initialize and tools/list work without one.';
  await checkKey();
  if (st.keyBad)
    return `${name} needs a valid API key, and the key in AAS_API_KEY is unknown or revoked. Set a valid ` +
      `key in ${KEY_HINT}; make one on ${keySource}.`;
  return st.keyOk ? null : `${name} cannot run: ${st.problem}`;
}

// ---- one message from the client ----

async function handle(text) {
  let msg;
  try {
    msg = JSON.parse(text);
  } catch (e) {
    send(rpcError(null, -32700, `Parse error: ${e.message}`));
    return;
  }
  const id = isObject(msg) && 'method' in msg ? msg.id : undefined;
  const method = isObject(msg) ? msg.method : undefined;
  try {
    if (st.baseProblem) {
      if (id !== undefined)
        send(method === 'tools/call' ? toolError(id, await toolProblem(msg.params && msg.params.name))
                                     : rpcError(id, -32603, st.baseProblem));
      return;
    }
    if (method === 'initialize') {
      st.initializing = initialize(msg, send).finally(() => { st.initializing = null; });
      await st.initializing;
      return;
    }
    if (st.initializing)
      await st.initializing.catch(() => {});
    if (reopening)
      await reopening.catch(() => {});
    if (method === 'tools/call' && id !== undefined) {
      const problem = await toolProblem(isObject(msg.params) ? String(msg.params.name) : 'the tool');
      if (problem) {
        send(toolError(id, problem));
        return;
      }
    }
    const session = st.session;
    const r = await post(text, send, id);
    if (r.status === 404 && session && !st.ending) {
      if (await reopen(session))
        await post(text, send, id);
      else if (id !== undefined)
        send(rpcError(id, -32603, `the libsaas server at ${st.base} ended the MCP session and would not open another`));
    }
  } catch (e) {
    if (st.ending && e && e.name === 'AbortError')
      return;
    const why = `aas-mcp cannot reach the libsaas server at ${st.base} (${describe(e)}). Check that the server ` +
      'runs and that AAS_BASE_URL is its origin; the next request tries again.';
    log(why);
    if (id === undefined)
      return;
    send(method === 'tools/call' ? toolError(id, `${msg.params && msg.params.name} cannot run: ${why}`)
                                 : rpcError(id, -32603, why));
  }
}

function start(text) {
  const p = handle(text).catch(e => log(`unexpected: ${e && e.stack || e}`));
  st.pending.add(p);
  p.finally(() => st.pending.delete(p));
}

// ---- the end ----

// At EOF (abort false) let what runs finish; on a signal or with stdout gone (abort true) stop it.
// Then end the session and exit.
async function finish(abort) {
  if (abort)
    for (const ac of st.running)
      ac.abort();
  if (st.ending)
    return;
  st.ending = true;
  if (!abort)
    while (st.pending.size > 0)
      await Promise.allSettled([...st.pending]);
  if (st.session) {
    try {
      const headers = { 'Mcp-Session-Id': st.session };
      if (st.key)
        headers.Authorization = `Bearer ${st.key}`;
      if (st.version)
        headers['MCP-Protocol-Version'] = st.version;
      await (await fetch(`${st.base}/v1/mcp`, { method: 'DELETE', headers,
                                                signal: AbortSignal.timeout(END_TIMEOUT_MS) })).arrayBuffer();
    } catch { /* the server forgets idle sessions by itself */ }
  }
  process.exit(0);
}

const stdin = lineSplitter(LINE_MAX, false, line => {
  if (line.trim() !== '')
    start(line);
}, () => send(rpcError(null, -32600, `Invalid Request: a message is at most ${LINE_MAX} bytes; this line was ` +
                                     'longer and was skipped')));
process.stdin.on('data', chunk => stdin.feed(chunk));
process.stdin.on('end', () => {
  stdin.end();
  finish(false);
});
process.stdin.on('error', () => finish(false));
for (const sig of ['SIGINT', 'SIGTERM'])
  process.on(sig, () => finish(true));
