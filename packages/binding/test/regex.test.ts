import fc from 'fast-check';
import { RE2JS } from 're2js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  SchemaValidatorCache,
  createCatalogSnapshot,
  validateTool,
  type SchemaValidator,
} from '@stepbind/binding/internal';
import { REGEX_BUDGET } from '../src/regex/budget.js';
import { planPattern } from '../src/regex/plan.js';
import { isPlainSchema } from '../src/schema/plain.js';

const seed = Number(process.env.STEPBIND_SEED ?? Date.now());
console.log(`regex: seed ${seed} (STEPBIND_SEED=${seed} to replay)`);

const REDOS = '^(a+)+$';

/** Compiles the RE2 translation of an enforced pattern. */
function re2Of(source: string): RE2JS {
  const plan = planPattern(source);
  if (!plan.enforced) throw new Error(`${source} is not enforced: ${plan.reason}`);
  return RE2JS.compile(plan.re2);
}

function validatorOf(inputSchema: Record<string, unknown>): SchemaValidator {
  const cache = new SchemaValidatorCache();
  const tool = validateTool({ name: 't', inputSchema }, { server: 's', validatorCache: cache });
  return cache.getValidator(tool.inputSchema.digest);
}

const INPUTS = [
  '',
  'a',
  'aaa',
  'abc',
  'a b',
  'a\u00a0b',
  'x\u2028y',
  '\r',
  '\n',
  '2024-01',
  'αβγ',
  'ABC',
  '😀',
  '😃',
  '\ud800',
  '\b',
  'foo bar',
  'éé',
  'x@y',
  'a.b',
  'a\nb',
  '\u0000',
  '/',
  '-',
  'Λ',
  '\ufeff',
  '\u3000',
];

