// daemon_lib.mjs - for the node integration tests: starts `rlxd serve ARGS` on 127.0.0.1 with a
// port of the kernel's choosing, feeds its stderr to onLog, and waits (30 s at most each) for the
// "listening on" line and for /health to answer 200. Returns { child, base } with base
// 'http://127.0.0.1:PORT', or base undefined when no port appeared (the caller fails the test
// and kills child).
import { spawn } from 'node:child_process';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function startDaemon(bin, args, onLog) {
  let log = '';
  const child = spawn(bin, ['serve', ...args, '--host', '127.0.0.1', '--port', '0'], { stdio: ['ignore', 'ignore', 'pipe'] });
  child.stderr.on('data', (d) => { log += d; onLog(d); });
  let port;
  for (let i = 0; i < 300 && !port; i++) {
    const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(log);
    if (m) port = m[1];
    else await sleep(100);
  }
  if (!port) return { child, base: undefined };
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 300; i++) {
    if (await fetch(base + '/health').then((r) => r.ok, () => false)) break;
    await sleep(100);
  }
  return { child, base };
}
