import type { ServerFixture } from '@stepbind/testkit';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/run.js';
import { cli, cliSandbox, tool, type CliSandbox } from '../cli/support.js';

/** `build` reports three steps, the last with a message carrying a terminal escape. */
const BUILD: ServerFixture = {
  generations: [{ pages: [{ tools: [tool('build', { annotations: { readOnlyHint: true } })] }] }],
  calls: {
    build: {
      text: 'built',
      progress: [
        { progress: 1, total: 4, message: 'compiling' },
        { progress: 2, total: 4 },
        { progress: 4, total: 4, message: 'linking\u001b[31m red' },
      ],
    },
  },
};

let sandbox: CliSandbox;
beforeEach(async () => {
  sandbox = await cliSandbox();
});
afterEach(async () => {
  await sandbox.cleanup();
});

describe('stepbind call shows progress', () => {
  it('writes one progress line per report to stderr when it is not a terminal, and --json stdout stays one JSON object', async () => {
    const config = await sandbox.config('progress', { ops: BUILD });
    const { code, out, err } = await cli(['call', config, 'ops', 'build', '--approve', '--json']);
    expect(code).toBe(0);
    expect(err.split('\n').filter((l) => l.startsWith('progress:'))).toEqual([
      'progress: build 1/4 (25%) compiling',
      'progress: build 2/4 (50%)',
      'progress: build 4/4 (100%) linking[31m red',
    ]);
    const body = JSON.parse(out) as { ok: boolean; result: { content: unknown } };
    expect(body.ok).toBe(true);
    expect(body.result.content).toEqual([{ type: 'text', text: 'built' }]);
  });

  it('on a terminal redraws one progress bar in place and clears it before the result', async () => {
    const config = await sandbox.config('progress-tty', { ops: BUILD });
    const lines: string[] = [];
    let out = '';
    let err = '';
    const code = await runCli(['call', config, 'ops', 'build', '--approve'], {
      stdout: (t) => (out += t),
      stderr: (t) => (err += t),
      progress: (line) => lines.push(line),
    });
    expect(code).toBe(0);
    expect(lines).toEqual([
      'build [######..................] 1/4 (25%) compiling',
      'build [############............] 2/4 (50%)',
      'build [########################] 4/4 (100%) linking[31m red',
      '',
    ]);
    expect(err).not.toContain('progress:');
    expect(out).toContain('built');
  });
});
