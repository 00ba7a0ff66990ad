// json_schema_many.mjs - helper of test_server_json_schema_many.sh (not a test by itself): 64
// chat requests in flight at once, each with its own JSON schema (every schema holds a constant
// of its own, so no two accept the same output), ROUNDS times, against a running rlxd serving a
// random-weight model. Every output must finish with "stop", parse, validate against its own
// schema (Ajv) and fail the schema of the request beside it of the same shape: a constraint
// crossed between sequences, or shared, would show. Usage: node json_schema_many.mjs URL [ROUNDS]
import Ajv2020 from 'ajv/dist/2020.js';

const base = process.argv[2];
const rounds = Number(process.argv[3] || 2);
const M = 64;

function schemaOf(i) {
  switch (i % 4) {
    case 0: return { type: 'object', properties: { id: { const: i }, v: { type: 'integer', minimum: i, maximum: i + 3 } },
      required: ['id', 'v'], additionalProperties: false };
    case 1: return { type: 'array', items: { enum: [`s${i}a`, `s${i}b`] }, minItems: 1, maxItems: 3 };
    case 2: return { type: 'object', properties: { tag: { const: `t${i}` }, s: { type: 'string', maxLength: 1 + (i % 5) } },
      required: ['tag', 's'], additionalProperties: false };
    default: return { anyOf: [{ const: i * 7 }, { type: 'string', pattern: `^x${i}-[a-c]{1,3}$` }] };
  }
}

const ajv = new Ajv2020({ strict: false, allErrors: true });
const schemas = Array.from({ length: M }, (_, i) => schemaOf(i));
const validators = schemas.map((s) => ajv.compile(s));

async function one(i) {
  const r = await fetch(base + '/v1/chat/completions', {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: `Request ${i}: answer in JSON.` }], max_tokens: 80,
      temperature: 1.0, response_format: { type: 'json_schema', json_schema: { name: `s${i}`, schema: schemas[i], strict: true } } }),
  });
  const body = await r.json();
  if (r.status !== 200) throw new Error(`request ${i}: HTTP ${r.status} ${JSON.stringify(body)}`);
  return body.choices[0];
}

const t0 = Date.now();
const bad = [];
let valid = 0;
for (let round = 0; round < rounds; round++) {
  const choices = await Promise.all(Array.from({ length: M }, (_, i) => one(i)));
  choices.forEach((c, i) => {
    const text = c.message.content;
    if (c.finish_reason !== 'stop') { bad.push(`request ${i}: finish_reason ${c.finish_reason}: ${text}`); return; }
    let v;
    try { v = JSON.parse(text); } catch { bad.push(`request ${i}: not JSON: ${text}`); return; }
    if (!validators[i](v)) { bad.push(`request ${i}: invalid for its schema: ${text} ${ajv.errorsText(validators[i].errors)}`); return; }
    const other = (i + 4) % M;
    if (validators[other](v)) { bad.push(`request ${i}: ${text} also validates against schema ${other}`); return; }
    valid++;
  });
}
console.log(`${rounds} rounds x ${M} concurrent requests with ${M} schemas: ${valid} valid, ${bad.length} bad, in ` +
            `${((Date.now() - t0) / 1000).toFixed(1)} s`);
for (const b of bad.slice(0, 5)) console.log('  ' + b);
if (bad.length || valid !== rounds * M) process.exit(1);
