/**
 * The fleet's catalog registry in PostgreSQL: one active pointer per (identity digest, audience),
 * moved only by `UPDATE … WHERE generation = $expected`. Generations are issued per (server name,
 * audience) and never decrease, also across identity changes. Snapshots are stored by digest, so
 * a worker whose listing has the published digest adopts the published one without moving the
 * pointer: the stored body is read in the same transaction and must equal the worker's listing in
 * canonical form (else the store is corrupt and nothing is published), and the worker then serves
 * the published catalog under the fleet's generation. {@link FleetRegistry.load} rebuilds a
 * stored snapshot (validated like a listing) for a process that has not listed it itself.
 */
import {
  canonicalJson,
  CatalogError,
  ConfigError,
  MAX_TIMER_MS,
  createCatalogSnapshot,
  ErrorCode,
  RuntimeError,
  sha256Hex,
  type ValidationOptions,
  type CatalogSnapshot,
  type PublishConflictReason,
  type ServerIdentity,
} from '@stepbind/binding/internal';
import type { PgPoolClient } from './pg-driver.js';
import type { PgHandle } from './pg.js';

/** What the fleet decided for one candidate. */
export interface FleetPublication {
  readonly server: string;
  readonly audience: string;
  readonly identityDigest: string;
  readonly snapshotDigest: string;
  /** The fleet generation the candidate is published (or adopted) under. */
  readonly generation: number;
  /**
   * `published`: this worker moved the pointer; `adopted`: the same catalog (its stored body equal
   * to this worker's listing, checked) was already active.
   */
  readonly outcome: 'published' | 'adopted';
}

/** The active fleet pointer of one (identity, audience). */
export interface FleetPointer {
  readonly identityDigest: string;
  readonly audience: string;
  readonly server: string;
  readonly generation: number;
  readonly snapshotDigest: string;
  readonly policyEpoch: number;
  readonly publishedBy: string;
  readonly publishedAt: number;
}

/** sha256 of the canonical identity: the fleet-wide key of a server. */
export function identityDigest(identity: ServerIdentity): string {
  return `sha256:${sha256Hex(
    canonicalJson({
      name: identity.name,
      transportDigest: identity.transportDigest,
      serverInfo: identity.serverInfo ?? null,
      protocolVersion: identity.protocolVersion ?? null,
    }),
  )}`;
}

/**
 * The stored form of a snapshot: everything a worker needs to compare or load it. Not its policy
 * epoch: the same listing stays one row across epochs (each pointer records its own).
 */
function snapshotBody(snapshot: CatalogSnapshot): string {
  return canonicalJson({
    schema: snapshot.schema,
    identity: { ...snapshot.identity },
    audience: snapshot.audience,
    sourceRevision: snapshot.sourceRevision ?? null,
    pageSizes: snapshot.pageSizes,
    pageRoot: snapshot.pageRoot,
    state: snapshot.state,
    tools: snapshot.tools.map((t) => ({
      name: t.name,
      descriptorDigest: t.descriptorDigest,
      effectClass: t.effectClass,
      raw: t.raw,
    })),
  });
}

/**
 * The digest a catalog is stored and compared under: the listing as validated (identity, audience,
 * pages, every tool's descriptor), not when or by whom it was discovered.
 */
export function snapshotDigest(snapshot: CatalogSnapshot): string {
  return `sha256:${sha256Hex(
    canonicalJson({
      identity: identityDigest(snapshot.identity),
      audience: snapshot.audience,
      sourceRevision: snapshot.sourceRevision ?? null,
      pageRoot: snapshot.pageRoot,
      state: snapshot.state,
      tools: snapshot.tools.map((t) => t.descriptorDigest),
    }),
  )}`;
}

/** Options of {@link FleetRegistry.load}. */
export interface LoadSnapshotOptions {
  /** Schema validation of the rebuilt catalog (as for a listing; `server` is filled in). */
  readonly validation?: Omit<ValidationOptions, 'server' | 'validatorCache' | 'pageIndex'>;
  /** How long the rebuilt snapshot stays fresh. @default the snapshot default */
  readonly ttlMs?: number;
}

/** The fleet registry of one worker. */
export class FleetRegistry {
  readonly #pg: PgHandle;
  readonly #owner: string;
  /** The fleet generation this worker last observed per pointer key (its CAS expectation). */
  readonly #observed = new Map<string, number>();

  constructor(handle: PgHandle, owner: string) {
    this.#pg = handle;
    this.#owner = owner;
  }

