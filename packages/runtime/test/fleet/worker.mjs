// One fleet worker for the multi-process model test: opens a runtime on the shared PostgreSQL
// store against a testkit stdio server, then runs the driver's commands, one JSON line each on
// stdin, and answers one JSON line each on stdout (plus `policy` and `prepared` events).
//
// argv[2]: JSON { url, schema, server } where server is an `mcpServers` entry.
import process from 'node:process';
import { createInterface } from 'node:readline';
import { McpRuntime } from '@stepbind/runtime';

const plan = JSON.parse(process.argv[2]);
const print = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);
// list_changed notifications this runtime received, and how each re-list ended.
let listChanged = 0;
const relisted = [];
let onRelisted = () => undefined;
const runtime = await McpRuntime.open(
  { mcpServers: { s: plan.server } },
  {
    approval: 'none',
    listChangedDebounceMs: 0,
    onEvent: (e) => {
      if (e.type === 'list-changed') listChanged++;
      if (e.type === 'catalog-swapped' && e.cause === 'hard-refresh') relisted.push('swapped');
      if (e.type === 'hard-refresh-failed') relisted.push(e.error.code);
      onRelisted();
    },
    store: {
      url: plan.url,
      schema: plan.schema,
      onEvent: (e) => {
        if (e.type === 'fleet-policy-applied') print({ event: 'policy', version: e.version });
      },
    },
  },
);
print({ event: 'ready', pid: process.pid, version: runtime.fleet.policy.policy.version });

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  const cmd = JSON.parse(line);
  try {
    if (cmd.op === 'call') {
      // One step per command, named by its id: the driver finds each call's receipt by it.
      const step = await runtime.captureBinding({ stepId: `c${cmd.id}` });
      const out = await step
        .prepareCall(`s__${cmd.tool}`)
        .run(
          { key: cmd.key },
          {
            idempotencyKey: cmd.key,
            // A prepare hook makes the claim durable (INTENT) first, and tells the driver it is there.
            prepare: () => {
              print({ event: 'prepared', id: cmd.id });
              return undefined;
            },
          },
        )
        .finally(() => step.release());
      print({ id: cmd.id, ok: true, replayed: out.replayed, generation: out.receipt.generation });
    } else if (cmd.op === 'list-changed') {
      // Calling `flip` switches the server's catalog and makes it send list_changed after the
      // reply; the runtime's debounced hard refresh then re-lists and publishes (fleet CAS).
      const before = listChanged;
      const step = await runtime.captureBinding({ stepId: `c${cmd.id}` });
      await step
        .prepareCall('s__flip')
        .run({})
        .finally(() => step.release());
      while (listChanged === before) await new Promise((resolve) => (onRelisted = resolve));
      await runtime.whenIdle();
      print({ id: cmd.id, ok: true, relisted: relisted.splice(0) });
    } else if (cmd.op === 'hard-refresh') {
      const changed = await runtime.hardRefresh('s');
      print({ id: cmd.id, ok: true, changed });
    } else if (cmd.op === 'refresh') {
      runtime.markDirty('driver');
      await runtime.refreshIfDirty();
      print({ id: cmd.id, ok: true });
    } else if (cmd.op === 'close') {
      await runtime.close();
      print({ id: cmd.id, ok: true });
      break;
    }
  } catch (error) {
    print({
      id: cmd.id,
      ok: false,
      code: error.code ?? 'INTERNAL',
      message: String(error.message),
      delivery: error.detail?.delivery,
    });
  }
}
// The driver's pipe stays open after the last command: let go of it so the process can exit.
process.stdin.destroy();
