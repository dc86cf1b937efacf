// A scripted MCP client on the official TypeScript SDK (@modelcontextprotocol/sdk), for cca's
// tests: `CCA_TEST_MCP_CLIENTS=DIR node client.mjs CCA PLAN` starts `CCA mcp` through the SDK's
// stdio transport, lists the tools, and runs PLAN, a JSON array of steps:
//   {"call": TOOL, "arguments": {...}}   a tools/call; its result, or {"error": {code, message}}
//   {"request": METHOD, "params": {...}} any other request, with its result or error
// then closes the transport (which ends cca's stdin) and prints {"server": serverInfo,
// "instructions", "protocolVersion", "tools": [...], "results": [...], "exit": CODE, "signal":
// SIGNAL} on stdout. The SDK does the framing, the version negotiation and the validation of
// every response against the protocol's schemas.
import { pathToFileURL } from "node:url";

// Where `make mcp-clients` installed the SDK (pinned; ESM does not search NODE_PATH).
const sdkRoot = `${process.env.CCA_TEST_MCP_CLIENTS}/node_modules/@modelcontextprotocol/sdk/dist/esm`;
const { Client } = await import(pathToFileURL(`${sdkRoot}/client/index.js`));
const { StdioClientTransport } = await import(pathToFileURL(`${sdkRoot}/client/stdio.js`));
const { ResultSchema } = await import(pathToFileURL(`${sdkRoot}/types.js`));

const [cca, planText] = process.argv.slice(2);
const plan = JSON.parse(planText);
const transport = new StdioClientTransport({
  command: cca,
  args: ["mcp"],
  env: process.env,
  cwd: process.cwd(),
  stderr: "inherit",
});
const client = new Client({ name: "cca-tests", version: "1.0.0" });
// The SDK hands the negotiated version to transports that want it.
let protocolVersion = null;
transport.setProtocolVersion = (version) => {
  protocolVersion = version;
};
await client.connect(transport);
// The child, to learn how it ended: by itself once stdin closed (exit 0), or by a signal.
const child = transport._process;
const ended = new Promise((resolve) =>
  child.once("exit", (code, signal) => resolve({ code, signal })),
);

const { tools } = await client.listTools();
const results = [];
for (const step of plan) {
  try {
    if (step.call) {
      results.push(await client.callTool({ name: step.call, arguments: step.arguments ?? {} }));
    } else {
      results.push(await client.request({ method: step.request, params: step.params }, ResultSchema));
    }
  } catch (e) {
    results.push({ error: { code: e.code, message: e.message } });
  }
}
await client.close();
const { code, signal } = await ended;
process.stdout.write(
  JSON.stringify({
    server: client.getServerVersion(),
    instructions: client.getInstructions(),
    protocolVersion,
    tools,
    results,
    exit: code,
    signal,
  }) + "\n",
);
