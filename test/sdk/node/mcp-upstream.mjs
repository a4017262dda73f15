// An upstream MCP server made with the official npm SDK (low-level
// Server, stateless streamable HTTP, JSON responses), for ../mcpproxy_test.go.
// It listens on UPSTREAM_ADDR, accepts only requests carrying
// "Authorization: Bearer $UPSTREAM_SECRET", and serves GET /_log with
// {calls: [tool names run], auths: [Authorization headers seen]}.
import http from 'node:http';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [host, port] = (process.env.UPSTREAM_ADDR ?? '').split(':');
const secret = process.env.UPSTREAM_SECRET;
if (!port || !secret) throw new Error('UPSTREAM_ADDR and UPSTREAM_SECRET are required');

const calls = [];
const auths = [];
const tools = ['echo', 'forbidden_tool'].map((name) => ({
  name,
  description: `${name} tool`,
  inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
}));

function newServer() {
  const server = new Server({ name: 'npm-upstream', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
  server.setRequestHandler(CallToolRequestSchema, async (req) => {
    calls.push(req.params.name);
    return { content: [{ type: 'text', text: `${req.params.name}: ${req.params.arguments?.text ?? ''}` }] };
  });
  return server;
}

http.createServer(async (req, res) => {
  if (req.method === 'GET' && req.url === '/_log') {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ calls, auths }));
    return;
  }
  auths.push(req.headers.authorization ?? '');
  if (req.headers.authorization !== `Bearer ${secret}`) {
    res.writeHead(401).end('bad credential');
    return;
  }
  if (req.method !== 'POST') {
    res.writeHead(405, { allow: 'POST' }).end();
    return;
  }
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const server = newServer();
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  res.on('close', () => { transport.close(); server.close(); });
  await server.connect(transport);
  await transport.handleRequest(req, res, body);
}).listen(Number(port), host, () => console.log(`listening on ${host}:${port}`));
