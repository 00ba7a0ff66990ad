// test_rerank.mjs - POST /v1/rerank (and /rerank, and a stdio rerank line) against a real `rlxd
// serve` with a reranker: ../shared's synth-bert-tiny-f32 copied with bert.pooling_type 4 (rank)
// and a random `cls` head (cls.weight 64x64, cls.bias, cls.output.weight 64x1, cls.output.bias),
// written by the small GGUF rewriter below. Checks: results best first with every index once,
// top_n, return_documents, a document's score independent of the other documents and of its
// place (batch invariance), usage; /v1/embeddings refused for the reranker and /v1/rerank for an
// embedding model, both naming the routes the model serves. Exits 77 (skip) when something is
// missing.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startDaemon } from './daemon_lib.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const bin = join(process.env.RLX_BIN || join(root, 'build'), 'rlxd');
const shared = process.env.RLX_SHARED || join(root, '..', 'shared');
const skip = (why) => { console.log('skip: ' + why); process.exit(77); };
if (!existsSync(bin)) skip(bin + ' not built');
const bert = join(shared, 'models', 'synth-bert-tiny-f32.gguf');
if (!existsSync(bert)) skip(bert + ' absent (reference data in ../shared)');
if (spawnSync(bin, ['check', bert], { stdio: 'ignore' }).status !== 0) skip('this build does not load bert');

// ---- a GGUF copy with bert.pooling_type = 4 and a cls head -----------------------------------
function withRankHead(src) {
  const b = readFileSync(src);
  let o = 0;
  const u32 = () => { const v = b.readUInt32LE(o); o += 4; return v; };
  const u64 = () => { const v = Number(b.readBigUInt64LE(o)); o += 8; return v; };
  const str = () => { const n = u64(); const s = b.toString('utf8', o, o + n); o += n; return s; };
  const size = [1, 1, 2, 2, 4, 4, 4, 1, -1, -1, 8, 8, 8];
  const skipValue = (t) => {
    if (t === 8) { str(); return; }
    if (t === 9) { const et = u32(), n = u64(); for (let i = 0; i < n; i++) skipValue(et); return; }
    o += size[t];
  };
  if (b.toString('utf8', 0, 4) !== 'GGUF') throw new Error('not GGUF');
  o = 4; u32();
  const nT = u64(), nKV = u64();
  const kvs = [];
  let align = 32;
  for (let i = 0; i < nKV; i++) {
    const s = o, key = str(), t = u32(), vs = o;
    skipValue(t);
    if (key === 'general.alignment') align = b.readUInt32LE(vs);
    if (key !== 'bert.pooling_type') kvs.push(b.subarray(s, o));
  }
  const infos = [];
  let end = 0;
  for (let i = 0; i < nT; i++) {
    const s = o; str(); const nd = u32(); const ne = []; for (let d = 0; d < nd; d++) ne.push(u64());
    const type = u32(), off = u64();
    if (type !== 0) throw new Error('expected an F32 model');
    infos.push(b.subarray(s, o));
    end = Math.max(end, off + ne.reduce((a, x) => a * x, 4));
  }
  const dataStart = Math.ceil(o / align) * align;
  const pad = (n) => Math.ceil(n / align) * align;
  // deterministic random head
  let seed = 12345;
  const rnd = (scale) => { seed = (seed * 1664525 + 1013904223) >>> 0; return ((seed >>> 9) % 2001 - 1000) / scale; };
  const f32 = (n, scale) => { const a = new Float32Array(n); for (let i = 0; i < n; i++) a[i] = rnd(scale); return Buffer.from(a.buffer); };
  const head = [['cls.weight', [64, 64], f32(64 * 64, 8000)], ['cls.bias', [64], f32(64, 4000)],
                ['cls.output.weight', [64, 1], f32(64, 2000)], ['cls.output.bias', [1], f32(1, 4000)]];
  const enc = (s) => { const n = Buffer.alloc(8); n.writeBigUInt64LE(BigInt(Buffer.byteLength(s))); return Buffer.concat([n, Buffer.from(s)]); };
  const num = (v, bytes) => { const x = Buffer.alloc(bytes); bytes === 4 ? x.writeUInt32LE(v) : x.writeBigUInt64LE(BigInt(v)); return x; };
  const newInfos = [];
  let off = pad(end);
  const offs = [];
  for (const [name, ne, data] of head) {
    newInfos.push(Buffer.concat([enc(name), num(ne.length, 4), ...ne.map((x) => num(x, 8)), num(0, 4), num(off, 8)]));
    offs.push(off);
    off = pad(off + data.length);
  }
  const pooling = Buffer.concat([enc('bert.pooling_type'), num(4, 4), num(4, 4)]);
  const header = Buffer.concat([Buffer.from('GGUF'), num(3, 4), num(nT + head.length, 8), num(kvs.length + 1, 8), ...kvs, pooling,
                                ...infos, ...newInfos]);
  const out = Buffer.alloc(pad(header.length) + off);
  header.copy(out, 0);
  b.copy(out, pad(header.length), dataStart, dataStart + end);
  head.forEach(([, , data], i) => data.copy(out, pad(header.length) + offs[i]));
  return out;
}

