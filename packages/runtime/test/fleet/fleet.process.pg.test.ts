/**
 * The fleet model test: 4 worker processes share one PostgreSQL store, each with its own testkit
 * stdio server (one configuration, so one server identity), driven by fast-check commands (keyed
 * calls, revoke/restore, raise epoch, refresh, hard refresh, a server's list_changed that switches
 * its catalog, SIGKILL while a call is in progress, restart) and checked against an independent
 * oracle, the servers' audit trail and the store's receipts (exactly one per answered call).
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { verifyChain, type ReceiptBody } from '@stepbind/binding';
import {
  commitPolicyChange,
  migrateFleetStore,
  PgHandle,
  PostgresJournalStore,
} from '@stepbind/runtime/fleet';
import {
  readAuditTrail,
  stdioServerParams,
  tempAuditPath,
  type ServerFixture,
} from '@stepbind/testkit';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { usePostgres } from '../support/postgres.js';

const server = await usePostgres('fleet.process.pg.test.ts');
afterAll(() => server?.stop());

const WORKER = fileURLToPath(new URL('./worker.mjs', import.meta.url));
const WORKERS = 4;
const TOOLS = ['send', 'note'] as const;
/** Catalog `g` of the two the servers alternate between (they differ in one description). */
const generation = (g: number): ServerFixture['generations'][number] => ({
  pages: [
    {
      tools: [
        ...TOOLS.map((name) => ({
          name,
          inputSchema: { type: 'object' },
          annotations: { readOnlyHint: false, destructiveHint: false },
        })),
        // `flip` switches the catalog and sends list_changed (the triggers below).
        { name: 'flip', description: `catalog ${g}`, inputSchema: { type: 'object' } },
      ],
    },
  ],
});
const FIXTURE: ServerFixture = {
  generations: [generation(0), generation(1)],
  // The nth call of flip moves a server to catalog n mod 2, then notifies.
  triggers: Array.from({ length: 64 }, (_, i) => ({
    on: { method: 'tools/call', tool: 'flip', nth: i + 1 } as const,
    setGeneration: (i + 1) % 2,
    notify: 'after' as const,
  })),
};

type Reply = {
  id: number;
  ok: boolean;
  code?: string;
  replayed?: boolean;
  delivery?: string;
  relisted?: string[];
};

class Worker {
  readonly child: ChildProcessWithoutNullStreams;
  version = -1;
  exited = false;
  readonly #waiters = new Map<number, (r: Reply) => void>();
  readonly #events: { match: (e: Record<string, unknown>) => boolean; resolve: () => void }[] = [];
  readonly ready: Promise<void>;
  readonly gone: Promise<void>;
  readonly stderr: () => string;

