/**
 * The scripted server's catalog format and its runtime check.
 *
 * A fixture is plain JSON so that a test can write it to a file and hand the path to a stdio child.
 */

/**
 * One page of a generation.
 *
 * `tools` are served exactly as written: nothing is validated, so a fixture can serve invalid tools
 * (bad names, non-object schemas, remote `$ref`s) to test a client's validation.
 */
export interface FixturePage {
  /** Raw tool objects, served as-is in `tools/list`. */
  readonly tools: readonly unknown[];
  /**
   * The `nextCursor` this page carries. A string (including `""`) is used verbatim instead of a
   * random token; `null` ends the listing at this page even if more pages follow.
   * @default a random opaque token when another page follows, otherwise no `nextCursor`
   */
  readonly nextCursor?: string | null;
  /**
   * Index (0-based, within this generation) of the page that this page's cursor leads to. Lets a
   * fixture script repeats (`nextPage` = own index) and cycles (`nextPage` = an earlier index). The
   * cursor for a given target page is issued once and reused, so two pages leading to the same
   * target carry the same cursor.
   * @default this page's index + 1
   */
  readonly nextPage?: number;
  /**
   * Revision token for this page only: a string overrides the generation's token, `null` omits
   * `_meta` on this page.
   * @default the generation's current revision
   */
  readonly revision?: string | null;
}

/** One version of the catalog. Cursors are only valid in the generation that issued them. */
export interface FixtureGeneration {
  /** The pages, in order; at least one. */
  readonly pages: readonly FixturePage[];
  /**
   * Revision token sent on every page as `_meta["io.stepbind/catalogRevision"]`.
   * @default no `_meta`
   */
  readonly revision?: string;
  /**
   * After the last listed page, serve empty pages forever, each with a brand-new cursor.
   * @default false
   */
  readonly endless?: boolean;
}

/** The result of `tools/call` for one tool. */
export interface FixtureCallResult {
  /**
   * Text content of the result.
   * @default `"<tool> ok"`, or the JSON of `structuredContent` when that is given
   */
  readonly text?: string;
  /** Structured result, sent as `structuredContent`. */
  readonly structuredContent?: Readonly<Record<string, unknown>>;
  /**
   * Marks the result as a tool error (`isError: true`).
   * @default false
   */
  readonly isError?: boolean;
  /**
   * `notifications/progress` sent for the call's progress token (only when the request carries
   * one), in order, before the result; the values are sent as given (hostile ones included).
   * @default none
   */
  readonly progress?: readonly FixtureProgress[];
}

/** One progress notification (or a run of them) of a {@link FixtureCallResult}. */
export interface FixtureProgress {
  /** Sent as `progress`, as is (any JSON value). */
  readonly progress: unknown;
  /** Sent as `total` when given. */
  readonly total?: unknown;
  /** Sent as `message` when given. */
  readonly message?: unknown;
  /** Wait this long (cancellable by the request's cancellation) before sending. @default 0 */
  readonly delayMs?: number;
  /**
   * Send it this many times; a numeric `progress` goes up by 1 each time (a flood).
   * @default 1
   */
  readonly repeat?: number;
  /** Send it after the result instead of before (a late report). @default false */
  readonly afterResult?: boolean;
}

/** The requests a trigger reacts to. */
export type FixtureTriggerMatch =
  | {
      readonly method: 'tools/list';
      /** Fire only on the nth (1-based) request matching this filter. Default: every one. */
      readonly nth?: number;
      /** Only requests that sent this cursor; `null` = requests that sent no cursor. */
      readonly cursor?: string | null;
    }
  | {
      readonly method: 'tools/call';
      /** Only calls of this tool. Default: any tool. */
      readonly tool?: string;
      /** Fire only on the nth (1-based) request matching this filter. Default: every one. */
      readonly nth?: number;
    };

/**
 * Actions run when a request matches `on`, in this order: wait `delayMs`; apply state changes if
 * `stateChange` is `'before'`; send `notifications/tools/list_changed` if `notify` is `'before'`;
 * `exit` (no response is sent); compute and send the response; then apply state changes if
 * `stateChange` is `'after'` (as soon as the response is computed, so the next request sees them)
 * and send the notification if `notify` is `'after'` (once the response has been written).
 */
export interface FixtureTrigger {
  /** Which requests fire this trigger. */
  readonly on: FixtureTriggerMatch;
  /** Extra delay before responding, in milliseconds. @default 0 */
  readonly delayMs?: number;
  /** Switch the server to this generation (0-based index into `generations`). */
  readonly setGeneration?: number;
  /** Replace the current generation's revision token; `null` removes it. */
  readonly setRevision?: string | null;
  /** When `setGeneration`/`setRevision` apply relative to this response. @default 'after' */
  readonly stateChange?: 'before' | 'after';
  /** Send `notifications/tools/list_changed` before or after the response. */
  readonly notify?: 'before' | 'after';
  /**
   * Crash without responding. A stdio server calls `process.exit(exit)`; an in-process server
   * closes its transport.
   */
  readonly exit?: number;
}

