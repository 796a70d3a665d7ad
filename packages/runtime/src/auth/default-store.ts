/**
 * The token store a runtime uses when the application gives none and there is no fleet store: a
 * {@link FileTokenStore} at `tokens.json` under the user's state directory.
 */
import { homedir } from 'node:os';
import { join } from 'node:path';

import { FileTokenStore } from './file-token-store.js';

/**
 * The directory stepbind keeps per-user state in: `$STEPBIND_STATE_DIR`, else
 * `$XDG_STATE_HOME/stepbind`, else `~/.local/state/stepbind` (empty variables are ignored).
 */
export function stateDirectory(env: NodeJS.ProcessEnv = process.env): string {
  const explicit = env['STEPBIND_STATE_DIR'];
  if (explicit !== undefined && explicit !== '') return explicit;
  const xdg = env['XDG_STATE_HOME'];
  if (xdg !== undefined && xdg !== '') return join(xdg, 'stepbind');
  return join(homedir(), '.local', 'state', 'stepbind');
}

/**
 * The per-user token store: `tokens.json` in {@link stateDirectory} (file and directory created
 * on first write, modes 0600 and 0700).
 */
export function openDefaultTokenStore(env: NodeJS.ProcessEnv = process.env): FileTokenStore {
  return new FileTokenStore({ path: join(stateDirectory(env), 'tokens.json') });
}
