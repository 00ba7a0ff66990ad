// json_schema_check.mjs - helper of test_server_json_schema.sh (not a test by itself): sends
// chat requests with response_format json_schema to a running rlxd serving a random-weight
// model (so only the constraint makes the output valid), SAMPLES samples at temperature 1.0 per
// schema, and checks with Ajv (JSON Schema 2020-12, ajv-formats) that every output that
// finished with "stop" parses and validates. Outputs cut by max_tokens ("length") are counted
// apart and must stay a minority. Usage: node json_schema_check.mjs URL [SAMPLES]
import Ajv2020 from 'ajv/dist/2020.js';
import Ajv07 from 'ajv';
import addFormats from 'ajv-formats';

const base = process.argv[2];
const samples = Number(process.argv[3] || 100);
const N = 16; // choices per request (RLX_MAX_N)

const schemas = {
  person: { type: 'object', properties: { name: { type: 'string', minLength: 1, maxLength: 12 },
    age: { type: 'integer', minimum: 0, maximum: 120 }, member: { type: 'boolean' } }, required: ['name', 'age'],
    additionalProperties: false },
  color_enum: { enum: ['red', 'green', 'blue', 'caf\u00e9', '\u4e2d\u6587', '\ud83d\ude00', 42, null] },
  bool_or_null: { type: ['boolean', 'null'] },
  int_range: { type: 'integer', minimum: -50, exclusiveMaximum: 51 },
  int_list: { type: 'array', items: { type: 'integer', minimum: 100, maximum: 999 }, minItems: 1, maxItems: 4 },
  date: { type: 'string', format: 'date' },
  date_time: { type: 'string', format: 'date-time' },
  uuid: { type: 'string', format: 'uuid' },
  code_pattern: { type: 'string', pattern: '^[A-Z]{3}-\\d{2,4}(-[a-z]x?)?$' },
  tuple: { type: 'array', prefixItems: [{ type: 'string', maxLength: 5 }, { type: 'integer' }, { type: 'boolean' }],
    items: false },
  any_of: { anyOf: [{ type: 'integer', maximum: 0 }, { type: 'string', maxLength: 4 }, { type: 'null' }] },
  one_of: { oneOf: [
    { type: 'object', properties: { kind: { const: 'circle' }, r: { type: 'integer', minimum: 1, maximum: 9 } },
      required: ['kind', 'r'], additionalProperties: false },
    { type: 'object', properties: { kind: { const: 'square' }, side: { type: 'number' } },
      required: ['kind', 'side'], additionalProperties: false }] },
  tree: { $ref: '#/$defs/node', $defs: { node: { type: 'object', properties: {
    v: { type: 'integer', minimum: 0, maximum: 9 },
    kids: { type: 'array', items: { $ref: '#/$defs/node' }, maxItems: 2 } }, required: ['v'], additionalProperties: false } } },
  all_of: { allOf: [
    { type: 'object', properties: { id: { type: 'integer', minimum: 1, maximum: 99999 } }, required: ['id'] },
    { properties: { tag: { enum: ['a', 'b'] }, ok: { type: 'boolean' } }, required: ['tag'] }] },
  nested: { type: 'object', properties: {
    point: { type: 'object', properties: { x: { type: 'number' }, y: { type: 'number' } }, required: ['x', 'y'],
      additionalProperties: false },
    label: { type: 'string', maxLength: 6 },
    when: { type: 'string', format: 'time' } }, required: ['point'], additionalProperties: false },
  const_obj: { const: { version: 2, flags: [true, false], name: 'r\u00e9sum\u00e9 "x"' } },
  optional_only: { type: 'object', properties: { a: { type: 'null' }, b: { type: 'integer', maximum: -1 },
    c: { enum: ['x', 'y'] } }, additionalProperties: false },
  extra_props: { type: 'object', properties: { id: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['id'],
    additionalProperties: { type: 'boolean' }, maxProperties: undefined },
  email: { type: 'string', format: 'email' },
  net: { type: 'object', properties: { host: { type: 'string', format: 'hostname' }, ip: { type: 'string', format: 'ipv4' } },
    required: ['host', 'ip'], additionalProperties: false },
  handle: { type: 'string', pattern: '^[a-z0-9_]+$', minLength: 3, maxLength: 8 },
  unicode_name: { type: 'string', pattern: "^\\p{Lu}[\\p{Ll}' -]{0,10}\\P{L}$" },
  link: { type: 'object', properties: { href: { type: 'string', format: 'uri' } }, required: ['href'],
    additionalProperties: false },
  prob: { type: 'number', minimum: 0, maximum: 1 },
  price: { type: 'object', properties: { p: { type: 'number', exclusiveMinimum: 0, maximum: 1000 },
    t: { type: 'number', minimum: -40, exclusiveMaximum: 60 } }, required: ['p', 't'], additionalProperties: false },
  pattern_props: { type: 'object', properties: { id: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['id'],
    patternProperties: { '^x-[a-z]{1,4}$': { type: 'boolean' } }, additionalProperties: false },
  // more formats (each a subset of ajv-formats' "full" ones), and number formats
  duration: { type: 'string', format: 'duration' },
  uri_ref: { type: 'string', format: 'uri-reference' },
  ipv6: { type: 'string', format: 'ipv6' },
  byte: { type: 'string', format: 'byte' },
  pointers: { type: 'array', prefixItems: [{ type: 'string', format: 'json-pointer' },
    { type: 'string', format: 'relative-json-pointer' }], items: false, minItems: 2 },
  iso_times: { type: 'array', prefixItems: [{ type: 'string', format: 'iso-time' },
    { type: 'string', format: 'iso-date-time' }], items: false, minItems: 2 },
  int32: { type: 'integer', format: 'int32' },
  multiples: { type: 'array', prefixItems: [{ type: 'integer', multipleOf: 25 }, { type: 'number', multipleOf: 8 },
    { type: 'integer', minimum: -10, maximum: 100, multipleOf: 7 }], items: false, minItems: 3 },
  num_formats: { type: 'array', prefixItems: [{ type: 'number', format: 'int32', minimum: -5.5 },
    { type: 'number', format: 'float' }, { format: 'int64' }], items: false, minItems: 3 },
  // Pydantic's tagged union: OpenAPI's discriminator beside the oneOf it annotates
  tagged: { oneOf: [{ $ref: '#/$defs/Cat' }, { $ref: '#/$defs/Dog' }],
    discriminator: { propertyName: 'pet_type', mapping: { cat: '#/$defs/Cat', dog: '#/$defs/Dog' } },
    $defs: { Cat: { type: 'object', properties: { pet_type: { const: 'cat', title: 'Pet Type' }, meows: { type: 'integer', maximum: 9 } },
      required: ['pet_type', 'meows'], title: 'Cat' },
    Dog: { type: 'object', properties: { pet_type: { const: 'dog' }, barks: { type: 'number', maximum: 0 } },
      required: ['pet_type', 'barks'], title: 'Dog' } } },
  // property and item counts the shape decides; draft-07's tuple (checked by a draft-07 Ajv)
  counts: { type: 'object', properties: { m: { type: 'object', properties: { x: { type: 'boolean' } }, minProperties: 1 },
    o: { type: 'object', properties: { a: { type: 'null' }, b: { type: 'null' } }, minProperties: 1, maxProperties: 2,
      additionalProperties: false },
    e: { type: 'object', maxProperties: 0 }, u: { type: 'array', items: { type: 'boolean' }, uniqueItems: false, maxItems: 2 },
    one: { type: 'array', items: { type: 'boolean' }, uniqueItems: true, maxItems: 1 } },
    required: ['m', 'o', 'e', 'u', 'one'], additionalProperties: false },
  // OpenAPI 3.0 forms: nullable, x- extensions, example; Pydantic's allOf around one $ref; base64 content
  openapi: { type: 'object', properties: { n: { type: 'string', nullable: true, maxLength: 3, example: 'ab' },
    e: { allOf: [{ $ref: '#/$defs/E' }], description: 'an enum behind allOf' },
    b: { type: 'string', contentEncoding: 'base64', contentMediaType: 'image/png' } }, required: ['n', 'e', 'b'],
    additionalProperties: false, 'x-origin': 'openapi', $defs: { E: { enum: ['a', 'b'], type: 'string' } } },
  tuple07: { $schema: 'http://json-schema.org/draft-07/schema#', type: 'array',
    items: [{ type: 'integer', maximum: 9 }, { type: 'boolean' }], additionalItems: { type: 'null' }, maxItems: 4 },
};
delete schemas.extra_props.maxProperties;

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
const ajv07 = new Ajv07({ strict: false, allErrors: true }); // the draft-07 schemas ($schema says so)
addFormats(ajv07);

async function one(name, schema, n) {
  const r = await fetch(base + '/v1/chat/completions', {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Answer in JSON.' }], max_tokens: 100, temperature: 1.0, n,
      response_format: { type: 'json_schema', json_schema: { name, schema, strict: true } } }),
  });
  const body = await r.json();
  if (r.status !== 200) throw new Error(`${name}: HTTP ${r.status} ${JSON.stringify(body)}`);
  return body.choices;
}

