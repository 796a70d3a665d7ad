import type { TokenStore } from '../auth/types.js';

/** Where the CLI writes, and how it is cancelled. */
export interface CliIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly signal?: AbortSignal;
  /**
   * Live progress (one line, replaced by the next; `""` clears it). The CLI gives it when stderr is
   * a terminal. @default no progress
   */
  readonly progress?: (line: string) => void;
  /**
   * Where `login`, `logout` and `auth status` keep tokens (a test's store, which stays open: the CLI
   * closes only a store it opened). @default openDefaultTokenStore()
   */
  readonly tokenStore?: TokenStore;
  /** Opens the login URL (a test drives the browser's part). @default the system browser, if any */
  readonly openBrowser?: (url: string) => void;
}
