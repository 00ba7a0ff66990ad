// test_openai_tools.mjs - tool calls through the official `openai` npm client against a real
// `rlxd serve` with random-weight models (so only the forcing grammar makes calls valid), once
// per tool-call format with a forcing grammar: the ChatML fallback's generic JSON
// (synth-llama-tiny, no template), Hermes <tool_call> blocks (synth-qwen3-tiny with Qwen2.5's
// template through --chat-template), Llama 3 JSON (synth-llama-tiny with Llama 3.2's), Qwen3-Coder
// XML and Apriel (synth-qwen3-tiny), Firefunction v2 (its own template, with llama.cpp's extra
// variables) and Functionary v3.1 / v3.2
// (synth-llama-tiny), and the formats whose markers are special tokens in the real models
// (Mistral, Granite, DeepSeek, Kimi K2; spelled as text by these vocabularies), each with its
// template (a minimal one of the format where the real one cannot serve a random model). With a
// thinking template (Qwen3's) and tool_choice "auto", output fixed by a `grammar` comes back
// split into reasoning_content, content and tool_calls, streamed and not, with no tag text. Checks: tool_choice "required" and a named tool return
// calls whose arguments validate (Ajv); parallel_tool_calls:false gives exactly one call;
// `chat.completions.stream()` gives one tool_calls.function.arguments.done event per index and
// finalChatCompletion() resolves; a role:"tool" round trip renders; runTools() with "required"
// calls the JS function once per completion; tool_choice "auto" (Hermes) constrains a call
// lazily, once the model opens <tool_call> (Hermes JSON and Qwen3-Coder XML), and for Llama 3
// JSON once the output opens {"name":" (an anchored pattern), text staying free (and generic's
// too). Exits 77 (skip) when something is missing.
import { spawn } from 'node:child_process';
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
// The sanitizer build runs every case with one seed where the release build runs four, and the
// formats whose call markers are text (but Qwen3-Coder, whose lazy case needs <tool_call> as one
// token) on the 32,000-token llama model, where the release build runs three of them on the
// 151,936-token qwen one (the output projection over that vocabulary was most of their time
// under ASan): the same templates, parsers and grammars, a fraction of the generation. The
// daemon's compute is 3-4 times slower there, and this test was the sanitizer run's longest
// (276 s on CI's host with two seeds and the release build's models).
const cache = join(dirname(bin), 'CMakeCache.txt');
const sanitized = existsSync(cache) && /^RLX_SANITIZE:BOOL=ON$/m.test(readFileSync(cache, 'utf8'));
const reps = sanitized ? 1 : 4;
const llama = join(shared, 'models', 'synth-llama-tiny-f32.gguf');
const qwen = join(shared, 'models', 'synth-qwen3-tiny-f32.gguf');
const qwenTpl = join(shared, 'templates', 'Qwen-Qwen2.5-7B-Instruct.json');
const llamaTpl = join(shared, 'templates', 'meta-llama-Llama-3.2-3B-Instruct.json');
const mistralTpl = join(shared, 'templates', 'Mistral-Small-3.2-24B-Instruct-2506.json');
const qwen3Tpl = join(shared, 'templates', 'Qwen-Qwen3-0.6B.json');
// formats whose call markers are text: [model, template, format name]
const textFormats = [
  [qwen, join(shared, 'templates', 'Qwen3-Coder.json'), 'qwen3-coder'],
  [qwen, join(shared, 'templates', 'unsloth-Apriel-1.5.json'), 'apriel'],
  // Firefunction v2's own template, which reads the `functions` and `datetime` variables llama.cpp
  // passes (rlx_api_chat_format_vars)
  [llama, join(shared, 'templates', 'fireworks-ai-llama-3-firefunction-v2.json'), 'firefunction-v2'],
  [llama, join(shared, 'templates', 'meetkai-functionary-medium-v3.1.json'), 'functionary-v3.1'],
  [llama, join(shared, 'templates', 'meetkai-functionary-medium-v3.2.json'), 'functionary-v3.2'],
  // markers that are special tokens in the real models' vocabularies (here spelled as text: the
  // random models' vocabularies do not have them; test_worker_grammar checks the real token)
  [llama, mistralTpl, 'mistral'],
  // Granite 3.3's template mentions <think> (so the output may open reasoning, which a random
  // model never closes): a minimal template of the format (detected by <|tool_call|>) instead
  [llama, null, 'granite'],
  [qwen, null, 'deepseek'], // DeepSeek's templates open <think> in the prompt: a minimal one too
  [qwen, join(shared, 'templates', 'moonshotai-Kimi-K2.json'), 'kimi-k2'],
];
for (const f of [llama, qwen, qwenTpl, llamaTpl, mistralTpl, qwen3Tpl, ...textFormats.filter((t) => t[1]).map((t) => t[1])]) if (!existsSync(f)) skip(f + ' absent (reference data in ../shared)');
let OpenAI, Ajv;
try {
  ({ default: OpenAI } = await import('openai'));
  ({ default: Ajv } = await import('ajv'));
} catch {
  skip('the openai / ajv packages are not installed: run npm ci in tests/integration');
}

