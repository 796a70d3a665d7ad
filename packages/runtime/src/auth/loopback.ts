/**
 * The loopback redirect of a native app (RFC 8252 §7.3): a one-shot HTTP server on 127.0.0.1 that
 * catches the authorization server's redirect, and the `authorize` hook built on it that
 * `stepbind login` uses and applications may pass to `McpRuntime.open`. The listener only hands
 * back the callback URL; checking `state`, `iss` and exchanging the code is the authorizer's work.
 */
import { spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { delimiter, join } from 'node:path';
import { ErrorCode, RuntimeError } from '@stepbind/binding';
import { abortedError, MAX_TIMER_MS, onAbort, untilAborted } from '@stepbind/binding/internal';

import type { AuthorizeHook, AuthorizeRequest } from './types.js';

/** How long {@link listenForCallback} waits for the browser by default: 5 minutes. */
export const CALLBACK_TIMEOUT_MS = 5 * 60_000;

/** What {@link listenForCallback} needs. */
export interface CallbackListenerOptions {
  /**
   * The redirect URI to serve: `http:` on `127.0.0.1`, `[::1]` or `localhost`, with a port (`0`
   * picks a free one: read the listener's `redirectUri`) and a path.
   */
  readonly redirectUri: string;
  /** Gives up the wait (the callback promise rejects `ABORTED`). */
  readonly signal?: AbortSignal;
  /** Gives up after this long (the callback promise rejects `TIMEOUT`). @default CALLBACK_TIMEOUT_MS */
  readonly timeoutMs?: number;
}

/** A listening loopback redirect. Closing it (or its settling) ends the server and every socket. */
export interface CallbackListener extends AsyncDisposable {
  /** The redirect URI it serves, with the port actually bound. */
  readonly redirectUri: string;
  /**
   * The full callback URL of the first request to the redirect path carrying the expected `state`
   * (with `code`, `state`, `iss`); none settles it before {@link expectState} was called.
   * Rejects `AUTH_FAILED` (detail `oauthError`, reason `authorization`) when the redirect carries
   * `error=`, `TIMEOUT` after `timeoutMs`, `ABORTED` on `signal` or `close()`.
   */
  readonly callback: Promise<string>;
  /**
   * Sets the `state` the authorization request carries. Until then every request to the redirect
   * path gets a 400 page and is ignored; from then on so does one with another `state`, so a stray
   * or forged request (even an `error=` one) cannot end the login.
   */
  expectState(state: string): void;
  /** Stops listening and ends every connection; idempotent. */
  close(): Promise<void>;
}

const LOOPBACK_HOSTS = new Map([
  ['127.0.0.1', '127.0.0.1'],
  ['[::1]', '::1'],
  // RFC 8252 §8.3 prefers the literal; `localhost` is accepted and bound on IPv4.
  ['localhost', '127.0.0.1'],
]);

/**
 * Starts the loopback server of `redirectUri` and resolves once it listens.
 *
 * @throws RuntimeError `INVALID_OPTIONS` for a redirect URI that is not `http:` on a loopback host
 *   (the code would travel over the network); the listen error (`EADDRINUSE`...) as `AUTH_FAILED`
 *   reason `config`.
 */
export async function listenForCallback(
  options: CallbackListenerOptions,
): Promise<CallbackListener> {
  checkLoopbackOptions('listenForCallback', options, ['redirectUri', 'signal', 'timeoutMs']);
  if (options.signal?.aborted === true) {
    throw abortedError('the login was cancelled before it listened', options.signal.reason, {
      as: RuntimeError,
    });
  }
  const target = loopbackTarget(options.redirectUri);
  const timeoutMs = Math.min(options.timeoutMs ?? CALLBACK_TIMEOUT_MS, MAX_TIMER_MS);
  let settle!: { resolve: (url: string) => void; reject: (error: Error) => void };
  const received = new Promise<string>((resolve, reject) => (settle = { resolve, reject }));
  let bound = target.url;
  let answered = false;
  let state: string | undefined;
  const server = createServer((request, response) => {
    const outcome = answered ? undefined : answer(request, response, bound, state);
    if (answered) page(response, 404, 'Not found', 'The login callback was already received.');
    if (outcome === undefined) return;
    answered = true;
    // Settle (and so close) once the page is written: closing destroys sockets, which would drop
    // a page still in their buffers. `close` comes after `finish`, or when the browser went away.
    response.once('close', () => {
      if (outcome instanceof Error) settle.reject(outcome);
      else settle.resolve(outcome);
    });
  });
  // One controller for every way the wait ends early, its reason saying which.
  const stop = new AbortController();
  const timedOut = new Error('timed out');
  const timer = setTimeout(() => stop.abort(timedOut), timeoutMs);
  const unlink =
    options.signal === undefined
      ? undefined
      : onAbort(options.signal, () => stop.abort(options.signal?.reason));
  let closed: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closed ??= new Promise<void>((resolve) => {
      clearTimeout(timer);
      unlink?.();
      stop.abort(new Error('the loopback listener was closed'));
      server.close(() => resolve());
      server.closeAllConnections();
    });
    return closed;
  };
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: target.bind, port: target.port }, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (error) {
    await close();
    throw new RuntimeError(
      ErrorCode.AUTH_FAILED,
      `Cannot listen for the login callback on ${target.url.host}: ${error instanceof Error ? error.message : String(error)}. Free that port or choose another redirect URI.`,
      { detail: { reason: 'config' }, cause: error },
    );
  }
  bound = new URL(target.url.href);
  bound.port = String((server.address() as AddressInfo).port);
  const where = `${bound.origin}${bound.pathname}`;
  const callback = untilAborted(received, stop.signal, (reason) =>
    reason === timedOut
      ? new RuntimeError(
          ErrorCode.TIMEOUT,
          `No login callback reached ${where} within ${Math.round(timeoutMs / 1000)} s. Run the login again and finish it in the browser.`,
          { detail: { timeoutMs } },
        )
      : abortedError(`the wait for the login callback on ${where} was cancelled`, reason, {
          as: RuntimeError,
        }),
  ).finally(close);
  callback.catch(() => undefined);
  return {
    redirectUri: bound.href,
    callback,
    expectState: (value) => {
      state = value;
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}

/** The URL, host to bind and port of a loopback redirect URI, or `INVALID_OPTIONS`. */
function loopbackTarget(redirectUri: string): { url: URL; bind: string; port: number } {
  let url: URL;
  try {
    url = new URL(redirectUri);
  } catch (error) {
    throw invalidRedirect(redirectUri, 'is not a URL', error);
  }
  const bind = LOOPBACK_HOSTS.get(url.hostname);
  if (url.protocol !== 'http:' || bind === undefined) {
    throw invalidRedirect(
      redirectUri,
      'must be http:// on 127.0.0.1, [::1] or localhost (a loopback redirect, RFC 8252)',
    );
  }
  return { url, bind, port: url.port === '' ? 80 : Number(url.port) };
}

function invalidRedirect(value: string, why: string, cause?: unknown): RuntimeError {
  return new RuntimeError(ErrorCode.INVALID_OPTIONS, `The redirect URI ${value} ${why}.`, {
    detail: { option: 'redirectUri', value },
    ...(cause === undefined ? {} : { cause }),
  });
}

/**
 * Answers one request: `undefined` when it is not the callback (404, or 400 for a `state` that is
 * not the expected one or none expected yet),
 * the callback URL, or the `AUTH_FAILED` error of an `error=` redirect.
 */
function answer(
  request: IncomingMessage,
  response: ServerResponse,
  redirect: URL,
  state: string | undefined,
): string | Error | undefined {
  const target = request.url ?? '';
  // Origin plus the raw target: an absolute or `//host` target cannot change the callback's origin.
  const url = target.startsWith('/') ? new URL(redirect.origin + target) : undefined;
  if (request.method !== 'GET' || url?.pathname !== redirect.pathname) {
    page(response, 404, 'Not found', 'This address only receives a login callback.');
    return undefined;
  }
  const params = url.searchParams;
  // Nothing is accepted before the state is known: the login it would answer is not under way.
  if (state === undefined || params.get('state') !== state) {
    page(response, 400, 'Unexpected login callback', 'It does not answer this login attempt.');
    return undefined;
  }
  const error = params.get('error');
  if (error !== null) {
    const description = params.get('error_description') ?? '';
    page(
      response,
      400,
      'Login failed',
      `The authorization server answered ${error}. ${description}`,
    );
    return new RuntimeError(
      ErrorCode.AUTH_FAILED,
      `The authorization server refused the login: ${error}${description === '' ? '' : ` (${description.slice(0, 200)})`}.`,
      { detail: { oauthError: error, reason: 'authorization' } },
    );
  }
  page(response, 200, 'Logged in', 'You can close this tab and return to the terminal.');
  return url.href;
}

function page(response: ServerResponse, status: number, title: string, text: string): void {
  const body = `<!doctype html><meta charset="utf-8"><title>stepbind: ${escapeHtml(title)}</title><h1>${escapeHtml(title)}</h1><p>${escapeHtml(text)}</p>\n`;
  response.writeHead(status, {
    'content-type': 'text/html; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    // The callback URL holds the code: keep it out of caches and Referer headers.
    'cache-control': 'no-store',
    'referrer-policy': 'no-referrer',
    connection: 'close',
  });
  response.end(body);
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** What {@link loopbackAuthorize} needs. */
export interface LoopbackAuthorizeOptions {
  /** Shows the authorization URL to the user (it carries no secret). */
  readonly print: (line: string) => void;
  /** Opens the URL in a browser. @default {@link openBrowser} */
  readonly open?: (url: string) => void;
  /** @default CALLBACK_TIMEOUT_MS */
  readonly timeoutMs?: number;
}

/**
 * An {@link AuthorizeHook} for a user at this machine: listens on the request's loopback redirect
 * URI, prints the authorization URL, tries to open a browser (never fails when there is none) and
 * resolves with the callback URL. Rejects as {@link CallbackListener.callback} does.
 */
export function loopbackAuthorize(options: LoopbackAuthorizeOptions): AuthorizeHook {
  checkLoopbackOptions('loopbackAuthorize', options, ['print', 'open', 'timeoutMs']);
  return async (request) => {
    await using listener = await listenForCallback({
      redirectUri: request.redirectUri,
      signal: request.signal,
      ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
    });
    return await presentAndWait(request, listener, options);
  };
}

/**
 * Shows `request.authorizationUrl` (print, then open) and waits for `listener`'s callback: the
 * second half of {@link loopbackAuthorize}, for a caller that listened first (to learn the port).
 */
export async function presentAndWait(
  request: AuthorizeRequest,
  listener: CallbackListener,
  options: Pick<LoopbackAuthorizeOptions, 'print' | 'open'>,
): Promise<string> {
  const state = request.authorizationUrl.searchParams.get('state');
  if (state === null) {
    // Without a state no callback could be told from a forged one (and none would be accepted).
    throw new RuntimeError(
      ErrorCode.AUTH_FAILED,
      `The authorization URL of the login to "${request.server}" carries no state parameter, so its callback cannot be accepted; the authorize hook was given a request not made by stepbind.`,
      { detail: { reason: 'config', server: request.server } },
    );
  }
  listener.expectState(state);
  const url = request.authorizationUrl.href;
  options.print(`To log in to "${request.server}", open this URL in a browser:\n  ${url}\n`);
  try {
    (options.open ?? openBrowser)(url);
  } catch {
    // No browser is fine: the URL is printed.
  }
  return await listener.callback;
}

/**
 * Opens `url` with the platform's opener (`open` on macOS, `xdg-open` elsewhere, `start` through
 * `cmd` on Windows) when it is on `PATH`, detached and ignored; does nothing otherwise.
 */
export function openBrowser(url: string): void {
  const [command, args] =
    process.platform === 'darwin'
      ? ['open', [url]]
      : process.platform === 'win32'
        ? ['cmd', ['/c', 'start', '""', url.replace(/&/g, '^&')]]
        : ['xdg-open', [url]];
  if (process.platform !== 'win32' && !onPath(command)) return;
  const child = spawn(command, args, { detached: true, stdio: 'ignore' });
  child.on('error', () => undefined);
  child.unref();
}

function onPath(command: string): boolean {
  for (const dir of (process.env['PATH'] ?? '').split(delimiter)) {
    if (dir === '') continue;
    try {
      accessSync(join(dir, command), constants.X_OK);
      return true;
    } catch {
      // Not in this directory.
    }
  }
  return false;
}

/** Options checked at run time: an unknown key or a bad `timeoutMs` is `INVALID_OPTIONS`. */
function checkLoopbackOptions(fn: string, options: unknown, keys: readonly string[]): void {
  const bad = (option: string, why: string): never => {
    throw new RuntimeError(ErrorCode.INVALID_OPTIONS, `${fn}: ${option} ${why}.`, {
      detail: { option },
    });
  };
  if (typeof options !== 'object' || options === null) bad('options', 'must be an object');
  const given = options as Record<string, unknown>;
  for (const key of Object.keys(given)) {
    if (!keys.includes(key)) bad(key, `is not an option (the options are ${keys.join(', ')})`);
  }
  const timeoutMs = given['timeoutMs'];
  if (
    timeoutMs !== undefined &&
    (typeof timeoutMs !== 'number' || !Number.isInteger(timeoutMs) || timeoutMs < 1)
  ) {
    bad('timeoutMs', 'must be a whole number of milliseconds, at least 1');
  }
}
