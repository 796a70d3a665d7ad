/**
 * `pnpm layout`: the repository's layout rules, checked over every `packages/*\/src/**\/*.ts` file.
 *
 * - **No import cycles** (dpdm, type-only imports included: two files that import each other, even
 *   for types, cannot be read apart). `--ignore-type-imports` drops type-only imports.
 * - **No source file over 600 lines** (a file a reader can take in at once).
 * - **SDK imports** (`@modelcontextprotocol/*`, value or type) only in the runtime's `src/sdk/`,
 *   `src/era/` and `src/transports/` and anywhere in the testkit; never in binding
 *   ({@link SDK_HOMES}, less the files of {@link SDK_ALLOWLIST}).
 * - **One owner per server**: at most {@link OWNER_WRITES_ALLOWED} writes to members of the
 *   runtime's per-server owner class from outside `packages/runtime/src/server/`
 *   (`layout-measures.ts` finds them with the type checker).
 * - **README file tables**: every source file of a package is listed in its README's "Which file
 *   owns what" table and every listed file exists ({@link readFileTable} defines the format).
 * - **DESIGN §3 proof lines** name files, tests and mutants that exist (`check-design.ts`).
 *
 * It also prints the measures of `layout-measures.ts` per package (import graph edges and depth,
 * largest functions, exported names per entry point, SDK importers, owner writes); `--json` prints
 * everything as one JSON object instead, for diffing two trees. Exits 1 on any offender.
 * `--self-test` runs the checks over synthetic trees with known defects (and a clean one) and exits
 * 1 unless exactly those are found; `pnpm layout` runs it first.
 */
import { parseCircular, parseDependencyTree } from 'dpdm';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, sep } from 'node:path';
import { checkDesign, selfTestDesign } from './check-design.js';
import { formatMeasures, measure, OWNER_HOME, type Measures } from './layout-measures.js';

/** The most lines a source file may have. */
export const MAX_LINES = 600;

/** A source file over {@link MAX_LINES}. */
export interface Oversized {
  readonly file: string;
  readonly lines: number;
}

/** What the checks found; both lists empty means the layout passes. */
export interface LayoutReport {
  readonly files: number;
  readonly cycles: readonly (readonly string[])[];
  readonly oversized: readonly Oversized[];
}

/** Lines of a text as `wc -l` counts them, plus a last line without a newline. */
export function countLines(text: string): number {
  if (text === '') return 0;
  const newlines = text.split('\n').length - 1;
  return text.endsWith('\n') ? newlines : newlines + 1;
}

/** The files of `sizes` over `max` lines, largest first. */
export function findOversized(
  sizes: ReadonlyMap<string, number>,
  max: number = MAX_LINES,
): Oversized[] {
  return [...sizes]
    .filter(([, lines]) => lines > max)
    .map(([file, lines]) => ({ file, lines }))
    .sort((a, b) => b.lines - a.lines || a.file.localeCompare(b.file));
}

/** Every `.ts` file (not `.d.ts`) under `dir`, recursively, sorted. */
export function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...sourceFiles(path));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(path);
  }
  return out.sort();
}

/** The `src` directories of `root/packages/*`. */
export function packageSourceDirs(root: string): string[] {
  const packages = join(root, 'packages');
  return readdirSync(packages)
    .map((name) => join(packages, name, 'src'))
    .filter((dir) => {
      try {
        return statSync(dir).isDirectory();
      } catch {
        return false;
      }
    })
    .sort();
}

/** Options of {@link checkLayout}. */
export interface CheckLayoutOptions {
  /** Resolves imports (paths, `.js` → `.ts`). @default no tsconfig (relative imports only) */
  readonly tsconfig?: string;
  /** Drop type-only imports from the cycle check. @default false */
  readonly ignoreTypeImports?: boolean;
  /** @default MAX_LINES */
  readonly maxLines?: number;
}

