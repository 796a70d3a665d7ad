/**
 * PLACEHOLDER until the OAuth slice lands (this file is replaced whole): the factory every other
 * slice codes against.
 */
import type { Redactor } from '../redact.js';
import type { AuthorizeHook, ServerAuthConfig, ServerAuthorizer, TokenStore } from './types.js';

/** What {@link createServerAuth} needs for one server. */
export interface ServerAuthOptions {
  /** The configured server name. */
  readonly server: string;
  /** The server's MCP endpoint URL (the protected resource). */
  readonly url: string;
  readonly config: ServerAuthConfig;
  readonly store: TokenStore;
  /** The application's hook for the authorization code flow. */
  readonly authorize?: AuthorizeHook;
  /** The redirect URI the hook's callback URL comes back to. @default 'http://127.0.0.1/callback' */
  readonly redirectUri?: string;
  /** Told every new secret (access and refresh tokens, codes) so logs and errors scrub it. */
  readonly learnSecret?: (secret: string) => void;
  /** The command that fixes `AUTH_REQUIRED` (for its message and detail). */
  readonly loginCommand?: string;
  /** For the authorization server's endpoints. @default globalThis.fetch */
  readonly fetch?: typeof fetch;
  /** The redactor of the server's URL. */
  readonly redactor?: Redactor;
}

/** One server's {@link ServerAuthorizer}. */
export function createServerAuth(options: ServerAuthOptions): ServerAuthorizer {
  throw new Error(`createServerAuth: not built yet (${options.server})`);
}
