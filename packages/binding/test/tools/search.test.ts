import {
  SEARCH_MAX_PARAMETERS,
  isStepbindError,
  parameterNamesOf,
  searchTools,
  searchWordsOf,
} from '@stepbind/binding/internal';
import { describe, expect, it } from 'vitest';
import { stepOf, tool, viewOf } from '../support/steps.js';

const CATALOG = {
  files: [
    tool('read_text_file', 'Read the complete contents of a file as text.', ['path']),
    tool('writeFile', 'Create or overwrite a file with new content.', ['path', 'content']),
    tool('list-directory', 'List the entries of a directory.', ['path']),
  ],
  calendar: [
    tool('create_event', 'Create a calendar event with attendees.', ['start', 'end', 'attendees']),
    tool('delete.event', 'Cancel an event.', ['eventId']),
    tool('find_free_time', 'Find when people are available for a meeting.', ['timeMin']),
  ],
};

function refused(run: () => unknown): Record<string, unknown> {
  try {
    run();
  } catch (error) {
    expect(isStepbindError(error, 'INVALID_OPTIONS')).toBe(true);
    return (error as { detail: Record<string, unknown> }).detail;
  }
  throw new Error('not refused');
}

describe('search words', () => {
  it('split snake_case, camelCase, kebab-case, dots and the server__tool separator', () => {
    expect(searchWordsOf('files__read_text_file')).toEqual(['files', 'read', 'text', 'file']);
    expect(searchWordsOf('writeFile')).toEqual(['write', 'file']);
    expect(searchWordsOf('HTTPServer.get-status')).toEqual(['http', 'server', 'get', 'status']);
    expect(searchWordsOf('Crème brûlée, 2x!')).toEqual(['crème', 'brûlée', '2x']);
  });
});

describe('McpBinding.search', () => {
  it('ranks the tool whose name and description match first, with its server and raw name', () => {
    const step = stepOf(CATALOG);
    const [best] = step.search('read a text file');
    expect(best).toMatchObject({
      name: 'files__read_text_file',
      server: 'files',
      toolName: 'read_text_file',
    });
    expect(best?.tool).toBe(step.tools[0]);
    expect(Object.isFrozen(best)).toBe(true);
  });

  it('finds a tool by its camelCase, kebab and dotted raw name words', () => {
    const step = stepOf(CATALOG);
    expect(step.search('write file')[0]?.name).toBe('files__writeFile');
    expect(step.search('list directory')[0]?.name).toBe('files__list-directory');
    expect(step.search('delete event')[0]?.toolName).toBe('delete.event');
  });

  it('finds a tool by a word only its description has', () => {
    const step = stepOf(CATALOG);
    expect(step.search('attendees')[0]?.name).toBe('calendar__create_event');
    expect(step.search('available meeting')[0]?.name).toBe('calendar__find_free_time');
  });

  it('finds a tool by a parameter name, nested ones too', () => {
    const step = stepOf({
      a: [tool('one', 'First.')],
      b: [
        tool('two', 'Second.', [], {
          inputSchema: {
            type: 'object',
            properties: {
              filter: { type: 'object', properties: { zipcode: { type: 'string' } } },
            },
          },
        }),
      ],
    });
    expect(step.search('zipcode')[0]?.name).toBe('b__two');
  });

  it('finds a tool by its title or annotations title', () => {
    const step = stepOf({
      s: [
        tool('t1', 'x', [], { title: 'Weather forecast' }),
        tool('t2', 'y', [], { annotations: { title: 'Stock quotes' } }),
      ],
    });
    expect(step.search('forecast')[0]?.name).toBe('s__t1');
    expect(step.search('quotes')[0]?.name).toBe('s__t2');
  });

  it('matches prefixes, plurals and small typos', () => {
    const step = stepOf(CATALOG);
    expect(step.search('calend')[0]?.name).toBe('calendar__create_event');
    expect(step.search('events')[0]?.server).toBe('calendar');
    expect(step.search('directroy')[0]?.name).toBe('files__list-directory');
  });

  it('breaks ties in the step tool order, so the same catalog always ranks the same', () => {
    const twins = { s: ['b', 'a', 'c'].map((n) => tool(n, 'Send a postcard.')) };
    const step = stepOf(twins);
    expect(step.search('postcard').map((h) => h.name)).toEqual(['s__b', 's__a', 's__c']);
    expect(stepOf(twins).search('postcard')).toEqual(step.search('postcard'));
  });

  it('honours limit and servers', () => {
    const step = stepOf(CATALOG);
    expect(step.search('file event', { limit: 2 })).toHaveLength(2);
    const hits = step.search('file event', { servers: ['calendar'] });
    expect(hits.length).toBeGreaterThan(0);
    expect(hits.every((h) => h.server === 'calendar')).toBe(true);
  });

  it('returns nothing for a query of stop words only or punctuation', () => {
    expect(stepOf(CATALOG).search('the of to')).toEqual([]);
    expect(stepOf(CATALOG).search('?!')).toEqual([]);
  });

  it('is shared by every step over one view, and a new catalog gets a new index', () => {
    const view = viewOf(CATALOG);
    expect(stepOf(view).search('attendees')).toEqual(stepOf(view).search('attendees'));
    const changed = viewOf({ ...CATALOG, calendar: [tool('book_room', 'Book a room.')] });
    expect(searchTools(changed, 'attendees')).toEqual([]);
    expect(searchTools(changed, 'room')[0]?.name).toBe('calendar__book_room');
  });

  it('refuses an empty or over-long query and a bad limit with INVALID_OPTIONS', () => {
    const step = stepOf(CATALOG);
    expect(refused(() => step.search(''))).toMatchObject({ function: 'McpBinding.search' });
    expect(refused(() => step.search('x'.repeat(1001)))).toMatchObject({ path: 'query' });
    expect(refused(() => step.search('file', { limit: 0 }))).toMatchObject({ option: 'limit' });
    expect(refused(() => step.search('file', { limit: 101 }))).toMatchObject({ option: 'limit' });
    expect(refused(() => step.search('file', { lmit: 3 } as never))).toMatchObject({
      didYouMean: 'limit',
    });
  });
});

