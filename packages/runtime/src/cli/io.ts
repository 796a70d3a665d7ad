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
}
