/**
 * A raw JSON-RPC stdio server for protocol-era tests, run as a child process:
 * `node raw-server.js MODE`. Raw, because the misbehaviours (hanging on `server/discover`, answering
 * it with garbage) are what an SDK would prevent.
 *
 * Modes:
 * - `modern`: 2026-07-28 only. `server/discover`; `tools/list` in two pages with their own
 *   `ttlMs`/`cacheScope`; `subscriptions/listen` acknowledged, and a `list_changed` on it after a
 *   call to `change`; `echo` with `{ "endListen": true }` also ends the listen stream (its
 *   request answered, as a server does that closes it); with `{ "progress": true }` it writes a
 *   progress report for the call's token before its answer and one after it, in one write; `ask` answers `input_required` until the retry carries `inputResponses`
 *   (with `{ rounds: N, kinds: ["elicitation", "sampling", "roots", ...] }`: N rounds, one
 *   request per kind, and a result that never echoes the answers);
 *   every request without the envelope is refused with -32602, an unknown version with -32022.
 * - `hang-discover`: a 2025 server that never answers `server/discover`.
 * - `garbage-discover`: a 2025 server that answers it with a result that is no discover result.
 * - `old-legacy`: a server that refuses `server/discover` (-32601) and offers only 2024-11-05.
 *
 * Every request is appended as one JSON line to the file named by `RAW_SERVER_LOG`, if set.
 * `RAW_SERVER_BOOT_DELAY_MS` delays reading stdin by that long (a server that boots slowly).
 */
import { appendFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';

const MODERN = '2026-07-28';
const V = 'io.modelcontextprotocol/protocolVersion';
const SERVER_INFO = { name: 'raw-era-server', version: '1.0.0' };
const TOOL = (name: string): Record<string, unknown> => ({
  name,
  description: `the ${name} tool`,
  inputSchema: { type: 'object', properties: {} },
});

type Message = Record<string, unknown> & { id?: string | number; method?: string };

/** Runs the server on stdin/stdout until stdin ends. */
export function runRawServer(mode: string): void {
  const log = process.env['RAW_SERVER_LOG'];
  const send = (message: unknown): void => {
    process.stdout.write(`${JSON.stringify(message)}\n`);
  };
  let listenId: string | number | undefined;
  let generation = 0;
  const lines = createInterface({ input: process.stdin });
  lines.on('line', (line) => {
    let m: Message;
    try {
      m = JSON.parse(line) as Message;
    } catch {
      return;
    }
    if (log !== undefined) appendFileSync(log, `${line}\n`);
    const params = (m['params'] ?? {}) as Record<string, unknown>;
    const reply = (result: unknown): void =>
      send({ jsonrpc: '2.0', id: m.id, result: stamp(result) });
    const fail = (code: number, message: string, data?: unknown): void =>
      send({
        jsonrpc: '2.0',
        id: m.id,
        error: { code, message, ...(data === undefined ? {} : { data }) },
      });
    if (mode !== 'modern') {
      legacy(mode, m, send);
      return;
    }
    if (m.id === undefined) {
      if (m.method === 'notifications/cancelled' && params['requestId'] === listenId) {
        listenId = undefined;
      }
      return;
    }
    const meta = (params['_meta'] ?? {}) as Record<string, unknown>;
    if (meta[V] === undefined) {
      fail(-32602, 'params._meta must carry the envelope');
      return;
    }
    if (meta[V] !== MODERN) {
      fail(-32022, 'Unsupported protocol version', { supported: [MODERN], requested: meta[V] });
      return;
    }
    switch (m.method) {
      case 'server/discover':
        reply({
          resultType: 'complete',
          supportedVersions: [MODERN],
          capabilities: { tools: { listChanged: true } },
          ttlMs: 60_000,
          cacheScope: 'public',
        });
        return;
      case 'tools/list':
        if (params['cursor'] === undefined) {
          reply({
            tools: [TOOL('echo'), TOOL('ask')],
            nextCursor: `p2-${generation}`,
            ttlMs: 1_000,
            cacheScope: 'public',
          });
        } else {
          reply({
            tools: generation === 0 ? [TOOL('change')] : [TOOL('change'), TOOL('added')],
            ttlMs: 5_000,
            cacheScope: 'private',
          });
        }
        return;
      case 'subscriptions/listen':
        listenId = m.id;
        send({
          jsonrpc: '2.0',
          method: 'notifications/subscriptions/acknowledged',
          params: { notifications: { toolsListChanged: true } },
        });
        return;
      case 'tools/call': {
        const name = params['name'];
        if (name === 'change') {
          generation++;
          reply({ content: [{ type: 'text', text: 'changed' }] });
          if (listenId !== undefined) {
            send({ jsonrpc: '2.0', method: 'notifications/tools/list_changed', params: {} });
          }
          return;
        }
        if (name === 'echo' && isRecord(params['arguments']) && params['arguments']['endListen']) {
          reply({ content: [{ type: 'text', text: 'listen ended' }] });
          if (listenId !== undefined) send({ jsonrpc: '2.0', id: listenId, result: {} });
          listenId = undefined;
          return;
        }
        if (name === 'echo' && isRecord(params['arguments']) && params['arguments']['progress']) {
          // A progress report before the answer and one after it, all in one write.
          const note = (progress: number): string =>
            JSON.stringify({
              jsonrpc: '2.0',
              method: 'notifications/progress',
              params: { progressToken: meta['progressToken'], progress, total: 2 },
            });
          const answer = { jsonrpc: '2.0', id: m.id, result: stamp({ content: [] }) };
          process.stdout.write(`${note(1)}\n${JSON.stringify(answer)}\n${note(2)}\n`);
          return;
        }
        if (name === 'ask' && isRecord(params['arguments']) && 'rounds' in params['arguments']) {
          reply(askRounds(params['arguments'], params));
          return;
        }
        if (name === 'ask') {
          const responses = params['inputResponses'] as Record<string, unknown> | undefined;
          if (responses === undefined) {
            reply({
              resultType: 'input_required',
              inputRequests: {
                confirm: {
                  method: 'elicitation/create',
                  params: {
                    message: 'Confirm?',
                    requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } } },
                  },
                },
              },
              requestState: 'state-1',
            });
            return;
          }
          reply({
            content: [
              {
                type: 'text',
                text: JSON.stringify({ responses, state: params['requestState'] }),
              },
            ],
          });
          return;
        }
        reply({ content: [{ type: 'text', text: `echo ${JSON.stringify(params['arguments'])}` }] });
        return;
      }
      case undefined:
      default:
        fail(-32601, `Method not found: ${String(m.method)}`);
    }
  });
  lines.on('close', () => process.exit(0));
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const ASK: Record<string, (round: number) => unknown> = {
  elicitation: (round) => ({
    method: 'elicitation/create',
    params: {
      message: `Round ${round}: confirm?`,
      requestedSchema: { type: 'object', properties: { secret: { type: 'string' } } },
    },
  }),
  sampling: (round) => ({
    method: 'sampling/createMessage',
    params: {
      messages: [{ role: 'user', content: { type: 'text', text: `round ${round}` } }],
      maxTokens: 10,
    },
  }),
  roots: () => ({ method: 'roots/list', params: {} }),
};

