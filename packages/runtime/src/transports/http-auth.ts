/**
 * The `auth` block of a Streamable HTTP server entry: its parsing (every field checked, secrets
 * interpolated like headers), what of it goes into the server's identity (secrets only as a
 * digest), its secrets for the redactor, and the static bearer authorizer. OAuth itself lives in
 * `auth/` (`createServerAuth`); this file only hands it the parsed configuration.
 */
import { createHash } from 'node:crypto';
import { ErrorCode, RuntimeError, StepbindError } from '@stepbind/binding/internal';
import type {
  AuthStatus,
  BearerAuthConfig,
  OAuthConfig,
  ServerAuthConfig,
  ServerAuthorizer,
} from '../auth/types.js';
import { checkKeys, expectObject, expectOneOf, fail, stringList } from '../config-values.js';

/** The keys of `auth` by `type`. */
const BEARER_KEYS: readonly string[] = ['type', 'token'];
const OAUTH_KEYS: readonly string[] = [
  'type',
  'clientId',
  'clientSecret',
  'scopes',
  'grant',
  'clientMetadataUrl',
  'privateKey',
  'privateKeyAlg',
];
const AUTH_TYPES = ['bearer', 'oauth'] as const;
const GRANTS = ['authorization_code', 'client_credentials'] as const;
/** JWS algorithms a `private_key_jwt` assertion may be signed with (asymmetric only). */
const KEY_ALGS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
] as const;
/** A scope token (RFC 6749 §3.3): visible ASCII except space, `"` and `\`. */
const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;

/**
 * Parses `auth` of the HTTP server entry at `path`. `text` reads a string value as the file's
 * dialect says (`${env:NAME}` interpolated), so a token or secret is usually an environment
 * reference.
 *
 * @throws ConfigError `INVALID_CONFIG` naming `path.auth.FIELD` and what to do; never the value.
 */
export function parseAuthConfig(
  value: unknown,
  path: string,
  text: (value: unknown, at: string) => string,
): ServerAuthConfig {
  const obj = expectObject(value, path);
  const type = expectOneOf(obj['type'], `${path}.type`, AUTH_TYPES);
  if (type === 'bearer') {
    checkKeys(obj, path, BEARER_KEYS);
    if (obj['token'] === undefined) {
      fail(
        `${path}.token`,
        'is required for "type": "bearer"; give the token, usually "${env:NAME}"',
      );
    }
    const token = text(obj['token'], `${path}.token`).trim();
    if (token === '' || /\s/.test(token)) {
      fail(`${path}.token`, 'must be one token without spaces (the "Bearer " prefix is added)');
    }
    return Object.freeze({ type, token } satisfies BearerAuthConfig);
  }
  checkKeys(obj, path, OAUTH_KEYS);
  const opt = (key: string): string | undefined => {
    if (obj[key] === undefined) return undefined;
    const value = text(obj[key], `${path}.${key}`);
    // An empty value (often an unset environment variable) would log in as no one, or send nothing.
    if (value.trim() === '') {
      fail(
        `${path}.${key}`,
        `is empty; give a value (check the variable it names) or remove "${key}"`,
      );
    }
    return value;
  };
  const clientId = opt('clientId');
  const clientSecret = opt('clientSecret');
  const privateKey = opt('privateKey');
  const clientMetadataUrl = opt('clientMetadataUrl');
  const grant =
    obj['grant'] === undefined ? undefined : expectOneOf(obj['grant'], `${path}.grant`, GRANTS);
  const privateKeyAlg =
    obj['privateKeyAlg'] === undefined
      ? undefined
      : expectOneOf(obj['privateKeyAlg'], `${path}.privateKeyAlg`, KEY_ALGS);
  const scopes =
    obj['scopes'] === undefined ? undefined : stringList(obj['scopes'], `${path}.scopes`);
  scopes?.forEach((scope, i) => {
    if (scope === '') fail(`${path}.scopes[${i}]`, 'is empty; give a scope or remove the item');
    if (!SCOPE_TOKEN.test(scope))
      fail(`${path}.scopes[${i}]`, 'is not a scope (one token, no spaces)');
  });
  if (clientSecret !== undefined && clientId === undefined) {
    fail(
      `${path}.clientSecret`,
      'needs "clientId" (the pre-registered client the secret belongs to)',
    );
  }
  if (privateKey !== undefined && clientId === undefined) {
    fail(`${path}.privateKey`, 'needs "clientId" (the client registered with its public key)');
  }
  if (privateKey !== undefined && clientSecret !== undefined) {
    fail(`${path}.privateKey`, 'give "clientSecret" or "privateKey", not both');
  }
  if (privateKeyAlg !== undefined && privateKey === undefined) {
    fail(
      `${path}.privateKeyAlg`,
      'is the algorithm of "privateKey"; give the key too or remove it',
    );
  }
  if (privateKey !== undefined) checkPrivateKey(privateKey, `${path}.privateKey`);
  if (clientMetadataUrl !== undefined) {
    checkMetadataUrl(clientMetadataUrl, `${path}.clientMetadataUrl`);
    if (clientId !== undefined) {
      fail(
        `${path}.clientMetadataUrl`,
        'is the client id itself; give "clientId" or "clientMetadataUrl", not both',
      );
    }
  }
  if (grant === 'client_credentials' && clientId === undefined) {
    fail(
      `${path}.clientId`,
      'is required for "grant": "client_credentials" (a pre-registered headless client), with "clientSecret" or "privateKey"',
    );
  }
  if (grant === 'client_credentials' && clientSecret === undefined && privateKey === undefined) {
    fail(
      `${path}.grant`,
      '"client_credentials" needs "clientSecret" or "privateKey" to authenticate the client',
    );
  }
  const config: OAuthConfig = {
    type,
    ...(clientId === undefined ? {} : { clientId }),
    ...(clientSecret === undefined ? {} : { clientSecret }),
    ...(scopes === undefined ? {} : { scopes }),
    ...(grant === undefined ? {} : { grant }),
    ...(clientMetadataUrl === undefined ? {} : { clientMetadataUrl }),
    ...(privateKey === undefined ? {} : { privateKey }),
    ...(privateKeyAlg === undefined ? {} : { privateKeyAlg }),
  };
  return Object.freeze(config);
}

