import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  startAuthorizationServer,
  startProtectedMcpServer,
  type AuthorizationServer,
  type ProtectedMcpServer,
} from '@stepbind/testkit';
import { decodeJwt, generateKeyPair, importPKCS8 } from 'jose';
import * as oauth from 'oauth4webapi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/** The harness runs on plain HTTP loopback, which oauth4webapi refuses unless told. */
const insecure = { [oauth.allowInsecureRequests]: true } as const;
const REDIRECT = 'http://127.0.0.1:33418/callback';
const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: {
    protocolVersion: '2025-06-18',
    capabilities: {},
    clientInfo: { name: 'oauth-test', version: '0.0.0' },
  },
};

let as: AuthorizationServer;
let mcp: ProtectedMcpServer;
let metadata: oauth.AuthorizationServer;

beforeAll(async () => {
  as = await startAuthorizationServer();
  mcp = await startProtectedMcpServer({ authorizationServer: as });
  const issuer = new URL(as.issuer);
  metadata = await oauth.processDiscoveryResponse(
    issuer,
    await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }),
  );
});
afterAll(async () => {
  await mcp.close();
  await as.close();
});

interface CodeLogin {
  readonly tokens: oauth.TokenEndpointResponse;
  readonly callback: URL;
}

/** The authorization code flow with PKCE, the browser played by `as.interact`. */
async function codeLogin(scope = 'mcp:read'): Promise<CodeLogin> {
  const client: oauth.Client = { client_id: as.clients.public.clientId };
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const url = new URL(metadata.authorization_endpoint ?? '');
  url.search = new URLSearchParams({
    client_id: client.client_id,
    response_type: 'code',
    redirect_uri: REDIRECT,
    scope,
    state,
    code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    resource: mcp.resource,
  }).toString();
  const callback = new URL(await as.interact(url));
  const params = oauth.validateAuthResponse(metadata, client, callback, state);
  const response = await oauth.authorizationCodeGrantRequest(
    metadata,
    client,
    oauth.None(),
    params,
    REDIRECT,
    verifier,
    { additionalParameters: { resource: mcp.resource }, ...insecure },
  );
  return {
    tokens: await oauth.processAuthorizationCodeResponse(metadata, client, response),
    callback,
  };
}

async function refresh(refreshToken: string): Promise<oauth.TokenEndpointResponse> {
  const client: oauth.Client = { client_id: as.clients.public.clientId };
  const response = await oauth.refreshTokenGrantRequest(
    metadata,
    client,
    oauth.None(),
    refreshToken,
    { additionalParameters: { resource: mcp.resource }, ...insecure },
  );
  return oauth.processRefreshTokenResponse(metadata, client, response);
}

async function callTool(token: string, name: string): Promise<string> {
  const client = new Client({ name: 'oauth-test', version: '0.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(mcp.url), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  try {
    const result = await client.callTool({ name, arguments: {} });
    const [first] = result.content as { type: string; text: string }[];
    return first?.text ?? '';
  } finally {
    await client.close();
  }
}

function post(token: string | undefined, body: unknown): Promise<Response> {
  return fetch(mcp.url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
    },
    body: JSON.stringify(body),
  });
}

function refusal(error: unknown): string | undefined {
  return error instanceof oauth.ResponseBodyError ? error.error : undefined;
}

