/**
 * The last step of an atomic file replace (temp file, fsync, rename): the folder's own fsync, so
 * the rename survives a crash. Shared by the token store and the catalog cache.
 *
 * @packageDocumentation
 */
import { open } from 'node:fs/promises';

/** Fsyncs folder `dir`; a file system that refuses to open a folder is harmless, and ignored. */
export async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r').catch(() => undefined);
  if (handle === undefined) return;
  try {
    await handle.sync().catch(() => undefined);
  } finally {
    await handle.close();
  }
}
