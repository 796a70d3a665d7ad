/**
 * The catalog and tools of testkit's `@modelcontextprotocol/server` 2.4.0 servers, shared by the
 * stdio entry (`sdk2-server.ts`, `serveStdio`) and the HTTP entry (`sdk2-http.ts`,
 * `createMcpHandler`): one factory serves both eras on both transports.
 *
 * - `tools/list` serves the catalog in pages of `pageSize`, page `i` with `ttlMs` `ttls[i]` (the
 *   last repeats) and `cacheScope` `scopes[i]` (default `public`; `none` leaves it out), so a
 *   client that keeps page 1's TTL is caught.
 * - `echo` (and `t1`...) answer `echo <json of the arguments>`.
 * - `change` adds a tool `added<n>` to the catalog and publishes `list_changed` (on the
 *   `subscriptions/listen` stream in the modern era, as a plain notification in the 2025 era).
 * - `ask` asks for a confirmation: in the modern era it returns `input_required` (MRTR) with an
 *   elicitation `confirm` and `requestState: "round-1"`, and completes with
 *   `confirmed <content JSON> state <requestState>` when the retry carries an accepted answer; a
 *   2025-era client gets a real `elicitation/create` request (the SDK's legacy shim).
 * - Every inbound message is appended as one JSON line to the file named by `SDK2_SERVER_LOG`
 *   (if set), so tests count requests honestly: `{ method, id?, tool?, requestId?, era? }`.
 */
import { appendFileSync } from 'node:fs';
import {
  acceptedContent,
  inputRequired,
  Server,
  type CallToolResult,
  type McpServerFactory,
  type Tool,
} from '@modelcontextprotocol/server';

/** The `serverInfo` of testkit's SDK 2.4.0 servers. */
export const SDK2_SERVER_INFO = Object.freeze({ name: 'sdk2-era-server', version: '2.4.0' });

/** Environment variable naming the request log file of the SDK 2.4.0 servers. */
export const SDK2_SERVER_LOG_ENV = 'SDK2_SERVER_LOG';

/** Options of the SDK 2.4.0 servers (stdio and HTTP). */
export interface Sdk2ServerOptions {
  /** Tools listed at start (`echo`, `t1`..., then `change` and `ask`). @default 6 */
  readonly tools?: number;
  /** @default 2 */
  readonly pageSize?: number;
  /** `ttlMs` per page; the last value repeats. @default [60000, 0, 5000] */
  readonly ttls?: readonly number[];
  /** `cacheScope` per page (`none`: left out); the last value repeats. @default ['public'] */
  readonly scopes?: readonly ('public' | 'private' | 'none')[];
  /**
   * Serve only the 2026-07-28 era: a 2025-era opening (`initialize`) is answered with the
   * unsupported-protocol-version error. @default false (dual era)
   */
  readonly modernOnly?: boolean;
}

/** The generated tools, in order: `echo`, then `t1`... */
export function sdk2Tools(count: number): Tool[] {
  return Array.from({ length: count }, (_, i) => ({
    name: i === 0 ? 'echo' : `t${i}`,
    description: `tool ${i} of the sdk2 era server`,
    inputSchema: {
      type: 'object',
      properties: { text: { type: 'string' }, n: { type: 'integer' } },
    },
  }));
}

const CHANGE_TOOL: Tool = {
  name: 'change',
  description: 'adds a tool to the catalog and announces list_changed',
  inputSchema: { type: 'object', properties: {} },
};

const ASK_TOOL: Tool = {
  name: 'ask',
  description: 'asks the client for a confirmation (input_required) before it answers',
  inputSchema: { type: 'object', properties: {} },
};

/** The elicitation schema `ask` sends. */
const CONFIRM_SCHEMA = {
  type: 'object' as const,
  properties: { ok: { type: 'boolean' as const } },
  required: ['ok'],
};