/**
 * A complete scripted catalog: generations of pages, call results and triggers. This is the JSON
 * format of the `fixture` scenario (inline as `fixture` or in a file named by `fixturePath`).
 *
 * @example
 * ```json
 * {
 *   "generations": [
 *     { "revision": "r1", "pages": [{ "tools": [{ "name": "a", "inputSchema": { "type": "object" } }] }] }
 *   ],
 *   "calls": { "a": { "text": "done", "structuredContent": { "n": 1 } } },
 *   "triggers": [{ "on": { "method": "tools/call", "tool": "a" }, "notify": "after" }]
 * }
 * ```
 */
export interface ServerFixture {
  /** Catalog generations; the server starts in `initialGeneration`. At least one. */
  readonly generations: readonly FixtureGeneration[];
  /** The generation served first. @default 0 */
  readonly initialGeneration?: number;
  /** Results of `tools/call`, by tool name. A listed tool without an entry returns `"<tool> ok"`. */
  readonly calls?: Readonly<Record<string, FixtureCallResult>>;
  /** Scripted reactions to requests, checked in order; several may fire on one request. */
  readonly triggers?: readonly FixtureTrigger[];
}

/** Thrown when a fixture (or scripted-server option) does not match its format. */
export class FixtureError extends Error {
  /** JSON path of the offending value, e.g. `$.generations[0].pages[1].nextCursor`. */
  readonly path: string;

  /** @param path JSON path of the problem. @param problem What is wrong there. */
  constructor(path: string, problem: string) {
    super(`invalid scripted-server fixture at ${path}: ${problem}`);
    this.name = 'FixtureError';
    this.path = path;
  }
}

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function expectObject(value: unknown, path: string, allowed: readonly string[]): Json {
  if (!isObject(value)) throw new FixtureError(path, `expected an object, got ${describe(value)}`);
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) {
      throw new FixtureError(`${path}.${key}`, `unknown key (allowed: ${allowed.join(', ')})`);
    }
  }
  return value;
}

function expectArray(value: unknown, path: string): readonly unknown[] {
  if (!Array.isArray(value))
    throw new FixtureError(path, `expected an array, got ${describe(value)}`);
  return value as readonly unknown[];
}

function expectInteger(value: unknown, path: string, min: number, max = Infinity): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    const range = max === Infinity ? `>= ${min}` : `in ${min}..${max}`;
    throw new FixtureError(path, `expected an integer ${range}, got ${describe(value)}`);
  }
  return value;
}

function expectString(value: unknown, path: string): string {
  if (typeof value !== 'string')
    throw new FixtureError(path, `expected a string, got ${describe(value)}`);
  return value;
}

function expectStringOrNull(value: unknown, path: string): string | null {
  if (value !== null && typeof value !== 'string') {
    throw new FixtureError(path, `expected a string or null, got ${describe(value)}`);
  }
  return value;
}

function expectOneOf<T extends string>(value: unknown, path: string, options: readonly T[]): T {
  if (typeof value !== 'string' || !(options as readonly string[]).includes(value)) {
    throw new FixtureError(path, `expected one of ${options.map((o) => `'${o}'`).join(', ')}`);
  }
  return value as T;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return `the string ${JSON.stringify(value.slice(0, 40))}`;
  if (typeof value === 'number' || typeof value === 'boolean') return `${typeof value} ${value}`;
  return typeof value === 'object' ? 'an object' : typeof value;
}

/**
 * Checks one generation: pages, explicit cursors and page links. Exported for `replaceCatalog`.
 * @internal
 */
export function checkGeneration(value: unknown, path: string): FixtureGeneration {
  const gen = expectObject(value, path, ['pages', 'revision', 'endless']);
  if (gen.revision !== undefined) expectString(gen.revision, `${path}.revision`);
  if (gen.endless !== undefined && typeof gen.endless !== 'boolean') {
    throw new FixtureError(`${path}.endless`, `expected a boolean, got ${describe(gen.endless)}`);
  }
  const endless = gen.endless === true;
  const pages = expectArray(gen.pages, `${path}.pages`);
  if (pages.length === 0) throw new FixtureError(`${path}.pages`, 'expected at least one page');
  const explicitTargets = new Map<string, number>();
  pages.forEach((raw, index) => {
    const at = `${path}.pages[${index}]`;
    const page = expectObject(raw, at, ['tools', 'nextCursor', 'nextPage', 'revision']);
    expectArray(page.tools, `${at}.tools`);
    if (page.revision !== undefined) expectStringOrNull(page.revision, `${at}.revision`);
    const cursor =
      page.nextCursor === undefined
        ? undefined
        : expectStringOrNull(page.nextCursor, `${at}.nextCursor`);
    if (page.nextPage !== undefined) {
      if (cursor === null) {
        throw new FixtureError(`${at}.nextPage`, 'cannot lead anywhere when nextCursor is null');
      }
      expectInteger(page.nextPage, `${at}.nextPage`, 0, endless ? Infinity : pages.length - 1);
    }
    const target = (page.nextPage as number | undefined) ?? index + 1;
    if (typeof cursor === 'string') {
      if (target >= pages.length && !endless) {
        throw new FixtureError(
          `${at}.nextCursor`,
          'the last page has no following page; set nextPage or endless',
        );
      }
      const previous = explicitTargets.get(cursor);
      if (previous !== undefined && previous !== target) {
        throw new FixtureError(
          `${at}.nextCursor`,
          `cursor ${JSON.stringify(cursor)} already leads to page ${previous}, not ${target}`,
        );
      }
      explicitTargets.set(cursor, target);
    }
  });
  return gen as unknown as FixtureGeneration;
}

