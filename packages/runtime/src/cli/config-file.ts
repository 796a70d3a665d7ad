/**
 * The configuration file as the CLI reads it: bounded in size, JSON errors located without
 * quoting the text (it may hold secrets), a relative journal path resolved against the file.
 */
import { open } from 'node:fs/promises';
import { dirname, isAbsolute, resolve } from 'node:path';
import { ErrorCode, RuntimeError, StepbindError } from '@stepbind/binding/internal';
import { parseConfig, type RuntimeConfig } from '../config.js';

/** The largest configuration file {@link loadConfigFile} reads: 1 MiB. */
export const MAX_CONFIG_BYTES = 1024 * 1024;

/**
 * Reads and validates a configuration file of at most {@link MAX_CONFIG_BYTES} (read with a bound,
 * so `/dev/zero` or a huge file fails fast).
 *
 * @throws RuntimeError `INVALID_CONFIG` with the file name in the message.
 */
export async function loadConfigFile(path: string): Promise<RuntimeConfig> {
  const absolute = resolve(path);
  let text: string;
  try {
    text = await readBounded(absolute, MAX_CONFIG_BYTES);
  } catch (error) {
    if (error instanceof StepbindError) throw error;
    throw new RuntimeError(
      ErrorCode.INVALID_CONFIG,
      `Cannot read configuration file ${absolute}: ${error instanceof Error ? error.message : String(error)}`,
      {
        detail: { path: absolute },
        cause: error,
      },
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    // V8 quotes the text around the error, which may be a secret: report only where it is.
    const at = position(text, error);
    throw new RuntimeError(
      ErrorCode.INVALID_CONFIG,
      `Configuration file ${absolute} is not valid JSON${at === undefined ? '' : ` (line ${at.line}, column ${at.column})`}.`,
      { detail: { path: absolute, ...(at === undefined ? {} : at) } },
    );
  }
  try {
    const config = parseConfig(json);
    // A relative journal path is relative to the configuration file, wherever the process runs.
    if (config.journal === undefined || isAbsolute(config.journal.path)) return config;
    return Object.freeze({
      ...config,
      journal: Object.freeze({
        ...config.journal,
        path: resolve(dirname(absolute), config.journal.path),
      }),
    });
  } catch (error) {
    if (error instanceof StepbindError) {
      throw new RuntimeError(error.code, `${absolute}: ${error.message}`, {
        detail: error.detail,
        cause: error,
      });
    }
    throw error;
  }
}

async function readBounded(path: string, limit: number): Promise<string> {
  const handle = await open(path, 'r');
  try {
    const buffer = Buffer.alloc(limit + 1);
    let length = 0;
    while (length <= limit) {
      const { bytesRead } = await handle.read(buffer, length, limit + 1 - length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    if (length > limit) {
      throw new RuntimeError(
        ErrorCode.INVALID_CONFIG,
        `Configuration file ${path} is larger than ${limit} bytes; a configuration this large is not a stepbind configuration. Check the --config path.`,
        { detail: { path, limit } },
      );
    }
    return buffer.toString('utf8', 0, length);
  } finally {
    await handle.close();
  }
}

/** Line and column of a `JSON.parse` error, from the position V8 puts in its message. */
function position(text: string, error: unknown): { line: number; column: number } | undefined {
  const match = /position (\d+)/.exec(error instanceof Error ? error.message : '');
  if (match?.[1] === undefined) return undefined;
  const offset = Math.min(Number(match[1]), text.length);
  const before = text.slice(0, offset).split('\n');
  return { line: before.length, column: (before.at(-1)?.length ?? 0) + 1 };
}
