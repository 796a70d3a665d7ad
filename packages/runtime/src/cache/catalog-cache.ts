/**
 * The persistent catalog cache (DESIGN §19.1): published snapshots in one JSON file, keyed by
 * server, connection identity, audience, principal and tool filter (the identity key and the
 * principal only as sha256), so a later process can start from them. The file is parsed once at
 * open; a write re-reads it only when another process changed it, merges (per key the newer
 * `storedAt` wins) under a lock file, and replaces it atomically. Nothing about the file's content
 * ever throws: a file or entry that cannot be used is a `catalog-cache-ignored` event.
 *
 * @packageDocumentation
 */
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  canonicalJson,
  computeTransportDigest,
  ConfigError,
  createCatalogSnapshot,
  digestOf,
  ErrorCode,
  sha256Hex,
  type CatalogSnapshot,
  type SchemaValidatorCache,
  type ValidationOptions,
} from '@stepbind/binding/internal';
import { FileLockTimeout, withFileLock } from '../auth/file-lock.js';
import type { ServerConfig } from '../config.js';
import type { CatalogCacheIgnoredReason, Emit } from '../events.js';
import type { ToolFilterConfig } from '../tool-filter.js';
import { identityKeyOf } from '../transports/index.js';
import {
  ensureCacheDirectory,
  errnoOf,
  readCacheFile,
  sameSignature,
  signatureAt,
  writeCacheFile,
  type FileSignature,
  type StoredCatalog,
  type StoredEntry,
  type StoredKey,
} from './cache-file.js';

/** What a cached catalog is stored under; every field is hashed or public, never a secret. */
export interface CatalogCacheKey {
  /** The configured server name. */
  readonly server: string;
  /** `identityKeyOf(config)`: stored only as its sha256. */
  readonly identityKey: string;
  readonly audience: string;
  /** Who the OAuth tokens act for; `''` without OAuth. Stored only as its sha256. */
  readonly principal: string;
  /** {@link toolFilterDigest} of the server's `tools` filter (`''`: none). */
  readonly toolFilter: string;
}

/** A catalog found in the cache, rebuilt and checked. */
export interface CachedCatalog {
  /** Restored, frozen, validated again under the current options, digests verified. */
  readonly snapshot: CatalogSnapshot;
  /** Epoch ms of the `record` that stored it. */
  readonly storedAt: number;
}

/** Options of {@link CatalogCache.open}. */
export interface CatalogCacheOptions {
  /** Receives `catalog-cache-ignored` and `catalog-cache-write-failed`. */
  readonly emit: Emit;
  /** The clock of `storedAt`. @default Date.now */
  readonly now?: () => number;
  /** How long after a `record` or `forget` the file is written (changes coalesce). @default 1000 */
  readonly writeDelayMs?: number;
  /** Largest file read, and written (the oldest entries are dropped to fit). @default 67108864 (64 MiB) */
  readonly maxBytes?: number;
  /** Most entries kept (the oldest `storedAt` are dropped first). @default 256 */
  readonly maxEntries?: number;
  /** How long a write waits for another process's lock on the file. @default 5000 */
  readonly lockTimeoutMs?: number;
}

/** What {@link CatalogCache.lookup} rebuilds a catalog under. */
export interface CatalogRestoreOptions {
  /** The policy epoch in force now (the stored one is not kept). */
  readonly policyEpoch: number;
  /** Schema validation options, as for a live listing. */
  readonly validation?: Partial<ValidationOptions>;
  /** The runtime's shared validator cache. */
  readonly validatorCache?: SchemaValidatorCache;
}

/** The default size cap of the file: 64 MiB. */
export const MAX_CACHE_BYTES = 64 * 1024 * 1024;
/** The default cap on entries. */
export const MAX_CACHE_ENTRIES = 256;

/** A pending change: a recorded entry, or a `forget` at a time. */
type Pending = { readonly entry: StoredEntry } | { readonly forgottenAt: number };