const tmp = mkdtempSync(join(tmpdir(), 'rlxd-rerank-'));
const rank = join(tmp, 'rank.gguf');
writeFileSync(rank, withRankHead(bert));

let child = null, log = '';
const killer = setTimeout(() => { console.error('timeout\n' + log.slice(-3000)); child?.kill('SIGKILL'); process.exit(1); }, 300000);
const fail = (msg) => {
  console.error('FAIL: ' + msg + '\n--- server log:\n' + log.slice(-2000));
  child?.kill('SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
  process.exit(1);
};
const assert = (c, msg) => { if (!c) fail(msg); };
const post = (base, path, body) => fetch(base + path, { method: 'POST', body: JSON.stringify(body) })
  .then(async (r) => ({ status: r.status, body: await r.json() }));

try {
  let base;
  ({ child, base } = await startDaemon(bin, ['-m', rank + ':rr', '-m', bert + ':emb', '--max-seqs', '4'], (d) => { log += d; }));
  assert(base, 'no port in the log');
  const docs = ['the cat sat on the mat', 'paris is the capital of france', 'a quick brown fox', 'hello world',
                'rerankers score pairs of texts', 'nothing to see here'];
  const query = 'what is the capital of france?';
  const r = await post(base, '/v1/rerank', { model: 'rr', query, documents: docs, return_documents: true });
  assert(r.status === 200, 'rerank: ' + JSON.stringify(r.body));
  const res = r.body.results;
  assert(Array.isArray(res) && res.length === docs.length, 'results ' + JSON.stringify(r.body));
  assert(new Set(res.map((x) => x.index)).size === docs.length, 'every index once');
  for (let i = 1; i < res.length; i++) assert(res[i - 1].relevance_score >= res[i].relevance_score, 'not best first');
  assert(res.every((x) => Number.isFinite(x.relevance_score) && x.document.text === docs[x.index]), 'scores / documents');
  assert(new Set(res.map((x) => x.relevance_score)).size > 1, 'all scores equal');
  assert(r.body.usage.prompt_tokens > 0 && r.body.usage.total_tokens === r.body.usage.prompt_tokens, 'usage');
  const score = Object.fromEntries(res.map((x) => [x.index, x.relevance_score]));
  // top_n, the /rerank alias, and each document alone or reversed: the same scores bit for bit
  const top = await post(base, '/rerank', { model: 'rr', query, documents: docs, top_n: 2 });
  assert(top.status === 200 && top.body.results.length === 2 && top.body.results[0].index === res[0].index &&
         top.body.results[0].document === undefined, 'top_n ' + JSON.stringify(top.body));
  const rev = await post(base, '/v1/rerank', { model: 'rr', query, documents: [...docs].reverse() });
  for (const x of rev.body.results) assert(x.relevance_score === score[docs.length - 1 - x.index], 'reversed order changes a score');
  const alone = await Promise.all(docs.map((d) => post(base, '/v1/rerank', { model: 'rr', query, documents: [d] })));
  alone.forEach((a, i) => assert(a.status === 200 && a.body.results[0].relevance_score === score[i], `document ${i} alone != among others`));
  console.log('ok   /v1/rerank: best first, top_n, return_documents, scores independent of the batch');
  // the other model kinds
  const e1 = await post(base, '/v1/embeddings', { model: 'rr', input: 'x' });
  assert(e1.status === 400 && /reranker.*\/v1\/rerank/.test(e1.body.error.message), 'embeddings to a reranker: ' + JSON.stringify(e1.body));
  const e2 = await post(base, '/v1/rerank', { model: 'emb', query, documents: docs });
  assert(e2.status === 400 && /\/v1\/embeddings/.test(e2.body.error.message), 'rerank to an embedding model: ' + JSON.stringify(e2.body));
  const e3 = await post(base, '/v1/rerank', { model: 'rr', query, documents: [] });
  assert(e3.status === 400 && e3.body.error.param === 'documents', 'empty documents: ' + JSON.stringify(e3.body));
  console.log('ok   wrong model kinds and empty documents are 400s');
  // a query that fills the context: named as such (the message blamed document 0); with truncate
  // the pair is cut longest first, so every document keeps tokens and the scores still differ
  // (before: both cut to 512 tokens of query, every score the same)
  const longQ = Array(600).fill('capital').join(' ');
  const lq = await post(base, '/v1/rerank', { model: 'rr', query: longQ, documents: ['Paris'] });
  assert(lq.status === 400 && lq.body.error.param === 'query' && /'query' is \d+ tokens/.test(lq.body.error.message),
         'long query: ' + JSON.stringify(lq.body));
  const lt = await post(base, '/v1/rerank', { model: 'rr', query: longQ, documents: ['Paris is the capital of France', 'zebra'], truncate: true });
  assert(lt.status === 200 && lt.body.results.length === 2, 'long query with truncate: ' + JSON.stringify(lt.body));
  assert(lt.body.results[0].relevance_score !== lt.body.results[1].relevance_score, 'truncate: the documents were cut away: ' + JSON.stringify(lt.body));
  const longD = Array(600).fill('zebra').join(' ');
  const ld = await post(base, '/v1/rerank', { model: 'rr', query: 'where', documents: [longD] });
  assert(ld.status === 400 && ld.body.error.param === 'documents' && /Document 0 .* with the query/.test(ld.body.error.message),
         'long document: ' + JSON.stringify(ld.body));
  const ldt = await post(base, '/v1/rerank', { model: 'rr', query: 'where', documents: [longD], truncate: true });
  assert(ldt.status === 200, 'long document with truncate: ' + JSON.stringify(ldt.body));
  console.log('ok   a query or document past the context: named, or cut longest first with truncate');
  child.kill('SIGTERM');
  const code = await new Promise((r) => child.on('exit', (c) => r(c)));
  assert(code === 0, 'exit status after SIGTERM: ' + code);
  child = null;
  // stdio
  const line = JSON.stringify({ id: 'a', model: 'rr', query, documents: docs }) + '\n';
  const s = spawnSync(bin, ['serve', '--stdio', '-m', rank + ':rr'], { input: line });
  assert(s.status === 0, 'stdio exit ' + s.status);
  const out = JSON.parse(s.stdout.toString().trim());
  assert(out.id === 'a' && out.ok === true && out.results.length === docs.length && out.results[0].relevance_score === res[0].relevance_score,
         'stdio rerank ' + JSON.stringify(out));
  console.log('ok   stdio rerank line');
} catch (e) {
  fail(e.stack || String(e));
}
clearTimeout(killer);
rmSync(tmp, { recursive: true, force: true });
console.log('all passed');
