/**
 * A hostile MCP server speaking raw JSON-RPC over stdio (see `HostileServerOptions`). It is not built
 * on the SDK on purpose: the SDK's server would never send what this one sends.
 */
import { runIfMain } from './main.js';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { writeHostilePid, type HostileReply, type HostileServerOptions } from '../hostile.js';

// The grandchild: optionally deaf to SIGTERM, says so on fd 3, then idles until killed.
const GRANDCHILD = `// stepbind-testkit-hostile-grandchild
if (process.argv[1] === 'ignore') process.on('SIGTERM', () => {});
require('node:fs').writeSync(3, 'ready\\n');
setInterval(() => {}, 1 << 30);
`;

/** This process's group id, from /proc (Linux); `undefined` elsewhere. */
function ownPgid(): number | undefined {
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
  } catch {
    return undefined;
  }
}

interface Request {
  readonly id?: unknown;
  readonly method?: unknown;
  readonly params?: {
    readonly protocolVersion?: unknown;
    readonly _meta?: { readonly progressToken?: unknown };
  };
}

function normalResult(method: string, request: Request): Record<string, unknown> | undefined {
  switch (method) {
    case 'initialize':
      return {
        protocolVersion:
          typeof request.params?.protocolVersion === 'string'
            ? request.params.protocolVersion
            : '2025-06-18',
        capabilities: { tools: {} },
        serverInfo: { name: 'stepbind-testkit-hostile', version: '0.1.0' },
      };
    case 'tools/list':
      return { tools: [{ name: 'echo', inputSchema: { type: 'object' } }] };
    case 'tools/call':
      return { content: [{ type: 'text', text: 'ok' }] };
    case 'ping':
      return {};
    default:
      return undefined;
  }
}

/** The text of the answer to `request` (one JSON value, or not JSON), or undefined for none. */
function answerText(request: Request, reply: HostileReply): string | undefined {
  const method = String(request.method);
  const id = request.id;
  const result = normalResult(method, request);
  if (result === undefined) {
    return JSON.stringify({
      jsonrpc: '2.0',
      id,
      error: { code: -32601, message: `Method not found: ${method}` },
    });
  }
  switch (reply.kind) {
    case 'normal':
      return JSON.stringify({ jsonrpc: '2.0', id, result });
    case 'both-result-and-error':
      return JSON.stringify({
        jsonrpc: '2.0',
        id,
        result,
        error: { code: -32603, message: 'and also an error' },
      });
    case 'neither-result-nor-error':
      return JSON.stringify({ jsonrpc: '2.0', id });
    case 'invalid-id':
      return JSON.stringify({ jsonrpc: '2.0', id: reply.id, result });
    case 'oversized':
      return JSON.stringify({
        jsonrpc: '2.0',
        id,
        result: { ...result, _meta: { pad: 'x'.repeat(reply.bytes) } },
      });
    case 'not-json':
      return `this is not JSON (answering ${method})`;
    case 'silent':
      return undefined;
    case 'progress-around': {
      const token = request.params?._meta?.progressToken;
      const progress = (n: number): string =>
        JSON.stringify({
          jsonrpc: '2.0',
          method: 'notifications/progress',
          params: { progressToken: token, progress: n, total: 2 },
        });
      const answer = JSON.stringify({ jsonrpc: '2.0', id, result });
      return token === undefined ? answer : [progress(1), answer, progress(2)].join('\n');
    }
  }
}

function replyFor(options: HostileServerOptions, method: string): HostileReply {
  return options.replies?.[method] ?? { kind: 'normal' };
}

/** Serves one POST: a request gets its answer as JSON or as one SSE event; the rest gets 202. */
function serveHttp(
  options: HostileServerOptions,
  req: IncomingMessage,
  res: ServerResponse,
  body: string,
): void {
  if (req.method !== 'POST') {
    res.writeHead(req.method === 'DELETE' ? 200 : 405).end();
    return;
  }
  let request: Request;
  try {
    request = JSON.parse(body) as Request;
  } catch {
    res.writeHead(400).end();
    return;
  }
  if (request.id === undefined || typeof request.method !== 'string') {
    res.writeHead(202).end();
    return;
  }
  const text = answerText(request, replyFor(options, request.method));
  if (text === undefined) return; // silent: the response never ends
  if (options.http === 'sse') {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(`event: message\ndata: ${text}\n\n`);
  } else {
    res.writeHead(200, { 'content-type': 'application/json' }).end(text);
  }
}

async function runHttp(options: HostileServerOptions): Promise<void> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => serveHttp(options, req, res, Buffer.concat(chunks).toString('utf8')));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${port}/mcp` })}\n`);
  // Ends with its parent: stdin closes.
  process.stdin.resume();
  process.stdin.once('end', () => process.exit(0));
}

async function startGrandchild(
  ignoreSigterm: boolean,
  pidFile: string | undefined,
  pgid: number | undefined,
): Promise<void> {
  const child = spawn(process.execPath, ['-e', GRANDCHILD, ignoreSigterm ? 'ignore' : 'obey'], {
    stdio: ['ignore', 'inherit', 'inherit', 'pipe'],
  });
  const ready = child.stdio[3];
  if (ready === null || ready === undefined) throw new Error('grandchild has no fd 3');
  await new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    ready.once('data', () => resolve());
  });
  ready.destroy();
  // The server may exit before its grandchild: nothing here waits for it.
  child.unref();
  if (pidFile !== undefined && child.pid !== undefined) {
    writeHostilePid(pidFile, {
      role: 'grandchild',
      pid: child.pid,
      ppid: process.pid,
      ...(pgid === undefined ? {} : { pgid }),
    });
  }
}

/** Runs a hostile server on this process's stdin/stdout. */
export async function runHostileServer(options: HostileServerOptions): Promise<void> {
  if (options.ignoreSigterm === true) process.on('SIGTERM', () => undefined);
  const pgid = ownPgid();
  if (options.pidFile !== undefined) {
    writeHostilePid(options.pidFile, {
      role: 'server',
      pid: process.pid,
      ppid: process.ppid,
      ...(pgid === undefined ? {} : { pgid }),
    });
  }
  if (options.http !== undefined) {
    await runHttp(options);
    return;
  }
  let grandchild: Promise<void> | undefined;
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  lines.on('close', () => {
    if (options.ignoreStdinEnd !== true) process.exit(0);
  });
  for await (const line of lines) {
    let request: Request;
    try {
      request = JSON.parse(line) as Request;
    } catch {
      continue;
    }
    if (request.id === undefined || typeof request.method !== 'string') continue;
    if (request.method === 'initialize' && options.grandchild !== undefined) {
      grandchild ??= startGrandchild(options.grandchild.ignoreSigterm, options.pidFile, pgid);
      await grandchild;
    }
    const text = answerText(request, replyFor(options, request.method));
    if (text !== undefined) process.stdout.write(`${text}\n`);
  }
  if (options.ignoreStdinEnd === true) setInterval(() => undefined, 1 << 30);
}

function parseOptions(argv: readonly string[]): HostileServerOptions {
  const at = argv.indexOf('--options');
  const json = at === -1 ? undefined : argv[at + 1];
  if (json === undefined)
    throw new Error('usage: hostile.js --options <HostileServerOptions JSON>');
  return JSON.parse(json) as HostileServerOptions;
}

runIfMain(import.meta.url, 'stepbind testkit hostile server', () =>
  runHostileServer(parseOptions(process.argv.slice(2))),
);