/**
 * The catalog cache of one process over one file. `lookup` reads memory only; `record` and
 * `forget` change memory at once and schedule one coalesced write (an unref'd timer, so it never
 * keeps the process alive); `flush` writes now; `close` flushes and leaves no timer or handle.
 */
export class CatalogCache {
  /** The absolute path of the file. */
  readonly path: string;
  readonly #emit: Emit;
  readonly #now: () => number;
  readonly #writeDelayMs: number;
  readonly #maxBytes: number;
  readonly #maxEntries: number;
  readonly #lockTimeoutMs: number;
  /** Entries by id: the file as last read or written, plus this process's changes. */
  readonly #entries = new Map<string, StoredEntry>();
  /** Changes not yet written, by id. */
  readonly #pending = new Map<string, Pending>();
  /** The file as last read or written by this instance: unchanged means no re-read. */
  #signature: FileSignature | undefined;
  #timer: NodeJS.Timeout | undefined;
  #writing: Promise<void> = Promise.resolve();
  #closing: Promise<void> | undefined;

  private constructor(path: string, options: CatalogCacheOptions) {
    this.path = path;
    this.#emit = options.emit;
    this.#now = options.now ?? Date.now;
    this.#writeDelayMs = options.writeDelayMs ?? 1000;
    this.#maxBytes = options.maxBytes ?? MAX_CACHE_BYTES;
    this.#maxEntries = options.maxEntries ?? MAX_CACHE_ENTRIES;
    this.#lockTimeoutMs = options.lockTimeoutMs ?? 5000;
  }

  /**
   * Opens the cache at `path` (relative to the working directory), reading and parsing the file
   * once. A missing file is an empty cache; a file that cannot be used (unreadable, over the size
   * cap, not complete JSON, another format, a newer version) is an empty cache and a
   * `catalog-cache-ignored` event, as is each malformed entry (left out).
   *
   * @throws ConfigError `INVALID_CONFIG` only when `path` cannot name a file: empty, a directory, or
   *   below a file.
   */
  static async open(path: string, options: CatalogCacheOptions): Promise<CatalogCache> {
    if (typeof path !== 'string' || path === '') {
      throw new ConfigError(
        ErrorCode.INVALID_CONFIG,
        'The catalog cache path is empty; give "cache": { "path": "catalogs.json" } or "cache": false.',
        { detail: { path: '$.cache.path', reason: 'empty' } },
      );
    }
    const cache = new CatalogCache(resolve(path), options);
    const found = await readCacheFile(cache.path, cache.#maxBytes);
    switch (found.kind) {
      case 'directory':
        throw new ConfigError(
          ErrorCode.INVALID_CONFIG,
          `The catalog cache path ${cache.path} is a directory; give a file path (for example ${join(cache.path, 'catalogs.json')}) or "cache": false.`,
          { detail: { path: '$.cache.path', file: cache.path, reason: 'directory' } },
        );
      case 'not-a-folder':
        throw new ConfigError(
          ErrorCode.INVALID_CONFIG,
          `The catalog cache path ${cache.path} is below a file, not a folder; give a file path in a folder, or "cache": false.`,
          { detail: { path: '$.cache.path', file: cache.path, reason: 'not-a-folder' } },
        );
      case 'missing':
        break;
      case 'ignored':
        cache.#signature = found.signature;
        cache.#ignored(found.reason, `${found.why}`);
        break;
      case 'entries':
        cache.#signature = found.signature;
        if (found.malformed > 0) {
          cache.#ignored(
            'malformed-entry',
            `${found.malformed} entr${found.malformed === 1 ? 'y is' : 'ies are'} malformed`,
          );
        }
        for (const entry of found.entries) cache.#entries.set(idOf(entry.key), entry);
        break;
    }
    return cache;
  }

