// custody's model gateway with the official npm SDKs as clients. Run by
// ../node_test.go, which starts custody and the provider stand-in and sets:
//   CUSTODY_GATEWAY_URL, CUSTODY_ADMIN_URL, CUSTODY_ADMIN_TOKEN, STANDIN_URL
// The Go side then checks that the stand-in saw only the real keys and
// that no gated stream stalled (see ../standin_test.go for the models).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';

const gateway = process.env.CUSTODY_GATEWAY_URL;
const adminURL = process.env.CUSTODY_ADMIN_URL;
const adminToken = process.env.CUSTODY_ADMIN_TOKEN;
const standin = process.env.STANDIN_URL;
for (const [k, v] of Object.entries({ gateway, adminURL, adminToken, standin })) {
  if (!v) throw new Error(`missing environment for ${k}: run through go test (node_test.go)`);
}

async function admin(path, body, want) {
  const res = await fetch(adminURL + path, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  assert.equal(res.status, want, `POST ${path}: ${text}`);
  return text ? JSON.parse(text) : null;
}
const mint = (provider) => admin('/v1/gateway/tokens', { providers: [provider], ttl_seconds: 600 }, 201);
const revoke = (jti) => admin(`/v1/gateway/tokens/${jti}/revoke`, null, 204);
const id = () => randomBytes(6).toString('hex');
const release = (sid) => fetch(`${standin}/_ctl/release?id=${sid}`, { method: 'POST' }).then((r) => r.text());

// attempts counts the requests an SDK sends to the gateway (each retry is
// one), by wrapping the global fetch every SDK here uses by default.
let attempts = 0;
const realFetch = globalThis.fetch;
globalThis.fetch = (input, init) => {
  const url = typeof input === 'string' ? input : input.url ?? String(input);
  if (url.startsWith(gateway)) attempts++;
  return realFetch(input, init);
};

async function refused(what, fn, want) {
  attempts = 0;
  await assert.rejects(fn, (err) => {
    assert.match(String(err?.message ?? err), new RegExp(want), `${what}: ${err}`);
    return true;
  });
  assert.equal(attempts, 1, `${what}: ${attempts} attempts, want 1 (a refusal is not retried)`);
}

// Each SDK: make a client for a provider path and token, a whole call,
// a stream that yields text pieces, and the SDK's typed API error class.
const sdks = {
  openai: {
    client: (p, token) => new OpenAI({ apiKey: token, baseURL: `${gateway}/${p}/v1` }),
    call: async (c, model) => (await c.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] })).choices[0].message.content,
    stream: async function* (c, model) {
      const s = await c.chat.completions.create({ model, stream: true, messages: [{ role: 'user', content: 'hi' }] });
      for await (const ch of s) if (ch.choices?.[0]?.delta?.content) yield ch.choices[0].delta.content;
    },
    apiError: OpenAI.APIError,
  },
  anthropic: {
    client: (p, token) => new Anthropic({ apiKey: token, baseURL: `${gateway}/${p}` }),
    call: async (c, model) => (await c.messages.create({ model, max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] })).content[0].text,
    stream: async function* (c, model) {
      const s = await c.messages.create({ model, max_tokens: 16, stream: true, messages: [{ role: 'user', content: 'hi' }] });
      for await (const ev of s) if (ev.type === 'content_block_delta') yield ev.delta.text;
    },
    apiError: Anthropic.APIError,
  },
  gemini: {
    client: (p, token) => new GoogleGenAI({ apiKey: token, httpOptions: { baseUrl: `${gateway}/${p}` } }),
    call: async (c, model) => (await c.models.generateContent({ model, contents: 'hi' })).text,
    stream: async function* (c, model) {
      for await (const r of await c.models.generateContentStream({ model, contents: 'hi' })) if (r.text) yield r.text;
    },
    apiError: null, // @google/genai throws its ApiError or a plain Error carrying the message
  },
};

for (const [provider, sdk] of Object.entries(sdks)) {
  test(`${provider}: a call, then a stream on the same client, whole and unbuffered`, async () => {
    const { token } = await mint(provider);
    const c = sdk.client(provider, token);
    assert.equal(await sdk.call(c, `${provider}-standin`), 'hello');
    const sid = id();
    let got = '';
    for await (const piece of sdk.stream(c, `gated.${sid}.5`)) {
      got += piece;
      await release(sid);
    }
    assert.equal(got, 'e0e1e2e3e4');
  });

  test(`${provider}: a revoked token is refused once, as "gateway token revoked"`, async () => {
    const { token, jti } = await mint(provider);
    await revoke(jti);
    const c = sdk.client(provider, token);
    await refused('revoked', () => sdk.call(c, `${provider}-standin`), 'gateway token revoked');
  });

  test(`${provider}: a stream cut by revocation raises the SDK's error`, async () => {
    const { token, jti } = await mint(provider);
    const c = sdk.client(provider, token);
    const pieces = [];
    await assert.rejects(async () => {
      for await (const piece of sdk.stream(c, `hold.${id()}`)) {
        pieces.push(piece);
        await revoke(jti);
      }
    }, (err) => {
      assert.match(String(err?.message), /gateway token revoked/, `stream error: ${err}`);
      // openai and @anthropic-ai/sdk raise their APIError for an in-stream error event.
      if (sdk.apiError) assert.ok(err instanceof sdk.apiError, `stream error ${err?.constructor?.name}, want the SDK's APIError`);
      return true;
    });
    assert.deepEqual(pieces, ['e0']);
  });

  test(`${provider}: a gateway refusal is not retried`, async () => {
    const { token } = await mint(`nokey-${provider}`);
    const c = sdk.client(`nokey-${provider}`, token);
    await refused('no key', () => sdk.call(c, `${provider}-standin`), `gateway holds no key for provider nokey-${provider}`);
  });
}
