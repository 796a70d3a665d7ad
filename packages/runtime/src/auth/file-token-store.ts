/**
 * The per-user token store (DESIGN §16): one JSON file of logins and client registrations, mode
 * 0600 in a 0700 directory, replaced atomically (a temp file in the same directory, fsync,
 * rename), so a reader never sees half a file. Writers take a short whole-file lock
 * (`<file>.lock`) around read-modify-write; refresh takes a per-key lock
 * (`<file>.<hash>.lock`) for its whole length, which makes it single-flight across processes.
 * Key lock before file lock, never the reverse. A corrupt file is an error naming it, never an
 * empty store: dropping logins silently would look like a logout.
 */
import { createHash, randomUUID } from 'node:crypto';
import { chmod, mkdir, open, readFile, rename, unlink } from 'node:fs/promises';
import { syncDirectory } from '../sync-directory.js';
import { dirname } from 'node:path';
import { ErrorCode, RuntimeError } from '@stepbind/binding/internal';

import { FileLockTimeout, withFileLock } from './file-lock.js';
import { summarize, tokenKeyId } from './memory-token-store.js';
import type {
  ClientRegistration,
  StoredLogin,
  StoredLoginSummary,
  TokenKey,
  TokenStore,
} from './types.js';

/** The format version this build writes (and the newest it reads). */
export const TOKEN_FILE_VERSION = 1;

/** Options of {@link FileTokenStore}. */
export interface FileTokenStoreOptions {
  /** The JSON file (created with its directory on first write). */
  readonly path: string;
  /** How long a lock (whole-file or per-key) is waited for. @default 30000 */
  readonly lockTimeoutMs?: number;
  /** Age after which a lock whose owner seems alive is taken over. @default 120000 */
  readonly staleLockMs?: number;
}

/** The file's content. */
interface TokenFile {
  readonly version: number;
  readonly logins: readonly { readonly key: TokenKey; readonly login: StoredLogin }[];
  readonly registrations: readonly ClientRegistration[];
}

const EMPTY: TokenFile = { version: TOKEN_FILE_VERSION, logins: [], registrations: [] };

/**
 * A {@link TokenStore} in one file, shared by every process of the user. Errors are
 * `RuntimeError` `AUTH_FAILED` with `detail.reason: 'store'` and `detail.path`: a corrupt or
 * newer-format file, a file system failure, a lock held past `lockTimeoutMs`. Holds no handle
 * between calls: `close()` has nothing to release.
 */
export class FileTokenStore implements TokenStore {
  readonly location: string;
  readonly #path: string;
  readonly #lockTimeoutMs: number;
  readonly #staleLockMs: number;

  /**
   * @throws RuntimeError `INVALID_OPTIONS` (nothing opened) for an unknown option, a `path` that is
   *   not a non-empty string, or a timeout that is not a whole number of ms in 1..2^31-1.
   */
  constructor(options: FileTokenStoreOptions) {
    checkStoreOptions(options);
    this.#path = options.path;
    this.location = options.path;
    this.#lockTimeoutMs = options.lockTimeoutMs ?? 30_000;
    this.#staleLockMs = options.staleLockMs ?? 120_000;
  }

  /** The file's path. */
  get path(): string {
    return this.#path;
  }