const tmp = mkdtempSync(join(tmpdir(), 'rlxd-tools-'));
const fireTemplate = "{{- bos_token }}{%- for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n" +
  "{{- m.content or '' }}{%- if m.tool_calls %} functools[{%- for c in m.tool_calls %}{{ ', ' if not loop.first }}" +
  "{\"name\": \"{{ c.function.name }}\", \"arguments\": {{ c.function.arguments | tojson }}}{%- endfor %}]{%- endif %}" +
  "<|eot_id|>{%- endfor %}{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{%- endif %}";
const graniteTemplate = fireTemplate.replace(' functools[', '<|tool_call|>[');
const deepseekTemplate = fireTemplate.replace(' functools[', '<\uff5ctool\u2581calls\u2581begin\uff5c><\uff5ctool\u2581call\u2581begin\uff5c>[');
const template = (src, name, text = { granite: graniteTemplate, deepseek: deepseekTemplate }[name] || fireTemplate) => {
  const f = join(tmp, name + '.jinja');
  writeFileSync(f, src ? JSON.parse(readFileSync(src, 'utf8')).template : text);
  return f;
};

let child = null, log = '';
const killer = setTimeout(() => { console.error('timeout\n' + log.slice(-3000)); child?.kill('SIGKILL'); process.exit(1); }, 500000);
const fail = (msg) => {
  console.error('FAIL: ' + msg + '\n--- server log:\n' + log.slice(-2000));
  child?.kill('SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
  process.exit(1);
};
const assert = (c, msg) => { if (!c) fail(msg); };

async function start(model, extra) {
  log = '';
  let base;
  ({ child, base } = await startDaemon(bin, ['-m', model + ':m', '--ctx', '4096', ...extra], (d) => { log += d; }));
  assert(base, 'no port in the log');
  return new OpenAI({ baseURL: base + '/v1', apiKey: 'none', maxRetries: 0 });
}

async function stop() {
  child.kill('SIGTERM');
  const code = await new Promise((r) => child.on('exit', (c) => r(c)));
  assert(code === 0, 'exit status after SIGTERM: ' + code);
  child = null;
}

const weather = { type: 'object', properties: { city: { type: 'string', minLength: 1, maxLength: 12 },
  unit: { enum: ['c', 'f'] }, days: { type: 'integer', minimum: 1, maximum: 7 } }, required: ['city', 'unit'],
  additionalProperties: false };
const add = { type: 'object', properties: { a: { type: 'integer', minimum: -100, maximum: 100 },
  b: { type: 'number' } }, required: ['a', 'b'], additionalProperties: false };
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather of a city', parameters: weather } },
  { type: 'function', function: { name: 'add', description: 'Adds two numbers', parameters: add } },
];
const ajv = new Ajv({ strict: false });
const validators = { get_weather: ajv.compile(weather), add: ajv.compile(add) };
const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];

