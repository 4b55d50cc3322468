// loadlab's host for an Artillery processor: one Node.js process per generator thread loads
// the user's module and calls its functions for the thread's virtual users.
//
// Protocol: one JSON object per line. loadlab writes calls on stdin; the host answers each on
// stdout, in any order, by id. The processor's own console output goes to stderr, so nothing
// it prints can break a line of the protocol.
//
//   ready     {"ready":true,"functions":[...]}  or  {"ready":false,"error":"..."}
//   call      {"id":N,"u":USER,"op":"fn"|"before"|"after"|"error"|"if"|"while"|"browser","names":[...],
//              "vars":{...},"scenario":"...","req":{...},"res":{...},"error":"..."}
//   end       {"u":USER,"op":"end"}          (the user's session is over; no answer)
//   answer    {"id":N,"vars":{changed},"req":{...}?,"m":[[kind,name,value],...],
//              "ok":true|false (if, while)?,"err":"..."?,"counted":"..."?,
//              "thrown":"sync"|"deferred"?,"deferred":true?,"warn":"..."?,"exit":N?}
//
// A user's context lives here for its whole session, so objects a hook keeps in
// `context.vars` stay objects for the next hook; loadlab gets their text (objects as JSON, and
// one key per property, `user.id`) for its templates.
//
// The third argument is JSON: the script's folder (`$dirname`), `loadAll` payloads by name
// (whole lists in `context.vars`), and `config.engines.playwright` for browser flows: one
// Chromium per host, launched on the first flow, a new browser context for each flow.
'use strict';

const path = require('path');
const { pathToFileURL } = require('url');
const crypto = require('crypto');
const fs = require('fs');

const processorPath = process.argv[1];
const target = process.argv[2] || '';
const settings = JSON.parse(process.argv[3] || '{}');
const writeOut = process.stdout.write.bind(process.stdout);
// What the processor prints goes to stderr: stdout carries the protocol.
process.stdout.write = (...args) => process.stderr.write(...args);

// Artillery's global object as a processor sets it: `artillery.suggestedExitCode = N` is the
// exit code the run ends with; the host passes it to loadlab with its next answer.
let suggestedExitCode;
let exitSuggested = false;
global.artillery = global.artillery || {};
Object.defineProperty(global.artillery, 'suggestedExitCode', {
  get() {
    return suggestedExitCode;
  },
  set(code) {
    suggestedExitCode = code;
    exitSuggested = true;
  },
});

// Keys the host sets that loadlab's templates never read back.
const HOST_KEYS = new Set(['$processEnvironment', '$env', '$environment', '$dirname']);

// A TypeScript processor, bundled as Artillery bundles it (its own imports in, packages left to
// require) by esbuild from the processor's node_modules, then compiled as a CommonJS module.
function loadTypeScript(abs) {
  const dir = path.dirname(abs);
  let esbuild;
  try {
    esbuild = require(require.resolve('esbuild', { paths: [dir, process.cwd()] }));
  } catch (_) {
    throw new Error(
      `${abs} is TypeScript, which loadlab compiles with esbuild; run \`npm install esbuild\` in ${dir}`
    );
  }
  const built = esbuild.buildSync({
    entryPoints: [abs],
    bundle: true,
    packages: 'external',
    platform: 'node',
    format: 'cjs',
    write: false,
    logLevel: 'silent',
  });
  const Module = require('module');
  const m = new Module(abs, module);
  m.filename = abs;
  m.paths = Module._nodeModulePaths(dir);
  m._compile(built.outputFiles[0].text, abs);
  return m.exports;
}

