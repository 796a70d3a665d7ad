/**
 * How the CLI reports errors: `CODE: message`, or `{ ok: false, error }` with `--json`. (Parsing is
 * in `grammar.ts`.)
 *
 * @packageDocumentation
 */
import { StepbindError } from '@stepbind/binding/internal';
import type { CliIo } from './io.js';

/** `CODE: message` for a stepbind error, the message otherwise. */
export function describeError(error: unknown): string {
  if (error instanceof StepbindError) return `${error.code}: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}

/** Writes an error: `{ ok: false, error }` on stdout with `--json`, `stepbind: CODE: message` else. */
export function printError(error: unknown, json: boolean, io: CliIo): void {
  if (json) {
    const body =
      error instanceof StepbindError
        ? error.toJSON()
        : { code: 'INTERNAL', message: error instanceof Error ? error.message : String(error) };
    io.stdout(`${JSON.stringify({ ok: false, error: body })}\n`);
  } else {
    io.stderr(`stepbind: ${describeError(error)}\n`);
  }
}