// every call: an id, type function, a known name, arguments that parse and validate
function checkCalls(calls, what, only) {
  assert(Array.isArray(calls) && calls.length >= 1, what + ': no tool_calls');
  const ids = new Set();
  for (const c of calls) {
    assert(c.type === 'function' && typeof c.id === 'string' && c.id.length > 5 && !ids.has(c.id), what + ': call ' + JSON.stringify(c));
    ids.add(c.id);
    const v = validators[c.function.name];
    assert(v && (!only || c.function.name === only), what + ': tool ' + c.function.name);
    let args;
    try { args = JSON.parse(c.function.arguments); } catch { fail(what + ': arguments are not JSON: ' + c.function.arguments); }
    assert(v(args), what + ': arguments do not validate: ' + c.function.arguments + ' ' + JSON.stringify(v.errors));
  }
}

async function suite(client, fmt, extraBody) {
  const req = (o) => ({ model: 'm', messages, tools, max_tokens: 400, temperature: 1.0, ...extraBody, ...o });
  // tool_choice "required": 1..4 valid calls, finish_reason tool_calls, content null
  for (let i = 0; i < reps; i++) {
    const r = await client.chat.completions.create(req({ tool_choice: 'required', seed: i }));
    const ch = r.choices[0];
    assert(ch.finish_reason === 'tool_calls', fmt + ' required: finish_reason ' + ch.finish_reason + ' ' + JSON.stringify(ch.message));
    assert(ch.message.content === null, fmt + ' required: content ' + JSON.stringify(ch.message.content));
    checkCalls(ch.message.tool_calls, fmt + ' required');
    assert(ch.message.tool_calls.length <= 4, fmt + ' required: more than 4 calls');
  }
  console.log(`ok   ${fmt}: tool_choice "required" gives valid calls`);
  // a named tool, parallel_tool_calls false: exactly one call of it
  for (let i = 0; i < reps; i++) {
    const r = await client.chat.completions.create(req({
      tool_choice: { type: 'function', function: { name: 'add' } }, parallel_tool_calls: false, seed: 10 + i }));
    const calls = r.choices[0].message.tool_calls;
    checkCalls(calls, fmt + ' named', 'add');
    assert(calls.length === 1, fmt + ' parallel_tool_calls false: ' + calls.length + ' calls');
  }
  console.log(`ok   ${fmt}: a named tool with parallel_tool_calls false gives exactly one valid call`);
  // streamed: one arguments.done event per index, the final completion matches
  const done = new Map(), deltas = new Map();
  const stream = client.chat.completions.stream(req({ tool_choice: 'required', seed: 42 }));
  stream.on('tool_calls.function.arguments.done', (e) => done.set(e.index, (done.get(e.index) || 0) + 1));
  stream.on('tool_calls.function.arguments.delta', (e) => deltas.set(e.index, (deltas.get(e.index) || 0) + 1));
  const fin = await stream.finalChatCompletion();
  const calls = fin.choices[0].message.tool_calls;
  checkCalls(calls, fmt + ' stream');
  assert(done.size === calls.length && [...done.values()].every((n) => n === 1),
         fmt + ' stream: arguments.done events ' + JSON.stringify([...done]) + ' for ' + calls.length + ' calls');
  // the arguments stream as they are generated (every format but the generic wrapper object,
  // which is read whole): the required members alone take several tokens
  if (fmt !== 'generic')
    calls.forEach((c, i) => assert(deltas.get(i) > 1, fmt + ' stream: the arguments ' + c.function.arguments + ' came in '
                                   + (deltas.get(i) || 0) + ' delta(s)'));
  assert(fin.choices[0].finish_reason === 'tool_calls', fmt + ' stream: finish_reason ' + fin.choices[0].finish_reason);
  assert(!fin.choices[0].message.content, fmt + ' stream: content ' + JSON.stringify(fin.choices[0].message.content));
  console.log(`ok   ${fmt}: stream() gives one arguments.done per call and finalChatCompletion() resolves`);
  // a tool-call round trip: the assistant's calls and role "tool" results render (Functionary
  // v3.2's template concatenates the arguments: it gets the client's string, the others objects
  // (rlx_chat_template_object_arguments); Mistral's wants 9-character alphanumeric call ids,
  // which its calls get)
  const first = (await client.chat.completions.create(req({ tool_choice: 'required', seed: 7 }))).choices[0].message;
  const history = [...messages, first, ...first.tool_calls.map((c) => ({ role: 'tool', tool_call_id: c.id, content: '{"ok":true}' }))];
  const r2 = await client.chat.completions.create(req({ messages: history, tool_choice: 'auto', max_tokens: 8 }));
  assert(r2.choices.length === 1, fmt + ' round trip: ' + JSON.stringify(r2));
  console.log(`ok   ${fmt}: a role "tool" round trip renders`);
  // runTools: "required" and maxChatCompletions 3 calls the JS function once per completion
  let n = 0;
  const runner = client.chat.completions.runTools({
    ...req({ tool_choice: 'required', parallel_tool_calls: false, seed: 3 }),
    tools: [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city', parameters: weather,
      parse: JSON.parse, function: (args) => {
        n++;
        assert(validators.get_weather(args), fmt + ' runTools: arguments ' + JSON.stringify(args));
        return { temperature: 21 };
      } } }],
  }, { maxChatCompletions: 3 });
  await runner.done();
  assert(n === 3, fmt + ' runTools: the function ran ' + n + ' times');
  console.log(`ok   ${fmt}: runTools() with "required" calls the tool 3 times with valid arguments`);
}

