import type { ChildProcess } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ListToolsResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import type { ListToolsResult } from '@modelcontextprotocol/sdk/types.js';
import { stdioServerParams, tempAudit } from '@stepbind/testkit';
import type { ScriptedServerOptions } from '@stepbind/testkit';

/** A real SDK client connected to a scripted stdio child process. */
export interface StdioChild {
  readonly client: Client;
  readonly transport: StdioClientTransport;
  readonly pid: number;
  readonly auditPath: string;
  /**
   * How the child process ended: `{ code: 0, signal: null }` when it exited on its own at end of
   * input; the SDK's close() falls back to SIGTERM (after 2 s) only for a child that did not.
   */
  readonly exited: Promise<ChildExit>;
  /** Closes the client (the child ends); the audit trail stays readable until {@link closeAll}. */
  close(): Promise<void>;
}

/** The exit code and signal of a child process. */
export interface ChildExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/**
 * The exit of the transport's child process. The SDK keeps the process in a private field; a test
 * fails here, loudly, if an SDK upgrade renames it.
 */
function exitOf(transport: StdioClientTransport): Promise<ChildExit> {
  const child = (transport as unknown as { _process?: ChildProcess })._process;
  if (child === undefined) throw new Error('StdioClientTransport no longer exposes _process');
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  }
  return new Promise((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
}

const open = new Set<StdioChild>();
const trails = new Set<AsyncDisposable>();

/** Spawns a scripted server as a stdio child (audit trail in a fresh temp dir) and connects. */
export async function spawnScripted(
  options: Omit<ScriptedServerOptions, 'auditPath'>,
  label: string = options.scenario,
): Promise<StdioChild> {
  const audit = tempAudit(label);
  trails.add(audit);
  const transport = new StdioClientTransport(
    stdioServerParams({ ...options, auditPath: audit.path }),
  );
  const client = new Client({ name: 'testkit-test', version: '0.0.0' });
  await client.connect(transport);
  const pid = transport.pid;
  if (pid === null) throw new Error('stdio child has no pid after connect');
  const child: StdioChild = {
    client,
    transport,
    pid,
    auditPath: audit.path,
    exited: exitOf(transport),
    async close() {
      open.delete(child);
      await client.close();
    },
  };
  open.add(child);
  return child;
}

/** Closes every child a test left open and removes every audit trail (for afterEach). */
export async function closeAll(): Promise<void> {
  await Promise.all([...open].map((child) => child.close()));
  const done = [...trails];
  trails.clear();
  await Promise.all(done.map((trail) => trail[Symbol.asyncDispose]()));
}

/** Requests one `tools/list` page; `undefined` sends no cursor, `""` sends the empty cursor. */
export function listPage(client: Client, cursor?: string): Promise<ListToolsResult> {
  return client.request(
    { method: 'tools/list', params: cursor === undefined ? {} : { cursor } },
    ListToolsResultSchema,
  );
}

/** Follows `nextCursor` until it is absent, failing after `maxPages`. */
export async function listAll(client: Client, maxPages = 20): Promise<ListToolsResult[]> {
  const pages: ListToolsResult[] = [];
  let cursor: string | undefined;
  do {
    if (pages.length === maxPages) throw new Error(`more than ${maxPages} pages`);
    const page = await listPage(client, cursor);
    pages.push(page);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return pages;
}

/** Tool names of a page. */
export const names = (page: ListToolsResult): string[] => page.tools.map((tool) => tool.name);

/** The JSON-RPC error code of a rejected promise (fails if it resolves or rejects otherwise). */
export async function errorCode(promise: Promise<unknown>): Promise<number> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof McpError) return error.code;
    throw error;
  }
  throw new Error('expected the request to fail');
}
