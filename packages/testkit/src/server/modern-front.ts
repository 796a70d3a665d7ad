/**
 * The 2026-07-28 (stateless) front of a scripted server: a framing layer between this process's
 * stdin/stdout and the SDK 1.32.2 scripted server, so the same scripts, triggers and audit trails
 * serve both protocol eras. Wire format as stepbind's `era/envelope.ts` and testkit's
 * `era/raw-server.ts` speak it:
 *
 * - `server/discover` is answered here (`supportedVersions`, `capabilities` with
 *   `tools.listChanged`, `serverInfo`, optional `ttlMs`/`cacheScope`).
 * - Every request must carry the `_meta` envelope (`io.modelcontextprotocol/protocolVersion`,
 *   `clientCapabilities`, `clientInfo`): without it -32602, with a version this server does not
 *   speak -32022 (`data: { supported, requested }`). The envelope is stripped (the caller's own
 *   `_meta` keys kept) and the request goes to the SDK server under its own id.
 * - Results are stamped with `resultType: 'complete'`, `_meta` `serverInfo`, and on `tools/list` and
 *   `server/discover` the configured cache hints.
 * - `subscriptions/listen` is answered with `notifications/subscriptions/acknowledged`; the SDK
 *   server's `notifications/tools/list_changed` goes out on every open stream (stamped with its
 *   `subscriptionId`) and is dropped when none is open; `notifications/cancelled` naming the listen
 *   request ends the stream.
 * - The SDK server is initialized once by the front (`initialize` + `notifications/initialized`,
 *   which never were on the wire and are left out of the audit trail); every message that did
 *   arrive, answered here or forwarded, is in the trail, after the envelope is stripped.
 *
 * In `dual` mode a client whose first request is `initialize` talks to the SDK server directly
 * (2025 era, byte for byte as the `legacy` entry); in `modern` mode `initialize` is refused with
 * -32022. Triggers still fire: delays and cancellation go to the SDK server as they arrive, and an
 * `exit` trigger ends the process.
 */
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { ScriptedServerOptions } from '../types.js';
import { createScriptedServer, scriptedServerInfo, type ScriptedServer } from './scripted.js';

/** The protocol version of the modern era. */
export const MODERN_VERSION = '2026-07-28';
/** The 2025 version a `dual` server also offers. */
export const LEGACY_VERSION = '2025-11-25';

const KEY = Object.freeze({
  protocolVersion: 'io.modelcontextprotocol/protocolVersion',
  clientCapabilities: 'io.modelcontextprotocol/clientCapabilities',
  clientInfo: 'io.modelcontextprotocol/clientInfo',
  logLevel: 'io.modelcontextprotocol/logLevel',
  serverInfo: 'io.modelcontextprotocol/serverInfo',
  subscriptionId: 'io.modelcontextprotocol/subscriptionId',
});
const ENVELOPE_KEYS: readonly string[] = [
  KEY.protocolVersion,
  KEY.clientCapabilities,
  KEY.clientInfo,
  KEY.logLevel,
];
/** The id of the front's own `initialize`; a string, so it never meets a client's numeric id. */
const INIT_ID = 'stepbind-testkit-front-initialize';

type Id = string | number;
type Message = Record<string, unknown>;

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** The SDK server's side of the front: messages handed to it, and what it sends back. */
class InnerTransport implements Transport {
  onmessage?: Transport['onmessage'];
  onclose?: Transport['onclose'];
  onerror?: Transport['onerror'];
  constructor(private readonly out: (message: JSONRPCMessage) => void) {}
  start(): Promise<void> {
    return Promise.resolve();
  }
  send(message: JSONRPCMessage): Promise<void> {
    this.out(message);
    return Promise.resolve();
  }
  /** Set by the front: told once the SDK server closed this transport. */
  closed?: () => void;
  close(): Promise<void> {
    this.onclose?.();
    this.closed?.();
    return Promise.resolve();
  }
}

/** A running front; {@link runModernFront} wires it to stdin/stdout. */
export interface ModernFront {
  readonly scripted: ScriptedServer;
  /** Hands one message from the client to the front. */
  receive(message: unknown): void;
  /** Closes the SDK server. */
  close(): Promise<void>;
}

/**
 * Creates the front over a new scripted server; `write` sends one message to the client.
 *
 * @throws {FixtureError} when the options or fixture are malformed.
 */