  /**
   * Publishes candidates as one unit: in one transaction every pointer moves, or none does. Per
   * candidate: same digest as the active pointer → adopted; else the pointer moves by
   * `UPDATE … WHERE generation = $expected`, where the expectation is the generation this worker
   * last observed, or the active one when the candidate's listing started after it was published
   * (a worker's first publication expects what is active now).
   *
   * @throws CatalogError `PUBLISH_CONFLICT` (nothing moved) with `detail.reason`: `generation`
   *   (another worker moved the pointer since this one last looked; the next refresh expects the
   *   new one) or `policy-epoch` (the candidate was built under another epoch than the fleet's).
   * @throws RuntimeError `STORE_UNAVAILABLE`.
   */
  async publish(
    candidates: readonly CatalogSnapshot[],
    options: { readonly policyEpoch?: number } = {},
  ): Promise<readonly FleetPublication[]> {
    if (candidates.length === 0) return [];
    const learned = new Map<string, number>();
    try {
      const results = await this.#pg.tx('publish a catalog', async (client) => {
        learned.clear();
        const clock = await databaseClock(client);
        const out: FleetPublication[] = [];
        for (const c of candidates) {
          out.push(await this.#publishOne(client, c, learned, options, clock));
        }
        return out;
      });
      for (const [key, generation] of learned) this.#observed.set(key, generation);
      return results;
    } catch (error) {
      // A refused unit still teaches this worker what is active, so its next refresh can win.
      for (const [key, generation] of learned) this.#observed.set(key, generation);
      throw error;
    }
  }

  /**
   * Reads the active pointer and makes its generation this worker's expectation (what a refresh
   * starting now must replace). @returns that generation (0: none).
   */
  async observe(identity: ServerIdentity, audience: string): Promise<number> {
    const generation = (await this.current(identity, audience))?.generation ?? 0;
    this.#observed.set(`${identityDigest(identity)}\u0000${audience}`, generation);
    return generation;
  }

  /** The active pointer of (identity, audience), if any. */
  async current(
    identity: ServerIdentity | string,
    audience: string,
  ): Promise<FleetPointer | undefined> {
    const digest = typeof identity === 'string' ? identity : identityDigest(identity);
    const { rows } = await this.#pg.query<PointerRow>(
      'SELECT * FROM catalog_pointers WHERE identity_digest = $1 AND audience = $2',
      [digest, audience],
    );
    return rows[0] === undefined ? undefined : toPointer(rows[0]);
  }

  /**
   * Rebuilds the stored snapshot of `digest` into a validated {@link CatalogSnapshot} (schemas
   * checked and validators compiled as for a listing; generation 0, a candidate, under the epoch
   * of the newest pointer to it, else 0), so a process can serve or inspect the published catalog
   * without listing the server.
   *
   * @returns `undefined` when no snapshot has that digest.
   * @throws RuntimeError `STORE_UNAVAILABLE` (reason `corrupt` when the stored body does not
   *   rebuild into a catalog of that digest); CatalogError when it no longer validates.
   */
  async load(
    digest: string,
    options: LoadSnapshotOptions = {},
  ): Promise<CatalogSnapshot | undefined> {
    checkLoadOptions(options);
    const { rows } = await this.#pg.query<{ body: string; created_at: string; epoch: string }>(
      `SELECT s.body, s.created_at,
         (SELECT coalesce(max(p.policy_epoch), 0) FROM catalog_pointers p WHERE p.snapshot_digest = s.digest) AS epoch
       FROM catalog_snapshots s WHERE s.digest = $1`,
      [digest],
    );
    const row = rows[0];
    if (row === undefined) return undefined;
    const body = JSON.parse(row.body) as StoredBody;
    const pages: unknown[][] = [];
    let at = 0;
    for (const size of body.pageSizes) {
      pages.push(body.tools.slice(at, at + size).map((t) => t.raw));
      at += size;
    }
    const snapshot = createCatalogSnapshot({
      identity: body.identity,
      audience: body.audience,
      policyEpoch: Number(row.epoch),
      pages,
      ...(body.sourceRevision === null ? {} : { sourceRevision: body.sourceRevision }),
      revisionProof: body.sourceRevision === null ? 'unversioned' : 'proven',
      discoveryStartedAt: Number(row.created_at),
      ...options,
    });
    if (snapshotDigest(snapshot) !== digest) throw this.#corrupt(digest, body.identity.name);
    return snapshot;
  }

  #corrupt(digest: string, server: string): RuntimeError {
    return new RuntimeError(
      ErrorCode.STORE_UNAVAILABLE,
      `The fleet store ${this.#pg.location} holds a catalog snapshot of server "${server}" under digest ${digest} whose content does not have that digest; the store was altered. Nothing was published; remove the row from catalog_snapshots (the next publication stores it again).`,
      { detail: { store: this.#pg.location, reason: 'corrupt', server, digest } },
    );
  }

  /**
   * Adoption: the stored body of the active digest must equal this candidate's (a row lost or
   * written by an older version is stored again from this listing, which has that digest).
   */
  async #checkStored(
    client: PgPoolClient,
    digest: string,
    candidate: CatalogSnapshot,
  ): Promise<void> {
    const body = snapshotBody(candidate);
    const { rows } = await client.query<{ body: string }>(
      'SELECT body FROM catalog_snapshots WHERE digest = $1',
      [digest],
    );
    const stored = rows[0]?.body;
    if (stored === undefined) {
      await client.query(
        `INSERT INTO catalog_snapshots (digest, server, audience, body, created_at) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (digest) DO NOTHING`,
        [digest, candidate.identity.name, candidate.audience, body, Date.now()],
      );
    } else if (stored !== body) {
      throw this.#corrupt(digest, candidate.identity.name);
    }
  }

  async #publishOne(
    client: PgPoolClient,
    candidate: CatalogSnapshot,
    learned: Map<string, number>,
    options: { readonly policyEpoch?: number },
    clock: DatabaseClock,
  ): Promise<FleetPublication> {
    const server = candidate.identity.name;
    const audience = candidate.audience;
    const idDigest = identityDigest(candidate.identity);
    const digest = snapshotDigest(candidate);
    const key = `${idDigest}\u0000${audience}`;
    // Serializes publications per (server, audience) so generation numbers are issued in order.
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [
      `stepbind:publish:${server}:${audience}`,
    ]);
    const epochRow = await client.query<{ epoch: string }>(
      'SELECT epoch FROM policy_state WHERE id = 1',
    );
    const fleetEpoch = Number(epochRow.rows[0]?.epoch ?? 0);
    const pointerRows = await client.query<PointerRow>(
      'SELECT * FROM catalog_pointers WHERE identity_digest = $1 AND audience = $2',
      [idDigest, audience],
    );
    const active = pointerRows.rows[0] === undefined ? undefined : toPointer(pointerRows.rows[0]);
    // The expectation is what this worker last observed; a listing that started after the active
    // pointer was published is newer than it, so it expects that one (refreshes that started
    // earlier still lose: DESIGN §15). Both instants are on the database's clock: the listing's
    // local start is translated by the offset measured in this transaction, and it counts as
    // later only when it is later even at the far end of that measurement's uncertainty.
    const observed = this.#observed.get(key);
    const earliestStartOnDb = candidate.discoveryStartedAt + clock.offsetMs - clock.uncertaintyMs;
    const expected =
      active !== undefined && (observed === undefined || earliestStartOnDb > active.publishedAt)
        ? active.generation
        : (observed ?? 0);
    const refuse = (reason: PublishConflictReason, message: string): CatalogError =>
      new CatalogError(ErrorCode.PUBLISH_CONFLICT, `${message} Nothing was published.`, {
        detail: {
          server,
          audience,
          reason,
          expectedGeneration: expected,
          activeGeneration: active?.generation ?? 0,
          candidatePolicyEpoch: candidate.policyEpoch,
          policyEpoch: options.policyEpoch ?? fleetEpoch,
          fleet: true,
        },
      });
    if (candidate.policyEpoch !== fleetEpoch) {
      throw refuse(
        'policy-epoch',
        `The catalog of server "${server}" was built under policy epoch ${candidate.policyEpoch}, but the fleet is at epoch ${fleetEpoch}; refresh again.`,
      );
    }
    if (
      active !== undefined &&
      active.snapshotDigest === digest &&
      active.policyEpoch === fleetEpoch
    ) {
      await this.#checkStored(client, digest, candidate);
      learned.set(key, active.generation);
      return {
        server,
        audience,
        identityDigest: idDigest,
        snapshotDigest: digest,
        generation: active.generation,
        outcome: 'adopted',
      };
    }
    const issued = await client.query<{ issued: string }>(
      `INSERT INTO catalog_generations (server, audience, issued) VALUES ($1, $2, 1)
       ON CONFLICT (server, audience) DO UPDATE SET issued = catalog_generations.issued + 1
       RETURNING issued`,
      [server, audience],
    );
    const generation = Number(issued.rows[0]?.issued);
    const now = clock.nowMs;
    const moved =
      active === undefined
        ? await client.query(
            `INSERT INTO catalog_pointers (identity_digest, audience, server, generation, snapshot_digest, policy_epoch, published_by, published_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING`,
            [idDigest, audience, server, generation, digest, fleetEpoch, this.#owner, now],
          )
        : await client.query(
            `UPDATE catalog_pointers SET generation = $3, snapshot_digest = $4, policy_epoch = $5, published_by = $6, published_at = $7
             WHERE identity_digest = $1 AND audience = $2 AND generation = $8`,
            [idDigest, audience, generation, digest, fleetEpoch, this.#owner, now, expected],
          );
    if (moved.rowCount !== 1) {
      if (active !== undefined) learned.set(key, active.generation);
      throw refuse(
        'generation',
        `The fleet catalog of server "${server}" for audience "${audience}" is at generation ${active?.generation ?? 0} while this worker expected ${expected}; another worker published first, and this worker's next refresh expects the new generation.`,
      );
    }
    await client.query(
      `INSERT INTO catalog_snapshots (digest, server, audience, body, created_at) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (digest) DO NOTHING`,
      [digest, server, audience, snapshotBody(candidate), now],
    );
    await client.query(
      `INSERT INTO catalog_publications (identity_digest, audience, server, generation, snapshot_digest, published_by, at)
       VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [idDigest, audience, server, generation, digest, this.#owner, now],
    );
    learned.set(key, generation);
    return {
      server,
      audience,
      identityDigest: idDigest,
      snapshotDigest: digest,
      generation,
      outcome: 'published',
    };
  }
}

/** The stored form {@link snapshotBody} writes. */
interface StoredBody {
  readonly identity: ServerIdentity;
  readonly audience: string;
  readonly sourceRevision: string | null;
  readonly pageSizes: readonly number[];
  readonly tools: readonly { readonly raw: unknown }[];
}

interface PointerRow {
  identity_digest: string;
  audience: string;
  server: string;
  generation: string;
  snapshot_digest: string;
  policy_epoch: string;
  published_by: string;
  published_at: string;
}

function toPointer(row: PointerRow): FleetPointer {
  return Object.freeze({
    identityDigest: row.identity_digest,
    audience: row.audience,
    server: row.server,
    generation: Number(row.generation),
    snapshotDigest: row.snapshot_digest,
    policyEpoch: Number(row.policy_epoch),
    publishedBy: row.published_by,
    publishedAt: Number(row.published_at),
  });
}

/**
 * The database's clock as one transaction saw it: its time, and the offset of this host's clock
 * from it (database minus local), measured by one round trip, ± half that round trip. Publication
 * times are written on the database's clock, so workers on hosts whose clocks disagree still
 * order a listing's start against the active publication correctly (to within the round trip).
 */
interface DatabaseClock {
  readonly nowMs: number;
  readonly offsetMs: number;
  readonly uncertaintyMs: number;
}

async function databaseClock(client: PgPoolClient): Promise<DatabaseClock> {
  const before = Date.now();
  const row = await client.query<{ now: string }>(
    'SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS now',
  );
  const after = Date.now();
  const nowMs = Math.round(Number(row.rows[0]?.now));
  return { nowMs, offsetMs: nowMs - (before + after) / 2, uncertaintyMs: (after - before) / 2 };
}

const LOAD_OPTION_KEYS: readonly string[] = ['validation', 'ttlMs'];

/**
 * The options of {@link FleetRegistry.load}, checked before the query (a JavaScript caller has no
 * compiler): an unknown key or a `ttlMs` that is not a whole number of milliseconds is refused.
 * @throws ConfigError `INVALID_OPTIONS`.
 */
function checkLoadOptions(options: LoadSnapshotOptions): void {
  const refuse = (option: string, message: string, value: unknown): never => {
    throw new ConfigError(
      ErrorCode.INVALID_OPTIONS,
      `FleetRegistry.load: ${message} Nothing was read.`,
      { detail: { option, ...(typeof value === 'number' ? { value } : {}) } },
    );
  };
  if (typeof options !== 'object' || options === null) {
    refuse('options', 'options must be an object.', options);
  }
  for (const key of Object.keys(options)) {
    if (!LOAD_OPTION_KEYS.includes(key)) {
      refuse(
        key,
        `unknown option "${key}"; the options are ${LOAD_OPTION_KEYS.join(', ')}.`,
        undefined,
      );
    }
  }
  const { ttlMs } = options;
  if (ttlMs !== undefined && (!Number.isInteger(ttlMs) || ttlMs < 0 || ttlMs > MAX_TIMER_MS)) {
    refuse(
      'ttlMs',
      `ttlMs must be a whole number of milliseconds from 0 to ${MAX_TIMER_MS}.`,
      ttlMs,
    );
  }
  if (
    options.validation !== undefined &&
    (typeof options.validation !== 'object' || options.validation === null)
  ) {
    refuse('validation', 'validation must be an object of validation options.', undefined);
  }
}
