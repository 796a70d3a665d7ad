/**
 * The era pin of a server entry (`protocol`, `discoverTimeoutMs`): how long the `server/discover`
 * probe may take, whether it is sent at all, and the errors a pin gives when the server is of the
 * other era.
 */
import { ErrorCode, RuntimeError, type StepbindError } from '@stepbind/binding/internal';
import { serverConfigPath, type CommonServerConfig } from '../config-values.js';
import type { EraMemory } from '../connection.js';
import type { ProbeOutcome } from './probe.js';

/** How a connection picks its era. */
export interface EraPlan {
  /** The probe budget in ms; `0`: no probe (the 2025 era only). */
  readonly probeMs: number;
  /** Only `auto` reads and writes the era memory: a pinned server is never remembered. */
  readonly remember: boolean;
  /** Pinned to 2026-07-28: no fallback. */
  readonly modernOnly: boolean;
}

/**
 * The plan of one start. `auto`: `discoverTimeoutMs` (or `probeTimeoutMs` when given), capped by
 * the start budget, and no probe for a server remembered as legacy; `2026-07-28`: the whole start
 * budget, whatever is remembered; `2025-11-25`: no probe.
 */
export function eraPlan(
  config: Pick<CommonServerConfig, 'protocol' | 'discoverTimeoutMs'>,
  startMs: number,
  options: { readonly probeTimeoutMs?: number; readonly eras?: EraMemory; readonly key: string },
): EraPlan {
  const pin = config.protocol;
  if (pin === '2026-07-28') return { probeMs: startMs, remember: false, modernOnly: true };
  if (pin === '2025-11-25') return { probeMs: 0, remember: false, modernOnly: false };
  const budget = Math.min(options.probeTimeoutMs ?? config.discoverTimeoutMs, startMs);
  return {
    probeMs: options.eras?.get(options.key) === 'legacy' ? 0 : budget,
    remember: true,
    modernOnly: false,
  };
}

/**
 * `SERVER_START_FAILED` for a server pinned to 2026-07-28 that did not answer `server/discover` as
 * one; `detail.configPath` names the `protocol` key and `detail.answer` what the server did.
 */
export function notModernError(
  server: string,
  outcome: Extract<ProbeOutcome, { era: 'legacy' }>,
  budgetMs: number,
): StepbindError {
  const answered =
    outcome.answer === 'timeout'
      ? `did not answer server/discover within ${budgetMs} ms (its startupTimeoutMs)`
      : outcome.answer === 'error'
        ? `answered server/discover with error ${outcome.code ?? 'without a code'}${outcome.supported === undefined ? '' : ` (it supports ${outcome.supported.slice(0, 8).join(', ') || 'no version it named'})`}`
        : 'answered server/discover with a result that is not a 2026-07-28 discover result';
  const configPath = serverConfigPath(server, 'protocol');
  return new RuntimeError(
    ErrorCode.SERVER_START_FAILED,
    `Server "${server}" is pinned to protocol 2026-07-28 but ${answered}: it is not a 2026-07-28 server${outcome.answer === 'timeout' ? ' (or it did not start in time)' : ''}. Set ${configPath} to "auto" (probe, then fall back to initialize) or "2025-11-25"${outcome.answer === 'timeout' ? ', or raise its startupTimeoutMs if it is a modern server that starts slowly' : ''}.`,
    {
      detail: {
        server,
        configPath,
        answer: outcome.answer,
        ...(outcome.code === undefined ? {} : { rpcCode: outcome.code }),
      },
    },
  );
}

/** What a failed `initialize` after a timed-out probe adds to its advice. */
export function slowProbeHint(server: string, budgetMs: number): string {
  return `server/discover was not answered within ${budgetMs} ms, so initialize was tried: if this is a 2026-07-28 server that starts slowly, raise ${serverConfigPath(server, 'discoverTimeoutMs')} or set ${serverConfigPath(server, 'protocol')} to "2026-07-28".`;
}
