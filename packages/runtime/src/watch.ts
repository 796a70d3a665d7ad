import type { RuntimeCore } from './core.js';
import { onListChanged } from './hard-refresh.js';
import { startRecovery } from './reconnect.js';
import type { ServerSession } from './session.js';

/**
 * Subscribes the runtime to one session's connection: `list_changed` (debounced hard refresh),
 * errors, stderr and logs (as events), and its close (dirty for a refresh, or the reconnects of a
 * lost HTTP session). The subscriptions go with the connection (`session.unsubscribe`).
 */
export function watchSession(core: RuntimeCore, session: ServerSession): void {
  const connection = session.connection;
  const { emit } = core;
  session.unsubscribe.push(
    connection.onListChanged(onListChanged(core, session)),
    connection.onError((error) => {
      emit({ type: 'connection-error', server: session.name, error });
    }),
    connection.onStderr((line) => {
      emit({ type: 'server-stderr', server: session.name, line });
    }),
    connection.onLog((message) => {
      emit({ type: 'server-log', server: session.name, ...message });
    }),
    connection.onClose(() => {
      const expected = core.closed || session.closing !== undefined;
      emit({ type: 'connection-closed', server: session.name, expected });
      if (expected) return;
      core.invalidateViews();
      const loss = connection.lost;
      if (loss === undefined) {
        core.markDirty(`connection-closed:${session.name}`);
        return;
      }
      emit({
        type: 'session-lost',
        server: session.name,
        reason: loss.reason,
        ...(loss.httpStatus === undefined ? {} : { httpStatus: loss.httpStatus }),
        message: loss.message,
      });
      // The next capture reconnects at once; meanwhile the background tries with backoff.
      core.markDirty(`session-lost:${session.name}`);
      startRecovery(core, session);
    }),
  );
}
