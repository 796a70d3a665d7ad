import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { isStepbindError } from '@stepbind/binding';
import {
  parseConfig,
  type HttpServerEntry,
  type StdioServerEntry,
  type StepbindConfigCommon,
} from '@stepbind/runtime';
import { describe, expect, it } from 'vitest';

const root = (file: string): unknown =>
  JSON.parse(readFileSync(fileURLToPath(new URL(`../../../${file}`, import.meta.url)), 'utf8'));
const schema = root('stepbind.schema.json') as {
  properties: Record<string, unknown>;
  $defs: Record<string, { properties: Record<string, { properties?: Record<string, unknown> }> }>;
};

/** The keys parseConfig allows at a place, read from its unknown-key message. */
function allowedKeys(input: unknown): string[] {
  try {
    parseConfig(input, { env: {} });
  } catch (error) {
    if (!isStepbindError(error, 'INVALID_CONFIG')) throw error;
    const match = /the keys allowed here are (.*)\.$/.exec(error.message);
    if (match?.[1] !== undefined) return match[1].split(', ').sort();
    throw error;
  }
  throw new Error('expected an unknown-key refusal');
}
const keys = (o: Record<string, unknown> | undefined): string[] => Object.keys(o ?? {}).sort();

describe('stepbind.schema.json and mcp.json', () => {
  it('is a valid 2020-12 schema that accepts the example mcp.json, which the parser accepts too', () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    const validate = ajv.compile(schema);
    const example = root('mcp.json');
    expect(validate(example), JSON.stringify(validate.errors)).toBe(true);
    const config = parseConfig(example, { env: {} }); // needs no variable: config check passes as is
    expect([...config.servers.keys()]).toEqual(['files', 'memory', 'search']);
    expect(config.disabled).toEqual(['legacy']);
    expect(validate({ mcpServers: { a: { command: 'x', bogus: 1 } } })).toBe(false);
  });

  it('names exactly the keys the parser allows, at every level', () => {
    const { stdio, http } = schema.$defs;
    expect(keys(schema.properties)).toEqual(allowedKeys({ mcpServers: {}, bogus: 1 }));
    expect(keys(stdio?.properties)).toEqual(
      allowedKeys({ mcpServers: { a: { command: 'x', bogus: 1 } } }),
    );
    expect(keys(http?.properties)).toEqual(
      allowedKeys({ mcpServers: { a: { url: 'http://h/mcp', bogus: 1 } } }),
    );
    expect(keys(stdio?.properties['limits']?.properties)).toEqual(
      allowedKeys({ mcpServers: { a: { command: 'x', limits: { bogus: 1 } } } }),
    );
    expect(keys(stdio?.properties['tools']?.properties)).toEqual(
      allowedKeys({ mcpServers: { a: { command: 'x', tools: { bogus: 1 } } } }),
    );
    const journal = schema.properties['journal'] as { properties: Record<string, unknown> };
    expect(keys(journal.properties)).toEqual(
      allowedKeys({ mcpServers: {}, journal: { path: 'j.db', bogus: 1 } }),
    );
  });

  it('names exactly the keys of the StepbindConfig type (each list must name every key of its type)', () => {
    // `Record<keyof T, true>` fails to compile when a key of the type is missing or one is extra.
    const top: Record<keyof StepbindConfigCommon | 'mcpServers' | 'servers', true> = {
      $schema: true,
      inputs: true,
      concurrency: true,
      journal: true,
      store: true,
      cache: true,
      mcpServers: true,
      servers: true,
    };
    const common = {
      type: true,
      disabled: true,
      required: true,
      audience: true,
      startupTimeoutMs: true,
      protocol: true,
      discoverTimeoutMs: true,
      requestTimeoutMs: true,
      callTimeoutMs: true,
      timeout: true,
      limits: true,
      approval: true,
      autoApprove: true,
      tools: true,
      roots: true,
      maxMessageBytes: true,
      retryReads: true,
      trustAnnotations: true,
    } as const;
    const stdioKeys: Record<Exclude<keyof StdioServerEntry, 'url'>, true> = {
      ...common,
      command: true,
      args: true,
      env: true,
      envPassthrough: true,
      cwd: true,
      stderr: true,
    };
    const httpKeys: Record<Exclude<keyof HttpServerEntry, 'command'>, true> = {
      ...common,
      url: true,
      headers: true,
      auth: true,
    };
    const { stdio, http } = schema.$defs;
    expect(keys(top)).toEqual(keys(schema.properties));
    expect(keys(stdioKeys)).toEqual(keys(stdio?.properties));
    expect(keys(httpKeys)).toEqual(keys(http?.properties));
  });
});

