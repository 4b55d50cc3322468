// loadlab's reference service (DESIGN §4.3) on Node.js: Express on Node's http, one event loop
// per process, `--workers N` processes through the cluster module (seed 000's "1 node × 3
// workers"). It answers every endpoint as the Rust service in crates/service does (same
// statuses, one-line 400s, JSON shapes), with the costs a Node process really pays: /block,
// /calc, /heavy and /site?work_ms=N stall the event loop; /delay and the black boxes never do.
//
// Started by `loadlab serve --runtime node`, which passes:
//   --port P --host H --workers N --bbox-delay-ms MS --bbox-workers K
// (PORT in the environment is used when --port is absent, as for `serve --cmd`).
'use strict';

const cluster = require('node:cluster');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

/** Longest wait an endpoint accepts, so a typo cannot hold a connection for days. */
const MAX_WAIT_MS = 600000;
/** Most iterations /calc accepts (about a minute of CPU). */
const MAX_CALC_N = 2000000000;
/** Most tokens kept at once; see /login. */
const MAX_TOKENS = 1000000;

/** Reads `--name value` flags into an object; exits with a one-line error on a bad one. */
function parseArgs(argv) {
  const known = ['port', 'host', 'workers', 'bbox-delay-ms', 'bbox-async-delay-ms', 'bbox-workers', 'bbox-url'];
  const out = {
    port: process.env.PORT || '8080',
    host: '127.0.0.1',
    workers: '1',
    'bbox-delay-ms': '1000',
    'bbox-workers': '3',
  };
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i].replace(/^--/, '');
    if (!argv[i].startsWith('--') || !known.includes(name) || i + 1 >= argv.length) {
      fail(`unknown or incomplete flag ${JSON.stringify(argv[i])}; flags: --${known.join(' N, --')} N`);
    }
    out[name] = argv[i + 1];
  }
  const whole = (name, min) => {
    const v = out[name];
    if (!/^[0-9]+$/.test(v) || Number(v) < min) fail(`--${name} must be a whole number from ${min}, got ${JSON.stringify(v)}`);
    return Number(v);
  };
  return {
    port: whole('port', 0),
    host: out.host,
    workers: whole('workers', 1),
    bboxDelayMs: whole('bbox-delay-ms', 0),
    bboxAsyncDelayMs: out['bbox-async-delay-ms'] === undefined ? whole('bbox-delay-ms', 0) : whole('bbox-async-delay-ms', 0),
    bboxWorkers: whole('bbox-workers', 1),
    bboxUrl: sharedBox(out['bbox-url']),
  };
}

/** The `--bbox-url` of a black box every instance shares: an http:// URL, or none. */
function sharedBox(url) {
  if (url === undefined) return null;
  if (!/^http:\/\/[^/]+\/?$/.test(url)) fail(`--bbox-url must be http://HOST:PORT, got ${JSON.stringify(url)}`);
  return url.replace(/\/$/, '');
}

function fail(message) {
  process.stderr.write(`loadlab node target: ${message}\n`);
  process.exit(2);
}

// ---- query parameters, parsed as the Rust service parses them ------------------------------

/** A query parameter that cannot be used; answered as a 400 with its reason. */
class BadRequest extends Error {}

/** Rust's `{:?}` of a string, close enough for the values a query carries. */
function quoted(v) {
  return JSON.stringify(v);
}

/** A whole number no larger than `max`, or `def` when absent (undefined: required). */
function number(name, value, def, max) {
  if (value === undefined) {
    if (def === undefined) throw new BadRequest(`missing query parameter ${name}`);
    return def;
  }
  if (/^\+?[0-9]+$/.test(value)) {
    const n = Number(value);
    if (n <= max) return n;
  }
  throw new BadRequest(`${name} must be a whole number from 0 to ${max}, got ${quoted(value)}`);
}

/** Milliseconds up to MAX_WAIT_MS. */
function millis(name, value, def) {
  return number(name, value, def, MAX_WAIT_MS);
}

/** The query parameters every endpoint with a query reads (the Rust service's `Params`). */
const PARAMS = ['ms', 'n', 'from', 'log', 'every_ms', 'for_ms', 'kb'];
/** Most KB one /leak request keeps (1 GB). */
const MAX_LEAK_KB = 1 << 20;
/** What /leak kept, for the process's life. */
const leaked = [];

