/**
 * The request side of OAuth (`ServerAuthorizer.wrap`): each request carries the current token
 * (oauth4webapi's `protectedResourceRequest`, which adds a fresh DPoP proof for a DPoP-bound
 * token); a 401 recovers (refresh, or a new login) and retries once; a 403 `insufficient_scope`
 * steps up with the union of scopes, at most {@link MAX_STEP_UPS} times per request; a DPoP nonce
 * refusal is retried once with the server's nonce. Only the header changes: the connection and
 * its session stay, and `init` (a dispatcher, a signal) passes through to `base`.
 */
import * as oauth from 'oauth4webapi';

import { StepbindError } from '@stepbind/binding';

import { authFailed, describe } from './auth-error.js';
import { isLoopback } from './discovery.js';
import type { Challenge, CurrentLogin, OAuthSession } from './session.js';

/** How many times one request may step up its scopes before `AUTH_FAILED`. */
export const MAX_STEP_UPS = 2;

/** `base` with the session's authorization. */
export function authorizedFetch(session: OAuthSession, base: typeof fetch): typeof fetch {
  return async (input, init) => {
    if (input instanceof Request) {
      // Its body, headers and signal would have to be merged with `init`; the transports pass a URL.
      throw authFailed(session.context, {
        reason: 'config',
        message: 'a Request object was given to the authorized fetch, which takes a URL and init',
        fix: 'pass the URL and a RequestInit instead of a Request',
      });
    }
    const url = new URL(String(input));
    if (url.protocol !== 'https:' && !isLoopback(url)) {
      throw authFailed(session.context, {
        reason: 'config',
        message: `refusing to send a token over plain http to ${url.origin}`,
        fix: 'use an https:// URL for this server',
      });
    }
    // A URL outside the resource gets no token: it is not the audience the token was issued for.
    if (!withinResource(url, session.context.resource)) return await base(url, init);
    const signal = init?.signal ?? undefined;
    const replayable = isReplayable(init?.body);
    const guard = <T>(step: () => Promise<T>): Promise<T> => guarded(session, signal, step);
    let login = await guard(() => session.token(signal));
    let recovered = false;
    let nonceRetried = false;
    let stepUps = 0;
    for (;;) {
      const response = await send(session, base, url, init, login);
      if (response.status !== 401 && response.status !== 403) return response;
      if (!replayable) return response;
      const challenge = await challengeOf(response);
      if (challenge.nonce && login !== undefined && !nonceRetried) {
        nonceRetried = true;
        await response.body?.cancel();
        continue;
      }
      if (response.status === 401) {
        if (recovered) {
          await response.body?.cancel();
          throw authFailed(session.context, {
            reason: 'authorization',
            httpStatus: 401,
            ...(challenge.error === undefined ? {} : { oauthError: challenge.error }),
            message: 'the server refused a newly obtained token',
          });
        }
        await response.body?.cancel();
        recovered = true;
        const refused = login;
        login = await guard(() => session.recover(challenge, refused, signal));
        continue;
      }
      if (challenge.error !== 'insufficient_scope') return response;
      await response.body?.cancel();
      if (stepUps >= MAX_STEP_UPS) {
        throw authFailed(session.context, {
          reason: 'insufficient-scope',
          oauthError: 'insufficient_scope',
          httpStatus: 403,
          message: `the server still wants more scope after ${MAX_STEP_UPS} step-ups${challenge.scopes === undefined ? '' : ` (it asks for: ${challenge.scopes.join(' ')})`}`,
          fix: 'ask the server operator which scopes this client may have, or set "scopes" in the auth block',
        });
      }
      stepUps++;
      login = await guard(() => session.stepUp(challenge, signal, login));
    }
  };
}

/**
 * An authorizer step (token, recover, step-up): a failure that is not already typed (a hook that
 * rejects with a plain Error, a store error, a bad callback URL) is `AUTH_FAILED`, so transports
 * report it as an authorization refusal (nothing sent), not as the server's network failure. The
 * caller's own abort passes through as it is.
 */
