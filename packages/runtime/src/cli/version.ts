import { readFile } from 'node:fs/promises';

/** The version of `@stepbind/runtime`, read from its package.json (next to `dist/` and `src/`). */
export async function packageVersion(): Promise<string> {
  const text = await readFile(new URL('../../package.json', import.meta.url), 'utf8');
  const { version } = JSON.parse(text) as { version?: unknown };
  if (typeof version !== 'string')
    throw new Error('package.json of @stepbind/runtime has no version');
  return version;
}