describe('the testkit authorization server', () => {
  it('publishes RFC 8414 and OIDC metadata with PKCE S256 and the RFC 9207 iss parameter', async () => {
    const oauthDocument = (await (
      await fetch(`${as.issuer}/.well-known/oauth-authorization-server`)
    ).json()) as Record<string, unknown>;
    const oidcDocument = (await (
      await fetch(`${as.issuer}/.well-known/openid-configuration`)
    ).json()) as Record<string, unknown>;
    expect(oauthDocument).toEqual(oidcDocument);
    expect(metadata.issuer).toBe(as.issuer);
    expect(metadata.code_challenge_methods_supported).toEqual(['S256']);
    expect(metadata.authorization_response_iss_parameter_supported).toBe(true);
    expect(metadata.registration_endpoint).toBeDefined();
    expect(metadata.revocation_endpoint).toBeDefined();
    expect(metadata.introspection_endpoint).toBeDefined();
    expect(metadata.dpop_signing_alg_values_supported).toContain('ES256');
    expect(metadata.grant_types_supported).toEqual(
      expect.arrayContaining(['authorization_code', 'refresh_token', 'client_credentials']),
    );
  });

  it('completes the code flow with PKCE through interact, with iss on the callback', async () => {
    const before = as.counts.authorizations;
    const { tokens, callback } = await codeLogin();
    expect(callback.searchParams.get('iss')).toBe(as.issuer);
    expect(tokens.refresh_token).toBeDefined();
    const claims = decodeJwt(tokens.access_token);
    expect(claims).toMatchObject({ iss: as.issuer, aud: mcp.resource, sub: 'alice' });
    expect(claims['scope']).toBe('mcp:read');
    expect(as.counts.authorizations).toBe(before + 1);
    expect(JSON.parse(await callTool(tokens.access_token, 'whoami'))).toMatchObject({
      sub: 'alice',
      client_id: as.clients.public.clientId,
    });
  });

  it('refuses an authorization request without a PKCE challenge', async () => {
    const url = new URL(metadata.authorization_endpoint ?? '');
    url.search = new URLSearchParams({
      client_id: as.clients.public.clientId,
      response_type: 'code',
      redirect_uri: REDIRECT,
      scope: 'mcp:read',
      state: 's',
      resource: mcp.resource,
    }).toString();
    const callback = new URL(await as.interact(url));
    expect(callback.searchParams.get('error')).toBe('invalid_request');
    expect(callback.searchParams.get('error_description')).toMatch(/PKCE/);
  });

  it('refuses a resource it does not know (invalid_target)', async () => {
    const response = await oauth.clientCredentialsGrantRequest(
      metadata,
      { client_id: as.clients.secretBasic.clientId },
      oauth.ClientSecretBasic(as.clients.secretBasic.clientSecret),
      { resource: 'http://127.0.0.1:1/elsewhere', scope: 'mcp:read' },
      insecure,
    );
    const error = await oauth
      .processClientCredentialsResponse(
        metadata,
        { client_id: as.clients.secretBasic.clientId },
        response,
      )
      .catch((e: unknown) => e);
    expect(refusal(error)).toBe('invalid_target');
  });

  it.each([
    ['client_secret_basic', 'secretBasic'],
    ['client_secret_post', 'secretPost'],
  ] as const)('issues client credentials tokens to a %s client', async (_method, which) => {
    const { clientId, clientSecret } = as.clients[which];
    const auth =
      which === 'secretBasic'
        ? oauth.ClientSecretBasic(clientSecret)
        : oauth.ClientSecretPost(clientSecret);
    const client: oauth.Client = { client_id: clientId };
    const response = await oauth.clientCredentialsGrantRequest(
      metadata,
      client,
      auth,
      { resource: mcp.resource, scope: 'mcp:read' },
      insecure,
    );
    const tokens = await oauth.processClientCredentialsResponse(metadata, client, response);
    expect(decodeJwt(tokens.access_token)).toMatchObject({
      aud: mcp.resource,
      client_id: clientId,
    });
    expect(JSON.parse(await callTool(tokens.access_token, 'whoami'))).toMatchObject({
      client_id: clientId,
    });
  });

  it('issues client credentials tokens to a private_key_jwt client', async () => {
    const { clientId, privateKey, alg } = as.clients.privateKeyJwt;
    const client: oauth.Client = { client_id: clientId };
    const response = await oauth.clientCredentialsGrantRequest(
      metadata,
      client,
      oauth.PrivateKeyJwt(await importPKCS8(privateKey, alg)),
      { resource: mcp.resource, scope: 'mcp:read' },
      insecure,
    );
    const tokens = await oauth.processClientCredentialsResponse(metadata, client, response);
    expect(decodeJwt(tokens.access_token)).toMatchObject({ client_id: clientId });
  });

  it('rotates refresh tokens and refuses a used one (reuse detection)', async () => {
    const { tokens } = await codeLogin();
    const first = tokens.refresh_token ?? '';
    const before = as.counts.refreshes;
    const rotated = await refresh(first);
    expect(rotated.refresh_token).toBeDefined();
    expect(rotated.refresh_token).not.toBe(first);
    expect(as.counts.refreshes).toBe(before + 1);
    expect(refusal(await refresh(first).catch((e: unknown) => e))).toBe('invalid_grant');
    // Reuse revoked the whole grant, the rotated token with it.
    expect(refusal(await refresh(rotated.refresh_token ?? '').catch((e: unknown) => e))).toBe(
      'invalid_grant',
    );
    expect(as.counts.refreshes).toBe(before + 1);
    expect(as.counts.refusals['refresh_token']).toBeGreaterThanOrEqual(2);
  });

  it('refuses a refresh token revoked by revokeRefreshTokens', async () => {
    const { tokens } = await codeLogin();
    expect(as.revokeRefreshTokens()).toBeGreaterThanOrEqual(1);
    expect(refusal(await refresh(tokens.refresh_token ?? '').catch((e: unknown) => e))).toBe(
      'invalid_grant',
    );
  });

  it('registers clients dynamically (RFC 7591)', async () => {
    const before = as.counts.registrations;
    const response = await oauth.dynamicClientRegistrationRequest(
      metadata,
      {
        redirect_uris: [REDIRECT],
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        application_type: 'native',
      },
      insecure,
    );
    const registered = await oauth.processDynamicClientRegistrationResponse(response);
    expect(registered.client_id).toEqual(expect.any(String));
    expect(as.counts.registrations).toBe(before + 1);
  });

  it('offers no DPoP when started with dpop: false', async () => {
    await using plain = await startAuthorizationServer({ dpop: false });
    const document = (await (
      await fetch(`${plain.issuer}/.well-known/oauth-authorization-server`)
    ).json()) as Record<string, unknown>;
    expect(document['dpop_signing_alg_values_supported']).toBeUndefined();
    expect(document['issuer']).toBe(plain.issuer);
  });

  it('leaves nothing listening after close, with a protected server in front', async () => {
    const own = await startAuthorizationServer();
    const front = await startProtectedMcpServer({ authorizationServer: own });
    expect((await fetch(front.metadataUrl)).status).toBe(200);
    await front.close();
    await own.close();
    await expect(fetch(`${own.issuer}/jwks`)).rejects.toThrow();
    await expect(fetch(front.metadataUrl)).rejects.toThrow();
    // Idempotent, and a closed server does not start again.
    await own.close();
    await front.close();
    await expect(own.start()).rejects.toThrow(/closed/);
  });

  it('refuses connections while stopped and serves again after start', async () => {
    await as.stop();
    await expect(fetch(`${as.issuer}/jwks`)).rejects.toThrow();
    await as.start();
    expect((await fetch(`${as.issuer}/jwks`)).status).toBe(200);
  });
});

