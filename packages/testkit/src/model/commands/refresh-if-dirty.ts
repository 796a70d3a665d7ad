import { isStepbindError } from '@stepbind/binding/internal';
import type { RuntimeOracle } from '../oracle.js';
import { agree, trackSessions, type ModelCommand, type ModelSystem } from '../system.js';

/**
 * `refreshIfDirty`: rebuilds the connection set if the flag is set. Applicable in every state: a
 * clean runtime must answer "nothing to do", which is compared too.
 */
export class RefreshIfDirty implements ModelCommand {
  check(): boolean {
    return true;
  }
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    const expected = model.refreshIfDirty();
    let actual: string;
    try {
      actual = (await real.runtime.refreshIfDirty()) ? 'PUBLISHED' : 'NOTHING';
    } catch (error) {
      if (!isStepbindError(error, 'REQUIRED_SERVERS_FAILED')) throw error;
      actual = 'FAILED';
    }
    agree(real, 'refreshIfDirty', actual, expected);
    agree(real, 'dirty after refresh', real.runtime.dirty, model.dirty);
    trackSessions(model, real);
  }
  toString(): string {
    return 'refreshIfDirty';
  }
}
