// jskernel.js: the JavaScript kernel of aas-code, one Node.js process per context (started by aas-code).
//
// Requests come one JSON object per line on stdin: {"id", "code", "env"}.
// Replies go one JSON object per line to the descriptor named by
// AAS_CODE_REPLY_FD (a pipe of aas-code's), never to stdout, which belongs
// to the user's code like stderr (what child processes write there is read by
// aas-code too): {"id", "type": "stream", "name": "stdout"|"stderr", "text"},
// {"id", "type": "result", "text"}, {"id", "type": "error", "name", "value",
// "traceback"}, {"id", "type": "done"}.
//
// Code runs in this process's global context (vm.runInThisContext), so
// variables, functions and `let`/`const` declarations live on from one run to
// the next; the completion value of the script (its last expression) is the
// result, shown with util.inspect, awaited first when it is a promise. Code
// with a top-level `await` is rewritten as Node's own REPL does it (its
// internal/repl/await, reached with --expose-internals): its declarations
// are hoisted out of the async function it runs in, so they live on too,
// and its last expression's value is the result. A Node without that module
// runs such code as an async function's body (declarations local to the run,
// the result what it returns).
// SIGINT interrupts a run (vm's breakOnSigint for synchronous code; a
// pending promise is abandoned) and the process lives on.
//
// What a run writes to stdout and stderr is cut at AAS_CODE_MAX_OUTPUT
// characters (aas-code's --max-output and one more, so that it sees the bound
// passed and says so): a gigabyte's console.log would otherwise be one reply
// line, held whole on both sides of the pipe. An error's name, message and
// stack are cut so too (AAS_CODE_MAX_ERROR_NAME, AAS_CODE_MAX_ERROR: the
// stack's first and last halves kept), so that a gigabyte's message never
// travels whole either.
'use strict';

const fs = require('fs');
const vm = require('vm');
const util = require('util');
const path = require('path');
const readline = require('readline');
const { createRequire } = require('module');

const replyFd = Number(process.env.AAS_CODE_REPLY_FD);
delete process.env.AAS_CODE_REPLY_FD;
const maxOutput = Number(process.env.AAS_CODE_MAX_OUTPUT) || Infinity;
delete process.env.AAS_CODE_MAX_OUTPUT;
const maxErrorName = Number(process.env.AAS_CODE_MAX_ERROR_NAME) || Infinity;
const maxError = Number(process.env.AAS_CODE_MAX_ERROR) || Infinity;
delete process.env.AAS_CODE_MAX_ERROR_NAME;
delete process.env.AAS_CODE_MAX_ERROR;
let current = null; // the id of the run in progress
let outputLeft = maxOutput; // of the run in progress

let processTopLevelAwait = null;
try {
  ({ processTopLevelAwait } = require('internal/repl/await'));
} catch (e) {
  // Not exposed (no --expose-internals) or gone in this Node: compile()'s fallback.
}

// Written whole before send returns: a run's code may hold the event loop
// (a busy loop), and a write stream sends a line only once the last one's
// callback ran there, so what the code printed before it spun would never
// leave. The pipe is aas-code's, read as it comes; when it is gone there is
// nobody to answer, and the kernel ends.
const pause = new Int32Array(new SharedArrayBuffer(4));
function send(msg) {
  const line = Buffer.from(JSON.stringify(msg) + '\n');
  for (let at = 0; at < line.length;) {
    try {
      at += fs.writeSync(replyFd, line, at);
    } catch (e) {
      if (e.code !== 'EAGAIN') process.exit(1);
      Atomics.wait(pause, 0, 0, 1); // a full pipe that does not block: aas-code reads it
    }
  }
}

// The user's console.log and process.stdout.write land in the run's output.
for (const name of ['stdout', 'stderr']) {
  const stream = process[name];
  stream.write = function (chunk, encoding, cb) {
    if (typeof encoding === 'function') {
      cb = encoding;
      encoding = undefined;
    }
    let text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    if (text.length > outputLeft) text = text.slice(0, outputLeft);
    outputLeft -= text.length;
    if (current !== null && text.length) send({ id: current, type: 'stream', name, text });
    if (cb) process.nextTick(cb);
    return true;
  };
}

