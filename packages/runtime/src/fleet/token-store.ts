/**
 * The fleet's token store in PostgreSQL (DESIGN §16): logins keyed by (issuer, resource, client
 * id) with a version that grows by one per write, and dynamic client registrations, shared by every
 * worker. `withLock` holds a session advisory lock on the key's hash on one dedicated connection
 * for the length of `work`, so a refresh is single-flight across the fleet; the wait is bounded
 * (`lock_timeout`) and the caller's signal ends it (the connection is destroyed, which also ends
 * its wait on the server). The tokens are stored (they must be, to be shared), but never logged,
 * never in an error: errors name the store (URL redacted) and the key, not the row.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { PgClient, PgQueryConfig, PgQueryable } from './pg-driver.js';
import { abortedError, ErrorCode, onAbort, RuntimeError } from '@stepbind/binding/internal';

import { summarize, tokenKeyId } from '../auth/memory-token-store.js';
import type {
  ClientRegistration,
  OAuthTokens,
  StoredLogin,
  StoredLoginSummary,
  TokenKey,
  TokenStore,
} from '../auth/types.js';
import { destroyClient, settlesWithin, type PgHandle } from './pg.js';

/** Options of {@link PostgresTokenStore}. */
export interface PostgresTokenStoreOptions {
  /** How long `withLock` waits for another worker's lock on the same key. @default 45000 */
  readonly lockTimeoutMs?: number;
}

interface LoginRow {
  issuer: string;
  resource: string;
  client_id: string;
  version: string;
  principal: string;
  server: string | null;
  scopes: string | null;
  tokens: string;
  updated_at: string;
}

/** One held lock: its connection, and why it was lost (the session ended while held). */
interface LockSession {
  readonly id: string;
  readonly client: PgClient;
  lost?: unknown;
}

/** `undefined_object`: a setting this server version does not know. */
const UNDEFINED_OBJECT = '42704';

/** `lock_not_available`: the server's `lock_timeout` ended the wait. */
const LOCK_NOT_AVAILABLE = '55P03';

/**
 * The PostgreSQL {@link TokenStore}. Obtain it from `FleetStore.tokenStore()` (the schema is
 * migrated at attach); it does not own the handle: `close()` only ends the lock connections it
 * holds.
 */
export class PostgresTokenStore implements TokenStore {
  readonly location: string;
  readonly #pg: PgHandle;
  readonly #lockTimeoutMs: number;
  /** The dedicated connections of locks held or being waited for. */
  readonly #lockClients = new Set<PgClient>();
  /** The locked work running (`close()` lets it finish, bounded). */
  readonly #running = new Set<Promise<unknown>>();
  /** The lock the current async context runs under: `put` of its key goes through its session. */
  readonly #session = new AsyncLocalStorage<LockSession>();
  #closed = false;

  constructor(handle: PgHandle, options: PostgresTokenStoreOptions = {}) {
    checkOptions(options);
    this.#pg = handle;
    this.location = handle.location;
    this.#lockTimeoutMs = options.lockTimeoutMs ?? 45_000;
  }