describe('planPattern: ECMAScript (u) patterns in RE2 syntax with the same meaning', () => {
  const enforced = [
    '^[a-z]+$',
    REDOS,
    'a.b',
    '^.$',
    '\\s',
    '\\S+',
    '[\\s\\d]',
    '[^\\s]',
    '[]',
    '[^]',
    '[^][]',
    '^\\d{4}-\\d{2}$',
    '\\p{L}+',
    '\\p{Letter}',
    '\\p{gc=Lu}',
    '\\p{Script=Greek}',
    '\\P{Lu}',
    '[\\p{L}\\d_-]',
    '\\u{1F600}',
    '\\uD83D\\uDE00',
    '[😀-😂]',
    '\\cJ',
    '\\0',
    '[\\b]',
    '\\bfoo\\b',
    'a{2,3}?',
    '(?<year>\\d+)',
    '[a\\-z]',
    '\\/',
    '\\p{Any}',
    '\\P{Any}',
    '[\\P{Any}a]',
    '\\p{ASCII}+',
    '^$',
    '',
    'a|',
    '(|a)',
    '\\x41',
    '[\\u0041-\\u005A]',
    '^[^\\n]*$',
    '\\w+@\\w+',
    '\\W\\D',
    '(?:a{10}){100}',
  ];

  it.each(enforced)('%j is enforced and agrees with RegExp on sample inputs', (source) => {
    const re = re2Of(source);
    const js = new RegExp(source, 'u');
    for (const input of INPUTS) expect(re.test(input), JSON.stringify(input)).toBe(js.test(input));
  });

  it('translates \\s, \\S and . exactly as ECMAScript reads them, for every BMP code point', () => {
    const cases = ['^\\s$', '^\\S$', '^.$', '^[\\s]$', '^[^\\S]$'].map(
      (p) => [re2Of(p), new RegExp(p, 'u')] as const,
    );
    for (let cp = 0; cp <= 0xffff; cp++) {
      const s = String.fromCharCode(cp);
      for (const [re, js] of cases) {
        if (re.test(s) !== js.test(s))
          throw new Error(`${js.source} differs at U+${cp.toString(16)}`);
      }
    }
  });

  it.each([
    ['(?<y>\\d+)-\\k<y>', 'backreferences have no RE2 equivalent'],
    ['(a)\\1', 'backreferences have no RE2 equivalent'],
    ['(?=a)a', 'lookahead has no RE2 equivalent'],
    ['a(?!b)', 'lookahead has no RE2 equivalent'],
    ['(?<=a)b', 'lookbehind has no RE2 equivalent'],
    ['\\p{sc=Grek}', 'the Unicode property \\p{sc=Grek} has no RE2 equivalent'],
    ['\\p{C}', 'the Unicode property \\p{C} has no RE2 equivalent'],
    ['x{1001}', 'a counted repetition over 1000'],
    ['(?:a{10}){101}', 'a counted repetition over 1000 (nested counts multiply)'],
    ['('.repeat(101) + ')'.repeat(101), 'groups nested more than 100 deep'],
    ['a'.repeat(4097), 'longer than 4096 characters'],
  ])('%j is not enforced: %s', (source, reason) => {
    expect(new RegExp(source, 'u')).toBeInstanceOf(RegExp);
    expect(planPattern(source)).toEqual({ enforced: false, source, reason });
  });

  it('leaves \\B unenforced: V8 finds a non-boundary inside an astral character, RE2 cannot', () => {
    // Regression of seed 1796114424161: /\B/u matches "a😀a" at index 2, between the surrogates.
    expect(/\B/u.exec('a😀a')?.index).toBe(2);
    expect(planPattern('\\B')).toMatchObject({ enforced: false });
    expect(planPattern('x\\b')).toMatchObject({ enforced: true });
  });

  it('gives RE2 only patterns it compiles, with the meaning RegExp gives them (property)', () => {
    const atom = fc.constantFrom(
      'a',
      'b',
      '.',
      '\\d',
      '\\s',
      '\\S',
      '\\w',
      '\\W',
      '[ab]',
      '[^a]',
      '[a-c]',
      '[\\s1]',
      '[^\\S]',
      '[]',
      '[^]',
      'é',
      '\\u00e9',
      '😀',
      '\\u{1F600}',
      '\\n',
      '\\p{L}',
      '\\P{L}',
      '\\b',
      '\\B',
      '^',
      '$',
      '\\-',
      '\\.',
      '(?=a)',
      '\\1',
    );
    const { pattern } = fc.letrec<{ pattern: string }>((tie) => ({
      pattern: fc.oneof(
        { depthSize: 'small' },
        atom,
        fc.array(tie('pattern'), { minLength: 2, maxLength: 3 }).map((xs) => xs.join('')),
        fc.tuple(tie('pattern'), tie('pattern')).map(([x, y]) => `${x}|${y}`),
        fc
          .tuple(fc.constantFrom('(', '(?:', '(?<n>'), tie('pattern'))
          .map(([open, x]) => `${open}${x})`),
        fc
          .tuple(
            tie('pattern'),
            fc.constantFrom('*', '+', '?', '{2}', '{0,2}', '{1,}', '*?', '{1,3}?'),
          )
          .map(([x, q]) => `(?:${x})${q}`),
      ),
    }));
    const input = fc
      .array(
        fc.constantFrom('a', 'b', '1', ' ', '\n', '\r', '\u2028', '\u00a0', 'é', '😀', '_', '-'),
        {
          maxLength: 6,
        },
      )
      .map((cs) => cs.join(''));
    let compared = 0;
    fc.assert(
      fc.property(pattern, fc.array(input, { minLength: 1, maxLength: 8 }), (source, inputs) => {
        let js: RegExp;
        try {
          js = new RegExp(source, 'u');
        } catch {
          return;
        }
        const plan = planPattern(source);
        if (!plan.enforced) return;
        const re = RE2JS.compile(plan.re2);
        for (const s of inputs) {
          compared++;
          expect(re.test(s), `${JSON.stringify(source)} on ${JSON.stringify(s)}`).toBe(js.test(s));
        }
      }),
      { seed, verbose: true, numRuns: 1000 },
    );
    expect(compared).toBeGreaterThan(1000);
  });
});

