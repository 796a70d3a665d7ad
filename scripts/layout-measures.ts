/**
 * The measures `pnpm layout` prints (and `--json` emits) per package, over one TypeScript program of
 * every `packages/*\/src/**\/*.ts` file:
 *
 * - the package's import graph: files, edges (distinct importer → imported pairs inside the
 *   package's `src`, type-only imports and `import()` types included) and depth (files on the
 *   longest import chain);
 * - its largest functions (name, file, first line, lines);
 * - the names each entry point of its `package.json` `exports` exports (values and types);
 * - its files that import `@modelcontextprotocol/*` (value or type);
 * - writes to members of the runtime's per-server owner class (`ManagedServer`, formerly
 *   `ServerSession`) from files outside `packages/runtime/src/server/`.
 *
 * The rules built on them (which files may import the SDK, how many owner writes may remain) live
 * in `check-layout.ts`.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import ts from 'typescript';

/** Names of the runtime's per-server owner class, the current one first. */
export const OWNER_CLASS_NAMES: readonly string[] = ['ManagedServer', 'ServerSession'];

/** Where the owner class's own code lives; writes inside it are the owner's. */
export const OWNER_HOME = 'packages/runtime/src/server/';

/** How many of the largest functions are listed per package. */
export const LARGEST_FUNCTIONS = 10;

/**
 * One function (declaration, method, accessor, constructor, arrow or function expression), from
 * its first to its last line; a nested function is counted on its own and inside its parent.
 */
export interface FunctionSize {
  readonly name: string;
  readonly file: string;
  readonly line: number;
  readonly lines: number;
}

/** The names one entry point of `package.json` `exports` exports. */
export interface EntryPointExports {
  /** The subpath (`.`, `./internal`, ...). */
  readonly entry: string;
  /** The source file behind it (its `types` path, `dist/*.d.ts` → `src/*.ts`). */
  readonly file: string;
  readonly values: number;
  readonly types: number;
  readonly total: number;
}

/** One write to a member of the owner class. */
export interface OwnerWrite {
  readonly file: string;
  readonly line: number;
  /** The written expression as written (`session.recovery.attempts`). */
  readonly target: string;
  /** The owner member the write goes through (`recovery`). */
  readonly member: string;
}

/** The measures of one package. */
export interface PackageMeasures {
  readonly package: string;
  readonly files: number;
  readonly importEdges: number;
  /** Files on the longest import chain (a file importing nothing has depth 1). */
  readonly importDepth: number;
  /** The longest import chain, importer first. */
  readonly longestChain: readonly string[];
  readonly largestFunctions: readonly FunctionSize[];
  readonly exports: readonly EntryPointExports[];
  /** Files importing `@modelcontextprotocol/*`, relative to the repository root. */
  readonly sdkImporters: readonly string[];
}

/** Everything `pnpm layout` measures. */
export interface Measures {
  readonly packages: readonly PackageMeasures[];
  /** The owner class found (`file#Name`), or `undefined` when neither name is declared. */
  readonly ownerClass: string | undefined;
  /** Writes to owner members outside {@link OWNER_HOME}. */
  readonly ownerWrites: readonly OwnerWrite[];
}

/** Compiler options of a tsconfig file (its `paths` resolve the workspace packages to `src`). */
export function compilerOptionsOf(tsconfig: string): ts.CompilerOptions {
  const read = ts.readConfigFile(tsconfig, (path) => ts.sys.readFile(path));
  if (read.error !== undefined) {
    throw new Error(ts.flattenDiagnosticMessageText(read.error.messageText, '\n'));
  }
  const parsed = ts.parseJsonConfigFileContent(read.config, ts.sys, dirname(tsconfig));
  return { ...parsed.options, noEmit: true };
}

const isSdk = (specifier: string): boolean => specifier.startsWith('@modelcontextprotocol/');

