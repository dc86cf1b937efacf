// A scripted ACP client on the official TypeScript SDK (@agentclientprotocol/sdk), for cca's
// tests: `CCA_TEST_ACP_CLIENTS=DIR node client.mjs CCA PLAN` starts `CCA acp` and runs PLAN, a JSON array of steps:
//   {"call": METHOD, "params": {...}, "as": NAME, "async": true}  a request; with "async" it is
//                                    not awaited here (see "await"); "$NAME.field" in params is
//                                    a saved result's field
//   {"await": NAME}                  waits for an async request
//   {"notify": METHOD, "params": {...}}
//   {"until": UPDATE_KIND, "session": "$NAME.sessionId", "count": N}  waits for N updates of a kind
//   {"until": UPDATE_KIND, "session": ..., "containing": TEXT}  ... whose text contains TEXT
//   {"touch": PATH}                  creates an empty file (a test's signal to a waiting engine)
//   {"raw": BASE64}                  writes these bytes to cca's stdin, between the SDK's lines
//   {"close": true}                  ends the plan here (the steps after it are not run)
// then closes cca's stdin, waits for it to exit, and prints {"results": {NAME: result or
// {"error": {code, message, data}}, "exit": CODE}, "answered": [NAME, ...] (the order the
// responses came in), "before": {NAME: how many updates came before its response},
// "updates": [...], "invalid": [...]} on stdout. The SDK does the framing and request
// bookkeeping; every update and every response is checked here against the ACP JSON schemas
// the SDK ships: what does not pass goes into "invalid".
import { execFileSync, spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

// Where `make acp-clients` installed the SDK (pinned; ESM does not search NODE_PATH).
const sdkRoot = `${process.env.CCA_TEST_ACP_CLIENTS}/node_modules/@agentclientprotocol/sdk`;
const { client, ndJsonStream } = await import(pathToFileURL(`${sdkRoot}/dist/v1/stable/acp.js`));
// The ACP JSON schemas the SDK ships (stable and unstable), checked with ajv (installed pinned
// by `make acp-schema`): every update and every response must pass both, where it is defined.
const { default: Ajv2020 } = await import(
  pathToFileURL(`${process.env.CCA_TEST_ACP_SCHEMA}/node_modules/ajv/dist/2020.js`)
);
const ajv = new Ajv2020({ strict: false, allErrors: true, logger: false });
const schemaFiles = ["schema.json", "schema.unstable.json"];
for (const file of schemaFiles) {
  ajv.addSchema(JSON.parse(readFileSync(`${sdkRoot}/schema/v1/${file}`, "utf8")), file);
}
// The schema of each method's response, by its name in the schema files.
const responseSchemas = {
  initialize: "InitializeResponse",
  authenticate: "AuthenticateResponse",
  "session/new": "NewSessionResponse",
  "session/load": "LoadSessionResponse",
  "session/list": "ListSessionsResponse",
  "session/resume": "ResumeSessionResponse",
  "session/close": "CloseSessionResponse",
  "session/fork": "ForkSessionResponse",
  "session/set_config_option": "SetSessionConfigOptionResponse",
  "session/prompt": "PromptResponse",
};
const invalid = [];
const validators = {};
function check(what, name, value) {
  let checked = 0;
  for (const file of schemaFiles) {
    const ref = `${file}#/$defs/${name}`;
    const defined = ajv.getSchema(file)?.schema?.$defs?.[name];
    if (!defined) continue;
    validators[ref] ??= ajv.compile({ $ref: ref });
    checked += 1;
    if (!validators[ref](value)) invalid.push({ what, file, value, errors: validators[ref].errors });
  }
  if (checked === 0) invalid.push({ what, error: `no schema ${name}` });
}

const [cca, planText] = process.argv.slice(2);
const plan = JSON.parse(planText);
const child = spawn(cca, ["acp"], { stdio: ["pipe", "pipe", "inherit"] });
const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const updates = [];
const waiters = [];
const results = {};
const answered = [];
const before = {};
const pending = {};

function settle() {
  for (const w of waiters.splice(0)) {
    if (!w.check()) waiters.push(w);
  }
}

function resolveVars(value) {
  if (typeof value === "string" && value.startsWith("$")) {
    const [name, ...path] = value.slice(1).split(".");
    return path.reduce((v, k) => v?.[k], results[name]);
  }
  if (Array.isArray(value)) return value.map(resolveVars);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolveVars(v)]));
  }
  return value;
}

async function call(cx, method, params) {
  try {
    const result = await cx.request(method, params);
    check(method, responseSchemas[method] ?? `a schema for ${method}`, result ?? null);
    return result;
  } catch (e) {
    return { error: { code: e.code, message: e.message, data: e.data } };
  }
}

const app = client()
  .onNotification("session/update", ({ params }) => {
    check("session/update", "SessionNotification", params);
    updates.push(params);
    settle();
  })
  .onRequest("session/request_permission", () => ({ outcome: { outcome: "cancelled" } }));

await app.connectWith(stream, async (cx) => {
  for (const step of plan) {
    if (step.call) {
      const done = call(cx, step.call, resolveVars(step.params ?? {})).then((r) => {
        results[step.as ?? step.call] = r;
        answered.push(step.as ?? step.call);
        before[step.as ?? step.call] = updates.length;
        return r;
      });
      if (step.async) pending[step.as] = done;
      else await done;
    } else if (step.await) {
      await pending[step.await];
    } else if (step.notify) {
      await cx.notify(step.notify, resolveVars(step.params ?? {}));
    } else if (step.until) {
      const session = resolveVars(step.session);
      const count = step.count ?? 1;
      const seen = () =>
        updates.filter(
          (u) =>
            u.update.sessionUpdate === step.until &&
            (!session || u.sessionId === session) &&
            (!step.containing || (u.update.content?.text ?? "").includes(step.containing)),
        ).length >= count;
      await new Promise((resolve) => {
        waiters.push({ check: () => seen() && (resolve(), true) });
        settle();
      });
    } else if (step.run) {
      // A command beside the client (another terminal), with the client's environment.
      execFileSync(step.run[0], step.run.slice(1), { stdio: ["ignore", "ignore", "inherit"] });
    } else if (step.touch) {
      writeFileSync(step.touch, "");
    } else if (step.raw) {
      await new Promise((resolve) => child.stdin.write(Buffer.from(step.raw, "base64"), resolve));
    } else if (step.close) {
      break;
    }
  }
}).catch((e) => {
  results.connection = String(e);
});
// Closing stdin (the SDK may have done it already) is how a client leaves.
child.stdin.end();
results.exit = await exited;
process.stdout.write(JSON.stringify({ results, answered, before, updates, invalid }) + "\n");
process.exit(0);
