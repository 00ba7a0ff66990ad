// test_pull.mjs - `rlxd pull` and `rlxd serve -m hf:...` against a local HTTP server (node, on
// 127.0.0.1) laid out as Hugging Face is: /api/models/OWNER/REPO (the listing), OWNER/REPO/
// resolve/main/FILE (a 302 to a /cdn/ URL carrying X-Linked-Etag, as Hugging Face answers for
// LFS files, or the file itself with its sha256 as ETag), Range requests (206, 416). Checks: a
// fresh download picks the quantization by the default order (a projector left out) and
// verifies the sha256; a second pull downloads nothing; a .part left by an earlier run resumes
// with Range; a first response cut mid-body resumes in the same run (split GGUF: both parts);
// a server that ignores Range restarts the file; a wrong checksum is refused and the file
// removed; a gated repo answers 401 without the token and 200 with HF_TOKEN (sent as Bearer),
// a wrong --token is refused; 403, 404 and an unreachable server are clear errors; `serve -m
// hf:OWNER/REPO:QUANT` downloads into the cache, serves the model under that name, and serves
// it again from the cache with the server unreachable; a model in the Hugging Face hub cache
// (another tool's download) is used by pull and serve without a download; a pull waits while
// another holds the folder's lock. Then: two subfolders' files of one base name stay apart
// (local names Q8_0%2Fmodel.gguf, picked offline by :QUANT, listed by --models-dir); a file that
// changes between a cut and the resume is never spliced (If-Range; a 206 without or with
// another validator, also from a .part.etag of an earlier run, starts over); tokens lose line
// ends (no header injection), a control character is refused, a long one is sent whole; without
// a sha256 an error page, an empty or cut-short answer is removed; messages for answers without
// the file, nothing arrived, escaped server text, a listing over 16 MiB, long names, a full disk,
// a path too long; a .part already whole is used; a restarted .part is not "(resumed)".
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startDaemon } from './daemon_lib.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const binDir = process.env.RLX_BIN || join(root, 'build');
const bin = join(binDir, 'rlxd');
const synth = join(binDir, 'rlxd-synth');
const skip = (why) => { console.log('skip: ' + why); process.exit(77); };
if (!existsSync(bin)) skip(bin + ' not built');
if (!existsSync(synth)) skip(synth + ' not built');
if (/without libcurl/.test(spawnSync(bin, ['pull', 'hf:a/b'], { env: { ...process.env, HF_ENDPOINT: 'http://127.0.0.1:1' } }).stderr))
  skip('this rlxd was built without libcurl');

const tmp = mkdtempSync(join(tmpdir(), 'rlx-pull-'));
let failures = 0;
const fail = (msg) => { console.error('FAIL: ' + msg); failures++; };
const check = (cond, msg) => { if (!cond) fail(msg); };
const sha = (b) => createHash('sha256').update(b).digest('hex');

