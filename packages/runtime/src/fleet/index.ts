/**
 * `@stepbind/runtime/fleet`: the PostgreSQL fleet store (DESIGN §15). One registry, one policy and
 * one execution journal shared by many worker processes. A runtime opened with `store` uses it
 * through {@link attachFleet}; operators and tests use the pieces directly.
 *
 * @packageDocumentation
 */
export { attachFleet, FleetStore } from './attach.js';
export type { FleetEvent, FleetOptions, StoreOption } from './attach.js';
export { PostgresJournalStore } from './journal-store.js';
export { FLEET_SCHEMA_VERSION, migrateFleetStore } from './migrations.js';
export type { MigrationReport } from './migrations.js';
export { DEFAULT_FLEET_SCHEMA, isConnectionError, parseStoreTarget, PgHandle } from './pg.js';
export type { FleetStoreTarget, PgCallOptions, PgTuning, StoreFailureReason } from './pg.js';
export type {
  PgClient,
  PgNotification,
  PgPoolClient,
  PgQueryable,
  PgQueryConfig,
  PgQueryResult,
  PgRow,
} from './pg-driver.js';
export type { DatabaseClock } from './db-clock.js';
export { ALL_TOOLS, commitPolicyChange, PolicyView, readPolicy } from './policy.js';
export type { PolicyChange, PolicySnapshot, PolicyViewOptions } from './policy.js';
export { FleetRegistry, identityDigest, snapshotDigest } from './registry.js';
export { PostgresTokenStore } from './token-store.js';
export type { PostgresTokenStoreOptions } from './token-store.js';
export type { FleetPointer, FleetPublication, LoadSnapshotOptions } from './registry.js';
