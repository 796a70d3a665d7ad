/**
 * A raw JSON-RPC stdio server with scripted resources and prompts, for the resource and prompt
 * tests that need exact control (DESIGN §20.3): `node resource-server.js MODE`. Raw, because the
 * hostile listings (cursor cycles, invalid items, oversize contents) are what an SDK would prevent.
 *
 * Modes: `legacy` (an `initialize` session, 2025-11-25), `modern` (2026-07-28: answers
 * `server/discover`), `cycle` (legacy; the resources listing's cursors go A → B → A), `hostile`
 * (legacy; the first resources page and the prompts hold invalid items among valid ones).
 *
 * Environment: `RESOURCE_SERVER_TAG` names the server in every read (default `rs`);
 * `RESOURCE_SERVER_PAGES` resource pages (default 3) of `RESOURCE_SERVER_PER_PAGE` items (default 2);
 * `RESOURCE_SERVER_BIG_BYTES` size of `test://big` (default 2 MiB);
 * `RESOURCE_SERVER_LOG` a file every request is appended to as one JSON line.
 *
 * Tools: `links` returns a `resource_link` to `test://linked/<tag>` (never listed); `change` moves
 * the lists to the next generation and sends `notifications/resources/list_changed` and
 * `notifications/prompts/list_changed`; `touch` sends `notifications/resources/updated` for
 * `test://r/0/1-0`.
 */
import { appendFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';

type Message = Record<string, unknown> & { id?: string | number; method?: string };

const TOOL = (name: string): Record<string, unknown> => ({
  name,
  description: `the ${name} tool`,
  inputSchema: { type: 'object', properties: {} },
});

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Runs the server on stdin/stdout until stdin ends. */
export function runResourceServer(mode: string): void {
  const tag = process.env['RESOURCE_SERVER_TAG'] ?? 'rs';
  const pages = Number(process.env['RESOURCE_SERVER_PAGES'] ?? 3);
  const perPage = Number(process.env['RESOURCE_SERVER_PER_PAGE'] ?? 2);
  const bigBytes = Number(process.env['RESOURCE_SERVER_BIG_BYTES'] ?? 2 * 1024 * 1024);
  const log = process.env['RESOURCE_SERVER_LOG'];
  let generation = 0;
  const send = (message: unknown): void => {
    process.stdout.write(`${JSON.stringify(message)}\n`);
  };
  const notify = (method: string, params: Record<string, unknown> = {}): void =>
    send({ jsonrpc: '2.0', method, params });
  const capabilities = {
    tools: {},
    resources: { subscribe: true, listChanged: true },
    prompts: { listChanged: true },
    completions: {},
  };
  const resourcePage = (cursor: unknown): Record<string, unknown> => {
    const page = typeof cursor === 'string' ? Number(cursor.slice(1)) : 1;
    const items: unknown[] = Array.from({ length: perPage }, (_, i) => ({
      uri: `test://r/${generation}/${page}-${i}`,
      name: `r${generation}-${page}-${i}`,
      mimeType: 'text/plain',
      size: 10,
    }));
    if (mode === 'hostile' && page === 1) {
      items.push(
        { name: 'no-uri' },
        { uri: 'no scheme here', name: 'bad-uri' },
        { uri: 'test://long', name: 'long', description: 'x'.repeat(10_000) },
        { uri: `test://r/${generation}/1-0`, name: 'duplicate' },
        'not an object',
      );
    }
    if (page === 1) items.push({ uri: 'test://big', name: 'big', mimeType: 'text/plain' });
    if (mode === 'cycle') return { resources: items, nextCursor: page === 1 ? 'p2' : 'p1' };
    return page < pages ? { resources: items, nextCursor: `p${page + 1}` } : { resources: items };
  };
  const prompts = (): unknown[] => [
    {
      name: 'greet',
      description: `greets (generation ${generation})`,
      arguments: [
        { name: 'name', required: true },
        { name: 'tone', required: false },
      ],
    },
    ...(generation > 0 ? [{ name: `added-${generation}` }] : []),
    ...(mode === 'hostile'
      ? [
          { name: 'bad name with spaces' },
          { name: 'twice', arguments: [{ name: 'a' }, { name: 'a' }] },
        ]
      : []),
  ];
  const handle = (m: Message): unknown => {
    const params = isRecord(m['params']) ? m['params'] : {};
    switch (m.method) {
      case 'server/discover':
        if (mode !== 'modern') throw Object.assign(new Error('Method not found'), { code: -32601 });
        return {
          resultType: 'complete',
          supportedVersions: ['2026-07-28'],
          capabilities,
          serverInfo: { name: `resource-server-${tag}`, version: '1.0.0' },
        };
      case 'initialize':
        return {
          protocolVersion: '2025-11-25',
          capabilities,
          serverInfo: { name: `resource-server-${tag}`, version: '1.0.0' },
        };
      case 'ping':
        return {};
      case 'tools/list':
        return { tools: [TOOL('links'), TOOL('change'), TOOL('touch')] };
      case 'tools/call': {
        const name = params['name'];
        if (name === 'links') {
          return {
            content: [
              { type: 'text', text: 'one link' },
              { type: 'resource_link', uri: `test://linked/${tag}`, name: 'linked' },
            ],
          };
        }
        if (name === 'change') {
          generation++;
          setImmediate(() => {
            notify('notifications/resources/list_changed');
            notify('notifications/prompts/list_changed');
          });
          return { content: [{ type: 'text', text: `generation ${generation}` }] };
        }
        // Before the answer: a client has handled it by the time the call resolves.
        notify('notifications/resources/updated', { uri: 'test://r/0/1-0' });
        return { content: [{ type: 'text', text: 'touched' }] };
      }
      case 'resources/list':
        return resourcePage(params['cursor']);
      case 'resources/templates/list':
        return {
          resourceTemplates: [
            { uriTemplate: 'test://t/{id}', name: 'by id', mimeType: 'text/plain' },
          ],
        };
      case 'resources/read': {
        const uri = String(params['uri']);
        if (uri === 'test://big') return { contents: [{ uri, text: 'b'.repeat(bigBytes) }] };
        if (uri === 'test://image') {
          return { contents: [{ uri, mimeType: 'image/png', blob: 'iVBORw0KGgo=' }] };
        }
        return { contents: [{ uri, mimeType: 'text/plain', text: `${uri} from ${tag}` }] };
      }
      case 'resources/subscribe':
      case 'resources/unsubscribe':
        return {};
      case 'prompts/list':
        return { prompts: prompts() };
      case 'prompts/get': {
        const args = isRecord(params['arguments']) ? params['arguments'] : {};
        return {
          description: 'a greeting',
          messages: [
            { role: 'user', content: { type: 'text', text: `Hello ${String(args['name'])}` } },
          ],
        };
      }
      case 'completion/complete': {
        const argument = isRecord(params['argument']) ? params['argument'] : {};
        const value = typeof argument['value'] === 'string' ? argument['value'] : '';
        return {
          completion: { values: ['alpha', 'beta', 'alpine'].filter((v) => v.startsWith(value)) },
        };
      }
      case undefined:
      default:
        throw Object.assign(new Error(`Method not found: ${String(m.method)}`), { code: -32601 });
    }
  };
  const lines = createInterface({ input: process.stdin });
  lines.on('line', (line) => {
    let m: Message;
    try {
      m = JSON.parse(line) as Message;
    } catch {
      return;
    }
    if (log !== undefined) appendFileSync(log, `${line}\n`);
    if (m.id === undefined) return;
    try {
      const result = handle(m);
      // The 2026-07-28 era names the server in every result's _meta.
      send({
        jsonrpc: '2.0',
        id: m.id,
        result:
          mode === 'modern' && isRecord(result)
            ? {
                ...result,
                _meta: {
                  'io.modelcontextprotocol/serverInfo': {
                    name: `resource-server-${tag}`,
                    version: '1.0.0',
                  },
                },
              }
            : result,
      });
    } catch (error) {
      const code = (error as { code?: number }).code ?? -32603;
      send({ jsonrpc: '2.0', id: m.id, error: { code, message: (error as Error).message } });
    }
  });
  lines.on('close', () => process.exit(0));
}

/** The path of this file's compiled entry point, for spawning. */
export function resourceServerPath(): string {
  return new URL(import.meta.url).pathname;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  runResourceServer(process.argv[2] ?? 'legacy');
}
