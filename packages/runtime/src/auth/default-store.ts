/**
 * PLACEHOLDER until the token-store slice lands (this file is replaced whole): the token store a
 * runtime uses when the application gives none and there is no fleet store.
 */
import { MemoryTokenStore } from './memory-token-store.js';
import type { TokenStore } from './types.js';

/** The per-user token store (a file under the user's state directory once built). */
export function openDefaultTokenStore(): TokenStore {
  return new MemoryTokenStore();
}
