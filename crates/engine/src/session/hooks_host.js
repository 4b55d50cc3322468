// loadlab's host for an Artillery processor: one Node.js process per generator thread loads
// the user's module and calls its functions for the thread's virtual users.
//
// Protocol: one JSON object per line. loadlab writes calls on stdin; the host answers each on
// stdout, in any order, by id. The processor's own console output goes to stderr, so nothing
// it prints can break a line of the protocol.
//
//   ready     {"ready":true,"functions":[...]}  or  {"ready":false,"error":"..."}
//   call      {"id":N,"u":USER,"op":"fn"|"before"|"after"|"if"|"while","names":[...],"vars":{...},
//              "scenario":"...","req":{...},"res":{...}}
//   end       {"u":USER,"op":"end"}          (the user's session is over; no answer)
//   answer    {"id":N,"vars":{changed},"req":{...}?,"m":[[kind,name,value],...],
//              "ok":true|false (if, while)?,"err":"..."?,"warn":"..."?}
//
// A user's context lives here for its whole session, so objects a hook keeps in
// `context.vars` stay objects for the next hook; loadlab gets their text (objects as JSON, and
// one key per property, `user.id`) for its templates.
'use strict';

const path = require('path');
const { pathToFileURL } = require('url');
const crypto = require('crypto');

const processorPath = process.argv[1];
const target = process.argv[2] || '';
const writeOut = process.stdout.write.bind(process.stdout);
// What the processor prints goes to stderr: stdout carries the protocol.
process.stdout.write = (...args) => process.stderr.write(...args);

// Keys the host sets that loadlab's templates never read back.
const HOST_KEYS = new Set(['$processEnvironment', '$env', '$environment']);

async function load(file) {
  const abs = path.resolve(file);
  if (abs.endsWith('.mjs')) {
    return import(pathToFileURL(abs).href);
  }
  try {
    return require(abs);
  } catch (e) {
    if (e && e.code === 'ERR_REQUIRE_ESM') {
      return import(pathToFileURL(abs).href);
    }
    throw e;
  }
}

function text(v) {
  if (typeof v === 'string') return v;
  if (v === undefined || v === null || typeof v === 'function') return undefined;
  if (typeof v === 'object') {
    try {
      return JSON.stringify(v);
    } catch (_) {
      return String(v);
    }
  }
  return String(v);
}

// The value's text and, for a plain object, its properties' (`name.key`), two levels deep.
function flatten(name, v, out, depth) {
  const t = text(v);
  if (t === undefined) return;
  out[name] = t;
  if (depth < 2 && v && typeof v === 'object' && !Array.isArray(v)) {
    for (const k of Object.keys(v)) flatten(`${name}.${k}`, v[k], out, depth + 1);
  }
}

function describe(err) {
  if (err instanceof Error) {
    const at = (err.stack || '').split('\n').find((l) => l.trim().startsWith('at '));
    return at ? `${err.name}: ${err.message} (${at.trim()})` : `${err.name}: ${err.message}`;
  }
  return String(err);
}