async function load(file) {
  const abs = path.resolve(file);
  if (/\.[cm]?ts$/.test(abs)) return loadTypeScript(abs);
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

// An error in one line: its name, the first line of its message (terminal colours removed:
// Playwright's assertions colour theirs) and where it was thrown.
function describe(err) {
  if (err instanceof Error) {
    const message = String(err.message).replace(/\u001b\[[0-9;]*m/g, '').split('\n')[0];
    const at = (err.stack || '').split('\n').find((l) => l.trim().startsWith('at '));
    return at ? `${err.name}: ${message} (${at.trim()})` : `${err.name}: ${message}`;
  }
  return String(err);
}

// Browser flows (Artillery's `engine: playwright`).

// Measures a page's Web Vitals in the page itself and reports them through the binding
// `__loadlabVital(name, ms, url, page)`: TTFB and FCP once; LCP at each new candidate until
// the first click or key, and CLS (the largest burst of layout shifts less than 1 s apart and
// within 5 s) at each change. The host keeps the last LCP and CLS of each page it loaded and
// counts them when the flow ends, so a page left by navigation still counts. INP needs real
// input and is not measured.
const VITALS = `(() => {
  if (window.top !== window) return;
  const id = Math.random().toString(36).slice(2);
  const report = (name, value) => {
    try { window.__loadlabVital(name, value, location.href, id); } catch (_) {}
  };
  const observe = (type, cb) => {
    try { new PerformanceObserver((l) => cb(l.getEntries())).observe({ type, buffered: true }); } catch (_) {}
  };
  observe('paint', (es) => { for (const e of es) if (e.name === 'first-contentful-paint') report('FCP', e.startTime); });
  let input = false;
  for (const t of ['click', 'keydown']) addEventListener(t, () => { input = true; }, { capture: true, once: true });
  observe('largest-contentful-paint', (es) => { if (!input) for (const e of es) report('LCP', e.startTime); });
  let cls = 0, burst = 0, first = 0, last = 0;
  observe('layout-shift', (es) => {
    for (const e of es) {
      if (e.hadRecentInput) continue;
      if (burst > 0 && e.startTime - last < 1000 && e.startTime - first < 5000) burst += e.value;
      else { burst = e.value; first = e.startTime; }
      last = e.startTime;
      if (burst > cls) { cls = burst; report('CLS', cls); }
    }
  });
  addEventListener('load', () => {
    const n = performance.getEntriesByType('navigation')[0];
    if (n && n.responseStart > 0) report('TTFB', n.responseStart);
    report('CLS', cls);
  }, { once: true });
})();`;

const browserSettings = settings.browser || {};
let browserLaunch = null;

// The Playwright module beside the processor (its own node_modules, or a folder above).
function playwright() {
  const from = [path.dirname(path.resolve(processorPath)), process.cwd()];
  for (const name of ['playwright', 'playwright-core', '@playwright/test']) {
    let resolved;
    try {
      resolved = require.resolve(name, { paths: from });
    } catch (_) {
      continue;
    }
    const mod = require(resolved);
    if (mod && mod.chromium) return mod;
  }
  throw new Error(
    `engine: playwright needs Playwright for Node.js beside the processor; run \`npm install playwright-core\` in ${from[0]}`
  );
}

// Chromium: the one the settings name, LOADLAB_CHROMIUM, Playwright's own download, or the
// system's.
function executable(chromium, launch) {
  if (launch.executablePath || launch.channel) return undefined;
  if (process.env.LOADLAB_CHROMIUM) return process.env.LOADLAB_CHROMIUM;
  try {
    if (fs.existsSync(chromium.executablePath())) return undefined;
  } catch (_) {}
  const system = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome', '/usr/bin/google-chrome-stable'];
  const found = system.find((p) => fs.existsSync(p));
  if (found) return found;
  throw new Error(
    'engine: playwright found no Chromium; run `npx playwright install chromium`, install your system\'s chromium, or set LOADLAB_CHROMIUM to its path'
  );
}

// `{{ $dirname }}`, `{{ target }}` and `{{ $env.NAME }}` in the engine's settings, as Artillery
// renders its config.
function rendered(value) {
  if (typeof value === 'string') {
    return value.replace(/{{\s*([^}\s]+)\s*}}/g, (whole, name) => {
      if (name === '$dirname') return settings.dir || '';
      if (name === 'target') return target;
      const env = /^\$(?:env|processEnvironment)\.(.+)$/.exec(name);
      if (env) return process.env[env[1]] || '';
      return whole;
    });
  }
  if (Array.isArray(value)) return value.map(rendered);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, rendered(v)]));
  }
  return value;
}

