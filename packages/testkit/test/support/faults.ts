import type { McpBinding } from '@stepbind/binding';
import {
  scriptedTool,
  type AuditEntry,
  type ScriptedServerOptions,
  type ServerFixture,
} from '@stepbind/testkit';

// Helpers of the fault suites (faults.test.ts in memory, faults.stdio.test.ts over stdio).
export { failure } from './errors.js';

/** `tools/list` requests as `list(<cursor>)@<generation>`, with cursors renamed c1, c2… in order. */
export function listings(audit: readonly AuditEntry[]): string[] {
  const names = new Map<string, string>();
  return audit
    .filter((e) => e.method === 'tools/list')
    .map((e) => {
      if (e.cursor === null || e.cursor === undefined) return `list(null)@${e.generation}`;
      let name = names.get(e.cursor);
      if (name === undefined) {
        name = e.cursor === '' ? '""' : `c${names.size + 1}`;
        names.set(e.cursor, name);
      }
      return `list(${name})@${e.generation}`;
    });
}

/**
 * The listings of "list_changed after page 2", normalised: page 3 of the old catalog is never
 * served, but whether the client restarts at once or first sends the old page-3 cursor (which then
 * arrives in generation 1 and is refused as stale) depends on when the transport hands the
 * notification over. The refused request is dropped here so both timings compare equal.
 */
export function withoutStalePage3(seen: readonly string[]): string[] {
  return seen.filter((entry, i) => !(i === 5 && entry === 'list(c2)@1'));
}

export const RESTARTED_AFTER_PAGE_2 = [
  'list(null)@0',
  'list(c1)@0',
  'list(c2)@0',
  'list(null)@0',
  'list(c1)@0',
  'list(null)@1',
  'list(c3)@1',
  'list(c4)@1',
];

export const calls = (audit: readonly AuditEntry[]): (string | undefined)[] =>
  audit.filter((e) => e.method === 'tools/call').map((e) => e.tool);

export const toolNames = (binding: McpBinding): string[] => binding.tools.map((t) => t.name);

export const fixtureServer = (fixture: ServerFixture): ScriptedServerOptions => ({
  scenario: 'fixture',
  fixture,
});

export const pages = (...names: readonly (readonly string[])[]) =>
  names.map((page) => ({ tools: page.map(scriptedTool) }));
