import { fileURLToPath } from 'node:url';
import { isStepbindError } from '@stepbind/binding';
import { McpRuntime } from '@stepbind/runtime';
import { isProcessAlive } from '@stepbind/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { failure } from '../support/errors.js';

const everything = fileURLToPath(
  new URL(
    '../../../../node_modules/@modelcontextprotocol/server-everything/dist/index.js',
    import.meta.url,
  ),
);

let runtime: McpRuntime;
beforeAll(async () => {
  runtime = await McpRuntime.open({
    mcpServers: {
      everything: { command: process.execPath, args: [everything, 'stdio'], approval: 'none' },
    },
  });
}, 60_000);
afterAll(async () => {
  const pids = runtime.pids();
  await runtime.close();
  expect(pids.filter((pid) => isProcessAlive(pid))).toEqual([]);
});

describe('server-everything over stdio: resources and prompts in the step', () => {
  it('captures its resources, templates and prompts, server-qualified', async () => {
    await using step = await runtime.captureBinding();
    expect(step.resources.length).toBe(7);
    expect(step.resources[0]).toMatchObject({
      server: 'everything',
      uri: 'demo://resource/static/document/architecture.md',
      mimeType: 'text/markdown',
    });
    expect(Object.isFrozen(step.resources)).toBe(true);
    expect(Object.isFrozen(step.resources[0])).toBe(true);
    expect(step.resourceTemplates.map((t) => t.uriTemplate)).toEqual([
      'demo://resource/dynamic/text/{resourceId}',
      'demo://resource/dynamic/blob/{resourceId}',
    ]);
    const args = step.prompts.find((p) => p.name === 'args-prompt');
    expect(args).toMatchObject({
      modelName: 'everything__args-prompt',
      server: 'everything',
      arguments: [
        { name: 'city', required: true },
        { name: 'state', required: false },
      ],
    });
  });

  it('reads a listed resource from the server that listed it', async () => {
    await using step = await runtime.captureBinding();
    const read = await step.readResource('demo://resource/static/document/architecture.md');
    expect(read.server).toBe('everything');
    const first = read.contents[0];
    expect(first !== undefined && 'text' in first && String(first.text).length > 0).toBe(true);
    expect(Object.isFrozen(read.contents)).toBe(true);
  });

  it('reads a resource_link a tool of the step returned, and a uri it was never shown only with { server }', async () => {
    await using step = await runtime.captureBinding();
    const { result } = await step.prepareCall('everything__get-resource-links').run({ count: 2 });
    const link = result.content?.find((b) => b.type === 'resource_link');
    expect(link?.type).toBe('resource_link');
    const uri = link?.type === 'resource_link' ? link.uri : '';
    const read = await step.readResource(uri);
    expect(read.server).toBe('everything');
    expect(read.contents.length).toBeGreaterThan(0);
    // The same uri in another step, which no tool of it returned: refused unless a server is named.
    await using other = await runtime.captureBinding();
    const refused = await failure(other.readResource(uri));
    expect(refused.code).toBe('UNKNOWN_RESOURCE');
    expect(refused.detail).toMatchObject({ uri, delivery: 'not-sent' });
    expect((await other.readResource(uri, { server: 'everything' })).server).toBe('everything');
  });

  it('gets a prompt with its arguments checked first', async () => {
    await using step = await runtime.captureBinding();
    const prompt = await step.getPrompt('everything__args-prompt', { city: 'Lyon' });
    expect(prompt.messages.length).toBeGreaterThan(0);
    expect(JSON.stringify(prompt.messages)).toContain('Lyon');
    const missing = await failure(step.getPrompt('everything__args-prompt', { state: 'X' }));
    expect(missing.code).toBe('INVALID_ARGUMENTS');
    expect(missing.message).toContain('"city" is required');
    expect(missing.detail).toMatchObject({ server: 'everything', delivery: 'not-sent' });
    const unknown = await failure(step.getPrompt('args-prompt'));
    expect(unknown.code).toBe('UNKNOWN_PROMPT');
    expect(unknown.detail['matches']).toEqual(['everything__args-prompt']);
  });

  it('completes a prompt argument', async () => {
    await using step = await runtime.captureBinding();
    const done = await step.complete(
      { type: 'ref/prompt', name: 'everything__completable-prompt' },
      { name: 'department', value: 'E' },
    );
    expect(done.values).toContain('Engineering');
  });

  it('subscribes to a resource and is told of its updates until it unsubscribes', async () => {
    await using step = await runtime.captureBinding();
    const uri = 'demo://resource/static/document/architecture.md';
    const updates: string[] = [];
    let resolveFirst: () => void = () => undefined;
    const first = new Promise<void>((resolve) => {
      resolveFirst = resolve;
    });
    const unsubscribe = await step.subscribeResource(uri, (u) => {
      updates.push(u);
      resolveFirst();
    });
    await step.prepareCall('everything__toggle-subscriber-updates').run({});
    await first;
    expect(updates[0]).toBe(uri);
    await unsubscribe();
    await step.prepareCall('everything__toggle-subscriber-updates').run({});
  });

  it('refuses every request of a released step', async () => {
    const step = await runtime.captureBinding();
    step.release();
    const error = await failure(step.readResource(step.resources[0]?.uri ?? ''));
    expect(isStepbindError(error, 'BINDING_RELEASED')).toBe(true);
    expect((await failure(step.getPrompt('everything__simple-prompt'))).code).toBe(
      'BINDING_RELEASED',
    );
  });
});