// tool_choice "auto" constrains lazily: free text until the model opens <tool_call>, a valid
// call from there. logit_bias makes this random model open one; without the lazy grammar what
// follows the marker is noise and no call parses.
async function lazyAuto(client, fmt) {
  const tok = await (await fetch(client.baseURL.replace(/\/v1$/, '') + '/tokenize', {
    method: 'POST', body: JSON.stringify({ content: '<tool_call>' }) })).json();
  assert(Array.isArray(tok.tokens) && tok.tokens.length === 1, 'tokenize <tool_call>: ' + JSON.stringify(tok));
  const open = typeof tok.tokens[0] === 'number' ? tok.tokens[0] : tok.tokens[0].id;
  for (let i = 0; i < Math.max(reps, 2); i++) { // both parallel_tool_calls settings
    const r = await client.chat.completions.create({ model: 'm', messages, tools, tool_choice: 'auto', max_tokens: 400,
      temperature: 1.0, seed: 20 + i, logit_bias: { [open]: 100 }, parallel_tool_calls: i % 2 === 0 });
    const ch = r.choices[0];
    assert(ch.finish_reason === 'tool_calls', fmt + ' auto: finish_reason ' + ch.finish_reason + ' ' + JSON.stringify(ch.message));
    checkCalls(ch.message.tool_calls, fmt + ' auto');
    if (i % 2) assert(ch.message.tool_calls.length === 1, fmt + ' auto, parallel_tool_calls false: ' + ch.message.tool_calls.length + ' calls');
  }
  // unbiased, the same request is free text (the model never opens a call): nothing is forced
  const r = await client.chat.completions.create({ model: 'm', messages, tools, tool_choice: 'auto', max_tokens: 16, seed: 1 });
  assert(r.choices[0].finish_reason === 'length' && typeof r.choices[0].message.content === 'string',
         fmt + ' auto unbiased: ' + JSON.stringify(r.choices[0]));
  console.log(`ok   ${fmt}: tool_choice "auto" constrains a call once the model opens one`);
}