  async get(key: TokenKey): Promise<StoredLogin | undefined> {
    const id = tokenKeyId(key);
    return (await this.#read()).logins.find((entry) => tokenKeyId(entry.key) === id)?.login;
  }

  async put(
    key: TokenKey,
    login: Omit<StoredLogin, 'version' | 'updatedAt'>,
  ): Promise<StoredLogin> {
    const id = tokenKeyId(key);
    return await this.#update((file) => {
      const previous = file.logins.find((entry) => tokenKeyId(entry.key) === id);
      const stored: StoredLogin = Object.freeze({
        ...login,
        version: (previous?.login.version ?? 0) + 1,
        updatedAt: Date.now(),
      });
      const logins = file.logins.filter((entry) => entry !== previous);
      return [{ ...file, logins: [...logins, { key: plainKey(key), login: stored }] }, stored];
    });
  }

  async delete(key: TokenKey): Promise<boolean> {
    const id = tokenKeyId(key);
    return await this.#update((file) => {
      const logins = file.logins.filter((entry) => tokenKeyId(entry.key) !== id);
      const removed = logins.length !== file.logins.length;
      return [removed ? { ...file, logins } : undefined, removed];
    });
  }

  async list(): Promise<readonly StoredLoginSummary[]> {
    return (await this.#read()).logins.map(({ key, login }) => summarize(key, login));
  }

  async getRegistration(
    issuer: string,
    redirectUri: string,
  ): Promise<ClientRegistration | undefined> {
    return (await this.#read()).registrations.find(
      (r) => r.issuer === issuer && r.redirectUri === redirectUri,
    );
  }

  async putRegistration(registration: ClientRegistration): Promise<void> {
    await this.#update((file) => {
      const registrations = file.registrations.filter(
        (r) => !(r.issuer === registration.issuer && r.redirectUri === registration.redirectUri),
      );
      return [{ ...file, registrations: [...registrations, { ...registration }] }, undefined];
    });
  }

  /** Holds `<file>.<sha256 of the key>.lock` (see {@link withFileLock}) while `work` runs. */
  async withLock<T>(key: TokenKey, work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    const hash = createHash('sha256').update(tokenKeyId(key)).digest('hex').slice(0, 32);
    return await this.#locked(`${this.#path}.${hash}.lock`, work, signal);
  }

  /** Nothing to release: every call opens and closes its own files. */
  async close(): Promise<void> {}

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  async #locked<T>(lockPath: string, work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    await this.#ensureDirectory();
    try {
      return await withFileLock(lockPath, work, {
        maxWaitMs: this.#lockTimeoutMs,
        staleMs: this.#staleLockMs,
        ...(signal === undefined ? {} : { signal }),
      });
    } catch (error) {
      if (error instanceof FileLockTimeout) {
        throw this.#failure(
          `its lock file ${error.path} stayed held by a live process for ${error.waitedMs} ms`,
          'Another stepbind process is refreshing or writing; try again, or remove the lock file if no stepbind process is running.',
        );
      }
      throw error;
    }
  }

  /** Read-modify-write under the whole-file lock; `change` returns no file to leave it as is. */
  async #update<T>(change: (file: TokenFile) => [TokenFile | undefined, T]): Promise<T> {
    return await this.#locked(`${this.#path}.lock`, async () => {
      const [next, result] = change(await this.#read());
      if (next !== undefined) await this.#write(next);
      return result;
    });
  }

  async #read(): Promise<TokenFile> {
    let text: string;
    try {
      text = await readFile(this.#path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return EMPTY;
      throw this.#ioFailure('read', error);
    }
    // The parser's message quotes the content, which holds tokens: it is never passed on.
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw this.#corrupt('it is not valid JSON');
    }
    return this.#checked(parsed);
  }

  #checked(parsed: unknown): TokenFile {
    if (typeof parsed !== 'object' || parsed === null) throw this.#corrupt('it is not an object');
    const file = parsed as Partial<TokenFile>;
    if (typeof file.version !== 'number') throw this.#corrupt('it has no format version');
    if (file.version > TOKEN_FILE_VERSION) {
      throw this.#failure(
        `it was written by a newer stepbind (format ${file.version}; this one reads up to ${TOKEN_FILE_VERSION})`,
        'Upgrade stepbind; the file was left unchanged.',
      );
    }
    if (!Array.isArray(file.logins) || !file.logins.every(isLoginEntry)) {
      throw this.#corrupt('its logins are malformed');
    }
    if (!Array.isArray(file.registrations) || !file.registrations.every(isRegistration)) {
      throw this.#corrupt('its client registrations are malformed');
    }
    return {
      version: file.version,
      logins: file.logins.map((entry) => ({ key: entry.key, login: Object.freeze(entry.login) })),
      registrations: file.registrations.map((r) => Object.freeze(r)),
    };
  }

  /** Temp file in the same directory, fsync, rename over, fsync the directory. */
  async #write(file: TokenFile): Promise<void> {
    const temp = `${this.#path}.${process.pid}.${randomUUID()}.tmp`;
    try {
      const handle = await open(temp, 'wx', 0o600);
      try {
        await handle.writeFile(`${JSON.stringify({ ...file, version: TOKEN_FILE_VERSION })}\n`);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temp, this.#path);
    } catch (error) {
      await unlink(temp).catch(() => undefined);
      throw this.#ioFailure('write', error);
    }
    await syncDirectory(dirname(this.#path));
  }

  async #ensureDirectory(): Promise<void> {
    const dir = dirname(this.#path);
    try {
      const created = await mkdir(dir, { recursive: true, mode: 0o700 });
      // mkdir's mode is masked by the umask: the directory it made is set exactly.
      if (created !== undefined) await chmod(dir, 0o700);
    } catch (error) {
      throw this.#ioFailure('create the directory of', error);
    }
  }

  #corrupt(why: string): RuntimeError {
    return this.#failure(
      `${why}`,
      'Its logins were not read and nothing was changed. Fix the file, or move it aside and log in again (stepbind login NAME).',
    );
  }

  #ioFailure(what: string, error: unknown): RuntimeError {
    const code = (error as NodeJS.ErrnoException | undefined)?.code;
    return this.#failure(
      `could not ${what} it (${code ?? 'error'})`,
      'Check that the file and its directory belong to this user and are writable.',
      code,
    );
  }

  #failure(why: string, next: string, fsCode?: string): RuntimeError {
    return new RuntimeError(
      ErrorCode.AUTH_FAILED,
      `The token store ${this.#path} cannot be used: ${why}. ${next}`,
      {
        detail: {
          reason: 'store',
          path: this.#path,
          ...(fsCode === undefined ? {} : { fsCode }),
        },
      },
    );
  }
}

