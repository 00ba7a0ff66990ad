// test_openai_embeddings.mjs - embeddings through the official `openai` npm client against a real
// `rlxd serve` holding a chat model and an embedding model side by side (-m chat.gguf:chat -m
// emb.gguf:emb): embeddings.create with a string, an array of 16 strings, token ids and arrays
// of them, in both encodings (the client's default base64 decodes to exactly the float result);
// errors for an empty input, a too-long input (and truncate: true instead), `dimensions`, and a
// route of the other model kind (naming the routes the model serves); batch invariance (64
// concurrent requests give the vectors of 64 solo requests, bit for bit); /v1/models, /metrics,
// the native /embedding, /v1/rerank refused for a non-rank model, and the same over --stdio.
// The embedding model: synth-bert-tiny-f32 from ../shared when this build loads bert, else an
// rlxd-synth llama declared an embedding model (mean pooling, bidirectional attention).
// Exits 77 (skip) when something is missing.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startDaemon } from './daemon_lib.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const binDir = process.env.RLX_BIN || join(root, 'build');
const bin = join(binDir, 'rlxd');
const synth = join(binDir, 'rlxd-synth');
const shared = process.env.RLX_SHARED || join(root, '..', 'shared');
const skip = (why) => { console.log('skip: ' + why); process.exit(77); };
if (!existsSync(bin) || !existsSync(synth)) skip('rlxd / rlxd-synth not built');
const chat = join(shared, 'models', 'synth-llama-tiny-f32.gguf');
if (!existsSync(chat)) skip(chat + ' absent (reference data in ../shared)');
let OpenAI;
try {
  ({ default: OpenAI } = await import('openai'));
} catch {
  skip('the openai package is not installed: run npm ci in tests/integration');
}

const tmp = mkdtempSync(join(tmpdir(), 'rlxd-emb-'));
let emb = join(shared, 'models', 'synth-bert-tiny-f32.gguf');
if (!existsSync(emb) || spawnSync(bin, ['check', emb], { stdio: 'ignore' }).status !== 0) {
  emb = join(tmp, 'emb.gguf');
  const r = spawnSync(synth, ['--arch', 'llama', '--preset', 'tiny', '--pooling', '1', '--non-causal', '-o', emb]);
  if (r.status !== 0) skip('rlxd-synth failed: ' + r.stderr);
}
console.log('embedding model: ' + emb);
const CTX = 128;

