import { resolveCachePath } from './cache/option.js';
import { wireTransportOf } from './connect.js';
import type { RuntimeCore } from './core.js';
import { listingStatus } from './listing-reuse.js';
import type {
  DiscoveryStatus,
  JournalStatus,
  RuntimeStatus,
  ServerAuthStatus,
  ServerStatus,
} from './options.js';

/**
 * The runtime's state for `McpRuntime.status()`: every configured server, in config order, and
 * the journal (`journal`, fixed at open).
 */
export function runtimeStatus(core: RuntimeCore, journal: JournalStatus): RuntimeStatus {
  const set = core.current;
  const servers: ServerStatus[] = [];
  for (const [name, cfg] of core.config.servers) {
    const entry = set?.entries.get(name);
    const found = core.discovery.of(name);
    const auth = core.closed ? undefined : core.auth.statusOf(name, cfg);
    const discovery: { discovery?: DiscoveryStatus; auth?: ServerAuthStatus } = {
      ...(found === undefined ? {} : { discovery: found }),
      ...(auth === undefined ? {} : { auth }),
    };
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
      const listing = listingStatus(core, entry.server);
      const transport = wireTransportOf(entry.server.connection);
      servers.push({
        name,
        required: cfg.required,
        ...entry.server.status(),
        ...(transport === undefined ? {} : { transport }),
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
    liveConnections: [...core.servers].filter((s) => !s.connection.closed).length,
    servers: Object.freeze(servers),
    journal,
    ...cacheStatus(core),
  });
}

/** `cache: { path }` when the runtime has a catalog cache (the option, else the configuration's). */
function cacheStatus(core: RuntimeCore): { cache?: { readonly path: string } } {
  const path = resolveCachePath(core.options.cache, core.config.cache);
  return path === undefined ? {} : { cache: Object.freeze({ path }) };
}
