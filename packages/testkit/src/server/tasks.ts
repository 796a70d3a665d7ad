import { runIfMain } from './main.js';
import { randomUUID } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  CancelTaskRequestSchema,
  GetTaskPayloadRequestSchema,
  GetTaskRequestSchema,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js';

/**
 * Options of the task server (`--options <JSON>`).
 */
export interface TaskServerOptions {
  /**
   * Declare `tasks.requests.tools.call` and answer `tasks/*`; `false` lists the same tools (with
   * their `taskSupport`) without either. @default true
   */
  readonly tasks?: boolean;
  /** The `pollInterval` the server suggests, in ms. @default 50 */
  readonly pollIntervalMs?: number;
  /** A file every event is appended to as a JSON line ({@link TaskServerEvent}). */
  readonly events?: string;
}

/** What the task server records (one JSON line each in `options.events`). */
export type TaskServerEvent =
  | { readonly event: 'call'; readonly tool: string; readonly key: string; readonly task: boolean }
  | {
      readonly event: 'create';
      readonly taskId: string;
      readonly key: string;
      readonly pid: number;
    }
  | { readonly event: 'get'; readonly taskId: string; readonly at: number; readonly known: boolean }
  | { readonly event: 'result'; readonly taskId: string }
  | { readonly event: 'cancel'; readonly taskId: string };

/**
 * A job's arguments: `key` names it in events; it completes after `polls` `tasks/get` (counted
 * per task), or `ms` milliseconds after creation, whichever is given (neither: at once); `fail`
 * makes it end `failed`; `hold` keeps it working until cancelled.
 */
interface JobArgs {
  readonly key?: string;
  readonly polls?: number;
  readonly ms?: number;
  readonly fail?: boolean;
  readonly hold?: boolean;
}

interface Job {
  readonly taskId: string;
  readonly args: JobArgs;
  readonly createdAt: number;
  status: 'working' | 'completed' | 'failed' | 'cancelled';
  polls: number;
}

const TOOLS = [
  {
    name: 'slow_job',
    description: 'A job that runs only as a task.',
    inputSchema: {
      type: 'object',
      properties: {
        key: { type: 'string' },
        polls: { type: 'integer' },
        ms: { type: 'integer' },
        fail: { type: 'boolean' },
        hold: { type: 'boolean' },
      },
    },
    execution: { taskSupport: 'required' },
  },
  {
    name: 'maybe_job',
    description: 'A job that runs as a task when asked to, else at once.',
    inputSchema: {
      type: 'object',
      properties: { key: { type: 'string' }, polls: { type: 'integer' } },
    },
    execution: { taskSupport: 'optional' },
  },
] as const;

/**
 * Serves two task tools over stdio (default) or Streamable HTTP (`--http`, printing
 * `{"event":"listening","port":N}` on stdout). Tasks live in the process, across sessions: a
 * client that reconnects (a new session, a restarted runtime) can poll a task an earlier session
 * created, as a server with durable task storage allows. Events go to `options.events`.
 */
