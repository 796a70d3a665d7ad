import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { isStepbindError } from '@stepbind/binding';
import { parseConfig } from '@stepbind/runtime';
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
    const config = parseConfig(example, { env: { HOME: '/home/u', SEARCH_TOKEN: 't' } });
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
  });
});
