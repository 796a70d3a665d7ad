// One process of the fleet refresh test (oidc.fleet.test.ts): opens a runtime on a shared token
// store (no authorize hook: it must stay logged in by refreshing, never by logging in again)
// against the protected MCP server, then runs the driver's commands, one JSON line each on stdin,
// answering one JSON line each on stdout.
//
// argv[2]: JSON { server, store } where server is an `mcpServers` entry with its `auth` block and
// store is { kind: 'file', module, path } (the compiled FileTokenStore module and its file)
// or { kind: 'fleet', url, schema } (the PostgreSQL fleet store, which keeps tokens too).
import process from 'node:process';
import { createInterface } from 'node:readline';
import { McpRuntime } from '@stepbind/runtime';

const plan = JSON.parse(process.argv[2]);
const print = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);

let storeOptions;
if (plan.store.kind === 'file') {
  const { FileTokenStore } = await import(plan.store.module);
  storeOptions = { tokenStore: new FileTokenStore({ path: plan.store.path }) };
} else {
  storeOptions = { store: { url: plan.store.url, schema: plan.store.schema } };
}

let runtime;
try {
  runtime = await McpRuntime.open(
    { mcpServers: { remote: plan.server } },
    { approval: 'none', ...storeOptions },
  );
} catch (error) {
  print({ event: 'failed', code: error?.code ?? 'UNKNOWN', message: String(error?.message) });
  process.exit(1);
}
print({ event: 'ready', pid: process.pid });

/** `times` whoami calls at once; each answers the subject it ran as or its error code. */
async function whoami(times) {
  const step = await runtime.captureBinding();
  try {
    return await Promise.all(
      Array.from({ length: times }, () =>
        step
          .prepareCall('remote__whoami')
          .run({})
          .then(
            ({ result }) => ({ ok: true, sub: JSON.parse(result.content[0].text).sub }),
            (error) => ({
              ok: false,
              code: error?.code ?? 'UNKNOWN',
              message: String(error?.message),
            }),
          ),
      ),
    );
  } finally {
    await step[Symbol.asyncDispose]();
  }
}

for await (const line of createInterface({ input: process.stdin })) {
  const command = JSON.parse(line);
  if (command.cmd === 'whoami') {
    try {
      print({ id: command.id, calls: await whoami(command.times) });
    } catch (error) {
      print({
        id: command.id,
        calls: [{ ok: false, code: error?.code ?? 'UNKNOWN', message: String(error?.message) }],
      });
    }
  }
}
await runtime.close();
