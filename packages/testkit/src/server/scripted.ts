import { randomBytes } from 'node:crypto';
import { appendFileSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  isJSONRPCErrorResponse,
  isJSONRPCNotification,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  ListToolsRequestSchema,
  McpError,
} from '@modelcontextprotocol/sdk/types.js';
import type {
  CallToolResult,
  ListToolsResult,
  RequestId,
} from '@modelcontextprotocol/sdk/types.js';
import {
  checkGeneration,
  FixtureError,
  parseServerFixture,
  type FixtureGeneration,
  type FixtureProgress,
  type FixturePage,
  type FixtureTrigger,
  type ServerFixture,
} from '../fixture.js';
import { CATALOG_REVISION_META_KEY, scenarioFixture } from '../scenarios.js';
import type { AuditEntry, ScenarioName, ScriptedServerOptions } from '../types.js';

/** A running scripted MCP server and the handles a test uses to steer and observe it. */
export interface ScriptedServer {
  /** The SDK server. Connect it with `server.connect(transport)`; auditing hooks in automatically. */
  readonly server: Server;
  /** Every request and notification received so far, in order (live view, not a copy). */
  readonly audit: readonly AuditEntry[];
  /**
   * Resolves with the first audit entry, already recorded or still to come, that `test` accepts,
   * so a test waits for what the server received instead of polling {@link ScriptedServer.audit}.
   * @throws Error when the server closes first.
   */
  waitFor(test: (entry: AuditEntry) => boolean): Promise<AuditEntry>;
  /** The current catalog generation (0-based). */
  readonly generation: number;
  /**
   * Switches to generation `n` of the catalog. Cursors of other generations become invalid. Does
   * not notify; call {@link ScriptedServer.notifyListChanged} for that.
   * @throws {RangeError} when generation `n` does not exist.
   */
  setGeneration(n: number): void;
  /**
   * Appends a new generation made of `pages` (tool arrays or {@link FixturePage}s) and switches to
   * it; returns its number. Does not notify.
   * @throws {FixtureError} when the pages are malformed.
   */
  replaceCatalog(
    pages: readonly (readonly unknown[] | FixturePage)[],
    options?: { readonly revision?: string },
  ): number;
  /**
   * @internal Records a message the process received that never reaches the SDK server (the
   * modern-era front answers `server/discover` and `subscriptions/listen` itself), so the audit
   * trail stays the record of what arrived on the wire.
   */
  recordReceived(message: unknown): void;
  /** Sends `notifications/tools/list_changed` to the connected client. */
  notifyListChanged(): Promise<void>;
  /** Closes the server's connection. Idempotent. */
  close(): Promise<void>;
  /** Same as {@link ScriptedServer.close}. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** How a scripted server reacts to an `exit` trigger. */
export interface ScriptedServerHooks {
  /**
   * Called instead of responding when an `exit` trigger fires.
   * @default close the server's transport (the in-process stand-in for a crash)
   */
  readonly exit?: (code: number) => void;
  /**
   * Whether a message arriving on the transport enters the audit trail. The modern-era front
   * leaves out the `initialize` it sends the SDK server itself, which never was on the wire.
   * @default every message
   */
  readonly audit?: (message: unknown) => boolean;
}

const VERSION = '0.1.0';

interface CursorTarget {
  readonly generation: number;
  readonly page: number;
}

/** Server whose `connect` installs the audit and after-response hooks on the transport first. */
class ScriptedMcpServer extends Server {
  readonly #beforeConnect: (transport: Transport) => void;

  constructor(
    info: { name: string; version: string },
    beforeConnect: (transport: Transport) => void,
  ) {
    super(info, { capabilities: { tools: { listChanged: true } } });
    this.#beforeConnect = beforeConnect;
  }

