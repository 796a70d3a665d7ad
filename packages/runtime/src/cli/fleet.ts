/**
 * Operator commands on a fleet store (DESIGN §15): `stepbind store migrate`, `stepbind policy
 * revoke|restore|epoch|approve|unapprove|show` (`stepbind receipts list|verify --store URL` is in
 * `receipts.ts`). The store is `--store` (a `postgres://` URL, or `env:NAME` to read it from the
 * environment: keeps the password out of the process list) or the `store` of the configuration
 * (CONFIG or `--config FILE`). The URL is never printed with its credentials.
 */
import { StepbindError } from '@stepbind/binding/internal';
import type { FleetStoreTarget } from '../fleet/target.js';
import { loadConfigFile } from './config-file.js';
import {
  commandLineOf,
  formatTable,
  usageError,
  usageLine,
  type CliOption,
  type CommandLine,
  type CommandSpec,
} from './grammar.js';
import type { CliIo } from './io.js';
import { describeError } from './options.js';

/** `--store URL` and `--schema S`, shared by every command on a fleet store. */
export const STORE_OPTIONS: readonly CliOption[] = [
  {
    name: 'store',
    value: 'URL',
    description: 'the fleet store: a postgres:// URL or env:NAME (default: CONFIG\'s "store")',
  },
  { name: 'schema', value: 'S', description: 'the fleet schema (default stepbind)' },
];
const JSON_OPTION: CliOption = { name: 'json', description: 'print the result as JSON' };
const SERVER_TOOL = [
  { name: 'SERVER', description: 'a configured server name' },
  { name: 'TOOL', description: 'one tool of it (default: every tool)', optional: true },
] as const;
const NOTES = `--json: { "epoch", "version", "revoked": [[server, tool]], "approved": [[server, tool]] }, the fleet
policy (after the change); tool "*" is every tool of the server. Exit code 0 ok, 2 usage or store errors.`;

/** The grammar and `--help` of each fleet command, by name (`store migrate`, `policy revoke`, ...). */
export const FLEET_COMMANDS: readonly CommandSpec[] = [
  {
    name: 'store migrate',
    summary: "Create or upgrade the fleet store's schema.",
    config: 'optional',
    arguments: [],
    options: [...STORE_OPTIONS, JSON_OPTION],
    notes: '--json: { "ok": true, "store", "from", "to", "applied": [versions] }',
  },
  {
    name: 'policy revoke',
    summary: 'Stop a tool (or a whole server) across the fleet.',
    config: 'optional',
    arguments: SERVER_TOOL,
    options: [
      ...STORE_OPTIONS,
      { name: 'by', value: 'WHO', description: 'who revoked it (kept with the revocation)' },
      { name: 'note', value: 'TEXT', description: 'why (kept with the revocation)' },
      JSON_OPTION,
    ],
    notes: NOTES,
  },
  {
    name: 'policy restore',
    summary: 'Lift a revocation (without TOOL: every tool of the server).',
    config: 'optional',
    arguments: SERVER_TOOL,
    options: [...STORE_OPTIONS, JSON_OPTION],
    notes: NOTES,
  },
  {
    name: 'policy epoch',
    summary: 'Raise the fleet policy epoch (by one, or to N).',
    config: 'optional',
    arguments: [{ name: 'N', description: 'the new epoch (default: one more)', optional: true }],
    options: [...STORE_OPTIONS, JSON_OPTION],
    notes: NOTES,
  },
  {
    name: 'policy approve',
    summary: 'Approve the writes of a tool fleet-wide.',
    config: 'optional',
    arguments: SERVER_TOOL,
    options: [
      ...STORE_OPTIONS,
      { name: 'by', value: 'WHO', description: 'who approved it' },
      JSON_OPTION,
    ],
    notes: NOTES,
  },
  {
    name: 'policy unapprove',
    summary: 'Withdraw a fleet-wide approval.',
    config: 'optional',
    arguments: SERVER_TOOL,
    options: [...STORE_OPTIONS, JSON_OPTION],
    notes: NOTES,
  },
  {
    name: 'policy show',
    summary: 'Print the fleet policy (revoked and approved tools, as tables).',
    config: 'optional',
    arguments: [],
    options: [...STORE_OPTIONS, JSON_OPTION],
    notes: NOTES,
  },
];

