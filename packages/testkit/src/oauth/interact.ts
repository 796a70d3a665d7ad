/**
 * The scripted browser of the authorization code flow: follows the authorization server's
 * redirects (keeping its cookies, as a browser would) until one leaves the server, and returns
 * that URL, the client's callback.
 */

/** A browser would give up on a redirect loop too. */
const MAX_HOPS = 20;

/**
 * Follows redirects from `authorizationUrl` while they stay on `issuer`'s origin and resolves with
 * the first URL elsewhere (the redirect URI with `code`, `state` and `iss`, or an `error`).
 * @throws Error when a response on the server is not a redirect (an error page), naming its status.
 */
export async function walkAuthorization(
  authorizationUrl: string | URL,
  issuer: string,
): Promise<string> {
  const origin = new URL(issuer).origin;
  const jar = new Map<string, string>();
  let next = new URL(authorizationUrl);
  for (let hop = 0; hop < MAX_HOPS; hop += 1) {
    if (next.origin !== origin) return next.href;
    const cookie = [...jar].map(([name, value]) => `${name}=${value}`).join('; ');
    const response = await fetch(next, {
      redirect: 'manual',
      headers: cookie === '' ? {} : { cookie },
    });
    for (const line of response.headers.getSetCookie()) {
      const [pair = ''] = line.split(';');
      const at = pair.indexOf('=');
      if (at > 0) jar.set(pair.slice(0, at).trim(), pair.slice(at + 1).trim());
    }
    const location = response.headers.get('location');
    const body = await response.text();
    if (location === null) {
      throw new Error(
        `authorization stopped at ${next.pathname} with HTTP ${String(response.status)}: ${body.slice(0, 300)}`,
      );
    }
    next = new URL(location, next);
  }
  throw new Error(`authorization did not reach the redirect URI in ${String(MAX_HOPS)} redirects`);
}