  constructor(plan: unknown) {
    this.child = spawn(process.execPath, [WORKER, JSON.stringify(plan)], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    this.child.stderr.on('data', (d: Buffer) => {
      if (stderr.length < 4000) stderr += d.toString();
    });
    this.stderr = () => stderr;
    this.gone = new Promise((resolve) =>
      this.child.once('exit', () => {
        this.exited = true;
        for (const w of this.#waiters.values()) w({ id: -1, ok: false, code: 'WORKER_EXITED' });
        this.#waiters.clear();
        resolve();
      }),
    );
    let onReady: () => void = () => undefined;
    const ready = new Promise<void>((resolve) => (onReady = resolve));
    this.ready = Promise.race([
      ready,
      this.gone.then(() => {
        throw new Error(`worker exited before it was ready: ${this.stderr()}`);
      }),
    ]);
    createInterface({ input: this.child.stdout }).on('line', (line) => {
      const message = JSON.parse(line) as Record<string, unknown>;
      if (message['event'] === 'ready') {
        this.version = Math.max(this.version, Number(message['version']));
        onReady();
      }
      if (message['event'] === 'policy')
        this.version = Math.max(this.version, Number(message['version']));
      for (const e of this.#events.splice(0)) {
        if (e.match(message)) e.resolve();
        else this.#events.push(e);
      }
      if (typeof message['id'] === 'number' && message['event'] === undefined) {
        const waiter = this.#waiters.get(message['id']);
        this.#waiters.delete(message['id']);
        waiter?.(message as unknown as Reply);
      }
    });
  }

  send(id: number, command: Record<string, unknown>): Promise<Reply> {
    const reply = new Promise<Reply>((resolve) => this.#waiters.set(id, resolve));
    this.child.stdin.write(`${JSON.stringify({ id, ...command })}\n`);
    return reply;
  }

  when(match: (e: Record<string, unknown>) => boolean): Promise<void> {
    return new Promise((resolve) => this.#events.push({ match, resolve }));
  }

  /** Resolves once this worker applied policy `version` (or exited). */
  applied(version: number): Promise<void> {
    if (this.version >= version || this.exited) return Promise.resolve();
    return Promise.race([
      this.when((e) => e['event'] === 'policy' && Number(e['version']) >= version),
      this.gone,
    ]);
  }

  async kill(): Promise<void> {
    if (!this.exited) this.child.kill('SIGKILL');
    await this.gone;
  }
}

interface Model {
  revoked: Set<string>;
  completed: Set<string>;
  /** Keys a killed call may have left anywhere (not run, sent, completed). */
  uncertain: Set<string>;
  /** Keys the journal holds as OUTCOME_UNKNOWN (refused from then on). */
  unknown: Set<string>;
  live: boolean[];
}

interface Real {
  workers: Worker[];
  admin: PgHandle;
  plan: (i: number) => unknown;
  nextId: number;
  calls: number;
  /** Keys answered ok and not replayed: each reached the server exactly once. */
  ran: string[];
  /** Each answered call's step id and the outcome its receipt must record. */
  answered: Map<string, string>;
  /** Step ids of calls whose worker was killed mid-call: at most one receipt each. */
  killed: Set<string>;
  counts: Record<string, number>;
}

const debug = (c: { toString(): string } | string): void => {
  if (process.env['STEPBIND_FLEET_DEBUG'] === '1')
    process.stderr.write(`[fleet model] ${typeof c === 'string' ? c : c.toString()}\n`);
};

const bump = (r: Real, name: string): void => {
  r.counts[name] = (r.counts[name] ?? 0) + 1;
};

class Call implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly w: number,
    readonly key: string,
    readonly tool: string,
  ) {}
  check(m: Readonly<Model>): boolean {
    return m.live[this.w] === true;
  }
  async run(m: Model, r: Real): Promise<void> {
    debug(this);
    bump(r, 'call');
    const id = r.nextId++;
    const reply = await r.workers[this.w]!.send(id, {
      op: 'call',
      key: this.key,
      tool: this.tool,
    });
    r.calls++;
    r.answered.set(`c${id}`, reply.ok ? 'ok' : reply.code!);
    const tool = this.key.split(':')[0]!;
    if (m.uncertain.has(this.key)) {
      expect(['ok', 'OUTCOME_UNKNOWN', 'TOOL_DENIED']).toContain(reply.ok ? 'ok' : reply.code);
      m.uncertain.delete(this.key);
      if (reply.ok) m.completed.add(this.key);
      if (reply.code === 'OUTCOME_UNKNOWN') m.unknown.add(this.key);
      if (reply.code === 'TOOL_DENIED') m.uncertain.add(this.key);
    } else if (m.completed.has(this.key)) {
      expect(reply).toMatchObject({ ok: true, replayed: true });
    } else if (m.unknown.has(this.key)) {
      expect(reply).toMatchObject({ ok: false, code: 'OUTCOME_UNKNOWN' });
    } else if (m.revoked.has(tool)) {
      // Its worker applied the revocation before this command (the driver waited for it).
      expect(reply).toMatchObject({ ok: false, code: 'TOOL_DENIED', delivery: 'not-sent' });
    } else {
      expect(reply, JSON.stringify(reply)).toMatchObject({ ok: true, replayed: false });
      m.completed.add(this.key);
    }
    if (reply.ok && reply.replayed === false) r.ran.push(this.key);
  }
  toString(): string {
    return `call(w${this.w}, ${this.key})`;
  }
}

class KillDuringCall implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly w: number,
    readonly key: string,
  ) {}
  check(m: Readonly<Model>): boolean {
    return m.live[this.w] === true && !m.completed.has(this.key) && !m.unknown.has(this.key);
  }
  async run(m: Model, r: Real): Promise<void> {
    debug(this);
    bump(r, 'kill');
    const worker = r.workers[this.w]!;
    const id = r.nextId++;
    const prepared = worker.when((e) => e['event'] === 'prepared' && e['id'] === id);
    const reply = worker.send(id, { op: 'call', key: this.key, tool: this.key.split(':')[0] });
    // SIGKILL once the key's INTENT is durable (or when the call was refused before it).
    await Promise.race([prepared, reply]);
    debug('  prepared');
    await worker.kill();
    debug('  killed');
    const answered = await reply;
    debug('  answered');
    if (answered.id === id) r.answered.set(`c${id}`, answered.ok ? 'ok' : answered.code!);
    else r.killed.add(`c${id}`);
    m.live[this.w] = false;
    if (answered.ok && answered.replayed === false) r.ran.push(this.key);
    m.uncertain.add(this.key);
  }
  toString(): string {
    return `kill-during-call(w${this.w}, ${this.key})`;
  }
}

