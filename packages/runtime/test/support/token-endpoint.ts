/**
 * A small OAuth token endpoint for the refresh tests, on 127.0.0.1: `refresh_token` grants that
 * ROTATE the refresh token, and treat the reuse of a rotated-away one as theft, as careful
 * authorization servers do (OAuth 2.1 §4.3.1): the whole token family is revoked, every later
 * grant of it fails `invalid_grant`, and its access tokens stop being accepted. `/introspect`
 * (RFC 7662) says whether an access token is the family's current one. It counts every grant.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';

/** One login's token family as the endpoint sees it. */
export interface TokenFamily {
  readonly id: string;
  accessToken: string;
  refreshToken: string;
  /** Successful refresh grants. */
  grants: number;
  /** Grants that presented a rotated-away refresh token (each revoked the family). */
  reuses: number;
  revoked: boolean;
}

/** The running endpoint. */
export interface TokenEndpoint {
  /** `http://127.0.0.1:PORT` (`/token`, `/introspect`). */
  readonly url: string;
  /** Starts a family (what a login would have issued). */
  issue(): TokenFamily;
  /** Delay of every grant's answer (widens the window in which processes race). */
  setLatency(ms: number): void;
  close(): Promise<void>;
}

const token = (prefix: string): string => `${prefix}-${randomBytes(12).toString('hex')}`;

/** Starts the endpoint on a free loopback port. */
export async function startTokenEndpoint(): Promise<TokenEndpoint> {
  const families = new Map<string, TokenFamily>();
  /** Every refresh token ever issued, current or rotated away, to its family. */
  const byRefresh = new Map<string, TokenFamily>();
  let latency = 0;
  let next = 0;

  const grant = (form: URLSearchParams): [number, Record<string, unknown>] => {
    if (form.get('grant_type') !== 'refresh_token')
      return [400, { error: 'unsupported_grant_type' }];
    const family = byRefresh.get(form.get('refresh_token') ?? '');
    if (family === undefined || family.revoked) return [400, { error: 'invalid_grant' }];
    if (form.get('refresh_token') !== family.refreshToken) {
      family.reuses++;
      family.revoked = true;
      return [400, { error: 'invalid_grant', error_description: 'refresh token reused' }];
    }
    family.grants++;
    family.accessToken = token(`at-${family.id}`);
    family.refreshToken = token(`rt-${family.id}`);
    byRefresh.set(family.refreshToken, family);
    return [
      200,
      {
        access_token: family.accessToken,
        token_type: 'Bearer',
        refresh_token: family.refreshToken,
        expires_in: 1,
      },
    ];
  };

  const introspect = (form: URLSearchParams): Record<string, unknown> => {
    const presented = form.get('token') ?? '';
    for (const family of families.values()) {
      if (family.accessToken === presented) return { active: !family.revoked };
    }
    return { active: false };
  };

  const handle = (req: IncomingMessage, res: ServerResponse, body: string): void => {
    const form = new URLSearchParams(body);
    const [status, answer] =
      req.url === '/token'
        ? grant(form)
        : req.url === '/introspect'
          ? [200, introspect(form)]
          : [404, {}];
    const send = (): void => {
      res.writeHead(status, { 'content-type': 'application/json', connection: 'close' });
      res.end(JSON.stringify(answer));
    };
    // The grant is decided (and counted) on arrival; only its answer is late.
    if (latency > 0 && req.url === '/token') setTimeout(send, latency);
    else send();
  };

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => handle(req, res, Buffer.concat(chunks).toString('utf8')));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    issue: () => {
      const id = `f${++next}`;
      const family: TokenFamily = {
        id,
        accessToken: token(`at-${id}`),
        refreshToken: token(`rt-${id}`),
        grants: 0,
        reuses: 0,
        revoked: false,
      };
      families.set(id, family);
      byRefresh.set(family.refreshToken, family);
      return family;
    },
    setLatency: (ms) => {
      latency = ms;
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