let child = null, log = '';
const killer = setTimeout(() => { console.error('timeout\n' + log.slice(-3000)); child?.kill('SIGKILL'); process.exit(1); }, 500000);
const fail = (msg) => {
  console.error('FAIL: ' + msg + '\n--- server log:\n' + log.slice(-2000));
  child?.kill('SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
  process.exit(1);
};
const assert = (c, msg) => { if (!c) fail(msg); };

async function start() {
  let base;
  ({ child, base } = await startDaemon(bin, ['-m', chat + ':chat', '-m', emb + ':emb',
                      '--ctx', String(CTX), '--max-seqs', '8'], (d) => { log += d; }));
  assert(base, 'no port in the log');
  return base;
}

const post = (base, path, body) => fetch(base + path, { method: 'POST', body: JSON.stringify(body) })
  .then(async (r) => ({ status: r.status, body: await r.json() }));
const b64floats = (s) => { const b = Buffer.from(s, 'base64'); return Array.from(new Float32Array(b.buffer, b.byteOffset, b.length / 4)); };
const same = (a, b) => a.length === b.length && a.every((x, i) => Object.is(x, b[i]));
async function expect400(p, what, re) {
  try {
    await p;
  } catch (e) {
    assert(e.status === 400, what + ': status ' + e.status + ' ' + e.message);
    assert(!re || re.test(e.message), what + ': message ' + e.message);
    return e;
  }
  fail(what + ': no error');
}

const texts = Array.from({ length: 64 }, (_, i) => `t${i} ` + 'lorem ipsum '.repeat(1 + (i % 4)) + i * 7);

try {
  const base = await start();
  const client = new OpenAI({ baseURL: base + '/v1', apiKey: 'none', maxRetries: 0 });

  // a string, float and (the client's default) base64
  const f = await client.embeddings.create({ model: 'emb', input: 'hello world', encoding_format: 'float' });
  assert(f.object === 'list' && f.data.length === 1 && f.data[0].index === 0 && f.data[0].object === 'embedding', 'shape ' + JSON.stringify(f).slice(0, 200));
  const vec = f.data[0].embedding, dim = vec.length;
  assert(dim > 0 && vec.every((x) => typeof x === 'number' && Number.isFinite(x)), 'float vector');
  assert(Math.abs(vec.reduce((s, x) => s + x * x, 0) - 1) < 1e-4, 'L2-normalized by default');
  assert(f.usage.prompt_tokens > 0 && f.usage.total_tokens === f.usage.prompt_tokens, 'usage ' + JSON.stringify(f.usage));
  assert(f.model === 'emb', 'model ' + f.model);
  const d = await client.embeddings.create({ model: 'emb', input: 'hello world' });
  assert(same(d.data[0].embedding, vec), 'base64 (the client decodes it) != float');
  const raw = await post(base, '/v1/embeddings', { model: 'emb', input: 'hello world', encoding_format: 'base64' });
  assert(raw.status === 200 && typeof raw.body.data[0].embedding === 'string', 'raw base64 ' + JSON.stringify(raw.body).slice(0, 200));
  assert(same(b64floats(raw.body.data[0].embedding), vec), 'base64 bytes are not little-endian float32 of the float result');
  console.log(`ok   a string, float and base64 agree exactly (${dim} values)`);

  // 16 strings: in order, each the vector it has alone
  const sixteen = texts.slice(0, 16);
  const many = await client.embeddings.create({ model: 'emb', input: sixteen, encoding_format: 'float' });
  assert(many.data.length === 16 && many.data.every((x, i) => x.index === i), 'indices');
  let tokens = 0;
  for (let i = 0; i < 16; i++) {
    const one = await client.embeddings.create({ model: 'emb', input: sixteen[i], encoding_format: 'float' });
    assert(same(one.data[0].embedding, many.data[i].embedding), `string ${i}: alone != in an array of 16`);
    tokens += one.usage.prompt_tokens;
  }
  assert(many.usage.prompt_tokens === tokens, `usage of 16: ${many.usage.prompt_tokens} != ${tokens}`);
  assert(!same(many.data[0].embedding, many.data[1].embedding), 'two texts, one vector');
  console.log('ok   an array of 16 strings: each vector as alone, usage summed');

  // token ids: the text's tokens give the text's vector; arrays of them
  const tok = await post(base, '/tokenize', { model: 'emb', content: 'hello world' });
  const ids = tok.body.tokens;
  assert(Array.isArray(ids) && ids.length > 0, 'tokenize ' + JSON.stringify(tok.body));
  const byIds = await client.embeddings.create({ model: 'emb', input: ids, encoding_format: 'float' });
  assert(same(byIds.data[0].embedding, vec) && byIds.usage.prompt_tokens === ids.length, 'token ids != the text');
  const byArrays = await client.embeddings.create({ model: 'emb', input: [ids, ids.slice(0, 2)] });
  assert(byArrays.data.length === 2 && same(byArrays.data[0].embedding, vec), 'array of token arrays');
  assert(byArrays.usage.prompt_tokens === ids.length + 2, 'usage of token arrays');
  console.log('ok   token ids and arrays of them');

  // errors
  await expect400(client.embeddings.create({ model: 'emb', input: '' }), 'empty string', /empty/);
  await expect400(client.embeddings.create({ model: 'emb', input: [] }), 'empty array', /empty/);
  await expect400(client.embeddings.create({ model: 'emb', input: ['a', ''] }), 'an empty string among others', /input\[1\]/);
  const long = 'many words here '.repeat(200);
  const e = await expect400(client.embeddings.create({ model: 'emb', input: long }), 'too long', /at most \d+ tokens|truncate/);
  assert(e.code === 'context_length_exceeded', 'too long: code ' + e.code);
  const cut = await client.embeddings.create({ model: 'emb', input: long, truncate: true, encoding_format: 'float' });
  assert(cut.usage.prompt_tokens === CTX, 'truncate: ' + cut.usage.prompt_tokens + ' tokens');
  // the text's first CTX - 1 tokens and its closing [SEP] (as Hugging Face tokenizers truncate);
  // token ids the client sends keep their first CTX
  const longIds = (await post(base, '/tokenize', { model: 'emb', content: long })).body.tokens;
  assert(longIds.length > CTX, 'the long text is ' + longIds.length + ' tokens');
  const kept = longIds.slice(0, CTX - 1).concat([longIds[longIds.length - 1]]);
  const byKept = await client.embeddings.create({ model: 'emb', input: kept, encoding_format: 'float' });
  assert(same(cut.data[0].embedding, byKept.data[0].embedding), 'truncate: not the first tokens and [SEP]');
  const cutIds = await client.embeddings.create({ model: 'emb', input: longIds, truncate: true, encoding_format: 'float' });
  const byFirst = await client.embeddings.create({ model: 'emb', input: longIds.slice(0, CTX), encoding_format: 'float' });
  assert(same(cutIds.data[0].embedding, byFirst.data[0].embedding), 'truncate of token ids: not their first CTX');
  await expect400(client.embeddings.create({ model: 'emb', input: 'x', dimensions: 8 }), 'dimensions', /dimensions|Matryoshka/);
  // the model's own size asks for nothing: served as without it (libraries that always pass it got a 400)
  const own = cut.data[0].embedding.length;
  const withOwn = await client.embeddings.create({ model: 'emb', input: 'x', dimensions: own, encoding_format: 'float' });
  const without = await client.embeddings.create({ model: 'emb', input: 'x', encoding_format: 'float' });
  assert(same(withOwn.data[0].embedding, without.data[0].embedding), 'dimensions equal to the model size');
  await expect400(client.embeddings.create({ model: 'chat', input: 'x' }), 'embeddings to a chat model', /generates text.*\/v1\/chat\/completions/);
  await expect400(client.chat.completions.create({ model: 'emb', messages: [{ role: 'user', content: 'hi' }] }),
                  'chat to an embedding model', /embedding model.*\/v1\/embeddings/);
  await expect400(client.completions.create({ model: 'emb', prompt: 'hi' }), 'completions to an embedding model', /\/v1\/embeddings/);
  const rr = await post(base, '/v1/rerank', { model: 'emb', query: 'q', documents: ['a', 'b'] });
  assert(rr.status === 400 && /\/v1\/embeddings/.test(rr.body.error.message), 'rerank to a mean-pooled model: ' + JSON.stringify(rr.body));
  console.log('ok   errors: empty, too long (truncate works), dimensions, wrong model kind both ways, rerank');

  // batch invariance: 64 concurrent requests = 64 solo, bit for bit (base64 strings compared)
  const solo = [];
  for (const t of texts) solo.push((await post(base, '/v1/embeddings', { model: 'emb', input: t, encoding_format: 'base64' })).body.data[0].embedding);
  const together = await Promise.all(texts.map((t) => post(base, '/v1/embeddings', { model: 'emb', input: t, encoding_format: 'base64' })));
  for (let i = 0; i < 64; i++) assert(together[i].status === 200 && together[i].body.data[0].embedding === solo[i], `text ${i}: concurrent != solo`);
  assert(new Set(solo).size === 64, 'the 64 texts do not give 64 vectors');
  console.log('ok   batch invariance: 64 concurrent requests give the 64 solo vectors bit for bit');

  // native /embedding: an array of {index, embedding: [[...]]}
  const nat = await post(base, '/embedding', { model: 'emb', content: 'hello world' });
  assert(nat.status === 200 && Array.isArray(nat.body) && nat.body[0].index === 0 && same(nat.body[0].embedding[0], vec),
         'native /embedding ' + JSON.stringify(nat.body).slice(0, 200));
  // the list and the counters
  const models = await client.models.list();
  const kinds = Object.fromEntries(models.data.map((m) => [m.id, m.meta.kind]));
  assert(kinds.chat === 'generation' && kinds.emb !== 'generation', 'models ' + JSON.stringify(kinds));
  const metrics = await fetch(base + '/metrics').then((r) => r.text());
  const inputs = /rlxd_embedding_inputs_total\{model_name="emb"\} (\d+)/.exec(metrics);
  assert(inputs && Number(inputs[1]) >= 64 * 2 + 16 * 2, 'metrics: ' + (inputs ? inputs[0] : 'no rlxd_embedding_inputs_total'));
  assert(/rlxd_embedding_tokens_total\{model_name="emb"\} [1-9]/.test(metrics), 'metrics: embedding tokens');
  console.log('ok   /embedding, /v1/models kinds, embedding metrics');
  child.kill('SIGTERM');
  const code = await new Promise((r) => child.on('exit', (c) => r(c)));
  assert(code === 0, 'exit status after SIGTERM: ' + code);
  child = null;

  // stdio: an embeddings line and a wrong-kind line
  const lines = ['{"id":1,"model":"emb","input":["hello world","x"]}', '{"id":2,"model":"emb","prompt":"hi"}',
                 '{"id":3,"model":"emb","input":"hello world","encoding_format":"base64"}'].join('\n') + '\n';
  const r = spawnSync(bin, ['serve', '--stdio', '-m', chat + ':chat', '-m', emb + ':emb', '--ctx', String(CTX)], { input: lines });
  assert(r.status === 0, 'stdio exit ' + r.status + ' ' + r.stderr);
  const out = Object.fromEntries(r.stdout.toString().trim().split('\n').map((l) => JSON.parse(l)).map((o) => [o.id, o]));
  assert(out[1]?.ok === true && out[1].data.length === 2 && same(out[1].data[0].embedding, vec), 'stdio embeddings ' + JSON.stringify(out[1]).slice(0, 200));
  assert(out[1].usage.prompt_tokens > ids.length, "stdio usage " + JSON.stringify(out[1].usage));
  assert(out[2]?.ok === false && out[2].error.param === 'model', 'stdio generate to an embedding model ' + JSON.stringify(out[2]));
  assert(out[3]?.ok === true && same(b64floats(out[3].data[0].embedding), vec), 'stdio base64');
  console.log('ok   stdio: embedding lines, base64, and a generation line refused for an embedding model');
} catch (e) {
  fail(e.stack || String(e));
}
clearTimeout(killer);
rmSync(tmp, { recursive: true, force: true });
console.log('all passed');
