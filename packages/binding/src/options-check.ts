/**
 * The one checker of every options bag (DESIGN §17.1): a zod schema says what a bag may hold, and
 * {@link checkOptions} turns the validator's issues into one `INVALID_OPTIONS` error that names the
 * function, the path of every problem, the allowed keys and a did-you-mean. JavaScript callers
 * have no compiler: an unknown key is refused, never ignored.
 *
 * @packageDocumentation
 */
import * as z from 'zod/v4';
import { ErrorCode, RuntimeError, type OptionProblem, type StepbindError } from './errors.js';
import { nearestName } from './nearest.js';

/** Where a bag is checked, for the error: who refused it and what was (not) done. */
export interface OptionsContext {
  /** The function whose options these are: `McpRuntime.open`, `PreparedCall.run`. */
  readonly fn: string;
  /** The name of the bag's root in paths. @default "options" */
  readonly root?: string;
  /** Text after the first problem naming the subject, e.g. `for "s__send" of server "s"`. */
  readonly subject?: () => string;
  /** The closing sentence: what was not done and what to do. @default "Nothing was done; fix the option and call again." */
  readonly consequence?: string;
  /** The error class thrown. @default RuntimeError */
  readonly as?: new (
    code: typeof ErrorCode.INVALID_OPTIONS,
    message: string,
    options: { readonly detail: Readonly<Record<string, unknown>> },
  ) => StepbindError;
  /** Extra detail (server, tool, delivery...), built only when the bag is refused. */
  readonly detail?: () => Readonly<Record<string, unknown>>;
}

/**
 * Checks `value` against `schema`; returns when it conforms.
 *
 * @throws the context's error class (default `RuntimeError`) with code `INVALID_OPTIONS`: the
 *   message names the function, the first problem's path and problem, the allowed keys and a
 *   did-you-mean, then "and N more"; `detail` carries `function`, `option` (the path below the
 *   root), `path`, `problem`, `allowed`, `didYouMean`, `value` (numbers and booleans only) and
 *   every problem in `problems`.
 */
export function checkOptions(schema: z.ZodType, value: unknown, context: OptionsContext): void {
  const result = schema.safeParse(value);
  if (result.success) return;
  const root = context.root ?? 'options';
  const found = collect(schema, value, result.error.issues, root);
  const problems = found.map((f) => f.problem);
  const first = found[0] ?? { problem: { path: root, problem: 'is not valid' }, keys: [] };
  const { path } = first.problem;
  const leaf = first.keys[first.keys.length - 1];
  const where = typeof leaf === 'string' ? `option "${leaf}" (${path})` : path;
  const parent = pathOf(root, first.keys.slice(0, -1));
  const allowed =
    first.problem.allowed === undefined
      ? ''
      : `; the options${first.keys.length > 1 ? ` of ${parent}` : ''} are ${first.problem.allowed.length === 0 ? 'none' : first.problem.allowed.join(', ')}`;
  const more =
    problems.length > 1
      ? ` (and ${problems.length - 1} more: ${problems
          .slice(1)
          .map((p) => `${p.path} ${p.problem}`)
          .join('; ')})`
      : '';
  const shown = shownValue(valueAt(value, first.keys));
  const Class = context.as ?? RuntimeError;
  throw new Class(
    ErrorCode.INVALID_OPTIONS,
    `${context.fn}: ${where} ${first.problem.problem}${allowed}${context.subject === undefined ? '' : ` ${context.subject()}`}${more}. ${context.consequence ?? 'Nothing was done; fix the option and call again.'}`,
    {
      detail: {
        ...context.detail?.(),
        function: context.fn,
        option: first.keys.length === 0 ? root : path.slice(root.length + 1),
        ...first.problem,
        ...(shown === undefined ? {} : { value: shown }),
        problems,
      },
    },
  );
}

/**
 * Every problem of `value` under `schema` (empty when it conforms), in the schema's key order,
 * with paths from `root`. Shared by the options reference and the configuration checks.
 */
export function optionProblems(
  schema: z.ZodType,
  value: unknown,
  root = 'options',
): OptionProblem[] {
  const result = schema.safeParse(value);
  return result.success
    ? []
    : collect(schema, value, result.error.issues, root).map((f) => f.problem);
}