/** Runs both checks over `files` (absolute paths); paths in the report are relative to `root`. */
export async function checkLayout(
  root: string,
  files: readonly string[],
  options: CheckLayoutOptions = {},
): Promise<LayoutReport> {
  const rel = (file: string): string => relative(root, file).split(sep).join('/');
  const sizes = new Map(files.map((file) => [rel(file), countLines(readFileSync(file, 'utf8'))]));
  const tree = await parseDependencyTree([...files], {
    context: root,
    cwd: root,
    tsconfig: options.tsconfig,
    transform: options.ignoreTypeImports === true,
    skipDynamicImports: false,
  });
  const cycles = parseCircular(tree).map((cycle) => cycle.map((file) => rel(join(root, file))));
  return { files: files.length, cycles, oversized: findOversized(sizes, options.maxLines) };
}

/** The report as the lines `pnpm layout` prints. */
export function formatReport(report: LayoutReport, maxLines: number = MAX_LINES): string[] {
  const lines = [`layout: ${report.files} source files checked`];
  if (report.cycles.length === 0) lines.push('cycles: none');
  else {
    lines.push(`cycles: ${report.cycles.length} (each file imports the next, the last the first)`);
    report.cycles.forEach((cycle, i) => {
      lines.push(`  ${i + 1}) ${[...cycle, cycle[0]].join(' -> ')}`);
    });
  }
  if (report.oversized.length === 0) lines.push(`files over ${maxLines} lines: none`);
  else {
    lines.push(`files over ${maxLines} lines: ${report.oversized.length}`);
    for (const { file, lines: n } of report.oversized) lines.push(`  ${file}: ${n} lines`);
  }
  return lines;
}

/** Directories (relative to a package) whose files may import `@modelcontextprotocol/*`. */
export const SDK_HOMES: Readonly<Record<string, readonly string[]>> = {
  binding: [],
  runtime: ['src/sdk/', 'src/era/', 'src/transports/'],
  testkit: ['src/'],
};

/**
 * Files allowed to import the SDK outside {@link SDK_HOMES}: none. A file added here is a
 * decision to write down in DESIGN §1, not a fix.
 */
export const SDK_ALLOWLIST: readonly string[] = [];

/**
 * Writes to members of the per-server owner class allowed outside `packages/runtime/src/server/`:
 * none. Its state is written only through its methods.
 */
export const OWNER_WRITES_ALLOWED = 0;

/** Files importing the SDK outside their package's {@link SDK_HOMES} and not in `allowlist`. */
export function sdkOffenders(
  measures: Measures,
  homes: Readonly<Record<string, readonly string[]>> = SDK_HOMES,
  allowlist: readonly string[] = SDK_ALLOWLIST,
): string[] {
  return measures.packages.flatMap((p) =>
    p.sdkImporters.filter((file) => {
      const inPackage = file.slice(`packages/${p.package}/`.length);
      return (
        !(homes[p.package] ?? []).some((home) => inPackage.startsWith(home)) &&
        !allowlist.includes(file)
      );
    }),
  );
}

/** One row of a README's file table: where it is and what its first cell names. */
interface TableRow {
  readonly line: number;
  readonly cells: readonly string[];
}

/** Heading of the section that holds a package README's file table. */
export const FILE_TABLE_HEADING = /^#{1,6} Which file owns what/;

/**
 * The files a package README's file table lists, relative to the package's `src/`, and its format
 * errors. The table is the first markdown table after a heading that starts with "Which file owns
 * what". The first cell of each row holds one or more backticked paths relative to `src/`,
 * separated by commas, and nothing else:
 *
 * - an entry ending in `.ts` names one file (`call/prepared.ts`);
 * - an entry ending in `/` names a directory (`era/`) and stands for exactly the files its row's
 *   second cell names in backticks relative to that directory (`` `http.ts` ``, `` `mrtr.ts` ``):
 *   a directory row lists its files; it never covers a file it does not name. A directory entry
 *   is alone in its row's first cell.
 */