  /**
   * The catalog stored under `key`, rebuilt with `createCatalogSnapshot` (its stored generation,
   * the current policy epoch and validation options) and checked: its page root and every tool's
   * digest must equal the stored ones, its identity name and audience the key's. An entry that
   * fails is dropped (from the file too) with a `catalog-cache-ignored` event.
   */
  lookup(key: CatalogCacheKey, restore: CatalogRestoreOptions): CachedCatalog | undefined {
    const id = idOf(storedKeyOf(key));
    const entry = this.#entries.get(id);
    if (entry === undefined) return undefined;
    const c = entry.catalog;
    let snapshot: CatalogSnapshot;
    try {
      snapshot = restoreSnapshot(c, key, restore);
    } catch (error) {
      this.#drop(id, key.server, 'restore-failed', restoreFailure(error));
      return undefined;
    }
    const mismatch = mismatchOf(snapshot, c, key);
    if (mismatch !== undefined) {
      this.#drop(id, key.server, 'digest-mismatch', mismatch);
      return undefined;
    }
    return Object.freeze({ snapshot, storedAt: entry.storedAt });
  }

  /**
   * Stores `snapshot` under `key` in memory now; the file is written after `writeDelayMs`.
   *
   * @throws ConfigError `INVALID_OPTIONS` when the snapshot is not the key's: its name, audience, or
   *   transport digest (as `identityOf` derives it from the identity key and principal) differs.
   */
  record(key: CatalogCacheKey, snapshot: CatalogSnapshot): void {
    if (this.#closing !== undefined) return;
    const transport = transportDigestOf(key);
    if (
      snapshot.identity.name !== key.server ||
      snapshot.identity.transportDigest !== transport ||
      snapshot.audience !== key.audience
    ) {
      throw new ConfigError(
        ErrorCode.INVALID_OPTIONS,
        `CatalogCache.record: the catalog of server "${snapshot.identity.name}" is not the one of the key (server "${key.server}", its connection identity and audience); nothing was stored.`,
        { detail: { server: key.server, option: 'key' } },
      );
    }
    const stored = storedKeyOf(key);
    const entry: StoredEntry = { key: stored, storedAt: this.#now(), catalog: storedOf(snapshot) };
    const id = idOf(stored);
    this.#entries.set(id, entry);
    this.#pending.set(id, { entry });
    this.#schedule();
  }

  /** Removes the entry of `key`, from memory now and from the file with the next write. */
  forget(key: CatalogCacheKey): void {
    if (this.#closing !== undefined) return;
    const id = idOf(storedKeyOf(key));
    this.#entries.delete(id);
    this.#pending.set(id, { forgottenAt: this.#now() });
    this.#schedule();
  }

  /**
   * Writes the pending changes now, merged with what other processes wrote (per key the newer
   * `storedAt` wins), atomically. Never rejects: a failure is a `catalog-cache-write-failed` event
   * and the changes stay pending for the next write.
   */
  flush(): Promise<void> {
    this.#clearTimer();
    this.#writing = this.#writing.then(() => this.#write());
    return this.#writing;
  }

  /** Flushes, then leaves no timer and no handle; later `record`/`forget` are ignored. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= this.flush().then(() => this.#clearTimer());
    return this.#closing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  #schedule(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.flush();
    }, this.#writeDelayMs);
    this.#timer.unref();
  }

  #clearTimer(): void {
    if (this.#timer === undefined) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  async #write(): Promise<void> {
    if (this.#pending.size === 0) return;
    const pending = new Map(this.#pending);
    try {
      await ensureCacheDirectory(this.path);
      await withFileLock(`${this.path}.lock`, () => this.#mergeAndWrite(), {
        maxWaitMs: this.#lockTimeoutMs,
      });
      for (const [id, change] of pending) {
        if (this.#pending.get(id) === change) this.#pending.delete(id);
      }
    } catch (error) {
      const reason = error instanceof FileLockTimeout ? 'lock-timeout' : errnoOf(error);
      this.#emit({
        type: 'catalog-cache-write-failed',
        path: this.path,
        reason,
        message: `The catalog cache ${this.path} could not be written (${reason}); its entries stay in memory and the next write tries again. Check that its folder belongs to this user and is writable, or set "cache": false.`,
      });
    }
  }

  /** Under the lock: re-read the file if another process changed it, merge, apply, write. */
  async #mergeAndWrite(): Promise<void> {
    // The live pending map: a change made while this write waited is kept, and written now too.
    const pending = this.#pending;
    if (!sameSignature(await signatureAt(this.path), this.#signature)) {
      const found = await readCacheFile(this.path, this.#maxBytes);
      // The file is the truth for every key this process did not change.
      const disk = new Map<string, StoredEntry>();
      if (found.kind === 'entries') for (const e of found.entries) disk.set(idOf(e.key), e);
      for (const id of [...this.#entries.keys()]) {
        if (!disk.has(id) && !pending.has(id)) this.#entries.delete(id);
      }
      for (const [id, theirs] of disk) {
        const change = pending.get(id);
        const ours = this.#entries.get(id);
        if (change !== undefined && 'forgottenAt' in change) {
          if (theirs.storedAt > change.forgottenAt) this.#entries.set(id, theirs);
        } else if (ours === undefined || theirs.storedAt > ours.storedAt) {
          this.#entries.set(id, theirs);
        }
      }
    }
    const kept = [...this.#entries.entries()].sort(([, a], [, b]) => b.storedAt - a.storedAt);
    const texts: string[] = [];
    // Header, brackets and commas: well under 100 bytes.
    let bytes = 100;
    for (const [id, entry] of kept) {
      const text = JSON.stringify(entry);
      const size = Buffer.byteLength(text);
      if (texts.length >= this.#maxEntries || bytes + size + 1 > this.#maxBytes) {
        this.#entries.delete(id);
        continue;
      }
      texts.push(text);
      bytes += size + 1;
    }
    this.#signature = await writeCacheFile(this.path, texts);
  }

  #drop(id: string, server: string, reason: CatalogCacheIgnoredReason, why: string): void {
    this.#ignored(reason, why, server);
    this.#entries.delete(id);
    if (this.#closing !== undefined) return;
    this.#pending.set(id, { forgottenAt: this.#now() });
    this.#schedule();
  }

  #ignored(reason: CatalogCacheIgnoredReason, why: string, server?: string): void {
    const what =
      server === undefined
        ? `The catalog cache ${this.path} was ignored: ${why}. stepbind starts without it and rewrites it on the next catalog it records.`
        : `The cached catalog of server "${server}" in ${this.path} was ignored: ${why}. The server is listed live and the entry is replaced.`;
    this.#emit({
      type: 'catalog-cache-ignored',
      path: this.path,
      reason,
      ...(server === undefined ? {} : { server }),
      message: what,
    });
  }
}

/**
 * The key of server `name`'s catalogs under `config` for `principal` (`''` without OAuth): the
 * identity key (`identityKeyOf`), the audience and the tool filter's digest.
 */
export function catalogCacheKeyOf(
  name: string,
  config: ServerConfig,
  principal: string,
): CatalogCacheKey {
  return {
    server: name,
    identityKey: identityKeyOf(config),
    audience: config.audience,
    principal,
    toolFilter: toolFilterDigest(config.tools),
  };
}

/** The canonical digest of a `tools` filter; `''` when it keeps every tool. */
export function toolFilterDigest(filter: ToolFilterConfig | undefined): string {
  if (filter === undefined || (filter.allow === undefined && filter.deny === undefined)) return '';
  return digestOf({ allow: filter.allow ?? null, deny: filter.deny ?? null });
}

/**
 * Where the CLI keeps its catalog cache: `$XDG_CACHE_HOME/stepbind/catalogs.json`, else
 * `~/.cache/stepbind/catalogs.json` (an empty variable is ignored).
 */
export function defaultCachePath(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env['XDG_CACHE_HOME'];
  if (xdg !== undefined && xdg !== '') return join(xdg, 'stepbind', 'catalogs.json');
  const home = env['HOME'];
  return join(
    home === undefined || home === '' ? homedir() : home,
    '.cache',
    'stepbind',
    'catalogs.json',
  );
}

const hashed = (text: string): string => `sha256:${sha256Hex(text)}`;

/** The stored form of a key: the identity key and the principal hashed, nothing else secret. */
function storedKeyOf(key: CatalogCacheKey): StoredKey {
  return {
    server: key.server,
    identity: hashed(key.identityKey),
    audience: key.audience,
    principal: key.principal === '' ? '' : hashed(key.principal),
    toolFilter: key.toolFilter,
  };
}

/** One id per stored key: every field takes part, so no two keys share an entry. */
function idOf(key: StoredKey): string {
  return sha256Hex(
    canonicalJson({
      server: key.server,
      identity: key.identity,
      audience: key.audience,
      principal: key.principal,
      toolFilter: key.toolFilter,
    }),
  );
}

/** What is stored of a snapshot (not its policy epoch or state: restored under the current ones). */
function storedOf(snapshot: CatalogSnapshot): StoredCatalog {
  const { identity } = snapshot;
  return {
    identity: {
      name: identity.name,
      ...(identity.serverInfo === undefined ? {} : { serverInfo: identity.serverInfo }),
      ...(identity.protocolVersion === undefined
        ? {}
        : { protocolVersion: identity.protocolVersion }),
    },
    audience: snapshot.audience,
    generation: snapshot.generation,
    sourceRevision: snapshot.sourceRevision ?? null,
    proof: snapshot.sourceRevision === undefined ? 'unversioned' : 'proven',
    discoveryStartedAt: snapshot.discoveryStartedAt,
    expiresAt: snapshot.expiresAt,
    pageSizes: snapshot.pageSizes,
    pageRoot: snapshot.pageRoot,
    tools: snapshot.tools.map((t) => ({ digest: t.descriptorDigest, raw: t.raw })),
  };
}

/**
 * The transport digest of the identity of `key`'s catalogs, as `identityOf` derives it: the
 * identity key itself, or with a principal the digest of both.
 */
function transportDigestOf(key: CatalogCacheKey): string {
  return key.principal === ''
    ? key.identityKey
    : computeTransportDigest({ key: key.identityKey, principal: key.principal });
}

/**
 * The stored catalog rebuilt as a listing of the same pages would be, its transport digest
 * derived from `key` (the file never holds it). @throws CatalogError
 */
function restoreSnapshot(
  c: StoredCatalog,
  key: CatalogCacheKey,
  restore: CatalogRestoreOptions,
): CatalogSnapshot {
  const pages: unknown[][] = [];
  let at = 0;
  for (const size of c.pageSizes) {
    pages.push(c.tools.slice(at, at + size).map((t) => t.raw));
    at += size;
  }
  return createCatalogSnapshot({
    identity: {
      ...(c.identity as Omit<CatalogSnapshot['identity'], 'transportDigest'>),
      transportDigest: transportDigestOf(key),
    },
    audience: c.audience,
    policyEpoch: restore.policyEpoch,
    generation: c.generation,
    pages,
    ...(c.sourceRevision === null ? {} : { sourceRevision: c.sourceRevision }),
    revisionProof: c.proof,
    discoveryStartedAt: c.discoveryStartedAt,
    ttlMs: c.expiresAt - c.discoveryStartedAt,
    ...(restore.validation === undefined ? {} : { validation: restore.validation }),
    ...(restore.validatorCache === undefined ? {} : { validatorCache: restore.validatorCache }),
  });
}

/** Why a rebuilt snapshot is not the stored one (or not for `key`), or undefined when it is. */
function mismatchOf(
  snapshot: CatalogSnapshot,
  c: StoredCatalog,
  key: CatalogCacheKey,
): string | undefined {
  if (c.identity.name !== key.server || c.audience !== key.audience) {
    return 'its server name or audience is not the one it is stored under';
  }
  if (snapshot.pageRoot !== c.pageRoot) return 'its page root differs from the stored one';
  const changed = snapshot.tools.findIndex((t, i) => t.descriptorDigest !== c.tools[i]?.digest);
  if (changed !== -1) {
    return `the digest of tool #${changed + 1} differs from the stored one`;
  }
  return undefined;
}

function restoreFailure(error: unknown): string {
  const code = (error as { code?: unknown } | undefined)?.code;
  return `it no longer validates (${typeof code === 'string' ? code : 'error'})`;
}
