// The official TypeScript MCP SDK as a client of `ingestd mcp` over stdio (test_mcp.py).
// SERVER: the server's command line as a JSON list. Prints what it saw as one JSON object.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = JSON.parse(process.env.SERVER);
const transport = new StdioClientTransport({ command, args, stderr: "ignore" });
const client = new Client({ name: "ingestd-ts-check", version: "1.0.0" });
await client.connect(transport);
const { tools } = await client.listTools();
// budget_tokens null: the k best chunks
const found = await client.callTool({
  name: "search",
  arguments: { query: "span attributes", k: 3, mode: "sparse", budget_tokens: null },
});
const ids = found.structuredContent.hits.map((h) => h.id);
const widened = await client.callTool({ name: "read", arguments: { id: ids[0] } });
// a budget: merged passages within it; read within its own
const budgeted = await client.callTool({
  name: "search",
  arguments: { query: "collector configuration pipelines", k: 50, mode: "sparse", budget_tokens: 600 },
});
const within = await client.callTool({ name: "read", arguments: { id: ids[0], budget_tokens: 120 } });
const bad = await client.callTool({ name: "search", arguments: { query: "x", k: 0 } });
await client.close();
console.log(
  JSON.stringify({
    tools: tools.map((t) => t.name),
    search: ids,
    read: widened.structuredContent.hit.id,
    passages: budgeted.structuredContent,
    read_budget: within.structuredContent,
    bad: { isError: bad.isError, text: bad.content[0].text },
  }),
);