export function readFileTable(readme: string): { listed: string[]; errors: string[] } {
  const lines = readme.split('\n');
  const heading = lines.findIndex((line) => FILE_TABLE_HEADING.test(line));
  if (heading < 0) return { listed: [], errors: ['no "Which file owns what" heading'] };
  const rows: TableRow[] = [];
  let i = heading + 1;
  while (i < lines.length && !(lines[i] ?? '').startsWith('|')) i += 1;
  for (; i < lines.length && (lines[i] ?? '').startsWith('|'); i += 1) {
    const cells = (lines[i] ?? '')
      .replace(/^\|/, '')
      .replace(/\|\s*$/, '')
      .split(/(?<!\\)\|/)
      .map((cell) => cell.trim());
    rows.push({ line: i + 1, cells });
  }
  if (rows.length < 3) return { listed: [], errors: ['the file table has no rows'] };
  const listed: string[] = [];
  const errors: string[] = [];
  for (const { line, cells } of rows.slice(2)) {
    const first = cells[0] ?? '';
    if (!/^`[^`]+`(, `[^`]+`)*$/.test(first)) {
      errors.push(
        `line ${line}: the first cell must be backticked paths relative to src/, got ${first}`,
      );
      continue;
    }
    const entries = first.split(', ').map((e) => e.slice(1, -1));
    if (entries.length > 1 && entries.some((e) => e.endsWith('/'))) {
      errors.push(`line ${line}: a directory entry must be alone in its row, got ${first}`);
      continue;
    }
    for (const entry of entries) {
      if (entry.endsWith('.ts')) listed.push(entry);
      else if (entry.endsWith('/')) {
        const named = [...(cells[1] ?? '').matchAll(/`([\w./-]+\.ts)`/g)].map((m) => m[1] ?? '');
        if (named.length === 0) errors.push(`line ${line}: directory ${entry} names no file`);
        listed.push(...named.map((name) => `${entry}${name}`));
      } else errors.push(`line ${line}: ${entry} is neither a .ts file nor a directory/`);
    }
  }
  return { listed, errors };
}

/**
 * The README file-table problems of one package: format errors, source files not listed, listed
 * files that do not exist, files listed twice. `files` are relative to `src/`.
 */
export function fileTableProblems(
  pkg: string,
  readme: string | undefined,
  files: readonly string[],
): string[] {
  if (readme === undefined) return [`packages/${pkg}/README.md: missing`];
  const { listed, errors } = readFileTable(readme);
  const where = `packages/${pkg}/README.md`;
  const problems = errors.map((e) => `${where}: ${e}`);
  const seen = new Set<string>();
  for (const file of listed) {
    if (seen.has(file)) problems.push(`${where}: src/${file} is listed twice`);
    seen.add(file);
    if (!files.includes(file)) problems.push(`${where}: lists src/${file}, which does not exist`);
  }
  for (const file of files) {
    if (!seen.has(file)) problems.push(`${where}: src/${file} is not in the file table`);
  }
  return problems;
}

/** Everything `pnpm layout` checks and measures over one repository. */
export interface FullReport {
  readonly layout: LayoutReport;
  readonly measures: Measures;
  /** Rule violations beyond cycles and sizes, one sentence each. */
  readonly problems: readonly string[];
}

/** Options of {@link checkRepository}: the rule constants, replaceable for the self-test. */
export interface CheckRepositoryOptions extends CheckLayoutOptions {
  /** @default SDK_HOMES */
  readonly sdkHomes?: Readonly<Record<string, readonly string[]>>;
  /** @default SDK_ALLOWLIST */
  readonly sdkAllowlist?: readonly string[];
  /** @default OWNER_WRITES_ALLOWED */
  readonly ownerWritesAllowed?: number;
}