  override async connect(transport: Transport): Promise<void> {
    this.#beforeConnect(transport);
    return super.connect(transport);
  }
}

/** The `serverInfo` a scripted server gives (in `initialize`, and in the modern era's `_meta`). */
export function scriptedServerInfo(options: ScriptedServerOptions): {
  readonly name: string;
  readonly version: string;
} {
  return options.serverInfo ?? { name: `stepbind-testkit-${options.scenario}`, version: VERSION };
}

function loadFixture(options: ScriptedServerOptions): ServerFixture {
  const scenario: ScenarioName = options.scenario;
  if (scenario !== 'fixture') {
    if (options.fixture !== undefined || options.fixturePath !== undefined) {
      throw new FixtureError('options', `scenario '${scenario}' takes no fixture; use 'fixture'`);
    }
    return scenarioFixture(scenario);
  }
  if (options.fixture !== undefined && options.fixturePath !== undefined) {
    throw new FixtureError('options', 'give either fixture or fixturePath, not both');
  }
  if (options.fixture !== undefined) return parseServerFixture(options.fixture);
  if (options.fixturePath === undefined) {
    throw new FixtureError('options', "scenario 'fixture' needs fixture or fixturePath");
  }
  let text: string;
  try {
    text = readFileSync(options.fixturePath, 'utf8');
  } catch (error) {
    throw new FixtureError(
      'options.fixturePath',
      `cannot read ${options.fixturePath}: ${String(error)}`,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new FixtureError('$', `${options.fixturePath} is not JSON: ${String(error)}`);
  }
  return parseServerFixture(json);
}

function checkDelay(value: number | undefined, name: string): number {
  if (value === undefined) return 0;
  if (!Number.isInteger(value) || value < 0) {
    throw new FixtureError(`options.${name}`, 'expected a non-negative integer');
  }
  return value;
}

const toolName = (tool: unknown): string | undefined =>
  typeof tool === 'object' && tool !== null && typeof (tool as { name?: unknown }).name === 'string'
    ? (tool as { name: string }).name
    : undefined;

/**
 * Creates a real MCP server (the SDK's low-level `Server`, advertising
 * `{ tools: { listChanged: true } }`) that plays a scripted catalog. Connect `server` to any
 * transport; {@link connectInMemory} and the stdio entry do that for you.
 *
 * Cursors are opaque random tokens mapped to (generation, page); each is issued once per
 * (generation, target page) and replays return the same page and next cursor. A cursor this server
 * never issued, or one from another generation, gets JSON-RPC error -32602. Every listed tool is
 * callable and answers `"<tool> ok"` unless the fixture says otherwise; an unlisted tool gets -32602.
 *
 * @throws {FixtureError} when the options or fixture are malformed.
 */
export function createScriptedServer(
  options: ScriptedServerOptions,
  hooks: ScriptedServerHooks = {},
): ScriptedServer {
  const fixture = loadFixture(options);
  const pageDelayMs = checkDelay(options.pageDelayMs, 'pageDelayMs');
  const callDelayMs = checkDelay(options.callDelayMs, 'callDelayMs');
  const auditPath = options.auditPath;
  const generations: FixtureGeneration[] = [...fixture.generations];
  const revisions: (string | undefined)[] = generations.map((gen) => gen.revision);
  const toolNames = new Map<number, ReadonlySet<string>>();
  const triggers = (fixture.triggers ?? []).map((trigger) => ({ trigger, seen: 0 }));
  const cursors = new Map<string, CursorTarget>();
  const issued = new Map<string, string>();
  const audit: AuditEntry[] = [];
  const waiters = new Set<{
    readonly test: (entry: AuditEntry) => boolean;
    readonly resolve: (entry: AuditEntry) => void;
    readonly reject: (error: Error) => void;
  }>();
  const afterResponse = new Map<RequestId, () => Promise<void>>();
  let generation = fixture.initialGeneration ?? 0;
  let closed = false;

  const record = (entry: Omit<AuditEntry, 'seq' | 'generation' | 'pid'>): void => {
    const full: AuditEntry = { seq: audit.length + 1, ...entry, generation, pid: process.pid };
    audit.push(full);
    // Synchronous so the trail survives a crash or kill right after this message.
    if (auditPath !== undefined) appendFileSync(auditPath, `${JSON.stringify(full)}\n`);
    for (const waiter of [...waiters]) {
      if (!waiter.test(full)) continue;
      waiters.delete(waiter);
      waiter.resolve(full);
    }
  };
  const waitFor = (test: (entry: AuditEntry) => boolean): Promise<AuditEntry> => {
    const seen = audit.find(test);
    if (seen !== undefined) return Promise.resolve(seen);
    if (closed) return Promise.reject(new Error('scripted server closed before the awaited entry'));
    return new Promise((resolve, reject) => waiters.add({ test, resolve, reject }));
  };

  const onMessage = (message: unknown): void => {
    if (!isJSONRPCRequest(message) && !isJSONRPCNotification(message)) return;
    const params = message.params;
    if (message.method === 'tools/list') {
      const cursor = params?.cursor;
      record({ method: message.method, cursor: typeof cursor === 'string' ? cursor : null });
    } else if (message.method === 'tools/call' && typeof params?.name === 'string') {
      const args = params.arguments;
      record({
        method: message.method,
        tool: params.name,
        ...(typeof args === 'object' && args !== null && !Array.isArray(args)
          ? { arguments: args as Record<string, unknown> }
          : {}),
        ...(typeof params._meta === 'object' && params._meta !== null
          ? { meta: params._meta }
          : {}),
      });
    } else {
      record({ method: message.method });
    }
  };

  const server = new ScriptedMcpServer({ ...scriptedServerInfo(options) }, (transport) => {
    const previous = transport.onmessage;
    // Protocol.connect chains an existing onmessage before dispatch, so this runs first.
    transport.onmessage = (message, extra) => {
      if (hooks.audit?.(message) !== false) onMessage(message);
      previous?.(message, extra);
    };
    const send = transport.send.bind(transport);
    transport.send = async (message, sendOptions) => {
      await send(message, sendOptions);
      if (isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) {
        const after = message.id === undefined ? undefined : afterResponse.get(message.id);
        if (after !== undefined) {
          afterResponse.delete(message.id as RequestId);
          await after();
        }
      }
    };
  });

  const setGeneration = (n: number): void => {
    if (!Number.isInteger(n) || n < 0 || n >= generations.length) {
      throw new RangeError(`generation ${n} does not exist (0..${generations.length - 1})`);
    }
    generation = n;
  };

  const issue = (gen: number, page: number): string => {
    const key = `${gen}:${page}`;
    let token = issued.get(key);
    if (token === undefined) {
      token = randomBytes(12).toString('base64url');
      issued.set(key, token);
    }
    cursors.set(token, { generation: gen, page });
    return token;
  };

  const resolveCursor = (cursor: string | undefined): number => {
    if (cursor === undefined) return 0;
    const target = cursors.get(cursor);
    if (target === undefined) {
      throw new McpError(
        ErrorCode.InvalidParams,
        `unknown cursor ${JSON.stringify(cursor.slice(0, 64))}: this server never issued it; list again without a cursor`,
      );
    }
    if (target.generation !== generation) {
      throw new McpError(
        ErrorCode.InvalidParams,
        `stale cursor from catalog generation ${target.generation} (now ${generation}); list again without a cursor`,
      );
    }
    return target.page;
  };

  const listPage = (cursor: string | undefined): ListToolsResult => {
    const index = resolveCursor(cursor);
    const gen = generations[generation] as FixtureGeneration;
    const page: FixturePage = gen.pages[index] ?? { tools: [] };
    const result: ListToolsResult = { tools: page.tools as ListToolsResult['tools'] };
    if (page.nextCursor !== null) {
      const target = page.nextPage ?? index + 1;
      if (target < gen.pages.length || gen.endless === true) {
        const token = page.nextCursor ?? issue(generation, target);
        cursors.set(token, { generation, page: target });
        result.nextCursor = token;
      }
    }
    const revision = page.revision === undefined ? revisions[generation] : page.revision;
    if (typeof revision === 'string') result._meta = { [CATALOG_REVISION_META_KEY]: revision };
    return result;
  };

  const listedTools = (): ReadonlySet<string> => {
    let names = toolNames.get(generation);
    if (names === undefined) {
      const gen = generations[generation] as FixtureGeneration;
      names = new Set(
        gen.pages.flatMap((page) => page.tools.map(toolName)).filter((n) => n !== undefined),
      );
      toolNames.set(generation, names);
    }
    return names;
  };

  const callTool = (name: string): CallToolResult => {
    if (!listedTools().has(name)) {
      throw new McpError(
        ErrorCode.InvalidParams,
        `unknown tool ${JSON.stringify(name)} in catalog generation ${generation}`,
      );
    }
    const spec = fixture.calls?.[name];
    const text =
      spec?.text ??
      (spec?.structuredContent === undefined
        ? `${name} ok`
        : JSON.stringify(spec.structuredContent));
    const result: CallToolResult = { content: [{ type: 'text', text }] };
    if (spec?.structuredContent !== undefined)
      result.structuredContent = { ...spec.structuredContent };
    if (spec?.isError === true) result.isError = true;
    return result;
  };

  const applyState = (trigger: FixtureTrigger): void => {
    if (trigger.setGeneration !== undefined) setGeneration(trigger.setGeneration);
    if (trigger.setRevision !== undefined) revisions[generation] = trigger.setRevision ?? undefined;
  };

  const matching = (
    method: 'tools/list' | 'tools/call',
    cursor: string | undefined,
    tool: string,
  ) =>
    triggers
      .filter((entry) => {
        const on = entry.trigger.on;
        if (on.method !== method) return false;
        if (
          on.method === 'tools/list' &&
          on.cursor !== undefined &&
          on.cursor !== (cursor ?? null)
        ) {
          return false;
        }
        if (on.method === 'tools/call' && on.tool !== undefined && on.tool !== tool) return false;
        entry.seen += 1;
        return on.nth === undefined || on.nth === entry.seen;
      })
      .map((entry) => entry.trigger);

  /** Runs `respond` wrapped in the triggers' actions, in the order documented on FixtureTrigger. */
  const scripted = async <T>(
    fired: readonly FixtureTrigger[],
    baseDelayMs: number,
    requestId: RequestId,
    signal: AbortSignal,
    respond: () => T | Promise<T>,
  ): Promise<T> => {
    const delayMs = fired.reduce((sum, trigger) => sum + (trigger.delayMs ?? 0), baseDelayMs);
    if (delayMs > 0) await sleep(delayMs, undefined, { signal });
    for (const trigger of fired) if (trigger.stateChange === 'before') applyState(trigger);
    if (fired.some((trigger) => trigger.notify === 'before')) await server.sendToolListChanged();
    const exit = fired.find((trigger) => trigger.exit !== undefined)?.exit;
    if (exit !== undefined) {
      if (hooks.exit !== undefined) hooks.exit(exit);
      else await server.close();
      throw new McpError(ErrorCode.ConnectionClosed, `scripted exit ${exit}`);
    }
    try {
      return await respond();
    } finally {
      for (const trigger of fired) if (trigger.stateChange !== 'before') applyState(trigger);
      if (fired.some((trigger) => trigger.notify === 'after')) {
        afterResponse.set(requestId, () => server.sendToolListChanged());
      }
    }
  };

  server.setRequestHandler(ListToolsRequestSchema, (request, extra) => {
    const cursor = request.params?.cursor;
    return scripted(
      matching('tools/list', cursor, ''),
      pageDelayMs,
      extra.requestId,
      extra.signal,
      () => listPage(cursor),
    );
  });

  server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
    const name = request.params.name;
    const token = request.params._meta?.progressToken;
    const steps = token === undefined ? [] : (fixture.calls?.[name]?.progress ?? []);
    return scripted(
      matching('tools/call', undefined, name),
      callDelayMs,
      extra.requestId,
      extra.signal,
      async () => {
        if (token === undefined || steps.length === 0) return callTool(name);
        for (const step of steps) {
          if (step.afterResult !== true) await sendProgress(step, token, extra);
        }
        const late = steps.filter((step) => step.afterResult === true);
        if (late.length > 0) {
          afterResponse.set(extra.requestId, async () => {
            for (const step of late) await sendProgress(step, token, undefined);
          });
        }
        return callTool(name);
      },
    );
  });