describe('the store key', () => {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  const validate = ajv.compile(schema);
  const base = { mcpServers: { a: { command: 'x' } } };

  it('takes a URL or { url, schema } in the schema and in the parser alike', () => {
    for (const store of ['postgres://db/app', { url: 'postgresql://db/app', schema: 'fleet_a' }]) {
      expect(validate({ ...base, store }), JSON.stringify(validate.errors)).toBe(true);
      expect(parseConfig({ ...base, store }, { env: {} }).store).toEqual(
        typeof store === 'string' ? { url: store } : store,
      );
    }
    for (const store of [42, { url: 'postgres://db/app', bogus: 1 }, { schema: 'x' }]) {
      expect(validate({ ...base, store })).toBe(false);
      expect(() => parseConfig({ ...base, store }, { env: {} })).toThrow(/\$\.store/);
    }
  });

  it('takes the timeouts of a database that stops answering, in range, in the schema and the parser alike', () => {
    const store = {
      url: 'postgres://db/app',
      connectTimeoutMs: 2000,
      statementTimeoutMs: 3000,
      queryTimeoutMs: 4000,
      idleInTransactionTimeoutMs: 5000,
      keepAliveInitialDelayMs: 6000,
      closeGraceMs: 200,
      maxStalenessMs: 7000,
    };
    expect(validate({ ...base, store }), JSON.stringify(validate.errors)).toBe(true);
    expect(parseConfig({ ...base, store }, { env: {} }).store).toEqual(store);
    for (const bad of [0, -1, 1.5, 2 ** 31, Infinity, '1000']) {
      const value = { url: 'postgres://db/app', statementTimeoutMs: bad };
      expect(validate({ ...base, store: value })).toBe(false);
      expect(() => parseConfig({ ...base, store: value }, { env: {} })).toThrow(
        /\$\.store\.statementTimeoutMs: expected an integer from 1 to 2147483647/,
      );
    }
  });

  it('names exactly the keys the parser allows inside { url, schema }', () => {
    const store = schema.properties['store'] as { oneOf: { properties?: object }[] };
    const object = store.oneOf.find((o) => o.properties !== undefined);
    expect(keys(object?.properties as Record<string, unknown>)).toEqual(
      allowedKeys({ mcpServers: {}, store: { url: 'postgres://db/x', bogus: 1 } }),
    );
  });

  it('replaces ${env:NAME} in the URL and never echoes it in an error', () => {
    const env = { PG_URL: 'postgres://u:secret@db/app' };
    expect(parseConfig({ ...base, store: '${env:PG_URL}' }, { env }).store?.url).toBe(env.PG_URL);
    let message = '';
    try {
      parseConfig({ ...base, store: 'mysql://u:secret@db/app' }, { env: {} });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/\$\.store: expected a URL starting with postgres:\/\//);
    expect(message).not.toContain('secret');
  });
});

describe('the protocol keys', () => {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  const validate = ajv.compile(schema);
  const server = (more: Record<string, unknown>) => ({
    mcpServers: { a: { command: 'x', ...more } },
  });

  it('take the same values in the schema and in the parser', () => {
    const good = [
      {},
      { protocol: 'auto' },
      { protocol: '2026-07-28' },
      { protocol: '2025-11-25' },
      { discoverTimeoutMs: 5000 },
      { protocol: 'auto', discoverTimeoutMs: 5000 },
    ];
    for (const more of good) {
      expect(validate(server(more)), JSON.stringify(validate.errors)).toBe(true);
      expect(() => parseConfig(server(more), { env: {} })).not.toThrow();
    }
    const bad = [
      { protocol: 'modern' },
      { protocol: '2025-06-18' },
      { discoverTimeoutMs: 0 },
      { protocol: '2026-07-28', discoverTimeoutMs: 5000 },
      { protocol: '2025-11-25', discoverTimeoutMs: 5000 },
    ];
    for (const more of bad) {
      expect(validate(server(more))).toBe(false);
      expect(() => parseConfig(server(more), { env: {} })).toThrow(/\$\.mcpServers\.a\./);
    }
  });
});
