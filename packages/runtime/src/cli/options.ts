/**
 * Argument parsing shared by the `tools` and `call` commands: `--name value`, `--name=value` and
 * boolean flags, plus positionals. Parsing never throws; problems come back as a message.
 *
 * @packageDocumentation
 */
import { StepbindError } from '@stepbind/binding/internal';
import type { RuntimeConfig } from '../config.js';
import { loadConfigFile } from './config-file.js';
import type { CliIo } from './io.js';

/** Parsed arguments: option values, flags set, positionals in order. */
export interface ParsedArgs {
  readonly values: ReadonlyMap<string, string>;
  readonly flags: ReadonlySet<string>;
  readonly positionals: readonly string[];
}

/** Parses `args` against the option names that take a value and the boolean flags. */
export function parseArgs(
  args: readonly string[],
  spec: { readonly values: readonly string[]; readonly flags: readonly string[] },
): ParsedArgs | { readonly problem: string } {
  const values = new Map<string, string>();
  const flags = new Set<string>();
  const positionals: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (!arg.startsWith('--')) {
      positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq === -1 ? undefined : eq);
    if (spec.flags.includes(name) && eq === -1) {
      flags.add(name);
    } else if (spec.values.includes(name)) {
      const value = eq === -1 ? args[++i] : arg.slice(eq + 1);
      if (value === undefined) return { problem: `--${name} needs a value` };
      values.set(name, value);
    } else {
      return { problem: `unknown argument "${arg}"` };
    }
  }
  return { values, flags, positionals };
}

/** Loads `--config`, writing the error and returning `undefined` when it is missing or bad. */
export async function configFrom(
  parsed: ParsedArgs,
  command: string,
  usage: string,
  io: CliIo,
): Promise<RuntimeConfig | undefined> {
  const path = parsed.values.get('config');
  if (path === undefined || path === '') {
    io.stderr(`stepbind ${command}: --config FILE is required\n\n${usage}`);
    return undefined;
  }
  try {
    return await loadConfigFile(path);
  } catch (error) {
    io.stderr(`stepbind: ${describeError(error)}\n`);
    return undefined;
  }
}

/** `CODE: message` for a stepbind error, the message otherwise. */
export function describeError(error: unknown): string {
  if (error instanceof StepbindError) return `${error.code}: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}
