// server_walk.mjs - walks an allocation failure over every allocation the daemon makes for one
// request (tests/fault/fault.h: librlx_fault.so preloaded, armed by SIGUSR2 + a command file).
// For each N: arm the N-th allocation to fail, send the request, disarm, then check that the
// daemon is alive, answered within the time limit (no hang), answered either correctly (the
// same bytes as an unarmed run: nothing silently dropped) or with an error the client can see
// (an HTTP error with an OpenAI-shaped JSON body, an in-band error event, or a connection
// closed before a clean end), and holds no more allocations than before (no leak).
// Usage: node server_walk.mjs URL PID CTL OUT CASE [MAX_N]
import fs from "node:fs";
import http from "node:http";

const [url, pidS, ctl, out, which, maxS] = process.argv.slice(2);
const pid = Number(pidS);
const MAX_N = Number(maxS || process.env.FAULT_MAX_N || 100000);
const die = (m) => { console.error("FAIL: " + m); process.exit(1); };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let seq = 0;
// Sends one command to the interposer and waits (at most 5 s) for its answer.
async function ctlCmd(cmd) {
  seq++;
  fs.writeFileSync(ctl, `${seq} ${cmd}\n`);
  process.kill(pid, "SIGUSR2");
  for (let i = 0; i < 500; i++) {
    let s = "";
    try { s = fs.readFileSync(out, "utf8"); } catch { /* not yet written */ }
    const m = s.match(/^(\d+) calls=(\d+) fired=(\d) live=(-?\d+)/);
    if (m && Number(m[1]) === seq) return { calls: +m[2], fired: m[3] === "1", live: +m[4] };
    await sleep(10);
  }
  die(`the interposer did not answer '${cmd}' (daemon ${alive() ? "alive" : "gone"})`);
}

function alive() { try { process.kill(pid, 0); return true; } catch { return false; } }

// One request; resolves {status, body, complete} where complete is false when the connection
// ended before a clean end of the response; rejects on the 15 s time-out (a hang).
function request(method, path, body) {
  return new Promise((resolve, reject) => {
    // a Content-Length: without one node sends the body chunked, which this server refuses with
    // libmicrohttpd 0.9 (README, "HTTP errors libmicrohttpd answers itself")
    const headers = { "Content-Type": "application/json" };
    if (body) headers["Content-Length"] = Buffer.byteLength(body);
    const req = http.request(url + path, { method, headers, agent: false },
      (res) => {
        let b = "";
        res.setEncoding("utf8");
        res.on("data", (d) => (b += d));
        res.on("end", () => resolve({ status: res.statusCode, body: b, complete: res.complete }));
        res.on("error", () => resolve({ status: res.statusCode, body: b, complete: false }));
        res.on("aborted", () => {});
      });
    req.setTimeout(15000, () => { req.destroy(); reject(new Error("time-out")); });
    req.on("error", (e) => (e.message === "time-out" ? reject(e) : resolve({ status: 0, body: "", complete: false, err: e.code })));
    if (body) req.write(body);
    req.end();
  });
}

const cases = {
  chat_stream: {
    path: "/v1/chat/completions",
    body: (n) => ({ messages: [{ role: "user", content: "Tell me a story" }], max_tokens: 8, temperature: 0, stream: true,
                    stream_options: { include_usage: true } }),
    stream: true,
  },
  completions: {
    path: "/v1/completions",
    body: (n) => ({ prompt: ["Once upon a time", "The dog"], n: 2, max_tokens: 6, temperature: 0, logprobs: 2, echo: true }),
    // Under heavy machine load an N now and then (56, 840, 861 seen; not reproduced on a
    // re-run of the same N) left 2 blocks live, and once 18: the session writer's first limits
    // pass (--db), 60 s after the start, filling sqlite's caches in the middle of this walk
    // (the writer now makes that pass at start). A bounded slack keeps the walk from flaking
    // while a leak at every failure still fails it.
    slack: 16,
  },
  generate_session: {
    path: "/v1/generate",
    body: (n) => ({ prompt: "Once upon a time", max_tokens: 6, temperature: 0, stream: true, session_id: `walk-${n}` }),
    stream: true, session: true,
    // sqlite keeps caches in the open database, and after an error at some N it holds a
    // couple of blocks more (test_fault_alloc's session_turn shows they are all freed at
    // close): growth up to this bound is allowed, a leak per failure would pass it
    slack: 16,
  },
};
const C = cases[which] || die("unknown case " + which);