function collect(
  schema: z.ZodType,
  value: unknown,
  issues: readonly z.core.$ZodIssue[],
  root: string,
): { readonly problem: OptionProblem; readonly keys: readonly (string | number)[] }[] {
  const found: { problem: OptionProblem; keys: readonly (string | number)[] }[] = [];
  // Unknown keys first: a misspelt key is usually why a required one is missing.
  const ordered = flatten(issues).sort(
    (a, b) => Number(b.code === 'unrecognized_keys') - Number(a.code === 'unrecognized_keys'),
  );
  for (const issue of ordered) {
    const at = issue.path.filter((k): k is string | number => typeof k !== 'symbol');
    if (issue.code === 'unrecognized_keys') {
      const allowed = keysOf(schemaAt(schema, at, value));
      for (const key of issue.keys) {
        const near = nearestName(key, allowed);
        const keys = [...at, key];
        found.push({
          keys,
          problem: {
            path: pathOf(root, keys),
            problem: `is unknown${near === undefined ? '' : ` (did you mean "${near}"?)`}`,
            allowed,
            ...(near === undefined ? {} : { didYouMean: near }),
          },
        });
      }
      continue;
    }
    const target = schemaAt(schema, at, value);
    const got = valueAt(value, at);
    const expected =
      (target === undefined ? undefined : descriptionOf(target)) ??
      (issue.code === 'invalid_type' ? kindOf(issue.expected) : issue.message);
    const own =
      issue.code === 'custom' && typeof issue.params?.['problem'] === 'string'
        ? issue.params['problem']
        : undefined;
    const problem =
      own ??
      (got === undefined
        ? `is required: ${expected}`
        : `must be ${expected}, got ${describeValue(got, target !== undefined && isEnum(target))}`);
    found.push({ keys: at, problem: { path: pathOf(root, at), problem } });
  }
  return found;
}

/**
 * A value as an error may show it: numbers (NaN and ±Infinity named), booleans and null as
 * themselves, a string only when `showString` (an enum value), everything else by its kind.
 */
export function describeValue(value: unknown, showString = false): string {
  if (typeof value === 'number') return String(value);
  if (value === null || typeof value === 'boolean') return String(value);
  if (typeof value === 'string') return showString ? JSON.stringify(value) : 'a string';
  if (value === undefined) return 'undefined';
  if (typeof value === 'function') return 'a function';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  return `a ${typeof value}`;
}

/**
 * The schema's description, looking through `optional` wrappers: what the value must be, written
 * to follow "must be" (`an integer from 1 to 2147483647 (milliseconds)`).
 */
export function descriptionOf(schema: z.ZodType): string | undefined {
  let current: z.ZodType | undefined = schema;
  while (current !== undefined) {
    if (current.description !== undefined) return current.description;
    current = current instanceof z.ZodOptional ? (current.unwrap() as z.ZodType) : undefined;
  }
  return undefined;
}

/** The keys an object schema accepts (through `optional` and unions of objects), in order. */
export function keysOf(schema: z.ZodType | undefined): string[] {
  const object = objectOf(schema);
  return object === undefined ? [] : Object.keys(object.shape);
}

/** A union's issues replaced by those of the branch that fits the value's kind. */
function flatten(issues: readonly z.core.$ZodIssue[]): z.core.$ZodIssue[] {
  const out: z.core.$ZodIssue[] = [];
  for (const issue of issues) {
    if (issue.code !== 'invalid_union') {
      out.push(issue);
      continue;
    }
    // The branch whose own type matched (no type error at the union's place) explains best.
    const branch = issue.errors.find(
      (errors) => !errors.some((e) => e.code === 'invalid_type' && e.path.length === 0),
    );
    if (branch === undefined) {
      out.push({ ...issue, code: 'custom', message: '', params: {} });
      continue;
    }
    out.push(...flatten(branch.map((e) => ({ ...e, path: [...issue.path, ...e.path] }))));
  }
  return out;
}

/** The schema describing the value at `path` (through optional, unions and arrays). */
function schemaAt(
  schema: z.ZodType,
  path: readonly (string | number)[],
  value: unknown,
): z.ZodType | undefined {
  let current: z.ZodType | undefined = schema;
  let here: unknown = value;
  for (const key of path) {
    if (current === undefined) return undefined;
    current = pick(current, here);
    if (current instanceof z.ZodArray) {
      current = current.element as z.ZodType;
    } else {
      const object = objectOf(current);
      current = object?.shape[key] as z.ZodType | undefined;
    }
    here = (here as Record<string | number, unknown> | undefined)?.[key];
  }
  return current;
}

/** Through optional wrappers and, in a union, the branch whose kind fits `value`. */
function pick(schema: z.ZodType, value: unknown): z.ZodType {
  let current = schema;
  for (;;) {
    if (current instanceof z.ZodOptional) current = current.unwrap() as z.ZodType;
    else if (current instanceof z.ZodUnion) {
      const options = current.options as readonly z.ZodType[];
      const object = options.find((o) => objectOf(o) !== undefined);
      current =
        typeof value === 'object' && value !== null && object !== undefined
          ? object
          : (options[0] ?? current);
      if (!(current instanceof z.ZodUnion) && !(current instanceof z.ZodOptional)) return current;
    } else if (current instanceof z.ZodPipe) current = current.in as z.ZodType;
    else return current;
  }
}

