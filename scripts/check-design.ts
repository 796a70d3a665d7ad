/**
 * `pnpm layout` (and `tsx scripts/check-design.ts`): every invariant of `docs/DESIGN.md` §3 names
 * the file that enforces it, the test that proves it and the mutant that test kills, and the names
 * are real.
 *
 * The format, under the heading `## 3. ...` up to the next `## ` heading: an invariant is a line
 * starting with `N. ` at column 0; its proof lines follow it, indented, one per kind:
 *
 * ```
 * 3. A prepared call whose ... is rejected ... (code `STALE_CATALOG`).
 *    - enforced: `packages/binding/src/call/prepared.ts`, `packages/binding/src/call/slot.ts`
 *    - test: `packages/runtime/test/runtime.memory.test.ts` > "rejects a prepared call after ..."
 *    - mutant: "skip the revision compare"
 * ```
 *
 * - `enforced:` one or more backticked paths from the repository root, comma-separated; each must
 *   exist.
 * - `test:` one backticked test file, ` > `, and a test title in double quotes; the file must exist
 *   and contain the title verbatim. Repeat the line for more tests.
 * - `mutant:` one or more double-quoted names of `scripts/mutants.ts`, comma-separated; each must be
 *   a mutant there, and the test that mutant names must be one of the invariant's `test:` lines.
 * - `no enforced:` / `no test:` / `no mutant:` followed by the reason replaces a kind that the
 *   invariant cannot have (a rule checked by a property suite with no seeded bug, say).
 *
 * Every invariant needs each kind, or its `no` line. `--self-test` runs the check over a synthetic
 * design and mutant file with one of each defect and exits 1 unless exactly those are found.
 */
