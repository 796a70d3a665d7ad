import type { ServerConnector } from '@stepbind/runtime';
import { connectServer } from '@stepbind/runtime/internal';
import { existsSync, readFileSync } from 'node:fs';
import { isProcessAlive } from '../audit.js';
import { stdioServerParams } from '../connect.js';
import type { ServerFixture } from '../fixture.js';
import { createInMemoryFleet } from '../fleet.js';
import { scriptedTool } from '../scenarios.js';
import type { ScriptedServer } from '../server/scripted.js';
import { tempAudit } from '../temp.js';
import type { AuditEntry, ScriptedServerOptions } from '../types.js';
import { toolNameOf, type ServedPages } from './served.js';
import type { ProcessControl, ServerProcess } from './system.js';

/** The processes of a model system, and the connector the runtime starts them with. */
export type ModelProcesses = ProcessControl & { readonly connect: ServerConnector };

/** A served tool as a scripted tool: `name~variant` changes its description. */
const modelTool = (tool: string): Record<string, unknown> => {
  const name = toolNameOf(tool);
  const variant = tool.slice(name.length + 1);
  const scripted = scriptedTool(name);
  return variant === '' ? scripted : { ...scripted, description: `${name}, variant ${variant}.` };
};

const fixtureOf = (pages: ServedPages): ServerFixture => ({
  generations: [{ pages: pages.map((page) => ({ tools: page.map(modelTool) })) }],
});

const mcpServersEntry = (lazy: boolean | undefined): Record<string, unknown> =>
  lazy === true ? { start: 'lazy' } : {};

/** Scripted servers over in-memory transport pairs: fast, and their catalogs can change. */
export function memoryProcesses(catalogs: Readonly<Record<string, ServedPages>>): ModelProcesses {
  // The fleet reads a server's options at each start: rewriting them is rewriting its fixture.
  const options: Record<string, ScriptedServerOptions> = Object.fromEntries(
    Object.entries(catalogs).map(([name, pages]) => [
      name,
      { scenario: 'fixture' as const, fixture: fixtureOf(pages) },
    ]),
  );
  const fleet = createInMemoryFleet(options);
  const ids = new WeakMap<ScriptedServer, number>();
  let counter = 0;
  const wrap = (server: ScriptedServer): ServerProcess => {
    let id = ids.get(server);
    if (id === undefined) {
      id = ++counter;
      ids.set(server, id);
    }
    return {
      id,
      calls: () => server.audit.filter((e) => e.method === 'tools/call').length,
      replaceCatalog: (pages) => {
        server.replaceCatalog(pages.map((page) => page.map(modelTool)));
      },
      notifyListChanged: () => server.notifyListChanged(),
      crash: () => server.close(),
    };
  };
  return {
    connect: fleet.connect,
    mutable: true,
    instances: (name) => fleet.instances(name).map(wrap),
    failNextConnect: (name) => fleet.failNextConnect(name, 'once'),
    config: (versions, lazy) => {
      const overrides: Record<string, Record<string, unknown>> = {};
      for (const name of Object.keys(catalogs)) {
        const v = versions.get(name);
        overrides[name] = {
          ...(v === undefined ? {} : { args: [name, `v${v}`] }),
          ...mcpServersEntry(lazy),
        };
      }
      return fleet.config(overrides);
    },
    setNextCatalog: (name, pages) => {
      options[name] = { scenario: 'fixture', fixture: fixtureOf(pages) };
    },
    close: () => fleet.close(),
  };
}

/**
 * Scripted servers as real stdio child processes, each with an audit trail (removed by `close`).
 * Catalogs cannot change; a crash is a SIGKILL (the runtime sees the pipe close once it is dead).
 */
export function stdioProcesses(catalogs: Readonly<Record<string, ServedPages>>): ModelProcesses {
  const audits = new Map(Object.keys(catalogs).map((name) => [name, tempAudit(`model-${name}`)]));
  const failing = new Set<string>();
  const read = (name: string): AuditEntry[] => {
    const path = audits.get(name)?.path;
    if (path === undefined || !existsSync(path)) return [];
    return readFileSync(path, 'utf8')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as AuditEntry);
  };
  return {
    connect: async (name, config, { signal }) => {
      if (failing.delete(name)) throw new Error(`scripted start failure of stdio server "${name}"`);
      return connectServer(name, config, { signal });
    },
    mutable: false,
    instances: (name) => {
      const pids = [...new Set(read(name).map((e) => e.pid))];
      return pids.map((pid) => ({
        id: pid,
        calls: () => read(name).filter((e) => e.pid === pid && e.method === 'tools/call').length,
        crash: async () => {
          if (isProcessAlive(pid)) process.kill(pid, 'SIGKILL');
        },
      }));
    },
    failNextConnect: (name) => {
      failing.add(name);
    },
    config: (versions, lazy) => {
      const mcpServers: Record<string, unknown> = {};
      for (const [name, pages] of Object.entries(catalogs)) {
        const auditPath = audits.get(name)?.path;
        if (auditPath === undefined) throw new Error(`no audit trail for server "${name}"`);
        mcpServers[name] = {
          ...stdioServerParams({ scenario: 'fixture', fixture: fixtureOf(pages), auditPath }),
          // A new config version changes the transport identity (env) without changing the server.
          env: { STEPBIND_MODEL_CONFIG: String(versions.get(name) ?? 0) },
          ...mcpServersEntry(lazy),
        };
      }
      return { mcpServers };
    },
    close: async () => {
      await Promise.all([...audits.values()].map((audit) => audit.dispose()));
    },
  };
}