/**
 * `ask` with `{ rounds, kinds }`: `rounds` rounds of `input_required` (one request per kind, keyed
 * by kind), counted in `requestState`; then a result that names the round count and the answers'
 * keys, never their contents.
 */
function askRounds(
  args: Record<string, unknown>,
  params: Record<string, unknown>,
): Record<string, unknown> {
  const rounds = typeof args['rounds'] === 'number' ? args['rounds'] : 1;
  const kinds = Array.isArray(args['kinds']) ? args['kinds'].map(String) : ['elicitation'];
  const state = typeof params['requestState'] === 'string' ? params['requestState'] : 'round-0';
  const done = Number(state.slice('round-'.length));
  const responses = isRecord(params['inputResponses']) ? params['inputResponses'] : {};
  if (done >= rounds) {
    return {
      content: [
        { type: 'text', text: `answered ${done} rounds: ${Object.keys(responses).join(',')}` },
      ],
    };
  }
  const round = done + 1;
  return {
    resultType: 'input_required',
    inputRequests: Object.fromEntries(kinds.map((k) => [k, ASK[k]?.(round) ?? { method: k }])),
    requestState: `round-${round}`,
  };
}

function stamp(result: unknown): unknown {
  if (typeof result !== 'object' || result === null) return result;
  const r = result as Record<string, unknown>;
  return {
    ...r,
    _meta: { ...(r['_meta'] as object), 'io.modelcontextprotocol/serverInfo': SERVER_INFO },
  };
}

/** A minimal 2025-11-25 server: initialize, tools/list (one tool), tools/call (echo). */
function legacy(mode: string, m: Message, send: (message: unknown) => void): void {
  if (m.id === undefined) return;
  const reply = (result: unknown): void => send({ jsonrpc: '2.0', id: m.id, result });
  switch (m.method) {
    case 'server/discover':
      if (mode === 'garbage-discover') reply({ supportedVersions: 'yes', hello: [1, 2] });
      if (mode === 'old-legacy') {
        send({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'Method not found' } });
      }
      return; // hang-discover: never answers
    case 'initialize':
      reply({
        protocolVersion: mode === 'old-legacy' ? '2024-11-05' : '2025-11-25',
        capabilities: { tools: {} },
        serverInfo: { name: `raw-${mode}`, version: '1.0.0' },
      });
      return;
    case 'tools/list':
      reply({ tools: [TOOL('echo')] });
      return;
    case 'tools/call':
      reply({ content: [{ type: 'text', text: 'legacy echo' }] });
      return;
    case 'ping':
      reply({});
      return;
    case undefined:
    default:
      send({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'Method not found' } });
  }
}

/** The path of this file's compiled entry point, for spawning. */
export function rawServerPath(): string {
  return new URL(import.meta.url).pathname;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  // A slow boot: stdin is only read after the delay (what was sent meanwhile waits in the pipe).
  const delay = Number(process.env['RAW_SERVER_BOOT_DELAY_MS'] ?? 0);
  setTimeout(() => runRawServer(process.argv[2] ?? 'modern'), delay);
}
