import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { McpRuntime } from '@stepbind/runtime';
import { isProcessAlive, tempDir } from '@stepbind/testkit';
import { describe, expect, it } from 'vitest';
import { failure } from '../support/errors.js';
import { eventLog, firstEvents, nextEvent, type EventLog } from '../support/events.js';

const SERVER = fileURLToPath(
  new URL('../../../testkit/dist/server/resource-server.js', import.meta.url),
);

function entry(mode: string, env: Record<string, string> = {}, more: Record<string, unknown> = {}) {
  return { command: process.execPath, args: [SERVER, mode], env, approval: 'none', ...more };
}

async function open(
  servers: Record<string, ReturnType<typeof entry>>,
): Promise<{ runtime: McpRuntime; log: EventLog } & AsyncDisposable> {
  const log = eventLog();
  const runtime = await McpRuntime.open({ mcpServers: servers }, { onEvent: log.onEvent });
  return {
    runtime,
    log,
    [Symbol.asyncDispose]: async () => {
      const pids = runtime.pids();
      await runtime.close();
      expect(pids.filter((pid) => isProcessAlive(pid))).toEqual([]);
    },
  };
}

async function methods(file: string): Promise<string[]> {
  return (await readFile(file, 'utf8'))
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => (JSON.parse(line) as { method?: string }).method ?? '');
}

