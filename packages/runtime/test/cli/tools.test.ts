import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { ServerFixture } from '@stepbind/testkit';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cli, cliSandbox, tool, type CliSandbox } from './support.js';

const FILES: ServerFixture = {
  generations: [
    {
      pages: [
        {
          tools: [
            tool('read_file', {
              annotations: { readOnlyHint: true },
              inputSchema: {
                type: 'object',
                properties: { path: { type: 'string' }, limit: { type: 'integer' } },
                required: ['path'],
              },
            }),
            tool('tag', {
              annotations: { readOnlyHint: false, destructiveHint: false },
              inputSchema: {
                type: 'object',
                properties: {
                  labels: { type: 'object', additionalProperties: { type: 'string' } },
                },
              },
            }),
            tool('wipe'),
          ],
        },
      ],
    },
  ],
};

let sandbox: CliSandbox;
beforeEach(async () => {
  sandbox = await cliSandbox();
});
afterEach(async () => {
  await sandbox.cleanup();
});

describe('stepbind tools', () => {
  it('prints each server with its catalog state and each tool with its effect class', async () => {
    const config = await sandbox.config('text', { files: FILES });
    const { code, out } = await cli(['tools', config]);
    expect(code).toBe(0);
    expect(out.trimEnd().split('\n')).toEqual([
      '✔ files: 3 tools, UNVERSIONED_OBSERVATION, generation 1, revision 1, era legacy (2025-11-25)',
      '    MODEL NAME        EFFECT   DESCRIPTION',
      '    files__read_file  read     The read_file tool.',
      '    files__tag        write    The tag tool.',
      '    files__wipe       unknown  The wipe tool.',
    ]);
  });

  it('prints Responses tools as JSON, strict where possible, with the reason on stderr where not', async () => {
    const config = await sandbox.config('responses', { files: FILES });
    const { code, out, err } = await cli(['tools', '--config', config, '--format', 'responses']);
    expect(code).toBe(0);
    const tools = JSON.parse(out) as { name: string; strict: boolean; parameters: unknown }[];
    expect(tools.map((t) => [t.name, t.strict])).toEqual([
      ['files__read_file', true],
      ['files__tag', false],
      ['files__wipe', true],
    ]);
    expect(tools[0]?.parameters).toEqual({
      type: 'object',
      properties: { path: { type: 'string' }, limit: { type: ['integer', 'null'] } },
      required: ['path', 'limit'],
      additionalProperties: false,
    });
    expect(err).toContain('files__tag is sent with strict: false');
    expect(err).toContain('admits other properties');
  });

  it.each([
    ['openai', (t: Record<string, unknown>) => (t['function'] as { name: string }).name],
    ['anthropic', (t: Record<string, unknown>) => t['name']],
    ['gemini', (t: Record<string, unknown>) => t['name']],
  ] as const)('prints %s tools as JSON', async (format, nameOf) => {
    const config = await sandbox.config(format, { files: FILES });
    const { code, out } = await cli(['tools', '--config', config, `--format=${format}`]);
    expect(code).toBe(0);
    const tools = JSON.parse(out) as Record<string, unknown>[];
    expect(tools.map(nameOf)).toEqual(['files__read_file', 'files__tag', 'files__wipe']);
  });

  it('rejects an unknown format with exit code 2 before starting anything', async () => {
    const { code, err } = await cli(['tools', '--config', 'nope.json', '--format', 'cohere']);
    expect(code).toBe(2);
    expect(err).toContain('unknown --format "cohere"');
  });

  it('exits 1 and says which optional server is not in the step', async () => {
    const config = await sandbox.config('optional', {
      files: FILES,
      broken: { command: process.execPath, args: ['-e', 'process.exit(3)'], required: false },
    });
    const { code, out } = await cli(['tools', '--config', config]);
    expect(code).toBe(1);
    expect(out).toContain('✘ broken: left out of this step (failed): SERVER_START_FAILED');
    expect(out).toContain('files__read_file  read');
  });
});

describe('stepbind --version', () => {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };

  it('prints the version from package.json', async () => {
    expect(await cli(['--version'])).toEqual({ code: 0, out: `${pkg.version}\n`, err: '' });
  });

  it('prints it from the built command too', () => {
    const main = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));
    const run = spawnSync(process.execPath, [main, '--version'], { encoding: 'utf8' });
    expect([run.status, run.stdout]).toEqual([0, `${pkg.version}\n`]);
  });
});