describe('schema validation never runs a server pattern on RegExp', () => {
  // A backtracking engine takes hours on this: a validation that returns at all ran on RE2. And
  // RegExp.prototype.exec (which RegExp.prototype.test calls) is made to throw for the pattern.
  const hostile = 'a'.repeat(100_000) + '!';
  const exec = Object.getOwnPropertyDescriptor(RegExp.prototype, 'exec') as PropertyDescriptor;
  const original = exec.value as (this: RegExp, s: string) => RegExpExecArray | null;
  beforeEach(() => {
    Object.defineProperty(RegExp.prototype, 'exec', {
      ...exec,
      value(this: RegExp, s: string) {
        if (this.source.includes('(a+)+')) throw new Error(`RegExp ran ${this.source}`);
        return original.call(this, s);
      },
    });
  });
  afterEach(() => {
    Object.defineProperty(RegExp.prototype, 'exec', exec);
  });

  it('pattern (a plain schema, checked by the fast path)', () => {
    const schema = { type: 'object', properties: { s: { type: 'string', pattern: REDOS } } };
    expect(isPlainSchema(schema, '2020-12', true, 0)).toBe(true);
    const v = validatorOf(schema);
    expect(v.validate({ s: hostile })).toEqual({
      ok: false,
      errors: '/s must match pattern "^(a+)+$"',
    });
    expect(v.validate({ s: 'a'.repeat(100_000) })).toEqual({ ok: true });
  });

  it('patternProperties, with additionalProperties: false', () => {
    const v = validatorOf({
      type: 'object',
      patternProperties: { [REDOS]: { type: 'number' } },
      additionalProperties: false,
    });
    expect(v.validate({ ['a'.repeat(5000) + '!']: 1 }).ok).toBe(false);
    expect(v.validate({ aaaa: 1 })).toEqual({ ok: true });
    expect(v.validate({ aaaa: 'x' }).ok).toBe(false);
  });

  it('propertyNames', () => {
    const v = validatorOf({ type: 'object', propertyNames: { pattern: REDOS } });
    expect(v.validate({ ['a'.repeat(5000) + '!']: 1 }).ok).toBe(false);
    expect(v.validate({ aaa: 1 })).toEqual({ ok: true });
  });

  it('draft-07 schemas, and output schemas', () => {
    const cache = new SchemaValidatorCache();
    const tool = validateTool(
      {
        name: 't',
        inputSchema: {
          $schema: 'http://json-schema.org/draft-07/schema#',
          type: 'object',
          properties: { s: { pattern: REDOS } },
        },
        outputSchema: { type: 'object', additionalProperties: { pattern: REDOS } },
      },
      { server: 's', validatorCache: cache },
    );
    expect(cache.getValidator(tool.inputSchema.digest).validate({ s: hostile }).ok).toBe(false);
    const output = cache.getValidator(tool.outputSchema?.digest ?? '');
    expect(output.validate({ x: hostile }).ok).toBe(false);
    expect(output.validate({ x: 'aa' })).toEqual({ ok: true });
  });
});

describe('the regex budget', () => {
  // \p{L}{100} is linear on RE2 but costs far more per character than a small pattern: 50,000
  // letters would take a noticeable fraction of a second, so the validation is refused up front.
  const schema = { type: 'object', properties: { s: { type: 'string', pattern: '\\p{L}{100}' } } };

  it('refuses a validation whose pattern work would exceed the budget, with the reason', () => {
    const v = validatorOf(schema);
    const verdict = v.validate({ s: 'x'.repeat(50_000) });
    expect(verdict.ok).toBe(false);
    expect(!verdict.ok && verdict.errors).toContain(`regex budget of ${REGEX_BUDGET} steps`);
  });

  it('runs the same pattern within the budget, and gives the same verdict every time', () => {
    const v = validatorOf(schema);
    for (let i = 0; i < 3; i++) {
      expect(v.validate({ s: 'x'.repeat(5000) })).toEqual({ ok: true });
      expect(v.validate({ s: 'x'.repeat(99) }).ok).toBe(false);
      expect(v.validate({ s: 'x'.repeat(50_000) }).ok).toBe(false);
    }
  });

  it('charges every string of one validation against the same budget', () => {
    const v = validatorOf({ type: 'object', additionalProperties: schema.properties.s });
    const each = Object.fromEntries(
      Array.from({ length: 10 }, (_, i) => [`k${i}`, 'x'.repeat(5000)]),
    );
    expect(v.validate({ k: 'x'.repeat(5000) })).toEqual({ ok: true });
    expect(v.validate(each).ok).toBe(false);
  });
});

