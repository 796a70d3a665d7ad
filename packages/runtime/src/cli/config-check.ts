import type { ServerAuthConfig } from '../auth/types.js';
import type { RuntimeConfig } from '../config.js';
import { loadConfigFile } from './config-file.js';
import { commandLineOf, type CommandSpec } from './grammar.js';
import type { CliIo } from './io.js';
import { printError } from './options.js';

/** The grammar and `--help` of `stepbind config check`. */
export const CONFIG_CHECK_COMMAND: CommandSpec = {
  name: 'config check',
  summary: 'Validate a configuration file without starting anything.',
  config: 'required',
  arguments: [],
  options: [{ name: 'json', description: 'print the checked configuration as JSON (shape below)' }],
  notes: `--json: { "ok": true, "servers": [{ "name", "transport", "required", "approval", "audience",
          "tools": { "allow"?, "deny"? } | null, "auth"? }], "disabled": [names] }
        | { "ok": false, "error": { "code", "message", "detail" } }
Secrets (header and environment values, tokens, client secrets, keys) are never printed.
Exit code 0 for a valid configuration, 2 otherwise.`,
};

/** Runs `stepbind config check` with the arguments after `check`; resolves to the exit code. */
export async function runConfigCheckCommand(args: readonly string[], io: CliIo): Promise<number> {
  const parsed = commandLineOf(CONFIG_CHECK_COMMAND, args, io);
  if (typeof parsed === 'number') return parsed;
  const json = parsed.flags.has('json');
  const file = parsed.config ?? '';
  try {
    const config = await loadConfigFile(file);
    io.stdout(
      json
        ? `${JSON.stringify(configCheckJson(config))}\n`
        : `${formatConfigCheck(file, config)}\n`,
    );
    return 0;
  } catch (error) {
    printError(error, json, io);
    return 2;
  }
}

/**
 * The `stepbind config check` report of a valid configuration: one line per server with its
 * transport and the settings that change behaviour, and the disabled entries. Header values,
 * environment values and `auth` secrets (token, client secret, private key) are never printed,
 * only their names or whether they are set.
 */
export function formatConfigCheck(path: string, config: RuntimeConfig): string {
  const lines = [
    `✔ ${path}: ${config.servers.size} server${config.servers.size === 1 ? '' : 's'}${config.disabled.length === 0 ? '' : `, ${config.disabled.length} disabled`}`,
  ];
  for (const [name, server] of config.servers) {
    const where =
      server.transport === 'stdio'
        ? `stdio: ${server.command}${server.args.length === 0 ? '' : ` (${server.args.length} args)`}${Object.keys(server.env).length === 0 ? '' : `, env ${Object.keys(server.env).join(', ')}`}`
        : `http: ${new URL(server.url).origin}${Object.keys(server.headers).length === 0 ? '' : `, headers ${Object.keys(server.headers).join(', ')}`}${server.auth === undefined ? '' : `, auth ${authSummary(server.auth)}`}`;
    const extras = [
      server.required ? 'required' : 'optional',
      `approval ${server.approval ?? 'unproven-writes'}`,
      ...(server.audience === 'default' ? [] : [`audience ${server.audience}`]),
      ...(server.tools?.allow === undefined ? [] : [`allow ${server.tools.allow.join(' ')}`]),
      ...(server.tools?.deny === undefined ? [] : [`deny ${server.tools.deny.join(' ')}`]),
      ...(server.autoApprove.length === 0 ? [] : [`autoApprove ${server.autoApprove.join(' ')}`]),
    ];
    lines.push(`    ${name}: ${where}; ${extras.join(', ')}`);
  }
  for (const name of config.disabled) lines.push(`    ${name}: disabled`);
  return lines.join('\n');
}

/** The `--json` shape of `stepbind config check`: `{ ok: true, servers: [...], disabled: [...] }`. */
export function configCheckJson(config: RuntimeConfig): unknown {
  return {
    ok: true,
    servers: [...config.servers].map(([name, server]) => ({
      name,
      transport: server.transport,
      required: server.required,
      approval: server.approval ?? 'unproven-writes',
      audience: server.audience,
      tools: server.tools ?? null,
      ...(server.transport === 'http' && server.auth !== undefined
        ? { auth: authJson(server.auth) }
        : {}),
    })),
    disabled: config.disabled,
  };
}

/** The `auth` block without secrets: `bearer`, or `oauth` with its plain settings. */
function authJson(auth: ServerAuthConfig): Readonly<Record<string, unknown>> {
  if (auth.type === 'bearer') return { type: 'bearer', token: 'set' };
  return {
    type: 'oauth',
    grant: auth.grant ?? 'authorization_code',
    ...(auth.clientId === undefined ? {} : { clientId: auth.clientId }),
    ...(auth.clientMetadataUrl === undefined ? {} : { clientMetadataUrl: auth.clientMetadataUrl }),
    ...(auth.scopes === undefined ? {} : { scopes: auth.scopes }),
    client:
      auth.privateKey !== undefined
        ? 'private_key_jwt'
        : auth.clientSecret !== undefined
          ? 'client_secret'
          : 'public',
  };
}

/** One line of {@link authJson}. */
function authSummary(auth: ServerAuthConfig): string {
  const json = authJson(auth);
  if (auth.type === 'bearer') return 'bearer (token set)';
  const parts = [
    `oauth ${String(json['grant'])}`,
    ...(auth.clientId === undefined ? [] : [`client ${auth.clientId}`]),
    ...(auth.clientMetadataUrl === undefined ? [] : [`client metadata ${auth.clientMetadataUrl}`]),
    ...(auth.clientId === undefined && auth.clientMetadataUrl === undefined
      ? ['registers itself']
      : []),
    ...(auth.scopes === undefined ? [] : [`scopes ${auth.scopes.join(' ')}`]),
    ...(auth.privateKey === undefined ? [] : ['private_key_jwt']),
    ...(auth.clientSecret === undefined ? [] : ['client secret set']),
  ];
  return parts.join(', ');
}
