/**
 * DPoP (RFC 9449) where the server asks for it: the authorization server advertises
 * `dpop_signing_alg_values_supported`, or the resource challenges with the `DPoP` scheme. One key
 * pair per server authorizer, made on first need. The private key is stored with the login it is
 * bound to (`OAuthTokens.dpopKey`, a secret like the tokens), so another process sharing the
 * store adopts the key with the login and can use and refresh it. oauth4webapi makes the proofs
 * and keeps the servers' nonces; a `use_dpop_nonce` refusal is retried once by the caller.
 */
import { exportJWK, importJWK, type JWK } from 'jose';
import * as oauth from 'oauth4webapi';

/** The private members of a JWK (what the public key leaves out). */
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

/** The algorithms this client can sign proofs with, in order of preference. */
const ALGORITHMS = ['ES256', 'EdDSA', 'PS256', 'RS256'] as const;

/** The DPoP side of one server's authorization. */
export class DpopBinding {
  #handle: Promise<oauth.DPoPHandle> | undefined;
  /** The key pair's private JWK JSON (with `alg`), once made or adopted. */
  #key: Promise<string> | undefined;

  /**
   * The proof maker to use with `as`, or none when neither the server nor the resource asked for
   * DPoP (or no offered algorithm is one this client signs with).
   */
  async handleFor(
    as: oauth.AuthorizationServer,
    resourceAsked: boolean,
  ): Promise<oauth.DPoPHandle | undefined> {
    const offered = as.dpop_signing_alg_values_supported;
    if (this.#handle !== undefined) return await this.#handle;
    if (!resourceAsked && (offered === undefined || offered.length === 0)) return undefined;
    const alg = ALGORITHMS.find((a) => offered === undefined || offered.includes(a));
    if (alg === undefined) return undefined;
    // Both promises come from one attempt: a failure forgets both (the next need tries again), and
    // #key is always observed, so its rejection is never unhandled.
    const attempt = oauth.generateKeyPair(alg, { extractable: true }).then(async (k) => ({
      jwk: JSON.stringify({ ...(await exportJWK(k.privateKey)), alg }),
      handle: oauth.DPoP({}, k),
    }));
    const key = attempt.then((a) => a.jwk);
    const handle = attempt.then((a) => a.handle);
    this.#key = key;
    this.#handle = handle;
    attempt.catch(() => {
      if (this.#handle === handle) this.#handle = undefined;
      if (this.#key === key) this.#key = undefined;
    });
    key.catch(() => undefined);
    return await handle;
  }

  /** The private key (JWK JSON) tokens made now are bound to, when DPoP is in use. */
  async exportKey(): Promise<string | undefined> {
    return this.#key === undefined ? undefined : await this.#key;
  }

  /**
   * Uses the stored key `jwkJson` from now on (a login another process made or refreshed). A key
   * that does not import is refused with the error (the login is then not usable here).
   */
  async adopt(jwkJson: string): Promise<void> {
    if (this.#key !== undefined && (await this.#key) === jwkJson) return;
    const jwk = JSON.parse(jwkJson) as JWK & { alg: string };
    const publicJwk = Object.fromEntries(
      Object.entries(jwk).filter(([name]) => !PRIVATE_MEMBERS.includes(name)),
    ) as JWK;
    const [privateKey, publicKey] = await Promise.all([
      importJWK(jwk, jwk.alg),
      importJWK(publicJwk, jwk.alg, { extractable: true }),
    ]);
    if (privateKey instanceof Uint8Array || publicKey instanceof Uint8Array) {
      throw new TypeError('a DPoP key must be an asymmetric key');
    }
    this.#key = Promise.resolve(jwkJson);
    this.#handle = Promise.resolve(oauth.DPoP({}, { privateKey, publicKey }));
  }

  /** The proof maker, once one was made. */
  async current(): Promise<oauth.DPoPHandle | undefined> {
    return this.#handle === undefined ? undefined : await this.#handle;
  }
}

/** True when `error` (or the challenges of a response) ask for a DPoP nonce. */
export function isNonceRefusal(error: unknown): boolean {
  return oauth.isDPoPNonceError(error);
}
