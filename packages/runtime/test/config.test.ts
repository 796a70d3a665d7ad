import { ConfigError, isStepbindError } from '@stepbind/binding';
import { parseConfig } from '@stepbind/runtime';
import { describe, expect, it } from 'vitest';

function pathOf(input: unknown): unknown {
  try {
    parseConfig(input);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    expect(isStepbindError(error, 'INVALID_CONFIG')).toBe(true);
    return (error as ConfigError).detail['path'];
  }
  throw new Error('expected parseConfig to throw');
}

describe('parseConfig', () => {
  it('accepts the Claude Desktop format and applies defaults', () => {
    const config = parseConfig({
      mcpServers: {
        files: { command: 'npx', args: ['-y', 'server-filesystem', '/tmp'], env: { A: '1' } },
        remote: {
          url: 'https://example.test/mcp',
          headers: { Authorization: 'Bearer x' },
          required: false,
        },
      },
    });
    const files = config.servers.get('files');
    expect(files).toMatchObject({
      transport: 'stdio',
      command: 'npx',
      required: true,
      audience: 'default',
    });
    expect(config.servers.get('remote')).toMatchObject({ transport: 'http', required: false });
    expect(config.concurrency).toBe(4);
  });

  it.each([
    'https://user:hunter2-secret@example.test/mcp',
    'https://only-a-user@example.test/mcp',
    'https://:hunter2-secret@example.test/mcp?api_key=x',
  ])('refuses credentials in the URL %s, pointing at headers, without repeating them', (url) => {
    let error: unknown;
    try {
      parseConfig({ mcpServers: { remote: { url } } });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const config = error as ConfigError;
    expect(config.code).toBe('INVALID_CONFIG');
    expect(config.detail['path']).toBe('$.mcpServers.remote.url');
    expect(config.message).toContain('"headers"');
    expect(config.message).not.toContain('hunter2');
    expect(config.message).not.toContain('only-a-user');
    expect(JSON.stringify(config)).not.toContain('hunter2');
  });

  it('accepts query parameters in the URL (they are redacted wherever the URL is shown)', () => {
    const config = parseConfig({ mcpServers: { r: { url: 'https://h.test/mcp?api_key=k' } } });
    expect(config.servers.get('r')).toMatchObject({ url: 'https://h.test/mcp?api_key=k' });
  });

  it('accepts empty-string arguments', () => {
    const config = parseConfig({ mcpServers: { a: { command: 'x', args: ['--prefix', ''] } } });
    expect(config.servers.get('a')).toMatchObject({ args: ['--prefix', ''] });
  });

  it.each([
    [{}, '$.mcpServers'],
    [{ mcpServers: {}, extra: 1 }, '$.extra'],
    [{ mcpServers: { a: { command: 'x', bogus: 1 } } }, '$.mcpServers.a.bogus'],
    [{ mcpServers: { a: { command: 'x', args: ['ok', 3] } } }, '$.mcpServers.a.args[1]'],
    [{ mcpServers: { a: { command: 'x', url: 'http://h' } } }, '$.mcpServers.a'],
    [{ mcpServers: { a: { url: 'ftp://h' } } }, '$.mcpServers.a.url'],
    [
      { mcpServers: { a: { command: 'x', limits: { maxPages: 0 } } } },
      '$.mcpServers.a.limits.maxPages',
    ],
    [
      { mcpServers: { a: { command: 'x', limits: { maxPagez: 1 } } } },
      '$.mcpServers.a.limits.maxPagez',
    ],
    [{ mcpServers: { a: { command: 'x', required: 'yes' } } }, '$.mcpServers.a.required'],
    [{ mcpServers: { a: { command: 'x', env: { K: 1 } } } }, '$.mcpServers.a.env.K'],
    [{ mcpServers: { 'bad name!': { command: 'x' } } }, '$.mcpServers["bad name!"]'],
    [{ mcpServers: {}, concurrency: 0 }, '$.concurrency'],
    [{ mcpServers: { a: { command: 'x', type: 'sse' } } }, '$.mcpServers.a.type'],
    [
      { mcpServers: { a: { command: 'x', maxMessageBytes: 1023 } } },
      '$.mcpServers.a.maxMessageBytes',
    ],
    [
      { mcpServers: { a: { url: 'http://h', maxMessageBytes: 2 ** 28 + 1 } } },
      '$.mcpServers.a.maxMessageBytes',
    ],
    [
      { mcpServers: { a: { command: 'x', maxMessageBytes: '1mb' } } },
      '$.mcpServers.a.maxMessageBytes',
    ],
  ])('rejects %j at %s', (input, path) => {
    expect(pathOf(input)).toBe(path);
  });

  it('gives every server a maxMessageBytes of 10 MiB (the SDK stdio buffer size) unless set', () => {
    const config = parseConfig({
      mcpServers: {
        local: { command: 'x' },
        remote: { url: 'http://h', maxMessageBytes: 1024 },
        big: { command: 'x', maxMessageBytes: 2 ** 28 },
      },
    });
    expect(config.servers.get('local')?.maxMessageBytes).toBe(10 * 1024 * 1024);
    expect(config.servers.get('remote')?.maxMessageBytes).toBe(1024);
    expect(config.servers.get('big')?.maxMessageBytes).toBe(2 ** 28);
  });
});

describe('parseConfig: call value bounds', () => {
  it('accepts depth and size bounds for arguments and results in limits', () => {
    const limits = {
      maxArgumentDepth: 8,
      maxArgumentBytes: 1024,
      maxOutputDepth: 16,
      maxOutputBytes: 4096,
    };
    const config = parseConfig({ mcpServers: { a: { command: 'x', limits } } });
    expect(config.servers.get('a')?.limits).toEqual(limits);
  });

  it.each(['maxArgumentDepth', 'maxArgumentBytes', 'maxOutputDepth', 'maxOutputBytes'])(
    'rejects a %s of 0 with its path',
    (key) => {
      expect(pathOf({ mcpServers: { a: { command: 'x', limits: { [key]: 0 } } } })).toBe(
        `$.mcpServers.a.limits.${key}`,
      );
    },
  );
});
