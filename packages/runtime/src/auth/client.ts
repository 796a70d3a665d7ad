/**
 * Which client this runtime is at an authorization server, in the MCP spec's order: the
 * pre-registered `clientId`, else the Client ID Metadata Document URL (`clientMetadataUrl`, when
 * the server says `client_id_metadata_document_supported`), else dynamic registration (RFC 7591),
 * cached per (issuer, redirect URI) in the token store. And how it proves itself at the token
 * endpoint: `none`, `client_secret_basic` / `_post` (as the server supports), or `private_key_jwt`
 * with a key imported by jose. Every secret is told to `learnSecret` before it is used.
 */
import { StepbindError } from '@stepbind/binding';
import { importJWK, importPKCS8, type JWK } from 'jose';
import * as oauth from 'oauth4webapi';

import { authConfigPath, authFailed, describe, type AuthErrorContext } from './auth-error.js';
import { bounded, insecureFor } from './discovery.js';
import type { OAuthConfig, TokenEndpointAuthMethod, TokenStore } from './types.js';

/** A client ready for the token endpoint. */
export interface ResolvedClient {
  readonly client: oauth.Client;
  readonly clientAuth: oauth.ClientAuth;
  readonly clientId: string;
  readonly method: TokenEndpointAuthMethod;
}

/** What {@link resolveClient} needs. */
export interface ClientRequest {
  readonly config: OAuthConfig;
  readonly as: oauth.AuthorizationServer;
  readonly store: TokenStore;
  /** The redirect URI (`''` for client credentials: registered without one). */
  readonly redirectUri: string;
  /** True when the login may get a refresh token (asks for the `refresh_token` grant type). */
  readonly wantsRefresh: boolean;
  readonly fetch: typeof fetch;
  readonly signal?: AbortSignal;
  readonly context: AuthErrorContext;
  readonly learnSecret: (secret: string) => void;
}

/** The client to use at `as`, registering it when nothing else identifies it. */
export async function resolveClient(request: ClientRequest): Promise<ResolvedClient> {
  const { config, as } = request;
  if (config.clientId !== undefined) return await preRegistered(request, config.clientId);
  if (config.clientMetadataUrl !== undefined && as.client_id_metadata_document_supported === true) {
    return plain(config.clientMetadataUrl, 'none');
  }
  const registration = await register(request);
  return await fromSecret(request, registration.clientId, registration.method, registration.secret);
}

async function preRegistered(request: ClientRequest, clientId: string): Promise<ResolvedClient> {
  const { config } = request;
  if (config.privateKey !== undefined) {
    request.learnSecret(config.privateKey);
    const key = await importKey(config.privateKey, config.privateKeyAlg, request.context);
    return {
      client: { client_id: clientId },
      clientAuth: oauth.PrivateKeyJwt(key),
      clientId,
      method: 'private_key_jwt',
    };
  }
  if (config.clientSecret === undefined) return plain(clientId, 'none');
  return await fromSecret(request, clientId, secretMethod(request.as), config.clientSecret);
}

/** `client_secret_basic` unless the server supports only `_post` (RFC 8414's default is basic). */
function secretMethod(as: oauth.AuthorizationServer): TokenEndpointAuthMethod {
  const supported = as.token_endpoint_auth_methods_supported ?? ['client_secret_basic'];
  return !supported.includes('client_secret_basic') && supported.includes('client_secret_post')
    ? 'client_secret_post'
    : 'client_secret_basic';
}

function plain(clientId: string, method: 'none'): ResolvedClient {
  return { client: { client_id: clientId }, clientAuth: oauth.None(), clientId, method };
}

async function fromSecret(
  request: ClientRequest,
  clientId: string,
  method: TokenEndpointAuthMethod,
  secret: string | undefined,
): Promise<ResolvedClient> {
  if (secret === undefined || method === 'none') return plain(clientId, 'none');
  request.learnSecret(secret);
  if (method === 'private_key_jwt') {
    throw authFailed(request.context, {
      reason: 'config',
      message: 'private_key_jwt needs "privateKey" and "clientId"',
    });
  }
  return Promise.resolve({
    client: { client_id: clientId },
    clientAuth:
      method === 'client_secret_post' ? oauth.ClientSecretPost(secret) : secretBasic(secret),
    clientId,
    method,
  });
}

/**
 * `client_secret_basic` with the id and secret percent-encoded as URI components. oauth4webapi's
 * own also encodes `-`, `.`, `_`, `~` (strict RFC 6749 form encoding), which servers that do not
 * decode the user name (the MCP SDK's among them) then refuse; both forms decode to the same.
 */
function secretBasic(secret: string): oauth.ClientAuth {
  return (_as, client, _body, headers) => {
    const credentials = `${encodeURIComponent(client.client_id)}:${encodeURIComponent(secret)}`;
    headers.set('authorization', `Basic ${Buffer.from(credentials).toString('base64')}`);
  };
}

type SigningKey = Awaited<ReturnType<typeof importPKCS8>>;

/** A PEM PKCS#8 key or a JWK as JSON, for `private_key_jwt`. */
async function importKey(
  text: string,
  alg: string | undefined,
  context: AuthErrorContext,
): Promise<SigningKey> {
  try {
    if (text.trimStart().startsWith('{')) {
      const jwk = parseJwk(text, context);
      const key = await importJWK(jwk, alg ?? jwk.alg ?? defaultAlg(jwk.kty));
      if (key instanceof Uint8Array) throw new Error('a symmetric key cannot sign private_key_jwt');
      return key;
    }
    // PKCS#8 does not say the curve up front: try ES256, then RS256, unless told.
    if (alg !== undefined) return await importPKCS8(text, alg);
    return await importPKCS8(text, 'ES256').catch(() => importPKCS8(text, 'RS256'));
  } catch (error) {
    if (error instanceof StepbindError) throw error;
    // The key's text is never quoted: jose's message names only what it expected.
    throw authFailed(context, {
      reason: 'config',
      message: `"privateKey" is not a usable PEM PKCS#8 or JWK private key (${describe(error)})`,
    });
  }
}

