/**
 * The two typed failures of authorization (DESIGN §16): `AUTH_REQUIRED` (log in first) and
 * `AUTH_FAILED` (a server refused). One place builds both, so every message names the server, its
 * config path and the next step, and none carries a token, code, verifier or secret: library
 * errors contribute their message only (their `cause` may hold response parameters).
 */
import { ErrorCode, RuntimeError } from '@stepbind/binding';

/** Who is authorizing: what every auth error names. */
export interface AuthErrorContext {
  readonly server: string;
  /** The protected resource (canonical URI of the server URL). */
  readonly resource: string;
  /** `stepbind login NAME --config FILE` or the application's own command. */
  readonly command: string;
}

/** The config path of a server's `auth` block. */
export function authConfigPath(server: string): string {
  return `$.mcpServers.${server}.auth`;
}

/** `AUTH_REQUIRED`: no usable login and no way to log in here. */
export function authRequired(
  context: AuthErrorContext,
  why: string,
  facts: { readonly issuer?: string; readonly scopes?: readonly string[] } = {},
): RuntimeError {
  return new RuntimeError(
    ErrorCode.AUTH_REQUIRED,
    `server "${context.server}" needs an OAuth login (${why}); run \`${context.command}\`, or give the runtime an \`authorize\` hook (${authConfigPath(context.server)})`,
    {
      detail: {
        server: context.server,
        path: authConfigPath(context.server),
        resource: context.resource,
        command: context.command,
        ...(facts.issuer === undefined ? {} : { issuer: facts.issuer }),
        ...(facts.scopes === undefined ? {} : { scopes: facts.scopes }),
      },
    },
  );
}

/** What an `AUTH_FAILED` says about the refusal. */
export interface AuthFailure {
  /** The step that failed (see `ErrorDetailMap.AUTH_FAILED.reason`). */
  readonly reason: string;
  /** What happened, in words; never a secret. */
  readonly message: string;
  /** What the user can do about it. */
  readonly fix?: string;
  readonly oauthError?: string;
  readonly httpStatus?: number;
  readonly issuer?: string;
}

/** `AUTH_FAILED`: the authorization server or the protected resource refused. */
export function authFailed(context: AuthErrorContext, failure: AuthFailure): RuntimeError {
  const code = failure.oauthError === undefined ? '' : ` (${failure.oauthError})`;
  return new RuntimeError(
    ErrorCode.AUTH_FAILED,
    `server "${context.server}": authorization failed at ${failure.reason}${code}: ${failure.message}; ${failure.fix ?? `check ${authConfigPath(context.server)} and run \`${context.command}\``}`,
    {
      detail: {
        server: context.server,
        path: authConfigPath(context.server),
        resource: context.resource,
        reason: failure.reason,
        ...(failure.oauthError === undefined ? {} : { oauthError: failure.oauthError }),
        ...(failure.httpStatus === undefined ? {} : { httpStatus: failure.httpStatus }),
        ...(failure.issuer === undefined ? {} : { issuer: failure.issuer }),
      },
    },
  );
}

/**
 * The words of a library or network error, without its `cause` (which may carry the callback's
 * parameters or a response body).
 */
export function describe(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}
