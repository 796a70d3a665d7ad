/**
 * Part 1 of the demo: `stepbind catalog` against two scripted servers over stdio. One serves a
 * three-page catalog with an empty middle page; the other loops its cursors (A → B → A), which
 * stepbind must refuse with a typed CURSOR_REPEATED instead of hanging or returning a prefix.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stdioServerParams } from '@stepbind/testkit';

// The real `stepbind` binary of this checkout (packages/runtime/dist/cli/main.js).
const cli = fileURLToPath(new URL('./cli/main.js', import.meta.resolve('@stepbind/runtime')));

function run(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [cli, ...args], (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
      resolve({ code, stdout, stderr });
    });
  });
}

interface CatalogJson {
  servers: (
    | { name: string; ok: true; tools: string[]; pageSizes: number[] }
    | { name: string; ok: false; error: { code: string; message: string } }
  )[];
}

/** Runs part 1 and returns the problems found (empty when everything behaved as expected). */
export async function catalogDemo(log: (line: string) => void): Promise<string[]> {
  const dir = await mkdtemp(join(tmpdir(), 'stepbind-demo-'));
  try {
    const config = {
      mcpServers: {
        normal: stdioServerParams({ scenario: 'normal' }),
        looping: stdioServerParams({ scenario: 'cycle' }),
      },
    };
    const configPath = join(dir, 'mcp.json');
    await writeFile(configPath, JSON.stringify(config, null, 2));
    log('$ stepbind catalog --config mcp.json');
    const human = await run(['catalog', '--config', configPath]);
    for (const line of human.stdout.trimEnd().split('\n')) log(line);
    log(`(exit code ${human.code}: non-zero because one server failed, as expected)`);

    const problems: string[] = [];
    const json = await run(['catalog', '--config', configPath, '--json']);
    const report = JSON.parse(json.stdout) as CatalogJson;
    const normal = report.servers.find((s) => s.name === 'normal');
    const looping = report.servers.find((s) => s.name === 'looping');
    if (
      normal?.ok !== true ||
      normal.tools.join() !== 'alpha,beta,gamma' ||
      normal.pageSizes.join() !== '1,0,2'
    ) {
      problems.push(
        `normal: expected alpha, beta, gamma in pages [1, 0, 2], got ${JSON.stringify(normal)}`,
      );
    }
    if (looping?.ok !== false || looping.error.code !== 'CURSOR_REPEATED') {
      problems.push(`looping: expected CURSOR_REPEATED, got ${JSON.stringify(looping)}`);
    }
    if (human.code !== 1 || json.code !== 1) {
      problems.push(`expected exit code 1 from both runs, got ${human.code} and ${json.code}`);
    }
    return problems;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