export function createModernFront(
  options: ScriptedServerOptions,
  era: 'modern' | 'dual',
  write: (message: unknown) => void,
  hooks: {
    /** As {@link ScriptedServerHooks.exit}. @default close the SDK server (then `onClose`) */
    readonly exit?: (code: number) => void;
    /** Called once the SDK server closed (`close()`, or an `exit` trigger in memory). */
    readonly onClose?: () => void;
  } = {},
): ModernFront {
  const synthetic = new WeakSet<object>();
  const exit = hooks.exit ?? ((): void => void scripted.close());
  const scripted = createScriptedServer(options, {
    ...(hooks.exit === undefined ? {} : { exit: hooks.exit }),
    audit: (m) => !(isRecord(m) && synthetic.has(m)),
  });
  const supported = era === 'dual' ? [MODERN_VERSION, LEGACY_VERSION] : [MODERN_VERSION];
  const serverInfo = { ...scriptedServerInfo(options) };
  const hints = {
    ...(options.cache?.ttlMs === undefined ? {} : { ttlMs: options.cache.ttlMs }),
    ...(options.cache?.cacheScope === undefined ? {} : { cacheScope: options.cache.cacheScope }),
  };
  /** Method of each forwarded modern request, by id, until its answer goes out. */
  const forwarded = new Map<Id, string>();
  const listens = new Set<Id>();
  /** Set when a `dual` server's client opened with `initialize`: from then on, a pass-through. */
  let legacy = false;
  /** Messages that arrived while the front's own `initialize` was running, in order. */
  let queue: Message[] | undefined;
  let ready = false;

  const inner = new InnerTransport((message) => fromInner(message));
  let closedOnce = false;
  inner.closed = () => {
    if (closedOnce) return;
    closedOnce = true;
    hooks.onClose?.();
  };
  const toInner = (message: Message): void => inner.onmessage?.(message as JSONRPCMessage);
  // Protocol.connect installs its handlers before its first await: toInner works from here on.
  void scripted.server.connect(inner);

  const reply = (id: unknown, result: Message): void =>
    write({ jsonrpc: '2.0', id, result: stamp(result) });
  const fail = (id: unknown, code: number, message: string, data?: unknown): void =>
    write({
      jsonrpc: '2.0',
      id,
      error: { code, message, ...(data === undefined ? {} : { data }) },
    });
  const stamp = (result: Message, extra: Message = {}): Message => ({
    ...result,
    ...extra,
    resultType: typeof result['resultType'] === 'string' ? result['resultType'] : 'complete',
    _meta: { ...(isRecord(result['_meta']) ? result['_meta'] : {}), [KEY.serverInfo]: serverInfo },
  });

  const initialize = (): void => {
    queue = [];
    const request = {
      jsonrpc: '2.0',
      id: INIT_ID,
      method: 'initialize',
      params: {
        protocolVersion: LEGACY_VERSION,
        capabilities: {},
        clientInfo: { name: 'stepbind-testkit-modern-front', version: '0.1.0' },
      },
    };
    synthetic.add(request);
    toInner(request);
  };

  const initialized = (): void => {
    const note = { jsonrpc: '2.0', method: 'notifications/initialized' };
    synthetic.add(note);
    toInner(note);
    ready = true;
    const waiting = queue ?? [];
    queue = undefined;
    for (const message of waiting) modern(message);
  };

  function fromInner(m: Message): void {
    if (m['id'] === INIT_ID && !('method' in m)) {
      if ('error' in m) {
        process.stderr.write(`modern front: the SDK server refused initialize\n`);
        exit(2);
        return;
      }
      initialized();
      return;
    }
    if (legacy) {
      write(m);
      return;
    }
    const id = m['id'] as Id | undefined;
    const method = m['method'];
    if (typeof method !== 'string') {
      // An answer to a forwarded request.
      const of = id === undefined ? undefined : forwarded.get(id);
      if (id === undefined || of === undefined) return;
      forwarded.delete(id);
      if (isRecord(m['result'])) {
        write({ ...m, result: stamp(m['result'], of === 'tools/list' ? hints : {}) });
      } else {
        write(m);
      }
      return;
    }
    if (id !== undefined) {
      // The 2026-07-28 era has no server-to-client requests; the scripted server sends none.
      toInner({
        jsonrpc: '2.0',
        id,
        error: { code: -32601, message: 'no server-to-client requests in 2026-07-28' },
      });
      return;
    }
    if (method === 'notifications/tools/list_changed') {
      for (const subscription of listens) {
        write({
          jsonrpc: '2.0',
          method,
          params: { _meta: { [KEY.subscriptionId]: subscription } },
        });
      }
      return;
    }
    write(m);
  }

  /** A message of a modern client (requests: with the envelope checked and stripped). */
  function modern(m: Message): void {
    if (!ready && requiresInner(m)) {
      if (queue === undefined) initialize();
      queue?.push(m);
      return;
    }
    if (queue !== undefined) {
      queue.push(m); // keep arrival order while the front's initialize runs
      return;
    }
    const id = m['id'] as Id | undefined;
    const method = m['method'];
    if (typeof method !== 'string') return; // an answer: the front asks nothing
    const params = isRecord(m['params']) ? m['params'] : {};
    const stripped = strip(m, params);
    if (id === undefined) {
      scriptedRecordOrForward(stripped, params);
      return;
    }
    const refusal = envelopeRefusal(method, params, supported);
    if (refusal !== undefined) {
      scripted.recordReceived(stripped);
      fail(id, refusal.code, refusal.message, refusal.data);
      return;
    }
    if (method === 'server/discover') {
      scripted.recordReceived(stripped);
      reply(id, {
        supportedVersions: supported,
        capabilities: { tools: { listChanged: true } },
        serverInfo,
        ...hints,
      });
      return;
    }
    if (method === 'subscriptions/listen') {
      scripted.recordReceived(stripped);
      listen(id, params);
      return;
    }
    forwarded.set(id, method);
    toInner(stripped);
  }

  /** A notification: a listen cancellation is the front's, anything else the SDK server's. */
  function scriptedRecordOrForward(stripped: Message, params: Message): void {
    const target = params['requestId'] as Id | undefined;
    if (stripped['method'] === 'notifications/cancelled' && target !== undefined) {
      if (listens.delete(target)) {
        scripted.recordReceived(stripped);
        return;
      }
    }
    if (ready) toInner(stripped);
    else scripted.recordReceived(stripped);
  }

  function listen(id: Id, params: Message): void {
    const wanted = params['notifications'];
    if (!isRecord(wanted)) {
      fail(id, -32602, "Invalid params: 'notifications' is required and must be an object");
      return;
    }
    const honored = wanted['toolsListChanged'] === true ? { toolsListChanged: true } : {};
    write({
      jsonrpc: '2.0',
      method: 'notifications/subscriptions/acknowledged',
      params: { notifications: honored, _meta: { [KEY.subscriptionId]: id } },
    });
    if (Object.keys(honored).length === 0) {
      reply(id, { _meta: { [KEY.subscriptionId]: id } });
      return;
    }
    listens.add(id);
  }

  if (era === 'modern') initialize();

  return {
    scripted,
    receive(message) {
      if (!isRecord(message)) return;
      if (legacy) {
        toInner(message);
        return;
      }
      // Before the front initialized the SDK server (a `server/discover` alone does not), a dual
      // server still takes the 2025 handshake.
      if (era === 'dual' && message['method'] === 'initialize' && !ready && queue === undefined) {
        legacy = true;
        toInner(message);
        return;
      }
      modern(message);
    },
    close: () => scripted.close(),
  };
}

