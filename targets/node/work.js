'use strict';
// The work the Node reference service's endpoints and gRPC methods do that holds the event
// loop: a blocking sleep and a CPU spin, shared by server.js and grpc_server.js.

const sleeper = new Int32Array(new SharedArrayBuffer(4));

/** A blocking sleep: the event loop does nothing else for `ms`. */
function blockingSleep(ms) {
  if (ms > 0) Atomics.wait(sleeper, 0, 0, ms);
}

// Spins until the process has used `ms` of CPU (one event loop: its thread's), so a request
// costs the same CPU however many processes share the core; on a core of its own, `ms` of
// wall time too.
/** Spins on the CPU for `ms`, holding the event loop; returns the spins it took. */
function busyWait(ms) {
  const cpuUs = () => {
    const u = process.cpuUsage();
    return u.user + u.system;
  };
  const end = cpuUs() + ms * 1000;
  let spins = 0;
  while (cpuUs() < end) spins++;
  return spins;
}

module.exports = { blockingSleep, busyWait };
