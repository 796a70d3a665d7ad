import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { isStepbindError } from '@stepbind/binding';
import { describe, expect, it } from 'vitest';
import { listenForCallback, loopbackAuthorize } from '../../src/auth/loopback.js';

/** One GET over a fresh connection: status, body and the headers that matter. */
async function get(
  url: string,
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return await new Promise((resolve, reject) => {
    const req = httpRequest(url, { agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** Resolves when nothing listens on `port` any more (a connect is refused). */
async function refused(port: number): Promise<boolean> {
  return await new Promise((resolve) => {
    const req = httpRequest({ host: '127.0.0.1', port, path: '/', agent: false }, () =>
      resolve(false),
    );
    req.on('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'ECONNREFUSED'));
    req.end();
  });
}

const portOf = (url: string): number => Number(new URL(url).port);

describe('listenForCallback', () => {
  it('resolves with the full callback URL, answers the browser and closes the port', async () => {
    const listener = await listenForCallback({ redirectUri: 'http://127.0.0.1:0/callback' });
    listener.expectState('s1');
    const port = portOf(listener.redirectUri);
    expect(port).toBeGreaterThan(0);
    expect(listener.redirectUri).toBe(`http://127.0.0.1:${port}/callback`);

    const page = await get(`${listener.redirectUri}?code=c0de&state=s1&iss=https%3A%2F%2Fas`);

    expect(page.status).toBe(200);
    expect(page.body).toContain('You can close this tab');
    expect(page.body).not.toContain('c0de');
    expect(page.headers['cache-control']).toBe('no-store');
    expect(page.headers['referrer-policy']).toBe('no-referrer');
    await expect(listener.callback).resolves.toBe(
      `http://127.0.0.1:${port}/callback?code=c0de&state=s1&iss=https%3A%2F%2Fas`,
    );
    await listener.close();
    expect(await refused(port)).toBe(true);
  });

  it('rejects AUTH_FAILED with the oauth error code when the redirect carries error=', async () => {
    await using listener = await listenForCallback({
      redirectUri: 'http://127.0.0.1:0/cb',
    });
    listener.expectState('s1');

    const page = await get(
      `${listener.redirectUri}?error=access_denied&error_description=%3Cb%3Eno%3C%2Fb%3E&state=s1`,
    );

    expect(page.status).toBe(400);
    expect(page.body).toContain('access_denied');
    expect(page.body).not.toContain('<b>');
    const error: unknown = await listener.callback.catch((e: unknown) => e);
    expect(isStepbindError(error, 'AUTH_FAILED')).toBe(true);
    expect((error as { detail: unknown }).detail).toEqual({
      oauthError: 'access_denied',
      reason: 'authorization',
    });
  });

  it('answers 404 on other paths and keeps waiting for the callback', async () => {
    await using listener = await listenForCallback({ redirectUri: 'http://127.0.0.1:0/callback' });
    listener.expectState('s');
    const origin = new URL(listener.redirectUri).origin;

    expect((await get(`${origin}/favicon.ico`)).status).toBe(404);
    expect((await get(`${origin}/callback/x?code=1`)).status).toBe(404);
    expect((await get(`${origin}//evil.example/callback?code=1`)).status).toBe(404);
    expect((await get(`${listener.redirectUri}?code=right&state=s`)).status).toBe(200);

    await expect(listener.callback).resolves.toBe(`${listener.redirectUri}?code=right&state=s`);
  });

  it('accepts no callback before the state is known: a stray error= or code gets 400 and the login goes on', async () => {
    await using listener = await listenForCallback({ redirectUri: 'http://127.0.0.1:0/callback' });
    let settled = false;
    void listener.callback.then(
      () => (settled = true),
      () => (settled = true),
    );

    expect((await get(`${listener.redirectUri}?error=access_denied`)).status).toBe(400);
    expect((await get(`${listener.redirectUri}?code=early&state=s`)).status).toBe(400);
    expect(settled).toBe(false);
    listener.expectState('s');
    expect((await get(`${listener.redirectUri}?code=c&state=s`)).status).toBe(200);

    await expect(listener.callback).resolves.toBe(`${listener.redirectUri}?code=c&state=s`);
  });

  it('ignores a callback whose state is not the expected one', async () => {
    await using listener = await listenForCallback({ redirectUri: 'http://127.0.0.1:0/callback' });
    listener.expectState('good');

    expect((await get(`${listener.redirectUri}?code=forged&state=forged`)).status).toBe(400);
    expect((await get(`${listener.redirectUri}?error=access_denied`)).status).toBe(400);
    expect((await get(`${listener.redirectUri}?code=c&state=good`)).status).toBe(200);

    await expect(listener.callback).resolves.toBe(`${listener.redirectUri}?code=c&state=good`);
  });

  it('rejects ABORTED and closes the port when its signal aborts', async () => {
    const controller = new AbortController();
    const listener = await listenForCallback({
      redirectUri: 'http://127.0.0.1:0/callback',
      signal: controller.signal,
    });
    const port = portOf(listener.redirectUri);

    controller.abort(new Error('user gave up'));

    const error: unknown = await listener.callback.catch((e: unknown) => e);
    expect(isStepbindError(error, 'ABORTED')).toBe(true);
    await listener.close();
    expect(await refused(port)).toBe(true);
  });

  it('rejects TIMEOUT and closes the port when no callback comes in time', async () => {
    const listener = await listenForCallback({
      redirectUri: 'http://127.0.0.1:0/callback',
      timeoutMs: 1,
    });
    const port = portOf(listener.redirectUri);

    const error: unknown = await listener.callback.catch((e: unknown) => e);

    expect(isStepbindError(error, 'TIMEOUT')).toBe(true);
    expect((error as { detail: unknown }).detail).toEqual({ timeoutMs: 1 });
    await listener.close();
    expect(await refused(port)).toBe(true);
  });

  it('ends an idle keep-alive connection of the browser when it closes', async () => {
    const listener = await listenForCallback({ redirectUri: 'http://127.0.0.1:0/callback' });
    const port = portOf(listener.redirectUri);
    // A browser opens a connection and sends nothing yet (a preconnect).
    const idle = connect(port, '127.0.0.1');
    await new Promise<void>((resolve) => idle.once('connect', () => resolve()));
    const ended = new Promise<void>((resolve) => idle.once('close', () => resolve()));

    await listener.close();

    await ended;
    expect(await refused(port)).toBe(true);
    await expect(listener.callback).rejects.toMatchObject({ code: 'ABORTED' });
  });

  it.each([
    ['https://127.0.0.1:0/callback'],
    ['http://example.com:8080/callback'],
    ['http://10.0.0.5:8080/callback'],
    ['not a url'],
  ])('refuses the non-loopback redirect URI %s with INVALID_OPTIONS', async (redirectUri) => {
    const error: unknown = await listenForCallback({ redirectUri }).catch((e: unknown) => e);

    expect(isStepbindError(error, 'INVALID_OPTIONS')).toBe(true);
    expect((error as { detail: unknown }).detail).toEqual({
      option: 'redirectUri',
      value: redirectUri,
    });
  });

  it('reports a port in use as AUTH_FAILED reason config', async () => {
    await using first = await listenForCallback({ redirectUri: 'http://127.0.0.1:0/callback' });

    const error: unknown = await listenForCallback({ redirectUri: first.redirectUri }).catch(
      (e: unknown) => e,
    );

    expect(isStepbindError(error, 'AUTH_FAILED')).toBe(true);
    expect((error as { detail: unknown }).detail).toEqual({ reason: 'config' });
  });
});

describe('loopbackAuthorize', () => {
  it('prints the URL, opens it and resolves with the callback the browser brought back', async () => {
    const printed: string[] = [];
    const opened: string[] = [];
    // The redirect URI needs a known port before the hook runs: take a free one.
    const probe = await listenForCallback({ redirectUri: 'http://127.0.0.1:0/callback' });
    const redirectUri = probe.redirectUri;
    await probe.close();
    const authorizationUrl = new URL('https://as.example/authorize?state=st8&client_id=c');
    const hook = loopbackAuthorize({
      print: (line) => printed.push(line),
      // The "browser": the authorization server redirects straight back.
      open: (url) => {
        opened.push(url);
        void get(`${redirectUri}?code=abc&state=st8`).catch(() => undefined);
      },
    });

    const callback = await hook({
      server: 'remote',
      authorizationUrl,
      redirectUri,
      signal: new AbortController().signal,
    });

    expect(String(callback)).toBe(`${redirectUri}?code=abc&state=st8`);
    expect(opened).toEqual([authorizationUrl.href]);
    expect(printed.join('')).toContain(authorizationUrl.href);
    expect(printed.join('')).toContain('"remote"');
    expect(await refused(portOf(redirectUri))).toBe(true);
  });

  it('still waits for the callback when opening a browser throws', async () => {
    const probe = await listenForCallback({ redirectUri: 'http://127.0.0.1:0/callback' });
    const redirectUri = probe.redirectUri;
    await probe.close();
    const printed: string[] = [];
    const hook = loopbackAuthorize({
      print: (line) => {
        printed.push(line);
        // The user copies the printed URL by hand; the redirect comes back.
        void get(`${redirectUri}?code=by-hand&state=st9`).catch(() => undefined);
      },
      open: () => {
        throw new Error('no browser here');
      },
    });

    const callback = await hook({
      server: 'remote',
      authorizationUrl: new URL('https://as.example/authorize?state=st9'),
      redirectUri,
      signal: new AbortController().signal,
    });

    expect(String(callback)).toBe(`${redirectUri}?code=by-hand&state=st9`);
  });
});

describe('loopback options', () => {
  it.each([
    [
      'listenForCallback with an unknown option',
      () => listenForCallback({ redirectUri: 'http://127.0.0.1:0/cb', timeout: 5 } as never),
      'timeout',
    ],
    [
      'listenForCallback with a zero timeoutMs',
      () => listenForCallback({ redirectUri: 'http://127.0.0.1:0/cb', timeoutMs: 0 }),
      'timeoutMs',
    ],
    [
      'loopbackAuthorize with an unknown option',
      () => loopbackAuthorize({ print: () => undefined, browser: false } as never),
      'browser',
    ],
  ])('refuses %s with INVALID_OPTIONS naming it', async (_n, run, option) => {
    const error: unknown = await Promise.resolve()
      .then(async (): Promise<unknown> => await run())
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).toMatchObject({ code: 'INVALID_OPTIONS', detail: { option } });
  });
});