function checkTrigger(value: unknown, path: string, generations: number): FixtureTrigger {
  const trigger = expectObject(value, path, [
    'on',
    'delayMs',
    'setGeneration',
    'setRevision',
    'stateChange',
    'notify',
    'exit',
  ]);
  const on = expectObject(trigger.on, `${path}.on`, ['method', 'nth', 'cursor', 'tool']);
  const method = expectOneOf(on.method, `${path}.on.method`, ['tools/list', 'tools/call'] as const);
  if (on.nth !== undefined) expectInteger(on.nth, `${path}.on.nth`, 1);
  if (method === 'tools/list') {
    if (on.tool !== undefined) throw new FixtureError(`${path}.on.tool`, 'only for tools/call');
    if (on.cursor !== undefined) expectStringOrNull(on.cursor, `${path}.on.cursor`);
  } else {
    if (on.cursor !== undefined) throw new FixtureError(`${path}.on.cursor`, 'only for tools/list');
    if (on.tool !== undefined) expectString(on.tool, `${path}.on.tool`);
  }
  if (trigger.delayMs !== undefined) expectInteger(trigger.delayMs, `${path}.delayMs`, 0);
  if (trigger.setGeneration !== undefined) {
    expectInteger(trigger.setGeneration, `${path}.setGeneration`, 0, generations - 1);
  }
  if (trigger.setRevision !== undefined)
    expectStringOrNull(trigger.setRevision, `${path}.setRevision`);
  if (trigger.stateChange !== undefined) {
    expectOneOf(trigger.stateChange, `${path}.stateChange`, ['before', 'after'] as const);
  }
  if (trigger.notify !== undefined) {
    expectOneOf(trigger.notify, `${path}.notify`, ['before', 'after'] as const);
  }
  if (trigger.exit !== undefined) expectInteger(trigger.exit, `${path}.exit`, 0, 255);
  return trigger as unknown as FixtureTrigger;
}

function checkCallResult(value: unknown, path: string): FixtureCallResult {
  const result = expectObject(value, path, ['text', 'structuredContent', 'isError', 'progress']);
  if (result.progress !== undefined) {
    expectArray(result.progress, `${path}.progress`).forEach((step, i) => {
      const at = `${path}.progress[${i}]`;
      const entry = expectObject(step, at, [
        'progress',
        'total',
        'message',
        'delayMs',
        'repeat',
        'afterResult',
      ]);
      for (const key of ['delayMs', 'repeat'] as const) {
        const n = entry[key];
        if (n !== undefined && (typeof n !== 'number' || !Number.isInteger(n) || n < 0)) {
          throw new FixtureError(`${at}.${key}`, `expected a whole number, got ${describe(n)}`);
        }
      }
    });
  }
  if (result.text !== undefined) expectString(result.text, `${path}.text`);
  if (result.structuredContent !== undefined && !isObject(result.structuredContent)) {
    throw new FixtureError(`${path}.structuredContent`, 'expected an object');
  }
  if (result.isError !== undefined && typeof result.isError !== 'boolean') {
    throw new FixtureError(
      `${path}.isError`,
      `expected a boolean, got ${describe(result.isError)}`,
    );
  }
  return result;
}

/**
 * Checks that `value` is a well-formed {@link ServerFixture} and returns it typed. The tools inside
 * pages are deliberately not checked (they are served as-is).
 *
 * @throws {FixtureError} naming the JSON path of the first problem, e.g.
 *   `invalid scripted-server fixture at $.generations[0].pages: expected an array, got an object`.
 */
export function parseServerFixture(value: unknown): ServerFixture {
  const fixture = expectObject(value, '$', [
    'generations',
    'initialGeneration',
    'calls',
    'triggers',
  ]);
  const generations = expectArray(fixture.generations, '$.generations');
  if (generations.length === 0) throw new FixtureError('$.generations', 'expected at least one');
  generations.forEach((gen, index) => checkGeneration(gen, `$.generations[${index}]`));
  if (fixture.initialGeneration !== undefined) {
    expectInteger(fixture.initialGeneration, '$.initialGeneration', 0, generations.length - 1);
  }
  if (fixture.calls !== undefined) {
    const calls = expectObject(fixture.calls, '$.calls', Object.keys(fixture.calls ?? {}));
    for (const [tool, result] of Object.entries(calls)) {
      checkCallResult(result, `$.calls[${JSON.stringify(tool)}]`);
    }
  }
  if (fixture.triggers !== undefined) {
    expectArray(fixture.triggers, '$.triggers').forEach((trigger, index) =>
      checkTrigger(trigger, `$.triggers[${index}]`, generations.length),
    );
  }
  return fixture as unknown as ServerFixture;
}
