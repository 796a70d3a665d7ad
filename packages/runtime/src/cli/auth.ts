/**
 * `stepbind login NAME`, `stepbind logout NAME` and `stepbind auth status` (DESIGN §16): the
 * operator's side of OAuth for remote servers. Login runs the authorization code flow through a
 * loopback redirect on 127.0.0.1 (or client credentials, as the server's `auth` says) and stores
 * the tokens in the token store; nothing here ever prints a token, code, verifier, client secret
 * or private key (every one the flow learns is scrubbed from error text as well).
 *
 * @packageDocumentation
 */
import { ErrorCode, RuntimeError, StepbindError } from '@stepbind/binding/internal';
import { createServerAuth } from '../auth/server-auth.js';
import { openDefaultTokenStore } from '../auth/default-store.js';
import { listenForCallback, presentAndWait } from '../auth/loopback.js';
import {
  DEFAULT_REDIRECT_URI,
  type AuthStatus,
  type OAuthConfig,
  type ServerAuthConfig,
  type ServerAuthorizer,
  type StoredLoginSummary,
  type TokenStore,
} from '../auth/types.js';
import type { RuntimeConfig, ServerConfig } from '../config.js';
import { createRedactor, type LearningRedactor } from '../redact.js';
import { loadConfigFile } from './config-file.js';
import { commandLineOf, formatTable, type CommandLine, type CommandSpec } from './grammar.js';
import { describeError } from './options.js';
import type { CliIo } from './io.js';

const NAME = {
  name: 'NAME',
  description: 'a configured remote (HTTP) server with "auth": { "type": "oauth" }',
};
const JSON_OPTION = { name: 'json', description: 'print the result as JSON' };
const EXIT = `Tokens are never printed. Exit code 0 on success, 1 when it failed, 2 for usage or configuration
errors.`;

/** The grammar and `--help` of `stepbind login`, `stepbind logout` and `stepbind auth status`. */
export const AUTH_COMMANDS: readonly CommandSpec[] = [
  {
    name: 'login',
    summary:
      'Log in to an OAuth-protected server: prints the URL, opens a browser, waits on the loopback callback.',
    config: 'required',
    arguments: [NAME],
    options: [
      {
        name: 'redirect-uri',
        value: 'URI',
        description: `the loopback redirect (default ${DEFAULT_REDIRECT_URI}; port 0 picks a free port)`,
      },
      JSON_OPTION,
    ],
    notes: `--json: { "ok": true, "store", "server", "state", "issuer"?, "principal"?, "scopes"?, "expiresAt"? }
        | { "ok": false, "error": { "code", "message", "detail" } }
${EXIT}`,
  },
  {
    name: 'logout',
    summary: "Forget (and revoke where supported) a server's login.",
    config: 'required',
    arguments: [NAME],
    options: [JSON_OPTION],
    notes: `--json: { "ok": true, "server", "state": "logged-out" } | { "ok": false, "error" }
${EXIT}`,
  },
  {
    name: 'auth status',
    summary: "Every stored login and, with CONFIG, each configured remote server's state.",
    config: 'optional',
    arguments: [],
    options: [JSON_OPTION],
    notes: `--json: { "ok": true, "store", "logins": [{ "server"?, "principal", "issuer", "resource", "clientId",
          "scopes"?, "expiresAt"?, "refreshable", "updatedAt" }],
          "servers"?: [{ "server", "state", "issuer"?, "principal"?, "scopes"?, "expiresAt"? }] }
${EXIT}`,
  },
];

/**
 * Runs `stepbind login|logout|auth …` with the arguments after the command name; resolves to the
 * exit code (0 ok, 1 refused or failed, 2 usage or configuration).
 */