/** Whether a message needs the SDK server (and so its `initialize` first). */
function requiresInner(m: Message): boolean {
  const method = m['method'];
  if (typeof method !== 'string' || !('id' in m)) return false;
  return method !== 'server/discover' && method !== 'subscriptions/listen';
}

/** The message with the envelope's keys taken out of `params._meta` (removed when empty). */
function strip(m: Message, params: Message): Message {
  if (!isRecord(params['_meta'])) return m;
  const meta = Object.fromEntries(
    Object.entries(params['_meta']).filter(([key]) => !ENVELOPE_KEYS.includes(key)),
  );
  const { _meta: _dropped, ...rest } = params;
  void _dropped;
  return { ...m, params: Object.keys(meta).length === 0 ? rest : { ...rest, _meta: meta } };
}

/** Why a modern request is refused: no envelope (-32602) or an unknown version (-32022). */
function envelopeRefusal(
  method: string,
  params: Message,
  supported: readonly string[],
): { code: number; message: string; data?: unknown } | undefined {
  if (method === 'initialize') {
    // A modern server, or a dual one already speaking 2026-07-28 to this client.
    return {
      code: -32022,
      message: `Unsupported protocol version: this server speaks ${MODERN_VERSION} here (no initialize)`,
      data: { supported: [MODERN_VERSION], requested: params['protocolVersion'] },
    };
  }
  const meta = params['_meta'];
  if (!isRecord(meta)) {
    return {
      code: -32602,
      message: `Invalid params: ${method} must carry the params._meta envelope`,
    };
  }
  for (const key of [KEY.protocolVersion, KEY.clientCapabilities, KEY.clientInfo]) {
    const value = meta[key];
    if (key === KEY.protocolVersion ? typeof value !== 'string' : !isRecord(value)) {
      return { code: -32602, message: `Invalid params: the envelope of ${method} lacks ${key}` };
    }
  }
  const requested = meta[KEY.protocolVersion] as string;
  if (requested !== MODERN_VERSION) {
    return {
      code: -32022,
      message: `Unsupported protocol version ${requested.slice(0, 40)}`,
      data: { supported, requested },
    };
  }
  return undefined;
}

/**
 * Runs a front on this process's stdin/stdout until stdin ends (then exits 0), with the SDK's own
 * newline-delimited JSON framing. Only protocol messages go to stdout.
 */
export function runModernFront(
  options: ScriptedServerOptions,
  era: 'modern' | 'dual',
): Promise<void> {
  const front = createModernFront(
    options,
    era,
    (message) => process.stdout.write(serializeMessage(message as JSONRPCMessage)),
    { exit: (code) => process.exit(code) },
  );
  const buffer = new ReadBuffer();
  process.stdin.on('data', (chunk: Buffer) => {
    buffer.append(chunk);
    for (;;) {
      let message: JSONRPCMessage | null;
      try {
        message = buffer.readMessage();
      } catch (error) {
        process.stderr.write(`modern front: unreadable message: ${String(error)}\n`);
        continue;
      }
      if (message === null) break;
      front.receive(message);
    }
  });
  process.stdin.once('end', () => {
    front.close().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`stepbind testkit server: close failed: ${String(error)}\n`);
        process.exit(1);
      },
    );
  });
  return Promise.resolve();
}
