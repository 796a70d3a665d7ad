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
 * How a file of `dialect` reads its strings: {@link interpolate} from `env`, or (a plain
 * `mcpServers` file) only `${env:NAME}` replaced and everything else verbatim.
 */
export function configTextOf(dialect: ConfigDialect, env: EnvironmentSource): ConfigText {
  return dialect === 'claude-desktop'
    ? (value, path) => interpolateEnvOnly(value, path, env)
    : (value, path) => interpolate(value, path, env);
}

const ENV_REFERENCE = /\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}/g;

/** `${env:NAME}` replaced from `env`; `$$`, `${NAME}` and any other text kept as written. */
function interpolateEnvOnly(value: string, path: string, env: EnvironmentSource): string {
  if (!value.includes('${env:')) return value;
  return value.replace(ENV_REFERENCE, (_match: string, name: string) => lookup(env, name, path));
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

const REFERENCE = /\$\$|\$\{([^}]*)\}/g;
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Replaces `${env:NAME}` and `${NAME}` in `value` with the variable's value from `env`; `$$` is a
 * literal `$`. A `$` not followed by `{` or `$` is left as it is (so `$HOME` in a shell argument
 * stays for the shell). The error never contains a variable's value.
 *
 * @throws ConfigError `INVALID_CONFIG` naming `path` and the variable when it is not set, or when
 *   the reference is not a variable (`${input:...}` prompts and `${workspaceFolder}`-style editor
 *   variables are not supported).
 */
export function interpolate(value: string, path: string, env: EnvironmentSource): string {
  if (!value.includes('$')) return value;
  return value.replace(REFERENCE, (match: string, inner: string | undefined) => {
    if (match === '$$') return '$';
    const ref = inner ?? '';
    const name = ref.startsWith('env:') ? ref.slice(4) : ref;
    if (!NAME.test(name)) {
      throw new ConfigError(
        ErrorCode.INVALID_CONFIG,
        `Invalid configuration at ${path}: "\${${ref}}" is not an environment variable reference. Use \${env:NAME} or \${NAME}; editor prompts such as \${input:...} are not supported (set the value in the environment instead). Write $\${ for a literal "\${".`,
        { detail: { path, reference: ref } },
      );
    }
    return lookup(env, name, path);
  });
}
