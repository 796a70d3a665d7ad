// An agent loop that SIGKILLs itself at a named point (issue 10 kill tests). It opens a runtime on a
// SQLite journal, runs every planned key in order with `idempotencyKey`, and prints one JSON line
// per event to stdout (synchronous for pipes, so every line written before the kill arrives).
//
// stdin: JSON { journal, server, keys: [{ key, tool, args }], passes, kill } where server is an
// `mcpServers` entry (stdio `{ command, args }` or Streamable HTTP `{ url }`)
// where kill is null or { point, nth }: die at the nth time `point` is reached in this process.
// With `concurrent: true` the keys of a pass run all at once (their journal writes share group
// commits) and the nth time counts every key.
// Points: before-intent (the key's first journal read, or its claim's first write: a run without a
// prepare hook reads its key only when that write loses, DESIGN §21.6), after-intent (INTENT committed),
// before-send (SENT committed, nothing written), after-send (tools/call written to the server),
// after-answer (answer received, outcome not recorded), after-record (outcome recorded).
import process from 'node:process';
import { McpRuntime, openSqliteJournal } from '@stepbind/runtime';
import { connectServer } from '@stepbind/runtime/internal';

// The plan comes on stdin once the modules are loaded, so a harness can start the next agent while
// the previous one still runs.
let input = '';
for await (const chunk of process.stdin) input += chunk;
const plan = JSON.parse(input);
const print = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);
let current;
let seen = 0;

function reach(point, key) {
  if (plan.kill === null || point !== plan.kill.point) return;
  if (plan.concurrent !== true && key !== current) return;
  seen++;
  if (seen === plan.kill.nth) {
    print({ event: 'kill', key, point });
    process.kill(process.pid, 'SIGKILL');
  }
}

const store = openSqliteJournal({ path: plan.journal, synchronous: 'full' });
const journal = {
  location: store.location,
  async get(key) {
    reach('before-intent', key);
    return store.get(key);
  },
  async insert(record, options) {
    if (record.state === 'SENT') reach('before-intent', record.key);
    const inserted = await store.insert(record, options);
    if (inserted && record.state === 'INTENT') reach('after-intent', record.key);
    // A run without a prepare hook writes its claim directly as SENT.
    if (inserted && record.state === 'SENT') reach('before-send', record.key);
    return inserted;
  },
  async update(record, expectedVersion, options) {
    const final =
      record.state === 'COMPLETED' ||
      record.state === 'NOT_SENT' ||
      record.state === 'OUTCOME_UNKNOWN';
    if (final && options?.receipt?.source === 'run') reach('after-answer', record.key);
    const written = await store.update(record, expectedVersion, options);
    if (written.ok && record.state === 'INTENT') reach('after-intent', record.key);
    if (written.ok && record.state === 'SENT') reach('before-send', record.key);
    if (written.ok && final && options?.receipt?.source === 'run')
      reach('after-record', record.key);
    return written;
  },
  appendReceipt: (r) => store.appendReceipt(r),
  listRecords: (f) => store.listRecords(f),
  readReceipts: (o) => store.readReceipts(o),
  anchor: () => store.anchor(),
  prune: (o) => store.prune(o),
  close: () => store.close(),
};

const runtime = await McpRuntime.open(
  {
    mcpServers: {
      s: { ...plan.server, retryReads: true, trustAnnotations: true, approval: 'none' },
    },
  },
  {
    journal: { store: journal },
    onEvent: (e) => {
      if (e.type === 'journal-recovered') {
        print({ event: 'recovered', records: e.records.map((r) => [r.key, r.state]) });
      }
    },
    connect: async (name, config, options) => {
      const connection = await connectServer(name, config, options);
      const transport = connection.client.transport;
      const send = transport.send.bind(transport);
      transport.send = async (message, sendOptions) => {
        await send(message, sendOptions);
        if (message.method === 'tools/call') reach('after-send', message.params.arguments.key);
      };
      return connection;
    },
  },
);
print({ event: 'open', pids: runtime.pids() });
for (let pass = 0; pass < plan.passes; pass++) {
  const step = await runtime.captureBinding();
  const runKey = async ({ key, tool, args }) => {
    current = key;
    print({ event: 'start', key, pass });
    try {
      // w2 runs with a prepare hook (an approval): its claim is an INTENT record first.
      const outcome = await step
        .prepareCall(`s__${tool}`)
        .run(args, { idempotencyKey: key, ...(tool === 'w2' ? { prepare: () => undefined } : {}) });
      print({
        event: 'result',
        key,
        pass,
        ok: true,
        replayed: outcome.replayed,
        result: outcome.result,
        receipt: outcome.receipt,
      });
    } catch (error) {
      print({
        event: 'result',
        key,
        pass,
        ok: false,
        code: error.code,
        delivery: error.detail?.delivery ?? null,
      });
    }
    current = undefined;
  };
  if (plan.concurrent === true) await Promise.all(plan.keys.map(runKey));
  else for (const planned of plan.keys) await runKey(planned);
  step.release();
}
await runtime.close();
print({ event: 'done' });
