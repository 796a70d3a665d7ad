import { ConfigError, ErrorCode } from '@stepbind/binding/internal';

/** Where `${env:NAME}` and `${NAME}` references are looked up. */
export type EnvironmentSource = Readonly<Record<string, string | undefined>>;

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
