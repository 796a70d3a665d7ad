import type { CallContext, JournalRecord, JournalStore, ReceiptBody } from '@stepbind/binding';

/** The call context of a write tool `tool` of server `s` (step `step-1`, generation 1). */
export function context(tool = 'write_doc'): CallContext {
  return {
    stepId: 'step-1',
    server: 's',
    tool,
    modelName: `s__${tool}`,
    descriptorDigest: `sha256:${tool}`,
    effectClass: 'write',
    generation: 1,
    revision: 1,
    policyEpoch: 0,
    audience: 'default',
    catalogState: 'UNVERSIONED_OBSERVATION',
  };
}

/** A journal record of `key` in state INTENT, with `overrides` applied. */
export function record(key: string, overrides: Partial<JournalRecord> = {}): JournalRecord {
  return {
    key,
    state: 'INTENT',
    version: 1,
    attempt: 1,
    owner: 'test:1:owner',
    context: context(),
    argsDigest: 'sha256:args',
    createdAt: 1_000,
    updatedAt: 1_000,
    leaseExpiresAt: 2_000,
    expiresAt: null,
    outcome: null,
    error: null,
    resolution: null,
    ...overrides,
  };
}

/** The `i`-th receipt body of a successful, sent run of `key` (`null`: a run without a key). */
export function receipt(i: number, key: string | null = `k${i}`): ReceiptBody {
  return {
    ...context(),
    at: 1_000 + i,
    source: 'run',
    key,
    attempt: key === null ? null : 1,
    outcome: 'ok',
    delivery: 'sent',
    replayed: false,
    argsDigest: `sha256:${i}`,
    resultDigest: null,
  };
}

/**
 * `store`, delegated to whole, except that every durable write is checked the moment it resolves
 * (before the journal can send the call it precedes) through `reader`, a second connection to the
 * same store: the record it wrote must already be committed there. `unseen` lists the keys whose
 * record was not.
 */
export function checkedAtResolve(
  store: JournalStore,
  reader: Pick<JournalStore, 'get'>,
): { readonly store: JournalStore; readonly unseen: string[]; readonly checked: () => number } {
  const unseen: string[] = [];
  let checked = 0;
  const check = async (written: JournalRecord): Promise<void> => {
    checked++;
    const seen = await reader.get(written.key);
    if (seen?.version !== written.version || seen.state !== written.state) unseen.push(written.key);
  };
  const clock = store.clock;
  return {
    unseen,
    checked: () => checked,
    store: {
      location: store.location,
      ...(clock === undefined ? {} : { clock }),
      get: (...a) => store.get(...a),
      async insert(r, options) {
        const ok = await store.insert(r, options);
        if (ok && options?.durable === true) await check(r);
        return ok;
      },
      async update(r, expected, options) {
        const result = await store.update(r, expected, options);
        if (result.ok && options?.durable === true) await check(r);
        return result;
      },
      appendReceipt: (...a) => store.appendReceipt(...a),
      listRecords: (...a) => store.listRecords(...a),
      readReceipts: (...a) => store.readReceipts(...a),
      anchor: () => store.anchor(),
      ...(store.head === undefined ? {} : { head: () => store.head!() }),
      ...(store.newestWrite === undefined
        ? {}
        : { newestWrite: (...a) => store.newestWrite!(...a) }),
      prune: (...a) => store.prune(...a),
      close: () => store.close(),
    },
  };
}
