import { ErrorCode } from '@stepbind/binding/internal';
import type { RuntimeCore } from './core.js';
import { listingStatus } from './listing-reuse.js';
import type { DiscoveryStatus, RuntimeStatus, ServerStatus } from './options.js';
import { lossMessage } from './session.js';

/** The runtime's state for `McpRuntime.status()`: every configured server, in config order. */
export function runtimeStatus(core: RuntimeCore): RuntimeStatus {
  const set = core.current;
  const servers: ServerStatus[] = [];
  for (const [name, cfg] of core.config.servers) {
    const entry = set?.entries.get(name);
    const found = core.discovery.of(name);
    const discovery: { discovery?: DiscoveryStatus } =
      found === undefined ? {} : { discovery: found };
    if (core.closed) {
      // The set is detached at the first close(): the server is closing, not starting.
      servers.push({
        name,
        required: cfg.required,
        state: core.closeDone ? 'closed' : 'closing',
        ...discovery,
      });
    } else if (entry === undefined || entry.kind === 'starting') {
      servers.push({ name, required: cfg.required, state: 'starting', ...discovery });
    } else if (entry.kind === 'ready') {
      const s = entry.session;
      const loss = s.connection.lost;
      const listing = listingStatus(core, s);
      servers.push({
        name,
        required: cfg.required,
        state:
          loss !== undefined
            ? s.recovery.gaveUp
              ? 'failed'
              : 'reconnecting'
            : s.connection.closed
              ? 'closed'
              : 'ready',
        generation: s.slot?.catalog.generation ?? 0,
        revision: s.slot?.revision ?? 0,
        catalogState: s.slot?.catalog.state ?? 'DISCOVERING',
        tools: s.slot?.catalog.tools.length ?? 0,
        ...(s.connection.pid === undefined ? {} : { pid: s.connection.pid }),
        era: s.connection.era,
        ...(s.connection.hello.protocolVersion === undefined
          ? {}
          : { protocolVersion: s.connection.hello.protocolVersion }),
        ...(loss === undefined
          ? {}
          : {
              error: { code: ErrorCode.CONNECTION_CLOSED, message: lossMessage(loss, s.recovery) },
              reconnectAttempts: s.recovery.attempts,
            }),
        ...(listing === undefined ? {} : { listing }),
        ...discovery,
      });
    } else {
      servers.push({
        name,
        required: cfg.required,
        state: 'failed',
        error: { code: entry.error.code, message: entry.error.message },
        ...discovery,
      });
    }
  }
  return Object.freeze({
    closed: core.closed,
    state: core.closeDone ? 'closed' : core.closed ? 'closing' : 'open',
    dirty: core.dirty,
    setId: set?.id ?? 0,
    liveSets: core.liveSets.size,
    liveConnections: [...core.sessions].filter((s) => !s.connection.closed).length,
    servers: Object.freeze(servers),
  });
}