/** The JWK of `text`; the parser's message quotes the input, so it is not passed on. */
function parseJwk(text: string, context: AuthErrorContext): JWK {
  try {
    return JSON.parse(text) as JWK;
  } catch {
    throw authFailed(context, {
      reason: 'config',
      message: '"privateKey" starts like a JWK but is not valid JSON',
      fix: `give a PEM PKCS#8 key or a JWK as JSON in ${authConfigPath(context.server)}.privateKey`,
    });
  }
}

function defaultAlg(kty: string | undefined): string {
  return kty === 'RSA' ? 'RS256' : 'ES256';
}

/** The method to ask a registration for: the first of none, basic, post the server supports. */
function registrationMethod(as: oauth.AuthorizationServer): TokenEndpointAuthMethod {
  const supported = as.token_endpoint_auth_methods_supported ?? ['client_secret_basic'];
  const preferred: TokenEndpointAuthMethod[] = [
    'none',
    'client_secret_basic',
    'client_secret_post',
  ];
  return preferred.find((m) => supported.includes(m)) ?? 'client_secret_basic';
}

interface Registered {
  readonly clientId: string;
  readonly secret?: string;
  readonly method: TokenEndpointAuthMethod;
}

async function register(request: ClientRequest): Promise<Registered> {
  const { as, store, redirectUri } = request;
  const cached = await store.getRegistration(as.issuer, redirectUri);
  if (cached !== undefined && (cached.secretExpiresAt ?? Infinity) > Date.now() + 60_000) {
    return {
      clientId: cached.clientId,
      method: cached.tokenEndpointAuthMethod,
      ...(cached.clientSecret === undefined ? {} : { secret: cached.clientSecret }),
    };
  }
  if (as.registration_endpoint === undefined) {
    throw authFailed(request.context, {
      reason: 'registration',
      message: `authorization server ${as.issuer} supports neither dynamic registration nor (for this config) a Client ID Metadata Document`,
      issuer: as.issuer,
      fix: `register a client there and set "clientId" (and "clientSecret") in the auth block, or "clientMetadataUrl"`,
    });
  }
  const codeFlow = redirectUri !== '';
  const metadata: Partial<oauth.OmitSymbolProperties<oauth.Client>> = {
    client_name: 'stepbind',
    token_endpoint_auth_method: registrationMethod(as),
    grant_types: codeFlow
      ? ['authorization_code', ...(request.wantsRefresh ? ['refresh_token'] : [])]
      : ['client_credentials'],
    ...(codeFlow
      ? { redirect_uris: [redirectUri], response_types: ['code'], application_type: 'native' }
      : {}),
  };
  let client: oauth.OmitSymbolProperties<oauth.Client>;
  try {
    const response = await oauth.dynamicClientRegistrationRequest(as, metadata, {
      [oauth.customFetch]: request.fetch,
      ...insecureFor(as.registration_endpoint),
      signal: bounded(request.signal),
    });
    client = await oauth.processDynamicClientRegistrationResponse(await lenient(response));
  } catch (error) {
    if (request.signal?.aborted === true) throw error;
    throw authFailed(request.context, {
      reason: 'registration',
      message: `dynamic client registration at ${as.registration_endpoint} failed: ${describe(error)}`,
      issuer: as.issuer,
      ...(error instanceof oauth.ResponseBodyError
        ? { oauthError: error.error, httpStatus: error.status }
        : {}),
      fix: `register a client there and set "clientId" in the auth block`,
    });
  }
  const secret = typeof client.client_secret === 'string' ? client.client_secret : undefined;
  if (secret !== undefined) request.learnSecret(secret);
  const method = (client.token_endpoint_auth_method ??
    (secret === undefined ? 'none' : 'client_secret_basic')) as TokenEndpointAuthMethod;
  const expiresAt = client['client_secret_expires_at'];
  await store.putRegistration({
    issuer: as.issuer,
    redirectUri,
    clientId: client.client_id,
    tokenEndpointAuthMethod: method,
    ...(secret === undefined ? {} : { clientSecret: secret }),
    ...(typeof expiresAt === 'number' && expiresAt > 0
      ? { secretExpiresAt: expiresAt * 1000 }
      : {}),
  });
  return { clientId: client.client_id, method, ...(secret === undefined ? {} : { secret }) };
}

/**
 * RFC 7591 requires `client_secret_expires_at` with a secret, and oauth4webapi enforces it; servers
 * that omit it (the MCP SDK's own among them) mean "never expires", which is what 0 says.
 */
async function lenient(response: Response): Promise<Response> {
  if (!response.ok) return response;
  const body: unknown = await response
    .clone()
    .json()
    .catch(() => undefined);
  if (
    typeof body !== 'object' ||
    body === null ||
    !('client_secret' in body) ||
    'client_secret_expires_at' in body
  ) {
    return response;
  }
  await response.body?.cancel();
  return new Response(JSON.stringify({ ...body, client_secret_expires_at: 0 }), {
    status: response.status,
    headers: response.headers,
  });
}
