import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

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