  async get(key: TokenKey): Promise<StoredLogin | undefined> {
    const { rows } = await this.#pg.query<LoginRow>(
      'SELECT * FROM auth_logins WHERE issuer = $1 AND resource = $2 AND client_id = $3',
      [key.issuer, key.resource, key.clientId],
      'read a login',
    );
    return rows[0] === undefined ? undefined : this.#login(rows[0]);
  }

  async put(
    key: TokenKey,
    login: Omit<StoredLogin, 'version' | 'updatedAt'>,
  ): Promise<StoredLogin> {
    const session = this.#session.getStore();
    if (session !== undefined && session.id === tokenKeyId(key)) {
      return await this.#putUnderLock(session, key, login);
    }
    const row = await this.#pg.tx('store a login', (client) => upsert(client, key, login));
    if (row === undefined) throw this.#corrupt(key);
    return this.#login(row);
  }

  /**
   * A put under this key's lock runs on the lock's own session: it lands only while the lock is
   * held (a lost session fails it), never after another worker took the lock over.
   */
  async #putUnderLock(
    session: LockSession,
    key: TokenKey,
    login: Omit<StoredLogin, 'version' | 'updatedAt'>,
  ): Promise<StoredLogin> {
    if (session.lost !== undefined) throw this.#lockLost(session.lost);
    let row: LoginRow | undefined;
    try {
      row = await upsert(session.client, key, login);
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      const dropped = typeof code !== 'string' || /^(08|57P)/.test(code);
      if (session.lost === undefined && !dropped) {
        throw this.#pg.failure('store a login', 'query', error);
      }
      throw this.#lockLost(session.lost ?? error);
    }
    if (row === undefined) throw this.#corrupt(key);
    return this.#login(row);
  }

  #lockLost(cause: unknown): RuntimeError {
    return this.#pg.failure(
      'store a login',
      'unreachable',
      cause,
      "the connection holding the login's lock was lost, so the login was not stored (another worker may hold the lock now); a later request reads the login again (log in again if the server then refuses its refresh token)",
    );
  }

  async delete(key: TokenKey): Promise<boolean> {
    const { rowCount } = await this.#pg.query(
      'DELETE FROM auth_logins WHERE issuer = $1 AND resource = $2 AND client_id = $3',
      [key.issuer, key.resource, key.clientId],
      'remove a login',
    );
    return (rowCount ?? 0) > 0;
  }

  async list(): Promise<readonly StoredLoginSummary[]> {
    const { rows } = await this.#pg.query<LoginRow>(
      'SELECT * FROM auth_logins ORDER BY issuer, resource, client_id',
      [],
      'list logins',
    );
    return rows.map((row) => summarize(rowKey(row), this.#login(row)));
  }

  async getRegistration(
    issuer: string,
    redirectUri: string,
  ): Promise<ClientRegistration | undefined> {
    const { rows } = await this.#pg.query<{ registration: string }>(
      'SELECT registration FROM auth_registrations WHERE issuer = $1 AND redirect_uri = $2',
      [issuer, redirectUri],
      'read a client registration',
    );
    const text = rows[0]?.registration;
    if (text === undefined) return undefined;
    const parsed = parseJson(text) as Partial<ClientRegistration> | undefined;
    if (typeof parsed?.clientId !== 'string') throw this.#corruptRegistration(issuer);
    return Object.freeze(parsed as ClientRegistration);
  }

  async putRegistration(registration: ClientRegistration): Promise<void> {
    await this.#pg.query(
      `INSERT INTO auth_registrations (issuer, redirect_uri, registration, updated_at)
       VALUES ($1, $2, $3, $4)
       ON CONFLICT (issuer, redirect_uri) DO UPDATE SET
         registration = EXCLUDED.registration, updated_at = EXCLUDED.updated_at`,
      [registration.issuer, registration.redirectUri, JSON.stringify(registration), Date.now()],
      'store a client registration',
    );
  }

  /**
   * Runs `work` holding the session advisory lock `(hashtext('stepbind:token'), hashtext(key))`
   * on a connection of its own (a hash collision only serialises two keys, never mixes them).
   *
   * @throws RuntimeError `STORE_UNAVAILABLE` (`reason: 'timeout'` when another worker held the
   *   lock for `lockTimeoutMs`); `ABORTED` (or the signal's stepbind reason) when `signal` ended
   *   the wait; `STORE_UNAVAILABLE` (`reason: 'unreachable'`) when the lock's session was lost
   *   while `work` ran (a `put` of the key inside `work` runs on that session, so none lands after
   *   the loss). Otherwise, once `work` started, its result or error is what returns.
   */
  async withLock<T>(key: TokenKey, work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (this.#closed || this.#pg.closed) {
      throw this.#pg.failure('lock a login', 'closed', undefined, 'the store is closed');
    }
    const client = this.#pg.client('stepbind-token-lock');
    const session: LockSession = { id: tokenKeyId(key), client };
    let ending = false;
    // A session that ends while held (server restart, dropped connection) releases the lock on the
    // server: the work's put is then refused and its completion fails.
    client.on('error', (error) => (session.lost ??= error));
    client.on('end', () => {
      if (!ending) session.lost ??= new Error('the lock connection ended');
    });
    this.#lockClients.add(client);
    try {
      await this.#lock(client, session.id, signal);
      // Registered before `work` starts: a close() from inside it waits for it too.
      let finished: () => void = () => undefined;
      const running = new Promise<void>((resolve) => (finished = resolve));
      this.#running.add(running);
      try {
        const result = await this.#session.run(session, work);
        if (session.lost !== undefined) throw this.#lockLost(session.lost);
        return result;
      } finally {
        finished();
        this.#running.delete(running);
        // Ending the session releases the lock even when the unlock itself fails.
        if (session.lost === undefined) {
          await client
            .query("SELECT pg_advisory_unlock(hashtext('stepbind:token'), hashtext($1))", [
              session.id,
            ])
            .catch(() => undefined);
        }
      }
    } finally {
      ending = true;
      this.#lockClients.delete(client);
      await client.end().catch(() => undefined);
    }
  }

  /**
   * Lets running locked work finish (at most the handle's close grace), then ends the lock
   * connections still open (their locks are released with them). Idempotent.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#running.size > 0) {
      await settlesWithin(Promise.allSettled([...this.#running]), this.#pg.closeGraceMs);
    }
    const clients = [...this.#lockClients];
    this.#lockClients.clear();
    for (const client of clients) destroyClient(client);
  }

  async #lock(client: PgClient, id: string, signal: AbortSignal | undefined): Promise<void> {
    signal?.throwIfAborted();
    // The wait ends by destroying the connection: the server drops the session and its wait.
    const stop =
      signal === undefined ? () => undefined : onAbort(signal, () => destroyClient(client));
    try {
      await client.connect();
      // Held while a refresh runs: the OS notices a dead peer, and the server never ends the
      // session for being idle (which would release the lock mid-refresh).
      (
        client as unknown as { connection?: { stream?: { setKeepAlive?(on: boolean): void } } }
      ).connection?.stream?.setKeepAlive?.(true);
      await client.query(`SET statement_timeout = 0; SET lock_timeout = ${this.#lockTimeoutMs}`);
      await client.query('SET idle_session_timeout = 0').catch((error: unknown) => {
        // Servers before 14 have no idle session timeout.
        if ((error as { code?: unknown }).code !== UNDEFINED_OBJECT) throw error;
      });
      // pg reads `query_timeout` per query: the client-side bound of a server that stopped
      // answering, past the server's own `lock_timeout`.
      const lock: PgQueryConfig = {
        text: "SELECT pg_advisory_lock(hashtext('stepbind:token'), hashtext($1))",
        values: [id],
        query_timeout: this.#lockTimeoutMs + 5000,
      };
      await client.query(lock);
    } catch (error) {
      if (signal?.aborted === true) {
        throw abortedError(
          `The wait for the token lock in the fleet store ${this.location} was cancelled.`,
          signal.reason,
          { as: RuntimeError, keepStepbindReason: true },
        );
      }
      if ((error as { code?: unknown }).code === LOCK_NOT_AVAILABLE) {
        throw this.#pg.failure(
          'lock a login',
          'timeout',
          error,
          `another worker held the lock of this login for ${this.#lockTimeoutMs} ms (a refresh that does not end)`,
        );
      }
      throw this.#pg.failure('lock a login', 'unreachable', error);
    } finally {
      stop();
    }
  }

  #login(row: LoginRow): StoredLogin {
    const tokens = parseJson(row.tokens) as OAuthTokens | undefined;
    const scopes = row.scopes === null ? undefined : parseJson(row.scopes);
    if (
      typeof tokens?.accessToken !== 'string' ||
      (scopes !== undefined && !Array.isArray(scopes))
    ) {
      throw this.#corrupt(rowKey(row));
    }
    return Object.freeze({
      tokens: Object.freeze(tokens),
      principal: row.principal,
      version: Number(row.version),
      updatedAt: Number(row.updated_at),
      ...(row.server === null ? {} : { server: row.server }),
      ...(scopes === undefined ? {} : { scopes: Object.freeze(scopes as string[]) }),
    });
  }

  #corrupt(key: TokenKey): RuntimeError {
    return new RuntimeError(
      ErrorCode.STORE_UNAVAILABLE,
      `The fleet store ${this.location} holds a login of client ${key.clientId} at ${key.issuer} for ${key.resource} that cannot be read; the store was altered. Delete its row from auth_logins and log in again.`,
      { detail: { store: this.location, reason: 'corrupt', issuer: key.issuer } },
    );
  }

  #corruptRegistration(issuer: string): RuntimeError {
    return new RuntimeError(
      ErrorCode.STORE_UNAVAILABLE,
      `The fleet store ${this.location} holds a client registration at ${issuer} that cannot be read; the store was altered. Delete its row from auth_registrations (the client registers again).`,
      { detail: { store: this.location, reason: 'corrupt', issuer } },
    );
  }
}

/** Inserts or replaces `key`'s login (one statement: atomic on its own), returning its row. */
async function upsert(
  client: PgQueryable,
  key: TokenKey,
  login: Omit<StoredLogin, 'version' | 'updatedAt'>,
): Promise<LoginRow | undefined> {
  const tokens = JSON.stringify(login.tokens);
  const scopes = login.scopes === undefined ? null : JSON.stringify(login.scopes);
  const { rows } = await client.query<LoginRow>(
    `INSERT INTO auth_logins AS l
       (issuer, resource, client_id, version, principal, server, scopes, tokens, updated_at)
     VALUES ($1, $2, $3, 1, $4, $5, $6, $7, $8)
     ON CONFLICT (issuer, resource, client_id) DO UPDATE SET
       version = l.version + 1, principal = EXCLUDED.principal, server = EXCLUDED.server,
       scopes = EXCLUDED.scopes, tokens = EXCLUDED.tokens, updated_at = EXCLUDED.updated_at
     RETURNING *`,
    [
      key.issuer,
      key.resource,
      key.clientId,
      login.principal,
      login.server ?? null,
      scopes,
      tokens,
      Date.now(),
    ],
  );
  return rows[0];
}

function rowKey(row: LoginRow): TokenKey {
  return { issuer: row.issuer, resource: row.resource, clientId: row.client_id };
}

/** The parsed JSON, or undefined: the parser's message would quote the secret it failed on. */
function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * The options of a {@link PostgresTokenStore}, checked at run time (an unknown key or a bad value is
 * `INVALID_OPTIONS`, never ignored or silently rounded).
 */
function checkOptions(options: unknown): void {
  const bad = (option: string, why: string): never => {
    throw new RuntimeError(ErrorCode.INVALID_OPTIONS, `PostgresTokenStore: ${option} ${why}.`, {
      detail: { option },
    });
  };
  if (typeof options !== 'object' || options === null) bad('options', 'must be an object');
  for (const [key, value] of Object.entries(options as Record<string, unknown>)) {
    if (key !== 'lockTimeoutMs') bad(key, 'is not an option (the only option is lockTimeoutMs)');
    if (
      value !== undefined &&
      (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 2 ** 31 - 1)
    ) {
      bad(key, 'must be a whole number of milliseconds from 1 to 2147483647');
    }
  }
}