/** Refuses a repeated parameter among `names`, in the words of the Rust service's framework. */
class QueryRejection extends Error {}

function checkQuery(req, names) {
  for (const name of names) {
    if (Array.isArray(req.query[name])) {
      throw new QueryRejection(`Failed to deserialize query string: duplicate field \`${name}\``);
    }
  }
}

/** One value of a query parameter. */
function param(req, name) {
  return req.query[name];
}

// ---- blocking the event loop -----------------------------------------------------------------

const { blockingSleep, busyWait } = require('./work');

// ---- the site (seed 002), the same bytes as the Rust service ---------------------------------

const SITE_CSS = `/* loadlab reference site: a fixed stylesheet, the same for every page. */
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 40rem; color: #222; }
h1 { font-size: 1.6rem; border-bottom: 1px solid #ccc; padding-bottom: .3rem; }
nav a { margin-right: 1rem; color: #0645ad; text-decoration: none; }
nav a:hover { text-decoration: underline; }
img { display: inline-block; width: 40px; height: 40px; image-rendering: pixelated; }
p { line-height: 1.5; }
`;

const APP_JS = `// loadlab reference site: a fixed script, the same for every page. It requests nothing, so a
// page costs exactly its HTML and its four static resources.
document.addEventListener("DOMContentLoaded", function () {
  var links = document.querySelectorAll("nav a");
  for (var i = 0; i < links.length; i++) {
    if (links[i].getAttribute("href") === location.pathname) links[i].className = "here";
  }
  document.body.setAttribute("data-loaded", String(Date.now()));
});
`;

/** The Rust service's 10 × 10 PNG, read once from the repository. */
const IMAGE_PNG = fs.readFileSync(path.join(__dirname, '..', '..', 'crates', 'service', 'src', 'assets', 'image.png'));