/** Every module specifier of a file: imports, re-exports, `import()` calls and types. */
export function moduleSpecifiers(file: ts.SourceFile): string[] {
  const out: string[] = [];
  const visit = (node: ts.Node): void => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier !== undefined &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      out.push(node.moduleSpecifier.text);
    } else if (
      ts.isImportTypeNode(node) &&
      ts.isLiteralTypeNode(node.argument) &&
      ts.isStringLiteral(node.argument.literal)
    ) {
      out.push(node.argument.literal.text);
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] !== undefined &&
      ts.isStringLiteralLike(node.arguments[0])
    ) {
      out.push(node.arguments[0].text);
    } else if (
      ts.isImportEqualsDeclaration(node) &&
      ts.isExternalModuleReference(node.moduleReference) &&
      ts.isStringLiteral(node.moduleReference.expression)
    ) {
      out.push(node.moduleReference.expression.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return out;
}

/** Files on the longest chain of `graph` (importer → imported), and that chain; cycles are cut. */
export function longestChain(graph: ReadonlyMap<string, ReadonlySet<string>>): string[] {
  const memo = new Map<string, string[]>();
  const onStack = new Set<string>();
  const chainFrom = (node: string): string[] => {
    const known = memo.get(node);
    if (known !== undefined) return known;
    onStack.add(node);
    let best: string[] = [];
    for (const next of [...(graph.get(node) ?? [])].sort()) {
      if (onStack.has(next)) continue;
      const chain = chainFrom(next);
      if (chain.length > best.length) best = chain;
    }
    onStack.delete(node);
    const chain = [node, ...best];
    memo.set(node, chain);
    return chain;
  };
  let best: string[] = [];
  for (const node of [...graph.keys()].sort()) {
    const chain = chainFrom(node);
    if (chain.length > best.length) best = chain;
  }
  return best;
}

/** The name a reader would search for: `f`, `Class.method`, `const x = () => ...` → `x`. */
function functionName(node: ts.FunctionLikeDeclaration): string {
  const own = (name: ts.Node | undefined): string | undefined =>
    name !== undefined &&
    (ts.isIdentifier(name) || ts.isPrivateIdentifier(name) || ts.isStringLiteral(name))
      ? name.text
      : undefined;
  const inClass = (name: string): string => {
    const parent = node.parent;
    return ts.isClassLike(parent) && parent.name !== undefined
      ? `${parent.name.text}.${name}`
      : name;
  };
  if (ts.isConstructorDeclaration(node)) return inClass('constructor');
  const direct = own(node.name);
  if (direct !== undefined) {
    if (ts.isGetAccessor(node)) return inClass(`get ${direct}`);
    if (ts.isSetAccessor(node)) return inClass(`set ${direct}`);
    return inClass(direct);
  }
  const parent = node.parent;
  if (
    ts.isVariableDeclaration(parent) ||
    ts.isPropertyAssignment(parent) ||
    ts.isPropertyDeclaration(parent)
  ) {
    const name = own(parent.name);
    if (name !== undefined) return ts.isPropertyDeclaration(parent) ? inClass(name) : name;
  }
  if (ts.isNewExpression(parent) && ts.isIdentifier(parent.expression)) {
    return `(callback of new ${parent.expression.text})`;
  }
  if (ts.isCallExpression(parent) && ts.isPropertyAccessExpression(parent.expression)) {
    return `(callback of ${parent.expression.name.text})`;
  }
  return '(anonymous)';
}

/** Every function of a file with its size in lines. */
export function functionSizes(file: ts.SourceFile, path: string): FunctionSize[] {
  const out: FunctionSize[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
      const fn = node;
      const first = file.getLineAndCharacterOfPosition(fn.getStart(file)).line;
      const last = file.getLineAndCharacterOfPosition(fn.getEnd()).line;
      out.push({ name: functionName(fn), file: path, line: first + 1, lines: last - first + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return out;
}

/** `./dist/x.d.ts` (or `.js`) of a package → its `src/x.ts`. */
function sourceOfEntry(packageDir: string, target: unknown): string | undefined {
  const pick = (value: unknown): string | undefined => {
    if (typeof value === 'string') return value;
    if (typeof value === 'object' && value !== null) {
      const record = value as Record<string, unknown>;
      return pick(record.types) ?? pick(record.import) ?? pick(record.default);
    }
    return undefined;
  };
  const path = pick(target);
  if (path === undefined || !/\.(d\.ts|js)$/.test(path)) return undefined;
  const src = path.replace(/^\.\/dist\//, 'src/').replace(/\.d\.ts$|\.js$/, '.ts');
  return join(packageDir, src);
}

/** The value and type names exported by one module (aliases followed; `export type` counts as a type). */
function countExports(
  checker: ts.TypeChecker,
  file: ts.SourceFile,
): { values: number; types: number } {
  const module = checker.getSymbolAtLocation(file);
  if (module === undefined) return { values: 0, types: 0 };
  let values = 0;
  let types = 0;
  for (const symbol of checker.getExportsOfModule(module)) {
    const typeOnly = (symbol.declarations ?? []).some(
      (d) =>
        (ts.isExportSpecifier(d) && (d.isTypeOnly || d.parent.parent.isTypeOnly)) ||
        ts.isTypeAliasDeclaration(d) ||
        ts.isInterfaceDeclaration(d),
    );
    const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
    if (!typeOnly && (target.flags & ts.SymbolFlags.Value) !== 0) values += 1;
    else types += 1;
  }
  return { values, types };
}

/** The class declaration named one of {@link OWNER_CLASS_NAMES} in `files`, the first name first. */
function findOwnerClass(
  program: ts.Program,
  files: readonly string[],
): ts.ClassDeclaration | undefined {
  for (const name of OWNER_CLASS_NAMES) {
    for (const path of files) {
      const file = program.getSourceFile(path);
      if (file === undefined) continue;
      for (const statement of file.statements) {
        if (ts.isClassDeclaration(statement) && statement.name?.text === name) return statement;
      }
    }
  }
  return undefined;
}

const ASSIGNMENTS = new Set<ts.SyntaxKind>([
  ts.SyntaxKind.EqualsToken,
  ts.SyntaxKind.PlusEqualsToken,
  ts.SyntaxKind.MinusEqualsToken,
  ts.SyntaxKind.AsteriskEqualsToken,
  ts.SyntaxKind.AsteriskAsteriskEqualsToken,
  ts.SyntaxKind.SlashEqualsToken,
  ts.SyntaxKind.PercentEqualsToken,
  ts.SyntaxKind.LessThanLessThanEqualsToken,
  ts.SyntaxKind.GreaterThanGreaterThanEqualsToken,
  ts.SyntaxKind.GreaterThanGreaterThanGreaterThanEqualsToken,
  ts.SyntaxKind.AmpersandEqualsToken,
  ts.SyntaxKind.BarEqualsToken,
  ts.SyntaxKind.CaretEqualsToken,
  ts.SyntaxKind.BarBarEqualsToken,
  ts.SyntaxKind.AmpersandAmpersandEqualsToken,
  ts.SyntaxKind.QuestionQuestionEqualsToken,
]);

/** The targets a node writes: `x.a = `, `x.a += `, `x.a++`, `--x.a`, `delete x.a`. */
function writtenTarget(node: ts.Node): ts.Expression | undefined {
  if (ts.isBinaryExpression(node) && ASSIGNMENTS.has(node.operatorToken.kind)) return node.left;
  if (
    (ts.isPrefixUnaryExpression(node) || ts.isPostfixUnaryExpression(node)) &&
    (node.operator === ts.SyntaxKind.PlusPlusToken ||
      node.operator === ts.SyntaxKind.MinusMinusToken)
  ) {
    return node.operand;
  }
  if (ts.isDeleteExpression(node)) return node.expression;
  return undefined;
}

/** Whether `symbol` is a member declared by `owner` (property, parameter property, accessor). */
function isOwnerMember(symbol: ts.Symbol, owner: ts.ClassDeclaration): boolean {
  return (symbol.declarations ?? []).some(
    (d) =>
      d.parent === owner ||
      (ts.isParameter(d) && ts.isConstructorDeclaration(d.parent) && d.parent.parent === owner),
  );
}

/** The owner member a written expression goes through (`s.recovery.attempts` → `recovery`). */
function ownerMemberOf(
  checker: ts.TypeChecker,
  target: ts.Expression,
  owner: ts.ClassDeclaration,
): string | undefined {
  let node: ts.Expression = target;
  for (;;) {
    while (ts.isParenthesizedExpression(node) || ts.isNonNullExpression(node))
      node = node.expression;
    if (ts.isPropertyAccessExpression(node)) {
      const symbol = checker.getSymbolAtLocation(node.name);
      if (symbol !== undefined && isOwnerMember(symbol, owner)) return node.name.text;
      node = node.expression;
    } else if (ts.isElementAccessExpression(node)) {
      const symbol = checker.getSymbolAtLocation(node.argumentExpression);
      if (symbol !== undefined && isOwnerMember(symbol, owner)) return symbol.name;
      node = node.expression;
    } else {
      return undefined;
    }
  }
}

/** Measures every package under `root/packages` over `files` (absolute paths of their sources). */
export function measure(root: string, files: readonly string[], tsconfig: string): Measures {
  const rel = (file: string): string => relative(root, file).split(sep).join('/');
  const options = compilerOptionsOf(tsconfig);
  const program = ts.createProgram({ rootNames: [...files], options });
  const checker = program.getTypeChecker();
  const host: ts.ModuleResolutionHost = ts.sys;
  const packageOf = (path: string): string | undefined =>
    /^packages\/([^/]+)\/src\//.exec(path)?.[1];

  const byPackage = new Map<string, string[]>();
  for (const file of files) {
    const pkg = packageOf(rel(file));
    if (pkg === undefined) continue;
    byPackage.set(pkg, [...(byPackage.get(pkg) ?? []), file]);
  }

  const owner = findOwnerClass(program, files);
  const ownerWrites: OwnerWrite[] = [];
  const packages: PackageMeasures[] = [];
  for (const [pkg, pkgFiles] of [...byPackage].sort(([a], [b]) => a.localeCompare(b))) {
    const graph = new Map<string, Set<string>>();
    const sdkImporters: string[] = [];
    const functions: FunctionSize[] = [];
    let importEdges = 0;
    for (const path of pkgFiles) {
      const file = program.getSourceFile(path);
      if (file === undefined) continue;
      const from = rel(path);
      const edges = new Set<string>();
      const specifiers = moduleSpecifiers(file);
      if (specifiers.some(isSdk)) sdkImporters.push(from);
      for (const specifier of specifiers) {
        const resolved = ts.resolveModuleName(specifier, path, options, host).resolvedModule;
        if (resolved === undefined) continue;
        const to = rel(resolved.resolvedFileName);
        if (packageOf(to) === pkg && to !== from) edges.add(to);
      }
      graph.set(from, edges);
      importEdges += edges.size;
      functions.push(...functionSizes(file, from));
      if (owner !== undefined && !from.startsWith(OWNER_HOME)) {
        const visit = (node: ts.Node): void => {
          const target = writtenTarget(node);
          const member = target === undefined ? undefined : ownerMemberOf(checker, target, owner);
          if (target !== undefined && member !== undefined) {
            const line = file.getLineAndCharacterOfPosition(node.getStart(file)).line + 1;
            ownerWrites.push({ file: from, line, target: target.getText(file), member });
          }
          ts.forEachChild(node, visit);
        };
        visit(file);
      }
    }
    const packageDir = join(root, 'packages', pkg);
    const manifest = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')) as {
      exports?: Record<string, unknown>;
    };
    const exports: EntryPointExports[] = [];
    for (const [entry, target] of Object.entries(manifest.exports ?? {})) {
      const source = sourceOfEntry(packageDir, target);
      const file = source === undefined ? undefined : program.getSourceFile(source);
      if (source === undefined || file === undefined) continue;
      const { values, types } = countExports(checker, file);
      exports.push({ entry, file: rel(source), values, types, total: values + types });
    }
    const chain = longestChain(graph);
    packages.push({
      package: pkg,
      files: pkgFiles.length,
      importEdges,
      importDepth: chain.length,
      longestChain: chain,
      largestFunctions: functions
        .sort((a, b) => b.lines - a.lines || a.file.localeCompare(b.file) || a.line - b.line)
        .slice(0, LARGEST_FUNCTIONS),
      exports,
      sdkImporters: sdkImporters.sort(),
    });
  }
  const ownerClass =
    owner === undefined || owner.name === undefined
      ? undefined
      : `${rel(owner.getSourceFile().fileName)}#${owner.name.text}`;
  return { packages, ownerClass, ownerWrites };
}

/** The measures as the lines `pnpm layout` prints. */
export function formatMeasures(measures: Measures): string[] {
  const lines: string[] = [];
  for (const p of measures.packages) {
    lines.push(
      `measures of ${p.package}: ${p.files} files, ${p.importEdges} import edges, import depth ${p.importDepth}`,
    );
    lines.push(`  longest import chain: ${p.longestChain.join(' -> ')}`);
    lines.push(
      `  exported names: ${p.exports.map((e) => `${e.entry} ${e.total} (${e.values} values, ${e.types} types)`).join('; ')}`,
    );
    lines.push(`  files importing @modelcontextprotocol/*: ${p.sdkImporters.length}`);
    for (const file of p.sdkImporters) lines.push(`    ${file}`);
    lines.push(`  largest functions:`);
    for (const f of p.largestFunctions)
      lines.push(`    ${f.lines} lines  ${f.name}  ${f.file}:${f.line}`);
  }
  const files = new Set(measures.ownerWrites.map((w) => w.file));
  lines.push(
    `owner class ${measures.ownerClass ?? '(not found)'}: ${measures.ownerWrites.length} member writes outside ${OWNER_HOME} from ${files.size} files`,
  );
  const perFile = new Map<string, number>();
  for (const w of measures.ownerWrites) perFile.set(w.file, (perFile.get(w.file) ?? 0) + 1);
  for (const [file, n] of [...perFile].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))) {
    lines.push(`    ${n}  ${file}`);
  }
  return lines;
}
