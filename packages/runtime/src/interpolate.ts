import { homedir } from 'node:os';
import { basename, sep } from 'node:path';
import { ConfigError, ErrorCode } from '@stepbind/binding/internal';

/** Where `${env:NAME}` and `${NAME}` references are looked up. */
export type EnvironmentSource = Readonly<Record<string, string | undefined>>;

/**
 * The dialect of a configuration file, which decides how its strings are read (DESIGN §10):
 * `claude-desktop` (`mcpServers` entries of `command`, `args` and `env` only, nothing else: the
 * shape Claude Desktop and Cursor share) replaces only Cursor's explicit `${env:NAME}`; `$$`,
 * `${NAME}` and every other `$` reach the server verbatim, as neither application rewrites them;
 * `stepbind` (`mcpServers` with any key of stepbind's own, `$schema` included) and `vscode`
 * (`servers`) replace `${env:NAME}` and `${NAME}`, `$$` being a literal `$`.
 */
export type ConfigDialect = 'claude-desktop' | 'vscode' | 'stepbind';

/** Reads one string value of a configuration file found at JSON path `path`. */
export type ConfigText = (value: string, path: string) => string;

/**
 * What VS Code's editor variables stand for in a configuration file (DESIGN §17.2): the folder
 * `${workspaceFolder}` names and the home `${userHome}` names.
 */
export interface EditorVariables {
  /**
   * The workspace folder: the parent of the `.vscode` (or `.cursor`) directory holding the file,
   * else the file's own directory. Absent: the configuration was not read from a file, and a
   * `${workspaceFolder}` is refused saying so.
   */
  readonly workspaceFolder?: string;
  /** The user's home directory. @default os.homedir() */
  readonly userHome?: string;
}

/**
 * How a file of `dialect` reads its strings: {@link interpolate} from `env` and `editor`, or (a
 * plain `mcpServers` file) only `${env:NAME}`, `${workspaceFolder}` and `${userHome}` replaced (as
 * Cursor does) and everything else verbatim.
 */
export function configTextOf(
  dialect: ConfigDialect,
  env: EnvironmentSource,
  editor: EditorVariables = {},
): ConfigText {
  return dialect === 'claude-desktop'
    ? (value, path) => interpolatePlain(value, path, env, editor)
    : (value, path) => interpolate(value, path, env, editor);
}

const PLAIN_REFERENCE = /\$\{(env:[A-Za-z_][A-Za-z0-9_]*|[A-Za-z/]+)\}/g;

/** `${env:NAME}` and the editor variables stepbind knows replaced; `$$`, `${NAME}` and any other text kept as written. */
function interpolatePlain(
  value: string,
  path: string,
  env: EnvironmentSource,
  editor: EditorVariables,
): string {
  if (!value.includes('${')) return value;
  return value.replace(PLAIN_REFERENCE, (match: string, ref: string) => {
    if (ref.startsWith('env:')) return lookup(env, ref.slice(4), path);
    return EDITOR_VARIABLES.has(ref) ? editorValue(ref, path, editor) : match;
  });
}

function lookup(env: EnvironmentSource, name: string, path: string): string {
  const found = env[name];
  if (found === undefined) {
    throw new ConfigError(
      ErrorCode.INVALID_CONFIG,
      `Invalid configuration at ${path}: environment variable ${name} is not set. Set it in the environment of this process, or remove the reference.`,
      { detail: { path, variable: name } },
    );
  }
  return found;
}

/** The VS Code variables stepbind resolves (they need no editor); `workspaceRoot` is VS Code's old name of `workspaceFolder`. */
const EDITOR_VARIABLES: ReadonlySet<string> = new Set([
  'workspaceFolder',
  'workspaceRoot',
  'workspaceFolderBasename',
  'userHome',
  'pathSeparator',
  '/',
]);

function editorValue(name: string, path: string, editor: EditorVariables): string {
  if (name === 'userHome') return editor.userHome ?? homedir();
  if (name === 'pathSeparator' || name === '/') return sep;
  const folder = editor.workspaceFolder;
  if (folder === undefined) {
    throw new ConfigError(
      ErrorCode.INVALID_CONFIG,
      `Invalid configuration at ${path}: \${${name}} needs a workspace folder, and a configuration passed as an object has none. Open the file instead (McpRuntime.open('path/to/mcp.json'), where it is the folder holding .vscode, or the file's own) or write the path out.`,
      { detail: { path, reference: name } },
    );
  }
  return name === 'workspaceFolderBasename' ? basename(folder) : folder;
}

