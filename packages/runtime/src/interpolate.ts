import { ConfigError, ErrorCode } from '@stepbind/binding/internal';

/** Where `${env:NAME}` and `${NAME}` references are looked up. */
export type EnvironmentSource = Readonly<Record<string, string | undefined>>;

/**
 * The dialect of a configuration file, which decides how its strings are read (DESIGN §10):
 * `claude-desktop` (`mcpServers` entries of `command`, `args` and `env` only, nothing else) never
 * interpolates, as Claude Desktop does not, so `$$` and `${...}` reach the server verbatim;
 * `stepbind` (`mcpServers` with any key of stepbind's own, `$schema` included) and `vscode`
 * (`servers`) replace `${env:NAME}` and `${NAME}`, `$$` being a literal `$`.
 */
export type ConfigDialect = 'claude-desktop' | 'vscode' | 'stepbind';

/** Reads one string value of a configuration file found at JSON path `path`. */
export type ConfigText = (value: string, path: string) => string;

/** How a file of `dialect` reads its strings: {@link interpolate} from `env`, or verbatim. */
export function configTextOf(dialect: ConfigDialect, env: EnvironmentSource): ConfigText {
  return dialect === 'claude-desktop'
    ? (value) => value
    : (value, path) => interpolate(value, path, env);
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
    const found = env[name];
    if (found === undefined) {
      throw new ConfigError(
        ErrorCode.INVALID_CONFIG,
        `Invalid configuration at ${path}: environment variable ${name} is not set. Set it in the environment of this process, or remove the reference.`,
        { detail: { path, variable: name } },
      );
    }
    return found;
  });
}
