import { RuntimeError } from '@stepbind/binding';
import { createRedactor, redactHeaders, redactUrl } from '@stepbind/runtime';
import { describe, expect, it } from 'vitest';

describe('redactUrl', () => {
  it.each([
    ['https://host.test/mcp', 'https://host.test/mcp'],
    ['https://host.test/mcp?api_key=s3cret&v=2', 'https://host.test/mcp?api_key=***&v=***'],
    ['https://u:p4ss@host.test:8443/a/b?x=1#frag', 'https://host.test:8443/a/b?x=***#***'],
    ['http://127.0.0.1:9/mcp?token=a%20b', 'http://127.0.0.1:9/mcp?token=***'],
    ['not a url s3cret', '<unparseable URL ***>'],
  ])('shows %s as %s', (url, shown) => {
    expect(redactUrl(url)).toBe(shown);
  });
});

describe('redactHeaders', () => {
  it('keeps the names and hides every value', () => {
    expect(redactHeaders({ Authorization: 'Bearer t0ken', 'x-tenant': 'acme' })).toEqual({
      Authorization: '***',
      'x-tenant': '***',
    });
  });
});

describe('createRedactor', () => {
  const redactor = createRedactor('https://host.test/mcp?api_key=KEY-1234&v=2', {
    Authorization: 'Bearer TOKEN-5678',
  });

  it('replaces the URL, query values and header values (also the bare token) in text', () => {
    expect(
      redactor.text(
        'POST https://host.test/mcp?api_key=KEY-1234&v=2 said {"auth":"Bearer TOKEN-5678","t":"TOKEN-5678","k":"KEY-1234"}',
      ),
    ).toBe('POST https://host.test/mcp?api_key=***&v=*** said {"auth":"***","t":"***","k":"***"}');
  });

  it('copies an error with its detail and cause chain scrubbed, keeping class, code and HTTP status', () => {
    const inner = Object.assign(new Error('body: TOKEN-5678'), { code: 401 });
    const error = new RuntimeError('SERVER_START_FAILED', 'start failed: KEY-1234', {
      detail: { server: 's', note: ['Bearer TOKEN-5678'] },
      cause: new Error('wrapped', { cause: inner }),
    });
    const safe = redactor.error(error);
    expect(safe).toBeInstanceOf(RuntimeError);
    expect(safe.code).toBe('SERVER_START_FAILED');
    expect(safe.message).toBe('start failed: ***');
    expect(safe.detail).toEqual({ server: 's', note: ['***'] });
    const cause = safe.cause as Error & { cause: Error & { code: number } };
    expect(cause.message).toBe('wrapped');
    expect(cause.cause.message).toBe('body: ***');
    expect(cause.cause.code).toBe(401);
  });

  it('returns an error without secrets unchanged', () => {
    const error = new Error('plain failure');
    expect(redactor.error(error)).toBe(error);
  });

  it('does not scrub values too short to be secrets out of free text', () => {
    expect(redactor.text('version 2 of the protocol')).toBe('version 2 of the protocol');
  });
});
