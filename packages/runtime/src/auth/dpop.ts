/**
 * DPoP (RFC 9449) where the server asks for it: the authorization server advertises
 * `dpop_signing_alg_values_supported`, or the resource challenges with the `DPoP` scheme. One key
 * pair per server authorizer, made on first need and never exported (so a DPoP-bound token is
 * usable only by the process that holds its key). oauth4webapi makes the proofs and keeps the
 * servers' nonces; a `use_dpop_nonce` refusal is retried once by the caller.
 */
import * as oauth from 'oauth4webapi';

/** The algorithms this client can sign proofs with, in order of preference. */
const ALGORITHMS = ['ES256', 'EdDSA', 'PS256', 'RS256'] as const;

/** The DPoP side of one server's authorization. */
export class DpopBinding {
  #handle: Promise<oauth.DPoPHandle> | undefined;

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
    this.#handle = oauth.generateKeyPair(alg).then((keys) => oauth.DPoP({}, keys));
    return await this.#handle;
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