/** Runs every check and measure over the packages under `root/packages`. */
export async function checkRepository(
  root: string,
  options: CheckRepositoryOptions = {},
): Promise<FullReport> {
  const dirs = packageSourceDirs(root);
  const files = dirs.flatMap((dir) => sourceFiles(dir));
  const tsconfig = options.tsconfig ?? join(root, 'tsconfig.check.json');
  const layout = await checkLayout(root, files, { ...options, tsconfig });
  const measures = measure(root, files, tsconfig);
  const problems: string[] = [];
  for (const file of sdkOffenders(measures, options.sdkHomes, options.sdkAllowlist)) {
    problems.push(
      `${file} imports @modelcontextprotocol/*: only the runtime's src/sdk/, src/era/ and src/transports/ (and the testkit) may`,
    );
  }
  const allowed = options.ownerWritesAllowed ?? OWNER_WRITES_ALLOWED;
  if (measures.ownerWrites.length > allowed) {
    problems.push(
      `${measures.ownerWrites.length} writes to members of ${measures.ownerClass ?? 'the owner class'} outside ${OWNER_HOME} (at most ${allowed}): call its methods instead`,
    );
    for (const w of measures.ownerWrites) problems.push(`  ${w.file}:${w.line} writes ${w.target}`);
  }
  for (const dir of dirs) {
    const pkg = relative(join(root, 'packages'), dirname(dir));
    const readmePath = join(dirname(dir), 'README.md');
    const readme = existsSync(readmePath) ? readFileSync(readmePath, 'utf8') : undefined;
    const inSrc = sourceFiles(dir).map((file) => relative(dir, file).split(sep).join('/'));
    problems.push(...fileTableProblems(pkg, readme, inSrc));
  }
  return { layout, measures, problems };
}

const failed = (report: LayoutReport): boolean =>
  report.cycles.length > 0 || report.oversized.length > 0;

const failedAll = (report: FullReport): boolean =>
  failed(report.layout) || report.problems.length > 0;

/**
 * Checks that the checks catch what they must: a synthetic package with a two-file cycle
 * (`a.ts` ↔ `b.ts`, one import type-only) and a 601-line file, and a clean one beside it.
 *
 * @returns the problems with the checks themselves; empty when they work.
 */
