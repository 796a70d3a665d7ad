/**
 * The one command line grammar (DESIGN §17.5), through the real CLI: `--help` on every subcommand,
 * CONFIG as a positional or `--config`, unknown options named with a did-you-mean, `--json` on every
 * read command, headers on tables, and the parser itself.
 */
import { MemoryTokenStore } from '../../src/auth/memory-token-store.js';
import { parseCommandLine, type CommandSpec } from '../../src/cli/grammar.js';
import { COMMANDS, runCli } from '../../src/cli/run.js';
import type { ServerFixture } from '@stepbind/testkit';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cli, cliSandbox, tool, type CliSandbox } from './support.js';

const OPS: ServerFixture = {
  generations: [{ pages: [{ tools: [tool('status'), tool('deploy')] }] }],
  calls: { status: { text: 'healthy' }, deploy: { text: 'deployed' } },
};

let sandbox: CliSandbox;
beforeEach(async () => {
  sandbox = await cliSandbox();
});
afterEach(async () => {
  await sandbox.cleanup();
});

describe('--help', () => {
  it.each(COMMANDS.map((c) => [c.name, c] as const))(
    '"stepbind %s --help" and "stepbind help %s" print its usage, arguments and options and exit 0',
    async (name, spec) => {
      const words = name.split(' ');
      for (const args of [
        [...words, '--help'],
        [...words, '-h'],
        ['help', ...words],
      ]) {
        const { code, out, err } = await cli(args);
        expect(code, args.join(' ')).toBe(0);
        expect(err).toBe('');
        expect(out).toMatch(new RegExp(`^Usage: stepbind ${name} `));
        for (const option of spec.options) expect(out).toContain(`--${option.name}`);
        for (const argument of spec.arguments) expect(out).toContain(`  ${argument.name}  `);
        if (spec.config !== undefined) expect(out).toContain('--config FILE');
        expect(out).toContain('-h, --help');
      }
    },
  );

  it('documents the JSON shape in the --help of every command that has --json', () => {
    for (const spec of COMMANDS.filter((c) => c.options.some((o) => o.name === 'json'))) {
      expect(spec.notes, spec.name).toMatch(/--json: [[{]/);
    }
  });

  it('answers --help before reading anything, even with a missing configuration', async () => {
    const { code, out } = await cli(['call', '/nonexistent.json', 'a', 'b', '--help']);
    expect(code).toBe(0);
    expect(out).toContain('Usage: stepbind call CONFIG SERVER TOOL');
  });

  it('lists a group with "stepbind policy --help" and refuses an unknown help topic', async () => {
    const group = await cli(['policy', '--help']);
    expect(group.code).toBe(0);
    expect(group.out).toContain('stepbind policy revoke [CONFIG] SERVER [TOOL]');
    expect(group.out).toContain('stepbind policy show [CONFIG]');
    const unknown = await cli(['help', 'deploy']);
    expect(unknown.code).toBe(2);
    expect(unknown.err).toContain('no command "deploy"');
  });
});

describe('unknown options and commands', () => {
  it.each([
    [['call', 'c.json', 'ops', 'status', '--jsno'], '"--jsno" (did you mean "--json"?)', 'call'],
    [['catalog', 'c.json', '--confg', 'x'], '"--confg" (did you mean "--config"?)', 'catalog'],
    [
      ['receipts', 'list', '--jounral', 'x.db'],
      '"--jounral" (did you mean "--journal"?)',
      'receipts list',
    ],
    [['tools', 'c.json', '-v'], '"-v"', 'tools'],
  ])(
    '%j names the option, a did-you-mean and the --help (exit 2)',
    async (args, named, command) => {
      const { code, out, err } = await cli(args);
      expect(code).toBe(2);
      expect(out).toBe('');
      expect(err).toContain(`stepbind ${command}: unknown option ${named}`);
      expect(err).toContain(`see "stepbind ${command} --help"`);
      expect(err).toContain(`Usage: stepbind ${command} `);
    },
  );

  it('suggests the nearest command for a misspelt one', async () => {
    const { code, err } = await cli(['catlog', 'c.json']);
    expect(code).toBe(2);
    expect(err).toContain('unknown command "catlog" (did you mean "catalog"?)');
  });

  it('refuses a value on a flag and a missing value', async () => {
    expect((await cli(['catalog', 'c.json', '--json=yes'])).err).toContain('--json takes no value');
    expect((await cli(['call', 'c.json', 'a', 'b', '--args'])).err).toContain(
      '--args needs a value (JSON)',
    );
  });
});

describe('CONFIG: positional or --config', () => {
  it('gives the same result either way, for config check, tools and catalog', async () => {
    const config = await sandbox.config('same', { ops: OPS });
    // Without the catalog cache: the second run would otherwise show the first run's catalog
    // as cached (`provisional`), which is not what this compares.
    for (const command of [
      ['config', 'check'],
      ['tools', '--no-cache'],
      ['catalog', '--no-cache'],
    ]) {
      const positional = await cli([...command, config, '--json']);
      const option = await cli([...command, '--config', config, '--json']);
      const both = await cli([...command, config, `--config=${config}`, '--json']);
      expect(positional.code, command.join(' ')).toBe(0);
      expect(JSON.parse(positional.out)).toEqual(JSON.parse(option.out));
      expect(both.code).toBe(0);
      expect(JSON.parse(both.out)).toEqual(JSON.parse(option.out));
    }
  });

  it('refuses two different configurations with exit 2, naming both', async () => {
    for (const args of [
      ['catalog', 'a.json', '--config', 'b.json'],
      ['call', 'a.json', 'ops', 'status', '--config', 'b.json'],
      ['auth', 'status', 'a.json', '--config', 'b.json'],
      ['receipts', 'list', 'a.json', '--config', 'b.json'],
    ]) {
      const { code, err } = await cli(args);
      expect(code, args.join(' ')).toBe(2);
      expect(err).toContain(
        'the configuration is given twice, as "a.json" and as --config "b.json"; give it once',
      );
    }
  });

  it('takes a JSON file as CONFIG before an optional argument (policy revoke CONFIG SERVER)', () => {
    const spec = COMMANDS.find((c) => c.name === 'policy revoke') as CommandSpec;
    expect(parseCommandLine(spec, ['fleet.json', 'files'])).toMatchObject({
      config: 'fleet.json',
      positionals: ['files'],
    });
    expect(parseCommandLine(spec, ['files', 'write'])).toMatchObject({
      positionals: ['files', 'write'],
    });
  });
});

describe('--json on every read command, headers on every table', () => {
  it('prints JSON that parses for tools, catalog, config check, auth status, receipts list and verify', async () => {
    const config = await sandbox.config('json', { ops: OPS }, { journal: { path: 'calls.db' } });
    const call = await cli(['call', config, 'ops', 'status', '--approve', '--key', 'k1']);
    expect(call.code).toBe(0);
    const outputs: Record<string, unknown> = {};
    for (const [label, args] of [
      ['tools', ['tools', config]],
      ['catalog', ['catalog', config]],
      ['config', ['config', 'check', config]],
      ['receipts list', ['receipts', 'list', config]],
      ['receipts verify', ['receipts', 'verify', config]],
    ] as const) {
      const { code, out } = await cli([...args, '--json']);
      expect(code, label).toBe(0);
      outputs[label] = JSON.parse(out);
    }
    let status = '';
    await runCli(['auth', 'status', config, '--json'], {
      stdout: (t) => (status += t),
      stderr: () => undefined,
      tokenStore: new MemoryTokenStore(),
    });
    expect(JSON.parse(status)).toEqual({ ok: true, store: 'memory', logins: [], servers: [] });
    expect(outputs['tools']).toEqual({
      servers: [expect.objectContaining({ name: 'ops', bound: true, toolCount: 2, generation: 1 })],
      tools: [
        {
          name: 'ops__status',
          server: 'ops',
          tool: 'status',
          effectClass: 'unknown',
          description: 'The status tool.',
        },
        expect.objectContaining({ name: 'ops__deploy', tool: 'deploy' }),
      ],
    });
    expect(outputs['receipts list']).toEqual([
      expect.objectContaining({ seq: 1, key: 'k1', modelName: 'ops__status', outcome: 'ok' }),
    ]);
    expect(outputs['receipts verify']).toMatchObject({ ok: true, count: 1 });
    expect(outputs['config']).toMatchObject({ ok: true, servers: [{ name: 'ops' }] });
  });

  it('puts a header over the receipts, tools and catalog tables', async () => {
    const config = await sandbox.config('tables', { ops: OPS }, { journal: { path: 'calls.db' } });
    expect((await cli(['call', config, 'ops', 'status', '--approve'])).code).toBe(0);
    const receipts = await cli(['receipts', 'list', config]);
    const [header, row] = receipts.out.split('\n');
    expect(header?.split(/\s{2,}/)).toEqual([
      'SEQ',
      'AT',
      'SOURCE',
      'KEY',
      'MODEL NAME',
      'OUTCOME',
      'DELIVERY',
      'REPLAYED',
    ]);
    expect(row).toMatch(/^1 +\d{4}-\d\d-\d\dT\S+ +\S+ +- +ops__status +ok +sent$/);
    expect((await cli(['tools', config])).out).toMatch(/\n {4}MODEL NAME +EFFECT +DESCRIPTION\n/);
    expect((await cli(['catalog', config])).out).toMatch(/\n {4}TOOL +EFFECT +MODEL NAME\n/);
  });

  it('refuses tools --json with --format: one output at a time', async () => {
    const { code, err } = await cli(['tools', 'c.json', '--json', '--format', 'openai']);
    expect(code).toBe(2);
    expect(err).toContain('--json and --format both choose the output');
  });
});
