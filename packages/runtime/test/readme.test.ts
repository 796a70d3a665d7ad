/**
 * The README's code blocks, extracted and run (DESIGN §17.6): every `js` block runs with this Node
 * (ESM, in a temp directory whose `mcp.json` points at the testkit's scripted stdio server) and must
 * exit 0; every `ts` block is type-checked (tsc, strict) against the built packages, with the
 * README's placeholders (`config`, `callYourModel`, ...) declared below; every JSON configuration
 * block passes `parseConfig` and `stepbind config check`. `sh` blocks and JSON fragments that are
 * not configurations are not run. A block preceded by `<!-- readme-test: skip (REASON) -->` is
 * skipped and reported. Needs a built tree (`pnpm build`).
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseConfig } from '@stepbind/runtime';
import { readAuditTrail, stdioServerParams, type ServerFixture } from '@stepbind/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../src/cli/run.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));

/** One fenced block of the README. */
interface Block {
  readonly lang: string;
  readonly text: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  /** The reason of a `<!-- readme-test: skip (REASON) -->` just before it. */
  readonly skip?: string;
}

/** The fenced blocks of `markdown`, each with the skip marker that precedes it (blank lines aside). */
function readmeBlocks(markdown: string): Block[] {
  const lines = markdown.split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i]!);
    if (open === null) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && lines[i] !== '```'; i++) body.push(lines[i]!);
    let before = start - 1;
    while (before >= 0 && lines[before]!.trim() === '') before--;
    const marker = /^<!-- readme-test: skip \((.+)\) -->$/.exec(lines[before]?.trim() ?? '');
    blocks.push({
      lang: open[1]!,
      text: body.join('\n') + '\n',
      line: start + 1,
      ...(marker === null ? {} : { skip: marker[1]! }),
    });
  }
  return blocks;
}

type Kind = 'run' | 'typecheck' | 'config' | 'not-run';

/** What the test does with a block; an unknown language is an error (every block is accounted for). */
function kindOf(block: Block): Kind {
  switch (block.lang) {
    case 'js':
    case 'javascript':
      return 'run';
    case 'ts':
    case 'typescript':
      return 'typecheck';
    case 'json':
    case 'jsonc':
      // A configuration names its servers; other JSON (a package.json fragment) is not run.
      return /"(mcpServers|servers)"\s*:/.test(block.text) ? 'config' : 'not-run';
    case 'sh':
    case 'bash':
      return 'not-run';
    default:
      throw new Error(
        `README.md:${block.line}: a \`${block.lang || '(no language)'}\` block; label it js, ts, json, jsonc or sh.`,
      );
  }
}

const blocks = readmeBlocks(readFileSync(join(root, 'README.md'), 'utf8'));
const of = (kind: Kind): Block[] =>
  blocks.filter((b) => b.skip === undefined && kindOf(b) === kind);

/** What the `mcp.json` of the `js` blocks serves: one tool, runnable without an approval. */
const FIXTURE: ServerFixture = {
  generations: [
    {
      pages: [
        {
          tools: [
            {
              name: 'echo',
              description: 'Echoes its input.',
              inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
            },
          ],
        },
      ],
    },
  ],
  // For "A long call with progress" (sent only to a call that carries a progress token).
  calls: {
    echo: {
      progress: [
        { progress: 1, total: 2, message: 'half' },
        { progress: 2, total: 2 },
      ],
    },
  },
};

/** The README's placeholders, declared for the `ts` blocks (their types are what the blocks need). */
const PLACEHOLDERS = `
type ReadmeToolCall = { id: string; name: string; args: Record<string, unknown> };
declare const config: unknown;
declare const model: import('ai').LanguageModel;
declare const turn: number;
declare const reply: { toolCalls: ReadmeToolCall[] };
declare function callYourModel(
  tools: readonly import('@stepbind/runtime').ModelTool[],
): Promise<{ toolCalls: ReadmeToolCall[] }>;
declare function askTheUser(tool: string, args: unknown): Promise<boolean>;
declare function record(...values: unknown[]): void;
declare function log(value: unknown): void;
declare const chatModel: import('@langchain/core/language_models/chat_models').BaseChatModel;
declare const myApp: {
  sendUserToLogin(server: string, url: URL, redirectUri: string, signal: AbortSignal): Promise<string>;
};
`;

let dir: string;
const link = (target: string, name: string): void => {
  mkdirSync(dirname(join(dir, 'node_modules', name)), { recursive: true });
  symlinkSync(target, join(dir, 'node_modules', name), 'dir');
};

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'stepbind-readme-'));
  // The packages as an app sees them: by name, from dist (their own dependencies resolve from
  // their real paths), plus what the blocks import themselves.
  link(join(root, 'packages/runtime'), '@stepbind/runtime');
  link(join(root, 'packages/binding'), '@stepbind/binding');
  link(join(root, 'packages/runtime/node_modules/ai'), 'ai');
  link(join(root, 'packages/binding/node_modules/openai'), 'openai');
  link(join(root, 'node_modules/@types/node'), '@types/node');
  link(join(root, 'packages/runtime/node_modules/@langchain/core'), '@langchain/core');
  link(join(root, 'packages/runtime/node_modules/@openai/agents'), '@openai/agents');
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
  const server = stdioServerParams({
    scenario: 'fixture',
    fixture: FIXTURE,
    auditPath: join(dir, 'audit.jsonl'),
  });
  writeFileSync(
    join(dir, 'mcp.json'),
    JSON.stringify({ mcpServers: { files: { ...server, approval: 'none' } } }),
  );
});

