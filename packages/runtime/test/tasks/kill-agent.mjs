// An agent loop for the task SIGKILL property (DESIGN §20.2): it opens a runtime on a SQLite journal
// and the long-lived task server over Streamable HTTP, runs each planned key as a task call with its
// idempotency key, and SIGKILLs itself at the planned point. One JSON line per event on stdout
// (synchronous for pipes, so every line written before the kill arrives).
//
// stdin: JSON { journal, url, keys: [{ key, args }], passes, kill } where kill is null or
// { point, key, delayMs }. Points, each reached for `kill.key` only:
//   before-send          the key's SENT record committed, tools/call not written yet
//   after-create         the server created the task; its id not recorded yet
//   after-task-recorded  the task id committed on the SENT record
//   during-polling       delayMs after the task id was committed (the task may be done by then)
//   after-result         the result arrived; the COMPLETED record not written yet
//   after-record         the COMPLETED record committed
import process from 'node:process';
import { clearTimeout, setTimeout } from 'node:timers';
import { McpRuntime, openSqliteJournal } from '@stepbind/runtime';

let input = '';
for await (const chunk of process.stdin) input += chunk;
const plan = JSON.parse(input);
const print = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);

// The during-polling kill's timer, cleared once its key's outcome is being recorded: fired later,
// it would kill the agent in the middle of the next key (not the planned point).
let pollingKill;

function reach(point, key) {
  if (plan.kill === null || key !== plan.kill.key || point !== plan.kill.point) return;
  print({ event: 'kill', key, point });
  process.kill(process.pid, 'SIGKILL');
}

const store = openSqliteJournal({ path: plan.journal, synchronous: 'full' });
const journal = {
  location: store.location,
  get: (key, options) => store.get(key, options),
  async insert(record, options) {
    const inserted = await store.insert(record, options);
    if (inserted && record.state === 'SENT') reach('before-send', record.key);
    return inserted;
  },
  async update(record, expectedVersion, options) {
    const taskRecorded = record.state === 'SENT' && record.taskId !== undefined;
    const completing = record.state === 'COMPLETED' && options?.receipt?.source === 'run';
    if (taskRecorded) reach('after-create', record.key);
    const final = ['COMPLETED', 'NOT_SENT', 'OUTCOME_UNKNOWN'].includes(record.state);
    if (final && record.key === plan.kill?.key) clearTimeout(pollingKill);
    if (completing) reach('after-result', record.key);
    const written = await store.update(record, expectedVersion, options);
    if (written.ok && record.state === 'SENT' && record.taskId === undefined)
      reach('before-send', record.key);
    if (written.ok && taskRecorded) {
      reach('after-task-recorded', record.key);
      if (plan.kill?.point === 'during-polling' && plan.kill.key === record.key) {
        pollingKill = setTimeout(() => reach('during-polling', record.key), plan.kill.delayMs);
      }
    }
    if (written.ok && completing) reach('after-record', record.key);
    return written;
  },
  appendReceipt: (r, o) => store.appendReceipt(r, o),
  listRecords: (f) => store.listRecords(f),
  readReceipts: (o) => store.readReceipts(o),
  anchor: () => store.anchor(),
  head: () => store.head(),
  newestWrite: (o) => store.newestWrite(o),
  prune: (o) => store.prune(o),
  close: () => store.close(),
};

const runtime = await McpRuntime.open(
  { mcpServers: { t: { url: plan.url, protocol: '2025-11-25' } } },
  { approval: 'none', journal: { store: journal } },
);
print({ event: 'open' });
for (let pass = 0; pass < plan.passes; pass++) {
  const step = await runtime.captureBinding();
  for (const { key, args } of plan.keys) {
    const before = await runtime.journal.get(key);
    print({
      event: 'start',
      key,
      pass,
      state: before?.state ?? null,
      taskId: before?.taskId ?? null,
    });
    try {
      const outcome = await step.prepareCall('t__slow_job').run(args, { idempotencyKey: key });
      print({
        event: 'result',
        key,
        pass,
        ok: true,
        replayed: outcome.replayed,
        text: outcome.result.content?.[0]?.text ?? null,
        taskId: outcome.receipt.taskId ?? null,
      });
    } catch (error) {
      print({
        event: 'result',
        key,
        pass,
        ok: false,
        code: error.code,
        reason: error.detail?.reason ?? null,
        delivery: error.detail?.delivery ?? null,
      });
    }
  }
  step.release();
}
const verified = await runtime.journal.verify();
print({ event: 'verified', ok: verified.ok });
await runtime.close();
print({ event: 'done' });
