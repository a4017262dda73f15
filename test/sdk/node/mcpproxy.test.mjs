// custody's MCP proxy with the official npm MCP client
// (@modelcontextprotocol/sdk). Run by ../mcpproxy_test.go, which starts
// custody (--mcp-upstreams) in front of mcp-upstream.mjs and sets
// CUSTODY_URL and CUSTODY_KEY (a custody key of tenant sdk). The Go side
// then checks what the upstream saw.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const custody = process.env.CUSTODY_URL;
const key = process.env.CUSTODY_KEY;
if (!custody || !key) throw new Error('missing CUSTODY_URL or CUSTODY_KEY: run through go test (mcpproxy_test.go)');

async function connect(headers) {
  const transport = new StreamableHTTPClientTransport(new URL(`${custody}/mcp/servers/npm`), { requestInit: { headers } });
  const client = new Client({ name: 'sandbox', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

test('lists tools and makes an allowed and a denied call through the proxy', async () => {
  const { client, transport } = await connect({ authorization: `Bearer ${key}` });
  try {
    const { tools } = await client.listTools();
    // forbidden_tool: the tenant's policy denies it without condition.
    assert.deepEqual(tools.map((t) => t.name), ['echo']);

    const ok = await client.callTool({ name: 'echo', arguments: { text: 'hello' } });
    assert.ok(!ok.isError, JSON.stringify(ok));
    assert.equal(ok.content[0].text, 'echo: hello');

    const denied = await client.callTool({ name: 'echo', arguments: { text: 'secret' } });
    assert.equal(denied.isError, true, JSON.stringify(denied));
    const body = JSON.parse(denied.content[0].text);
    assert.equal(body.error, 'denied');
    assert.ok(body.rule_ids.includes('SDK-SECRET'), denied.content[0].text);
    assert.ok(!denied.content[0].text.includes(key));
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close();
  }
});

test('a missing key is refused', async () => {
  await assert.rejects(connect({}), (err) => {
    assert.equal(err?.code, 401, String(err)); // StreamableHTTPError carries the HTTP status
    return true;
  });
});