  /** Sends one fixture progress step (or its run) for `token`; during a call, on its stream. */
  const sendProgress = async (
    step: FixtureProgress,
    token: string | number,
    extra: { readonly signal: AbortSignal; readonly requestId: RequestId } | undefined,
  ): Promise<void> => {
    if ((step.delayMs ?? 0) > 0) {
      await sleep(step.delayMs, undefined, extra === undefined ? {} : { signal: extra.signal });
    }
    for (let i = 0; i < (step.repeat ?? 1); i++) {
      const progress = typeof step.progress === 'number' ? step.progress + i : step.progress;
      const params = {
        progressToken: token,
        progress,
        ...(step.total === undefined ? {} : { total: step.total }),
        ...(step.message === undefined ? {} : { message: step.message }),
      };
      await server.notification(
        { method: 'notifications/progress', params },
        extra === undefined ? {} : { relatedRequestId: extra.requestId },
      );
    }
  };

  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    afterResponse.clear();
    for (const waiter of waiters)
      waiter.reject(new Error('scripted server closed before the awaited entry'));
    waiters.clear();
    await server.close();
  };

  return {
    server,
    audit,
    waitFor,
    get generation() {
      return generation;
    },
    setGeneration,
    replaceCatalog(pages, replaceOptions = {}) {
      const candidate = {
        pages: pages.map((page) => (Array.isArray(page) ? { tools: page } : page)),
        ...(replaceOptions.revision === undefined ? {} : { revision: replaceOptions.revision }),
      };
      const gen = checkGeneration(candidate, `$.generations[${generations.length}]`);
      generations.push(gen);
      revisions.push(gen.revision);
      generation = generations.length - 1;
      return generation;
    },
    recordReceived: onMessage,
    notifyListChanged: () => server.sendToolListChanged(),
    close,
    [Symbol.asyncDispose]: close,
  };
}
