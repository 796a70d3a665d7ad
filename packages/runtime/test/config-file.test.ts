import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, realpath, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isStepbindError, type StepbindError } from '@stepbind/binding';
import {
  loadConfigFile,
  McpRuntime,
  parseConfig,
  workspaceFolderOf,
  type ConfigProblem,
  type StepbindConfig,
} from '@stepbind/runtime';
import { stdioServerParams } from '@stepbind/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let dir: string;
beforeAll(async () => {
  // realpath: the child's `pwd` reports the resolved directory (macOS /var → /private/var).
  dir = await realpath(await mkdtemp(join(tmpdir(), 'stepbind-config-file-')));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

let files = 0;
/** Writes `text` to a new file under the temp directory (in `sub`, when given) and returns its path. */
async function file(text: string, sub = `f${++files}`, name = 'mcp.json'): Promise<string> {
  const path = join(dir, sub, name);
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, text);
  return path;
}

async function refusal(path: string, env: Record<string, string> = {}): Promise<StepbindError> {
  const error: unknown = await loadConfigFile(path, { env }).catch((e: unknown) => e);
  if (isStepbindError(error, 'INVALID_CONFIG')) return error;
  throw new Error(`expected INVALID_CONFIG, got ${String(error)}`);
}

const problemsOf = (error: StepbindError): readonly ConfigProblem[] =>
  error.detail['errors'] as readonly ConfigProblem[];

/** A stdio entry of a real scripted server. */
function scripted(): { command: string; args: string[] } {
  const params = stdioServerParams({ scenario: 'single' });
  return { command: params.command, args: [...params.args] };
}

describe('loadConfigFile: every problem named by its path', () => {
  const ok = { command: 'node' };
  const cases: [string, unknown, string[], string?][] = [
    [
      'a typo of command',
      { mcpServers: { files: { comand: 'x' } } },
      ['$.mcpServers.files', '$.mcpServers.files.comand'],
      'did you mean "command"?',
    ],
    [
      'a typo beside command',
      { mcpServers: { files: { ...ok, comand: 'x' } } },
      ['$.mcpServers.files.comand'],
      'did you mean "command"?',
    ],
    [
      'a typo of args',
      { mcpServers: { files: { ...ok, arg: [] } } },
      ['$.mcpServers.files.arg'],
      'did you mean "args"?',
    ],
    [
      'a typo of mcpServers',
      { mcpServer: { files: ok } },
      ['$.mcpServer', '$.mcpServers'],
      'did you mean "mcpServers"?',
    ],
    [
      'a typo of concurrency',
      { mcpServers: {}, concurency: 2 },
      ['$.concurency'],
      'did you mean "concurrency"?',
    ],
    [
      'a typo in journal',
      { mcpServers: {}, journal: { path: 'j.db', synchronus: 'full' } },
      ['$.journal.synchronus'],
      'did you mean "synchronous"?',
    ],
    [
      'a typo in limits',
      { mcpServers: { a: { ...ok, limits: { maxPage: 2 } } } },
      ['$.mcpServers.a.limits.maxPage'],
      'did you mean "maxPages"?',
    ],
    [
      'a typo in tools',
      { mcpServers: { a: { ...ok, tools: { alow: ['x'] } } } },
      ['$.mcpServers.a.tools.alow'],
      'did you mean "allow"?',
    ],
    [
      'a typo in an http entry',
      { servers: { web: { url: 'https://h.test/mcp', header: {} } } },
      ['$.servers.web.header'],
      'did you mean "headers"?',
    ],
    [
      'a typo in store',
      { mcpServers: {}, store: { url: 'postgres://db/x', schma: 'a' } },
      ['$.store.schma'],
      'did you mean "schema"?',
    ],
    ['a key far from any', { mcpServers: { a: { ...ok, zzzzzz: 1 } } }, ['$.mcpServers.a.zzzzzz']],
    ['no servers', { journal: { path: 'j.db' } }, ['$.mcpServers']],
    ['servers twice', { mcpServers: {}, servers: {} }, ['$.servers']],
    ['a bad server name', { mcpServers: { 'a b': ok } }, ['$.mcpServers["a b"]']],
    ['an entry that is a string', { mcpServers: { a: 'node' } }, ['$.mcpServers.a']],
    ['args not an array', { mcpServers: { a: { ...ok, args: '-y' } } }, ['$.mcpServers.a.args']],
    [
      'a number in args',
      { mcpServers: { a: { ...ok, args: ['x', 1] } } },
      ['$.mcpServers.a.args[1]'],
    ],
    [
      'a bad approval',
      { mcpServers: { a: { ...ok, approval: 'never' } } },
      ['$.mcpServers.a.approval'],
    ],
    ['a bad stderr', { mcpServers: { a: { ...ok, stderr: 'file' } } }, ['$.mcpServers.a.stderr']],
    [
      'a negative timeout',
      { mcpServers: { a: { ...ok, timeout: -1 } } },
      ['$.mcpServers.a.timeout'],
    ],
    ['a bad concurrency', { mcpServers: {}, concurrency: 100 }, ['$.concurrency']],
    ['a journal without path', { mcpServers: {}, journal: {} }, ['$.journal.path']],
    [
      'a bad journal synchronous',
      { mcpServers: {}, journal: { path: 'j.db', synchronous: 'off' } },
      ['$.journal.synchronous'],
    ],
    ['an ftp url', { mcpServers: { a: { url: 'ftp://h.test/' } } }, ['$.mcpServers.a.url']],
    [
      'auth on a stdio server',
      { mcpServers: { a: { ...ok, auth: { type: 'bearer', token: 't' } } } },
      ['$.mcpServers.a.auth'],
    ],
    ['a store that is not postgres', { mcpServers: {}, store: 'mysql://db/x' }, ['$.store']],
    [
      'a disabled entry with a typo',
      { mcpServers: { a: { ...ok, disabled: true, cmd: 1 } } },
      ['$.mcpServers.a.cmd'],
    ],
    [
      'a relative root in an entry whose value is not a string',
      { mcpServers: { a: { ...ok, roots: [3] } } },
      ['$.mcpServers.a.roots[0]'],
    ],
  ];

  it.each(cases)('%s', async (_name, config, paths, hint) => {
    const error = await refusal(await file(JSON.stringify(config, null, 2)));
    expect(problemsOf(error).map((p) => p.path)).toEqual(paths);
    expect(error.detail['path']).toBe(paths[0]);
    if (hint !== undefined) expect(error.message).toContain(hint);
  });

  it('reports every problem of a file at once, the first few in the message and all in detail.errors', async () => {
    const path = await file(
      JSON.stringify({
        mcpServers: {
          files: { comand: 'npx', args: ['-y', 2] },
          web: { url: 'https://h.test/mcp', headers: { 'X-Key': '${env:UNSET_KEY}' }, timout: 5 },
          db: { command: 'x', approval: 'always', limits: { maxTools: -1 } },
        },
        journal: { path: '' },
        concurrency: 0,
      }),
    );
    const error = await refusal(path);
    const paths = problemsOf(error).map((p) => p.path);
    expect(paths.sort()).toEqual(
      [
        '$.concurrency',
        '$.journal.path',
        '$.mcpServers.files',
        '$.mcpServers.files.comand',
        '$.mcpServers.web.timout',
        '$.mcpServers.web.headers["X-Key"]',
        '$.mcpServers.db.approval',
        '$.mcpServers.db.limits.maxTools',
      ].sort(),
    );
    expect(error.message).toContain(path);
    expect(error.message).toContain('8 problems');
    expect(error.message).toContain('And 3 more (see detail.errors)');
    expect(problemsOf(error).find((p) => p.path === '$.mcpServers.web.timout')?.message).toContain(
      'did you mean "timeout"?',
    );
  });

  it('keeps the single-problem message and detail as they were', () => {
    let error: unknown;
    try {
      parseConfig({ mcpServers: { a: { command: 'x', comand: 'y' } } });
    } catch (e) {
      error = e;
    }
    expect(isStepbindError(error, 'INVALID_CONFIG')).toBe(true);
    const refused = error as StepbindError;
    expect(refused.message).toBe(
      'Invalid configuration at $.mcpServers.a.comand: unknown key (did you mean "command"?); the keys allowed here are command, args, env, envPassthrough, cwd, stderr, type, disabled, required, audience, startupTimeoutMs, protocol, discoverTimeoutMs, requestTimeoutMs, callTimeoutMs, timeout, limits, approval, autoApprove, tools, roots, maxMessageBytes, retryReads, trustAnnotations, start, idleTimeoutMs.',
    );
    expect(refused.detail['errors']).toEqual([
      { path: '$.mcpServers.a.comand', message: expect.stringContaining('unknown key') as string },
    ]);
  });
});

describe('loadConfigFile: JSONC', () => {
  it('opens a real stdio server from a file with comments and trailing commas, by path', async () => {
    const server = scripted();
    const path = await file(`// my servers
{
  /* the scripted one */
  "mcpServers": {
    "one": {
      "command": ${JSON.stringify(server.command)},
      "args": ${JSON.stringify(server.args)}, // trailing comma next
    },
  },
}
`);
    await using runtime = await McpRuntime.open(path, { approval: 'none' });
    expect(runtime.status().servers.map((s) => [s.name, s.state])).toEqual([['one', 'ready']]);
    await using step = await runtime.captureBinding();
    expect(step.tools.map((t) => t.name)).toEqual(['one__alpha', 'one__beta']);
  });

  it('opens the same file with McpRuntime.fromFile, relative to the working directory', async () => {
    const server = scripted();
    const path = await file(JSON.stringify({ mcpServers: { one: server } }));
    await using runtime = await McpRuntime.fromFile(relative(process.cwd(), path), {
      approval: 'none',
    });
    expect(runtime.status().servers[0]?.state).toBe('ready');
  });

  it('accepts a byte order mark', async () => {
    const config = await loadConfigFile(
      await file('\uFEFF{ "mcpServers": { "a": { "command": "x" } } }'),
    );
    expect([...config.servers.keys()]).toEqual(['a']);
  });

  it('names line, column and kind of each syntax error, never the text around it', async () => {
    const path = await file(
      '{\n  "mcpServers": {\n    "a": { "command": "x", "env": { "TOKEN": "hunter2-secret" } }\n    "b": { "command": "y" }\n  }\n}\n',
    );
    const error = await refusal(path);
    expect(error.message).toContain(path);
    expect(error.message).toContain('line 4, column 5: a comma was expected (CommaExpected)');
    expect(error.detail).toMatchObject({
      line: 4,
      column: 5,
      kind: 'CommaExpected',
      syntaxErrors: [{ line: 4, column: 5, kind: 'CommaExpected' }],
    });
    expect(JSON.stringify(error.toJSON())).not.toContain('hunter2');
  });

  it('says an empty file or one with two values is not a configuration', async () => {
    const empty = await refusal(await file('  // nothing\n'));
    expect(empty.detail['kind']).toBe('ValueExpected');
    const two = await refusal(await file('{ "mcpServers": {} } {}'));
    expect(two.message).toContain('line 1, column 22: the end of the file was expected');
  });

  it('refuses a McpRuntime.fromFile without a path', async () => {
    const error: unknown = await McpRuntime.fromFile({ mcpServers: {} } as unknown as string).catch(
      (e: unknown) => e,
    );
    expect(isStepbindError(error, 'INVALID_CONFIG')).toBe(true);
    expect((error as Error).message).toContain('call McpRuntime.open(config)');
  });
});

describe('loadConfigFile: paths and editor variables', () => {
  it('resolves ${workspaceFolder} in cwd and args of .vscode/mcp.json to the folder holding .vscode', async () => {
    const project = join(dir, 'project');
    await mkdir(join(project, 'work'), { recursive: true });
    const out = join(project, 'seen.txt');
    const server = scripted();
    // The child writes its working directory and first argument, then becomes the scripted server.
    const script = 'pwd > "$OUT"; printf "%s\\n" "$1" >> "$OUT"; shift; exec "$@"';
    const path = await file(
      JSON.stringify({
        servers: {
          probe: {
            type: 'stdio',
            command: 'sh',
            args: ['-c', script, 'sh', '${workspaceFolder}/data', server.command, ...server.args],
            cwd: '${workspaceFolder}/work',
            env: { OUT: '${workspaceFolder}/seen.txt' },
          },
        },
      }),
      'project/.vscode',
    );
    expect(workspaceFolderOf(path)).toBe(project);
    await using runtime = await McpRuntime.open(path, { approval: 'none' });
    expect(runtime.status().servers[0]?.state).toBe('ready');
    expect((await readFile(out, 'utf8')).split('\n').slice(0, 2)).toEqual([
      join(project, 'work'),
      join(project, 'data'),
    ]);
  });

  it("takes a file's own directory as the workspace folder outside .vscode, and a relative cwd as the file's", async () => {
    const path = await file(
      JSON.stringify({
        mcpServers: { a: { command: 'x', cwd: 'sub', args: ['${workspaceFolder}'] } },
      }),
      'plain',
    );
    const config = await loadConfigFile(path);
    expect(config.servers.get('a')).toMatchObject({
      cwd: join(dir, 'plain', 'sub'),
      args: [join(dir, 'plain')],
    });
    expect(workspaceFolderOf(join(dir, 'p', '.cursor', 'mcp.json'))).toBe(join(dir, 'p'));
  });

  it('resolves ${userHome}, also in a plain Claude Desktop / Cursor file', async () => {
    const plain = await file(
      JSON.stringify({ mcpServers: { a: { command: '${userHome}/bin/x' } } }),
    );
    expect((await loadConfigFile(plain)).servers.get('a')).toMatchObject({
      command: join(homedir(), 'bin/x'),
    });
    expect(
      (await loadConfigFile(plain, { userHome: '/home/someone' })).servers.get('a'),
    ).toMatchObject({ command: '/home/someone/bin/x' });
  });

  it('opens a relative journal path against the file, not the working directory', async () => {
    const server = scripted();
    const path = await file(
      JSON.stringify({ mcpServers: { one: server }, journal: { path: 'journal.db' } }),
      'journaled',
    );
    expect(dirname(path)).not.toBe(process.cwd());
    {
      await using runtime = await McpRuntime.open(path, { approval: 'none' });
      await using step = await runtime.captureBinding();
      await step.prepareCall('one__alpha').run({}, { idempotencyKey: 'k1' });
    }
    expect(existsSync(join(dir, 'journaled', 'journal.db'))).toBe(true);
    expect(existsSync(join(process.cwd(), 'journal.db'))).toBe(false);
    expect((await loadConfigFile(path)).journal?.path).toBe(join(dir, 'journaled', 'journal.db'));
  });

  it('resolves relative roots against the file and refuses them in an object', async () => {
    const config = { mcpServers: { a: { command: 'x', roots: ['docs', '/abs', 'file:///u'] } } };
    const path = await file(JSON.stringify(config), 'rooted');
    expect((await loadConfigFile(path)).servers.get('a')?.roots).toEqual([
      join(dir, 'rooted', 'docs'),
      '/abs',
      'file:///u',
    ]);
    expect(() => parseConfig(config)).toThrow(
      /\$\.mcpServers\.a\.roots\[0\]: expected an absolute path or a file:\/\/ URI \(a relative path is relative to a configuration file/,
    );
  });

  it.each([
    ['${input:token}', 'is a VS Code prompt'],
    ['${command:pickFolder}', 'runs a VS Code command'],
    ['${config:editor.fontSize}', 'reads a VS Code setting'],
    ['${file}', 'is the state of a VS Code window'],
    ['${selectedText}', 'is the state of a VS Code window'],
    ['${workspaceFolder:api}', 'names one folder of a multi-root workspace'],
  ])('refuses %s with the reason', async (reference, reason) => {
    const path = await file(
      JSON.stringify({ servers: { a: { type: 'stdio', command: 'x', args: [reference] } } }),
    );
    const error = await refusal(path);
    expect(error.detail).toMatchObject({ path: '$.servers.a.args[0]' });
    expect(error.message).toContain(reason);
    expect(error.message).toContain('stepbind');
  });

  it('says a configuration passed as an object has no workspace folder', () => {
    const config: StepbindConfig = {
      servers: { a: { type: 'stdio', command: 'x', cwd: '${workspaceFolder}' } },
    };
    expect(() => parseConfig(config)).toThrow(
      /\$\.servers\.a\.cwd: \$\{workspaceFolder\} needs a workspace folder, and a configuration passed as an object has none/,
    );
  });
});

describe('the configurations the repository shows', () => {
  const repo = (path: string): string =>
    fileURLToPath(new URL(`../../../${path}`, import.meta.url));
  /** Every `${env:NAME}` / `${NAME}` of a text, set to a placeholder. */
  const envFor = (text: string): Record<string, string> => {
    const env: Record<string, string> = {};
    for (const m of text.matchAll(/\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}/g)) {
      env[m[1] ?? ''] = 'set';
    }
    return env;
  };

  it('loads the example mcp.json by its path, its variables set', async () => {
    const path = repo('mcp.json');
    const config = await loadConfigFile(path, { env: envFor(await readFile(path, 'utf8')) });
    expect([...config.servers.keys()]).toEqual(['files', 'memory', 'search']);
  });

  it('loads every JSON configuration block of README.md as a file, its variables set', async () => {
    const readme = await readFile(repo('README.md'), 'utf8');
    const blocks = [...readme.matchAll(/```jsonc?\n([\s\S]*?)```/g)]
      .map((m) => m[1] ?? '')
      .filter((block) => /"(mcpServers|servers)"\s*:/.test(block));
    expect(blocks.length).toBeGreaterThan(0);
    for (const [i, block] of blocks.entries()) {
      const path = await file(block, `readme-${i}`);
      const config = await loadConfigFile(path, { env: envFor(block) });
      expect(config.servers.size + config.disabled.length).toBeGreaterThan(0);
    }
  });
});
