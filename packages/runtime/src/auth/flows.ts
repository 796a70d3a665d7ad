/**
 * The grants (OAuth 2.1 by the MCP spec), each one oauth4webapi request and its processing:
 * authorization code with PKCE S256, the RFC 8707 `resource` on the authorization and token
 * requests and RFC 9207 `iss` validation of the callback; client credentials; refresh. Each
 * returns the new tokens and, when the server said, the subject. Every secret (code, verifier,
 * tokens) is told to `learnSecret` before anything else sees it; refusals become `AUTH_FAILED`.
 */
import * as oauth from 'oauth4webapi';

import { authFailed, describe, type AuthErrorContext } from './auth-error.js';
import type { ResolvedClient } from './client.js';
import { bounded, insecureFor } from './discovery.js';
import { isNonceRefusal } from './dpop.js';
import type { AuthorizeHook, OAuthTokens } from './types.js';

/** What every grant needs. */
export interface GrantContext {
  readonly as: oauth.AuthorizationServer;
  readonly client: ResolvedClient;
  /** The RFC 8707 resource indicator. */
  readonly resource: string;
  readonly fetch: typeof fetch;
  readonly signal?: AbortSignal;
  readonly dpop?: oauth.DPoPHandle;
  readonly context: AuthErrorContext;
  readonly learnSecret: (secret: string) => void;
}

/** What a grant got. */
export interface Grant {
  readonly tokens: OAuthTokens;
  /** The subject (an id token's `sub`), when the server gave one. */
  readonly subject?: string;
}

/**
 * The scopes to ask for, in the spec's order: the configured ones, else the challenge's, else the
 * resource's `scopes_supported`, else none (the `scope` parameter is left out). `offline_access`
 * is added for a user login when the authorization server lists it (SEP-2207), never otherwise.
 */
export function selectScopes(input: {
  readonly configured?: readonly string[];
  readonly challenged?: readonly string[];
  readonly supported?: readonly string[];
  readonly as?: oauth.AuthorizationServer;
  readonly userLogin: boolean;
}): readonly string[] {
  const base = input.configured ?? input.challenged ?? input.supported ?? [];
  const offline =
    input.userLogin &&
    (input.as?.scopes_supported ?? []).includes('offline_access') &&
    !base.includes('offline_access');
  return offline ? [...base, 'offline_access'] : base;
}

/** The union of scope lists, in first-seen order. */
export function unionScopes(...lists: readonly (readonly string[] | undefined)[]): string[] {
  return [...new Set(lists.flatMap((l) => l ?? []))];
}

/**
 * The authorization code flow: the application's `authorize` hook takes the user to the
 * authorization URL and returns the callback URL, which is checked (state, RFC 9207 `iss`) before
 * the code is exchanged.
 */
export async function authorizationCodeGrant(
  grant: GrantContext,
  request: {
    readonly authorize: AuthorizeHook;
    readonly redirectUri: string;
    readonly scopes: readonly string[];
    readonly signal: AbortSignal;
  },
): Promise<Grant> {
  const { as, client, context } = grant;
  const verifier = oauth.generateRandomCodeVerifier();
  grant.learnSecret(verifier);
  const state = oauth.generateRandomState();
  const url = new URL(endpoint(as.authorization_endpoint, 'authorization_endpoint', context));
  url.searchParams.set('response_type', 'code');
  url.searchParams.set('client_id', client.clientId);
  url.searchParams.set('redirect_uri', request.redirectUri);
  url.searchParams.set('code_challenge', await oauth.calculatePKCECodeChallenge(verifier));
  url.searchParams.set('code_challenge_method', 'S256');
  url.searchParams.set('state', state);
  url.searchParams.set('resource', grant.resource);
  if (request.scopes.length > 0) url.searchParams.set('scope', request.scopes.join(' '));

  const callback = await request.authorize({
    server: context.server,
    authorizationUrl: url,
    redirectUri: request.redirectUri,
    signal: request.signal,
  });
  const params = validateCallback(grant, callbackUrl(grant, callback), state);
  const code = params.get('code');
  if (code !== null) grant.learnSecret(code);
  return await tokenRequest(grant, 'token', (dpop) =>
    oauth
      .authorizationCodeGrantRequest(
        as,
        client.client,
        client.clientAuth,
        params,
        request.redirectUri,
        verifier,
        {
          ...requestOptions(grant, dpop),
          additionalParameters: { resource: grant.resource },
        },
      )
      .then((response) => oauth.processAuthorizationCodeResponse(as, client.client, response)),
  );
}

/** The hook's answer as a URL; a failure never quotes it (it holds the code). */
function callbackUrl(grant: GrantContext, callback: unknown): URL {
  if (callback instanceof URL) return callback;
  try {
    return new URL(String(callback));
  } catch {
    throw authFailed(grant.context, {
      reason: 'authorization',
      message: 'the authorize hook returned something that is not a URL',
      issuer: grant.as.issuer,
      fix: 'the authorize hook must resolve to the full callback URL the browser was sent to',
    });
  }
}