function main(mod) {
  const functions = mod && typeof mod === 'object' ? mod : {};
  const fns = Object.assign({}, functions.default && typeof functions.default === 'object' ? functions.default : {}, functions);
  const contexts = new Map();

  function contextOf(user, scenario) {
    let c = contexts.get(user);
    if (!c) {
      c = {
        vars: {
          target,
          $uuid: crypto.randomUUID(),
          $processEnvironment: process.env,
          $env: process.env,
        },
        scenario: { name: scenario },
        _uid: crypto.randomUUID(),
        // What loadlab last knew of each variable, as text.
        known: {},
      };
      contexts.set(user, c);
    }
    return c;
  }

  // Takes loadlab's variables in: a value whose text loadlab still has keeps its own type.
  function merge(c, vars) {
    for (const k of Object.keys(vars)) {
      const cur = c.vars[k];
      if (typeof cur !== 'string' && text(cur) === vars[k]) continue;
      c.vars[k] = vars[k];
    }
    c.known = vars;
  }

  function changes(c) {
    const out = {};
    for (const k of Object.keys(c.vars)) {
      if (HOST_KEYS.has(k)) continue;
      const flat = {};
      flatten(k, c.vars[k], flat, 0);
      for (const f of Object.keys(flat)) {
        if (c.known[f] !== flat[f]) out[f] = flat[f];
      }
    }
    return out;
  }

  function call(fn, args) {
    return new Promise((resolve, reject) => {
      if (fn.constructor.name === 'Function') {
        fn(...args, (err) => (err ? reject(err) : resolve()));
      } else {
        Promise.resolve(fn(...args)).then(() => resolve(), reject);
      }
    });
  }

  // whileTrue's function answers through its callback (or, async, its promise).
  function answer(fn, c) {
    return new Promise((resolve, reject) => {
      const r = fn(c, (b) => resolve(Boolean(b)));
      if (r && typeof r.then === 'function') r.then((b) => resolve(Boolean(b)), reject);
    });
  }

  async function run(msg) {
    const metrics = [];
    const ee = {
      emit(kind, name, value) {
        metrics.push([String(kind), String(name), typeof value === 'number' ? value : 1]);
        return true;
      },
      on() {},
      once() {},
    };
    const c = contextOf(msg.u, msg.scenario);
    merge(c, msg.vars || {});
    const reply = { id: msg.id };
    const req = msg.req;
    const before = req ? JSON.stringify(req) : '';
    const res = msg.res;
    try {
      for (const name of msg.names) {
        const fn = fns[name];
        if (typeof fn !== 'function') {
          reply.warn = `custom function ${name} could not be found`;
          continue;
        }
        if (msg.op === 'fn') await call(fn, [c, ee]);
        else if (msg.op === 'before') await call(fn, [req, c, ee]);
        else if (msg.op === 'after') await call(fn, [req, res, c, ee]);
        else if (msg.op === 'if') reply.ok = Boolean(await fn(c.vars));
        else reply.ok = await answer(fn, c);
      }
    } catch (e) {
      reply.err = `${msg.names.join(', ')}: ${describe(e)}`;
    }
    reply.vars = changes(c);
    if (msg.op === 'before' && JSON.stringify(req) !== before) reply.req = req;
    if (metrics.length) reply.m = metrics;
    return reply;
  }

  let pending = [];
  let scheduled = false;
  function send(reply) {
    pending.push(JSON.stringify(reply));
    if (!scheduled) {
      scheduled = true;
      // One write for every answer ready in this turn of the event loop.
      setImmediate(() => {
        scheduled = false;
        const lines = pending.join('\n') + '\n';
        pending = [];
        writeOut(lines);
      });
    }
  }

  let buffered = '';
  let inflight = 0;
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (chunk) => {
    buffered += chunk;
    let nl;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      if (!line) continue;
      let msg;
      try {
        msg = JSON.parse(line);
      } catch (e) {
        process.stderr.write(`loadlab hooks: unreadable call: ${e.message}\n`);
        continue;
      }
      if (msg.op === 'end') {
        contexts.delete(msg.u);
        continue;
      }
      inflight += 1;
      run(msg)
        .then(send, (e) => send({ id: msg.id, vars: {}, err: describe(e) }))
        .finally(() => {
          inflight -= 1;
        });
    }
  });
  // loadlab closed the calls: answer those in flight, then exit even if the processor left
  // timers or sockets open.
  process.stdin.on('end', function finish() {
    if (inflight > 0 || scheduled) {
      setTimeout(finish, 10);
      return;
    }
    writeOut('', () => process.exit(0));
  });
  const names = Object.keys(fns).filter((k) => typeof fns[k] === 'function');
  writeOut(JSON.stringify({ ready: true, functions: names }) + '\n');
}

load(processorPath).then(main, (e) => {
  writeOut(JSON.stringify({ ready: false, error: describe(e) }) + '\n');
  process.exit(1);
});
