/**
 * `pnpm layout`: the repository's layout rules, checked over every `packages/*\/src/**\/*.ts` file.
 *
 * - **No import cycles** (dpdm, type-only imports included: two files that import each other, even
 *   for types, cannot be read apart). `--ignore-type-imports` drops type-only imports.
 * - **No source file over 600 lines** (a file a reader can take in at once).
 *
 * Prints every offender (the cycle's files in import order; the file and its line count) and exits
 * 1 if there is one. `--self-test` runs both checks over a synthetic tree with a known cycle and a
 * known oversized file (and over a clean one) and exits 1 unless they are found (and only they).
 */
import { parseCircular, parseDependencyTree } from 'dpdm';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, sep } from 'node:path';

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

const failed = (report: LayoutReport): boolean =>
  report.cycles.length > 0 || report.oversized.length > 0;

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

async function main(argv: readonly string[]): Promise<number> {
  if (argv.includes('--self-test')) {
    const problems = await selfTest();
    for (const p of problems) console.error(`layout self-test: ${p}`);
    console.log(`layout self-test: ${problems.length === 0 ? 'ok' : 'FAILED'}`);
    return problems.length === 0 ? 0 : 1;
  }
  const root = process.cwd();
  const files = packageSourceDirs(root).flatMap((dir) => sourceFiles(dir));
  const report = await checkLayout(root, files, {
    tsconfig: join(root, 'tsconfig.check.json'),
    ignoreTypeImports: argv.includes('--ignore-type-imports'),
  });
  const out = formatReport(report);
  if (failed(report)) {
    console.error(out.join('\n'));
    console.error('layout: FAILED');
    return 1;
  }
  console.log(out.join('\n'));
  console.log('layout: ok');
  return 0;
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) {
  process.exitCode = await main(process.argv.slice(2));
}