async function guarded<T>(
  session: OAuthSession,
  signal: AbortSignal | undefined,
  step: () => Promise<T>,
): Promise<T> {
  try {
    return await step();
  } catch (error) {
    if (error instanceof StepbindError) throw error;
    if (signal?.aborted === true && error === signal.reason) throw error;
    throw authFailed(session.context, {
      reason: 'authorization',
      // The words only: a library error's `cause` (or a URL's `input`) may carry a code or token.
      message: `the authorization step failed: ${describe(error)}`,
    });
  }
}

/** Bodies that can be sent again unchanged after a 401/403 (a stream or anything else cannot). */
function isReplayable(body: RequestInit['body'] | undefined): boolean {
  return (
    body === undefined ||
    body === null ||
    typeof body === 'string' ||
    body instanceof URLSearchParams ||
    body instanceof Blob ||
    body instanceof ArrayBuffer ||
    ArrayBuffer.isView(body) ||
    body instanceof FormData
  );
}

/**
 * True when `url` is within the protected resource: its origin, and a path under the directory of
 * the resource's path (so a legacy SSE server's POST endpoint, a sibling of its `/sse` path, is in).
 */
export function withinResource(url: URL, resource: string): boolean {
  const named = new URL(resource);
  if (named.origin !== url.origin) return false;
  const directory = named.pathname.slice(0, named.pathname.lastIndexOf('/') + 1);
  return url.pathname.startsWith(directory);
}

/** One attempt: without a login as is, with one through oauth4webapi (Bearer or DPoP). */
async function send(
  session: OAuthSession,
  base: typeof fetch,
  url: URL,
  init: RequestInit | undefined,
  login: CurrentLogin | undefined,
): Promise<Response> {
  if (login === undefined) return await base(url, init);
  const { tokens } = login.login;
  const dpop = tokens.tokenType === 'DPoP' ? await session.dpop.current() : undefined;
  try {
    return await oauth.protectedResourceRequest(
      tokens.accessToken,
      init?.method ?? 'GET',
      url,
      new Headers(init?.headers),
      (init?.body ?? null) as oauth.ProtectedResourceRequestBody,
      {
        // The caller's init (a dispatcher) under oauth4webapi's method, headers, body and signal.
        [oauth.customFetch]: (target, options) => base(target, { ...init, ...options }),
        ...(isLoopback(url) ? { [oauth.allowInsecureRequests]: true } : {}),
        ...(init?.signal == null ? {} : { signal: init.signal }),
        ...(dpop === undefined ? {} : { DPoP: dpop }),
      },
    );
  } catch (error) {
    // A challenge is an answer, not a failure: the loop above reads it.
    if (error instanceof oauth.WWWAuthenticateChallengeError) return error.response;
    throw error;
  }
}

/** What a 401/403's `WWW-Authenticate` says, parsed by oauth4webapi. */
async function challengeOf(response: Response): Promise<Challenge & { nonce: boolean }> {
  const challenges = await parseChallenges(response);
  const chosen =
    challenges.find((c) => c.scheme === 'dpop' || c.scheme === 'bearer') ?? challenges[0];
  const p = chosen?.parameters ?? {};
  const scope = p['scope'];
  return {
    ...(p['resource_metadata'] === undefined ? {} : { resourceMetadata: p['resource_metadata'] }),
    ...(scope === undefined ? {} : { scopes: scope.split(' ').filter((s) => s !== '') }),
    ...(p['error'] === undefined ? {} : { error: p['error'] }),
    dpop: challenges.some((c) => c.scheme === 'dpop'),
    nonce: challenges.some(
      (c) => c.scheme === 'dpop' && c.parameters['error'] === 'use_dpop_nonce',
    ),
  };
}

/**
 * oauth4webapi parses `WWW-Authenticate` only inside `protectedResourceRequest`, so the response at
 * hand is handed to it as the "fetched" answer of a request that goes nowhere else.
 */
async function parseChallenges(
  response: Response,
): Promise<readonly oauth.WWWAuthenticateChallenge[]> {
  try {
    await oauth.protectedResourceRequest(
      '-',
      'GET',
      new URL('http://127.0.0.1/'),
      undefined,
      null,
      {
        [oauth.customFetch]: () => Promise.resolve(response),
        [oauth.allowInsecureRequests]: true,
      },
    );
    return [];
  } catch (error) {
    if (error instanceof oauth.WWWAuthenticateChallengeError) return error.cause;
    return [];
  }
}
