/**
 * Versioned, idempotent schema migrations of the fleet store. Applied at open and by
 * `stepbind store migrate`; two workers migrating at once serialize on a session advisory lock,
 * and each migration is one transaction that records its version, so none is applied twice or
 * half.
 */
import { ErrorCode, RuntimeError } from '@stepbind/binding/internal';
import type { PgHandle } from './pg.js';

/**
 * Entry `i` takes the schema from version `i` to `i + 1`. Never edit an entry that shipped; add
 * one. Timestamps are epoch milliseconds (`bigint`), JSON is kept as the exact text written.
 */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE records (
     key text PRIMARY KEY,
     state text NOT NULL CHECK (state IN ('INTENT','SENT','COMPLETED','NOT_SENT','OUTCOME_UNKNOWN')),
     version bigint NOT NULL,
     attempt bigint NOT NULL,
     owner text NOT NULL,
     context text NOT NULL,
     args_digest text NOT NULL,
     created_at bigint NOT NULL,
     updated_at bigint NOT NULL,
     lease_expires_at bigint NOT NULL,
     expires_at bigint,
     outcome text,
     error text,
     resolution text
   );
   CREATE INDEX records_state ON records (state);
   CREATE TABLE receipts (
     seq bigint PRIMARY KEY,
     prev_digest text NOT NULL,
     digest text NOT NULL,
     key text,
     at bigint NOT NULL,
     body text NOT NULL
   );
   CREATE INDEX receipts_key ON receipts (key) WHERE key IS NOT NULL;
   -- The chain head is one row: appending locks it, so receipts are chained in commit order.
   CREATE TABLE chain_head (id int PRIMARY KEY CHECK (id = 1), seq bigint NOT NULL, digest text NOT NULL);
   INSERT INTO chain_head VALUES (1, 0, '${'0'.repeat(64)}');
   CREATE TABLE chain_anchor (id int PRIMARY KEY CHECK (id = 1), seq bigint NOT NULL, digest text NOT NULL);
   INSERT INTO chain_anchor VALUES (1, 0, '${'0'.repeat(64)}');
   CREATE TABLE catalog_generations (
     server text NOT NULL, audience text NOT NULL, issued bigint NOT NULL,
     PRIMARY KEY (server, audience)
   );
   CREATE TABLE catalog_pointers (
     identity_digest text NOT NULL,
     audience text NOT NULL,
     server text NOT NULL,
     generation bigint NOT NULL,
     snapshot_digest text NOT NULL,
     policy_epoch bigint NOT NULL,
     published_by text NOT NULL,
     published_at bigint NOT NULL,
     PRIMARY KEY (identity_digest, audience)
   );
   CREATE TABLE catalog_snapshots (
     digest text PRIMARY KEY,
     server text NOT NULL,
     audience text NOT NULL,
     body text NOT NULL,
     created_at bigint NOT NULL
   );
   CREATE TABLE catalog_publications (
     id bigserial PRIMARY KEY,
     identity_digest text NOT NULL,
     audience text NOT NULL,
     server text NOT NULL,
     generation bigint NOT NULL,
     snapshot_digest text NOT NULL,
     published_by text NOT NULL,
     at bigint NOT NULL,
     UNIQUE (identity_digest, audience, generation)
   );
   CREATE TABLE policy_state (
     id int PRIMARY KEY CHECK (id = 1), epoch bigint NOT NULL, version bigint NOT NULL,
     updated_at bigint NOT NULL
   );
   INSERT INTO policy_state VALUES (1, 0, 0, 0);
   CREATE TABLE policy_revocations (
     server text NOT NULL,
     tool text NOT NULL,
     revoked_at bigint NOT NULL,
     revoked_by text,
     note text,
     PRIMARY KEY (server, tool)
   );
   CREATE TABLE policy_approvals (
     server text NOT NULL,
     tool text NOT NULL,
     approved_at bigint NOT NULL,
     approved_by text,
     PRIMARY KEY (server, tool)
   );`,
  // 2: OAuth logins and client registrations (fleet/token-store.ts). The tokens are secrets:
  // stored as JSON text, never logged.
  `CREATE TABLE auth_logins (
     issuer text NOT NULL,
     resource text NOT NULL,
     client_id text NOT NULL,
     version bigint NOT NULL,
     principal text NOT NULL,
     server text,
     scopes text,
     tokens text NOT NULL,
     updated_at bigint NOT NULL,
     PRIMARY KEY (issuer, resource, client_id)
   );
   CREATE TABLE auth_registrations (
     issuer text NOT NULL,
     redirect_uri text NOT NULL,
     registration text NOT NULL,
     updated_at bigint NOT NULL,
     PRIMARY KEY (issuer, redirect_uri)
   );`,
  // The MCP task a key's call created (DESIGN §20.2): a crashed run's key resumes polling it.
  `ALTER TABLE records ADD COLUMN task_id text;`,
];

/** The schema version this build writes. */
export const FLEET_SCHEMA_VERSION = MIGRATIONS.length;

/** What {@link migrateFleetStore} did. */
export interface MigrationReport {
  /** Version before. */
  readonly from: number;
  /** Version after (this build's {@link FLEET_SCHEMA_VERSION}). */
  readonly to: number;
  /** Versions this call applied (empty when another worker, or an earlier run, had). */
  readonly applied: readonly number[];
}

/**
 * Brings the schema to {@link FLEET_SCHEMA_VERSION}: creates it if missing, applies the missing
 * migrations in order, each in its own transaction. Safe to run from many workers at once.
 *
 * @throws RuntimeError `STORE_UNAVAILABLE` (reason `newer-schema` when a newer stepbind wrote the
 *   schema; nothing is changed then), or when the database cannot be reached.
 */
export async function migrateFleetStore(handle: PgHandle): Promise<MigrationReport> {
  const client = handle.client('stepbind-migrate');
  const schema = handle.schema;
  try {
    await client.connect();
    // A session lock (not a transaction lock): held across the per-migration transactions.
    await client.query('SELECT pg_advisory_lock(hashtext($1))', [`stepbind:migrate:${schema}`]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${schema}.schema_migrations (version int PRIMARY KEY, applied_at bigint NOT NULL)`,
    );
    const current = await client.query<{ v: number | null }>(
      `SELECT max(version) AS v FROM ${schema}.schema_migrations`,
    );
    const from = current.rows[0]?.v ?? 0;
    if (from > FLEET_SCHEMA_VERSION) {
      throw new RuntimeError(
        ErrorCode.STORE_UNAVAILABLE,
        `The fleet store ${handle.location} was written by a newer stepbind (schema ${from}; this one reads up to ${FLEET_SCHEMA_VERSION}); nothing was changed. Upgrade stepbind on this worker.`,
        { detail: { store: handle.location, reason: 'newer-schema', version: from } },
      );
    }
    const applied: number[] = [];
    for (let version = from; version < FLEET_SCHEMA_VERSION; version++) {
      await client.query('BEGIN');
      try {
        await client.query(MIGRATIONS[version] ?? '');
        await client.query(
          `INSERT INTO ${schema}.schema_migrations (version, applied_at) VALUES ($1, $2)`,
          [version + 1, Date.now()],
        );
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw error;
      }
      applied.push(version + 1);
    }
    return Object.freeze({ from, to: FLEET_SCHEMA_VERSION, applied: Object.freeze(applied) });
  } catch (error) {
    if (error instanceof RuntimeError) throw error;
    throw handle.failure('migrate its schema', 'unreachable', error);
  } finally {
    // Ending the session releases the advisory lock too.
    await client.end().catch(() => undefined);
  }
}