import { existsSync, mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/** A mutant of `scripts/mutants.ts`: its name and the test that must kill it. */
export interface MutantRef {
  readonly name: string;
  readonly testFile: string | undefined;
  readonly testName: string | undefined;
}

/** One invariant of §3 and what its proof lines name. */
export interface Invariant {
  readonly number: number;
  readonly line: number;
  readonly enforced: readonly string[];
  readonly tests: readonly { readonly file: string; readonly title: string }[];
  readonly mutants: readonly string[];
  /** The kinds given a `no <kind>: reason` line. */
  readonly waived: readonly ProofKind[];
  /** Proof lines that do not follow the format. */
  readonly malformed: readonly string[];
}

/** The three kinds of proof an invariant names. */
export type ProofKind = 'enforced' | 'test' | 'mutant';

const KINDS: readonly ProofKind[] = ['enforced', 'test', 'mutant'];

/** Reads a JavaScript string literal's body (single or double quoted) back to its value. */
const unescape = (body: string): string => body.replace(/\\(.)/g, '$1');

const STRING = String.raw`(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")`;

/** The mutants of a `scripts/mutants.ts` text: each entry's `name`, `testFile` and `testName`. */
export function parseMutants(text: string): MutantRef[] {
  const field = (block: string, key: string): string | undefined => {
    const match = new RegExp(String.raw`\b${key}:\s*${STRING}`).exec(block);
    if (match === null) return undefined;
    return unescape(match[1] ?? match[2] ?? '');
  };
  return text
    .split(/\n\s*\{\s*\n/)
    .slice(1)
    .flatMap((block) => {
      const name = field(block, 'name');
      return name === undefined
        ? []
        : [{ name, testFile: field(block, 'testFile'), testName: field(block, 'testName') }];
    });
}

/**
 * Whether a test file has a test titled `title`: verbatim, or through a template-literal title
 * whose `${...}` parts stand for any text (`` `resolves with a hook that ${kind}: ...` ``).
 */
export function hasTestTitle(text: string, title: string): boolean {
  if (text.includes(title)) return true;
  for (const match of text.matchAll(/`((?:[^`\\]|\\.)*)`/g)) {
    const body = match[1] ?? '';
    if (!body.includes('${')) continue;
    const pattern = body
      .split(/\$\{[^}]*\}/)
      .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('.+');
    if (new RegExp(`^${pattern}$`).test(title)) return true;
  }
  return false;
}

/** The invariants of the `## 3.` section of a design text. */
export function parseInvariants(design: string): Invariant[] {
  const lines = design.split('\n');
  const start = lines.findIndex((line) => line.startsWith('## 3.'));
  if (start < 0) return [];
  const end = lines.findIndex((line, i) => i > start && line.startsWith('## '));
  const out: Invariant[] = [];
  type Draft = {
    number: number;
    line: number;
    enforced: string[];
    tests: { file: string; title: string }[];
    mutants: string[];
    waived: ProofKind[];
    malformed: string[];
  };
  let current: Draft | undefined;
  for (let i = start + 1; i < (end < 0 ? lines.length : end); i += 1) {
    const line = lines[i] ?? '';
    const head = /^(\d+)\. /.exec(line);
    if (head !== null) {
      current = {
        number: Number(head[1]),
        line: i + 1,
        enforced: [],
        tests: [],
        mutants: [],
        waived: [],
        malformed: [],
      };
      out.push(current);
      continue;
    }
    const proof = /^\s+- (no )?(enforced|test|mutant):\s*(.*)$/.exec(line);
    if (proof === null || current === undefined) continue;
    const kind = proof[2] as ProofKind;
    const rest = (proof[3] ?? '').trim();
    if (proof[1] !== undefined) {
      if (rest === '') current.malformed.push(`line ${i + 1}: "no ${kind}:" needs a reason`);
      else current.waived.push(kind);
    } else if (kind === 'enforced') {
      if (!/^`[^`]+`(, `[^`]+`)*$/.test(rest))
        current.malformed.push(`line ${i + 1}: ${line.trim()}`);
      else current.enforced.push(...rest.split(', ').map((p) => p.slice(1, -1)));
    } else if (kind === 'test') {
      const match = /^`([^`]+)` > "(.+)"$/.exec(rest);
      if (match === null) current.malformed.push(`line ${i + 1}: ${line.trim()}`);
      else current.tests.push({ file: match[1] ?? '', title: match[2] ?? '' });
    } else {
      const names = [...rest.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => unescape(m[1] ?? ''));
      if (names.length === 0) current.malformed.push(`line ${i + 1}: ${line.trim()}`);
      else current.mutants.push(...names);
    }
  }
  return out;
}

/** The problems of the invariants in `design` against the files under `root` and `mutants`. */
export function designProblems(
  root: string,
  design: string,
  mutants: readonly MutantRef[],
): string[] {
  const invariants = parseInvariants(design);
  if (invariants.length === 0) return ['§3 has no numbered invariant'];
  const problems: string[] = [];
  const texts = new Map<string, string | undefined>();
  const read = (path: string): string | undefined => {
    if (!texts.has(path)) {
      const full = join(root, path);
      texts.set(path, existsSync(full) ? readFileSync(full, 'utf8') : undefined);
    }
    return texts.get(path);
  };
  for (const inv of invariants) {
    const at = `invariant ${inv.number} (line ${inv.line})`;
    for (const m of inv.malformed) problems.push(`${at}: malformed proof line, ${m}`);
    const has: Record<ProofKind, boolean> = {
      enforced: inv.enforced.length > 0,
      test: inv.tests.length > 0,
      mutant: inv.mutants.length > 0,
    };
    for (const kind of KINDS) {
      if (!has[kind] && !inv.waived.includes(kind)) {
        problems.push(`${at}: names no ${kind} (add "- ${kind}: ..." or "- no ${kind}: <reason>")`);
      }
    }
    for (const file of inv.enforced) {
      if (!existsSync(join(root, file)))
        problems.push(`${at}: enforced file ${file} does not exist`);
    }
    for (const { file, title } of inv.tests) {
      const text = read(file);
      if (text === undefined) problems.push(`${at}: test file ${file} does not exist`);
      else if (!hasTestTitle(text, title)) problems.push(`${at}: ${file} has no test "${title}"`);
    }
    for (const name of inv.mutants) {
      const mutant = mutants.find((m) => m.name === name);
      if (mutant === undefined) {
        problems.push(`${at}: no mutant "${name}" in scripts/mutants.ts`);
      } else if (
        !inv.tests.some((t) => t.file === mutant.testFile && t.title === mutant.testName)
      ) {
        problems.push(
          `${at}: mutant "${name}" is killed by ${mutant.testFile ?? '?'} > "${mutant.testName ?? '?'}", which is not among its tests`,
        );
      }
    }
  }
  return problems;
}

/** Checks `root/docs/DESIGN.md` against the repository and `root/scripts/mutants.ts`. */
export function checkDesign(root: string): string[] {
  const design = join(root, 'docs/DESIGN.md');
  const mutants = join(root, 'scripts/mutants.ts');
  if (!existsSync(design)) return ['docs/DESIGN.md does not exist'];
  if (!existsSync(mutants)) return ['scripts/mutants.ts does not exist'];
  return designProblems(
    root,
    readFileSync(design, 'utf8'),
    parseMutants(readFileSync(mutants, 'utf8')),
  );
}

/**
 * Runs {@link designProblems} over a synthetic repository: one invariant with every kind right,
 * one with each kind wrong (a missing file, a missing title, an unknown mutant, a mutant killed by
 * a test the invariant does not name) and one with a waiver and a kind missing.
 *
 * @returns the problems with the check itself; empty when it works.
 */
export function selfTestDesign(): string[] {
  const root = mkdtempSync(join(tmpdir(), 'stepbind-design-selftest-'));
  try {
    const write = (path: string, text: string): void => {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), text);
    };
    write('src/a.ts', 'export const a = 1;\n');
    write(
      'test/a.test.ts',
      "it('keeps a at one', () => {});\nit(\"isn't two\", () => {});\n" +
        'for (const n of [3, 4]) it(`is never ${n}: checked`, () => {});\n',
    );
    write(
      'scripts/mutants.ts',
      [
        'const MUTANTS = [',
        '  {',
        "    name: 'make a two',",
        "    testFile: 'test/a.test.ts',",
        "    testName: 'keeps a at one',",
        '  },',
        '  {',
        '    // a comment before the name',
        '    name: "a\'s other bug",',
        "    testFile: 'test/a.test.ts',",
        '    testName: "isn\'t two",',
        '  },',
        '];',
        '',
      ].join('\n'),
    );
    const design = [
      '# d',
      '## 2. Vocabulary',
      '1. not an invariant (section 2)',
      '## 3. Invariants',
      '1. Good.',
      '   - enforced: `src/a.ts`',
      '   - test: `test/a.test.ts` > "keeps a at one"',
      '   - test: `test/a.test.ts` > "is never 3: checked"',
      '   - mutant: "make a two"',
      '2. Bad.',
      '   - enforced: `src/gone.ts`',
      '   - test: `test/a.test.ts` > "keeps a at two"',
      '   - mutant: "no such bug", "a\'s other bug"',
      '3. Waived.',
      '   - enforced: `src/a.ts`',
      '   - no mutant: checked by a property suite',
      '## 4. Next',
      '4. not an invariant (section 4)',
      '',
    ].join('\n');
    const mutants = parseMutants(readFileSync(join(root, 'scripts/mutants.ts'), 'utf8'));
    const found = designProblems(root, design, mutants);
    const expected = [
      'invariant 2 (line 10): enforced file src/gone.ts does not exist',
      'invariant 2 (line 10): test/a.test.ts has no test "keeps a at two"',
      'invariant 2 (line 10): no mutant "no such bug" in scripts/mutants.ts',
      `invariant 2 (line 10): mutant "a's other bug" is killed by test/a.test.ts > "isn't two", which is not among its tests`,
      'invariant 3 (line 14): names no test (add "- test: ..." or "- no test: <reason>")',
    ];
    const problems: string[] = [];
    if (
      JSON.stringify(mutants.map((m) => m.name)) !== JSON.stringify(['make a two', "a's other bug"])
    ) {
      problems.push(`design self-test: mutants parsed as ${JSON.stringify(mutants)}`);
    }
    if (JSON.stringify(found) !== JSON.stringify(expected)) {
      problems.push(
        `design self-test: expected ${JSON.stringify(expected)}, found ${JSON.stringify(found)}`,
      );
    }
    return problems;
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

function main(argv: readonly string[]): number {
  const problems = argv.includes('--self-test') ? selfTestDesign() : checkDesign(process.cwd());
  for (const p of problems) console.error(`design: ${p}`);
  console.log(`design: ${problems.length === 0 ? 'ok' : 'FAILED'}`);
  return problems.length === 0 ? 0 : 1;
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) {
  process.exitCode = main(process.argv.slice(2));
}