class Restart implements fc.AsyncCommand<Model, Real> {
  constructor(readonly w: number) {}
  check(m: Readonly<Model>): boolean {
    return m.live[this.w] === false;
  }
  async run(m: Model, r: Real): Promise<void> {
    debug(this);
    bump(r, 'restart');
    const worker = new Worker(r.plan(this.w));
    r.workers[this.w] = worker;
    await worker.ready;
    m.live[this.w] = true;
  }
  toString(): string {
    return `restart(w${this.w})`;
  }
}

class Policy implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly kind: 'revoke' | 'restore' | 'epoch',
    readonly tool: string,
  ) {}
  check(): boolean {
    return true;
  }
  async run(m: Model, r: Real): Promise<void> {
    debug(this);
    bump(r, this.kind);
    const change =
      this.kind === 'epoch'
        ? ({ kind: 'epoch' } as const)
        : ({ kind: this.kind, server: 's', tool: this.tool } as const);
    const committed = await commitPolicyChange(r.admin, change);
    if (this.kind === 'revoke') m.revoked.add(this.tool);
    if (this.kind === 'restore') m.revoked.delete(this.tool);
    await Promise.all(
      r.workers.map((w, i) =>
        m.live[i] === true ? w.applied(committed.version) : Promise.resolve(),
      ),
    );
  }
  toString(): string {
    return `${this.kind}(${this.tool})`;
  }
}

class Refresh implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly w: number,
    readonly hard: boolean,
  ) {}
  check(m: Readonly<Model>): boolean {
    return m.live[this.w] === true;
  }
  async run(_m: Model, r: Real): Promise<void> {
    debug(this);
    bump(r, this.hard ? 'hard-refresh' : 'refresh');
    const reply = await r.workers[this.w]!.send(r.nextId++, {
      op: this.hard ? 'hard-refresh' : 'refresh',
    });
    expect(reply.ok, JSON.stringify(reply)).toBe(true);
  }
  toString(): string {
    return `${this.hard ? 'hard-' : ''}refresh(w${this.w})`;
  }
}

class ListChanged implements fc.AsyncCommand<Model, Real> {
  constructor(readonly w: number) {}
  check(m: Readonly<Model>): boolean {
    return m.live[this.w] === true;
  }
  async run(_m: Model, r: Real): Promise<void> {
    debug(this);
    bump(r, 'list-changed');
    const id = r.nextId++;
    const reply = await r.workers[this.w]!.send(id, { op: 'list-changed' });
    expect(reply.ok, JSON.stringify(reply)).toBe(true);
    r.answered.set(`c${id}`, 'ok');
    r.calls++;
    // The re-list either published (moving the fleet pointer) or lost the fleet CAS to another
    // worker's listing; nothing else.
    for (const outcome of reply.relisted ?? []) {
      expect(['swapped', 'PUBLISH_CONFLICT']).toContain(outcome);
      bump(r, `list-changed:${outcome}`);
    }
  }
  toString(): string {
    return `list-changed(w${this.w})`;
  }
}

const worker = fc.integer({ min: 0, max: WORKERS - 1 });
const key = fc
  .tuple(fc.constantFrom(...TOOLS), fc.integer({ min: 0, max: 5 }))
  .map(([t, n]) => `${t}:${n}`);
const commands = [
  fc.tuple(worker, key).map(([w, k]) => new Call(w, k, k.split(':')[0]!)),
  fc.tuple(worker, key).map(([w, k]) => new Call(w, k, k.split(':')[0]!)),
  fc.tuple(worker, key).map(([w, k]) => new KillDuringCall(w, k)),
  worker.map((w) => new Restart(w)),
  fc.constantFrom(...TOOLS).map((t) => new Policy('revoke', t)),
  fc.constantFrom(...TOOLS).map((t) => new Policy('restore', t)),
  fc.constant(new Policy('epoch', '')),
  fc.tuple(worker, fc.boolean()).map(([w, hard]) => new Refresh(w, hard)),
  worker.map((w) => new ListChanged(w)),
];

