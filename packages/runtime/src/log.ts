/**
 * Debug logging in the `DEBUG` convention of the `debug` package: `DEBUG=stepbind:*` (or a list such
 * as `stepbind:discovery,stepbind:call`, `-stepbind:events` to exclude) writes lines to stderr as
 * `stepbind:discovery server "files": page 3, 50 tools +12ms`. Off unless `DEBUG` names it; the
 * check is done once per namespace, so a disabled logger costs one boolean test.
 */
import { globMatch } from './tool-filter.js';

/** A namespaced logger; `enabled` says whether calling it prints anything. */
export interface DebugLogger {
  (message: string): void;
  readonly enabled: boolean;
  readonly namespace: string;
}

/** Where enabled loggers write, and which `DEBUG` value they obey (for tests). */
export interface DebugSink {
  readonly debug?: string | undefined;
  readonly write?: (line: string) => void;
}

let sink: Required<Pick<DebugSink, 'write'>> & { debug: string | undefined } = {
  debug: process.env['DEBUG'],
  write: (line) => process.stderr.write(line),
};
const loggers = new Map<string, { enabled: boolean; last: number }>();

/** Whether `namespace` is enabled by a `DEBUG` value (comma or space separated globs, `-` excludes). */
export function debugEnabled(debug: string | undefined, namespace: string): boolean {
  if (debug === undefined || debug.trim() === '') return false;
  let on = false;
  for (const pattern of debug.split(/[\s,]+/).filter((p) => p !== '')) {
    if (pattern.startsWith('-')) {
      if (globMatch(pattern.slice(1), namespace)) return false;
    } else if (globMatch(pattern, namespace)) {
      on = true;
    }
  }
  return on;
}

/** Replaces where debug lines go and which `DEBUG` value applies. Returns a function restoring the old. */
export function setDebugSink(next: DebugSink): () => void {
  const previous = sink;
  sink = {
    debug: 'debug' in next ? next.debug : previous.debug,
    write: next.write ?? previous.write,
  };
  loggers.clear();
  return () => {
    sink = previous;
    loggers.clear();
  };
}

/** The logger of `namespace` (for example `stepbind:discovery`). */
export function createDebug(namespace: string): DebugLogger {
  const state = (): { enabled: boolean; last: number } => {
    let s = loggers.get(namespace);
    if (s === undefined) {
      s = { enabled: debugEnabled(sink.debug, namespace), last: 0 };
      loggers.set(namespace, s);
    }
    return s;
  };
  const log = ((message: string): void => {
    const s = state();
    if (!s.enabled) return;
    const now = Date.now();
    const delta = s.last === 0 ? 0 : now - s.last;
    s.last = now;
    sink.write(`${namespace} ${message} +${delta}ms\n`);
  }) as DebugLogger;
  Object.defineProperty(log, 'enabled', { get: () => state().enabled });
  Object.defineProperty(log, 'namespace', { value: namespace });
  return log;
}