export async function runAuthCommand(
  command: 'login' | 'logout' | 'auth',
  args: readonly string[],
  io: CliIo,
): Promise<number> {
  const rest = command === 'auth' ? args.slice(1) : args;
  const spec = AUTH_COMMANDS.find(
    (c) => c.name === (command === 'auth' ? `auth ${args[0] ?? ''}` : command),
  );
  if (spec === undefined) {
    io.stderr(
      `stepbind auth: expected "auth status"; see "stepbind auth status --help"\n\nUsage: stepbind auth status [CONFIG] [--json]\n`,
    );
    return 2;
  }
  const parsed = commandLineOf(spec, rest, io);
  if (typeof parsed === 'number') return parsed;
  if (command === 'auth') return await status(parsed, io);
  const [server = ''] = parsed.positionals;
  const path = parsed.config ?? '';
  let config: RuntimeConfig;
  try {
    config = await loadConfigFile(path);
  } catch (error) {
    io.stderr(`stepbind ${spec.name}: ${describeError(error)}\n`);
    return 2;
  }
  const json = parsed.flags.has('json');
  let target: OAuthTarget;
  try {
    target = oauthTarget(config, server, path);
  } catch (error) {
    report(io, json, error, spec.name, undefined);
    return 2;
  }
  return command === 'login'
    ? await login(target, parsed, io, path)
    : await logout(target, io, json, path);
}

/** A configured HTTP server whose `auth` is OAuth. */
interface OAuthTarget {
  readonly name: string;
  /** The whole configuration (its fleet `store`, when it has one). */
  readonly config: RuntimeConfig;
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly auth: OAuthConfig;
}

/** The server's `auth` block (HTTP servers only). */
function authOf(server: ServerConfig): ServerAuthConfig | undefined {
  return server.transport === 'http' ? server.auth : undefined;
}

/** `name`'s OAuth settings, or `INVALID_CONFIG` naming the config path and the fix. */
function oauthTarget(config: RuntimeConfig, name: string, file: string): OAuthTarget {
  const server = config.servers.get(name);
  const at = `$.mcpServers.${name}`;
  const refuse = (why: string, path: string): never => {
    throw new RuntimeError(ErrorCode.INVALID_CONFIG, `${file}: ${why}`, {
      detail: { server: name, path },
    });
  };
  if (server === undefined) {
    return refuse(
      `no server "${name}" in the configuration (configured: ${[...config.servers.keys()].join(', ') || 'none'})${config.disabled.includes(name) ? '; it is disabled' : ''}.`,
      at,
    );
  }
  if (server.transport !== 'http') {
    return refuse(
      `server "${name}" runs over stdio; only remote (HTTP) servers log in. Its credentials go in its "env".`,
      `${at}.command`,
    );
  }
  const auth = authOf(server);
  if (auth?.type !== 'oauth') {
    return refuse(
      auth === undefined
        ? `server "${name}" has no "auth" block; add "auth": { "type": "oauth" } to log in with OAuth.`
        : `server "${name}" uses a bearer token from its configuration; there is nothing to log in to. Use "auth": { "type": "oauth" } for OAuth.`,
      `${at}.auth`,
    );
  }
  return { name, config, url: server.url, headers: server.headers, auth };
}

/**
 * Scrubs the server's URL secrets, its configured secrets (client secret, private key: also each
 * line of a PEM key) and every secret the flow learned, raw, percent-encoded and JSON-escaped: the
 * one redactor of `src/redact.ts`. Exported for tests only.
 */
export class Scrubber {
  readonly #redactor: LearningRedactor | undefined;

  constructor(target: Pick<OAuthTarget, 'url' | 'headers' | 'auth'> | undefined) {
    const secrets = [target?.auth.clientSecret, target?.auth.privateKey].filter(
      (secret): secret is string => typeof secret === 'string',
    );
    this.#redactor =
      target === undefined ? undefined : createRedactor(target.url, target.headers, secrets);
  }

  learn = (secret: string): void => {
    this.#redactor?.learn(secret);
  };

  text(text: string): string {
    return this.#redactor === undefined ? text : this.#redactor.text(text);
  }

