/**
 * `pnpm demo`: what stepbind does, in a few seconds, against real MCP servers over stdio.
 * Exits 0 when everything behaved as expected (the expected typed failures included).
 */
import { agentLoopDemo } from './agent-loop-demo.js';
import { catalogDemo } from './catalog-demo.js';

const log = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

const started = performance.now();
log('== 1. Discovery: every page, bounded, never a partial catalog ==');
const problems = await catalogDemo(log);
log('');
log('== 2. A scripted agent loop: a frozen binding per step, a stale call refused unsent ==');
problems.push(...(await agentLoopDemo(log)));

log('');
if (problems.length === 0) {
  log(
    `Demo OK in ${((performance.now() - started) / 1000).toFixed(1)} s: every outcome was the expected one.`,
  );
} else {
  log('Demo FAILED:');
  for (const p of problems) log(`  - ${p}`);
  process.exitCode = 1;
}