/**
 * The fleet store of a command line: `--store` (a URL, or `env:NAME`), else the configuration's
 * `store`; `--schema` overrides the schema.
 *
 * @returns the target, or the usage problem.
 */
export async function fleetStoreOf(parsed: CommandLine): Promise<FleetStoreTarget | string> {
  const raw = parsed.values.get('store');
  const schema = parsed.values.get('schema');
  let target: FleetStoreTarget | undefined;
  if (raw !== undefined) {
    let url = raw;
    if (raw.startsWith('env:')) {
      const value = process.env[raw.slice(4)];
      if (value === undefined || value === '')
        return `environment variable ${raw.slice(4)} is not set`;
      url = value;
    }
    target = { url };
  } else if (parsed.config !== undefined) {
    target = (await loadConfigFile(parsed.config)).store;
    if (target === undefined) return `${parsed.config} has no "store"; give --store URL`;
  }
  if (target === undefined)
    return 'a fleet store is required: give --store URL or a CONFIG with a "store"';
  return schema === undefined ? target : { ...target, schema };
}

/**
 * Runs `stepbind store|policy …` against a fleet store; resolves to the exit code (0 ok, 2 usage
 * or store errors).
 */
export async function runFleetCommand(
  command: 'store' | 'policy',
  argv: readonly string[],
  io: CliIo,
): Promise<number> {
  const [sub, ...rest] = argv;
  const spec = FLEET_COMMANDS.find((c) => c.name === `${command} ${sub ?? ''}`);
  if (spec === undefined) {
    const names = FLEET_COMMANDS.filter((c) => c.name.startsWith(`${command} `)).map((c) =>
      c.name.slice(command.length + 1),
    );
    io.stderr(
      `stepbind ${command}: expected ${names.join(', ')}${sub === undefined ? '' : ` (not "${sub}")`}\n\nUsage:\n${FLEET_COMMANDS.filter(
        (c) => c.name.startsWith(`${command} `),
      )
        .map((c) => `  ${usageLine(c)}`)
        .join('\n')}\n`,
    );
    return 2;
  }
  const parsed = commandLineOf(spec, rest, io);
  if (typeof parsed === 'number') return parsed;
  const usage = (why: string): number => usageError(spec, why, io);
  let target: FleetStoreTarget | string;
  try {
    target = await fleetStoreOf(parsed);
  } catch (error) {
    io.stderr(`stepbind: ${describeError(error)}\n`);
    return 2;
  }
  if (typeof target === 'string') return usage(target);
  const json = parsed.flags.has('json');
  const [server, tool] = parsed.positionals;
  const { migrateFleetStore } = await import('../fleet/migrations.js');
  const { PgHandle } = await import('../fleet/pg.js');
  const { commitPolicyChange, readPolicy } = await import('../fleet/policy.js');
  let handle: InstanceType<typeof PgHandle> | undefined;
  try {
    handle = new PgHandle(target);
    const h = handle;
    const print = (value: unknown, text: string): void =>
      io.stdout(json ? `${JSON.stringify(value)}\n` : `${text}\n`);
    if (command === 'store') {
      const report = await migrateFleetStore(h);
      print(
        { ok: true, store: h.location, ...report },
        report.applied.length === 0
          ? `✔ ${h.location} is at schema ${report.to}; nothing to do`
          : `✔ ${h.location}: applied migration${report.applied.length === 1 ? '' : 's'} ${report.applied.join(', ')} (schema ${report.from} → ${report.to})`,
      );
      return 0;
    }
    await migrateFleetStore(h);
    switch (sub) {
      case 'show': {
        const policy = await readPolicy(h);
        const pairs = (list: readonly (readonly [string, string])[]): string[] =>
          list.length === 0
            ? ['  (none)']
            : formatTable(
                ['SERVER', 'TOOL'],
                list.map(([s, t]) => [s, t]),
                '  ',
              );
        print(
          policy,
          [
            `epoch ${policy.epoch} (version ${policy.version})`,
            'revoked:',
            ...pairs(policy.revoked),
            'approved:',
            ...pairs(policy.approved),
          ].join('\n'),
        );
        return 0;
      }
      case 'epoch': {
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
        if (server === undefined) return usage('expected SERVER');
        const by = parsed.values.get('by');
        const note = parsed.values.get('note');
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
        return usage(`unknown policy command "${sub ?? ''}"`);
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