// ---- the repositories -------------------------------------------------------------------------
function synthFile(args, out) {
  const r = spawnSync(synth, [...args, '-o', join(tmp, out)]);
  if (r.status !== 0) throw new Error('rlxd-synth: ' + r.stderr);
}
synthFile(['--arch', 'llama', '--preset', 'tiny', '--type', 'q8_0', '--seed', '1'], 'tiny-q8.gguf');
synthFile(['--arch', 'llama', '--preset', 'tiny', '--type', 'q8_0', '--seed', '2'], 'tiny-f16.gguf');
synthFile(['--arch', 'qwen3', '--preset', 'tiny', '--type', 'q8_0', '--seed', '3', '--split', '2'], 'split-Q8_0.gguf');
const rd = (f) => readFileSync(join(tmp, f));
// GGUF v3 with no metadata and one F32 tensor "w" of 2^38 values (1 TiB) at offset 0
function hugeHeader() {
  const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); return b; };
  const u64 = (v) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); return b; };
  return Buffer.concat([Buffer.from('GGUF'), u32(3), u64(1), u64(0), u64(1), Buffer.from('w'), u32(1), u64(2 ** 38), u32(0), u64(0)]);
}
const file = (data, opts = {}) => ({ data, sha: sha(data), ...opts });
const repos = {
  'org/tiny': {
    'README.md': file(Buffer.from('# tiny\n')),
    'tiny-Q8_0.gguf': file(rd('tiny-q8.gguf'), { redirect: true }),
    'tiny-F16.gguf': file(rd('tiny-f16.gguf'), { redirect: true }),
    'mmproj-tiny-Q4_K_M.gguf': file(Buffer.from('a projector, never picked')),
  },
  'org/split': {
    // parts served directly, their sha256 as ETag; part 1's first response is cut mid-body
    'split-Q8_0-00001-of-00002.gguf': file(rd('split-Q8_0-00001-of-00002.gguf'), { cut: 1 }),
    'split-Q8_0-00002-of-00002.gguf': file(rd('split-Q8_0-00002-of-00002.gguf')),
  },
  'org/bad': { 'bad-Q8_0.gguf': file(rd('tiny-q8.gguf'), { redirect: true, claim: sha(Buffer.from('other')) }) },
  'org/gated': { 'gated-Q8_0.gguf': file(rd('tiny-q8.gguf'), { redirect: true, token: 'secret-token' }) },
  'org/plain': { 'plain.gguf': file(rd('tiny-f16.gguf'), { noRange: true }) },
  'org/hubonly': { 'hub-Q8_0.gguf': file(rd('tiny-q8.gguf')) },
  // two subfolders with one base name: each keeps its own file
  'org/folders': { 'Q4_K_M/model.gguf': file(rd('tiny-f16.gguf')), 'Q8_0/model.gguf': file(rd('tiny-q8.gguf')) },
  // the file changes on the server after a first answer cut mid-body: the resume must not splice
  // the two. changeA: If-Range honoured (the second version comes whole); changeB: If-Range
  // ignored, the resume a 206 without ETag; changeC: git sha1 ETags, the .part from an earlier run
  'org/change': {
    'changeA-Q8_0.gguf': file(rd('tiny-q8.gguf'), { cut: 1, next: rd('tiny-f16.gguf') }),
    'changeB-Q8_0.gguf': file(rd('tiny-q8.gguf'), { cut: 1, next: rd('tiny-f16.gguf'), ignoreIfRange: true, nextNoEtag: true }),
    'changeC-Q8_0.gguf': file(rd('tiny-q8.gguf'), { cut: 1, next: rd('tiny-f16.gguf'), ignoreIfRange: true, sha1: true }),
  },
  'org/gated2': { 'g2-Q8_0.gguf': file(rd('tiny-q8.gguf'), { token: 'T'.repeat(3000) }) },
  // no sha256 stated: an error page, nothing, a body cut short, HTTP answers without the file
  'org/junk': {
    'html.gguf': file(Buffer.from('<html>rate limited</html>'), { noEtag: true }),
    'empty.gguf': file(Buffer.alloc(0), { noEtag: true }),
    'short.gguf': file(rd('tiny-q8.gguf'), { noEtag: true, shortBy: 1000 }),
    'long.gguf': file(Buffer.concat([rd('tiny-q8.gguf'), Buffer.alloc(5000, 1)]), { noEtag: true, noLength: true }),
    // a body that never ends (chunked), after a model and after an error page: sent until the
    // client stops reading, at most 256 MiB (the test's bound; what was sent is counted)
    'endless.gguf': file(rd('tiny-q8.gguf'), { noEtag: true, endless: true }),
    'endlesshtml.gguf': file(Buffer.from('<html>rate limited</html>'), { noEtag: true, endless: true }),
    // a GGUF header whose one tensor claims 1 TiB, then zeros without end: more than any disk here
    'hugeclaim.gguf': file(hugeHeader(), { noEtag: true, endless: true }),
    's204.gguf': file(Buffer.alloc(0), { status: 204 }),
    'noloc.gguf': file(Buffer.alloc(0), { status: 302 }),
    'loop.gguf': file(Buffer.alloc(0), { loop: true }),
    'esc.gguf': file(Buffer.alloc(0), { escError: true }),
    'whole.gguf': file(rd('tiny-q8.gguf'), { redirect: true }),
  },
};
// a repository whose split model's names are very long: the reason must survive in the message
const longName = 'x'.repeat(470) + '-Q8_0-00001-of-00002.gguf';
// a listing over 16 MiB
const hugeListing = JSON.stringify({ siblings: [...Array(900000).fill({ rfilename: 'a.txt' }), { rfilename: 'm-Q8_0.gguf' }] });
// the Hugging Face hub cache (huggingface_hub's layout) holding org/hubonly, as another tool
// left it: refs/main names the snapshot, whose file is a link into blobs/
const hfHome = join(tmp, 'hf');
const hubRepo = join(hfHome, 'hub', 'models--org--hubonly');
mkdirSync(join(hubRepo, 'refs'), { recursive: true });
mkdirSync(join(hubRepo, 'blobs'), { recursive: true });
mkdirSync(join(hubRepo, 'snapshots', 'c0ffee'), { recursive: true });
writeFileSync(join(hubRepo, 'refs', 'main'), 'c0ffee');
const hubSha = sha(rd('tiny-q8.gguf'));
writeFileSync(join(hubRepo, 'blobs', hubSha), rd('tiny-q8.gguf'));
symlinkSync(join('..', '..', 'blobs', hubSha), join(hubRepo, 'snapshots', 'c0ffee', 'hub-Q8_0.gguf'));
const hubFile = join(hubRepo, 'snapshots', 'c0ffee', 'hub-Q8_0.gguf');
const byCdn = new Map();
for (const [repo, fs] of Object.entries(repos))
  for (const [name, f] of Object.entries(fs)) { f.repo = repo; f.name = name; byCdn.set(f.sha + '-' + repo, f); }

