import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  isProcessAlive,
  readAuditTrail,
  stdioServerParams,
  tempAudit,
  type AuditEntry,
  type ScriptedServerOptions,
} from '@stepbind/testkit';
import { waitUntilGone } from './processes.js';

/** A real SDK client connected to a scripted server running as a stdio child process. */
export interface StdioHarness {
  readonly client: Client;
  readonly pid: number;
  readonly auditPath: string;
  audit(): Promise<AuditEntry[]>;
  /** Closes the client and waits for the child to exit; the audit trail stays readable. */
  close(): Promise<void>;
  /** {@link close}, then removes the audit trail. */
  dispose(): Promise<void>;
}

const spawned = new Set<number>();

/** Every child process pid started by {@link startStdio} in this test file. */
export function spawnedPids(): readonly number[] {
  return [...spawned];
}

/** Pids of children started by this file that are still alive (should be none after close). */
export function livePids(): number[] {
  return [...spawned].filter((pid) => isProcessAlive(pid));
}

/**
 * Starts a scripted server as a stdio child and connects a real SDK client to it. The SDK 1.32.2
 * client speaks only the 2025 era, so the server does too unless `options.era` says otherwise
 * (`STEPBIND_TEST_ERA` does not apply here).
 */
export async function startStdio(
  options: Omit<ScriptedServerOptions, 'auditPath'>,
): Promise<StdioHarness> {
  const trail = tempAudit(options.scenario);
  const auditPath = trail.path;
  const transport = new StdioClientTransport({
    ...stdioServerParams({ era: 'legacy', ...options, auditPath }),
    stderr: 'pipe',
  });
  const client = new Client({ name: 'stepbind-test', version: '0.0.0' });
  await client.connect(transport);
  const pid = transport.pid;
  if (pid === null) throw new Error('stdio child has no pid');
  spawned.add(pid);
  const close = async (): Promise<void> => {
    await client.close();
    await waitUntilGone(pid);
  };
  return {
    client,
    pid,
    auditPath,
    audit: () => readAuditTrail(auditPath),
    close,
    dispose: async () => {
      await close();
      await trail.dispose();
    },
  };
}

/** The `tools/list` cursors the server received, in order (`null` = no cursor). */
export function listCursors(audit: readonly AuditEntry[]): (string | null | undefined)[] {
  return audit.filter((e) => e.method === 'tools/list').map((e) => e.cursor);
}