function browser() {
  if (!browserLaunch) {
    browserLaunch = (async () => {
      const pw = playwright();
      const launch = Object.assign(
        { headless: true, args: ['--disable-dev-shm-usage', '--enable-precise-memory-info'] },
        rendered(browserSettings.launchOptions || {})
      );
      if (launch.headless === false && !process.env.DISPLAY && !process.env.WAYLAND_DISPLAY) {
        process.stderr.write('warning: engine: playwright: launchOptions.headless is false but there is no display; the browser runs headless\n');
        launch.headless = true;
      }
      const path = executable(pw.chromium, launch);
      if (path) launch.executablePath = path;
      if (browserSettings.testIdAttribute) pw.selectors.setTestIdAttribute(browserSettings.testIdAttribute);
      return pw.chromium.launch(launch);
    })();
  }
  return browserLaunch;
}

async function closeBrowser() {
  if (!browserLaunch) return;
  try {
    await (await browserLaunch).close();
  } catch (_) {}
}

function seconds(v, fallback) {
  const n = Number(v);
  return Number.isNaN(n) || v === undefined || v === null ? fallback : n;
}

// The name page metrics are kept under: the scenario's with aggregateByName, else the URL
// (without its query with stripQueryString; its values as NUMBER or STRING with
// normalizeQueryString).
function pageName(url, scenario) {
  if (browserSettings.aggregateByName && scenario) return scenario;
  try {
    const u = new URL(url);
    if (browserSettings.stripQueryString) return u.origin + u.pathname;
    if (browserSettings.normalizeQueryString && u.search) {
      const q = [...new URLSearchParams(u.search)]
        .map(([k, v]) => [k, /^-?\d+(\.\d+)?$/.test(v) ? 'NUMBER' : 'STRING'])
        .sort((a, b) => a[0].localeCompare(b[0]));
      return u.origin + u.pathname + '?' + new URLSearchParams(q).toString();
    }
  } catch (_) {}
  return url;
}