describe('search bounds', () => {
  it('indexes only the head of a 1 MB description', () => {
    const huge = `${'lorem ipsum '.repeat(90_000)} needle`;
    const step = stepOf({ s: [tool('big', huge), tool('small', 'A needle in a haystack.')] });
    expect(step.search('needle').map((h) => h.name)).toEqual(['s__small']);
    expect(step.search('lorem')[0]?.name).toBe('s__big');
  });

  it('collects a bounded number of parameter names from a 10,000-property schema', () => {
    const properties = Object.fromEntries(
      Array.from({ length: 10_000 }, (_, i) => [`p${i}`, { type: 'string' }]),
    );
    const schema = { type: 'object' as const, properties };
    expect(parameterNamesOf(schema)).toHaveLength(SEARCH_MAX_PARAMETERS);
    const step = stepOf(
      viewOf({ s: [tool('wide', 'Wide.', [], { inputSchema: schema })] }, 2 ** 20),
    );
    expect(step.search('p1')[0]?.name).toBe('s__wide');
    expect(step.search('p9999')).toEqual([]);
  });

  it('stops collecting parameter names below the depth bound', () => {
    let schema: Record<string, unknown> = { type: 'object', properties: { deepest: {} } };
    for (let i = 0; i < 10; i++) schema = { type: 'object', properties: { [`l${i}`]: schema } };
    const names = parameterNamesOf(schema);
    expect(names).toEqual(['l9', 'l8', 'l7']);
  });

  it('skips a query word most tools contain, unless it is the only one', () => {
    const tools = Array.from({ length: 100 }, (_, i) =>
      tool(`t${i}`, `Works in the workspace on item ${i}.`),
    );
    tools.push(tool('bill', 'Send an invoice from the workspace.'));
    const step = stepOf({ s: tools });
    expect(step.search('workspace invoice', { limit: 100 }).map((h) => h.name)).toEqual([
      's__bill',
    ]);
    expect(step.search('workspace', { limit: 100 })).toHaveLength(100);
  });

  it('looks up at most 32 distinct words of a long query', () => {
    const step = stepOf(CATALOG);
    const filler = Array.from({ length: 40 }, (_, i) => `w${i}`).join(' ');
    expect(step.search(`${filler} attendees`)).toEqual([]);
    expect(step.search(`attendees ${filler}`)[0]?.name).toBe('calendar__create_event');
  });
});
