import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../../src/cli/run.js';
import {
  readAuditTrail,
  stdioServerParams,
  tempAuditPath,
  type AuditEntry,
  type ServerFixture,
} from '@stepbind/testkit';
import { waitUntilGone } from '../support/processes.js';

/** A temp directory for config files and audit trails; `cleanup` removes it and waits for servers. */
export interface CliSandbox {
  /**
   * Writes `{ mcpServers, ...top }` with each fixture as a stdio scripted server; returns the path.
   * `top` adds top-level keys (`journal`, ...).
   */
  config(
    name: string,
    servers: Record<string, ServerFixture | Record<string, unknown>>,
    top?: Record<string, unknown>,
  ): Promise<string>;
  /** The sandbox directory (removed by `cleanup`). */
  readonly dir: string;
  /** The audit trail of the fixture server `name` of the last config written. */
  audit(name: string): Promise<AuditEntry[]>;
  cleanup(): Promise<void>;
}

export async function cliSandbox(): Promise<CliSandbox> {
  const dir = await mkdtemp(join(tmpdir(), 'stepbind-cli-'));
  const audits = new Map<string, string>();
  const allAudits: string[] = [];
  return {
    dir,
    async config(name, servers, top = {}) {
      const mcpServers: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(servers)) {
        if ('generations' in value) {
          const auditPath = tempAuditPath(`cli-${key}`);
          audits.set(key, auditPath);
          allAudits.push(auditPath);
          mcpServers[key] = stdioServerParams({
            scenario: 'fixture',
            fixture: value as ServerFixture,
            auditPath,
          });
        } else {
          mcpServers[key] = value;
        }
      }
      const path = join(dir, `${name}.json`);
      await writeFile(path, JSON.stringify({ mcpServers, ...top }));
      return path;
    },
    audit: (name) => readAuditTrail(audits.get(name) ?? ''),
    async cleanup() {
      for (const path of allAudits) {
        const trail = await readAuditTrail(path).catch(() => []);
        for (const pid of new Set(trail.map((e) => e.pid))) await waitUntilGone(pid);
        await rm(path, { force: true });
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Runs the CLI in process and collects its output. */
export async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(args, {
    stdout: (t) => (out += t),
    stderr: (t) => (err += t),
  });
  return { code, out, err };
}

/** A tool definition with optional annotations and input schema. */
export function tool(
  name: string,
  extra: {
    readonly annotations?: object;
    readonly inputSchema?: object;
    readonly description?: string;
  } = {},
): Record<string, unknown> {
  return {
    name,
    description: extra.description ?? `The ${name} tool.`,
    inputSchema: extra.inputSchema ?? { type: 'object' },
    ...(extra.annotations === undefined ? {} : { annotations: extra.annotations }),
  };
}
