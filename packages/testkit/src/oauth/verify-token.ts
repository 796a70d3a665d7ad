/**
 * How the protected MCP server checks a request's access token: a JWT signed by the authorization
 * server (jose against its JWKS), for this resource, unexpired, and, when the token is bound to a
 * DPoP key (`cnf.jkt`), presented with a valid DPoP proof for this request (RFC 9449).
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import {
  calculateJwkThumbprint,
  createLocalJWKSet,
  EmbeddedJWK,
  jwtVerify,
  type JSONWebKeySet,
  type JWTPayload,
} from 'jose';

/** The claims of an accepted access token. */
export interface AcceptedToken {
  readonly token: string;
  readonly claims: JWTPayload & {
    readonly scope?: string;
    readonly client_id?: string;
    readonly cnf?: { readonly jkt?: string };
  };
  readonly scopes: readonly string[];
  readonly dpop: boolean;
}

/** Why a token was not accepted: `missing` gets a bare challenge, `invalid` an `invalid_token`. */
export type TokenRejection =
  { readonly kind: 'missing' } | { readonly kind: 'invalid'; readonly description: string };

/** Checks tokens for one resource. */
export interface TokenVerifier {
  verify(req: IncomingMessage, url: string): Promise<AcceptedToken | TokenRejection>;
}

/** A DPoP proof is fresh for this long either side of now (RFC 9449 §11.1 leaves it to us). */
const PROOF_WINDOW_SECONDS = 300;

/** A verifier for tokens `issuer` issued for `resource`, signed by a key of `jwks`. */
export function tokenVerifier(options: {
  readonly issuer: string;
  readonly resource: string;
  readonly jwks: JSONWebKeySet;
  /** Refuse tokens that are not DPoP-bound. */
  readonly dpopRequired: boolean;
  /** A token whose `jti` is here counts as expired. */
  readonly expired: ReadonlySet<string>;
}): TokenVerifier {
  const keys = createLocalJWKSet(options.jwks);
  const proofs = new Set<string>();
  return {
    async verify(req, url) {
      const header = req.headers.authorization;
      const match = header === undefined ? null : /^(Bearer|DPoP) +(\S+)$/i.exec(header);
      if (match === null) return { kind: 'missing' };
      const scheme = (match[1] ?? '').toLowerCase();
      const token = match[2] ?? '';
      let claims: AcceptedToken['claims'];
      try {
        ({ payload: claims } = await jwtVerify<AcceptedToken['claims']>(token, keys, {
          issuer: options.issuer,
          audience: options.resource,
          typ: 'at+jwt',
        }));
      } catch (error) {
        return { kind: 'invalid', description: (error as Error).message };
      }
      if (claims.jti !== undefined && options.expired.has(claims.jti)) {
        return { kind: 'invalid', description: 'the access token expired' };
      }
      const jkt = claims.cnf?.jkt;
      if (jkt === undefined) {
        if (options.dpopRequired)
          return { kind: 'invalid', description: 'DPoP-bound token required' };
        if (scheme !== 'bearer') return { kind: 'invalid', description: 'not a DPoP-bound token' };
      } else {
        if (scheme !== 'dpop') return { kind: 'invalid', description: 'a DPoP-bound token' };
        const problem = await checkProof(req, url, token, jkt, proofs);
        if (problem !== undefined) return { kind: 'invalid', description: problem };
      }
      const scopes = (claims.scope ?? '').split(' ').filter((s) => s !== '');
      return { token, claims, scopes, dpop: jkt !== undefined };
    },
  };
}

/** What is wrong with the request's DPoP proof, or nothing. */
async function checkProof(
  req: IncomingMessage,
  url: string,
  token: string,
  jkt: string,
  seen: Set<string>,
): Promise<string | undefined> {
  const proof = req.headers['dpop'];
  if (typeof proof !== 'string') return 'no DPoP proof';
  try {
    const { payload, protectedHeader } = await jwtVerify(proof, EmbeddedJWK, {
      typ: 'dpop+jwt',
      maxTokenAge: PROOF_WINDOW_SECONDS,
    });
    if (protectedHeader.jwk === undefined) return 'DPoP proof without jwk';
    if ((await calculateJwkThumbprint(protectedHeader.jwk)) !== jkt) return 'DPoP key mismatch';
    if (payload['htm'] !== req.method) return 'DPoP htm mismatch';
    if (payload['htu'] !== url) return 'DPoP htu mismatch';
    const ath = createHash('sha256').update(token).digest('base64url');
    if (payload['ath'] !== ath) return 'DPoP ath mismatch';
    if (typeof payload.jti !== 'string' || seen.has(payload.jti)) return 'DPoP proof replayed';
    seen.add(payload.jti);
    return undefined;
  } catch (error) {
    return `DPoP proof invalid: ${(error as Error).message}`;
  }
}