/** Appends one line to the request log, if `SDK2_SERVER_LOG` names one. */
export function logInbound(message: unknown, era?: 'modern' | 'legacy'): void {
  const path = process.env[SDK2_SERVER_LOG_ENV];
  if (path === undefined || path === '') return;
  for (const m of Array.isArray(message) ? message : [message]) {
    if (typeof m !== 'object' || m === null) continue;
    const r = m as Record<string, unknown>;
    if (typeof r['method'] !== 'string') continue;
    const params = (
      typeof r['params'] === 'object' && r['params'] !== null ? r['params'] : {}
    ) as Record<string, unknown>;
    const entry = {
      method: r['method'],
      ...('id' in r ? { id: r['id'] } : {}),
      ...(r['method'] === 'tools/call' && typeof params['name'] === 'string'
        ? { tool: params['name'] }
        : {}),
      ...(r['method'] === 'notifications/cancelled' && 'requestId' in params
        ? { requestId: params['requestId'] }
        : {}),
      ...(era === undefined ? {} : { era }),
    };
    appendFileSync(path, `${JSON.stringify(entry)}\n`);
  }
}

/**
 * The mutable catalog of one server process (every instance the factory makes shares it, as the
 * instances of one real deployment share its database).
 */
export class Sdk2Catalog {
  readonly #pageSize: number;
  readonly #ttls: readonly number[];
  readonly #scopes: readonly ('public' | 'private' | 'none')[];
  #tools: Tool[];
  #changes = 0;

  constructor(options: Sdk2ServerOptions = {}) {
    this.#pageSize = Math.max(1, options.pageSize ?? 2);
    this.#ttls = options.ttls ?? [60_000, 0, 5_000];
    this.#scopes = options.scopes ?? ['public'];
    this.#tools = [...sdk2Tools(options.tools ?? 6), CHANGE_TOOL, ASK_TOOL];
  }

  /** Number of changes so far. */
  get changes(): number {
    return this.#changes;
  }

  /** Adds `added<n>` to the catalog; the caller announces it. @returns the new change count. */
  change(): number {
    this.#changes++;
    this.#tools = [
      ...this.#tools,
      {
        name: `added${this.#changes}`,
        description: `tool added by change ${this.#changes}`,
        inputSchema: { type: 'object', properties: {} },
      },
    ];
    return this.#changes;
  }

  /** One page of `tools/list` with its own `ttlMs` and `cacheScope`. */
  page(cursor: string | undefined): {
    tools: Tool[];
    nextCursor?: string;
    ttlMs: number;
    cacheScope?: 'public' | 'private';
  } {
    const start = Math.max(0, Number(cursor ?? '0') || 0);
    const page = Math.floor(start / this.#pageSize);
    const next = start + this.#pageSize;
    const scope = this.#scopes[Math.min(page, this.#scopes.length - 1)] ?? 'public';
    return {
      tools: this.#tools.slice(start, next),
      ...(next < this.#tools.length ? { nextCursor: String(next) } : {}),
      ttlMs: this.#ttls[Math.min(page, this.#ttls.length - 1)] ?? 0,
      ...(scope === 'none' ? {} : { cacheScope: scope }),
    };
  }

  /**
   * The server factory both entries serve.
   * @param announce publishes `list_changed` after `change` (given the instance that ran it).
   */
  factory(announce: (server: Server) => Promise<void> | void): McpServerFactory {
    return () => {
      const server = new Server(
        { ...SDK2_SERVER_INFO },
        { capabilities: { tools: { listChanged: true } } },
      );
      server.setRequestHandler('tools/list', (request) => this.page(request.params?.cursor));
      server.setRequestHandler('tools/call', async (request, ctx) => {
        const name = request.params.name;
        if (name === 'change') {
          const n = this.change();
          await announce(server);
          return text(`changed ${n}`);
        }
        if (name === 'ask') {
          const content = acceptedContent(ctx.mcpReq.inputResponses, 'confirm');
          if (content === undefined) {
            return inputRequired({
              inputRequests: {
                confirm: inputRequired.elicit({
                  message: 'Confirm?',
                  requestedSchema: CONFIRM_SCHEMA,
                }),
              },
              requestState: 'round-1',
            });
          }
          const state = ctx.mcpReq.requestState<string>();
          return text(`confirmed ${JSON.stringify(content)} state ${String(state)}`);
        }
        if (!this.#tools.some((t) => t.name === name)) {
          return { content: [{ type: 'text', text: `unknown tool ${name}` }], isError: true };
        }
        return text(`echo ${JSON.stringify(request.params.arguments ?? {})}`);
      });
      return server;
    };
  }
}

function text(value: string): CallToolResult {
  return { content: [{ type: 'text', text: value }] };
}
