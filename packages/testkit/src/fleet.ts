import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { ServerConnector } from '@stepbind/runtime';
import { connectTransport } from '@stepbind/runtime/internal';
import { scriptedTestEra } from './connect.js';
import { createModernFront } from './server/modern-front.js';
import { createScriptedServer, type ScriptedServer } from './server/scripted.js';
import type { AuditEntry, ScriptedServerOptions } from './types.js';

/**
 * A set of scripted servers that a runtime reaches over in-memory transport pairs, for fast and
 * deterministic tests of a whole agent loop. Each `connect` starts a fresh server instance (a
 * "process"); `crash` closes the live one, as if its process died.
 */
export interface InMemoryFleet {
  /** Pass as `McpRuntime.open(config, { connect })`. */
  readonly connect: ServerConnector;
  /** An `mcpServers` configuration naming every server of the fleet (`command: "in-memory"`). */
  config(overrides?: Readonly<Record<string, Readonly<Record<string, unknown>>>>): {
    mcpServers: Record<string, Record<string, unknown>>;
  };
  /** The live (latest) instance of a server; throws when it was never started. */
  server(name: string): ScriptedServer;
  /** Every instance ever started for `name`, oldest first. */
  instances(name: string): readonly ScriptedServer[];
  /** The audit entries of every instance of `name`, in start order. */
  audit(name: string): AuditEntry[];
  /** Closes the live instance's transport: the client sees the connection drop. */
  crash(name: string): Promise<void>;
  /** Makes the next `connect` of `name` fail (once, or until cleared with `false`). */
  failNextConnect(name: string, fail?: boolean | 'once'): void;
  /** Closes every instance. Idempotent. */
  close(): Promise<void>;
}

/** Which way a message travels between the runtime's client and a scripted server. */
export type MessageDirection = 'to-server' | 'to-client';

/** Options of {@link createInMemoryFleet}. */
export interface InMemoryFleetOptions {
  /**
   * Called for every JSON-RPC message instead of delivering it at once; call `deliver` to hand it
   * over (later, or in another order across connections). Used with `fc.scheduler()` to explore
   * interleavings. Keep per-direction order (FIFO) as a real pipe would.
   */
  readonly deliver?: (
    info: {
      readonly server: string;
      readonly direction: MessageDirection;
      readonly message: unknown;
    },
    deliver: () => void,
  ) => void;
}

/**
 * Creates an {@link InMemoryFleet} from per-server scripted options (the `auditPath` option is
 * ignored; the in-memory audit is kept). A server's `era` (default: `STEPBIND_TEST_ERA`, see
 * `scriptedTestEra`) works as over stdio: `modern`/`dual` put the 2026-07-28 front in front of it,
 * and the runtime probes with `server/discover` before `initialize`.
 */
export function createInMemoryFleet(
  servers: Readonly<Record<string, ScriptedServerOptions>>,
  fleetOptions: InMemoryFleetOptions = {},
): InMemoryFleet {
  const instances = new Map<string, ScriptedServer[]>();
  const failing = new Map<string, boolean | 'once'>();
  const connect: ServerConnector = async (name, config, { signal }) => {
    const options = servers[name];
    if (options === undefined) throw new Error(`in-memory fleet has no server "${name}"`);
    const mode = failing.get(name);
    if (mode !== undefined && mode !== false) {
      if (mode === 'once') failing.delete(name);
      throw new Error(`scripted start failure of in-memory server "${name}"`);
    }
    const era = options.era ?? scriptedTestEra();
    const [clientTransport, serverTransport] = InMemoryTransport.createLinkedPair();
    const front =
      era === 'legacy'
        ? undefined
        : createModernFront(
            options,
            era,
            (message) => {
              serverTransport.send(message as JSONRPCMessage).catch(() => undefined);
            },
            { onClose: () => void serverTransport.close() },
          );
    const scripted = front?.scripted ?? createScriptedServer(options);
    const list = instances.get(name) ?? [];
    list.push(scripted);
    instances.set(name, list);
    const intercept = fleetOptions.deliver;
    if (intercept !== undefined) {
      for (const [transport, direction] of [
        [clientTransport, 'to-server'],
        [serverTransport, 'to-client'],
      ] as const) {
        const send = transport.send.bind(transport);
        transport.send = (message, sendOptions) => {
          intercept({ server: name, direction, message }, () => {
            send(message, sendOptions).catch(() => undefined);
          });
          return Promise.resolve();
        };
      }
    }
    if (front === undefined) {
      await scripted.server.connect(serverTransport);
    } else {
      serverTransport.onmessage = (message) => front.receive(message);
      serverTransport.onclose = () => void front.close();
      await serverTransport.start();
    }
    try {
      return await connectTransport(name, clientTransport, {
        signal,
        timeoutMs: config.startupTimeoutMs,
        ...(era === 'legacy' ? {} : { probeTimeoutMs: 2_000 }),
      });
    } catch (error) {
      await scripted.close();
      throw error;
    }
  };
  const live = (name: string): ScriptedServer => {
    const last = instances.get(name)?.at(-1);
    if (last === undefined) throw new Error(`in-memory server "${name}" was never started`);
    return last;
  };
  return {
    connect,
    config(overrides = {}) {
      const mcpServers: Record<string, Record<string, unknown>> = {};
      for (const name of Object.keys(servers)) {
        mcpServers[name] = { command: 'in-memory', args: [name], ...(overrides[name] ?? {}) };
      }
      return { mcpServers };
    },
    server: live,
    instances: (name) => instances.get(name) ?? [],
    audit: (name) => (instances.get(name) ?? []).flatMap((s) => [...s.audit]),
    crash: async (name) => {
      await live(name).close();
    },
    failNextConnect(name, fail = 'once') {
      failing.set(name, fail);
    },
    close: async () => {
      await Promise.all([...instances.values()].flat().map((s) => s.close()));
    },
  };
}