const t0 = Date.now();
const results = {};
const jobs = []; // thunks, run INFLIGHT at a time (the daemon queues at most 256 sequences)
// A key some object of the JSON text holds twice (decoded: "a" and "\u0061" are one), or null:
// JSON.parse keeps the last value silently, strict parsers refuse it, OpenAI never writes it.
function dupKey(text) {
  const stack = []; // per container: a Set of keys (objects) or null (arrays), and whether a key is next
  for (let i = 0; i < text.length; i++) {
    const ch = text[i], top = stack[stack.length - 1];
    if (ch === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      if (j >= text.length) return null; /* cut inside a string */
      if (top && top.keys && top.expectKey) {
        const k = JSON.parse(text.slice(i, j + 1));
        if (top.keys.has(k)) return k;
        top.keys.add(k);
        top.expectKey = false;
      }
      i = j;
    } else if (ch === '{') stack.push({ keys: new Set(), expectKey: true });
    else if (ch === '[') stack.push({ keys: null, expectKey: false });
    else if (ch === '}' || ch === ']') stack.pop();
    else if (ch === ',' && top && top.keys) top.expectKey = true;
  }
  return null;
}

const INFLIGHT = 6;
for (const [name, schema] of Object.entries(schemas)) {
  const validate = (/draft-07/.test(schema.$schema || '') ? ajv07 : ajv).compile(schema);
  const res = results[name] = { stop: 0, length: 0, bad: [] };
  for (let left = samples; left > 0; left -= N) {
    const n = Math.min(N, left);
    jobs.push(() => one(name, schema, n).then((choices) => {
      for (const c of choices) {
        if (c.finish_reason === 'length') { res.length++; continue; }
        if (c.finish_reason !== 'stop') { res.bad.push(`finish_reason ${c.finish_reason}`); continue; }
        res.stop++;
        let v;
        try { v = JSON.parse(c.message.content); } catch (e) { res.bad.push(`not JSON: ${c.message.content}`); continue; }
        if (!validate(v)) res.bad.push(`invalid: ${c.message.content} ${ajv.errorsText(validate.errors)}`);
        const dup = dupKey(c.message.content);
        if (dup !== null) res.bad.push(`key ${JSON.stringify(dup)} twice: ${c.message.content}`);
      }
    }));
  }
}
let next = 0;
await Promise.all(Array.from({ length: INFLIGHT }, async () => { while (next < jobs.length) await jobs[next++](); }));
let stop = 0, length = 0, bad = 0;
for (const [name, r] of Object.entries(results)) {
  console.log(`${r.bad.length ? 'FAIL' : 'ok  '} ${name.padEnd(14)} stop ${r.stop}  length ${r.length}`);
  for (const b of r.bad.slice(0, 3)) console.log('       ' + b);
  stop += r.stop; length += r.length; bad += r.bad.length;
}
const secs = (Date.now() - t0) / 1000;
console.log(`${Object.keys(schemas).length} schemas x ${samples} samples: ${stop} stopped and valid, ${length} cut by ` +
            `max_tokens, ${bad} invalid, in ${secs.toFixed(1)} s`);
if (bad) process.exit(1);
if (length * 2 >= stop + length) { console.log('FAIL: most outputs were cut by max_tokens'); process.exit(1); }
