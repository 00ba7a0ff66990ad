// test_openai_parse.mjs - the official `openai` npm client's structured-output helpers against a
// real `rlxd serve` with a random-weight model (synth-llama-tiny: only the constraint makes the
// output valid), issue 15: chat.completions.parse() with a zod-less response_format json_schema
// gives message.parsed equal to the content and valid for the schema (Ajv) for several schemas
// and seeds (the helper throws on a "length" finish, so every output must be complete);
// chat.completions.stream() with the same response_format streams deltas and resolves
// finalChatCompletion() with content that validates (the client leaves message.parsed null in
// streams unless the format is a zod one); parse() with a strict function tool and tool_choice "required" gives
// parsed_arguments that validate; json_object gives an object. Exits 77 (skip) when something
// is missing.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startDaemon } from './daemon_lib.mjs';
import { isDeepStrictEqual } from 'node:util';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const bin = join(process.env.RLX_BIN || join(root, 'build'), 'rlxd');
const shared = process.env.RLX_SHARED || join(root, '..', 'shared');
const skip = (why) => { console.log('skip: ' + why); process.exit(77); };
if (!existsSync(bin)) skip(bin + ' not built');
const model = join(shared, 'models', 'synth-llama-tiny-f32.gguf');
if (!existsSync(model)) skip(model + ' absent (reference data in ../shared)');
let OpenAI, Ajv2020, addFormats;
try {
  ({ default: OpenAI } = await import('openai'));
  ({ default: Ajv2020 } = await import('ajv/dist/2020.js'));
  ({ default: addFormats } = await import('ajv-formats'));
} catch {
  skip('the openai / ajv packages are not installed: run npm ci in tests/integration');
}

let child = null, log = '';
const killer = setTimeout(() => { console.error('timeout\n' + log.slice(-3000)); child?.kill('SIGKILL'); process.exit(1); }, 300000);
const fail = (msg) => {
  console.error('FAIL: ' + msg + '\n--- server log:\n' + log.slice(-2000));
  child?.kill('SIGKILL');
  process.exit(1);
};
const assert = (c, msg) => { if (!c) fail(msg); };

async function start() {
  let base;
  ({ child, base } = await startDaemon(bin, ['-m', model + ':m', '--ctx', '2048'], (d) => { log += d; }));
  assert(base, 'no port in the log');
  return new OpenAI({ baseURL: base + '/v1', apiKey: 'none', maxRetries: 0 });
}

const schemas = {
  person: { type: 'object', properties: { name: { type: 'string', minLength: 1, maxLength: 10 },
    age: { type: 'integer', minimum: 0, maximum: 120 }, tags: { type: 'array', items: { enum: ['a', 'b', 'c'] }, maxItems: 3 } },
    required: ['name', 'age', 'tags'], additionalProperties: false },
  choice: { type: 'object', properties: { answer: { enum: ['yes', 'no', 'caf\u00e9'] }, sure: { type: 'boolean' } },
    required: ['answer', 'sure'], additionalProperties: false },
  when: { type: 'object', properties: { day: { type: 'string', format: 'date' }, id: { type: 'string', format: 'uuid' } },
    required: ['day', 'id'], additionalProperties: false },
};
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
const messages = [{ role: 'user', content: 'Answer in JSON.' }];

try {
  const client = await start();
  const parse = client.chat.completions.parse ? client.chat.completions.parse.bind(client.chat.completions)
    : client.beta.chat.completions.parse.bind(client.beta.chat.completions);
  for (const [name, schema] of Object.entries(schemas)) {
    const validate = ajv.compile(schema);
    for (let seed = 0; seed < 5; seed++) {
      const r = await parse({ model: 'm', messages, max_tokens: 300, temperature: 1.0, seed,
        response_format: { type: 'json_schema', json_schema: { name, schema, strict: true } } });
      const m = r.choices[0].message;
      assert(r.choices[0].finish_reason === 'stop', `${name}: finish_reason ${r.choices[0].finish_reason}`);
      assert(m.parsed && isDeepStrictEqual(m.parsed, JSON.parse(m.content)), `${name}: parsed ${JSON.stringify(m.parsed)} vs ${m.content}`);
      assert(validate(m.parsed), `${name}: ${m.content} does not validate: ${ajv.errorsText(validate.errors)}`);
    }
  }
  console.log(`ok   chat.completions.parse() with json_schema: message.parsed valid for ${Object.keys(schemas).length} schemas x 5 seeds`);

  const stream = client.chat.completions.stream({ model: 'm', messages, max_tokens: 300, temperature: 1.0, seed: 9,
    response_format: { type: 'json_schema', json_schema: { name: 'person', schema: schemas.person, strict: true } } });
  let chunks = 0;
  stream.on('content.delta', () => { chunks++; });
  const fin = await stream.finalChatCompletion();
  const pm = fin.choices[0].message;
  assert(chunks > 1, 'stream: ' + chunks + ' content deltas');
  // the client fills message.parsed in streams only for zod (auto-parsable) formats; its content is ours
  let sv;
  try { sv = JSON.parse(pm.content); } catch { fail('stream: content is not JSON: ' + pm.content); }
  assert(fin.choices[0].finish_reason === 'stop' && ajv.validate(schemas.person, sv), 'stream: ' + JSON.stringify(fin.choices[0]));
  console.log('ok   chat.completions.stream() with json_schema: finalChatCompletion() content validates');

  const args = schemas.person;
  const tr = await parse({ model: 'm', messages, max_tokens: 300, temperature: 1.0, seed: 4, tool_choice: 'required',
    parallel_tool_calls: false,
    tools: [{ type: 'function', function: { name: 'save_person', parameters: args, strict: true } }] });
  const calls = tr.choices[0].message.tool_calls;
  assert(tr.choices[0].finish_reason === 'tool_calls' && calls?.length === 1, 'tool parse: ' + JSON.stringify(tr.choices[0]));
  assert(calls[0].function.name === 'save_person', 'tool parse: name ' + calls[0].function.name);
  assert(ajv.validate(args, calls[0].function.parsed_arguments), 'tool parse: parsed_arguments ' + JSON.stringify(calls[0].function));
  console.log('ok   chat.completions.parse() with a strict tool: parsed_arguments validate');

  const jo = await client.chat.completions.create({ model: 'm', messages, max_tokens: 300, temperature: 1.0, seed: 2,
    response_format: { type: 'json_object' } });
  if (jo.choices[0].finish_reason === 'stop') {
    const v = JSON.parse(jo.choices[0].message.content);
    assert(v && typeof v === 'object' && !Array.isArray(v), 'json_object: ' + jo.choices[0].message.content);
  }
  console.log('ok   json_object gives an object (when complete)');

  child.kill('SIGTERM');
  const code = await new Promise((r) => child.on('exit', (c) => r(c)));
  assert(code === 0, 'exit status after SIGTERM: ' + code);
} catch (e) {
  fail(e.stack || String(e));
}
clearTimeout(killer);
console.log('all passed');