export async function runTaskServer(argv: readonly string[]): Promise<void> {
  const at = argv.indexOf('--options');
  const options = (at === -1 ? {} : JSON.parse(argv[at + 1] ?? '{}')) as TaskServerOptions;
  const tasks = options.tasks !== false;
  const pollInterval = options.pollIntervalMs ?? 50;
  const jobs = new Map<string, Job>();
  const record = (event: TaskServerEvent): void => {
    if (options.events !== undefined) appendFileSync(options.events, `${JSON.stringify(event)}\n`);
  };
  const settle = (job: Job): void => {
    if (job.status !== 'working' || job.args.hold === true) return;
    const due =
      job.args.polls !== undefined
        ? job.polls >= job.args.polls
        : job.args.ms === undefined || Date.now() - job.createdAt >= job.args.ms;
    if (due) job.status = job.args.fail === true ? 'failed' : 'completed';
  };
  const view = (job: Job): Record<string, unknown> => ({
    taskId: job.taskId,
    status: job.status,
    ttl: 60_000,
    createdAt: new Date(job.createdAt).toISOString(),
    lastUpdatedAt: new Date().toISOString(),
    pollInterval,
    ...(job.status === 'failed' ? { statusMessage: 'the job failed' } : {}),
  });
  const known = (taskId: string): Job => {
    const job = jobs.get(taskId);
    if (job === undefined) throw new McpError(-32602, `Unknown task: ${taskId}`);
    return job;
  };
  const resultOf = (job: Job): CallToolResult => ({
    content: [{ type: 'text', text: `done:${job.args.key ?? ''}` }],
  });

  const newServer = (): Server => {
    const server = new Server(
      { name: 'stepbind-task-server', version: '1.0.0' },
      {
        capabilities: {
          tools: {},
          ...(tasks ? { tasks: { requests: { tools: { call: {} } }, cancel: {} } } : {}),
        },
      },
    );
    // Without the capability the tools still say taskSupport: a server that contradicts itself.
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [...TOOLS] }));
    server.setRequestHandler(CallToolRequestSchema, (request) => {
      const args = (request.params.arguments ?? {}) as JobArgs;
      const asTask = request.params.task !== undefined;
      record({ event: 'call', tool: request.params.name, key: args.key ?? '', task: asTask });
      if (!asTask) {
        return { content: [{ type: 'text', text: `done:${args.key ?? ''}` }] };
      }
      const job: Job = {
        taskId: randomUUID(),
        args,
        createdAt: Date.now(),
        status: 'working',
        polls: 0,
      };
      jobs.set(job.taskId, job);
      settle(job);
      record({ event: 'create', taskId: job.taskId, key: args.key ?? '', pid: process.pid });
      return { task: view(job) };
    });
    if (tasks) {
      server.setRequestHandler(GetTaskRequestSchema, (request) => {
        const { taskId } = request.params;
        const job = jobs.get(taskId);
        record({ event: 'get', taskId, at: Date.now(), known: job !== undefined });
        if (job === undefined) throw new McpError(-32602, `Unknown task: ${taskId}`);
        job.polls++;
        settle(job);
        return view(job);
      });
      server.setRequestHandler(GetTaskPayloadRequestSchema, (request) => {
        const job = known(request.params.taskId);
        record({ event: 'result', taskId: job.taskId });
        return resultOf(job);
      });
      server.setRequestHandler(CancelTaskRequestSchema, (request) => {
        const job = known(request.params.taskId);
        record({ event: 'cancel', taskId: job.taskId });
        if (job.status === 'working') job.status = 'cancelled';
        return view(job);
      });
    }
    return server;
  };

  const portAt = argv.indexOf('--http');
  if (portAt === -1) {
    const server = newServer();
    await server.connect(new StdioServerTransport());
    return;
  }
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const id = req.headers['mcp-session-id'];
    const known = typeof id === 'string' ? sessions.get(id) : undefined;
    if (known !== undefined) {
      await known.handleRequest(req, res);
      return;
    }
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (session) => {
        sessions.set(session, transport);
      },
      onsessionclosed: (session) => {
        sessions.delete(session);
      },
    });
    await newServer().connect(transport);
    await transport.handleRequest(req, res);
  };
  const http = createServer((req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500).end();
      else res.destroy();
    });
  });
  const shutdown = (): void => {
    http.closeAllConnections();
    http.close();
    process.exit(0);
  };
  process.stdin.once('end', shutdown);
  process.stdin.resume();
  process.once('SIGTERM', shutdown);
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(Number(argv[portAt + 1] ?? 0), '127.0.0.1', resolve);
  });
  const { port } = http.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ event: 'listening', port, pid: process.pid })}\n`);
}

runIfMain(import.meta.url, 'stepbind testkit task server', () =>
  runTaskServer(process.argv.slice(2)),
);