/** The key's three fields only (a caller's object may carry more). */
function plainKey(key: TokenKey): TokenKey {
  return { issuer: key.issuer, resource: key.resource, clientId: key.clientId };
}

function isLoginEntry(value: unknown): value is { key: TokenKey; login: StoredLogin } {
  const entry = value as { key?: Partial<TokenKey>; login?: Partial<StoredLogin> } | null;
  const key = entry?.key;
  const login = entry?.login;
  return (
    typeof key?.issuer === 'string' &&
    typeof key.resource === 'string' &&
    typeof key.clientId === 'string' &&
    typeof login?.principal === 'string' &&
    typeof login.version === 'number' &&
    typeof login.updatedAt === 'number' &&
    typeof login.tokens?.accessToken === 'string'
  );
}

function isRegistration(value: unknown): value is ClientRegistration {
  const r = value as Partial<ClientRegistration> | null;
  return (
    typeof r?.issuer === 'string' &&
    typeof r.redirectUri === 'string' &&
    typeof r.clientId === 'string' &&
    typeof r.tokenEndpointAuthMethod === 'string'
  );
}

const STORE_OPTION_KEYS: readonly string[] = ['path', 'lockTimeoutMs', 'staleLockMs'];

/** The options of a {@link FileTokenStore}, checked at run time: nothing is ignored. */
function checkStoreOptions(options: unknown): asserts options is FileTokenStoreOptions {
  const bad = (option: string, why: string): never => {
    throw new RuntimeError(ErrorCode.INVALID_OPTIONS, `FileTokenStore: ${option} ${why}.`, {
      detail: { option },
    });
  };
  if (typeof options !== 'object' || options === null) {
    return bad(
      'options',
      'must be an object such as { path: "/home/me/.local/state/stepbind/tokens.json" }',
    );
  }
  const given = options as Record<string, unknown>;
  for (const key of Object.keys(given)) {
    if (!STORE_OPTION_KEYS.includes(key)) {
      bad(key, `is not an option (the options are ${STORE_OPTION_KEYS.join(', ')})`);
    }
  }
  if (typeof given['path'] !== 'string' || given['path'] === '') {
    bad('path', "must be the token file's path, a non-empty string");
  }
  for (const key of ['lockTimeoutMs', 'staleLockMs']) {
    const value = given[key];
    if (
      value !== undefined &&
      (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 2 ** 31 - 1)
    ) {
      bad(key, 'must be a whole number of milliseconds from 1 to 2147483647');
    }
  }
}
