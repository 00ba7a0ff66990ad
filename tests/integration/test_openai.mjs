// test_openai.mjs - the official `openai` npm client against a real `rlxd serve`: chat and
// completions, streaming and not, usage with stream_options.include_usage, error mapping.
// Starts the daemon on 127.0.0.1 with a free port and kills it at the end; exits 77 (skip)
// when the model, the binary or node_modules is missing.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const bin = join(process.env.RLX_BIN || join(root, 'build'), 'rlxd');
const model = join(process.env.RLX_SHARED || join(root, '..', 'shared'), 'models', 'stories260K.gguf');
const skip = (why) => { console.log('skip: ' + why); process.exit(77); };
if (!existsSync(bin)) skip(bin + ' not built');
if (!existsSync(model)) skip(model + ' absent (reference data in ../shared)');
let OpenAI;
try {
  ({ default: OpenAI } = await import('openai'));
} catch {
  skip('the openai package is not installed: run npm ci in tests/integration');
}

const key = 'it-key-' + process.pid;
const child = spawn(bin, ['serve', '-m', model + ':tiny', '--host', '127.0.0.1', '--port', '0', '--api-key', key],
                    { stdio: ['ignore', 'ignore', 'pipe'] });
let log = '';
child.stderr.on('data', (d) => { log += d; });
const killer = setTimeout(() => { console.error('timeout\n' + log); child.kill('SIGKILL'); process.exit(1); }, 90000);
const fail = (msg) => { console.error('FAIL: ' + msg + '\n--- server log:\n' + log.slice(-2000)); child.kill('SIGKILL'); process.exit(1); };
const assert = (c, msg) => { if (!c) fail(msg); };

let port;
for (let i = 0; i < 300 && !port; i++) {
  const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(log);
  if (m) port = m[1];
  else await new Promise((r) => setTimeout(r, 100));
}
assert(port, 'no port in the log');
const base = `http://127.0.0.1:${port}`;
for (let i = 0; i < 300; i++) {
  const ok = await fetch(base + '/health').then((r) => r.ok, () => false);
  if (ok) break;
  await new Promise((r) => setTimeout(r, 100));
}

const client = new OpenAI({ baseURL: base + '/v1', apiKey: key, maxRetries: 0 });

