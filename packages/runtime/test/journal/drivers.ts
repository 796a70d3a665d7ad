/**
 * Runs a journal suite once per SQLite driver the running Node has: better-sqlite3 on Node 20,
 * `node:sqlite` and better-sqlite3 on 22.13+. A driver this Node lacks is skipped, unless
 * `STEPBIND_REQUIRE_JOURNAL_DRIVERS` (a comma list, such as `node:sqlite,better-sqlite3`, which CI
 * sets) names it: then its suite is one failing test saying so.
 */
import { availableJournalDrivers } from '../../src/journal/sqlite-driver.js';
import type { JournalDriver } from '@stepbind/runtime';
import { describe, it } from 'vitest';

/** Every driver, `node:sqlite` first. */
export const JOURNAL_DRIVERS: readonly JournalDriver[] = ['node:sqlite', 'better-sqlite3'];

/** The drivers this Node can open a journal with. */
export const AVAILABLE_DRIVERS: readonly JournalDriver[] = availableJournalDrivers();

/** The drivers `STEPBIND_REQUIRE_JOURNAL_DRIVERS` names. */
export const REQUIRED_DRIVERS: readonly string[] = (
  process.env['STEPBIND_REQUIRE_JOURNAL_DRIVERS'] ?? ''
)
  .split(',')
  .map((d) => d.trim())
  .filter((d) => d !== '');

/** `describe(name (driver), ...)` for each driver; see the module comment for the unavailable ones. */
export function describeEachDriver(name: string, suite: (driver: JournalDriver) => void): void {
  for (const driver of JOURNAL_DRIVERS) {
    const title = `${name} (${driver})`;
    if (AVAILABLE_DRIVERS.includes(driver)) {
      describe(title, () => suite(driver));
    } else if (REQUIRED_DRIVERS.includes(driver)) {
      describe(title, () => {
        it(`has the driver ${driver}, which STEPBIND_REQUIRE_JOURNAL_DRIVERS requires`, () => {
          throw new Error(
            `The journal driver ${driver} is not available under Node ${process.version}, but STEPBIND_REQUIRE_JOURNAL_DRIVERS=${REQUIRED_DRIVERS.join(',')} requires it.`,
          );
        });
      });
    } else {
      describe.skip(`${title}: not available under Node ${process.version}`, () => {
        it('skipped', () => {});
      });
    }
  }
}