describe.skipIf(server === undefined)(
  'fleet of worker processes on one PostgreSQL store (model)',
  () => {
    it('no key reaches a server twice, revocations hold once applied, one CAS winner per generation, every call has one receipt and the chain verifies', async () => {
      const seed = Number(process.env['FC_SEED'] ?? Date.now() % 1_000_000);
      console.log(`[fast-check] fleet model seed=${seed}`);
      const totals = { runs: 0, commands: 0, calls: 0, counts: {} as Record<string, number> };
      await fc.assert(
        fc.asyncProperty(fc.commands(commands, { maxCommands: 24, size: 'max' }), async (cmds) => {
          const schema = server!.schema('fleet');
          const audit = tempAuditPath('fleet-model');
          const admin = new PgHandle({ url: server!.url, schema });
          await migrateFleetStore(admin);
          const plan = (): unknown => ({
            url: server!.url,
            schema,
            server: stdioServerParams({ scenario: 'fixture', fixture: FIXTURE, auditPath: audit }),
          });
          const real: Real = {
            workers: [],
            admin,
            plan,
            nextId: 1,
            calls: 0,
            ran: [],
            answered: new Map(),
            killed: new Set(),
            counts: {},
          };
          try {
            real.workers = Array.from({ length: WORKERS }, () => new Worker(plan()));
            await Promise.all(real.workers.map((w) => w.ready));
            const model: Model = {
              revoked: new Set(),
              completed: new Set(),
              uncertain: new Set(),
              unknown: new Set(),
              live: real.workers.map(() => true),
            };
            await fc.asyncModelRun(() => ({ model, real }), cmds);
            await Promise.all(
              real.workers.map((w, i) =>
                w.exited ? Promise.resolve() : w.send(1_000_000 + i, { op: 'close' }),
              ),
            );
            await Promise.all(real.workers.map((w) => w.gone));
            // The oracle's checks over what the servers saw and what the store holds.
            // Keyed calls only (`flip`, the list_changed trigger, runs without a key).
            const sent = (await readAuditTrail(audit)).filter(
              (e) => e.method === 'tools/call' && e.tool !== 'flip',
            );
            const perKey = new Map<string, number>();
            for (const e of sent) {
              const k = String(e.arguments?.['key']);
              perKey.set(k, (perKey.get(k) ?? 0) + 1);
            }
            for (const [k, n] of perKey) expect(n, `key ${k} reached a server ${n} times`).toBe(1);
            for (const k of real.ran) expect(perKey.get(k)).toBe(1);
            const store = new PostgresJournalStore(admin);
            const receipts = await store.readReceipts();
            expect(verifyChain(await store.anchor(), receipts)).toMatchObject({ ok: true });
            const runs = receipts
              .map((x) => JSON.parse(x.text) as ReceiptBody)
              .filter((b) => b.source === 'run');
            // Exactly one receipt per answered call, recording its outcome; at most one for a
            // call whose worker was killed; none from anywhere else.
            const byStep = new Map<string, ReceiptBody[]>();
            for (const b of runs) byStep.set(b.stepId, [...(byStep.get(b.stepId) ?? []), b]);
            for (const [step, outcome] of real.answered) {
              expect(
                byStep.get(step)?.map((b) => b.outcome),
                `receipts of ${step}`,
              ).toEqual([outcome]);
            }
            for (const step of real.killed)
              expect(byStep.get(step)?.length ?? 0, `receipts of ${step}`).toBeLessThanOrEqual(1);
            for (const step of byStep.keys())
              expect(real.answered.has(step) || real.killed.has(step), step).toBe(true);
            const { rows } = await admin.query<{ identity_digest: string; generation: string }>(
              'SELECT identity_digest, generation FROM catalog_publications ORDER BY id',
            );
            const byIdentity = new Map<string, number[]>();
            for (const row of rows)
              byIdentity.set(row.identity_digest, [
                ...(byIdentity.get(row.identity_digest) ?? []),
                Number(row.generation),
              ]);
            for (const gens of byIdentity.values()) expect(gens).toEqual(gens.map((_, i) => i + 1));
            totals.runs++;
            totals.commands += [...cmds].length;
            totals.calls += real.calls;
            for (const [k, v] of Object.entries(real.counts))
              totals.counts[k] = (totals.counts[k] ?? 0) + v;
          } finally {
            await Promise.all(real.workers.map((w) => w.kill()));
            await admin.close();
            rmSync(audit, { force: true });
          }
        }),
        { numRuns: Number(process.env['STEPBIND_FLEET_RUNS'] ?? 5), seed, endOnFailure: true },
      );
      console.log(`[fleet model] ${JSON.stringify(totals)}`);
      expect(totals.runs).toBeGreaterThan(0);
    }, 300_000);
  },
);