function objectOf(schema: z.ZodType | undefined): z.ZodObject | undefined {
  if (schema === undefined) return undefined;
  const inner = pick(schema, {});
  return inner instanceof z.ZodObject ? inner : undefined;
}

function isEnum(schema: z.ZodType): boolean {
  const inner = pick(schema, undefined);
  return inner instanceof z.ZodEnum || inner instanceof z.ZodLiteral;
}

function valueAt(value: unknown, keys: readonly (string | number)[]): unknown {
  let here = value;
  for (const key of keys) {
    if (typeof here !== 'object' || here === null) return undefined;
    here = (here as Record<string | number, unknown>)[key];
  }
  return here;
}

function pathOf(root: string, keys: readonly (string | number)[]): string {
  return keys.reduce<string>(
    (path, key) =>
      typeof key === 'number'
        ? `${path}[${key}]`
        : /^[A-Za-z_$][\w$]*$/.test(key)
          ? `${path}.${key}`
          : `${path}[${JSON.stringify(key)}]`,
    root,
  );
}

function shownValue(value: unknown): number | boolean | null | string | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? value : String(value);
  if (typeof value === 'boolean' || value === null) return value;
  return undefined;
}

/**
 * The issue a `superRefine` adds for a rule between keys (`path` without `synchronous`): its
 * `problem` text is used as is.
 */
export function problemIssue(
  path: readonly (string | number)[],
  problem: string,
): z.core.$ZodRawIssue {
  return {
    code: 'custom',
    path: [...path],
    message: problem,
    params: { problem },
    input: undefined,
  };
}

/** A schema for a function value, described as `a function` plus `signature`. */
export function fn<T = (...args: never[]) => unknown>(signature = ''): z.ZodType<T> {
  return z
    .custom<T>((v) => typeof v === 'function')
    .describe(`a function${signature === '' ? '' : ` ${signature}`}`);
}

/** A schema for an `AbortSignal`. */
export const abortSignal: z.ZodType<AbortSignal> = z
  .custom<AbortSignal>((v) => v instanceof AbortSignal)
  .describe('an AbortSignal');

/** A schema for an object with the given methods (a duck check of an interface). */
export function withMethods<T = object>(name: string, methods: readonly string[]): z.ZodType<T> {
  return z
    .custom<T>(
      (v) =>
        typeof v === 'object' &&
        v !== null &&
        methods.every((m) => typeof (v as Record<string, unknown>)[m] === 'function'),
    )
    .describe(`a ${name} (an object with ${methods.join(', ')})`);
}

/** A schema for a whole number of milliseconds from `min` to 2^31−1 (what a timer can hold). */
export function millis(min: number): z.ZodNumber {
  return z
    .number()
    .int()
    .min(min)
    .max(2_147_483_647)
    .describe(`an integer from ${min} to 2147483647 (milliseconds)`);
}

/**
 * A strict object schema whose keys are exactly those of `T` (checked at compile time: a key
 * missing from the shape or not in `T` is a type error), so the interface and its run-time
 * check cannot drift apart.
 */
export function bagOf<T>() {
  return <S extends { readonly [K in keyof T]-?: z.ZodType }>(
    shape: S & Record<Exclude<keyof S, keyof T>, never>,
  ): z.ZodObject<S, z.core.$strict> => z.strictObject(shape);
}

/** `object` → `an object`: a zod type name as "must be" takes it. */
function kindOf(expected: string): string {
  return /^[aeiou]/.test(expected) ? `an ${expected}` : `a ${expected}`;
}

/** Every key of any member of a union (`keyof` of a union keeps only the shared ones). */
type AnyKey<T> = T extends unknown ? keyof T : never;

/**
 * A compile-time check, a no-op at run time: `sameKeys<T>()(schema)` compiles only when the
 * object schema's keys are exactly the keys of `T` (of any member, for a union), so an interface
 * and its schema, kept in different files, cannot drift apart.
 */
export function sameKeys<T>() {
  return <S extends z.ZodObject>(
    schema: S &
      ([AnyKey<T>] extends [keyof S['shape']]
        ? [keyof S['shape']] extends [AnyKey<T>]
          ? unknown
          : { readonly extraKeys: Exclude<keyof S['shape'], AnyKey<T>> }
        : { readonly missingKeys: Exclude<AnyKey<T>, keyof S['shape']> }),
  ): void => {
    void schema;
  };
}