function pageHtml(page) {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${page} · loadlab</title>
<link rel="stylesheet" href="/static/site.css">
<script src="/static/app.js"></script>
</head>
<body>
<h1>${page}</h1>
<img src="/static/logo.png" alt="logo">
<img src="/static/${page}.png" alt="${page} picture">
<nav><a href="/site/home">home</a> <a href="/site/news">news</a> <a href="/site/about">about</a></nav>
<p>This is the page ${page} of loadlab's reference site. Every page has the same stylesheet,
script and logo, and a picture of its own.</p>
</body>
</html>
`;
}

/** 1 to 32 characters of a-z, 0-9 and -. */
function isName(name) {
  return /^[a-z0-9-]{1,32}$/.test(name);
}

// ---- the app ---------------------------------------------------------------------------------

/** A FIFO of waiters in front of `size` slots: /bbox/sync's K workers. */
class Slots {
  constructor(size) {
    this.free = size;
    this.waiting = [];
  }
  acquire() {
    if (this.free > 0) {
      this.free--;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }
  release() {
    const next = this.waiting.shift();
    if (next) next();
    else this.free++;
  }
}

function text(res, status, body) {
  res.status(status).type('text/plain; charset=utf-8').send(body);
}

/** Compact JSON with sorted keys, as serde_json writes it. */
function json(res, status, value) {
  const sorted = {};
  for (const k of Object.keys(value).sort()) sorted[k] = value[k];
  // Node's setHeader and a Buffer, so Express adds no charset: the Rust service's Content-Type.
  res.status(status).setHeader('Content-Type', 'application/json');
  res.send(Buffer.from(JSON.stringify(sorted)));
}

/**
 * Asks the black box every instance shares for `url` on a connection of its own (as seed
 * 000's service called its course's box) and answers with its status and body; 502 when it
 * cannot be reached.
 */
function callSharedBox(url, res) {
  const http = require('http');
  const call = http.get(url, { agent: false }, (answer) => {
    const chunks = [];
    answer.on('data', (c) => chunks.push(c));
    answer.on('end', () => text(res, answer.statusCode, Buffer.concat(chunks).toString()));
    answer.on('error', (e) => text(res, 502, `the shared black box at ${url}: ${e.message}\n`));
  });
  call.on('error', (e) => text(res, 502, `the shared black box at ${url}: ${e.message}\n`));
}

function badRequest(res, reason) {
  text(res, 400, reason + '\n');
}

const ARCH = { x64: 'x86_64', arm64: 'aarch64', ia32: 'x86', arm: 'arm' };

function app(config) {
  const express = require('express');
  const started = process.hrtime.bigint();
  const elapsedMs = () => Number((process.hrtime.bigint() - started) / 1000000n);
  const bboxSync = new Slots(Math.max(1, config.bboxWorkers));
  const tickets = new Map();
  const tokens = new Map();

  const a = express();
  a.set('case sensitive routing', true);
  a.set('strict routing', true);
  a.set('etag', false);
  a.set('x-powered-by', false);
  if (process.env.LOADLAB_OTLP_TRACES) a.use(traced(process.env.LOADLAB_OTLP_TRACES));
  a.set('query parser', 'simple');

  // Each handler turns a BadRequest into its 400.
  const handle = (fn, query = []) => (req, res, next) => {
    Promise.resolve()
      .then(() => {
        checkQuery(req, query);
        return fn(req, res);
      })
      .catch((e) => {
        if (e instanceof BadRequest) badRequest(res, e.message);
        else if (e instanceof QueryRejection) text(res, 400, e.message);
        else next(e);
      });
  };
  const routes = [];
  // `query`: the parameters whose repetition is refused (those of the Rust handler's struct).
  const get = (p, fn, query = []) => {
    routes.push(p);
    a.get(p, handle(fn, query));
  };

  get('/ping', (req, res) => text(res, 200, 'pong'));
  get('/health', (req, res) => text(res, 200, 'ok'));
  get('/delay', async (req, res) => {
    const ms = millis('ms', param(req, 'ms'));
    await new Promise((r) => setTimeout(r, ms));
    text(res, 200, 'done');
  }, PARAMS);
  get('/block', (req, res) => {
    blockingSleep(millis('ms', param(req, 'ms')));
    text(res, 200, 'done');
  }, PARAMS);
  get('/calc', (req, res) => {
    const n = number('n', param(req, 'n'), undefined, MAX_CALC_N);
    const from = number('from', param(req, 'from'), 0, MAX_CALC_N);
    let sum = 0;
    for (let i = from; i < from + n; i++) sum += Math.sin(i);
    text(res, 200, String(sum));
  }, PARAMS);
  get('/heavy', (req, res) => {
    busyWait(millis('ms', param(req, 'ms')));
    text(res, 200, 'done');
  }, PARAMS);
  get('/leak', (req, res) => {
    const kb = number('kb', param(req, 'kb'), undefined, MAX_LEAK_KB);
    // Filled, so every page is written and resident.
    leaked.push(Buffer.alloc(kb * 1024, 0x5a));
    const held = leaked.reduce((sum, b) => sum + b.length, 0) / 1024;
    text(res, 200, `kept ${kb} KB; ${held} KB held\n`);
  }, PARAMS);
  get('/info', (req, res) => {
    const log = param(req, 'log');
    let print;
    if (log === undefined || log === '0' || log === 'false') print = false;
    else if (log === '1' || log === 'true') print = true;
    else return badRequest(res, `log must be 0 or 1, got ${quoted(log)}`);
    // Facts the process holds in memory or gets from the kernel in a few system calls, as the
    // seed's handler returned them (no readFileSync per request, which would dwarf the log).
    const body = {
      pid: process.pid,
      hostname: os.hostname(),
      os: process.platform,
      arch: ARCH[process.arch] || process.arch,
      cpus: typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length,
      uptime_s: elapsedMs() / 1000,
      rss_kb: Math.round(process.memoryUsage.rss() / 1024),
      loadavg: os.loadavg(),
      runtime: 'node',
      version: process.version,
      argv: process.argv,
      exec_path: process.execPath,
      cwd: process.cwd(),
    };
    // console.log of the object on the hot path, as seed 004 measured it: util.inspect
    // formats it (in colour on a terminal) and the write is synchronous.
    if (print) console.log(body);
    json(res, 200, body);
  }, PARAMS);
  get('/stall', async (req, res) => {
    const every = number('every_ms', param(req, 'every_ms'), 2000, MAX_WAIT_MS);
    if (every === 0) return badRequest(res, 'every_ms must be at least 1');
    const freeze = number('for_ms', param(req, 'for_ms'), 1000, MAX_WAIT_MS);
    if (freeze > every) return badRequest(res, 'for_ms must not exceed every_ms');
    const phase = elapsedMs() % every;
    if (phase >= every - freeze) await new Promise((r) => setTimeout(r, every - phase));
    text(res, 200, 'ok');
  }, PARAMS);
  get('/bbox/async', async (req, res) => {
    if (config.bboxUrl) return callSharedBox(config.bboxUrl + '/bbox/async', res);
    await new Promise((r) => setTimeout(r, config.bboxAsyncDelayMs));
    text(res, 200, 'ok');
  });
  get('/bbox/sync', async (req, res) => {
    if (config.bboxUrl) return callSharedBox(config.bboxUrl + '/bbox/sync', res);
    await bboxSync.acquire();
    try {
      await new Promise((r) => setTimeout(r, config.bboxDelayMs));
    } finally {
      bboxSync.release();
    }
    text(res, 200, 'ok');
  });
  get('/turno/:name', (req, res) => {
    const name = req.params.name;
    if (Buffer.byteLength(name) > 128) return badRequest(res, 'the queue name must have 1 to 128 characters');
    // One event loop runs this handler to its end: the increment is atomic in this process.
    const n = (tickets.get(name) || 0) + 1;
    tickets.set(name, n);
    json(res, 200, { turno: n });
  });
  get('/site/:page', (req, res) => {
    const page = req.params.page;
    if (!isName(page)) {
      return text(res, 404, `no page ${quoted(page)}; a page name is 1 to 32 of a-z, 0-9 and -\n`);
    }
    busyWait(millis('work_ms', param(req, 'work_ms'), 0));
    blockingSleep(millis('wait_ms', param(req, 'wait_ms'), 0));
    res.status(200).type('text/html; charset=utf-8').send(pageHtml(page));
  }, ['work_ms', 'wait_ms']);
  get('/static/:file', (req, res) => {
    const reason = 'a static file is 1 to 32 of a-z, 0-9 and - followed by .css, .js or .png';
    const file = req.params.file;
    const dot = file.lastIndexOf('.');
    const name = dot < 0 ? '' : file.slice(0, dot);
    const ext = dot < 0 ? '' : file.slice(dot + 1);
    const bodies = {
      css: ['text/css', SITE_CSS],
      js: ['text/javascript', APP_JS],
      png: ['image/png', IMAGE_PNG],
    };
    if (!isName(name) || !Object.hasOwn(bodies, ext)) {
      return text(res, 404, `no static file ${quoted(file)}; ${reason}\n`);
    }
    const [type, body] = bodies[ext];
    res.status(200).setHeader('Content-Type', type);
    res.set('Cache-Control', 'max-age=3600').send(Buffer.from(body));
  });
  routes.push('/login');
  a.post(
    '/login',
    express.raw({ type: () => true, limit: '1mb' }),
    handle((req, res) => {
      const LOGIN_BODY = '{"user": "NAME", "password": "..."}';
      let value;
      try {
        value = JSON.parse(Buffer.isBuffer(req.body) ? req.body.toString('utf8') : '');
      } catch (e) {
        return badRequest(res, `the body must be JSON like ${LOGIN_BODY}: ${e.message}`);
      }
      if (value === null || typeof value !== 'object' || Array.isArray(value)) {
        return badRequest(res, `the body must be a JSON object like ${LOGIN_BODY}`);
      }
      if (!Object.hasOwn(value, 'user')) return badRequest(res, `missing "user"; send ${LOGIN_BODY}`);
      const user = value.user;
      if (typeof user !== 'string') return badRequest(res, '"user" must be a string');
      if (user.length === 0 || Buffer.byteLength(user) > 128) {
        return badRequest(res, 'the user must have 1 to 128 characters');
      }
      // Rather than grow without bound, forget every token once a million are held.
      if (tokens.size >= MAX_TOKENS) tokens.clear();
      let token = crypto.randomBytes(16).toString('hex');
      while (tokens.has(token)) token = crypto.randomBytes(16).toString('hex');
      tokens.set(token, user);
      json(res, 200, { user, token });
    }),
  );
  get('/account', (req, res) => {
    const unauthorized = (reason) => {
      res.set('WWW-Authenticate', 'Bearer');
      text(res, 401, reason + '\n');
    };
    const header = req.get('authorization');
    if (header === undefined) return unauthorized('missing Authorization header; log in with POST /login');
    const space = header.indexOf(' ');
    if (space < 0 || header.slice(0, space).toLowerCase() !== 'bearer') {
      return unauthorized('the Authorization header must be Bearer TOKEN');
    }
    const user = tokens.get(header.slice(space + 1).trim());
    if (user === undefined) return unauthorized('unknown token; log in with POST /login');
    json(res, 200, { user });
  });

  // A known path with another method: 405 and the methods it takes, as the Rust service.
  a.all(routes, (req, res) => {
    res.status(405).set('Allow', req.path === '/login' ? 'POST' : 'GET,HEAD').end();
  });
  a.use((req, res) => {
    text(
      res,
      404,
      `no endpoint ${req.path}; try /ping, /delay?ms=N, /block?ms=N, /calc?n=N, /heavy?ms=N, /leak?kb=N, /info, /bbox/async, /bbox/sync, /turno/NAME, /site/PAGE, /static/FILE, POST /login, /account, /health\n`,
    );
  });
  // Express knows an error handler by its four parameters, so `next` stays though unused.
  a.use((err, req, res, next) => {
    const status = err.status || err.statusCode || 500;
    text(res, status, `${status === 500 ? 'internal error' : err.message}\n`);
  });
  return a;
}

// ---- traces ----------------------------------------------------------------------------------

/**
 * A middleware continuing the traces loadlab sends: a request with a sampled W3C traceparent
 * gets a server span under the caller's span, sent as OTLP/HTTP JSON to `url` (a whole
 * .../v1/traces URL, from LOADLAB_OTLP_TRACES, which `loadlab serve --otlp` sets) in batches
 * every 200 ms. Written by hand, not with the OpenTelemetry SDK, so the service's pinned
 * dependencies stay Express alone.
 */
function traced(url) {
  const http = url.startsWith('https:') ? require('node:https') : require('node:http');
  const service = process.env.OTEL_SERVICE_NAME || 'loadlab-serve-node';
  let batch = [];
  let timer = null;
  let failed = 0;
  const flush = () => {
    timer = null;
    const spans = batch;
    batch = [];
    const body = JSON.stringify({
      resourceSpans: [{
        resource: { attributes: [{ key: 'service.name', value: { stringValue: service } }] },
        scopeSpans: [{ scope: { name: 'loadlab-serve-node' }, spans }],
      }],
    });
    const req = http.request(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, timeout: 2000 });
    const warn = (why) => {
      if (failed++ === 0) process.stderr.write(`warning: cannot export spans (${url}: ${why}); the service goes on\n`);
    };
    req.on('response', (r) => {
      if (r.statusCode >= 300) warn(`answered ${r.statusCode}`);
      r.resume();
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', (e) => warn(e.message));
    req.end(body);
  };
  return (req, res, next) => {
    const m = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})/.exec(req.headers.traceparent || '');
    if (!m || m[1] === 'ff' || !(parseInt(m[4], 16) & 1) || /^0+$/.test(m[2]) || /^0+$/.test(m[3])) return next();
    const spanId = crypto.randomBytes(8).toString('hex');
    const startNs = BigInt(Date.now()) * 1000000n;
    const t0 = process.hrtime.bigint();
    res.on('finish', () => {
      const route = req.route ? req.baseUrl + req.route.path : req.path;
      batch.push({
        traceId: m[2],
        spanId,
        parentSpanId: m[3],
        name: `${req.method} ${route}`,
        kind: 2,
        startTimeUnixNano: String(startNs),
        endTimeUnixNano: String(startNs + (process.hrtime.bigint() - t0)),
        attributes: [
          { key: 'http.request.method', value: { stringValue: req.method } },
          { key: 'http.route', value: { stringValue: route } },
          { key: 'http.response.status_code', value: { intValue: String(res.statusCode) } },
        ],
        status: res.statusCode >= 500 ? { code: 2 } : {},
      });
      if (batch.length >= 512) flush();
      else if (!timer) timer = setTimeout(flush, 200);
    });
    next();
  };
}

// ---- processes -------------------------------------------------------------------------------

function serve(config) {
  const server = require('node:http').createServer(app(config));
  server.on('connection', (socket) => socket.setNoDelay(true));
  // Idle keep-alive connections outlive nginx's upstream pool (60 s): with Node's 5 s default
  // nginx may reuse a connection Node is closing and answer 502 for a healthy service.
  server.keepAliveTimeout = 65000;
  server.headersTimeout = 66000;
  // No limit on receiving a request: the service's own endpoints bound every wait.
  server.requestTimeout = 0;
  server.on('error', (e) => fail(`cannot listen on ${config.host}:${config.port}: ${e.message}`));
  server.listen({ port: config.port, host: config.host, backlog: 4096 }, () => {
    if (cluster.isWorker) {
      process.send({ listening: server.address().port });
    } else {
      announce(config, server.address().port, [process.pid]);
    }
  });
}

/** The first line on stdout, read by loadlab and its tests as `loadlab serve` prints it. */
function announce(config, port, pids) {
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  process.stdout.write(
    `loadlab serve: listening on http://${host}:${port} (pid ${process.pid}, runtime node ${process.version}, ` +
      `${config.workers} worker process(es), pids ${pids.join(' ')}); Ctrl-C stops\n`,
  );
}

