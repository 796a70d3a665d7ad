/**
 * The catalog cache file (DESIGN §19.1): its versioned JSON format, a bounded read that classifies
 * every way a file can be unusable (never a throw for content), and the atomic replace (a 0600 temp
 * file in the same folder, fsync, rename, fsync of the folder). `catalog-cache.ts` owns the merge.
 *
 * @packageDocumentation
 */
import { randomUUID } from 'node:crypto';
import { chmod, mkdir, open, rename, stat, unlink } from 'node:fs/promises';
import { syncDirectory } from '../sync-directory.js';
import { dirname } from 'node:path';
import type { CatalogCacheIgnoredReason } from '../events.js';

/** The `format` tag of a catalog cache file. */
export const CACHE_FORMAT = 'stepbind.catalogCache';
/** The format version this build writes (and the newest it reads). */
export const CACHE_VERSION = 1;

/** The hashed, public key of one entry as stored (no secret: see `CatalogCacheKey`). */
export interface StoredKey {
  readonly server: string;
  /** `sha256:` of the connection identity key. */
  readonly identity: string;
  readonly audience: string;
  /** `sha256:` of the principal, or `''` without one. */
  readonly principal: string;
  /** The tool filter's canonical digest, or `''` for none. */
  readonly toolFilter: string;
}

/** One stored catalog: what `createCatalogSnapshot` needs to rebuild it, and the digests to check. */
export interface StoredCatalog {
  /** The identity without its transport digest: that one is derived from the lookup's key. */
  readonly identity: {
    readonly name: string;
    readonly serverInfo?: Readonly<Record<string, unknown>>;
    readonly protocolVersion?: string;
  };
  readonly audience: string;
  readonly generation: number;
  readonly sourceRevision: string | null;
  readonly proof: 'proven' | 'unversioned';
  readonly discoveryStartedAt: number;
  readonly expiresAt: number;
  readonly pageSizes: readonly number[];
  readonly pageRoot: string;
  /** Every tool in page order: its descriptor digest and its raw definition as listed. */
  readonly tools: readonly { readonly digest: string; readonly raw: unknown }[];
}

/** One entry of the file. */
export interface StoredEntry {
  readonly key: StoredKey;
  /** Epoch ms of the `record` that stored it; per key the newer wins a merge. */
  readonly storedAt: number;
  readonly catalog: StoredCatalog;
}

/** Identity of a file on disk: unchanged means its content is the one last read or written. */
export interface FileSignature {
  readonly dev: number;
  readonly ino: number;
  readonly size: number;
  readonly mtimeMs: number;
}

/** What {@link readCacheFile} found. */
export type CacheFileRead =
  | {
      readonly kind: 'entries';
      /** Entries that passed the shape check. */
      readonly entries: readonly StoredEntry[];
      /** How many entries were malformed and left out. */
      readonly malformed: number;
      readonly signature: FileSignature;
    }
  | { readonly kind: 'missing' }
  | {
      readonly kind: 'ignored';
      readonly reason: CatalogCacheIgnoredReason;
      /** Why, in words; names no value of the file. */
      readonly why: string;
      readonly signature?: FileSignature;
    }
  | { readonly kind: 'directory' }
  /** A component of the path's folder is a file: no file can ever be there. */
  | { readonly kind: 'not-a-folder' };

/**
 * Reads and checks the file at `path` with a bound of `maxBytes` (its size is read first, so a
 * huge file costs a `stat`). Never throws: a missing file is `missing`, a directory `directory`, a
 * path below a file `not-a-folder`, everything else that keeps it from being used is `ignored` with the reason.
 */
