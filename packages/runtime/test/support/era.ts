import type { McpRuntime } from '@stepbind/runtime';
import { scriptedTestEra } from '@stepbind/testkit';
import { expect, it } from 'vitest';

/**
 * The protocol era this test run's scripted servers speak (`STEPBIND_TEST_ERA`, set by the vitest
 * project `modern-era`); `stdioServerParams` applies it to every server without an explicit `era`.
 */
export const TEST_ERA = scriptedTestEra();

/** The protocol version stepbind must have negotiated with a scripted server in this run. */
export const TEST_PROTOCOL_VERSION = TEST_ERA === 'modern' ? '2026-07-28' : '2025-11-25';

/**
 * Asserts that stepbind spoke this run's era to each named server (all connected ones when none
 * are named), so a run meant for 2026-07-28 cannot pass by silently falling back to `initialize`.
 */
export function expectTestEra(runtime: McpRuntime, names?: readonly string[]): void {
  const servers = runtime
    .status()
    .servers.filter((s) => s.state === 'ready' && (names === undefined || names.includes(s.name)));
  if (names !== undefined) expect(servers.map((s) => s.name).sort()).toEqual([...names].sort());
  expect(servers.length, 'no connected server to check the era of').toBeGreaterThan(0);
  for (const s of servers) {
    expect({ name: s.name, era: s.era, protocolVersion: s.protocolVersion }).toEqual({
      name: s.name,
      era: TEST_ERA,
      protocolVersion: TEST_PROTOCOL_VERSION,
    });
  }
}

/**
 * `it` for a test that only means something in one era (it asserts the 2025 `initialize`, an SDK
 * 1.32.2 behaviour, ...). In the other era it is reported as skipped, with `reason` in its name,
 * never silently left out.
 */
export function itInEra(
  era: typeof TEST_ERA,
  reason: string,
): (name: string, fn: () => Promise<void> | void) => void {
  return (name, fn) => it.skipIf(TEST_ERA !== era)(`${name} [${era} era only: ${reason}]`, fn);
}
