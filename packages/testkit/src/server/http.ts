import { runIfMain } from './main.js';
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isJSONRPCNotification, isJSONRPCRequest } from '@modelcontextprotocol/sdk/types.js';
import type { HttpServerEvent, HttpServerOptions, ScriptedServerOptions } from '../types.js';
import { createScriptedServer, type ScriptedServer } from './scripted.js';
import { createLegacySseHandler } from './sse.js';

interface Session {
  readonly transport: StreamableHTTPServerTransport;
  readonly scripted: ScriptedServer;
}

function argument(argv: readonly string[], flag: string): string | undefined {
  const at = argv.indexOf(flag);
  return at === -1 ? undefined : argv[at + 1];
}

function emit(event: HttpServerEvent): void {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

function answer(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

function authorized(req: IncomingMessage, required: Readonly<Record<string, string>>): boolean {
  return Object.entries(required).every(
    ([name, value]) => req.headers[name.toLowerCase()] === value,
  );
}

/**
 * Serves scripted MCP servers over Streamable HTTP at `http://host:port/mcp` until stdin closes or
 * SIGTERM: every `initialize` without a session id opens a new session with its own scripted
 * server (like most real servers). A request naming a session this process does not know gets
 * `options.unknownSession` (404 by default, as the specification says). Events go to stdout as JSON
 * lines ({@link HttpServerEvent}); the first is `listening`. A stdin line
 * `{"command":"forget-sessions"}` makes it forget every session while it keeps running.
 *
 * @param argv the arguments after the script: `--options <ScriptedServerOptions JSON>` and
 *   optionally `--http <HttpServerOptions JSON>`.
 */
export async function runHttpServer(argv: readonly string[]): Promise<void> {
  const json = argument(argv, '--options');
  if (json === undefined) {
    throw new Error('usage: http.js --options <ScriptedServerOptions JSON> [--http <JSON>]');
  }
  const options = JSON.parse(json) as ScriptedServerOptions;
  const httpJson = argument(argv, '--http');
  const http = (httpJson === undefined ? {} : JSON.parse(httpJson)) as HttpServerOptions;
  // Fail early on a bad scripted configuration rather than on the first initialize.
  await createScriptedServer(options).close();
  const sessions = new Map<string, Session>();
  // Sessions dropped by a `forget-sessions` command: unknown to requests, closed at shutdown.
  const forgotten: Session[] = [];
  const legacy =
    http.transport === 'sse'
      ? createLegacySseHandler(options, emit, http.ssePostStatus)
      : undefined;

  const openSession = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const scripted = createScriptedServer(options, { exit: (code) => process.exit(code) });
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (session) => {
        sessions.set(session, { transport, scripted });
        emit({ event: 'session', session });
      },
      onsessionclosed: (session) => {
        sessions.delete(session);
      },
    });
    await scripted.server.connect(transport);
    const dispatch = transport.onmessage;
    transport.onmessage = (message, extra) => {
      if (isJSONRPCRequest(message) || isJSONRPCNotification(message)) {
        const name = message.params?.['name'];
        emit({
          event: 'message',
          session: transport.sessionId ?? null,
          method: message.method,
          ...(message.method === 'tools/call' && typeof name === 'string' ? { tool: name } : {}),
        });
      }
      dispatch?.(message, extra);
    };
    await transport.handleRequest(req, res);
    // A first request that was not a valid initialize opened nothing: drop its server.
    if (transport.sessionId === undefined) await scripted.close();
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    if (path !== '/mcp' && !(legacy !== undefined && path === '/messages')) {
      answer(res, 404, { error: 'not found' });
      return;
    }
    if (http.requireHeaders !== undefined && !authorized(req, http.requireHeaders)) {
      answer(
        res,
        401,
        http.echoOn401 === true
          ? { error: 'unauthorized', url: req.url, headers: req.headers }
          : { error: 'unauthorized' },
      );
      return;
    }
    if (legacy !== undefined) {
      await legacy.handle(req, res);
      return;
    }
    if (http.getNotFound === true && req.method === 'GET') {
      answer(res, 404, { error: 'not found' });
      return;
    }
    const id = req.headers['mcp-session-id'];
    if (typeof id === 'string') {
      const session = sessions.get(id);
      if (session !== undefined) {
        await session.transport.handleRequest(req, res);
        return;
      }
      emit({ event: 'unknown-session', session: id });
      if (http.unknownSession === 400) {
        answer(res, 400, {
          jsonrpc: '2.0',
          error: { code: -32000, message: 'Bad Request: No valid session ID provided' },
          id: null,
        });
      } else {
        answer(res, 404, {
          jsonrpc: '2.0',
          error: { code: -32001, message: 'Session not found' },
          id: null,
        });
      }
      return;
    }
    if (req.method !== 'POST') {
      answer(res, 400, {
        jsonrpc: '2.0',
        error: { code: -32000, message: 'Bad Request: No valid session ID provided' },
        id: null,
      });
      return;
    }
    await openSession(req, res);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      process.stderr.write(`stepbind testkit http server: ${String(error)}\n`);
      if (!res.headersSent) answer(res, 500, { error: 'internal error' });
      else res.destroy();
    });
  });
  const shutdown = (): void => {
    const closing = [...sessions.values(), ...forgotten].map((s) => s.scripted.close());
    if (legacy !== undefined) closing.push(legacy.close());
    server.closeAllConnections();
    server.close();
    void Promise.allSettled(closing).then(() => process.exit(0));
  };
  process.stdin.once('end', shutdown);
  createInterface({ input: process.stdin }).on('line', (line) => {
    let command: unknown;
    try {
      command = (JSON.parse(line) as { command?: unknown }).command;
    } catch {
      return;
    }
    if (command === 'forget-sessions' && legacy !== undefined) {
      // HTTP+SSE: a session is its stream, so forgetting it ends the stream.
      void legacy.endStreams().then((count) => emit({ event: 'forgot', sessions: count }));
    } else if (command === 'forget-sessions') {
      // What a restart behind a load balancer or a session expiry looks like to the client: the
      // session's streams stay open, but every new request naming it is unknown.
      forgotten.push(...sessions.values());
      const count = sessions.size;
      sessions.clear();
      emit({ event: 'forgot', sessions: count });
    }
  });
  process.once('SIGTERM', shutdown);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(http.port ?? 0, http.host ?? '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  emit({ event: 'listening', port, pid: process.pid });
}

runIfMain(import.meta.url, 'stepbind testkit http server', () =>
  runHttpServer(process.argv.slice(2)),
);
