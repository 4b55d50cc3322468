'use strict';
// The Node reference service over gRPC: loadlab.reference.v1.Reference on @grpc/grpc-js, with
// @grpc/reflection's server reflection (grpc.reflection.v1 and v1alpha).
//
// Each method does the work of the HTTP endpoint it is named after (docs/service.md), with the
// costs one Node event loop pays: Delay waits without holding it, Block and Heavy hold it (a
// blocking sleep, CPU), Calc spends CPU on it. The .proto file is loaded at start, so nothing
// generated is kept in the repository.
//
//     node grpc_server.js --proto PATH/TO/reference.proto --port 50051

const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const { ReflectionService } = require('@grpc/reflection');

const SERVICE = 'loadlab.reference.v1.Reference';
const MAX_WAIT_MS = 600000;
const MAX_CALC_N = 2000000000;

function parseArgs(argv) {
  const config = { proto: null, host: '127.0.0.1', port: 50051 };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (flag === '--proto') config.proto = value;
    else if (flag === '--host') config.host = value;
    else if (flag === '--port') config.port = Number(value);
    else {
      process.stderr.write(`error: unknown flag ${flag}; use --proto FILE [--host H] [--port P]\n`);
      process.exit(2);
    }
  }
  if (!config.proto) {
    process.stderr.write('error: --proto FILE is required (the reference service\'s .proto file)\n');
    process.exit(2);
  }
  return config;
}

const { blockingSleep, busyWait } = require('./work');

/** An INVALID_ARGUMENT error for `callback`. */
function invalid(message) {
  return { code: grpc.status.INVALID_ARGUMENT, details: message };
}

/** The wait `ms` asks for, or an error past the limit. */
function waitOf(ms) {
  return ms > MAX_WAIT_MS ? [null, invalid(`ms must be at most ${MAX_WAIT_MS}`)] : [ms, null];
}

function methods(started) {
  return {
    Ping: (call, callback) => callback(null, { message: 'pong' }),
    Delay: (call, callback) => {
      const [ms, error] = waitOf(call.request.ms);
      if (error) return callback(error);
      setTimeout(() => callback(null, { ms }), ms);
    },
    Block: (call, callback) => {
      const [ms, error] = waitOf(call.request.ms);
      if (error) return callback(error);
      blockingSleep(ms);
      callback(null, { ms });
    },
    Heavy: (call, callback) => {
      const [ms, error] = waitOf(call.request.ms);
      if (error) return callback(error);
      busyWait(ms);
      callback(null, { ms });
    },
    Calc: (call, callback) => {
      const n = Number(call.request.n);
      const from = Number(call.request.from);
      if (n > MAX_CALC_N || from > MAX_CALC_N) {
        return callback(invalid(`n and from must be at most ${MAX_CALC_N}`));
      }
      let sum = 0;
      for (let i = from; i < from + n; i++) sum += Math.sin(i);
      callback(null, { sum });
    },
    Stall: (call, callback) => {
      const every = call.request.every_ms || 2000;
      const freeze = call.request.for_ms || 1000;
      if (freeze > every) return callback(invalid('for_ms must not exceed every_ms'));
      const phase = Math.floor(performance.now() - started) % every;
      const wait = phase >= every - freeze ? every - phase : 0;
      setTimeout(() => callback(null, { ms: 0 }), wait);
    },
    Ticks: (call) => {
      const count = call.request.count;
      let index = 0;
      const next = () => {
        if (index >= count) return call.end();
        call.write({ index });
        index += 1;
        setTimeout(next, index < count ? call.request.interval_ms : 0);
      };
      next();
    },
  };
}

function main() {
  const config = parseArgs(process.argv.slice(2));
  // Field names as the .proto spells them (every_ms, interval_ms), 64-bit integers as numbers.
  const definition = protoLoader.loadSync(config.proto, { keepCase: true, longs: Number, defaults: true });
  const proto = grpc.loadPackageDefinition(definition);
  const server = new grpc.Server();
  server.addService(proto.loadlab.reference.v1.Reference.service, methods(performance.now()));
  new ReflectionService(definition, { services: [SERVICE] }).addToServer(server);
  server.bindAsync(`${config.host}:${config.port}`, grpc.ServerCredentials.createInsecure(), (err, port) => {
    if (err) {
      process.stderr.write(`error: cannot listen on ${config.host}:${config.port}: ${err.message}\n`);
      process.exit(1);
    }
    process.stdout.write(`listening on ${config.host}:${port}\n`);
  });
  const stop = () => server.tryShutdown(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main();
