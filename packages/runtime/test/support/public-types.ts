import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/** The public entry points, as sources (`src`) and as the published declarations (`dist`). */
const ENTRY_POINTS = {
  src: ['../../src/index.ts', '../../src/adapters/ai-sdk.ts', '../../src/fleet/index.ts'],
  dist: ['../../dist/index.d.ts', '../../dist/adapters/ai-sdk.d.ts', '../../dist/fleet/index.d.ts'],
} as const;

/**
 * The public classes whose members a user calls: every named type their public members take or
 * return (recursively) is what a user holds or catches, so it must be importable.
 */
const ROOTS = ['McpRuntime', 'McpBinding', 'PreparedCall'] as const;

/**
 * Walks the public types of `@stepbind/runtime` with the TypeScript compiler: from the public
 * members of {@link ROOTS} (instance and static, skipping `private` and `@internal`), every type
 * they take or return, recursively through our own types. Returns the named types of our packages
 * so reached that no public entry point (root, `/ai-sdk`, `/fleet`) exports, each with the path
 * that reached it first. `Connection` is the seam of the `connect` option (`ServerConnector`): its
 * members are the connection layer's (`@stepbind/runtime/internal`), so the walk stops at it.
 *
 * `src` reads the sources through the repository's path mapping; `dist` reads the published
 * declarations as a consumer resolves them (run `tsc -b` first). `packages` names every package
 * under `node_modules` whose declarations the program loaded (`@types/node` aside): what a consumer
 * must have installed to compile against the entry points with `skipLibCheck: false`.
 */