function validateCallback(grant: GrantContext, callback: URL, state: string): URLSearchParams {
  try {
    // expectedState: the callback must carry our state. `iss` (RFC 9207): required when the server
    // advertises it, compared by exact string whenever present.
    return oauth.validateAuthResponse(grant.as, grant.client.client, callback, state);
  } catch (error) {
    if (error instanceof oauth.AuthorizationResponseError) {
      throw authFailed(grant.context, {
        reason: 'authorization',
        oauthError: error.error,
        message: `the authorization server refused the login${error.error_description === undefined ? '' : `: ${error.error_description}`}`,
        issuer: grant.as.issuer,
      });
    }
    throw authFailed(grant.context, {
      reason: 'authorization',
      message: `the authorization callback was rejected: ${describe(error)}`,
      issuer: grant.as.issuer,
      fix: 'the callback did not come from the expected authorization server; log in again',
    });
  }
}

/** The client credentials grant (a headless agent: no user, no hook). */
export async function clientCredentialsGrant(
  grant: GrantContext,
  scopes: readonly string[],
): Promise<Grant> {
  const { as, client } = grant;
  const parameters: Record<string, string> = { resource: grant.resource };
  if (scopes.length > 0) parameters['scope'] = scopes.join(' ');
  return await tokenRequest(grant, 'token', (dpop) =>
    oauth
      .clientCredentialsGrantRequest(
        as,
        client.client,
        client.clientAuth,
        parameters,
        requestOptions(grant, dpop),
      )
      .then((response) => oauth.processClientCredentialsResponse(as, client.client, response)),
  );
}

/** The refresh grant. A server that rotates nothing keeps the old refresh token in use. */
export async function refreshGrant(grant: GrantContext, refreshToken: string): Promise<Grant> {
  const { as, client } = grant;
  const result = await tokenRequest(grant, 'refresh', (dpop) =>
    oauth
      .refreshTokenGrantRequest(as, client.client, client.clientAuth, refreshToken, {
        ...requestOptions(grant, dpop),
        additionalParameters: { resource: grant.resource },
      })
      .then((response) => oauth.processRefreshTokenResponse(as, client.client, response)),
  );
  return result.tokens.refreshToken === undefined
    ? { ...result, tokens: { ...result.tokens, refreshToken } }
    : result;
}

function requestOptions(
  grant: GrantContext,
  dpop: oauth.DPoPHandle | undefined,
): oauth.TokenEndpointRequestOptions {
  return {
    [oauth.customFetch]: grant.fetch,
    ...insecureFor(endpoint(grant.as.token_endpoint, 'token_endpoint', grant.context)),
    signal: bounded(grant.signal),
    ...(dpop === undefined ? {} : { DPoP: dpop }),
  };
}

/**
 * One token endpoint exchange, retried once when the server wants a DPoP nonce (oauth4webapi kept
 * the nonce from the refusal).
 */
async function tokenRequest(
  grant: GrantContext,
  reason: 'token' | 'refresh',
  exchange: (dpop: oauth.DPoPHandle | undefined) => Promise<oauth.TokenEndpointResponse>,
): Promise<Grant> {
  let response: oauth.TokenEndpointResponse;
  try {
    try {
      response = await exchange(grant.dpop);
    } catch (error) {
      if (grant.dpop === undefined || !isNonceRefusal(error)) throw error;
      response = await exchange(grant.dpop);
    }
  } catch (error) {
    if (grant.signal?.aborted === true) throw error;
    throw authFailed(grant.context, {
      reason,
      message: `the token endpoint ${grant.as.token_endpoint ?? ''} refused: ${error instanceof oauth.ResponseBodyError ? (error.error_description ?? error.error) : describe(error)}`,
      issuer: grant.as.issuer,
      ...(error instanceof oauth.ResponseBodyError
        ? { oauthError: error.error, httpStatus: error.status }
        : {}),
    });
  }
  return toGrant(grant, response);
}

function toGrant(grant: GrantContext, response: oauth.TokenEndpointResponse): Grant {
  grant.learnSecret(response.access_token);
  if (response.refresh_token !== undefined) grant.learnSecret(response.refresh_token);
  if (response.id_token !== undefined) grant.learnSecret(response.id_token);
  const claims = oauth.getValidatedIdTokenClaims(response);
  const tokens: OAuthTokens = Object.freeze({
    accessToken: response.access_token,
    tokenType: response.token_type.toLowerCase() === 'dpop' ? 'DPoP' : 'Bearer',
    ...(response.refresh_token === undefined ? {} : { refreshToken: response.refresh_token }),
    ...(response.expires_in === undefined
      ? {}
      : { expiresAt: Date.now() + response.expires_in * 1000 }),
    ...(response.scope === undefined ? {} : { scope: response.scope }),
  });
  return claims?.sub === undefined ? { tokens } : { tokens, subject: claims.sub };
}

function endpoint(value: string | undefined, name: string, context: AuthErrorContext): string {
  if (value === undefined) {
    throw authFailed(context, {
      reason: 'metadata',
      message: `the authorization server metadata has no ${name}`,
    });
  }
  return value;
}