// ---- the server -------------------------------------------------------------------------------
const reqs = [];
function authorized(req, f) {
  return !f.token || req.headers.authorization === 'Bearer ' + f.token;
}
function sendBody(req, res, f) {
  if (f.next && f.served) { // the second version of the file, from the second request on
    f.data = f.next; f.sha = sha(f.next); f.next = null;
  }
  f.served = (f.served || 0) + 1;
  const len = f.data.length;
  const etag = f.noEtag || (f.nextNoEtag && f.served > 1) ? undefined
    : '"' + (f.sha1 ? createHash('sha1').update(f.data).digest('hex') : f.claim || f.sha) + '"';
  let range = /^bytes=(\d+)-$/.exec(req.headers.range || '');
  if (range && !f.ignoreIfRange && req.headers['if-range'] && req.headers['if-range'] !== etag) range = null;
  if (f.noLength) { // no Content-Length (chunked): the body's end is whatever arrives
    res.writeHead(200, {});
    return res.end(f.data);
  }
  if (f.endless) {
    res.writeHead(200, {});
    const junk = Buffer.alloc(1 << 16, 7);
    f.sent = f.data.length;
    res.write(f.data);
    const more = () => {
      while (f.sent < (256 << 20) && !res.destroyed) {
        f.sent += junk.length;
        if (!res.write(junk)) return res.once('drain', more);
      }
      res.end();
    };
    res.on('close', () => { f.closed = true; });
    return more();
  }
  if (f.shortBy) { // a Content-Length shorter than the file: the body ends early
    res.writeHead(200, { 'Content-Length': len - f.shortBy });
    return res.end(f.data.subarray(0, len - f.shortBy));
  }
  if (range && !f.noRange) {
    const start = Number(range[1]);
    if (start >= len) {
      res.writeHead(416, { 'Content-Range': `bytes */${len}` });
      res.end();
      return;
    }
    res.writeHead(206, { 'Content-Length': len - start, 'Content-Range': `bytes ${start}-${len - 1}/${len}`,
                         ...(etag ? { ETag: etag } : {}), 'Accept-Ranges': 'bytes' });
    res.end(f.data.subarray(start));
    return;
  }
  res.writeHead(200, { 'Content-Length': len, ...(etag ? { ETag: etag } : {}), 'Accept-Ranges': f.noRange ? 'none' : 'bytes' });
  if (f.cut) {
    f.cut--;
    f.cutAt = Math.floor(len / 3);
    res.write(f.data.subarray(0, f.cutAt), () => setTimeout(() => res.socket.destroy(), 50));
    return;
  }
  res.end(f.data);
}
const server = createServer((req, res) => {
  const url = new URL(req.url, 'http://x');
  reqs.push({ path: url.pathname, range: req.headers.range, auth: req.headers.authorization,
              ifRange: req.headers['if-range'], injected: req.headers['x-injected'] });
  const json = (code, obj) => { res.writeHead(code, { 'Content-Type': 'application/json' }); res.end(JSON.stringify(obj)); };
  let m = /^\/api\/models\/([^/]+\/[^/]+)$/.exec(url.pathname);
  if (m) {
    const fs = repos[m[1]];
    if (m[1] === 'org/long') return json(200, { siblings: [{ rfilename: longName }] });
    if (m[1] === 'org/huge') { res.writeHead(200); return res.end(hugeListing); }
    if (m[1] === 'org/forbidden') return json(403, { error: 'Access to model org/forbidden is restricted' });
    if (!fs) return json(404, { error: 'Repository not found' });
    if (!Object.values(fs).every((f) => authorized(req, f))) return json(401, { error: 'Access to this repo is restricted' });
    return json(200, { id: m[1], siblings: Object.keys(fs).map((rfilename) => ({ rfilename })) });
  }
  m = /^\/([^/]+\/[^/]+)\/resolve\/main\/(.+)$/.exec(url.pathname);
  if (m) {
    const f = repos[m[1]] && repos[m[1]][decodeURIComponent(m[2])];
    if (!f) {
      res.writeHead(404, { 'X-Error-Code': 'EntryNotFound', 'X-Error-Message': 'Entry not found' });
      return res.end('Entry not found');
    }
    if (!authorized(req, f)) { res.writeHead(401); return res.end('Invalid credentials'); }
    if (f.status) { res.writeHead(f.status); return res.end(); }
    if (f.loop) { res.writeHead(302, { Location: url.pathname }); return res.end(); }
    if (f.escError) // node refuses control characters in headers: written by hand
      return res.socket.end('HTTP/1.1 404 Not Found\r\nX-Error-Message: Entry\x1b[31m not found\r\n' +
                            'Content-Length: 0\r\nConnection: close\r\n\r\n');
    if (f.redirect) {
      res.writeHead(302, { Location: `/cdn/${f.sha}-${f.repo}`, 'X-Linked-Etag': '"' + (f.claim || f.sha) + '"',
                           'X-Linked-Size': String(f.data.length), ETag: '"0123456789abcdef0123456789abcdef01234567"' });
      return res.end();
    }
    return sendBody(req, res, f);
  }
  m = /^\/cdn\/(.+)$/.exec(url.pathname);
  if (m && byCdn.has(m[1])) return sendBody(req, res, byCdn.get(m[1]));
  res.writeHead(404);
  res.end('no route');
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const base = `http://127.0.0.1:${server.address().port}`;

// rlxd pull ARGS (async: this process serves the files meanwhile)
const cache = join(tmp, 'cache');
const baseEnv = { ...process.env, HF_ENDPOINT: base, XDG_CACHE_HOME: cache };
delete baseEnv.HF_TOKEN;
function pull(args, env = {}, fsizeKiB = 0) {
  return new Promise((resolve) => {
    // fsizeKiB: a file size limit (ulimit -f, SIGXFSZ ignored): writes past it fail as on a full disk
    const child = fsizeKiB
      ? spawn('bash', ['-c', `trap '' XFSZ; ulimit -f ${fsizeKiB}; exec "$0" pull "$@"`, bin, ...args],
              { env: { ...baseEnv, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
      : spawn(bin, ['pull', ...args], { env: { ...baseEnv, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { err += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), 60000);
    child.on('close', (code) => { clearTimeout(timer); resolve({ code, out: out.trim(), err }); });
  });
}
const M = join(tmp, 'models');
const same = (path, f) => existsSync(path) && sha(readFileSync(path)) === f.sha;

try {
  // 1. fresh download: default order (Q4_K_M is only a projector's: left out) -> Q8_0; redirect
  let n0 = reqs.length;
  let r = await pull(['hf:org/tiny', '--models-dir', M]);
  const tinyQ8 = join(M, 'org--tiny', 'tiny-Q8_0.gguf');
  check(r.code === 0, `pull hf:org/tiny: exit ${r.code}: ${r.err}`);
  check(r.out === tinyQ8, `pull printed '${r.out}', expected ${tinyQ8}`);
  check(same(tinyQ8, repos['org/tiny']['tiny-Q8_0.gguf']), 'tiny-Q8_0.gguf differs from the served file');
  check(/sha256 verified/.test(r.err), 'no "sha256 verified": ' + r.err);
  let seen = reqs.slice(n0).map((q) => q.path);
  check(seen.includes('/api/models/org/tiny') && seen.includes('/org/tiny/resolve/main/tiny-Q8_0.gguf') &&
        seen.some((p) => p.startsWith('/cdn/')), 'listing, resolve and the redirect were not all requested: ' + seen);
  check(!seen.some((p) => /mmproj|F16/.test(p)), 'fetched a file it should not have: ' + seen);
  check(!existsSync(tinyQ8 + '.part'), 'a .part file is left');

  // 2. again: nothing downloaded
  n0 = reqs.length;
  r = await pull(['hf:org/tiny:q8_0', '--models-dir', M]);
  check(r.code === 0 && /already downloaded/.test(r.err), `second pull: ${r.code} ${r.err}`);
  check(!reqs.slice(n0).some((q) => q.path.includes('/resolve/')), 'the second pull downloaded again');

  // 3. a .part from an earlier run resumes with Range
  const f16 = repos['org/tiny']['tiny-F16.gguf'];
  const f16Path = join(M, 'org--tiny', 'tiny-F16.gguf');
  writeFileSync(f16Path + '.part', f16.data.subarray(0, 1000));
  n0 = reqs.length;
  r = await pull(['hf:org/tiny:F16', '--models-dir', M]);
  check(r.code === 0, `resume: exit ${r.code}: ${r.err}`);
  check(same(f16Path, f16), 'the resumed file differs from the served file');
  check(reqs.slice(n0).some((q) => q.path.startsWith('/cdn/') && q.range === 'bytes=1000-'),
        'no Range: bytes=1000- request: ' + JSON.stringify(reqs.slice(n0)));
  check(/resuming at 1000 bytes/.test(r.err) && /\(resumed\)/.test(r.err), 'no resume message: ' + r.err);

  // 4. split GGUF: both parts; part 1's first response is cut and resumed in the same run
  n0 = reqs.length;
  r = await pull(['hf:org/split:Q8_0', '--models-dir', M]);
  const p1 = repos['org/split']['split-Q8_0-00001-of-00002.gguf'], p2 = repos['org/split']['split-Q8_0-00002-of-00002.gguf'];
  check(r.code === 0, `split: exit ${r.code}: ${r.err}`);
  check(r.out === join(M, 'org--split', 'split-Q8_0-00001-of-00002.gguf'), 'split: printed ' + r.out);
  check(same(join(M, 'org--split', p1.name), p1) && same(join(M, 'org--split', p2.name), p2), 'split parts differ');
  check(/connection cut at/.test(r.err) && /2 split parts/.test(r.err), 'split: messages: ' + r.err);
  check(reqs.slice(n0).some((q) => q.path.endsWith(p1.name) && q.range === `bytes=${p1.cutAt}-`),
        `no resume of part 1 at ${p1.cutAt}: ` + JSON.stringify(reqs.slice(n0)));
  const served = spawnSync(bin, ['check', r.out]);
  check(served.status === 0, 'rlxd check on the pulled split model: ' + served.stdout + served.stderr);

  // 5. a server that ignores Range: the .part (here not even a prefix) is started over
  const plain = repos['org/plain']['plain.gguf'];
  const plainPath = join(M, 'org--plain', 'plain.gguf');
  r = await pull(['hf:org/plain/plain.gguf', '--models-dir', M, '-q']);
  check(r.code === 0 && same(plainPath, plain), `plain: ${r.code} ${r.err}`);
  rmSync(plainPath);
  writeFileSync(plainPath + '.part', Buffer.alloc(500, 7));
  r = await pull(['hf:org/plain/plain.gguf', '--models-dir', M, '-q']);
  check(r.code === 0 && same(plainPath, plain), `plain after a stale .part: ${r.code} ${r.err}`);

  // 5b. a NAME.part planted as a symbolic link (a shared folder): the pull wrote through it into the
  //     file it named, and the model became that link; now the link is replaced by a real file
  const victim = join(tmp, 'victim.txt');
  writeFileSync(victim, 'keep me');
  rmSync(plainPath);
  symlinkSync(victim, plainPath + '.part');
  symlinkSync(victim, plainPath + '.part.etag');
  r = await pull(['hf:org/plain/plain.gguf', '--models-dir', M, '-q']);
  check(r.code === 0 && same(plainPath, plain), `plain after a planted .part link: ${r.code} ${r.err}`);
  check(readFileSync(victim, 'utf8') === 'keep me', 'the pull wrote through a .part link');
  check(!lstatSync(plainPath).isSymbolicLink(), 'the model is a symbolic link');

  // 6. a wrong checksum: refused, nothing left
  r = await pull(['hf:org/bad/bad-Q8_0.gguf', '--models-dir', M]);
  const badPath = join(M, 'org--bad', 'bad-Q8_0.gguf');
  check(r.code === 1, `bad checksum: exit ${r.code}`);
  check(/checksum mismatch/.test(r.err) && r.err.includes(sha(Buffer.from('other'))), 'bad checksum message: ' + r.err);
  check(!existsSync(badPath) && !existsSync(badPath + '.part'), 'the bad file was kept');

  // 7. gated: 401 without a token, 200 with HF_TOKEN (as Bearer), a wrong --token refused
  r = await pull(['hf:org/gated', '--models-dir', M]);
  check(r.code === 1 && /401/.test(r.err) && /HF_TOKEN/.test(r.err), `gated without token: ${r.code} ${r.err}`);
  check(!existsSync(join(M, 'org--gated', 'gated-Q8_0.gguf')), 'gated: a file without the token');
  r = await pull(['hf:org/gated/gated-Q8_0.gguf', '--models-dir', M, '--token', 'wrong']);
  check(r.code === 1 && /401/.test(r.err) && /token was refused/.test(r.err), `gated, wrong token: ${r.code} ${r.err}`);
  n0 = reqs.length;
  r = await pull(['hf:org/gated', '--models-dir', M], { HF_TOKEN: 'secret-token' });
  check(r.code === 0 && same(join(M, 'org--gated', 'gated-Q8_0.gguf'), repos['org/gated']['gated-Q8_0.gguf']),
        `gated with HF_TOKEN: ${r.code} ${r.err}`);
  check(reqs.slice(n0).some((q) => q.auth === 'Bearer secret-token'), 'the token was not sent as Bearer');

  // 8. not found, no such quantization, bad references, an unreachable server
  r = await pull(['hf:org/nothing', '--models-dir', M]);
  check(r.code === 1 && /404/.test(r.err) && /org\/nothing/.test(r.err), `404: ${r.code} ${r.err}`);
  r = await pull(['hf:org/forbidden', '--models-dir', M], { HF_TOKEN: 'secret-token' });
  check(r.code === 1 && /403/.test(r.err) && /terms accepted/.test(r.err), `403: ${r.code} ${r.err}`);
  r = await pull(['hf:org/tiny/missing.gguf', '--models-dir', M]);
  check(r.code === 1 && /404/.test(r.err) && /the server says: Entry not found/.test(r.err), `404 file: ${r.code} ${r.err}`);
  r = await pull(['hf:org/tiny:Q2_K', '--models-dir', M]);
  check(r.code === 1 && /no Q2_K file/.test(r.err) && /tiny-F16\.gguf/.test(r.err), `no such quant: ${r.code} ${r.err}`);
  r = await pull(['org/tiny']);
  check(r.code === 2 && /not a Hugging Face reference/.test(r.err), `bad ref: ${r.code} ${r.err}`);
  r = await pull(['hf:org/tiny', '--models-dir', M], { HF_ENDPOINT: 'http://127.0.0.1:1' });
  check(r.code === 1 && /cannot reach http:\/\/127\.0\.0\.1:1/.test(r.err), `unreachable: ${r.code} ${r.err}`);
  check(readdirSync(M, { recursive: true }).every((p) => !String(p).endsWith('.part')), 'a .part file is left');

  // 9. a model another tool downloaded into the Hugging Face hub cache is used, not fetched
  n0 = reqs.length;
  r = await pull(['hf:org/hubonly', '--models-dir', M], { HF_HOME: hfHome });
  check(r.code === 0 && r.out === hubFile && /already in the Hugging Face cache/.test(r.err), `hub cache: ${r.code} ${r.out} ${r.err}`);
  check(!reqs.slice(n0).some((q) => q.path.includes('/resolve/')), 'the hub cache file was downloaded again');

  // 10. one download into a folder at a time: with the folder locked (flock(1) holds it until
  // its stdin closes) a pull says it waits, then downloads once the lock is let go
  if (spawnSync('flock', ['--version']).status === 0) {
    const lockDir = join(M, 'org--plain');
    rmSync(plainPath);
    const holder = spawn('flock', [lockDir, '-c', 'echo locked; read x'], { stdio: ['pipe', 'pipe', 'inherit'] });
    await new Promise((res) => holder.stdout.on('data', (d) => { if (/locked/.test(d)) res(); }));
    const child = spawn(bin, ['pull', 'hf:org/plain/plain.gguf', '--models-dir', M], { env: baseEnv, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    const done = new Promise((res) => child.on('close', res));
    // (a pull that does not wait ends instead: that fails below rather than hanging)
    await Promise.race([done, new Promise((res) => child.stderr.on('data', (d) => {
      err += d;
      if (/waiting for another download/.test(err)) res();
    }))]);
    check(/waiting for another download/.test(err), 'no wait on the locked folder: ' + err);
    check(!existsSync(plainPath), 'downloaded while the folder was locked');
    holder.stdin.end();
    const code = await done;
    check(code === 0 && same(plainPath, plain), `pull after the lock: ${code} ${err}`);
  } else {
    console.log('note: flock(1) not installed: the folder lock is not checked');
  }

  // 12. two subfolders holding one base name: each its own local file (the sub-path kept, '/'
  // written %2F), never "already downloaded" for the other; also as file references
  const M2 = join(tmp, 'models2');
  const fo = repos['org/folders'];
  const foDir = join(cache, 'rlxd', 'models', 'org--folders'); // where serve -m looks, below
  for (const [ref, name] of [['hf:org/folders:Q4_K_M', 'Q4_K_M/model.gguf'], ['hf:org/folders:Q8_0', 'Q8_0/model.gguf']]) {
    r = await pull([ref, '--models-dir', join(cache, 'rlxd', 'models')]);
    const want = join(foDir, name.replace('/', '%2F'));
    check(r.code === 0 && r.out === want && same(want, fo[name]), `${ref}: ${r.code} ${r.out} ${r.err}`);
    check(!/already downloaded/.test(r.err), `${ref}: another subfolder's file taken: ${r.err}`);
  }
  for (const name of ['Q4_K_M/model.gguf', 'Q8_0/model.gguf']) {
    r = await pull([`hf:org/folders/${name}`, '--models-dir', M2]);
    const want = join(M2, 'org--folders', name.replace('/', '%2F'));
    check(r.code === 0 && r.out === want && same(want, fo[name]), `hf:org/folders/${name}: ${r.code} ${r.out} ${r.err}`);
  }

  // 13. the file changes on the server between a cut and the resume: never spliced. If-Range
  // carries the first answer's ETag (a server that honours it sends the new version whole); a
  // 206 without the ETag, or with another (git sha1 ETags, a .part left by an earlier run: its
  // validator kept in .part.etag), starts the file over
  const ch = repos['org/change'];
  const chDir = join(M2, 'org--change');
  n0 = reqs.length;
  r = await pull(['hf:org/change/changeA-Q8_0.gguf', '--models-dir', M2]);
  check(r.code === 0 && same(join(chDir, 'changeA-Q8_0.gguf'), ch['changeA-Q8_0.gguf']) && /sha256 verified/.test(r.err),
        `changed file, If-Range honoured: ${r.code} ${r.err}`);
  check(reqs.slice(n0).some((q) => q.range && q.ifRange === '"' + sha(rd('tiny-q8.gguf')) + '"'),
        'no If-Range with the first ETag: ' + JSON.stringify(reqs.slice(n0).map((q) => [q.range, q.ifRange])));
  r = await pull(['hf:org/change/changeB-Q8_0.gguf', '--models-dir', M2]);
  check(r.code === 0 && same(join(chDir, 'changeB-Q8_0.gguf'), ch['changeB-Q8_0.gguf']) &&
        /changed on the server/.test(r.err) && !/\(resumed\)/.test(r.err), `changed file, 206 without ETag: ${r.code} ${r.err}`);
  r = await pull(['hf:org/change/changeC-Q8_0.gguf', '--models-dir', M2, '--retries', '0']);
  const chC = join(chDir, 'changeC-Q8_0.gguf');
  check(r.code === 1 && existsSync(chC + '.part') && existsSync(chC + '.part.etag'), `changeC cut: ${r.code} ${r.err}`);
  r = await pull(['hf:org/change/changeC-Q8_0.gguf', '--models-dir', M2]);
  check(r.code === 0 && same(chC, ch['changeC-Q8_0.gguf']) && /changed on the server/.test(r.err),
        `changed file (sha1 ETags), next run: ${r.code} ${r.err}`);
  check(!existsSync(chC + '.part.etag'), 'the .part.etag outlived the download');

  // 14. tokens: line ends and blanks around dropped (no header injection), another control
  // character refused without printing the token, a long token sent whole
  const gDir = join(M2, 'org--gated');
  n0 = reqs.length;
  r = await pull(['hf:org/gated', '--models-dir', M2], { HF_TOKEN: ' secret-token\r\n' });
  check(r.code === 0 && same(join(gDir, 'gated-Q8_0.gguf'), repos['org/gated']['gated-Q8_0.gguf']), `token with CRLF: ${r.code} ${r.err}`);
  rmSync(join(gDir, 'gated-Q8_0.gguf'), { force: true });
  r = await pull(['hf:org/gated', '--models-dir', M2], { HF_TOKEN: 'secret\r\nX-Injected: yes' });
  check(r.code === 1 && reqs.slice(n0).every((q) => !q.injected), `a token split the request: ${r.code} ${r.err}`);
  r = await pull(['hf:org/gated', '--models-dir', M2, '--token', 'secret\x01token']);
  check(r.code === 1 && /--token/.test(r.err) && /control character/.test(r.err) && !r.err.includes('secret'),
        `token with a control character: ${r.code} ${r.err}`);
  r = await pull(['hf:org/gated2', '--models-dir', M2], { HF_TOKEN: 'T'.repeat(3000) });
  check(r.code === 0, `a 3000-character token: ${r.code} ${r.err.slice(0, 300)}`);

  // 15. no sha256 stated: only a whole GGUF file of the stated size takes the name
  const jDir = join(M2, 'org--junk');
  for (const [name, why] of [['html', /not a GGUF file \(it begins '<htm'\)/], ['empty', /empty/],
                             ['short', /not a whole GGUF file/], ['long', /bytes past the GGUF file's last tensor/]]) {
    r = await pull([`hf:org/junk/${name}.gguf`, '--models-dir', M2]);
    check(r.code === 1 && why.test(r.err) && /removed/.test(r.err), `${name}: ${r.code} ${r.err}`);
    check(!existsSync(join(jDir, name + '.gguf')) && !existsSync(join(jDir, name + '.gguf.part')), `${name}: a file is left`);
  }
  // an endless body is stopped once it runs past what the GGUF header (or the lack of one) allows,
  // not kept until the disk is full (it was read to the end, 256 MiB here, and only then refused)
  // a header claiming more than the disk holds is stopped at once (it wrote on and on)
  for (const [name, why] of [['endless', /ran past the \d+ bytes its GGUF header gives the file/],
                             ['endlesshtml', /not a GGUF file/], ['hugeclaim', /the file is \d+ bytes, \d+ more than the \d+ bytes free where it goes/]]) {
    r = await pull([`hf:org/junk/${name}.gguf`, '--models-dir', M2]);
    const f = repos['org/junk'][name + '.gguf'];
    check(r.code === 1 && why.test(r.err) && /stopped and removed/.test(r.err), `${name}: ${r.code} ${r.err}`);
    check(f.sent < (16 << 20), `${name}: the server sent ${f.sent} bytes before the pull stopped`);
    check(!existsSync(join(jDir, name + '.gguf')) && !existsSync(join(jDir, name + '.gguf.part')), `${name}: a file is left`);
  }

  // 16. messages: an answer without the file, nothing arrived, the server's text escaped, a
  // listing too big, long names, a full disk, a path too long
  for (const [name, why] of [['s204', /answered HTTP 204 without the file/], ['noloc', /answered HTTP 302 without the file/],
                             ['loop', /nothing arrived/]]) {
    r = await pull([`hf:org/junk/${name}.gguf`, '--models-dir', M2]);
    check(r.code === 1 && why.test(r.err) && !/kept in/.test(r.err), `${name}: ${r.code} ${r.err}`);
    check(!existsSync(join(jDir, name + '.gguf.part')), `${name}: an empty .part is left`);
  }
  r = await pull(['hf:org/junk/esc.gguf', '--models-dir', M2]);
  check(r.code === 1 && !r.err.includes('\x1b') && r.err.includes('Entry\\x1b[31m not found'), `escape: ${JSON.stringify(r.err)}`);
  r = await pull(['hf:org/huge', '--models-dir', M2]);
  check(r.code === 1 && /larger than 16 MiB/.test(r.err), `huge listing: ${r.code} ${r.err}`);
  r = await pull(['hf:org/long', '--models-dir', M2]);
  check(r.code === 1 && /part\(s\) are missing/.test(r.err), `long names: ${r.code} ${r.err.slice(-300)}`);
  {
    // a write that fails (a full disk, here a file size limit: a .part linked to /dev/full is
    // now replaced by a file of its own, 5b)
    mkdirSync(jDir, { recursive: true });
    r = await pull(['hf:org/junk/whole.gguf', '--models-dir', M2], {}, 1);
    check(r.code === 1 && /File too large/.test(r.err) && r.err.includes('whole.gguf.part'), `write failure: ${r.code} ${r.err}`);
    rmSync(join(jDir, 'whole.gguf.part'), { force: true });
  }
  const longDir = join(tmp, 'd'.repeat(250), 'e'.repeat(250), 'f'.repeat(250), 'g'.repeat(250), 'h'.repeat(250),
                       'i'.repeat(250), 'j'.repeat(250), 'k'.repeat(250), 'l'.repeat(250));
  r = await pull(['hf:org/tiny:Q8_0', '--models-dir', longDir]);
  check(r.code === 1 && /path too long/.test(r.err) && !existsSync(join(tmp, 'd'.repeat(250))), `long --models-dir: ${r.code} ${r.err}`);

  // 17. a .part already whole: the 416's "bytes */SIZE" says so; it is checked and used, not
  // downloaded again; a restarted .part is not "(resumed)"
  const whole = repos['org/junk']['whole.gguf'];
  mkdirSync(jDir, { recursive: true });
  writeFileSync(join(jDir, 'whole.gguf.part'), whole.data);
  n0 = reqs.length;
  r = await pull(['hf:org/junk/whole.gguf', '--models-dir', M2]);
  check(r.code === 0 && same(join(jDir, 'whole.gguf'), whole) && /already whole/.test(r.err) && /sha256 verified/.test(r.err),
        `a whole .part: ${r.code} ${r.err}`);
  check(reqs.slice(n0).every((q) => q.range), 'a whole .part was downloaded again');
  mkdirSync(join(M2, 'org--plain'), { recursive: true });
  writeFileSync(join(M2, 'org--plain', 'plain.gguf.part'), Buffer.alloc(500, 7));
  r = await pull(['hf:org/plain/plain.gguf', '--models-dir', M2]);
  check(r.code === 0 && same(join(M2, 'org--plain', 'plain.gguf'), plain) && !/\(resumed\)/.test(r.err),
        `a restarted .part: ${r.code} ${r.err}`);

  // 11. serve -m hf:OWNER/REPO:QUANT: downloaded into the cache, served under that name
  const logs = [];
  Object.assign(process.env, { HF_ENDPOINT: base, XDG_CACHE_HOME: cache });
  delete process.env.HF_TOKEN;
  for (const endpoint of [base, 'http://127.0.0.1:1']) {
    process.env.HF_ENDPOINT = endpoint; // the second run: the server is unreachable, the cache serves
    let log = '';
    const { child, base: url } = await startDaemon(bin, ['-m', 'hf:org/tiny:Q8_0', '--threads', '1'], (d) => { log += d; });
    try {
      if (!url) { fail(`serve -m hf: (${endpoint}) did not start: ${log}`); continue; }
      const cached = join(cache, 'rlxd', 'models', 'org--tiny', 'tiny-Q8_0.gguf');
      check(same(cached, repos['org/tiny']['tiny-Q8_0.gguf']), 'serve -m hf: did not download into the cache');
      const models = await (await fetch(url + '/v1/models')).json();
      const m = models.data.find((x) => x.id === 'org/tiny:Q8_0');
      check(m && m.meta.path === cached, 'serve -m hf: /v1/models: ' + JSON.stringify(models));
      const res = await fetch(url + '/v1/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ model: 'org/tiny:Q8_0', prompt: 'hello', max_tokens: 2 }) });
      check(res.status === 200, 'serve -m hf: completion status ' + res.status);
    } finally {
      child.kill('SIGTERM');
      await new Promise((r2) => child.on('close', r2));
      logs.push(log);
    }
  }
  // the hub cache serves offline too
  {
    process.env.HF_ENDPOINT = 'http://127.0.0.1:1';
    process.env.HF_HOME = hfHome;
    let log = '';
    const { child, base: url } = await startDaemon(bin, ['-m', 'hf:org/hubonly:Q8_0:hub', '--threads', '1'], (d) => { log += d; });
    try {
      if (!url) fail('serve -m hf: from the hub cache did not start: ' + log);
      else {
        const models = await (await fetch(url + '/v1/models')).json();
        const m = models.data.find((x) => x.id === 'hub');
        check(m && m.meta.path === hubFile, 'serve from the hub cache: ' + JSON.stringify(models));
      }
    } finally {
      child.kill('SIGTERM');
      await new Promise((r2) => child.on('close', r2));
      delete process.env.HF_HOME;
    }
  }
  // offline, :QUANT finds its subfolder's file by the local name; `--models-dir` lists both
  {
    process.env.HF_ENDPOINT = 'http://127.0.0.1:1';
    let log = '';
    const { child, base: url } = await startDaemon(bin, ['-m', 'hf:org/folders:Q8_0:sub', '--models-dir',
                                                         join(cache, 'rlxd', 'models'), '--threads', '1'], (d) => { log += d; });
    try {
      if (!url) fail('serve -m hf:org/folders:Q8_0 offline did not start: ' + log);
      else {
        const models = await (await fetch(url + '/v1/models')).json();
        const m = models.data.find((x) => x.id === 'sub');
        check(m && m.meta.path === join(foDir, 'Q8_0%2Fmodel.gguf'), 'offline subfolder pick: ' + JSON.stringify(models));
        const paths = models.data.map((x) => x.meta && x.meta.path);
        check(paths.includes(join(foDir, 'Q4_K_M%2Fmodel.gguf')), '--models-dir does not list a pulled subfolder file: ' +
              JSON.stringify(models));
      }
    } finally {
      if (child.exitCode === null && child.signalCode === null) { // (one that failed to start has ended)
        child.kill('SIGTERM');
        await new Promise((r2) => child.on('close', r2));
      }
    }
  }
  // a reference that cannot resolve stops the start-up with the reason (the server unreachable:
  // spawnSync blocks this process, which serves the files)
  const bad = spawnSync(bin, ['serve', '-m', 'hf:org/nothing', '--port', '0'],
                        { env: { ...process.env, HF_ENDPOINT: 'http://127.0.0.1:1' }, timeout: 30000 });
  check(bad.status === 1 && /hf:org\/nothing/.test(bad.stderr) && /cannot reach/.test(bad.stderr),
        `serve -m hf:org/nothing: ${bad.status} ${bad.stderr}`);
} finally {
  server.close();
  rmSync(tmp, { recursive: true, force: true });
}
if (failures) process.exit(1);
console.log('test_pull: ok');
