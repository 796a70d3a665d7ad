/**
 * Matching schema patterns under a regex budget.
 *
 * Even a linear engine costs time per character that grows with the program, so every validation
 * runs under a regex budget ({@link withRegexBudget}): each pattern is charged once per validation
 * for its compilation and then for every string it tests; a validation that would exceed the
 * budget is refused ({@link PatternRefusedError}) instead of stalling the event loop.
 *
 * @packageDocumentation
 */
import { RE2JS } from 're2js';
import { planPattern, type PatternPlan } from './plan.js';

/**
 * Regex work allowed in one validation, in steps. A pattern's first test in a validation costs
 * {@link COMPILE_BASE_COST} plus {@link COMPILE_UNIT_COST} per program instruction (its
 * compilation), and every test costs (input length + 1) × {@link stepsPerCharacter}. Measured on
 * a small shared server at the budget's edge, the slowest patterns (large counted repetitions,
 * where RE2's lazy DFA keeps rebuilding states, and half a million characters against a small
 * pattern) take about 100 ms; ordinary values stay far below the budget.
 */
export const REGEX_BUDGET = 2_097_152;
/** Fixed cost charged for a pattern's first test in a validation (its compilation). */
export const COMPILE_BASE_COST = 8_192;
/** Cost per estimated program instruction of a pattern's compilation. */
export const COMPILE_UNIT_COST = 48;

/**
 * Steps charged per input character for a program of `size` instructions: RE2's time per character
 * grows with the program, and faster than linearly once its DFA cannot keep every state.
 */
export function stepsPerCharacter(size: number): number {
  return Math.max(8, size + Math.floor((size * size) / 128));
}

/**
 * Thrown inside a validation that a pattern cannot be run for: its regex work would exceed the
 * budget, or (a defect) RE2 refused a translation. The validation then fails with this message.
 */
export class PatternRefusedError extends Error {
  constructor(
    readonly pattern: string,
    message: string,
  ) {
    super(message);
  }
}

function budgetError(pattern: string): PatternRefusedError {
  return new PatternRefusedError(
    pattern,
    `checking pattern ${JSON.stringify(truncate(pattern))} would exceed the per-validation regex ` +
      `budget of ${REGEX_BUDGET} steps; the value is too large to check against it`,
  );
}

function truncate(s: string): string {
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}

// ---------------------------------------------------------------------------------------------
// Matching under a budget

interface Budget {
  remaining: number;
  epoch: number;
}

/** The budget of the validation running now; outside one (meta-schema checks) it is unbounded. */
let current: Budget = { remaining: Number.POSITIVE_INFINITY, epoch: 0 };
let epochs = 0;

/**
 * Runs `fn` (one synchronous validation) under a fresh regex budget of `budget` steps.
 *
 * @throws PatternRefusedError from `fn` when its patterns would do more work than that.
 */
export function withRegexBudget<T>(fn: () => T, budget: number = REGEX_BUDGET): T {
  const outer = current;
  current = { remaining: budget, epoch: ++epochs };
  try {
    return fn();
  } finally {
    current = outer;
  }
}

/** What Ajv's `code.regExp` gets back: `test` like `RegExp.prototype.test`. */
interface PatternMatcher {
  test(input: string): boolean;
  toString(): string;
}

class Re2Matcher implements PatternMatcher {
  readonly #plan: Extract<PatternPlan, { enforced: true }>;
  readonly #compileCost: number;
  readonly #perCharacter: number;
  #re: RE2JS | undefined;
  #chargedEpoch = -1;

  constructor(plan: Extract<PatternPlan, { enforced: true }>) {
    this.#plan = plan;
    this.#compileCost = COMPILE_BASE_COST + COMPILE_UNIT_COST * plan.size;
    this.#perCharacter = stepsPerCharacter(plan.size);
  }

  test(input: string): boolean {
    const budget = current;
    // Compilation is charged once per validation whether compiled already or not, so a verdict
    // never depends on which validations ran before.
    let cost = (input.length + 1) * this.#perCharacter;
    if (this.#chargedEpoch !== budget.epoch) cost += this.#compileCost;
    if (cost > budget.remaining) throw budgetError(this.#plan.source);
    budget.remaining -= cost;
    this.#chargedEpoch = budget.epoch;
    this.#re ??= this.#compile();
    return this.#re.test(input);
  }

  #compile(): RE2JS {
    try {
      return RE2JS.compile(this.#plan.re2);
    } catch (error) {
      // The translator only emits what RE2 accepts (a property test holds it to that); if RE2
      // still refuses, fail the validation loudly rather than skip the pattern.
      throw new PatternRefusedError(
        this.#plan.source,
        `pattern ${JSON.stringify(truncate(this.#plan.source))} could not be compiled for RE2: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
  }

  toString(): string {
    return `re2:${this.#plan.source}`;
  }
}

/** A pattern stepbind does not enforce: it accepts every string (the server still validates). */
class UnenforcedMatcher implements PatternMatcher {
  readonly #source: string;
  constructor(source: string) {
    this.#source = source;
  }
  test(): boolean {
    return true;
  }
  toString(): string {
    return `unenforced:${this.#source}`;
  }
}

/**
 * Ajv's `code.regExp` engine: every `pattern`, `patternProperties` key and `propertyNames`
 * pattern Ajv compiles goes through {@link planPattern}; nothing reaches `RegExp`. RE2 compiles a
 * pattern on its first test.
 */
export const re2Engine = Object.assign(
  (source: string, flags: string): PatternMatcher => {
    if (flags !== 'u') {
      throw new Error(`stepbind: patterns are compiled with the u flag, not "${flags}"`);
    }
    // Only ever parsed, never run: the schema checks already refused invalid patterns, and this
    // keeps a pattern Ajv reaches some other way from being translated unchecked.
    new RegExp(source, 'u');
    const plan = planPattern(source);
    return plan.enforced ? new Re2Matcher(plan) : new UnenforcedMatcher(source);
  },
  { code: 'stepbindRe2' },
);