/** VS Code variables about the editor's state (the open file, the selection...), which stepbind does not have. */
const EDITOR_STATE_VARIABLES: ReadonlySet<string> = new Set([
  'file',
  'fileBasename',
  'fileBasenameNoExtension',
  'fileDirname',
  'fileDirnameBasename',
  'fileExtname',
  'fileWorkspaceFolder',
  'fileWorkspaceFolderBasename',
  'relativeFile',
  'relativeFileDirname',
  'lineNumber',
  'columnNumber',
  'selectedText',
  'execPath',
  'cwd',
  'defaultBuildTask',
  'extensionInstallFolder',
]);

/** Why a VS Code variable other than the ones stepbind resolves is refused, or undefined when `ref` is not one. */
function refusedEditorVariable(ref: string): string | undefined {
  const withEnv =
    'stepbind has no editor to ask: set the value in an environment variable and write ${env:NAME}';
  if (ref.startsWith('input:')) {
    return `is a VS Code prompt (editor prompts such as \${input:...} are not supported): ${withEnv}`;
  }
  if (ref.startsWith('command:')) {
    return `runs a VS Code command, and ${withEnv}`;
  }
  if (ref.startsWith('config:')) {
    return `reads a VS Code setting, and ${withEnv}`;
  }
  if (ref.startsWith('workspaceFolder:') || ref.startsWith('workspaceFolderBasename:')) {
    return 'names one folder of a multi-root workspace, and stepbind knows only the folder of the configuration file: write ${workspaceFolder} or the path';
  }
  if (EDITOR_STATE_VARIABLES.has(ref)) {
    return `is the state of a VS Code window (the open file, the selection, the editor's own paths), and ${withEnv} (or \${env:${ref}} for an environment variable of that name)`;
  }
  return undefined;
}

const REFERENCE = /\$\$|\$\{([^}]*)\}/g;
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Replaces `${env:NAME}` and `${NAME}` in `value` with the variable's value from `env`, and VS
 * Code's `${workspaceFolder}`, `${workspaceFolderBasename}`, `${userHome}`, `${pathSeparator}` and
 * `${/}` from `editor`; `$$` is a literal `$`. A `$` not followed by `{` or `$` is left as it is (so
 * `$HOME` in a shell argument stays for the shell). The error never contains a variable's value.
 *
 * @throws ConfigError `INVALID_CONFIG` naming `path` and the variable when it is not set; naming the
 *   reference and why when it is a VS Code variable that needs an editor (`${input:...}`,
 *   `${command:...}`, `${config:...}`, `${file}`...), a `${workspaceFolder}` without a workspace
 *   folder, or not a variable at all.
 */
export function interpolate(
  value: string,
  path: string,
  env: EnvironmentSource,
  editor: EditorVariables = {},
): string {
  if (!value.includes('$')) return value;
  return value.replace(REFERENCE, (match: string, inner: string | undefined) => {
    if (match === '$$') return '$';
    const ref = inner ?? '';
    if (EDITOR_VARIABLES.has(ref)) return editorValue(ref, path, editor);
    const refused = refusedEditorVariable(ref);
    if (refused !== undefined) {
      throw new ConfigError(
        ErrorCode.INVALID_CONFIG,
        `Invalid configuration at ${path}: "\${${ref}}" ${refused}.`,
        { detail: { path, reference: ref } },
      );
    }
    const name = ref.startsWith('env:') ? ref.slice(4) : ref;
    if (!NAME.test(name)) {
      throw new ConfigError(
        ErrorCode.INVALID_CONFIG,
        `Invalid configuration at ${path}: "\${${ref}}" is not an environment variable reference. Use \${env:NAME} or \${NAME}. Write $\${ for a literal "\${".`,
        { detail: { path, reference: ref } },
      );
    }
    return lookup(env, name, path);
  });
}
