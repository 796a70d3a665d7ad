/**
 * The legacy HTTP+SSE transport (protocol 2024-11-05) for the scripted HTTP server
 * (`server/http.ts` with `transport: "sse"`): a GET on `/mcp` opens an event stream served by the
 * SDK's `SSEServerTransport`, whose first event, `endpoint`, names `/messages?sessionId=…`; the
 * client POSTs its messages there. Each stream is one session with its own scripted server. A POST
 * on `/mcp` is refused (`postStatus`) as an SSE-only server refuses Streamable HTTP.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { isJSONRPCNotification, isJSONRPCRequest } from '@modelcontextprotocol/sdk/types.js';
import type { HttpServerEvent, ScriptedServerOptions } from '../types.js';
import { createScriptedServer, type ScriptedServer } from './scripted.js';

/** The path the `endpoint` event names; the session is its `sessionId` query parameter. */
const MESSAGES_PATH = '/messages';

/** One HTTP+SSE session: its stream's transport and its scripted server. */
interface SseSession {
  readonly transport: SSEServerTransport;
  readonly scripted: ScriptedServer;
}

/** The HTTP+SSE side of the scripted HTTP server (see the module comment). */
export interface LegacySseHandler {
  /** Serves one request; `false` when its path is neither `/mcp` nor the messages path. */
  handle(req: IncomingMessage, res: ServerResponse): Promise<boolean>;
  /** Ends every stream (the client sees its session end), returns how many there were. */
  endStreams(): Promise<number>;
  /** Ends every stream and scripted server. */
  close(): Promise<void>;
}

/**
 * Builds the HTTP+SSE handler of the scripted HTTP server.
 *
 * @param postStatus the answer to a POST on `/mcp` (a Streamable HTTP attempt). @default 405
 */
export function createLegacySseHandler(
  options: ScriptedServerOptions,
  emit: (event: HttpServerEvent) => void,
  postStatus: 400 | 404 | 405 | 500 = 405,
): LegacySseHandler {
  const sessions = new Map<string, SseSession>();

  const open = async (res: ServerResponse): Promise<void> => {
    const scripted = createScriptedServer(options, { exit: (code) => process.exit(code) });
    const transport = new SSEServerTransport(MESSAGES_PATH, res);
    const session = transport.sessionId;
    sessions.set(session, { transport, scripted });
    res.once('close', () => {
      sessions.delete(session);
      void scripted.close();
    });
    await scripted.server.connect(transport);
    const dispatch = transport.onmessage;
    transport.onmessage = (message, extra) => {
      if (isJSONRPCRequest(message) || isJSONRPCNotification(message)) {
        const name = message.params?.['name'];
        emit({
          event: 'message',
          session,
          method: message.method,
          ...(message.method === 'tools/call' && typeof name === 'string' ? { tool: name } : {}),
        });
      }
      dispatch?.(message, extra);
    };
    emit({ event: 'session', session });
  };

  const refuse = (res: ServerResponse, status: number, text: string): void => {
    res.writeHead(status, { 'content-type': 'text/plain' }).end(text);
  };

  return {
    async handle(req, res) {
      const url = new URL(req.url ?? '/', 'http://localhost');
      if (url.pathname === '/mcp') {
        if (req.method === 'GET') await open(res);
        else {
          const status = req.method === 'POST' ? postStatus : 405;
          emit({ event: 'refused', method: req.method ?? '', status });
          refuse(res, status, 'Method Not Allowed');
        }
        return true;
      }
      if (url.pathname !== MESSAGES_PATH) return false;
      const id = url.searchParams.get('sessionId') ?? '';
      const session = sessions.get(id);
      if (req.method !== 'POST') refuse(res, 405, 'Method Not Allowed');
      else if (session === undefined) {
        emit({ event: 'unknown-session', session: id });
        refuse(res, 404, 'Session not found');
      } else await session.transport.handlePostMessage(req, res);
      return true;
    },
    async endStreams() {
      const all = [...sessions.values()];
      sessions.clear();
      await Promise.allSettled(all.map((s) => s.transport.close()));
      return all.length;
    },
    async close() {
      const all = [...sessions.values()];
      sessions.clear();
      await Promise.allSettled(all.flatMap((s) => [s.transport.close(), s.scripted.close()]));
    },
  };
}