describe('resources and prompts of a scripted server (2025 era)', () => {
  it('lists every page of resources, and the step shows them frozen with templates and prompts', async () => {
    await using r = await open({ s: entry('legacy', { RESOURCE_SERVER_PAGES: '3' }) });
    await using step = await r.runtime.captureBinding();
    expect(step.resources.map((x) => x.uri)).toEqual([
      'test://r/0/1-0',
      'test://r/0/1-1',
      'test://big',
      'test://r/0/2-0',
      'test://r/0/2-1',
      'test://r/0/3-0',
      'test://r/0/3-1',
    ]);
    expect(step.resourceTemplates).toEqual([
      { server: 's', uriTemplate: 'test://t/{id}', name: 'by id', mimeType: 'text/plain' },
    ]);
    expect(step.prompts.map((p) => p.modelName)).toEqual(['s__greet']);
    expect(Object.isFrozen(step.prompts[0]?.arguments)).toBe(true);
  });

  it('list_changed refreshes the lists of the next step, never those of a captured step', async () => {
    await using r = await open({ s: entry('legacy', { RESOURCE_SERVER_PAGES: '1' }) });
    await using before = await r.runtime.captureBinding();
    const listed = nextEvent(r.log, 'features-listed', (e) => e.prompts === 2);
    await before.prepareCall('s__change').run({});
    await listed;
    await using after = await r.runtime.captureBinding();
    expect(before.resources.map((x) => x.uri)).toEqual([
      'test://r/0/1-0',
      'test://r/0/1-1',
      'test://big',
    ]);
    expect(before.prompts.map((p) => p.modelName)).toEqual(['s__greet']);
    expect(after.resources.map((x) => x.uri)).toEqual([
      'test://r/1/1-0',
      'test://r/1/1-1',
      'test://big',
    ]);
    expect(after.prompts.map((p) => p.modelName)).toEqual(['s__greet', 's__added-1']);
    expect(r.log.count('feature-list-changed')).toBeGreaterThanOrEqual(2);
    // The captured step still refuses what it was not shown.
    expect((await failure(before.getPrompt('s__added-1'))).code).toBe('UNKNOWN_PROMPT');
  });

  it('reads a resource_link from the server whose tool returned it, not another one', async () => {
    await using dir = tempDir('resources');
    const logA = dir.file('a.jsonl');
    const logB = dir.file('b.jsonl');
    await using r = await open({
      a: entry('legacy', { RESOURCE_SERVER_TAG: 'a', RESOURCE_SERVER_LOG: logA }),
      b: entry('legacy', { RESOURCE_SERVER_TAG: 'b', RESOURCE_SERVER_LOG: logB }),
    });
    await using step = await r.runtime.captureBinding();
    const unknown = await failure(step.readResource('test://linked/b'));
    expect(unknown.code).toBe('UNKNOWN_RESOURCE');
    expect(unknown.message).toContain('pass { server }');
    await step.prepareCall('b__links').run({});
    const read = await step.readResource('test://linked/b');
    expect(read).toMatchObject({ server: 'b', uri: 'test://linked/b' });
    expect(read.contents).toEqual([
      { uri: 'test://linked/b', mimeType: 'text/plain', text: 'test://linked/b from b' },
    ]);
    expect(await methods(logA)).not.toContain('resources/read');
    expect((await methods(logB)).filter((m) => m === 'resources/read')).toHaveLength(1);
    // A uri listed by both servers must name one.
    const both = await failure(step.readResource('test://big'));
    expect(both.detail).toMatchObject({ servers: ['a', 'b'] });
  });

  it('refuses contents over maxBytes with CONTENT_TOO_LARGE naming server and uri', async () => {
    await using r = await open({ s: entry('legacy', { RESOURCE_SERVER_BIG_BYTES: '4096' }) });
    await using step = await r.runtime.captureBinding();
    const error = await failure(step.readResource('test://big', { maxBytes: 4095 }));
    expect(error.code).toBe('CONTENT_TOO_LARGE');
    expect(error.detail).toMatchObject({ server: 's', uri: 'test://big', max: 4095 });
    const read = await step.readResource('test://big', { maxBytes: 4096 });
    expect(read.contents).toHaveLength(1);
  });

  it("bounds contents by the server's limits.maxOutputBytes by default", async () => {
    await using r = await open({
      s: entry(
        'legacy',
        { RESOURCE_SERVER_BIG_BYTES: '5000' },
        { limits: { maxOutputBytes: 4096 } },
      ),
    });
    await using step = await r.runtime.captureBinding();
    expect((await failure(step.readResource('test://big'))).code).toBe('CONTENT_TOO_LARGE');
  });

  it('checks prompt arguments before sending: required, strings, declared', async () => {
    await using dir = tempDir('resources');
    const file = dir.file('s.jsonl');
    await using r = await open({ s: entry('legacy', { RESOURCE_SERVER_LOG: file }) });
    await using step = await r.runtime.captureBinding();
    const missing = await failure(step.getPrompt('s__greet', {}));
    expect(missing.code).toBe('INVALID_ARGUMENTS');
    expect(missing.message).toContain('"name" is required');
    const notString = await failure(
      step.getPrompt('s__greet', { name: 3 } as unknown as Record<string, string>),
    );
    expect(notString.message).toContain('"name" must be a string');
    const undeclared = await failure(step.getPrompt('s__greet', { name: 'x', mood: 'y' }));
    expect(undeclared.message).toContain('"mood" is not an argument of it');
    expect(await methods(file)).not.toContain('prompts/get');
    const prompt = await step.getPrompt('s__greet', { name: 'Ada' });
    expect(prompt).toEqual({
      server: 's',
      modelName: 's__greet',
      description: 'a greeting',
      messages: [{ role: 'user', content: { type: 'text', text: 'Hello Ada' } }],
    });
  });

  it('completes prompt and resource-template arguments', async () => {
    await using r = await open({ s: entry('legacy') });
    await using step = await r.runtime.captureBinding();
    const prompt = await step.complete(
      { type: 'ref/prompt', name: 's__greet' },
      { name: 'name', value: 'al' },
    );
    expect(prompt.values).toEqual(['alpha', 'alpine']);
    const template = await step.complete(
      { type: 'ref/resource', uri: 'test://t/{id}' },
      { name: 'id', value: 'b' },
    );
    expect(template.values).toEqual(['beta']);
    const unknown = await failure(
      step.complete({ type: 'ref/resource', uri: 'test://nope/{id}' }, { name: 'id', value: '' }),
    );
    expect(unknown.code).toBe('UNKNOWN_RESOURCE');
  });

  it('ends subscriptions at release: the listener hears no more and resources/unsubscribe is sent', async () => {
    await using dir = tempDir('resources');
    const file = dir.file('s.jsonl');
    await using r = await open({ s: entry('legacy', { RESOURCE_SERVER_LOG: file }) });
    const step = await r.runtime.captureBinding();
    const heard: string[] = [];
    let resolveHeard: () => void = () => undefined;
    const first = new Promise<void>((resolve) => {
      resolveHeard = resolve;
    });
    await step.subscribeResource('test://r/0/1-0', (uri) => {
      heard.push(uri);
      resolveHeard();
    });
    await step.prepareCall('s__touch').run({});
    await first;
    step.release();
    await using next = await r.runtime.captureBinding();
    await next.prepareCall('s__touch').run({});
    // The server sends the update before the answer: had the listener stayed, it would have heard it.
    expect(heard).toEqual(['test://r/0/1-0']);
    const sent = await methods(file);
    expect(sent).toContain('resources/subscribe');
    expect(sent).toContain('resources/unsubscribe');
  });

  it('keeps the session subscribed while another step still listens: one subscribe, one unsubscribe', async () => {
    await using dir = tempDir('resources');
    const file = dir.file('s.jsonl');
    await using r = await open({ s: entry('legacy', { RESOURCE_SERVER_LOG: file }) });
    const first = await r.runtime.captureBinding();
    await using second = await r.runtime.captureBinding();
    const heard: string[] = [];
    await first.subscribeResource('test://r/0/1-0', () => undefined);
    await second.subscribeResource('test://r/0/1-0', (uri) => heard.push(uri));
    first.release();
    await second.prepareCall('s__touch').run({});
    expect(heard).toEqual(['test://r/0/1-0']);
    expect(
      (await methods(file)).filter((m) => m.startsWith('resources/') && m.endsWith('subscribe')),
    ).toEqual(['resources/subscribe']);
    second.release();
    // The last step's release sends the unsubscribe; a ping after it is answered after it.
    await using third = await r.runtime.captureBinding();
    await third.prepareCall('s__links').run({});
    expect((await methods(file)).filter((m) => m.endsWith('subscribe'))).toEqual([
      'resources/subscribe',
      'resources/unsubscribe',
    ]);
  });

  it('drops invalid items with a features-listed event and keeps the valid ones', async () => {
    await using r = await open({ s: entry('hostile', { RESOURCE_SERVER_PAGES: '1' }) });
    const [listed] = await firstEvents(r.log, 'features-listed', 1);
    await using step = await r.runtime.captureBinding();
    expect(step.resources.map((x) => x.uri)).toEqual([
      'test://r/0/1-0',
      'test://r/0/1-1',
      'test://big',
    ]);
    expect(step.prompts.map((p) => p.name)).toEqual(['greet']);
    expect(listed?.droppedCount).toBe(7);
    expect(listed?.dropped.map((d) => d.reason)).toContain(
      'repeats "test://r/0/1-0" listed before',
    );
  });

  it('refuses a listing whose cursors cycle (CURSOR_REPEATED) and lists the rest', async () => {
    await using r = await open({ s: entry('cycle') });
    const failed = await nextEvent(r.log, 'features-list-failed');
    expect(failed).toMatchObject({ server: 's', list: 'resources' });
    expect(failed.error.code).toBe('CURSOR_REPEATED');
    await using step = await r.runtime.captureBinding();
    expect(step.resources).toEqual([]);
    expect(step.prompts.map((p) => p.name)).toEqual(['greet']);
  });
});

describe('resources and prompts in the 2026-07-28 era', () => {
  it('lists, reads and gets prompts with the envelope; subscriptions are FEATURE_UNSUPPORTED', async () => {
    await using r = await open({ s: entry('modern', {}, { protocol: '2026-07-28' }) });
    await using step = await r.runtime.captureBinding();
    expect(r.runtime.status().servers[0]?.era).toBe('modern');
    expect(step.resources.length).toBe(7);
    const read = await step.readResource('test://r/0/1-0');
    expect(read.contents[0]).toMatchObject({ text: 'test://r/0/1-0 from rs' });
    expect((await step.getPrompt('s__greet', { name: 'Ada' })).messages).toHaveLength(1);
    const refused = await failure(step.subscribeResource('test://r/0/1-0', () => undefined));
    expect(refused.code).toBe('FEATURE_UNSUPPORTED');
    expect(refused.detail).toMatchObject({ server: 's', capability: 'resources.subscribe' });
  });
});