export async function selfTest(): Promise<string[]> {
  const root = mkdtempSync(join(tmpdir(), 'stepbind-layout-selftest-'));
  const problems: string[] = [];
  try {
    const write = (file: string, text: string): string => {
      const path = join(root, file);
      writeFileSync(path, text);
      return path;
    };
    const bad = [
      write('a.ts', "import { b } from './b.js';\nexport const a = (): number => b + 1;\n"),
      write(
        'b.ts',
        "import type { a } from './a.js';\nexport const b = 1;\nexport type A = typeof a;\n",
      ),
      write(
        'big.ts',
        Array.from({ length: 601 }, (_, i) => `export const v${i} = ${i};`).join('\n'),
      ),
      write('edge.ts', `${Array.from({ length: 600 }, (_, i) => `// ${i}`).join('\n')}\n`),
    ];
    const tsconfig = write(
      'tsconfig.json',
      JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext' } }),
    );
    const report = await checkLayout(root, bad, { tsconfig });
    const cycle = report.cycles.map((c) => [...c].sort().join(','));
    if (JSON.stringify(cycle) !== JSON.stringify(['a.ts,b.ts'])) {
      problems.push(`expected the cycle a.ts <-> b.ts, found ${JSON.stringify(report.cycles)}`);
    }
    if (JSON.stringify(report.oversized) !== JSON.stringify([{ file: 'big.ts', lines: 601 }])) {
      problems.push(`expected big.ts (601 lines) alone, found ${JSON.stringify(report.oversized)}`);
    }
    const typeOnly = await checkLayout(root, bad, { tsconfig, ignoreTypeImports: true });
    if (typeOnly.cycles.length !== 0) {
      problems.push(`--ignore-type-imports still reports ${JSON.stringify(typeOnly.cycles)}`);
    }
    const clean = await checkLayout(
      root,
      [write('c.ts', "import './edge.js';\nexport const c = 1;\n"), bad[3] as string],
      { tsconfig },
    );
    if (failed(clean)) problems.push(`a clean tree fails: ${formatReport(clean).join(' | ')}`);
    if (!formatReport(report).some((line) => line.includes('big.ts: 601 lines'))) {
      problems.push('the printed report does not name big.ts');
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  return problems;
}

/** Writes `files` (path relative to `root` → text) under `root`, creating directories. */
function writeTree(root: string, files: Readonly<Record<string, string>>): void {
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
}

const table = (rows: readonly (readonly [string, string])[]): string =>
  [
    '# pkg',
    '',
    '## Which file owns what (`src/`)',
    '',
    '| file | owns |',
    '| --- | --- |',
    ...rows.map(([file, owns]) => `| ${file} | ${owns} |`),
    '',
  ].join('\n');

/**
 * Checks the measures and rules over a synthetic two-package repository with known answers: an
 * SDK type import in binding (forbidden) and one in the runtime's `src/sdk/` (allowed), three
 * writes to `ManagedServer` members from outside `src/server/` (one nested, one `++`, one `+=`)
 * beside a write to a look-alike object, a README that misses a file and lists a removed one.
 *
 * @returns the problems with the checks themselves; empty when they work.
 */
export async function selfTestRepository(): Promise<string[]> {
  const root = mkdtempSync(join(tmpdir(), 'stepbind-layout-selftest-repo-'));
  const problems: string[] = [];
  const expect = (what: string, actual: unknown, expected: unknown): void => {
    if (JSON.stringify(actual) !== JSON.stringify(expected)) {
      problems.push(
        `${what}: expected ${JSON.stringify(expected)}, found ${JSON.stringify(actual)}`,
      );
    }
  };
  try {
    const body = Array.from({ length: 8 }, (_, i) => `  n += ${i};`).join('\n');
    writeTree(root, {
      'tsconfig.json': JSON.stringify({
        compilerOptions: {
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          types: [],
        },
      }),
      'packages/binding/package.json': JSON.stringify({
        exports: { '.': { types: './dist/index.d.ts' } },
      }),
      'packages/binding/src/index.ts': [
        "import type { Tool } from '@modelcontextprotocol/sdk/types.js';",
        'export type T = Tool;',
        'export interface I { readonly x: number }',
        'export const a = 1;',
        "export { b } from './b.js';",
        '',
      ].join('\n'),
      'packages/binding/src/b.ts': "import { c } from './c.js';\nexport const b = c;\n",
      'packages/binding/src/c.ts': `export const c = 1;\nexport function big(): number {\n  let n = 0;\n${body}\n  return n;\n}\n`,
      'packages/binding/README.md': table([
        ['`index.ts`, `b.ts`', 'entry'],
        ['`gone.ts`', 'removed'],
      ]),
      'packages/runtime/package.json': JSON.stringify({
        exports: { '.': { types: './dist/use.d.ts' } },
      }),
      'packages/runtime/src/server/managed-server.ts': [
        'export class ManagedServer {',
        '  refs = 0;',
        '  readonly recovery = { attempts: 0 };',
        '  bump(): void {',
        '    this.refs += 1;',
        '  }',
        '}',
        '',
      ].join('\n'),
      'packages/runtime/src/sdk/client.ts':
        "import type { Client } from '@modelcontextprotocol/sdk/client/index.js';\nexport type C = Client;\n",
      'packages/runtime/src/use.ts': [
        "import type { ManagedServer } from './server/managed-server.js';",
        'export function use(s: ManagedServer): void {',
        '  s.refs = 1;',
        '  s.refs++;',
        '  s.recovery.attempts += 1;',
        '  const o = { refs: 0 };',
        '  o.refs = 2;',
        '}',
        '',
      ].join('\n'),
      'packages/runtime/README.md': table([
        ['`server/`', '`managed-server.ts`: the owner'],
        ['`sdk/`', '`client.ts`: the adapter'],
        ['`use.ts`', 'writes'],
      ]),
    });
    const tsconfig = join(root, 'tsconfig.json');
    const report = await checkRepository(root, {
      tsconfig,
      sdkAllowlist: [],
      ownerWritesAllowed: 0,
    });
    const [binding, runtime] = report.measures.packages;
    expect('binding import edges and depth', [binding?.importEdges, binding?.importDepth], [2, 3]);
    expect('binding exports', binding?.exports, [
      { entry: '.', file: 'packages/binding/src/index.ts', values: 2, types: 2, total: 4 },
    ]);
    expect('largest function', binding?.largestFunctions[0], {
      name: 'big',
      file: 'packages/binding/src/c.ts',
      line: 2,
      lines: 12,
    });
    expect(
      'SDK importers',
      [binding?.sdkImporters, runtime?.sdkImporters],
      [['packages/binding/src/index.ts'], ['packages/runtime/src/sdk/client.ts']],
    );
    expect(
      'owner class',
      report.measures.ownerClass,
      'packages/runtime/src/server/managed-server.ts#ManagedServer',
    );
    expect(
      'owner writes',
      report.measures.ownerWrites.map((w) => `${w.line}:${w.target}`),
      ['3:s.refs', '4:s.refs', '5:s.recovery.attempts'],
    );
    expect('problems', report.problems, [
      "packages/binding/src/index.ts imports @modelcontextprotocol/*: only the runtime's src/sdk/, src/era/ and src/transports/ (and the testkit) may",
      `3 writes to members of packages/runtime/src/server/managed-server.ts#ManagedServer outside ${OWNER_HOME} (at most 0): call its methods instead`,
      '  packages/runtime/src/use.ts:3 writes s.refs',
      '  packages/runtime/src/use.ts:4 writes s.refs',
      '  packages/runtime/src/use.ts:5 writes s.recovery.attempts',
      'packages/binding/README.md: lists src/gone.ts, which does not exist',
      'packages/binding/README.md: src/c.ts is not in the file table',
    ]);
    const allowed = await checkRepository(root, {
      tsconfig,
      sdkAllowlist: ['packages/binding/src/index.ts'],
      ownerWritesAllowed: 3,
    });
    expect(
      'problems with the allowlist and threshold',
      allowed.problems.filter((p) => !p.includes('README')),
      [],
    );
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  return problems;
}

async function main(argv: readonly string[]): Promise<number> {
  if (argv.includes('--self-test')) {
    const problems = [...(await selfTest()), ...(await selfTestRepository()), ...selfTestDesign()];
    for (const p of problems) console.error(`layout self-test: ${p}`);
    // stderr, so that `pnpm layout --json` (self-test first) keeps stdout for the JSON alone.
    console.error(`layout self-test: ${problems.length === 0 ? 'ok' : 'FAILED'}`);
    return problems.length === 0 ? 0 : 1;
  }
  const root = process.cwd();
  const report = await checkRepository(root, {
    tsconfig: join(root, 'tsconfig.check.json'),
    ignoreTypeImports: argv.includes('--ignore-type-imports'),
  });
  const design = checkDesign(root);
  const ok = !failedAll(report) && design.length === 0;
  if (argv.includes('--json')) {
    console.log(JSON.stringify({ ...report, design, ok }, null, 2));
    return ok ? 0 : 1;
  }
  const out = [...formatReport(report.layout), ...formatMeasures(report.measures)];
  console.log(out.join('\n'));
  if (report.problems.length > 0) {
    console.error(`layout rules: ${report.problems.length} problems`);
    for (const p of report.problems) console.error(`  ${p}`);
  } else console.log('layout rules: SDK imports, owner writes and README file tables ok');
  if (design.length > 0) {
    console.error(`design: ${design.length} problems in docs/DESIGN.md §3`);
    for (const p of design) console.error(`  ${p}`);
  } else console.log('design: every invariant names its file, test and mutant, and they exist');
  if (!ok) {
    if (failed(report.layout)) console.error(formatReport(report.layout).join('\n'));
    console.error('layout: FAILED');
    return 1;
  }
  console.log('layout: ok');
  return 0;
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) {
  process.exitCode = await main(process.argv.slice(2));
}
