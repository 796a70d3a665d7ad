import { describe, expect, it } from 'vitest';
import {
  DEFAULT_FEATURE_LIST_LIMITS,
  listFeature,
  type FeatureListLimits,
} from '@stepbind/binding/internal';
import { isStepbindError } from '@stepbind/binding';

/** A listing served from `pages` (each with its next cursor), counting the requests. */
function served(pages: readonly { readonly items: unknown[]; readonly next?: unknown }[]) {
  const asked: (string | undefined)[] = [];
  const fetchPage = (cursor: string | undefined): Promise<unknown> => {
    asked.push(cursor);
    const index = cursor === undefined ? 0 : Number(cursor);
    const page = pages[index] ?? pages[pages.length - 1];
    return Promise.resolve({
      resources: page?.items ?? [],
      ...(page?.next === undefined ? {} : { nextCursor: page.next }),
    });
  };
  return { asked, fetchPage };
}

const item = (n: number) => ({ uri: `test://r/${n}`, name: `r${n}` });
const limits = (more: Partial<FeatureListLimits>): FeatureListLimits => ({
  ...DEFAULT_FEATURE_LIST_LIMITS,
  ...more,
});

async function refusal(promise: Promise<unknown>) {
  const error: unknown = await promise.then(
    () => {
      throw new Error('expected a refusal');
    },
    (e: unknown) => e,
  );
  expect(isStepbindError(error)).toBe(true);
  return error as { code: string; detail: Record<string, unknown> };
}

describe('listFeature', () => {
  it('follows cursors to the end, an empty-string cursor included', async () => {
    const { asked, fetchPage } = served([
      { items: [item(1)], next: '1' },
      { items: [], next: '2' },
      { items: [item(2), item(3)] },
    ]);
    const listing = await listFeature('resources', 's', fetchPage);
    expect(listing.items.map((r) => r.uri)).toEqual(['test://r/1', 'test://r/2', 'test://r/3']);
    expect(listing.pages).toBe(3);
    expect(asked).toEqual([undefined, '1', '2']);
    expect(Object.isFrozen(listing.items)).toBe(true);
  });

  it('refuses a page budget overrun with PAGE_LIMIT, after exactly maxPages requests', async () => {
    const { asked, fetchPage } = served([
      { items: [item(1)], next: '1' },
      { items: [], next: '2' },
      { items: [], next: '3' },
    ]);
    const error = await refusal(listFeature('resources', 's', fetchPage, limits({ maxPages: 2 })));
    expect(error.code).toBe('PAGE_LIMIT');
    expect(asked).toHaveLength(2);
  });

  it('refuses more items than maxItems with ITEM_LIMIT, and a limit met exactly passes', async () => {
    const { fetchPage } = served([{ items: [item(1), item(2), item(3)] }]);
    expect(
      (await listFeature('resources', 's', fetchPage, limits({ maxItems: 3 }))).items,
    ).toHaveLength(3);
    const error = await refusal(listFeature('resources', 's', fetchPage, limits({ maxItems: 2 })));
    expect(error.code).toBe('ITEM_LIMIT');
    expect(error.detail).toMatchObject({ server: 's', limit: 2, method: 'resources/list' });
  });

  it('refuses a cursor over maxCursorLength and a cursor that is not a string', async () => {
    const long = served([{ items: [], next: 'x'.repeat(11) }]);
    expect(
      (
        await refusal(
          listFeature('resources', 's', long.fetchPage, limits({ maxCursorLength: 10 })),
        )
      ).code,
    ).toBe('CURSOR_TOO_LARGE');
    const numeric = served([{ items: [], next: 7 }]);
    expect((await refusal(listFeature('resources', 's', numeric.fetchPage))).code).toBe(
      'INVALID_PAGE',
    );
  });

  it('refuses a page without its array with INVALID_PAGE', async () => {
    const error = await refusal(listFeature('prompts', 's', () => Promise.resolve({ tools: [] })));
    expect(error.code).toBe('INVALID_PAGE');
  });

  it('drops invalid prompts and arguments with a reason, keeping the valid ones', async () => {
    const listing = await listFeature('prompts', 's', () =>
      Promise.resolve({
        prompts: [
          { name: 'ok', arguments: [{ name: 'a', required: true }] },
          { name: 'has space' },
          { name: 'many', arguments: Array.from({ length: 65 }, (_, i) => ({ name: `a${i}` })) },
          { name: 'ok' },
        ],
      }),
    );
    expect(listing.items).toEqual([
      { modelName: '', server: 's', name: 'ok', arguments: [{ name: 'a', required: true }] },
    ]);
    expect(listing.dropped.map((d) => d.index)).toEqual([1, 2, 3]);
  });
});
