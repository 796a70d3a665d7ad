// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const NO_POLLING =
  'Tests do not poll: await the event that says it happened (test/support/events.ts nextEvent, ' +
  "a scripted server's waitFor / test/support/fleet.ts received, test/support/audit.ts auditEntry) " +
  'or drive time with a fake RuntimeClock (test/support/clock.ts FakeClock, whenArmed).';

export default tseslint.config(
  { ignores: ['**/dist/**', '**/node_modules/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        project: ['./tsconfig.check.json'],
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    // Vitest's asymmetric matchers (expect.any, expect.stringContaining) are typed as any.
    files: ['**/test/**/*.ts', 'examples/**/*.test.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      // House rule: a test waits for what happened, it never polls or sleeps.
      'no-restricted-syntax': [
        'error',
        {
          selector: "NewExpression[callee.name='Promise'] CallExpression[callee.name='setTimeout']",
          message: `A sleep is no synchronisation. ${NO_POLLING}`,
        },
      ],
      'no-restricted-imports': [
        'error',
        {
          paths: [
            {
              name: 'node:timers/promises',
              message: `A sleep is no synchronisation. ${NO_POLLING}`,
            },
            { name: 'timers/promises', message: `A sleep is no synchronisation. ${NO_POLLING}` },
          ],
        },
      ],
      'no-restricted-properties': [
        'error',
        {
          object: 'expect',
          property: 'poll',
          message: NO_POLLING,
        },
        {
          object: 'vi',
          property: 'waitFor',
          message: NO_POLLING,
        },
        {
          object: 'vi',
          property: 'waitUntil',
          message: NO_POLLING,
        },
      ],
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
  },
);