afterAll(() => {
  const counts = (['run', 'typecheck', 'config', 'not-run'] as const).map(
    (kind) => `${of(kind).length} ${kind}`,
  );
  const skipped = blocks.filter((b) => b.skip !== undefined);
  console.log(
    `README.md blocks: ${counts.join(', ')}, ${skipped.length} skipped${skipped.map((b) => `\n  skipped README.md:${b.line} (${b.skip})`).join('')}`,
  );
  rmSync(dir, { recursive: true, force: true });
});

/**
 * How long one example or the type-check may take before it is stopped: only a guard against a
 * hang (tsc alone takes about 20 s on 2 busy cores), never a measurement.
 */
const EXAMPLE_BOUND_MS = 180_000;

function exec(
  file: string,
  args: readonly string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    // The bound only stops a hung example from outliving the test; it asserts nothing.
    execFile(
      file,
      args,
      { cwd: dir, timeout: EXAMPLE_BOUND_MS - 5_000 },
      (error, stdout, stderr) => {
        resolve({
          code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1,
          stdout,
          stderr,
        });
      },
    );
  });
}

/** The `${env:NAME}` variables a configuration refers to. */
const envNames = (text: string): string[] =>
  [...text.matchAll(/\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}/g)].map((m) => m[1]!);

describe('README.md code blocks', () => {
  it('every block has a known language, and each kind that the README has is exercised', () => {
    const kinds = new Set(blocks.map(kindOf));
    expect([...kinds].sort()).toEqual(['config', 'not-run', 'run', 'typecheck']);
    expect(of('run').length).toBeGreaterThan(0);
  });

  it.each(of('run').map((b) => [b.line, b] as const))(
    'the js block at README.md:%i runs on this Node and exits 0',
    async (line, block) => {
      const file = `readme-${line}.mjs`;
      writeFileSync(join(dir, file), block.text);
      const { code, stdout, stderr } = await exec(process.execPath, [file]);
      expect({ code, stderr }, `stdout:\n${stdout}`).toEqual({ code: 0, stderr: '' });
    },
    EXAMPLE_BOUND_MS,
  );

  it('the js blocks drove a real tool call through the scripted server', async () => {
    const calls = (await readAuditTrail(join(dir, 'audit.jsonl'))).filter(
      (e) => e.method === 'tools/call',
    );
    expect(calls.map((c) => c.tool)).toContain('echo');
  });

  it(
    'the ts blocks type-check (strict, NodeNext) against the built packages',
    async () => {
      const files = of('typecheck').map((block) => {
        const file = `readme-${block.line}.ts`;
        writeFileSync(join(dir, file), block.text);
        return file;
      });
      writeFileSync(join(dir, 'readme-placeholders.d.ts'), PLACEHOLDERS);
      writeFileSync(
        join(dir, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            strict: true,
            noUncheckedIndexedAccess: true,
            module: 'NodeNext',
            moduleResolution: 'NodeNext',
            target: 'ES2022',
            lib: ['ES2023', 'esnext.disposable'],
            types: ['node'],
            noEmit: true,
            skipLibCheck: true,
          },
          files: ['readme-placeholders.d.ts', ...files],
        }),
      );
      const tsc = join(root, 'node_modules/typescript/bin/tsc');
      const { code, stdout } = await exec(process.execPath, [
        tsc,
        '-p',
        'tsconfig.json',
        '--pretty',
        'false',
      ]);
      // readme-LINE.ts(row,col) names the README line of the block's opening fence.
      expect(stdout).toBe('');
      expect(code).toBe(0);
    },
    EXAMPLE_BOUND_MS,
  );

  it.each(of('config').map((b) => [b.line, b] as const))(
    'the configuration at README.md:%i passes parseConfig and `stepbind config check`',
    async (line, block) => {
      const file = join(dir, `readme-${line}.json`);
      writeFileSync(file, block.text);
      // Secrets stay in the environment: placeholders for the variables the block names.
      const names = envNames(block.text);
      const saved = names.map((name) => [name, process.env[name]] as const);
      for (const name of names) process.env[name] = `placeholder-${name.toLowerCase()}`;
      try {
        if (block.lang === 'json') expect(() => parseConfig(JSON.parse(block.text))).not.toThrow();
        let out = '';
        const code = await runCli(['config', 'check', file], {
          stdout: (t) => (out += t),
          stderr: (t) => (out += t),
        });
        expect({ code, out }).toMatchObject({ code: 0 });
      } finally {
        for (const [name, value] of saved) {
          if (value === undefined) delete process.env[name];
          else process.env[name] = value;
        }
      }
    },
  );
});