export function unexportedReachableTypes(from: 'src' | 'dist'): {
  readonly walked: number;
  readonly missing: readonly string[];
  readonly diagnostics: readonly string[];
  readonly packages: readonly string[];
} {
  const here = (path: string): string => fileURLToPath(new URL(path, import.meta.url));
  const configPath = here('../../../../tsconfig.check.json');
  const config = ts.readConfigFile(configPath, (p) => ts.sys.readFile(p));
  const parsed = ts.parseJsonConfigFileContent(
    config.config,
    ts.sys,
    here('../../../../'),
    undefined,
    configPath,
  );
  const entries = ENTRY_POINTS[from].map(here);
  const options: ts.CompilerOptions =
    from === 'src'
      ? { ...parsed.options, noEmit: true }
      : {
          module: ts.ModuleKind.NodeNext,
          moduleResolution: ts.ModuleResolutionKind.NodeNext,
          target: ts.ScriptTarget.ES2022,
          lib: ['lib.es2023.d.ts', 'lib.esnext.disposable.d.ts'],
          types: ['node'],
          strict: true,
          noEmit: true,
          skipLibCheck: false,
        };
  const program = ts.createProgram(entries, options);
  const checker = program.getTypeChecker();
  const resolve = (symbol: ts.Symbol): ts.Symbol =>
    symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;

  const exported = new Set<ts.Symbol>();
  const rootSymbols: ts.Symbol[] = [];
  for (const entry of entries) {
    const source = program.getSourceFile(entry);
    const moduleSymbol = source === undefined ? undefined : checker.getSymbolAtLocation(source);
    if (moduleSymbol === undefined) throw new Error(`no module symbol for ${entry}`);
    for (const symbol of checker.getExportsOfModule(moduleSymbol)) {
      const target = resolve(symbol);
      exported.add(target);
      if ((ROOTS as readonly string[]).includes(symbol.name)) rootSymbols.push(target);
    }
  }
  const foundRoots = new Set(rootSymbols.map((s) => s.name));
  for (const root of ROOTS) if (!foundRoots.has(root)) throw new Error(`${root} is not exported`);

  const ours = (symbol: ts.Symbol): boolean =>
    (symbol.declarations ?? []).some((d) =>
      /[/\\]packages[/\\][^/\\]+[/\\](src|dist)[/\\]/.test(d.getSourceFile().fileName),
    );
  const opaque = new Set(['Connection']);
  const missing = new Map<string, string>();
  const seenTypes = new Set<ts.Type>();
  const seenSymbols = new Set<ts.Symbol>();

  const isInternal = (declaration: ts.Node | undefined): boolean =>
    declaration !== undefined &&
    ts.getJSDocTags(declaration).some((tag) => tag.tagName.text === 'internal');

  const visitSymbolMembers = (type: ts.Type, path: string): void => {
    for (const property of checker.getPropertiesOfType(type)) {
      const declaration = property.valueDeclaration ?? property.declarations?.[0];
      if (declaration === undefined || isInternal(declaration)) continue;
      const modifiers = ts.getCombinedModifierFlags(declaration);
      if (modifiers & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) continue;
      if (property.name.startsWith('#') || property.name.startsWith('__#')) continue;
      visitType(
        checker.getTypeOfSymbolAtLocation(property, declaration),
        `${path}.${property.name}`,
      );
    }
    for (const kind of [ts.SignatureKind.Call, ts.SignatureKind.Construct]) {
      for (const signature of checker.getSignaturesOfType(type, kind)) {
        const declaration = signature.getDeclaration() as ts.Declaration | undefined;
        if (isInternal(declaration)) continue;
        if (
          declaration !== undefined &&
          ts.getCombinedModifierFlags(declaration) & ts.ModifierFlags.Private
        )
          continue;
        for (const parameter of signature.getParameters()) {
          const declaration = parameter.valueDeclaration ?? parameter.declarations?.[0];
          if (declaration === undefined) continue;
          visitType(
            checker.getTypeOfSymbolAtLocation(parameter, declaration),
            `${path}(${parameter.name})`,
          );
        }
        visitType(signature.getReturnType(), `${path}()`);
      }
    }
    for (const info of checker.getIndexInfosOfType(type)) visitType(info.type, `${path}[]`);
  };

  const visitNamed = (symbol: ts.Symbol, type: ts.Type, path: string): boolean => {
    if (!ours(symbol)) return false;
    if (!exported.has(symbol) && !missing.has(symbol.name)) missing.set(symbol.name, path);
    if (seenSymbols.has(symbol)) return true;
    seenSymbols.add(symbol);
    if (!opaque.has(symbol.name)) visitSymbolMembers(type, symbol.name);
    return true;
  };

  const visitType = (type: ts.Type, path: string): void => {
    // A type parameter is the caller's type, not one the package must export.
    if (seenTypes.has(type) || type.flags & ts.TypeFlags.TypeParameter) return;
    seenTypes.add(type);
    const alias = type.aliasSymbol;
    if (alias !== undefined && !ours(alias)) {
      // A utility type (Omit, Pick, Partial...): its arguments are named in the .d.ts, so they must
      // be exported, but only the members it keeps are walked.
      for (const argument of type.aliasTypeArguments ?? []) {
        if (argument.flags & ts.TypeFlags.TypeParameter) continue;
        const named = argument.aliasSymbol ?? argument.getSymbol();
        if (named !== undefined && ours(named) && !exported.has(named) && !missing.has(named.name))
          missing.set(named.name, path);
        else if (named === undefined || !ours(named)) visitType(argument, path);
      }
      visitSymbolMembers(type, path);
      return;
    }
    for (const argument of type.aliasTypeArguments ?? []) visitType(argument, path);
    if (alias !== undefined && visitNamed(alias, type, path)) return;
    if (type.isUnionOrIntersection()) {
      for (const member of type.types) visitType(member, path);
      return;
    }
    if (type.flags & ts.TypeFlags.Object) {
      const object = type as ts.ObjectType;
      if (object.objectFlags & ts.ObjectFlags.Reference) {
        for (const argument of checker.getTypeArguments(type as ts.TypeReference))
          visitType(argument, path);
      }
      const symbol = type.getSymbol();
      if (
        symbol !== undefined &&
        symbol.flags & (ts.SymbolFlags.Class | ts.SymbolFlags.Interface)
      ) {
        visitNamed(symbol, type, path);
        return;
      }
      if (symbol === undefined || ours(symbol) || symbol.flags & ts.SymbolFlags.TypeLiteral) {
        visitSymbolMembers(type, path);
      }
    }
  };

  for (const symbol of rootSymbols) {
    seenSymbols.add(symbol);
    const instance = checker.getDeclaredTypeOfSymbol(symbol);
    visitSymbolMembers(instance, symbol.name);
    const declaration = symbol.valueDeclaration;
    if (declaration !== undefined) {
      visitSymbolMembers(
        checker.getTypeOfSymbolAtLocation(symbol, declaration),
        `${symbol.name} (static)`,
      );
    }
  }
  // Published declarations must compile for a consumer: no reference to a missing file or name.
  const diagnostics = program
    .getSourceFiles()
    .filter((file) => /[/\\]packages[/\\][^/\\]+[/\\]dist[/\\]/.test(file.fileName))
    .flatMap((file) => program.getSemanticDiagnostics(file))
    .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
  const packages = new Set<string>();
  for (const file of program.getSourceFiles()) {
    const name = packageOf(file.fileName);
    if (name !== undefined && name !== '@types/node' && !name.startsWith('typescript'))
      packages.add(name);
  }
  return {
    walked: seenSymbols.size,
    missing: [...missing].map(([name, path]) => `${name} (via ${path})`).sort(),
    diagnostics,
    packages: [...packages].sort(),
  };
}

/** The package (`pg`, `@types/pg`) a file under the last `node_modules` of its path belongs to. */
function packageOf(fileName: string): string | undefined {
  const parts = fileName.replace(/\\/g, '/').split('/node_modules/');
  if (parts.length < 2) return undefined;
  const [first = '', second = ''] = (parts.at(-1) ?? '').split('/');
  return first.startsWith('@') ? `${first}/${second}` : first;
}

/**
 * Optional peer dependencies whose types no published declaration may need: a consumer without
 * them (no journal, no fleet) compiles with `skipLibCheck: false` (DESIGN §17.4).
 */
export const FOREIGN_TYPE_PACKAGES: readonly string[] = [
  'better-sqlite3',
  'pg',
  '@types/better-sqlite3',
  '@types/pg',
];

/**
 * Types reachable from the public surface and not exported, known and accepted: none. A new leak
 * fails the tests; export the type or stop exposing it.
 */
export const KNOWN_LEAKS: readonly string[] = [];
