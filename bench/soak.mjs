// soak.mjs - a soak run of a live rlxd (make soak): CONC concurrent client loops for SECONDS,
// each request a random mix of route (chat, completions, generate) and streaming or not, and
// about 1 in 8 requests abandoned by the client after a random delay (a disconnect). Reports
// errors (any answer but a complete 200 to a request not abandoned; must be 0), the daemon's
// RSS idle, under load after the first minute, and at the end (within 5%), p50/p99 latency per minute, and /metrics once the load stops
// (requests running/waiting and KV cache usage must be back to 0).
// Usage: node bench/soak.mjs URL PID [SECONDS] [CONC]
import fs from "node:fs";
import http from "node:http";

const [url, pidS, secS, concS] = process.argv.slice(2);
const pid = Number(pidS), SECONDS = Number(secS || 600), CONC = Number(concS || 256);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const rss = () => Number((fs.readFileSync(`/proc/${pid}/status`, "utf8").match(/VmRSS:\s+(\d+)/) || [0, 0])[1]);
const agent = new http.Agent({ keepAlive: true, maxSockets: CONC + 8 });

function req(method, path, body, abortAfterMs) {
  return new Promise((resolve) => {
    const t0 = performance.now();
    // a Content-Length, as every OpenAI client sends: without it Node streams the body chunked,
    // which rlxd refuses (411) under libmicrohttpd 0.9 (README)
    const headers = { "Content-Type": "application/json" };
    if (body) headers["Content-Length"] = Buffer.byteLength(body);
    const r = http.request(url + path, { method, agent, headers }, (res) => {
      let b = "";
      res.setEncoding("utf8");
      res.on("data", (d) => (b += d));
      res.on("end", () => resolve({ status: res.statusCode, body: b, complete: res.complete, ms: performance.now() - t0 }));
      res.on("error", () => resolve({ status: res.statusCode, body: b, complete: false, ms: performance.now() - t0 }));
    });
    r.setTimeout(120000, () => r.destroy(new Error("time-out")));
    r.on("error", (e) => resolve({ status: 0, err: e.message, ms: performance.now() - t0 }));
    if (abortAfterMs !== undefined) setTimeout(() => r.destroy(new Error("abandoned")), abortAfterMs);
    if (body) r.write(body);
    r.end();
  });
}

const routes = [
  ["/v1/chat/completions", (s) => ({ messages: [{ role: "user", content: "Tell me a story about a cat" }], max_tokens: 24 + (Math.random() * 40 | 0), stream: s })],
  ["/v1/completions", (s) => ({ prompt: "Once upon a time", max_tokens: 24 + (Math.random() * 40 | 0), stream: s, n: 1 + (Math.random() * 2 | 0) })],
  ["/v1/generate", (s) => ({ prompt: "The little dog", max_tokens: 24 + (Math.random() * 40 | 0), stream: s })],
];

const t0 = Date.now();
const perMin = [];
let errors = 0, ok = 0, abandoned = 0, firstErr = "";
function valid(r, stream, path) {
  if (r.status !== 200 || !r.complete) return false;
  if (!stream) { try { JSON.parse(r.body); return true; } catch { return false; } }
  if (path === "/v1/generate") return r.body.trim().split("\n").every((l) => { try { JSON.parse(l); return true; } catch { return false; } });
  return r.body.endsWith("data: [DONE]\n\n") && !r.body.includes('"error"');
}
async function client() {
  while (Date.now() - t0 < SECONDS * 1000) {
    const [path, mk] = routes[Math.random() * routes.length | 0];
    const stream = Math.random() < 0.5;
    const abandon = Math.random() < 0.125 ? Math.random() * 300 : undefined;
    const r = await req("POST", path, JSON.stringify(mk(stream)), abandon);
    if (abandon !== undefined && r.err === "abandoned") { abandoned++; continue; }
    if (valid(r, stream, path)) {
      ok++;
      const m = Math.floor((Date.now() - t0) / 60000);
      (perMin[m] ||= []).push(r.ms);
    } else {
      errors++;
      if (!firstErr) firstErr = `${path} stream=${stream}: ${r.status} ${r.err || ""} ${String(r.body || "").slice(0, 200)}`;
    }
  }
}

// warm-up, then the start RSS
for (let i = 0; i < 20; i++) await req("POST", "/v1/completions", JSON.stringify({ prompt: "Hi", max_tokens: 8 }));
const rssIdle = rss();
// the start RSS is taken under full load, after the first minute (a tenth of a shorter run):
// connection buffers and malloc arenas for CONC clients are there by then
let rss0 = 0;
setTimeout(() => (rss0 = rss()), Math.min(60, SECONDS / 10) * 1000);
await Promise.all(Array.from({ length: CONC }, client));
await sleep(2000);
const rss1 = rss();
const metrics = (await req("GET", "/metrics")).body;
const metric = (name) => { const m = metrics.match(new RegExp(`^${name}(\\{[^}]*\\})? ([0-9.e+-]+)$`, "m")); return m ? Number(m[2]) : NaN; };
const pct = (a, p) => { const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };
console.log(`soak: ${SECONDS} s, ${CONC} concurrent clients: ${ok} ok, ${abandoned} abandoned by the client, ${errors} errors${firstErr ? " (first: " + firstErr + ")" : ""}`);
console.log(`RSS: ${(rssIdle / 1024).toFixed(1)} MiB idle, ${(rss0 / 1024).toFixed(1)} MiB at start (under load), ${(rss1 / 1024).toFixed(1)} MiB at end (${(100 * (rss1 - rss0) / rss0).toFixed(1)}%)`);
console.log(`after the load: rlxd_num_requests_running ${metric("rlxd_num_requests_running")}, rlxd_num_requests_waiting ${metric("rlxd_num_requests_waiting")}, rlxd_kv_cache_usage_ratio ${metric("rlxd_kv_cache_usage_ratio")}`);
console.log("minute  requests  p50 ms  p99 ms");
perMin.forEach((a, m) => console.log(`${String(m).padStart(6)}  ${String(a.length).padStart(8)}  ${pct(a, 0.5).toFixed(0).padStart(6)}  ${pct(a, 0.99).toFixed(0).padStart(6)}`));
const bad = errors > 0 || Math.abs(rss1 - rss0) / rss0 > 0.05 || metric("rlxd_num_requests_running") !== 0 ||
  metric("rlxd_num_requests_waiting") !== 0 || metric("rlxd_kv_cache_usage_ratio") !== 0;
process.exit(bad ? 1 : 0);
