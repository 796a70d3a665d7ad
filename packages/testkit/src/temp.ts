import { mkdtempSync, rmSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readAuditTrail } from './audit.js';
import type { AuditEntry } from './types.js';

/**
 * A fresh directory in `os.tmpdir()` that a test owns: `await using dir = tempDir('cli')` removes
 * it, and everything in it, when the scope ends.
 */
export interface TempDir extends AsyncDisposable, Disposable {
  /** The directory, e.g. `/tmp/stepbind-cli-Ab12Cd`. It exists until {@link dispose}. */
  readonly path: string;
  /** A path inside the directory (nothing is created). */
  file(name: string): string;
  /** Removes the directory and its contents. Idempotent; `[Symbol.asyncDispose]` calls it. */
  dispose(): Promise<void>;
}

/** A request audit trail in a directory of its own, removed on dispose. */
export interface TempAudit extends AsyncDisposable, Disposable {
  /** The trail file to give a scripted server as `auditPath` (created by the server). */
  readonly path: string;
  /** The trail's entries so far (see {@link readAuditTrail}). */
  read(): Promise<AuditEntry[]>;
  /** Removes the trail and its directory. Idempotent; `[Symbol.asyncDispose]` calls it. */
  dispose(): Promise<void>;
}

const safeLabel = (label: string): string => label.replace(/[^A-Za-z0-9_-]+/g, '-').slice(0, 60);

/**
 * Creates a {@link TempDir} named `stepbind-<label>-XXXXXX` (`label` reduced to `[A-Za-z0-9_-]`).
 *
 * @throws the file system's error when the temp directory is not writable.
 */
export function tempDir(label = 'tmp'): TempDir {
  const path = mkdtempSync(join(tmpdir(), `stepbind-${safeLabel(label)}-`));
  const dispose = (): Promise<void> => rm(path, { recursive: true, force: true });
  return {
    path,
    file: (name) => join(path, name),
    dispose,
    [Symbol.asyncDispose]: dispose,
    [Symbol.dispose]: () => rmSync(path, { recursive: true, force: true }),
  };
}

/**
 * Creates a {@link TempAudit}: `trail.jsonl` in a fresh `stepbind-audit-<label>-XXXXXX` directory.
 * Prefer it to {@link tempAuditPath}, whose file the caller must remove.
 *
 * @example
 * await using audit = tempAudit('paging');
 * const params = stdioServerParams({ scenario: 'normal', auditPath: audit.path });
 */
export function tempAudit(label = 'audit'): TempAudit {
  const dir = tempDir(`audit-${label}`);
  const path = dir.file('trail.jsonl');
  return {
    path,
    read: () => readAuditTrail(path),
    dispose: () => dir.dispose(),
    [Symbol.asyncDispose]: () => dir.dispose(),
    [Symbol.dispose]: () => dir[Symbol.dispose](),
  };
}
