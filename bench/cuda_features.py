#!/usr/bin/env python3
"""bench/cuda_features.py - the daemon's backend-dependent paths on a GPU backend, run by
bench/cuda.sh (STEPS=features) on a machine with a GPU; CI has none (the CPU and Vulkan runs of
these paths are the integration tests). Python's standard library only: the GPU image has no
curl or node.

Checks that must hold exactly on any backend (FAIL otherwise, exit status 1):
  sessions   a session's turn after a restart through --db (its KV snapshot written to the
             device by kv_write_block) gives the text of the same turn without the restart
  choices    n=3 greedy choices of one request are identical, and equal the request with n=1
  embed      64 concurrent /v1/embeddings requests give the base64 vectors of 64 solo ones
  schema     16 concurrent json_schema requests at temperature 1 (the grammar's masks beside
             the forward pass, --grammar-aside auto) each give JSON valid for their schema
  preempt    with a KV pool too small for 16 long generations, sequences are preempted and
             recomputed and every request still completes with its max_tokens
Printed for information (a GPU's float sums differ from the CPU's, so greedy texts may part
after a near tie): greedy texts on the backend against the CPU backend's, solo against 16
concurrent, and a prompt again through the prefix cache.

usage: cuda_features.py --bin DIR --shared DIR [--backend cuda] [--out DIR]
"""
import argparse
import base64
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

FAILS = []


def check(name, cond, detail):
    print(f"{'ok  ' if cond else 'FAIL'} {name}: {detail}", flush=True)
    if not cond:
        FAILS.append(name)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, args, name, extra):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(args.out, f"features-{name}.log"), "w")
        cmd = [os.path.join(args.bin, "rlxd"), "serve", "--host", "127.0.0.1", "--port", str(self.port)] + extra
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"rlxd serve exited ({self.proc.returncode}); see features-{name}.log")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        raise RuntimeError("rlxd serve did not become healthy in 120 s")

    def post(self, path, body, timeout=120):
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, {"error": e.read().decode(errors="replace")}

    def metric(self, name):
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + "{") or line.startswith(name + " "):
                    return float(line.rsplit(" ", 1)[1])
        return None

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def parallel(fn, items):
    out = [None] * len(items)

    def run(i):
        try:
            out[i] = fn(items[i])
        except Exception as e:  # reported as that item's result
            out[i] = e
    ts = [threading.Thread(target=run, args=(i,)) for i in range(len(items))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)
    return out


PROMPTS = ["Once upon a time", "The little dog", "Lily and Tom went to the park", "One day, a big bird",
           "Tim had a red ball. He", "The sun was hot and", "Sue wanted to bake a cake", "There was a tiny frog"]


def completions(srv, prompt, max_tokens=48, **kw):
    st, r = srv.post("/v1/completions", dict(prompt=prompt, max_tokens=max_tokens, temperature=0, **kw))
    if st != 200:
        raise RuntimeError(f"{st} {r}")
    return r