  /** JSON data with every string in it (keys and values, at any depth) scrubbed. */
  value(value: unknown): unknown {
    if (typeof value === 'string') return this.text(value);
    if (Array.isArray(value)) return value.map((item) => this.value(item));
    if (value !== null && typeof value === 'object') {
      return Object.fromEntries(
        Object.entries(value).map(([key, item]) => [this.text(key), this.value(item)]),
      );
    }
    return value;
  }
}

async function login(
  target: OAuthTarget,
  parsed: CommandLine,
  io: CliIo,
  configPath: string,
): Promise<number> {
  const json = parsed.flags.has('json');
  const scrub = new Scrubber(target);
  let tokens: OpenStore | undefined;
  // Listen before the flow starts: the redirect URI (its port) is then known, and the browser can
  // never arrive before the listener.
  let listener: Awaited<ReturnType<typeof listenForCallback>> | undefined;
  try {
    tokens = await openStore(io, target.config);
    const store = tokens.store;
    if (target.auth.grant !== 'client_credentials') {
      listener = await listenForCallback({
        redirectUri: parsed.values.get('redirect-uri') ?? DEFAULT_REDIRECT_URI,
        ...(io.signal === undefined ? {} : { signal: io.signal }),
      });
    }
    const callback = listener;
    const authorizer = createServerAuth({
      ...common(target, store, scrub, configPath),
      ...(callback === undefined
        ? {}
        : {
            redirectUri: callback.redirectUri,
            authorize: async (request) =>
              await presentAndWait(request, callback, {
                print: (text) => io.stderr(text),
                ...(io.openBrowser === undefined ? {} : { open: io.openBrowser }),
              }),
          }),
    });
    const result = await authorizer.login(io.signal);
    io.stdout(
      json
        ? `${JSON.stringify({ ok: true, store: store.location, ...statusJson(result) })}\n`
        : `${[
            `✔ logged in to "${target.name}"${result.principal === undefined ? '' : ` as ${result.principal}`}`,
            ...statusLines(result),
            `    tokens stored in ${store.location}`,
          ].join('\n')}\n`,
    );
    return 0;
  } catch (error) {
    report(io, json, error, 'login', scrub);
    return isUsage(error) ? 2 : 1;
  } finally {
    await listener?.close();
    await tokens?.close();
  }
}

async function logout(
  target: OAuthTarget,
  io: CliIo,
  json: boolean,
  configPath: string,
): Promise<number> {
  const scrub = new Scrubber(target);
  let tokens: OpenStore | undefined;
  try {
    tokens = await openStore(io, target.config);
    const store = tokens.store;
    const authorizer = createServerAuth(common(target, store, scrub, configPath));
    await authorizer.logout(io.signal);
    io.stdout(
      json
        ? `${JSON.stringify({ ok: true, server: target.name, state: 'logged-out' })}\n`
        : `✔ logged out of "${target.name}" (${store.location})\n`,
    );
    return 0;
  } catch (error) {
    report(io, json, error, 'logout', scrub);
    return isUsage(error) ? 2 : 1;
  } finally {
    await tokens?.close();
  }
}

/** The options every command gives `createServerAuth`. */
function common(
  target: OAuthTarget,
  store: TokenStore,
  scrub: Scrubber,
  configPath: string,
): Parameters<typeof createServerAuth>[0] {
  return {
    server: target.name,
    url: target.url,
    config: target.auth,
    store,
    learnSecret: scrub.learn,
    loginCommand: loginCommand(target.name, configPath),
  };
}

