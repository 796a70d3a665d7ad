/**
 * `npx tsx scripts/options-doc.ts`: writes `docs/options.md`, the options reference rendered from
 * the schemas in `packages/runtime/src/options-schema.ts` and formatted by Prettier (the test
 * `options.doc.test.ts` fails when it is stale). Needs a built tree (`pnpm build`).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { renderOptionsReference } from '@stepbind/runtime/internal';
import { format, resolveConfig } from 'prettier';

const target = join(import.meta.dirname, '..', 'docs', 'options.md');
const config = await resolveConfig(target);
writeFileSync(target, await format(renderOptionsReference(), { ...config, filepath: target }));
process.stdout.write(`wrote ${target}\n`);
