/**
 * The search-quality fixture: the reference servers from npm (listed live, by spawning them) and
 * the synthetic servers of `catalogs.json` (served by the testkit's scripted stdio server), as one
 * runtime config; and the labelled requests of `queries.json`.
 */
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stdioServerParams } from '@stepbind/testkit';

/** One synthetic tool: name, description, space-separated parameter names. */
type SyntheticTool = readonly [string, string, string];

const here = (file: string): string => fileURLToPath(new URL(file, import.meta.url));

/** The synthetic catalogs, server → tools. */
export const synthetic = JSON.parse(readFileSync(here('./catalogs.json'), 'utf8')) as Record<
  string,
  readonly SyntheticTool[]
>;

/** The labelled requests: what a user would type, and the model name a person would pick. */
export const queries = JSON.parse(
  readFileSync(here('./queries.json'), 'utf8'),
) as readonly (readonly [string, string])[];

const entry = (pkg: string): string =>
  here(`../../../../node_modules/@modelcontextprotocol/${pkg}/dist/index.js`);

/** The `mcpServers` of the quality runtime; writes the fixture files into `dir`. */
export async function qualityServers(
  dir: string,
): Promise<Record<string, Readonly<Record<string, unknown>>>> {
  const servers: Record<string, Readonly<Record<string, unknown>>> = {
    everything: { command: process.execPath, args: [entry('server-everything'), 'stdio'] },
    filesystem: { command: process.execPath, args: [entry('server-filesystem'), dir] },
    memory: {
      command: process.execPath,
      args: [entry('server-memory')],
      env: { MEMORY_FILE_PATH: join(dir, 'memory.jsonl') },
    },
    thinking: { command: process.execPath, args: [entry('server-sequential-thinking')] },
  };
  for (const [name, tools] of Object.entries(synthetic)) {
    const fixturePath = join(dir, `${name}.json`);
    await writeFile(
      fixturePath,
      JSON.stringify({
        generations: [
          {
            pages: [
              {
                tools: tools.map(([tool, description, params]) => ({
                  name: tool,
                  description,
                  inputSchema: {
                    type: 'object',
                    properties: Object.fromEntries(
                      params
                        .split(' ')
                        .filter((p) => p !== '')
                        .map((p) => [p, { type: 'string' }]),
                    ),
                  },
                })),
              },
            ],
          },
        ],
      }),
    );
    servers[name] = { ...stdioServerParams({ scenario: 'fixture', fixturePath }) };
  }
  return servers;
}