try {
  const models = await client.models.list();
  assert(models.data.length === 1 && models.data[0].id === 'tiny', 'models.list: ' + JSON.stringify(models.data));
  const one = await client.models.retrieve('tiny');
  assert(one.id === 'tiny' && one.object === 'model', 'models.retrieve: ' + JSON.stringify(one));
  console.log('ok   models.list + retrieve');

  const chat = await client.chat.completions.create({
    model: 'tiny', messages: [{ role: 'user', content: 'Tell me a story' }], max_tokens: 10, temperature: 0,
  });
  assert(chat.object === 'chat.completion', 'chat object');
  assert(chat.choices[0].message.role === 'assistant', 'chat role');
  assert(typeof chat.choices[0].message.content === 'string', 'chat content');
  assert(['stop', 'length'].includes(chat.choices[0].finish_reason), 'chat finish ' + chat.choices[0].finish_reason);
  assert(chat.usage.completion_tokens > 0 && chat.usage.completion_tokens <= 10, 'chat usage');
  assert(chat.usage.total_tokens === chat.usage.prompt_tokens + chat.usage.completion_tokens, 'chat total');
  console.log('ok   chat');

  const stream = await client.chat.completions.create({
    model: 'tiny', messages: [{ role: 'user', content: 'Tell me a story' }], max_tokens: 10, temperature: 0,
    stream: true, stream_options: { include_usage: true },
  });
  let text = '', usage = null, finish = null, roles = 0, ids = new Set();
  for await (const chunk of stream) {
    ids.add(chunk.id);
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role) roles++;
      text += c.delta.content || '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert(text === chat.choices[0].message.content, `streamed chat "${text}" != "${chat.choices[0].message.content}"`);
  assert(roles === 1 && ids.size === 1, 'role once, one id');
  assert(finish === chat.choices[0].finish_reason, 'stream finish');
  assert(usage && usage.completion_tokens === chat.usage.completion_tokens, 'include_usage: ' + JSON.stringify(usage));
  console.log('ok   chat stream + include_usage');

  const cmpl = await client.completions.create({ model: 'tiny', prompt: 'Once upon a time', max_tokens: 12, temperature: 0 });
  assert(cmpl.object === 'text_completion' && cmpl.choices[0].text.length > 0, 'completion');
  const cstream = await client.completions.create({
    model: 'tiny', prompt: 'Once upon a time', max_tokens: 12, temperature: 0, stream: true,
  });
  let ctext = '';
  for await (const chunk of cstream) ctext += chunk.choices.map((c) => c.text).join('');
  assert(ctext === cmpl.choices[0].text, `streamed completion "${ctext}" != "${cmpl.choices[0].text}"`);
  console.log('ok   completions + stream');

  // completions streamed with include_usage: the usage chunk comes last, the text is the same
  const ustream = await client.completions.create({
    model: 'tiny', prompt: 'Once upon a time', max_tokens: 12, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let utext = '', cusage = null, fps = new Set(), nulls = 0, chunks = 0;
  for await (const chunk of ustream) {
    chunks++;
    assert(!cusage, 'a chunk after the usage chunk');
    if (chunk.usage) cusage = chunk.usage;
    else if (chunk.usage === null) nulls++;
    fps.add(chunk.system_fingerprint);
    utext += chunk.choices.map((c) => c.text).join('');
  }
  assert(utext === cmpl.choices[0].text, `streamed completion with usage "${utext}" != "${cmpl.choices[0].text}"`);
  assert(cusage && cusage.completion_tokens === cmpl.usage.completion_tokens
         && cusage.prompt_tokens === cmpl.usage.prompt_tokens, 'completions include_usage: ' + JSON.stringify(cusage));
  assert(nulls === chunks - 1, `usage null on every chunk but the last: ${nulls} of ${chunks}`);
  assert(fps.size === 1 && [...fps][0] === cmpl.system_fingerprint && cmpl.system_fingerprint, 'system_fingerprint');
  console.log('ok   completions stream + include_usage');

  const multi = await client.completions.create({ model: 'tiny', prompt: ['One', 'Two'], n: 2, max_tokens: 2 });
  assert(multi.choices.length === 4, 'n x prompts');
  console.log('ok   completions n x prompts');

  let err = null;
  try {
    await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], temperature: 5 });
  } catch (e) { err = e; }
  assert(err instanceof OpenAI.BadRequestError, 'temperature 5 must be a BadRequestError');
  assert(err.status === 400 && err.param === 'temperature', 'error param: ' + err.param);
  // streamed requests that are bad: the client raises BadRequestError (a 400 before the
  // stream starts), not an APIError from an in-band event
  for (const [what, params, param] of [
    ['prompt over the context', { prompt: 'Once upon a time '.repeat(200) }, 'prompt'],
    ['max_tokens over the context', { prompt: 'Once upon a time', max_tokens: 509 }, 'max_tokens'],
    ['bad temperature', { prompt: 'x', temperature: 5 }, 'temperature'],
  ]) {
    err = null;
    try {
      const st = await client.completions.create({ model: 'tiny', stream: true, ...params });
      for await (const _ of st) { /* drain */ }
    } catch (e) { err = e; }
    assert(err instanceof OpenAI.BadRequestError, `streamed ${what} must raise BadRequestError, got ${err && err.constructor.name}: ${err}`);
    assert(err.status === 400 && err.param === param, `streamed ${what}: status ${err.status} param ${err.param}`);
  }
  err = null;
  try {
    const st = await client.chat.completions.create({
      model: 'tiny', stream: true, messages: [{ role: 'user', content: 'Once upon a time '.repeat(200) }],
    });
    for await (const _ of st) { /* drain */ }
  } catch (e) { err = e; }
  assert(err instanceof OpenAI.BadRequestError && err.param === 'messages' && err.code === 'context_length_exceeded',
         'streamed chat over the context: ' + err);
  console.log('ok   streamed bad requests raise BadRequestError');

  // an aborted stream frees its request: /metrics shows it cancelled, nothing running, no KV
  const metrics = async () => (await fetch(base + '/metrics', { headers: { Authorization: 'Bearer ' + key } })).text();
  const gauge = (m, name) => Number((new RegExp('^' + name + '(?:\\{[^}]*\\})? (\\S+)$', 'm').exec(m) || [])[1]);
  const cancelled0 = gauge(await metrics(), 'rlxd_requests_cancelled_total');
  const abortable = await client.completions.create({
    model: 'tiny', prompt: 'Once upon a time', max_tokens: 400, ignore_eos: true, stream: true,
  });
  let seen = 0;
  for await (const chunk of abortable) {
    if (chunk.choices.length && ++seen === 3) break; // leaving the loop aborts the request
  }
  abortable.controller.abort();
  let m = '';
  for (let i = 0; i < 100; i++) {
    m = await metrics();
    if (gauge(m, 'rlxd_requests_cancelled_total') > cancelled0 && gauge(m, 'rlxd_num_requests_running') === 0
        && gauge(m, 'rlxd_kv_cache_usage_ratio') === 0) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert(gauge(m, 'rlxd_requests_cancelled_total') > cancelled0, 'the aborted stream is not counted as cancelled');
  assert(gauge(m, 'rlxd_num_requests_running') === 0, 'the aborted stream is still running');
  assert(gauge(m, 'rlxd_kv_cache_usage_ratio') === 0, 'the aborted stream still holds KV blocks');
  console.log('ok   aborted stream cancelled and freed (metrics)');

  err = null;
  try {
    await client.completions.create({ model: 'missing', prompt: 'x' });
  } catch (e) { err = e; }
  assert(err instanceof OpenAI.NotFoundError && err.code === 'model_not_found', 'unknown model -> 404');
  err = null;
  try {
    await new OpenAI({ baseURL: base + '/v1', apiKey: 'wrong', maxRetries: 0 }).models.list();
  } catch (e) { err = e; }
  assert(err instanceof OpenAI.AuthenticationError, 'wrong key -> 401');
  console.log('ok   errors 400 404 401');
} catch (e) {
  fail(e.stack || String(e));
}

child.kill('SIGTERM');
const code = await new Promise((r) => child.on('exit', (c) => r(c)));
clearTimeout(killer);
assert(code === 0, 'exit status after SIGTERM: ' + code);
console.log('all passed');