// Runs flow function `fn` on a page of a new browser context; the context is closed however
// the flow ends. Metrics go out through `ee` under the names Artillery's engine uses.
async function browse(fn, c, ee, scenario) {
  const b = await browser();
  const contextOptions = Object.assign(
    target ? { baseURL: target } : {},
    rendered(browserSettings.contextOptions || {})
  );
  const context = await b.newContext(contextOptions);
  const vital = (metric, value) => ee.emit('histogram', metric, Math.round(value * 1000) / 1000);
  // Each page's last LCP and CLS, counted when the flow ends.
  const latest = new Map();
  try {
    context.setDefaultNavigationTimeout(seconds(browserSettings.defaultNavigationTimeout, 30) * 1000);
    context.setDefaultTimeout(seconds(browserSettings.defaultTimeout, 30) * 1000);
    const all = browserSettings.showAllPageMetrics !== undefined;
    await context.exposeBinding('__loadlabVital', (_source, name, value, url, page) => {
      if (!(all || url.startsWith(target)) || !(value >= 0)) return;
      const metric = `browser.page.${name}.${pageName(url, scenario)}`;
      if (name === 'LCP' || name === 'CLS') latest.set(`${page} ${name}`, [metric, value]);
      else vital(metric, value);
    });
    await context.addInitScript(VITALS);
    const page = await context.newPage();
    page.on('response', (r) => ee.emit('counter', `browser.page.codes.${r.status()}`, 1));
    page.on('requestfinished', () => ee.emit('counter', 'browser.http_requests', 1));
    if (browserSettings.extendedMetrics !== undefined) {
      page.on('domcontentloaded', async (p) => {
        try {
          const t = await p.evaluate(() => {
            const n = performance.getEntriesByType('navigation')[0];
            return n ? n.domInteractive : -1;
          });
          if (t < 0) return;
          const name = pageName(p.url(), scenario);
          ee.emit('counter', 'browser.page.domcontentloaded', 1);
          ee.emit('counter', `browser.page.domcontentloaded.${name}`, 1);
          ee.emit('histogram', 'browser.page.dominteractive', t);
          ee.emit('histogram', `browser.page.dominteractive.${name}`, t);
        } catch (_) {}
      });
      page.on('load', async (p) => {
        try {
          const used = await p.evaluate(() => (performance.memory ? performance.memory.usedJSHeapSize : -1));
          if (used >= 0) ee.emit('histogram', 'browser.memory_used_mb', used / 1e6);
        } catch (_) {}
      });
    }
    const test = {
      async step(name, body) {
        const started = performance.now();
        const out = await body();
        ee.emit('histogram', `browser.step.${name}`, Math.round((performance.now() - started) * 10) / 10);
        return out;
      },
    };
    await fn(page, c, ee, test);
  } finally {
    await context.close().catch(() => {});
    for (const [metric, value] of latest.values()) vital(metric, value);
  }
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
          $dirname: settings.dir,
        },
        scenario: { name: scenario },
        _uid: crypto.randomUUID(),
        // What loadlab last knew of each variable, as text.
        known: {},
      };
      for (const [name, rows] of Object.entries(settings.lists || {})) {
        c.vars[name] = structuredClone(rows);
      }
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

  // Calls `fn` as Artillery does: a plain function with a callback, an async one for its
  // promise. What Artillery's engine cannot catch is told apart: a plain function that throws
  // (rather than passing its error to the callback) is marked `thrown`, and one that calls
  // back after it returned is marked `deferred` in `how` (after it, Artillery's next steps run
  // from a timer or an I/O event, where such a throw kills its worker).
  function call(fn, args, how) {
    return new Promise((resolve, reject) => {
      if (fn.constructor.name === 'Function') {
        let returned = false;
        try {
          fn(...args, (err) => {
            if (returned) how.deferred = true;
            return err ? reject(err) : resolve();
          });
        } catch (e) {
          how.thrown = true;
          reject(e);
        }
        returned = true;
      } else {
        how.deferred = true;
        Promise.resolve(fn(...args)).then(() => resolve(), reject);
      }
    });
  }

  // The error's name as Artillery counts it (`errors.NAME`): its code, else its message.
  function counted(e) {
    if (e && typeof e === 'object' && (e.code || e.message)) return String(e.code || e.message);
    return String(e);
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
    const how = { thrown: false, deferred: false };
    let deferredBefore = false;
    try {
      for (const name of msg.names) {
        const fn = fns[name];
        if (typeof fn !== 'function') {
          reply.warn = `custom function ${name} could not be found`;
          continue;
        }
        deferredBefore = how.deferred;
        if (msg.op === 'fn') await call(fn, [c, ee], how);
        else if (msg.op === 'before') await call(fn, [req, c, ee], how);
        else if (msg.op === 'after') await call(fn, [req, res, c, ee], how);
        else if (msg.op === 'error') await call(fn, [new Error(msg.error), req, c, ee], how);
        else if (msg.op === 'browser') await browse(fn, c, ee, msg.scenario);
        else if (msg.op === 'if') reply.ok = Boolean(await fn(c.vars));
        else reply.ok = await answer(fn, c);
      }
    } catch (e) {
      reply.err = `${msg.names.join(', ')}: ${describe(e)}`;
      reply.counted = counted(e);
      if (how.thrown) reply.thrown = deferredBefore ? 'deferred' : 'sync';
    }
    if (how.deferred) reply.deferred = true;
    reply.vars = changes(c);
    if (msg.op === 'before' && JSON.stringify(req) !== before) reply.req = req;
    if (metrics.length) reply.m = metrics;
    if (exitSuggested && Number.isInteger(Number(suggestedExitCode))) {
      reply.exit = Number(suggestedExitCode);
      exitSuggested = false;
    }
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
    closeBrowser().finally(() => writeOut('', () => process.exit(0)));
  });
  const names = Object.keys(fns).filter((k) => typeof fns[k] === 'function');
  // Flows that drive a browser: Playwright and Chromium are found now, so a machine without
  // them stops the run before the load with what to install, not each user with it.
  if (settings.browser) {
    try {
      executable(playwright().chromium, rendered(browserSettings.launchOptions || {}));
    } catch (e) {
      writeOut(JSON.stringify({ ready: false, error: e.message }) + '\n');
      process.exit(1);
    }
  }
  writeOut(JSON.stringify({ ready: true, functions: names }) + '\n');
}

// A package the module requires and nobody installed: its name, so loadlab can say what to
// install.
function missingPackage(e) {
  if (!e || e.code !== 'MODULE_NOT_FOUND') return undefined;
  const m = /Cannot find (?:module|package) '([^']+)'/.exec(String(e.message));
  if (!m || m[1].startsWith('.') || path.isAbsolute(m[1])) return undefined;
  const parts = m[1].split('/');
  return m[1].startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

load(processorPath).then(main, (e) => {
  writeOut(JSON.stringify({ ready: false, error: describe(e), missing: missingPackage(e) }) + '\n');
  process.exit(1);
});