describe('the testkit protected MCP server', () => {
  it('publishes RFC 9728 metadata at the path-inserted well-known URL', async () => {
    expect(mcp.metadataUrl).toBe(
      `${new URL(mcp.url).origin}/.well-known/oauth-protected-resource/mcp`,
    );
    expect(await (await fetch(mcp.metadataUrl)).json()).toMatchObject({
      resource: mcp.resource,
      authorization_servers: [as.issuer],
      scopes_supported: ['mcp:read', 'mcp:write', 'mcp:admin'],
    });
  });

  it('answers a request without a token 401 with resource_metadata and scope', async () => {
    const response = await post(undefined, INITIALIZE);
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe(
      `Bearer scope="mcp:read", resource_metadata="${mcp.metadataUrl}"`,
    );
  });

  it('answers an expired token 401 invalid_token without opening a session', async () => {
    const { tokens } = await codeLogin();
    expect((await post(tokens.access_token, INITIALIZE)).status).toBe(200);
    const sessions = mcp.counts.initializes;
    mcp.expireTokens();
    const response = await post(tokens.access_token, INITIALIZE);
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toMatch(/^Bearer error="invalid_token"/);
    expect(mcp.counts.initializes).toBe(sessions);
  });

  it('answers a token for another audience 401 invalid_token', async () => {
    const other = await startProtectedMcpServer({ authorizationServer: as });
    try {
      const { tokens } = await codeLogin();
      const response = await fetch(other.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          authorization: `Bearer ${tokens.access_token}`,
        },
        body: JSON.stringify(INITIALIZE),
      });
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toMatch(/aud/);
    } finally {
      await other.close();
    }
  });

  it('answers a tool call needing a scope the token lacks 403 insufficient_scope', async () => {
    const { tokens } = await codeLogin('mcp:read');
    const response = await post(tokens.access_token, {
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: { name: 'admin', arguments: {} },
    });
    expect(response.status).toBe(403);
    expect(response.headers.get('www-authenticate')).toMatch(
      /^Bearer error="insufficient_scope", scope="mcp:read mcp:admin"/,
    );
    const wider = await codeLogin('mcp:read mcp:admin');
    expect(await callTool(wider.tokens.access_token, 'admin')).toBe('ok');
  });

  it('accepts a DPoP-bound token only with a proof for the request', async () => {
    const dpopServer = await startProtectedMcpServer({
      authorizationServer: as,
      dpopRequired: true,
    });
    try {
      const client: oauth.Client = { client_id: as.clients.secretBasic.clientId };
      const DPoP = oauth.DPoP(client, await generateKeyPair('ES256'));
      const grant = (): Promise<Response> =>
        oauth.clientCredentialsGrantRequest(
          metadata,
          client,
          oauth.ClientSecretBasic(as.clients.secretBasic.clientSecret),
          { resource: dpopServer.resource, scope: 'mcp:read' },
          { DPoP, ...insecure },
        );
      const tokens = await oauth.processClientCredentialsResponse(metadata, client, await grant());
      expect(tokens.token_type).toBe('dpop');
      const headers = new Headers({
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      });
      const body = JSON.stringify(INITIALIZE);
      const bound = await oauth.protectedResourceRequest(
        tokens.access_token,
        'POST',
        new URL(dpopServer.url),
        headers,
        body,
        { DPoP, ...insecure },
      );
      expect(bound.status).toBe(200);
      const asBearer = await fetch(dpopServer.url, {
        method: 'POST',
        headers: { ...Object.fromEntries(headers), authorization: `Bearer ${tokens.access_token}` },
        body,
      });
      expect(asBearer.status).toBe(401);
      expect(asBearer.headers.get('www-authenticate')).toMatch(/^DPoP algs=/);
      expect(await (await fetch(dpopServer.metadataUrl)).json()).toMatchObject({
        dpop_bound_access_tokens_required: true,
      });
    } finally {
      await dpopServer.close();
    }
  });
});