/** A PEM PKCS#8 private key or a private JWK as JSON (the shape only; jose reads it later). */
function checkPrivateKey(key: string, path: string): void {
  const trimmed = key.trim();
  if (trimmed.startsWith('-----BEGIN PRIVATE KEY-----')) return;
  if (trimmed.startsWith('{')) {
    let jwk: unknown;
    try {
      jwk = JSON.parse(trimmed);
    } catch {
      fail(path, 'looks like a JWK but is not valid JSON');
    }
    const kty = (jwk as { kty?: unknown; d?: unknown } | null)?.kty;
    if (typeof kty === 'string' && typeof (jwk as { d?: unknown }).d === 'string') return;
    fail(path, 'is a JWK without "kty" and the private part "d"; give the private key');
  }
  fail(
    path,
    'expected a PEM PKCS#8 private key ("-----BEGIN PRIVATE KEY-----") or a private JWK as JSON, usually "${env:NAME}"',
  );
}

/** A Client ID Metadata Document URL must be https with a path (the spec's rule). */
function checkMetadataUrl(value: string, path: string): void {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    fail(path, 'is not a valid URL');
  }
  if (url.protocol !== 'https:' || url.pathname === '/' || url.hash !== '') {
    fail(
      path,
      'must be an https URL with a path and no fragment (the Client ID Metadata Document)',
    );
  }
}

/** The secret values of an `auth` block, for the server's redactor. */
export function authSecrets(auth: ServerAuthConfig | undefined): readonly string[] {
  if (auth === undefined) return [];
  if (auth.type === 'bearer') return [auth.token];
  return [auth.clientSecret, auth.privateKey].filter((v): v is string => v !== undefined);
}

/**
 * What of an `auth` block makes a server a different one: its settings in clear, its secrets as a
 * salted sha256 digest only (so a changed token or key is a new server, and no key that is logged
 * or stored holds a secret).
 */
export function authIdentity(auth: ServerAuthConfig): Readonly<Record<string, unknown>> {
  const digest = (secret: string): string =>
    createHash('sha256').update(`stepbind-auth\u0000${secret}`).digest('hex');
  if (auth.type === 'bearer') return { type: 'bearer', token: digest(auth.token) };
  const { clientSecret, privateKey, ...plain } = auth;
  return {
    ...plain,
    ...(clientSecret === undefined ? {} : { clientSecret: digest(clientSecret) }),
    ...(privateKey === undefined ? {} : { privateKey: digest(privateKey) }),
  };
}

/** True for the errors an authorizer throws instead of sending a request (it did not run). */
export function isAuthRefusal(error: unknown): error is StepbindError {
  return (
    error instanceof StepbindError &&
    (error.code === ErrorCode.AUTH_REQUIRED || error.code === ErrorCode.AUTH_FAILED)
  );
}

/**
 * The {@link ServerAuthorizer} of a static bearer token: every request gets `Authorization: Bearer
 * <token>`; a `401` answer is `AUTH_FAILED` (reason `token`): the configured token was refused, and
 * there is nothing to refresh. A `403` is the server's own answer and passes through.
 */
export function bearerAuthorizer(server: string, config: BearerAuthConfig): ServerAuthorizer {
  const status: AuthStatus = Object.freeze({ server, state: 'bearer' });
  return Object.freeze({
    server,
    wrap:
      (base: typeof fetch): typeof fetch =>
      async (input, init) => {
        const headers = new Headers(init?.headers);
        headers.set('authorization', `Bearer ${config.token}`);
        const response = await base(input, { ...init, headers });
        if (response.status !== 401) return response;
        await response.body?.cancel().catch(() => undefined);
        throw new RuntimeError(
          ErrorCode.AUTH_FAILED,
          `Server "${server}" refused the configured bearer token (HTTP 401). Check the token given in "auth.token" (the environment variable it names) and that it has not expired.`,
          { detail: { server, reason: 'token', httpStatus: 401 } },
        );
      },
    principal: () => undefined,
    login: () => Promise.resolve(status),
    logout: () => Promise.resolve(),
    status: () => Promise.resolve(status),
  });
}

/**
 * `error` (an authorization refusal) again with `detail` added: where it happened (tool, delivery)
 * as the request that met it knows. Same class, code, message and cause.
 */
export function withAuthDetail(
  error: StepbindError,
  detail: Readonly<Record<string, unknown>>,
): StepbindError {
  const Kind = error.constructor as new (
    code: StepbindError['code'],
    message: string,
    options: { detail: StepbindError['detail']; cause?: unknown },
  ) => StepbindError;
  return new Kind(error.code, error.message, {
    detail: { ...error.detail, ...detail },
    ...(error.cause === undefined ? {} : { cause: error.cause }),
  });
}