function primary(config) {
  const workers = [];
  let stopping = false;
  let port = null;
  const ready = new Set();
  const stop = () => {
    stopping = true;
    for (const w of workers) w.process.kill('SIGTERM');
    setTimeout(() => process.exit(), 2000).unref();
    if (workers.every((w) => w.isDead())) process.exit();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  for (let i = 0; i < config.workers; i++) {
    const w = cluster.fork();
    workers.push(w);
    w.on('message', (m) => {
      if (m && typeof m.listening === 'number') {
        port = m.listening;
        ready.add(w.id);
        if (ready.size === config.workers) announce(config, port, workers.map((x) => x.process.pid));
      }
    });
  }
  cluster.on('exit', (w, code, signal) => {
    if (stopping) {
      if (workers.every((x) => x.isDead())) process.exit();
      return;
    }
    // A worker that dies takes the service down, so the lab sees it (as a replica exiting).
    process.stderr.write(`loadlab node target: worker ${w.process.pid} exited (${signal || code}); stopping\n`);
    process.exitCode = 1;
    stop();
  });
}

// A reader of stdout that went away must not take the service down with an EPIPE.
process.stdout.on('error', () => {});

/**
 * V8's CPU profile on demand, for `loadlab run --profile` and lab topologies with `profile:
 * true` (loadlab sets LOADLAB_V8_PROFILE, so it knows to ask): the first SIGUSR2 starts V8's
 * sampling profiler in this process through the in-process inspector, the next one stops it
 * and writes the profile (the `.cpuprofile` JSON of Chrome's tools) to
 * `$TMPDIR/loadlab-v8-PID.cpuprofile`, written whole and then renamed. Each cluster worker is
 * its own process and is signalled by its own PID.
 */
function profileOnSignal() {
  const inspector = require('node:inspector');
  let session = null;
  process.on('SIGUSR2', () => {
    if (session === null) {
      session = new inspector.Session();
      session.connect();
      session.post('Profiler.enable', () => {
        // One sample per millisecond: V8's default, and what seed 004's --prof took.
        session.post('Profiler.setSamplingInterval', { interval: 1000 }, () => session.post('Profiler.start'));
      });
      return;
    }
    const ending = session;
    session = null;
    ending.post('Profiler.stop', (err, result) => {
      ending.disconnect();
      if (err) return process.stderr.write(`loadlab node target: the CPU profile failed: ${err.message}\n`);
      const file = path.join(os.tmpdir(), `loadlab-v8-${process.pid}.cpuprofile`);
      fs.writeFileSync(`${file}.part`, JSON.stringify(result.profile));
      fs.renameSync(`${file}.part`, file);
    });
  });
}
if (process.env.LOADLAB_V8_PROFILE === '1') profileOnSignal();

const config = parseArgs(process.argv.slice(2));
if (cluster.isPrimary && config.workers > 1) {
  primary(config);
} else {
  if (cluster.isPrimary) {
    process.on('SIGTERM', () => process.exit(0));
    process.on('SIGINT', () => process.exit(0));
  }
  serve(config);
}