// tool_choice "auto" for the formats whose call is the output's JSON (Llama 3, generic): no
// marker, so the lazy grammar starts once an anchored pattern over the output sees a call open
// ({"name":" for Llama 3). logit_bias on the tokens of that text (a little less on each later
// one) with presence and frequency penalties (a token drops below the next once used) makes this
// random model emit them, often in order: the outputs that happen to open a call must come back
// as valid calls (without the lazy grammar what follows the opening is noise and no call
// parses), the others as text that never opened one. An output that opens with { but not a call
// stays free text.
const openingRe = { llama3: /^\s*\{\s*"name"\s*:\s*"/, generic: /^\s*\{\s*"tool_calls"\s*:\s*\[\s*\{\s*"name"\s*:\s*"/ };
async function lazyAutoJson(client, fmt, opening) {
  const base = client.baseURL.replace(/\/v1$/, '');
  const ids = async (content) => {
    const t = await (await fetch(base + '/tokenize', { method: 'POST', body: JSON.stringify({ content, add_special: false }) })).json();
    assert(Array.isArray(t.tokens) && t.tokens.length > 0, 'tokenize ' + content + ': ' + JSON.stringify(t));
    return t.tokens.map((x) => (typeof x === 'number' ? x : x.id));
  };
  const req = (o) => ({ model: 'm', messages, tools, tool_choice: 'auto', temperature: 1.0, ...o });
  if (opening) {
    const bias = Object.fromEntries((await ids(opening)).map((t, k) => [t, 100 - 1.5 * k]));
    let calls = 0, texts = 0;
    for (let i = 0; i < 16 && calls < 3; i++) {
      const r = await client.chat.completions.create(req({ max_tokens: 150, n: 16, seed: 100 + i, logit_bias: bias,
        presence_penalty: 2, frequency_penalty: 2 }));
      for (const ch of r.choices) {
        if (ch.message.tool_calls?.length) {
          assert(ch.finish_reason === 'tool_calls', fmt + ' auto: finish_reason ' + ch.finish_reason + ' ' + JSON.stringify(ch.message));
          checkCalls(ch.message.tool_calls, fmt + ' auto');
          assert(ch.message.tool_calls.length === 1, fmt + ' auto: ' + ch.message.tool_calls.length + ' calls');
          calls++;
        } else {
          assert(!openingRe[fmt].test(ch.message.content || ''), fmt + ' auto: an output opened a call that did not come back valid: ' + JSON.stringify(ch));
          texts++;
        }
      }
    }
    assert(calls >= 3 && texts > 0, fmt + ' auto: ' + calls + ' outputs opened a call, ' + texts + ' did not');
  }
  // biased to {" alone: it opens with {, never with a call, and nothing is constrained
  const brace = (await ids('{"'))[0];
  const r1 = (await client.chat.completions.create(req({ max_tokens: 8, seed: 5, logit_bias: { [brace]: 100 } }))).choices[0];
  const text = (await (await fetch(base + '/detokenize', { method: 'POST', body: JSON.stringify({ tokens: [brace] }) })).json()).content;
  assert(r1.finish_reason === 'length' && !r1.message.tool_calls && typeof r1.message.content === 'string' &&
         r1.message.content.replace(/\s/g, '') === text.replace(/\s/g, '').repeat(8),
         fmt + ' auto, {" only: ' + JSON.stringify(r1) + ' token text ' + JSON.stringify(text));
  // unbiased, the same request is free text (the model never opens a call): nothing is forced
  const r = (await client.chat.completions.create(req({ max_tokens: 16, seed: 1 }))).choices[0];
  assert(r.finish_reason === 'length' && typeof r.message.content === 'string', fmt + ' auto unbiased: ' + JSON.stringify(r));
  console.log(`ok   ${fmt}: tool_choice "auto" ${opening ? 'constrains a call once the output opens one, and ' : ''}leaves text free`);
}

try {
  let client = await start(llama, []);
  await suite(client, 'generic', {});
  await lazyAutoJson(client, 'generic', null);
  // without tools (or with tool_choice "none") the output stays plain text
  const plain = await client.chat.completions.create({ model: 'm', messages, tools, tool_choice: 'none', max_tokens: 8 });
  assert(typeof plain.choices[0].message.content === 'string' && !plain.choices[0].message.tool_calls, 'tool_choice none: ' + JSON.stringify(plain));
  console.log('ok   tool_choice "none" gives text');
  await stop();
  client = await start(qwen, ['--chat-template', template(qwenTpl, 'qwen25')]);
  await suite(client, 'hermes', {});
  await lazyAuto(client, 'hermes');
  await stop();
  client = await start(llama, ['--chat-template', template(llamaTpl, 'llama32')]);
  await suite(client, 'llama3', {});
  await lazyAutoJson(client, 'llama3', '{"name":"');
  await stop();
  for (const [model, tpl, fmt] of textFormats) {
    client = await start(sanitized && fmt !== 'qwen3-coder' ? llama : model, ['--chat-template', template(tpl, fmt)]);
    await suite(client, fmt, {});
    if (fmt === 'qwen3-coder') {
      await lazyAuto(client, fmt);
      // a client's stop string inside a call cuts it as max_tokens does: 200, finish_reason
      // "stop", the text so far (it was a 500 "could not be parsed", streamed: an error event)
      const call = '<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>';
      const g = 'root ::= "' + call.replace(/\n/g, '\\n') + '"';
      for (const stopAt of ['Paris', '</function>']) {
        const body = { model: 'm', messages, tools, tool_choice: 'auto', max_tokens: 200, grammar: g, stop: [stopAt] };
        const r = (await client.chat.completions.create(body)).choices[0];
        assert(r.finish_reason === 'stop', fmt + ' stop inside a call: ' + JSON.stringify(r));
        let finish = null;
        for await (const c of await client.chat.completions.create({ ...body, stream: true })) finish = c.choices[0]?.finish_reason || finish;
        assert(finish === 'stop', fmt + ' stop inside a call, streamed: ' + finish);
      }
      console.log(`ok   ${fmt}: a stop string inside a call ends it as max_tokens does (200, finish_reason stop)`);
      // a call the model breaks after its name (text where a <parameter=...> belongs) is a 500;
      // streamed, the error event comes at the break: the text the model writes after it is not
      // streamed as content first (it was), and the generation stops there
      const broken = '<tool_call>\n<function=get_weather>\nsunny\n</function>\n</tool_call>\nAnd then more text after the break.';
      const bb = { model: 'm', messages, tools, tool_choice: 'auto', max_tokens: 200, grammar: 'root ::= "' + broken.replace(/\n/g, '\\n') + '"' };
      const post = (body) => fetch(client.baseURL + '/chat/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
      let res = await post(bb);
      const jb = await res.json();
      assert(res.status === 500 && /tool call could not be parsed.*get_weather/.test(jb.error?.message || ''), fmt + ' broken call: ' + res.status + ' ' + JSON.stringify(jb));
      res = await post({ ...bb, stream: true });
      const sse = await res.text();
      assert(res.status === 200 && /tool call could not be parsed/.test(sse), fmt + ' broken call, streamed: ' + sse);
      const content = sse.split('\n').filter((l) => l.startsWith('data: {"id"')).map((l) => JSON.parse(l.slice(6)).choices[0]?.delta?.content || '').join('');
      assert(!content.includes('And then') && !sse.includes('finish_reason":"'), fmt + ' broken call, streamed past the break: ' + JSON.stringify(content));
      // the generation stopped at the break: the stream's access-log line (finish=error: it
      // ended with an error event) counts fewer tokens than the whole text has (tool_choice "none")
      const cut = () => log.split('\n').filter((l) => / \/v1\/chat\/completions 200 .*finish=error/.test(l));
      for (let i = 0; i < 200 && !cut().length; i++) await new Promise((r) => setTimeout(r, 20));
      const line = cut().pop() || 'no line with finish=error';
      const got = Number((/completion_tokens=(\d+)/.exec(line) || [])[1]);
      const whole = (await client.chat.completions.create({ ...bb, tool_choice: 'none' })).usage.completion_tokens;
      assert(got < whole, fmt + ` broken call: ${got} tokens generated of the text's ${whole}: ` + line);
      console.log(`ok   ${fmt}: a call broken after its name is a 500; streamed, an error event at the break`);
    }
    await stop();
  }
  client = await start(qwen, ['--chat-template', template(qwen3Tpl, 'qwen3')]);
  const gbnf = (s) => 'root ::= "' + s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n') + '"';
  const cases = [
    ['<think>\nPlan: call add.\n</think>\n\nDone.', 'Plan: call add.', 'Done.', []],
    ['<think>hm</think>\n<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2.5}}\n</tool_call>', 'hm', '',
     [['add', '{"a":1,"b":2.5}']]],
  ];
  for (const [out, reasoning, content, calls] of cases) {
    const body = { model: 'm', messages, tools, tool_choice: 'auto', max_tokens: 200, grammar: gbnf(out) };
    const r = (await client.chat.completions.create(body)).choices[0];
    const got = [r.message.reasoning_content, r.message.content ?? '', (r.message.tool_calls || []).map((c) => [c.function.name, c.function.arguments])];
    assert(JSON.stringify(got) === JSON.stringify([reasoning, content, calls]), 'qwen3 parsed ' + JSON.stringify(out) + ': ' + JSON.stringify(r.message));
    assert(r.finish_reason === (calls.length ? 'tool_calls' : 'stop'), 'qwen3 finish_reason ' + r.finish_reason);
    const s = { reasoning: '', content: '', calls: {}, frags: {} };
    let finish = null;
    for await (const c of await client.chat.completions.create({ ...body, stream: true })) {
      const d = c.choices[0]?.delta || {};
      s.reasoning += d.reasoning_content || '';
      s.content += d.content || '';
      for (const t of d.tool_calls || []) {
        if (t.id) { assert(!s.calls[t.index] && t.function.arguments === '', 'stream: a second begin for ' + t.index); s.calls[t.index] = [t.function.name, '']; }
        else { s.calls[t.index][1] += t.function.arguments; s.frags[t.index] = (s.frags[t.index] || 0) + 1; }
      }
      finish = c.choices[0]?.finish_reason || finish;
    }
    const sgot = [s.reasoning, s.content, Object.values(s.calls)];
    assert(JSON.stringify(sgot) === JSON.stringify([reasoning, content, calls]), 'qwen3 streamed ' + JSON.stringify(out) + ': ' + JSON.stringify(sgot));
    // a call that opens with its name streams its arguments token by token, as they are generated
    for (const i of Object.keys(s.calls))
      assert(s.frags[i] > 1, 'qwen3 streamed: the arguments of call ' + i + ' came in ' + s.frags[i] + ' fragment(s)');
    assert(finish === r.finish_reason, 'qwen3 streamed finish_reason ' + finish);
  }
  console.log('ok   thinking template: reasoning_content, content and tool_calls, streamed and not (arguments in fragments), no tag text');
  // logprobs with a parser: a streamed entry comes in the chunk of the text it released (a tag's
  // with the next delta), and the stream's entries are the response's, the last ones included
  for (const [out] of cases) {
    const body = { model: 'm', messages, tools, tool_choice: 'auto', max_tokens: 200, grammar: gbnf(out), logprobs: true, top_logprobs: 2, seed: 5 };
    const want = (await client.chat.completions.create(body)).choices[0].logprobs.content.map((e) => e.token);
    const got = [];
    for await (const c of await client.chat.completions.create({ ...body, stream: true })) {
      const ch = c.choices[0];
      const lp = ch?.logprobs?.content || [];
      if (!lp.length) continue;
      const d = ch.delta || {};
      assert(d.content || d.reasoning_content || d.tool_calls || ch.finish_reason,
             'qwen3 logprobs streamed in a chunk with no text: ' + JSON.stringify(c));
      got.push(...lp.map((e) => e.token));
    }
    assert(want.join('') === out && JSON.stringify(got) === JSON.stringify(want),
           'qwen3 logprobs streamed ' + JSON.stringify(got) + ', not streamed ' + JSON.stringify(want));
  }
  console.log('ok   thinking template: streamed logprobs come with their text and match the response');
  // without tools (or with tool_choice "none") the reasoning is split out too, as llama-server
  // splits it (it stayed in the content, tags and all); a call marker then stays text;
  // reasoning_format "none" leaves the text whole
  const think = '<think>\nPlan: greet.\n</think>\n\nHello <tool_call>';
  for (const extra of [{}, { tools, tool_choice: 'none' }]) {
    const body = { model: 'm', messages, max_tokens: 200, grammar: gbnf(think), ...extra };
    const m = (await client.chat.completions.create(body)).choices[0].message;
    assert(m.reasoning_content === 'Plan: greet.' && m.content === 'Hello <tool_call>' && !m.tool_calls,
           'no tools: reasoning not split: ' + JSON.stringify(m));
    let sr = '', sc = '';
    for await (const c of await client.chat.completions.create({ ...body, stream: true })) {
      const d = c.choices[0]?.delta || {};
      sr += d.reasoning_content || '';
      sc += d.content || '';
    }
    assert(sr === 'Plan: greet.' && sc === 'Hello <tool_call>', 'no tools, streamed: ' + JSON.stringify([sr, sc]));
  }
  const raw = (await client.chat.completions.create({ model: 'm', messages, max_tokens: 200, grammar: gbnf(think), reasoning_format: 'none' })).choices[0].message;
  assert(raw.content === think && !raw.reasoning_content, 'reasoning_format none: ' + JSON.stringify(raw));
  // with tools too (the call parser split it all the same)
  const thinkText = '<think>\nPlan: greet.\n</think>\n\nHello';
  for (const stream of [false, true]) {
    const body = { model: 'm', messages, tools, max_tokens: 200, grammar: gbnf(thinkText), reasoning_format: 'none', stream };
    let content = '', reasoning = '';
    if (!stream) ({ content, reasoning_content: reasoning } = (await client.chat.completions.create(body)).choices[0].message);
    else for await (const c of await client.chat.completions.create(body)) { content += c.choices[0]?.delta?.content || ''; reasoning += c.choices[0]?.delta?.reasoning_content || ''; }
    assert(content === thinkText && !reasoning, `reasoning_format none with tools (stream ${stream}): ` + JSON.stringify([content, reasoning]));
  }
  // an agent loop sending one seed, whose turns repeat the same call and result: every call gets
  // its own id (ids came from the seed and the prompt's last 256 bytes, the same from turn 3 on)
  const status = [{ type: 'function', function: { name: 'check_status', parameters: { type: 'object', properties: {}, additionalProperties: false } } }];
  const loop = [...messages], ids = [];
  for (let turn = 0; turn < 5; turn++) {
    const m = (await client.chat.completions.create({ model: 'm', messages: loop, tools: status, max_tokens: 200, seed: 42,
      tool_choice: { type: 'function', function: { name: 'check_status' } }, chat_template_kwargs: { enable_thinking: false } })).choices[0].message;
    assert(m.tool_calls && m.tool_calls.length >= 1, 'agent loop turn ' + turn + ': ' + JSON.stringify(m));
    ids.push(...m.tool_calls.map((c) => c.id));
    loop.push({ role: 'assistant', content: null, tool_calls: m.tool_calls }, ...m.tool_calls.map((c) => ({ role: 'tool', tool_call_id: c.id, content: 'pending' })));
  }
  assert(new Set(ids).size === ids.length, 'seeded agent loop repeated call ids: ' + JSON.stringify(ids));
  let bad = null;
  try { await client.chat.completions.create({ model: 'm', messages, max_tokens: 2, reasoning_format: 'xml' }); } catch (e) { bad = e; }
  assert(bad && bad.status === 400, 'reasoning_format xml: ' + (bad && bad.status));
  console.log('ok   thinking template without tools: reasoning_content split, streamed and not; reasoning_format none keeps it (with tools too); seeded agent turns get new call ids');
  // continue_final_message of an assistant message whose reasoning is open: the output goes on
  // inside it (it came back as content " more</think>answer")
  const cont = { model: 'm', messages: [...messages, { role: 'assistant', content: '<think>\nI think' }], add_generation_prompt: false,
                 continue_final_message: true, max_tokens: 30, grammar: gbnf(' more</think>answer') };
  const cm = (await client.chat.completions.create(cont)).choices[0].message;
  assert(cm.reasoning_content === ' more' && cm.content === 'answer', 'continued reasoning: ' + JSON.stringify(cm));
  let cr = '', cc = '';
  for await (const c of await client.chat.completions.create({ ...cont, stream: true })) {
    cr += c.choices[0]?.delta?.reasoning_content || '';
    cc += c.choices[0]?.delta?.content || '';
  }
  assert(cr === ' more' && cc === 'answer', 'continued reasoning, streamed: ' + JSON.stringify([cr, cc]));
  console.log('ok   continue_final_message inside an open reasoning block continues the reasoning');
  await stop();
} catch (e) {
  fail(e.stack || String(e));
}
clearTimeout(killer);
rmSync(tmp, { recursive: true, force: true });
console.log('all passed');
