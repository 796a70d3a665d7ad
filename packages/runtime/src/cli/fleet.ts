/**
 * Operator commands on a fleet store (DESIGN §15): `stepbind store migrate`, `stepbind policy
 * revoke|restore|epoch|approve|unapprove|show` and `stepbind receipts list|verify --store URL`.
 * `--store` takes a `postgres://` URL, or `env:NAME` to read it from the environment (keeps the
 * password out of the process list). The URL is never printed with its credentials.
 */
import { StepbindError } from '@stepbind/binding/internal';
import type { CliIo } from './io.js';
import { listReceipts, parseExpectedHead, verifyReceipts } from './receipts.js';

/** Usage lines of the fleet commands, appended to the CLI's help. */
export const FLEET_USAGE = `  stepbind store migrate --store URL [--schema S] [--json]
                                            create or upgrade the fleet store's schema
  stepbind policy revoke SERVER [TOOL] --store URL [--by WHO] [--note TEXT]
                                            stop a tool (or a whole server) across the fleet
  stepbind policy restore SERVER [TOOL] --store URL
                                            lift a revocation (without TOOL: all of the server)
  stepbind policy epoch [N] --store URL     raise the fleet policy epoch (by one, or to N)
  stepbind policy approve|unapprove SERVER [TOOL] --store URL
                                            approve writes of a tool fleet-wide (or withdraw it)
  stepbind policy show --store URL [--json] print the fleet policy
  stepbind receipts verify|list --store URL [--json] [--key K] [--expect-head SEQ:DIGEST]
                                            the fleet's receipts chain
  (--store accepts env:NAME to read the URL from the environment)
`;

interface Parsed {
  readonly positional: string[];
  readonly flags: Map<string, string | true>;
}

const VALUE_FLAGS = new Set(['--store', '--schema', '--by', '--note', '--key', '--expect-head']);

function parse(argv: readonly string[]): Parsed | string {
  const positional: string[] = [];
  const flags = new Map<string, string | true>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    const eq = arg.indexOf('=');
    const name = arg.startsWith('--') && eq !== -1 ? arg.slice(0, eq) : arg;
    if (VALUE_FLAGS.has(name)) {
      const value = eq !== -1 && arg.startsWith('--') ? arg.slice(eq + 1) : argv[++i];
      if (value === undefined || value === '') return `${name} needs a value`;
      flags.set(name, value);
    } else if (arg === '--json') {
      flags.set('--json', true);
    } else if (arg.startsWith('--')) {
      return `unknown argument "${arg}"`;
    } else {
      positional.push(arg);
    }
  }
  return { positional, flags };
}

function storeOf(parsed: Parsed): { url: string; schema?: string } | string {
  const raw = parsed.flags.get('--store');
  if (typeof raw !== 'string') return '--store URL is required';
  let url = raw;
  if (raw.startsWith('env:')) {
    const value = process.env[raw.slice(4)];
    if (value === undefined || value === '')
      return `environment variable ${raw.slice(4)} is not set`;
    url = value;
  }
  const schema = parsed.flags.get('--schema');
  return { url, ...(typeof schema === 'string' ? { schema } : {}) };
}

/** True when `argv` of `stepbind receipts …` names a fleet store. */
export function wantsFleetStore(argv: readonly string[]): boolean {
  return argv.some((a) => a === '--store' || a.startsWith('--store='));
}

/**
 * Runs `stepbind store|policy|receipts …` against a fleet store; resolves to the exit code (0 ok,
 * 1 a broken receipts chain, 2 usage or store errors).
 */
