/**
 * oidc-provider's storage, in memory and inspectable: the authorization server counts dynamic
 * registrations here and revokes refresh tokens by deleting them, which the library's own memory
 * adapter (an LRU cache behind a private field) cannot do.
 */
import type { Adapter, AdapterPayload } from 'oidc-provider';

interface Entry {
  payload: AdapterPayload;
  /** ms since the epoch; none: never. */
  readonly expiresAt?: number;
}

/** Every model's entries, shared by the adapters of one authorization server. */
export class AdapterStore {
  readonly #models = new Map<string, Map<string, Entry>>();
  /** Called with the model name on every write (a `Client` write is a registration). */
  onUpsert: (model: string, id: string) => void = () => undefined;

  /** The entries of `model` (created empty on first use). */
  model(name: string): Map<string, Entry> {
    let entries = this.#models.get(name);
    if (entries === undefined) {
      entries = new Map();
      this.#models.set(name, entries);
    }
    return entries;
  }

  /** The adapter class oidc-provider instantiates once per model. */
  adapterFor(): new (name: string) => Adapter {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the class below closes over its store
    const store = this;
    return class implements Adapter {
      readonly #name: string;
      readonly #entries: Map<string, Entry>;
      constructor(name: string) {
        this.#name = name;
        this.#entries = store.model(name);
      }
      upsert(id: string, payload: AdapterPayload, expiresIn: number): Promise<void> {
        const expiresAt = expiresIn > 0 ? Date.now() + expiresIn * 1000 : undefined;
        this.#entries.set(id, {
          payload: { ...payload },
          ...(expiresAt === undefined ? {} : { expiresAt }),
        });
        store.onUpsert(this.#name, id);
        return Promise.resolve();
      }
      find(id: string): Promise<AdapterPayload | undefined> {
        return Promise.resolve(this.#live(id)?.payload);
      }
      findByUserCode(userCode: string): Promise<AdapterPayload | undefined> {
        return Promise.resolve(this.#findBy((p) => p.userCode === userCode));
      }
      findByUid(uid: string): Promise<AdapterPayload | undefined> {
        return Promise.resolve(this.#findBy((p) => p.uid === uid));
      }
      consume(id: string): Promise<void> {
        const entry = this.#live(id);
        if (entry !== undefined) entry.payload.consumed = Math.floor(Date.now() / 1000);
        return Promise.resolve();
      }
      destroy(id: string): Promise<void> {
        this.#entries.delete(id);
        return Promise.resolve();
      }
      revokeByGrantId(grantId: string): Promise<void> {
        // A grant's tokens live in several models (codes, access and refresh tokens).
        for (const name of store.#models.keys()) {
          const entries = store.model(name);
          for (const [id, entry] of entries) {
            if (entry.payload.grantId === grantId) entries.delete(id);
          }
        }
        return Promise.resolve();
      }
      #live(id: string): Entry | undefined {
        const entry = this.#entries.get(id);
        if (entry?.expiresAt !== undefined && entry.expiresAt <= Date.now()) {
          this.#entries.delete(id);
          return undefined;
        }
        return entry;
      }
      #findBy(test: (payload: AdapterPayload) => boolean): AdapterPayload | undefined {
        for (const [id, entry] of this.#entries) {
          if (test(entry.payload)) return this.#live(id)?.payload;
        }
        return undefined;
      }
    };
  }
}
