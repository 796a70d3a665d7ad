import { isStepbindError, type McpBinding } from '@stepbind/binding/internal';
import type { RuntimeOracle } from '../oracle.js';
import { agree, trackSessions, type ModelCommand, type ModelSystem } from '../system.js';

/**
 * `captureBinding`: starts a sampling step. Applicable in every state: a capture that must fail
 * (a required server cannot start) is compared too.
 */
export class Capture implements ModelCommand {
  check(): boolean {
    return true;
  }
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    const expected = model.capture();
    let binding: McpBinding;
    try {
      binding = await real.runtime.captureBinding();
    } catch (error) {
      if (!isStepbindError(error)) throw error;
      // Any other refusal is a disagreement too (the oracle predicts only this one).
      agree(
        real,
        'capture',
        error.code === 'REQUIRED_SERVERS_FAILED' ? 'FAILED' : error.code,
        expected,
      );
      return;
    }
    if (expected === 'FAILED') {
      binding.release();
      agree(real, 'capture', 'OK', expected);
      return;
    }
    trackSessions(model, real);
    const actual = model.servers.map((name) => {
      const status = binding.servers.find((s) => s.name === name);
      return {
        name,
        tools: binding.tools
          .filter((t) => t.name.startsWith(`${name}__`))
          .map((t) => t.name.slice(name.length + 2)),
        generation: status?.bound === true ? status.generation : -1,
        revision: status?.bound === true ? status.revision : -1,
        provisional: status?.bound === true && status.provisional,
      };
    });
    agree(real, 'captured binding', actual, expected);
    real.bindings.push(binding);
    real.boundInstances.push(new Map(real.current));
  }
  toString(): string {
    return 'captureBinding';
  }
}
