import { describe, expect, it } from 'vitest';
import {
  CatalogError,
  discoverToolPages,
  type ListPageRequest,
  type RawTool,
  type ToolListSource,
} from '@stepbind/binding/internal';

const tool = (name: string) => ({ name, inputSchema: { type: 'object' } });

/** An in-memory server of fixed pages (cursor = page index as a string) that logs every event. */
function pagedSource(pages: readonly (readonly unknown[])[], log: string[]): ToolListSource {
  return {
    listTools({ cursor }: ListPageRequest): Promise<unknown> {
      const index = cursor === undefined ? 0 : Number(cursor);
      log.push(`send ${index}`);
      const next = index + 1 < pages.length ? { nextCursor: String(index + 1) } : {};
      return Promise.resolve({ tools: pages[index], ...next });
    },
  };
}

describe('enumerateCatalog onPage', () => {
  it('hands each page over after the request for the next page was sent', async () => {
    const log: string[] = [];
    const source = pagedSource([[tool('a')], [], [tool('b'), tool('c')]], log);
    const result = await discoverToolPages(source, {
      onPage: (tools, i) => log.push(`page ${i}: ${tools.map((t) => t.name).join(',')}`),
    });
    expect(log).toEqual(['send 0', 'send 1', 'page 0: a', 'send 2', 'page 1: ', 'page 2: b,c']);
    expect(result.pageSizes).toEqual([1, 0, 2]);
  });

  it('hands over exactly the frozen page arrays of the enumeration', async () => {
    const seen: (readonly RawTool[])[] = [];
    const result = await discoverToolPages(pagedSource([[tool('a')], [tool('b')]], []), {
      onPage: (tools) => seen.push(tools),
    });
    expect(seen).toHaveLength(2);
    seen.forEach((page, i) => expect(page).toBe(result.pages[i]));
  });

  it('rejects with the error onPage threw, after reading every page, and hands over no later page', async () => {
    const log: string[] = [];
    const boom = new CatalogError('INVALID_TOOL_NAME', 'page 1 is bad', { detail: {} });
    const source = pagedSource([[tool('a')], [tool('b')], [tool('c')]], log);
    const pages: number[] = [];
    const outcome = discoverToolPages(source, {
      onPage: (_, i) => {
        pages.push(i);
        if (i === 0) throw boom;
      },
    });
    await expect(outcome).rejects.toBe(boom);
    expect(pages).toEqual([0]);
    expect(log.filter((e) => e.startsWith('send'))).toHaveLength(3);
  });

  it('gives an enumeration error on a later page precedence over an onPage error', async () => {
    const outcome = discoverToolPages(pagedSource([[tool('a')], [tool('a')]], []), {
      onPage: () => {
        throw new Error('validation failed');
      },
    });
    await expect(outcome).rejects.toMatchObject({ code: 'DUPLICATE_TOOL_NAME' });
  });

  it('calls onRestart on list_changed, drops a held onPage error and hands the pages over again', async () => {
    const changes = { version: 0 };
    const log: string[] = [];
    const inner = pagedSource([[tool('a')], [tool('b')]], log);
    let sent = 0;
    const source: ToolListSource = {
      listTools(request) {
        // The first traversal's second page arrives after a list_changed.
        if (++sent === 2) changes.version++;
        return inner.listTools(request);
      },
    };
    const result = await discoverToolPages(source, {
      changes,
      onPage: (_, i) => {
        log.push(`page ${i}`);
        if (sent < 3) throw new Error('stale page judged');
      },
      onRestart: () => log.push('restart'),
    });
    expect(result.restarts).toBe(1);
    expect(log).toEqual([
      'send 0',
      'send 1',
      'page 0',
      'restart',
      'send 0',
      'send 1',
      'page 0',
      'page 1',
    ]);
  });
});
