import type { RuntimeConfig } from '../config.js';

/**
 * The `stepbind config check` report of a valid configuration: one line per server with its
 * transport and the settings that change behaviour, and the disabled entries. Header values and
 * environment values are never printed (they may hold secrets), only their names.
 */
export function formatConfigCheck(path: string, config: RuntimeConfig): string {
  const lines = [
    `✔ ${path}: ${config.servers.size} server${config.servers.size === 1 ? '' : 's'}${config.disabled.length === 0 ? '' : `, ${config.disabled.length} disabled`}`,
  ];
  for (const [name, server] of config.servers) {
    const where =
      server.transport === 'stdio'
        ? `stdio: ${server.command}${server.args.length === 0 ? '' : ` (${server.args.length} args)`}${Object.keys(server.env).length === 0 ? '' : `, env ${Object.keys(server.env).join(', ')}`}`
        : `http: ${new URL(server.url).origin}${Object.keys(server.headers).length === 0 ? '' : `, headers ${Object.keys(server.headers).join(', ')}`}`;
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
    })),
    disabled: config.disabled,
  };
}