/** The command line that logs in to `server` (for `AUTH_REQUIRED`). */
export function loginCommand(server: string, configPath: string): string {
  const quote = (s: string): string =>
    /^[\w./:@=-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
  return `stepbind login ${quote(server)} --config ${quote(configPath)}`;
}

async function status(parsed: CommandLine, io: CliIo): Promise<number> {
  const json = parsed.flags.has('json');
  const configPath = parsed.config;
  let config: RuntimeConfig | undefined;
  if (configPath !== undefined) {
    try {
      config = await loadConfigFile(configPath);
    } catch (error) {
      io.stderr(`stepbind auth status: ${describeError(error)}\n`);
      return 2;
    }
  }
  let tokens: OpenStore | undefined;
  try {
    tokens = await openStore(io, config);
    const store = tokens.store;
    const logins = await store.list();
    const servers =
      config === undefined ? undefined : await serverStates(config, store, configPath ?? '');
    io.stdout(
      json
        ? `${JSON.stringify({
            ok: true,
            store: store.location,
            logins: logins.map(loginJson),
            ...(servers === undefined ? {} : { servers }),
          })}\n`
        : `${formatStatus(store.location, logins, servers)}\n`,
    );
    return 0;
  } catch (error) {
    report(io, json, error, 'auth status', undefined);
    return 1;
  } finally {
    await tokens?.close();
  }
}

/** One configured HTTP server's state: its {@link AuthStatus}, or why it could not be read. */
type ServerState = ReturnType<typeof statusJson> | { server: string; error: unknown };

async function serverStates(
  config: RuntimeConfig,
  store: TokenStore,
  configPath: string,
): Promise<ServerState[]> {
  const states: ServerState[] = [];
  for (const [name, server] of config.servers) {
    if (server.transport !== 'http') continue;
    const auth = authOf(server);
    if (auth?.type !== 'oauth') {
      states.push(statusJson({ server: name, state: auth === undefined ? 'none' : 'bearer' }));
      continue;
    }
    const target = { name, config, url: server.url, headers: server.headers, auth };
    const scrub = new Scrubber(target);
    try {
      const authorizer: ServerAuthorizer = createServerAuth(
        common(target, store, scrub, configPath),
      );
      states.push(statusJson(await authorizer.status()));
    } catch (error) {
      states.push({ server: name, error: errorJson(error, scrub) });
    }
  }
  return states;
}

/** The `--json` shape of an {@link AuthStatus} (expiry as an ISO date). */
function statusJson(status: AuthStatus): {
  server: string;
  state: AuthStatus['state'];
  issuer?: string;
  principal?: string;
  scopes?: readonly string[];
  expiresAt?: string;
} {
  return {
    server: status.server,
    state: status.state,
    ...(status.issuer === undefined ? {} : { issuer: status.issuer }),
    ...(status.principal === undefined ? {} : { principal: status.principal }),
    ...(status.scopes === undefined ? {} : { scopes: status.scopes }),
    ...(status.expiresAt === undefined ? {} : { expiresAt: iso(status.expiresAt) }),
  };
}

function loginJson(login: StoredLoginSummary): unknown {
  return {
    ...(login.server === undefined ? {} : { server: login.server }),
    principal: login.principal,
    issuer: login.key.issuer,
    resource: login.key.resource,
    clientId: login.key.clientId,
    ...(login.scopes === undefined ? {} : { scopes: login.scopes }),
    ...(login.expiresAt === undefined ? {} : { expiresAt: iso(login.expiresAt) }),
    refreshable: login.hasRefreshToken,
    updatedAt: iso(login.updatedAt),
  };
}

function statusLines(status: AuthStatus): string[] {
  return [
    ...(status.issuer === undefined ? [] : [`    issuer  ${status.issuer}`]),
    ...(status.scopes === undefined ? [] : [`    scopes  ${status.scopes.join(' ') || '(none)'}`]),
    ...(status.expiresAt === undefined ? [] : [`    expires ${expiry(status.expiresAt)}`]),
  ];
}

function formatStatus(
  location: string,
  logins: readonly StoredLoginSummary[],
  servers: readonly ServerState[] | undefined,
): string {
  const lines = [`token store: ${location}`];
  if (logins.length === 0) lines.push('no stored logins');
  else lines.push(`${logins.length} stored login${logins.length === 1 ? '' : 's'}:`);
  if (logins.length > 0) {
    lines.push(
      ...formatTable(
        ['SERVER', 'PRINCIPAL', 'ISSUER', 'RESOURCE', 'CLIENT', 'SCOPES', 'EXPIRES', 'REFRESH'],
        logins.map((login) => [
          login.server ?? '(unnamed)',
          login.principal,
          login.key.issuer,
          login.key.resource,
          login.key.clientId,
          login.scopes === undefined ? '-' : login.scopes.join(' ') || '(none)',
          login.expiresAt === undefined ? 'unknown' : expiry(login.expiresAt),
          login.hasRefreshToken ? 'refreshable' : 'not refreshable',
        ]),
        '  ',
      ),
    );
  }
  if (servers !== undefined) {
    lines.push(servers.length === 0 ? 'no remote servers configured' : 'configured servers:');
    const rows = servers.map((state): string[] => {
      if ('error' in state) return [state.server, 'cannot tell', describeJson(state.error)];
      const what = {
        none: 'no auth',
        bearer: 'bearer token from the configuration',
        'logged-in': 'logged in',
        expired: 'token expired (refreshable)',
        'logged-out': 'not logged in',
      }[state.state];
      const extra = [
        ...(state.principal === undefined ? [] : [`as ${state.principal}`]),
        ...(state.expiresAt === undefined ? [] : [`until ${state.expiresAt}`]),
      ];
      return [state.server, what, extra.join(' ')];
    });
    if (rows.length > 0) lines.push(...formatTable(['SERVER', 'STATE', 'DETAIL'], rows, '  '));
  }
  return lines.join('\n');
}

const iso = (ms: number): string => new Date(ms).toISOString();

function expiry(ms: number): string {
  const minutes = Math.round((ms - Date.now()) / 60_000);
  return `${iso(ms)} (${minutes >= 0 ? `in ${minutes} min` : `${-minutes} min ago`})`;
}

/** An error as the CLI prints it, scrubbed (exported for tests only). */
export function errorJson(error: unknown, scrub: Scrubber | undefined): unknown {
  const text = (s: string): string => (scrub === undefined ? s : scrub.text(s));
  if (error instanceof StepbindError) {
    // Scrubbed string by string, before stringifying: escaping would hide a secret from the scrub.
    const detail = JSON.parse(JSON.stringify(error.detail ?? {})) as unknown;
    return {
      code: error.code,
      message: text(error.message),
      detail: scrub === undefined ? detail : scrub.value(detail),
    };
  }
  return { code: 'INTERNAL', message: text(describeError(error)) };
}

function describeJson(error: unknown): string {
  const { code, message } = error as { code: string; message: string };
  return `${code}: ${message}`;
}

function report(
  io: CliIo,
  json: boolean,
  error: unknown,
  command: string,
  scrub: Scrubber | undefined,
): void {
  const body = errorJson(error, scrub);
  if (json) io.stdout(`${JSON.stringify({ ok: false, error: body })}\n`);
  else io.stderr(`stepbind ${command}: ${describeJson(body)}\n`);
  const fix = error instanceof StepbindError ? error.detail['command'] : undefined;
  if (!json && typeof fix === 'string') io.stderr(`Run: ${fix}\n`);
}

/** Configuration and option errors exit 2; refusals and failures of the flow exit 1. */
function isUsage(error: unknown): boolean {
  return (
    error instanceof StepbindError &&
    (error.code === ErrorCode.INVALID_CONFIG || error.code === ErrorCode.INVALID_OPTIONS)
  );
}

/** A command's token store and how to let go of it. */
interface OpenStore {
  readonly store: TokenStore;
  close(): Promise<void>;
}

/**
 * The token store of a command: the caller's (left open), the fleet's when the configuration has
 * a `store` (tokens live in PostgreSQL, DESIGN §15), else the per-user default store.
 */
async function openStore(io: CliIo, config: RuntimeConfig | undefined): Promise<OpenStore> {
  if (io.tokenStore !== undefined) return { store: io.tokenStore, close: async () => {} };
  if (config?.store !== undefined) {
    const { attachFleet } = await import('../fleet/attach.js');
    const fleet = await attachFleet(config.store);
    return { store: fleet.tokenStore(), close: () => fleet.close() };
  }
  const store = openDefaultTokenStore();
  return { store, close: async () => await store.close?.() };
}
