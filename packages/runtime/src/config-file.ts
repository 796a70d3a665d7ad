/**
 * A configuration file as people write it: bounded in size, JSON with comments and trailing commas
 * (JSONC, read with VS Code's own parser), syntax errors located without quoting the text (it may
 * hold secrets), relative paths and `${workspaceFolder}` resolved against the file.
 */
import { open } from 'node:fs/promises';
import { resolve } from 'node:path';
import { ConfigError, ErrorCode, StepbindError } from '@stepbind/binding/internal';
import { parse, printParseErrorCode, type ParseError } from 'jsonc-parser';
import { parseConfig, type RuntimeConfig } from './config.js';
import type { EnvironmentSource } from './interpolate.js';

/** The largest configuration file {@link loadConfigFile} reads: 1 MiB. */
export const MAX_CONFIG_BYTES = 1024 * 1024;

/** Options of {@link loadConfigFile}. */
export interface LoadConfigFileOptions {
  /** Where `${env:NAME}` / `${NAME}` references are resolved. @default process.env */
  readonly env?: EnvironmentSource;
  /** What `${userHome}` stands for. @default os.homedir() */
  readonly userHome?: string;
}

/** One syntax error of a configuration file: where it is and what kind (never the text there). */
export interface ConfigSyntaxError {
  /** 1-based line. */
  readonly line: number;
  /** 1-based column, in UTF-16 code units. */
  readonly column: number;
  /** jsonc-parser's name of the error, such as `CommaExpected` or `PropertyNameExpected`. */
  readonly kind: string;
}

/** How many syntax errors the message spells out (all are in `detail.syntaxErrors`). */
const SYNTAX_ERRORS_IN_MESSAGE = 3;

/**
 * Reads and validates a configuration file of at most {@link MAX_CONFIG_BYTES} (read with a bound,
 * so `/dev/zero` or a huge file fails fast). The file is JSONC: `//` and `/* *\/` comments and
 * trailing commas are accepted, as VS Code accepts them in `mcp.json`. Relative paths in it
 * (`journal.path`, `cache.path`, a stdio `cwd`, `roots`) resolve against the file's directory, and
 * `${workspaceFolder}` is the folder holding `.vscode` for `.vscode/mcp.json`, else the file's
 * directory (see `parseConfig`'s `file` option).
 *
 * @throws ConfigError `INVALID_CONFIG` naming the file: it cannot be read, it is too large, it is not
 *   JSON (`detail.syntaxErrors` lists `{ line, column, kind }` of each syntax error, the first
 *   also in `detail.line`, `column`, `kind`), or its content is
 *   not a valid configuration (`detail.errors` lists every `{ path, message }`).
 */
export async function loadConfigFile(
  path: string,
  options: LoadConfigFileOptions = {},
): Promise<RuntimeConfig> {
  const absolute = resolve(path);
  let text: string;
  try {
    text = await readBounded(absolute, MAX_CONFIG_BYTES);
  } catch (error) {
    if (error instanceof StepbindError) throw error;
    throw new ConfigError(
      ErrorCode.INVALID_CONFIG,
      `Cannot read configuration file ${absolute}: ${error instanceof Error ? error.message : String(error)}`,
      { detail: { path: absolute }, cause: error },
    );
  }
  const json = parseJsonc(text, absolute);
  try {
    return parseConfig(json, {
      file: absolute,
      ...(options.env === undefined ? {} : { env: options.env }),
      ...(options.userHome === undefined ? {} : { userHome: options.userHome }),
    });
  } catch (error) {
    if (error instanceof StepbindError) {
      throw new ConfigError(error.code, `${absolute}: ${error.message}`, {
        detail: error.detail,
        cause: error,
      });
    }
    throw error;
  }
}

/** The value of a JSONC text, or `INVALID_CONFIG` locating each syntax error without quoting it. */
function parseJsonc(text: string, file: string): unknown {
  const errors: ParseError[] = [];
  // A byte order mark is what some Windows editors write first; it is not content.
  const body = text.startsWith('\uFEFF') ? text.slice(1) : text;
  const value: unknown = parse(body, errors, {
    allowTrailingComma: true,
    disallowComments: false,
    allowEmptyContent: false,
  });
  if (errors.length === 0) return value;
  const located: ConfigSyntaxError[] = errors.map((e) => ({
    ...lineAndColumn(body, e.offset),
    kind: printParseErrorCode(e.error),
  }));
  const shown = located
    .slice(0, SYNTAX_ERRORS_IN_MESSAGE)
    .map((e) => `line ${e.line}, column ${e.column}: ${describeSyntaxError(e.kind)}`)
    .join('; ');
  const more = located.length - SYNTAX_ERRORS_IN_MESSAGE;
  const [first] = located;
  throw new ConfigError(
    ErrorCode.INVALID_CONFIG,
    `Configuration file ${file} is not valid JSON (comments and trailing commas are fine): ${shown}${more > 0 ? `; and ${more} more` : ''}.`,
    { detail: { path: file, ...(first === undefined ? {} : first), syntaxErrors: located } },
  );
}

/** A plain-words reading of jsonc-parser's error names. */
function describeSyntaxError(kind: string): string {
  const words: Readonly<Record<string, string>> = {
    InvalidSymbol: 'unexpected character',
    InvalidNumberFormat: 'invalid number',
    PropertyNameExpected: 'a property name in double quotes was expected',
    ValueExpected: 'a value was expected',
    ColonExpected: 'a colon was expected',
    CommaExpected: 'a comma was expected',
    CloseBraceExpected: 'a closing } was expected',
    CloseBracketExpected: 'a closing ] was expected',
    EndOfFileExpected: 'the end of the file was expected (more than one top-level value)',
    InvalidCommentToken: 'invalid comment',
    UnexpectedEndOfComment: 'a /* comment is not closed',
    UnexpectedEndOfString: 'a string is not closed',
    UnexpectedEndOfNumber: 'a number is cut short',
    InvalidUnicode: 'invalid \\u escape',
    InvalidEscapeCharacter: 'invalid escape character',
    InvalidCharacter: 'invalid character in a string (a control character or a raw line break)',
  };
  return `${words[kind] ?? 'syntax error'} (${kind})`;
}

function lineAndColumn(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, Math.min(offset, text.length)).split('\n');
  return { line: before.length, column: (before.at(-1)?.length ?? 0) + 1 };
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
      throw new ConfigError(
        ErrorCode.INVALID_CONFIG,
        `Configuration file ${path} is larger than ${limit} bytes; a configuration this large is not a stepbind configuration. Check the path.`,
        { detail: { path, limit } },
      );
    }
    return buffer.toString('utf8', 0, length);
  } finally {
    await handle.close();
  }
}