export async function readCacheFile(path: string, maxBytes: number): Promise<CacheFileRead> {
  let handle;
  try {
    handle = await open(path, 'r');
  } catch (error) {
    const code = errnoOf(error);
    if (code === 'ENOENT') return { kind: 'missing' };
    if (code === 'EISDIR') return { kind: 'directory' };
    if (code === 'ENOTDIR') return { kind: 'not-a-folder' };
    return { kind: 'ignored', reason: 'unreadable', why: `it cannot be opened (${code})` };
  }
  let text: string;
  let signature: FileSignature;
  try {
    const info = await handle.stat();
    if (info.isDirectory()) return { kind: 'directory' };
    signature = signatureOf(info);
    if (info.size > maxBytes) {
      return {
        kind: 'ignored',
        reason: 'too-large',
        why: `it is ${info.size} bytes, over the limit of ${maxBytes}`,
        signature,
      };
    }
    const buffer = Buffer.alloc(info.size);
    let length = 0;
    while (length < info.size) {
      const { bytesRead } = await handle.read(buffer, length, info.size - length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    text = buffer.toString('utf8', 0, length);
  } catch (error) {
    return { kind: 'ignored', reason: 'unreadable', why: `it cannot be read (${errnoOf(error)})` };
  } finally {
    await handle.close();
  }
  return parseCacheText(text, signature);
}

/** The checks of a file's text: JSON, the format tag, the version, then each entry's shape. */
function parseCacheText(text: string, signature: FileSignature): CacheFileRead {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { kind: 'ignored', reason: 'corrupt', why: 'it is not complete JSON', signature };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { kind: 'ignored', reason: 'foreign', why: 'it is not a JSON object', signature };
  }
  const file = value as Record<string, unknown>;
  if (file['format'] !== CACHE_FORMAT) {
    return {
      kind: 'ignored',
      reason: 'foreign',
      why: `its "format" is not "${CACHE_FORMAT}"`,
      signature,
    };
  }
  const version = file['version'];
  if (typeof version !== 'number' || !Number.isInteger(version) || version < 1) {
    return { kind: 'ignored', reason: 'corrupt', why: 'it has no valid "version"', signature };
  }
  if (version > CACHE_VERSION) {
    return {
      kind: 'ignored',
      reason: 'newer-version',
      why: `it was written by a newer stepbind (version ${version}; this one reads up to ${CACHE_VERSION})`,
      signature,
    };
  }
  const list = file['entries'];
  if (!Array.isArray(list)) {
    return { kind: 'ignored', reason: 'corrupt', why: 'its "entries" is not an array', signature };
  }
  const entries = list.filter(isStoredEntry);
  return { kind: 'entries', entries, malformed: list.length - entries.length, signature };
}

/**
 * Writes `entryTexts` (each one entry's JSON) as the whole file, atomically: a temp file in the
 * same folder (mode 0600, created exclusively), fsync, rename over `path`, fsync of the folder.
 * The folder is created (0700) when missing. No temp file survives, whatever fails.
 *
 * @returns the signature of the file written.
 * @throws the file system's error (the caller reports it).
 */
export async function writeCacheFile(
  path: string,
  entryTexts: readonly string[],
): Promise<FileSignature> {
  const temp = `${path}.${process.pid}.${randomUUID()}.tmp`;
  try {
    const handle = await open(temp, 'wx', 0o600);
    try {
      await handle.writeFile(
        `{"format":"${CACHE_FORMAT}","version":${CACHE_VERSION},"entries":[${entryTexts.join(',')}]}\n`,
      );
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, path);
  } catch (error) {
    await unlink(temp).catch(() => undefined);
    throw error;
  }
  await syncDirectory(dirname(path));
  return signatureOf(await stat(path));
}

/** Creates the file's folder (0700, exactly: mkdir's mode is masked by the umask) when missing. */
export async function ensureCacheDirectory(path: string): Promise<void> {
  const dir = dirname(path);
  const created = await mkdir(dir, { recursive: true, mode: 0o700 });
  if (created !== undefined) await chmod(dir, 0o700);
}

/** The signature of `path` now, or undefined when it cannot be stat'ed (missing, unreadable). */
export async function signatureAt(path: string): Promise<FileSignature | undefined> {
  try {
    return signatureOf(await stat(path));
  } catch {
    return undefined;
  }
}

/** Whether two signatures name the same content. */
export function sameSignature(a: FileSignature | undefined, b: FileSignature | undefined): boolean {
  return (
    a !== undefined &&
    b !== undefined &&
    a.dev === b.dev &&
    a.ino === b.ino &&
    a.size === b.size &&
    a.mtimeMs === b.mtimeMs
  );
}

function signatureOf(info: {
  dev: number;
  ino: number;
  size: number;
  mtimeMs: number;
}): FileSignature {
  return { dev: info.dev, ino: info.ino, size: info.size, mtimeMs: info.mtimeMs };
}

/** The `code` of a file system error (`EACCES`, `ELOOP`...), or `error`. */
export function errnoOf(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' ? code : 'error';
}

const isString = (v: unknown): v is string => typeof v === 'string';
const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const isServerInfo = (v: unknown): boolean =>
  isObject(v) && isString(v['name']) && isString(v['version']);

/**
 * The shape of one entry (types only; the catalog itself is checked when it is restored, by
 * validation and its digests).
 */
function isStoredEntry(value: unknown): value is StoredEntry {
  if (!isObject(value) || !isObject(value['key']) || !isObject(value['catalog'])) return false;
  const key = value['key'];
  const c = value['catalog'];
  const identity = c['identity'];
  const tools = c['tools'];
  const sizes = c['pageSizes'];
  return (
    ['server', 'identity', 'audience', 'principal', 'toolFilter'].every((k) => isString(key[k])) &&
    isCount(value['storedAt']) &&
    isObject(identity) &&
    isString(identity['name']) &&
    (identity['serverInfo'] === undefined || isServerInfo(identity['serverInfo'])) &&
    (identity['protocolVersion'] === undefined || isString(identity['protocolVersion'])) &&
    isString(c['audience']) &&
    isCount(c['generation']) &&
    (c['sourceRevision'] === null || isString(c['sourceRevision'])) &&
    (c['proof'] === 'proven') === isString(c['sourceRevision']) &&
    (c['proof'] === 'proven' || c['proof'] === 'unversioned') &&
    isCount(c['discoveryStartedAt']) &&
    isCount(c['expiresAt']) &&
    c['expiresAt'] >= c['discoveryStartedAt'] &&
    Array.isArray(sizes) &&
    sizes.every(isCount) &&
    isString(c['pageRoot']) &&
    Array.isArray(tools) &&
    tools.every((t) => isObject(t) && isString(t['digest']) && isObject(t['raw'])) &&
    sizes.reduce((sum: number, n: number) => sum + n, 0) === tools.length
  );
}