export async function runFleetCommand(
  command: 'store' | 'policy' | 'receipts',
  argv: readonly string[],
  io: CliIo,
): Promise<number> {
  const [sub, ...rest] = argv;
  const parsed = parse(rest);
  const usage = (why: string): number => {
    io.stderr(
      `stepbind ${command}${sub === undefined ? '' : ` ${sub}`}: ${why}\n\nUsage:\n${FLEET_USAGE}`,
    );
    return 2;
  };
  if (typeof parsed === 'string') return usage(parsed);
  const target = storeOf(parsed);
  if (typeof target === 'string') return usage(target);
  const json = parsed.flags.get('--json') === true;
  const [server, tool, extra] = parsed.positional;
  const { migrateFleetStore } = await import('../fleet/migrations.js');
  const { PgHandle } = await import('../fleet/pg.js');
  const { commitPolicyChange, readPolicy } = await import('../fleet/policy.js');
  const { PostgresJournalStore } = await import('../fleet/journal-store.js');
  let handle: InstanceType<typeof PgHandle> | undefined;
  try {
    handle = new PgHandle(target);
    const h = handle;
    const print = (value: unknown, text: string): void =>
      io.stdout(json ? `${JSON.stringify(value)}\n` : `${text}\n`);
    if (command === 'store') {
      if (sub !== 'migrate' || parsed.positional.length > 0)
        return usage('expected "store migrate"');
      const report = await migrateFleetStore(h);
      print(
        { ok: true, store: h.location, ...report },
        report.applied.length === 0
          ? `✔ ${h.location} is at schema ${report.to}; nothing to do`
          : `✔ ${h.location}: applied migration${report.applied.length === 1 ? '' : 's'} ${report.applied.join(', ')} (schema ${report.from} → ${report.to})`,
      );
      return 0;
    }
    if (command === 'receipts') {
      if (sub !== 'verify' && sub !== 'list') return usage('expected "verify" or "list"');
      if (parsed.positional.length > 0)
        return usage(`unexpected argument "${parsed.positional[0] ?? ''}"`);
      const expect = parsed.flags.get('--expect-head');
      const expectHead = typeof expect === 'string' ? parseExpectedHead(expect) : undefined;
      if (expect !== undefined && expectHead === undefined) {
        return usage('--expect-head needs SEQ:DIGEST (as printed after "head:")');
      }
      const store = new PostgresJournalStore(h, { ownsHandle: true });
      handle = undefined;
      const key = parsed.flags.get('--key');
      const report =
        sub === 'verify'
          ? await verifyReceipts(store, json, expectHead)
          : await listReceipts(store, { json, ...(typeof key === 'string' ? { key } : {}) });
      io.stdout(report.stdout);
      return report.code;
    }
    await migrateFleetStore(h);
    switch (sub) {
      case 'show': {
        const policy = await readPolicy(h);
        print(
          policy,
          `epoch ${policy.epoch} (version ${policy.version})\nrevoked: ${policy.revoked.map(([s, t]) => `${s}/${t}`).join(', ') || '(none)'}\napproved: ${policy.approved.map(([s, t]) => `${s}/${t}`).join(', ') || '(none)'}`,
        );
        return 0;
      }
      case 'epoch': {
        if (tool !== undefined) return usage('expected "policy epoch [N]"');
        const epoch = server === undefined ? undefined : Number(server);
        if (epoch !== undefined && !Number.isSafeInteger(epoch))
          return usage('N must be an integer');
        const policy = await commitPolicyChange(h, {
          kind: 'epoch',
          ...(epoch === undefined ? {} : { epoch }),
        });
        print(policy, `✔ fleet policy epoch is now ${policy.epoch} (version ${policy.version})`);
        return 0;
      }
      case 'revoke':
      case 'restore':
      case 'approve':
      case 'unapprove': {
        if (server === undefined || extra !== undefined)
          return usage(`expected "policy ${sub} SERVER [TOOL]"`);
        const by = parsed.flags.get('--by');
        const note = parsed.flags.get('--note');
        const policy = await commitPolicyChange(h, {
          kind: sub,
          server,
          ...(tool === undefined ? {} : { tool }),
          ...(typeof by === 'string' && sub !== 'restore' && sub !== 'unapprove' ? { by } : {}),
          ...(typeof note === 'string' && sub === 'revoke' ? { note } : {}),
        });
        const what =
          tool === undefined
            ? `server "${server}" (every tool)`
            : `tool "${tool}" of server "${server}"`;
        const verb = {
          revoke: 'revoked',
          restore: 'restored',
          approve: 'approved',
          unapprove: 'no longer approved',
        }[sub];
        print(
          policy,
          `✔ ${what} ${verb} across the fleet (policy version ${policy.version}, epoch ${policy.epoch})`,
        );
        return 0;
      }
      case undefined:
      default:
        return usage('expected revoke, restore, epoch, approve, unapprove or show');
    }
  } catch (error) {
    const scrub = handle?.redactor;
    const message = error instanceof Error ? error.message : String(error);
    const text = scrub === undefined ? message : scrub.text(message);
    if (json) {
      const body =
        error instanceof StepbindError
          ? { ...error.toJSON(), message: text }
          : { code: 'INTERNAL', message: text };
      io.stdout(`${JSON.stringify({ ok: false, error: body })}\n`);
    } else {
      io.stderr(`stepbind: ${error instanceof StepbindError ? `${error.code}: ` : ''}${text}\n`);
    }
    return 2;
  } finally {
    await handle?.close();
  }
}
