import { isStepbindError } from '@stepbind/binding';
import { McpRuntime } from '@stepbind/runtime';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import {
  checkNodeVersion,
  isSupportedNode,
  SUPPORTED_NODE_RANGE,
  unsupportedNodeMessage,
} from '../src/node-version.js';

const CLI = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
const run = promisify(execFile);

/** `--import` code that makes the child report `version` as its Node version. */
const pretend = (version: string): string =>
  `data:text/javascript,Object.defineProperty(process.versions,"node",{value:"${version}"})`;

const realNode = process.versions.node;
afterEach(() => {
  Object.defineProperty(process.versions, 'node', { value: realNode });
});

describe('the supported Node range', () => {
  it('accepts 20.19+, 22.12+ and every version from 24 on, and nothing else', () => {
    const supported = ['20.19.0', 'v20.20.2', '22.12.0', '22.23.5', '24.0.0', '24.22.3', '26.1.0'];
    const unsupported = ['18.20.8', '20.18.3', '21.7.3', '22.11.0', '23.11.1', 'not a version'];
    expect(supported.filter((v) => !isSupportedNode(v))).toEqual([]);
    expect(unsupported.filter((v) => isSupportedNode(v))).toEqual([]);
    expect(isSupportedNode(process.versions.node)).toBe(true);
  });

  it('is the engines.node of the package', async () => {
    const pkg = JSON.parse(await readFile(new URL('../package.json', import.meta.url), 'utf8')) as {
      engines: { node: string };
    };
    expect(pkg.engines.node).toBe(SUPPORTED_NODE_RANGE);
  });

  it('refuses an unsupported version with a one-line UNSUPPORTED_NODE naming both versions', () => {
    expect(() => checkNodeVersion('22.11.0', 'McpRuntime.open')).toThrow(
      expect.objectContaining({
        code: 'UNSUPPORTED_NODE',
        detail: { running: '22.11.0', required: SUPPORTED_NODE_RANGE },
      }),
    );
    const message = unsupportedNodeMessage('v20.18.1') ?? '';
    expect(message).toBe(
      `stepbind needs Node ${SUPPORTED_NODE_RANGE} (tested on 20.20, 22.23, 24.22); this is Node 20.18.1. Run it with a supported Node, such as the current 22 or 24 LTS.`,
    );
    expect(message).not.toContain('\n');
    expect(() => checkNodeVersion()).not.toThrow();
  });

  it('McpRuntime.open refuses before it starts anything', async () => {
    Object.defineProperty(process.versions, 'node', { value: '20.18.1' });
    // A server that would fail to start: the version check must come first.
    const config = { mcpServers: { s: { command: '/nonexistent/stepbind-test-server' } } };
    await expect(McpRuntime.open(config)).rejects.toSatisfy(
      (e: unknown) =>
        isStepbindError(e) &&
        e.code === 'UNSUPPORTED_NODE' &&
        e.message.startsWith('McpRuntime.open needs Node ') &&
        e.message.includes('this is Node 20.18.1'),
    );
  });

  it('the CLI prints one plain line and exits 1 on an unsupported Node', async () => {
    const failed = await run(process.execPath, [
      '--import',
      pretend('21.7.3'),
      CLI,
      '--version',
    ]).then(
      () => undefined,
      (error: unknown) => error as { code: number; stdout: string; stderr: string },
    );
    expect(failed?.code).toBe(1);
    expect(failed?.stdout).toBe('');
    expect(failed?.stderr).toBe(
      `stepbind: UNSUPPORTED_NODE: ${unsupportedNodeMessage('21.7.3')}\n`,
    );
    // The same CLI on a supported (pretended) version runs.
    const ok = await run(process.execPath, ['--import', pretend('22.12.0'), CLI, '--version']);
    expect(ok.stdout).toMatch(/\d+\.\d+\.\d+/);
  });
});