globalThis.require = createRequire(path.join(process.cwd(), 'index.js'));
globalThis.module = { exports: {} };
globalThis.exports = globalThis.module.exports;
globalThis.__dirname = process.cwd();
globalThis.__filename = path.join(process.cwd(), '[cell]');

let interrupted = null; // resolves the pending wait of an async run on SIGINT
process.on('SIGINT', () => {
  if (interrupted) interrupted();
});
process.on('uncaughtException', (e) => {
  if (current !== null) process.stderr.write(`Uncaught ${e && e.stack ? e.stack : String(e)}\n`);
});
process.on('unhandledRejection', (e) => {
  if (current !== null) process.stderr.write(`Unhandled rejection: ${e && e.stack ? e.stack : String(e)}\n`);
});

// An error's text within the bounds: its start, or (a stack) its first and last halves.
const head = (text, n) => (text.length > n ? text.slice(0, n) : text);
const ends = (text, n) => (text.length > n ? text.slice(0, Math.floor(n / 2)) + text.slice(text.length - (n - Math.floor(n / 2))) : text);

function errorOf(e) {
  if (e instanceof Error || (e && typeof e === 'object' && 'message' in e)) {
    // The stack down to the user's cells: this kernel's own frames say nothing to them.
    const lines = String(e.stack || '').split('\n');
    const stack = lines.filter((l, i) => i === 0 || !/^\s+at /.test(l) || l.includes('<cell ')).join('\n');
    return { name: head(String(e.name || 'Error'), maxErrorName), value: head(String(e.message), maxError),
             traceback: ends(stack, maxError) };
  }
  return { name: 'Error', value: head(util.inspect(e), maxError), traceback: '' };
}

// The script of a cell, and how its value comes: 'value' (the completion value, maybe a promise),
// 'repl' (a promise of {value}: Node's REPL rewrite), 'body' (a promise of what the body returns).
function compile(code, n) {
  const filename = `<cell ${n}>`;
  try {
    return { script: new vm.Script(code, { filename }), kind: 'value' };
  } catch (e) {
    if (!(e instanceof SyntaxError) || !/await/.test(e.message)) throw e;
    let rewritten = null;
    try {
      rewritten = processTopLevelAwait ? processTopLevelAwait(code) : null;
    } catch (e2) {
      throw e; // the code's own syntax error, not the rewrite's
    }
    if (rewritten !== null) return { script: new vm.Script(rewritten, { filename }), kind: 'repl' };
    return { script: new vm.Script(`(async () => {\n${code}\n})()`, { filename, lineOffset: -1 }), kind: 'body' };
  }
}

async function run(req, n) {
  const saved = {};
  const env = req.env || {};
  for (const k of Object.keys(env)) {
    saved[k] = Object.prototype.hasOwnProperty.call(process.env, k) ? process.env[k] : undefined;
    process.env[k] = String(env[k]);
  }
  try {
    const { script, kind } = compile(String(req.code), n);
    let value = script.runInThisContext({ breakOnSigint: true, displayErrors: false });
    if (value && typeof value.then === 'function') {
      value = await Promise.race([
        value,
        new Promise((_, reject) => {
          interrupted = () => reject(Object.assign(new Error('Script execution was interrupted by `SIGINT`'), { name: 'KeyboardInterrupt' }));
        }),
      ]);
      if (kind === 'repl') value = value ? value.value : undefined;
    }
    if (value !== undefined) send({ id: req.id, type: 'result', text: util.inspect(value, { colors: false }) });
  } catch (e) {
    const err = errorOf(e);
    if (/interrupted by `SIGINT`/.test(err.value)) err.name = 'KeyboardInterrupt';
    send({ id: req.id, type: 'error', ...err });
  } finally {
    interrupted = null;
    for (const k of Object.keys(saved)) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
  }
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
const queue = [];
let busy = false;
let count = 0;

async function pump() {
  if (busy) return;
  busy = true;
  while (queue.length) {
    const req = queue.shift();
    current = req.id;
    outputLeft = maxOutput;
    await run(req, ++count);
    send({ id: req.id, type: 'done' });
    current = null;
  }
  busy = false;
}

rl.on('line', (line) => {
  let req;
  try {
    req = JSON.parse(line);
  } catch (e) {
    return;
  }
  queue.push(req);
  pump();
});
rl.on('close', () => process.exit(0));
send({ type: 'ready' });