// The response with the parts that differ between runs (ids, timings, created) blanked.
function normalize(body) {
  const strip = (o) => {
    if (Array.isArray(o)) return o.map(strip);
    if (o && typeof o === "object") {
      const r = {};
      for (const [k, v] of Object.entries(o))
        if (!["id", "created", "timings", "system_fingerprint"].includes(k) && !/_ms$|_s$|per_second/.test(k)) r[k] = strip(v);
      return r;
    }
    return o;
  };
  const lines = body.split("\n").filter((l) => l.length);
  return lines.map((l) => {
    const p = l.startsWith("data: ") ? l.slice(6) : l;
    if (p === "[DONE]") return p;
    return JSON.stringify(strip(JSON.parse(p)));
  }).join("\n");
}

function isErrorJson(s) {
  try { const o = JSON.parse(s); return o.error && typeof o.error.message === "string" && typeof o.error.type === "string"; }
  catch { return false; }
}

const once = (n) => request("POST", C.path, JSON.stringify(C.body(n)));
// unarmed: a session of the walk is forgotten, so the daemon holds what it held before
const forget = async (n) => { if (C.session) await request("DELETE", `/v1/sessions/walk-${n}`); };

// Reference answer and the daemon's allocation balance after warm-up runs.
await ctlCmd("disarm");
let ref;
for (let i = 0; i < 3; i++) { ref = await once(0); await forget(0); }
if (ref.status !== 200 || !ref.complete) die(`reference run: ${ref.status} ${ref.body.slice(0, 200)}`);
const refNorm = normalize(ref.body);
// libmicrohttpd frees a closed connection at its next run: a request before each reading
// makes the readings comparable (one such connection pending in each)
const settle = async () => { await request("GET", "/health"); await sleep(10); return (await ctlCmd("report")).live; };
await sleep(100);
await settle();
let base = await settle();

const tally = { ok: 0, http_error: 0, inband_error: 0, cut: 0 };
let maxGrowth = 0;
let n;
const FROM = Number(process.env.FAULT_FROM || 1); // to look at one N (with FAULT_MAX_N)
for (n = FROM; n <= MAX_N; n++) {
  await ctlCmd(`arm ${n}`);
  let r;
  try { r = await once(n); } catch (e) { die(`N=${n}: no answer within 15 s (${e.message})`); }
  const st = await ctlCmd("disarm");
  if (!alive()) die(`N=${n}: the daemon died`);
  await forget(n);
  let kind;
  if (!r.complete || r.status === 0) kind = "cut";
  else if (r.status !== 200) {
    // a 5xx without a body: the copy of the body itself failed (http.c) - still an error
    if (!(r.status >= 500 && r.body === "") && !isErrorJson(r.body)) die(`N=${n}: HTTP ${r.status} without an error JSON body: ${r.body.slice(0, 200)}`);
    kind = "http_error";
  } else if (/"error"\s*:/.test(r.body) && (C.stream ? true : isErrorJson(r.body))) {
    // an in-band error must be the last event before [DONE] (SSE) or the last line (ndjson)
    const lines = r.body.split("\n").filter((l) => l.length && l !== "data: [DONE]");
    if (!/"error"/.test(lines[lines.length - 1])) die(`N=${n}: an error event that is not the last: ${r.body.slice(-300)}`);
    kind = "inband_error";
  } else {
    let norm;
    try { norm = normalize(r.body); } catch { die(`N=${n}: 200 with a malformed body: ${r.body.slice(0, 300)}`); }
    if (norm !== refNorm) die(`N=${n}: 200 but the answer differs from the unarmed one:\n${norm}\n--- expected:\n${refNorm}`);
    kind = "ok";
  }
  tally[kind]++;
  // the balance settles once the connection is torn down (a few loop iterations)
  let live = 0;
  for (let i = 0; i < 100; i++) {
    live = await settle();
    if (live <= base + (C.slack || 0)) break;
    await sleep(20);
  }
  maxGrowth = Math.max(maxGrowth, live - base);
  if (live > base + (C.slack || 0)) {
    // The worker frees some things at its next step, and a wake-up that reaches it while it
    // is busy is lost until its idle timeout (see bench/RESULTS.md section 8): make it step
    // with one small unarmed request, then look again.
    await request("POST", "/v1/completions", JSON.stringify({ prompt: "a", max_tokens: 1 }));
    // that request's own connection and job are torn down in the following loop iterations too
    // (slow on a loaded host): poll, as above
    let later = 0;
    for (let i = 0; i < 50; i++) {
      await sleep(100);
      later = await settle();
      if (later <= base + (C.slack || 0)) break;
    }
    if (later > base + (C.slack || 0))
      die(`N=${n} (${kind}): ${live - base} allocations still live after the request (${later - base} after one more step)`);
    console.log(`N=${n}: ${live - base} allocations were freed only at the worker's next step`);
  }
  if (!st.fired) break;
}
if (n > MAX_N) die(`more than ${MAX_N} allocations for one request`);
console.log(`${which}: ${n - FROM} allocation points walked: ${JSON.stringify(tally)}, live allocations at most ${maxGrowth} above the start`);
