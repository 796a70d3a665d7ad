import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallContext, JournalRecord, ReceiptBody } from '@stepbind/binding';

/** A temporary directory removed (with everything in it) on dispose. */
export function tempDir(label: string): { readonly path: string } & Disposable {
  const path = mkdtempSync(join(tmpdir(), `stepbind-${label}-`));
  return { path, [Symbol.dispose]: () => rmSync(path, { recursive: true, force: true }) };
}

/** True when this process may mount a tmpfs (root on Linux): the full-disk and read-only tests need one. */
export const canMount: boolean = (() => {
  if (process.platform !== 'linux' || process.getuid?.() !== 0) return false;
  const dir = mkdtempSync(join(tmpdir(), 'stepbind-mount-probe-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', dir], { stdio: 'ignore' });
    execFileSync('umount', [dir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
})();

/** A small tmpfs of `sizeKiB` mounted on a fresh directory; unmounted and removed on dispose. */
export function smallDisk(
  sizeKiB: number,
): { readonly path: string; remount(mode: 'ro' | 'rw'): void } & Disposable {
  const path = mkdtempSync(join(tmpdir(), 'stepbind-disk-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeKiB}k`, 'tmpfs', path]);
  return {
    path,
    remount: (mode) => execFileSync('mount', ['-o', `remount,${mode}`, path]),
    [Symbol.dispose]: () => {
      execFileSync('umount', [path]);
      rmSync(path, { recursive: true, force: true });
    },
  };
}

export function context(tool = 'write_doc'): CallContext {
  return {
    stepId: 'step-1',
    server: 's',
    tool,
    modelName: `s__${tool}`,
    descriptorDigest: `sha256:${tool}`,
    effectClass: 'write',
    generation: 1,
    revision: 1,
    policyEpoch: 0,
    audience: 'default',
    catalogState: 'UNVERSIONED_OBSERVATION',
  };
}

export function record(key: string, overrides: Partial<JournalRecord> = {}): JournalRecord {
  return {
    key,
    state: 'INTENT',
    version: 1,
    attempt: 1,
    owner: 'test:1:owner',
    context: context(),
    argsDigest: 'sha256:args',
    createdAt: 1_000,
    updatedAt: 1_000,
    leaseExpiresAt: 2_000,
    expiresAt: null,
    outcome: null,
    error: null,
    resolution: null,
    ...overrides,
  };
}

export function receipt(i: number, key: string | null = `k${i}`): ReceiptBody {
  return {
    ...context(),
    at: 1_000 + i,
    source: 'run',
    key,
    attempt: key === null ? null : 1,
    outcome: 'ok',
    delivery: 'sent',
    replayed: false,
    argsDigest: `sha256:${i}`,
    resultDigest: null,
  };
}