def texts_check(args, stories):
    be = args.backend
    cpu = Server(args, "cpu", ["-m", stories + ":st", "--backend", "cpu", "--threads", "4"])
    try:
        want = [completions(cpu, p)["choices"][0]["text"] for p in PROMPTS]
    finally:
        cpu.stop()
    srv = Server(args, be, ["-m", stories + ":st", "--backend", be])
    try:
        solo = [completions(srv, p)["choices"][0]["text"] for p in PROMPTS]
        same = sum(a == b for a, b in zip(solo, want))
        print(f"info greedy texts, {be} against cpu: {same} of {len(PROMPTS)} identical (48 tokens each)")
        conc = parallel(lambda p: completions(srv, p)["choices"][0]["text"], PROMPTS * 2)
        same = sum(a == b for a, b in zip(conc, solo * 2))
        check("concurrent", all(isinstance(c, str) for c in conc), f"16 concurrent requests answered")
        print(f"info greedy texts, 16 concurrent against solo on {be}: {same} of 16 identical")
        long = " ".join(PROMPTS) * 3
        a = completions(srv, long)
        b = completions(srv, long)
        cached = b["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)
        check("prefix-cache", cached > 0, f"the second request of one prompt found {cached} of "
              f"{b['usage']['prompt_tokens']} prompt tokens cached")
        print(f"info the prompt again through the prefix cache gives the same text: "
              f"{a['choices'][0]['text'] == b['choices'][0]['text']}")
        r = completions(srv, PROMPTS[0], n=3)
        ch = [c["text"] for c in r["choices"]]
        check("choices", len(ch) == 3 and ch[0] == ch[1] == ch[2] == solo[0],
              f"n=3 greedy: {'identical, and equal to n=1' if len(set(ch)) == 1 and ch[0] == solo[0] else ch}")
    finally:
        srv.stop()


def sessions_check(args, stories):
    be = args.backend
    texts = []
    for restart in (False, True):
        db = os.path.join(args.out, f"sessions-{int(restart)}.db")
        if os.path.exists(db):
            os.remove(db)
        srv = Server(args, f"sessions-{int(restart)}", ["-m", stories + ":st", "--backend", be, "--db", db])
        try:
            st, r1 = srv.post("/v1/generate", {"prompt": PROMPTS[2] + ". They played", "max_tokens": 24, "temperature": 0,
                                               "session_id": "s1"})
            if st != 200:
                check("sessions", False, f"turn 1: {st} {r1}")
                return
            if restart:
                srv.stop()
                srv = Server(args, "sessions-1b", ["-m", stories + ":st", "--backend", be, "--db", db])
            st, r2 = srv.post("/v1/generate", {"prompt": " Then", "max_tokens": 24, "temperature": 0, "session_id": "s1"})
            if st != 200:
                check("sessions", False, f"turn 2{' after restart' if restart else ''}: {st} {r2}")
                return
            texts.append((r2["text"], r2["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)))
        finally:
            srv.stop()
    (t0, c0), (t1, c1) = texts
    check("sessions", t0 == t1 and c1 >= 16, f"turn 2 after a restart (KV snapshot restored, {c1} tokens cached) "
          f"{'gives' if t0 == t1 else 'does NOT give'} the text without the restart")


def preempt_check(args, stories):
    be = args.backend
    srv = Server(args, "preempt", ["-m", stories + ":st", "--backend", be, "--kv-mem", "1", "--max-seqs", "16"])
    try:
        rs = parallel(lambda p: srv.post("/v1/completions", dict(prompt=p, max_tokens=200, temperature=0,
                                                                 ignore_eos=True)), PROMPTS * 2)
        done = sum(1 for r in rs if isinstance(r, tuple) and r[0] == 200
                   and r[1]["usage"]["completion_tokens"] == 200)
        pre = srv.metric("rlxd_preemptions_total")
        check("preempt", done == 16 and (pre or 0) > 0, f"{done} of 16 requests of 200 tokens completed in a 1 MiB "
              f"KV pool; {pre:.0f} preemptions" if pre is not None else "no rlxd_preemptions_total")
        if done < 16:
            bad = [r for r in rs if not (isinstance(r, tuple) and r[0] == 200)]
            print(f"     first failure: {str(bad[0])[:300] if bad else '-'}")
    finally:
        srv.stop()


SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
    "ok": {"type": "boolean"}}, "required": ["name", "age", "tags", "ok"], "additionalProperties": False}


def valid(v):
    return (isinstance(v, dict) and list(v.keys()) == ["name", "age", "tags", "ok"] and isinstance(v["name"], str)
            and len(v["name"]) <= 12 and isinstance(v["age"], int) and not isinstance(v["age"], bool)
            and 0 <= v["age"] <= 120 and isinstance(v["tags"], list) and len(v["tags"]) <= 3
            and all(t in ("a", "b", "c") for t in v["tags"]) and isinstance(v["ok"], bool))


def schema_check(args, model):
    be = args.backend
    srv = Server(args, "schema", ["-m", model + ":m", "--backend", be])
    try:
        def one(seed):
            st, r = srv.post("/v1/chat/completions", {
                "messages": [{"role": "user", "content": "A person as JSON"}], "max_tokens": 200, "temperature": 1.0,
                "seed": seed, "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}}})
            if st != 200:
                return f"{st} {r}"
            c = r["choices"][0]
            if c["finish_reason"] != "stop":
                return "length"
            try:
                return "valid" if valid(json.loads(c["message"]["content"])) else "INVALID " + c["message"]["content"]
            except ValueError:
                return "NOT JSON " + c["message"]["content"]
        rs = parallel(one, list(range(16)))
        nvalid, nlen = rs.count("valid"), rs.count("length")
        bad = [r for r in rs if r not in ("valid", "length")]
        check("schema", not bad and nvalid >= 1, f"{nvalid} valid, {nlen} cut at max_tokens, {len(bad)} wrong"
              + (f"; first: {str(bad[0])[:300]}" if bad else ""))
    finally:
        srv.stop()


def embed_check(args, vocab):
    be = args.backend
    model = os.path.join(args.out, "models", "minilm-feat.gguf")
    os.makedirs(os.path.dirname(model), exist_ok=True)
    subprocess.run([os.path.join(args.bin, "rlxd-synth"), "--arch", "bert", "--preset", "minilm", "--pooling", "mean",
                    "--vocab-from", vocab, "-o", model], check=True, stdout=subprocess.DEVNULL)
    srv = Server(args, "embed", ["-m", model + ":e", "--backend", be, "--max-seqs", "16", "--ctx", "512"])
    try:
        texts = [f"Request {i}: " + " ".join(["word"] * (5 + 7 * (i % 9))) + f" end {i * 31}" for i in range(64)]

        def one(t):
            st, r = srv.post("/v1/embeddings", {"input": t, "encoding_format": "base64"})
            return r["data"][0]["embedding"] if st == 200 else f"{st} {r}"
        solo = [one(t) for t in texts]
        conc = parallel(one, texts)
        same = sum(a == b and isinstance(a, str) and len(base64.b64decode(a)) == 384 * 4 for a, b in zip(solo, conc))
        check("embed", same == 64, f"{same} of 64 concurrent vectors bit for bit their solo ones")
    finally:
        srv.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--out", default="/tmp/rlx-features")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    stories = os.path.join(args.shared, "models", "stories260K.gguf")
    for name, fn, arg in (("texts", texts_check, stories), ("sessions", sessions_check, stories),
                          ("preempt", preempt_check, stories), ("schema", schema_check, stories),
                          ("embed", embed_check, os.path.join(args.shared, "models", "synth-bert-tiny-f32.gguf"))):
        t0 = time.time()
        try:
            fn(args, arg)
        except Exception as e:
            check(name, False, f"{type(e).__name__}: {e}")
        print(f"     ({name}: {time.time() - t0:.1f} s)", flush=True)
    print(f"{len(FAILS)} failed" + (f": {', '.join(FAILS)}" if FAILS else ""))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