describe('patterns stepbind does not enforce', () => {
  const lookahead = '^(?=w)\\w+$';

  it('are published, recorded with their pointer and reason, and accept every string', () => {
    const cache = new SchemaValidatorCache();
    const inputSchema = {
      type: 'object',
      properties: { w: { type: 'string', pattern: lookahead }, n: { type: 'number' } },
    };
    expect(isPlainSchema(inputSchema, '2020-12', true, 0)).toBe(false);
    const tool = validateTool(
      {
        name: 't',
        inputSchema,
        outputSchema: { type: 'object', patternProperties: { '(a)\\1': { type: 'string' } } },
      },
      { server: 's', validatorCache: cache },
    );
    expect(tool.unenforcedPatterns).toEqual([
      {
        pointer: '/inputSchema/properties/w/pattern',
        pattern: lookahead,
        reason: 'lookahead has no RE2 equivalent',
      },
      {
        pointer: '/outputSchema/patternProperties/(a)\\1',
        pattern: '(a)\\1',
        reason: 'backreferences have no RE2 equivalent',
      },
    ]);
    const v = cache.getValidator(tool.inputSchema.digest);
    expect(v.validate({ w: 'not a w' })).toEqual({ ok: true });
    // The rest of the schema is still enforced.
    expect(v.validate({ w: 'x', n: 'one' }).ok).toBe(false);
  });

  it('an unenforced patternProperties key is treated as matching every property name', () => {
    const v = validatorOf({
      type: 'object',
      patternProperties: { '^(?!x)': { type: 'number' } },
      additionalProperties: false,
    });
    expect(v.validate({ x: 1, y: 2 })).toEqual({ ok: true });
    expect(v.validate({ x: 'one' }).ok).toBe(false);
  });

  it('are carried by snapshot descriptors and their JSON', () => {
    const snapshot = createCatalogSnapshot({
      identity: { name: 's', transportDigest: 'sha256:t' },
      audience: 'default',
      policyEpoch: 0,
      pages: [
        [
          { name: 'plain', inputSchema: { type: 'object' } },
          {
            name: 'odd',
            inputSchema: { type: 'object', properties: { w: { pattern: lookahead } } },
          },
        ],
      ],
      revisionProof: 'unversioned',
      discoveryStartedAt: 0,
    });
    const [plain, odd] = snapshot.tools;
    expect(plain?.unenforcedPatterns).toEqual([]);
    expect(JSON.parse(JSON.stringify(plain))).not.toHaveProperty('unenforcedPatterns');
    const record = {
      pointer: '/inputSchema/properties/w/pattern',
      pattern: lookahead,
      reason: 'lookahead has no RE2 equivalent',
    };
    expect(odd?.unenforcedPatterns).toEqual([record]);
    expect(Object.isFrozen(odd?.unenforcedPatterns)).toBe(true);
    expect(JSON.parse(JSON.stringify(odd))).toMatchObject({ unenforcedPatterns: [record] });
  });

  it('a pattern that is not valid ECMAScript still makes the schema invalid', () => {
    expect(() =>
      validateTool(
        { name: 't', inputSchema: { type: 'object', properties: { w: { pattern: '(' } } } },
        { server: 's' },
      ),
    ).toThrow(/invalid regular expression/);
  });
});
