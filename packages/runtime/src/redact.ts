/**
 * Redaction of the secrets a server configuration may carry (URL query values, header values), for
 * every error, event, status and CLI line that could mention them. One place, so no path forgets.
 */
import { StepbindError } from '@stepbind/binding/internal';

/** What replaces a secret value. */
export const REDACTED = '***';

/** Shorter values are too common to scrub out of free text (URLs are always redacted whole). */
const MIN_SCRUB_LENGTH = 4;
/** Lines and words of a multi-line secret (a PEM key) shorter than this are not scrubbed alone. */
const MIN_PART_LENGTH = 16;
/** How deep a `cause` chain is copied; deeper causes are dropped. */
const MAX_CAUSE_DEPTH = 4;

/**
 * A URL safe to print: user name and password removed, every query value and the fragment replaced
 * by `***` (parameter names stay, so `?api_key=***` still tells which parameter was sent).
 * Something that does not parse as a URL is replaced whole.
 *
 * @example redactUrl('https://u:p@host/mcp?api_key=s3cret') === 'https://host/mcp?api_key=***'
 */
export function redactUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return `<unparseable URL ${REDACTED}>`;
  }
  parsed.username = '';
  parsed.password = '';
  if (parsed.hash !== '') parsed.hash = REDACTED;
  const names = [...parsed.searchParams.keys()];
  if (names.length === 0) return parsed.href;
  // URLSearchParams would percent-encode the asterisks; build the query by hand.
  const query = names.map((name) => `${encodeURIComponent(name)}=${REDACTED}`).join('&');
  parsed.search = '';
  const base = parsed.href;
  const hashAt = base.indexOf('#');
  return hashAt === -1
    ? `${base}?${query}`
    : `${base.slice(0, hashAt)}?${query}${base.slice(hashAt)}`;
}

/** Header names with every value replaced by `***`. */
export function redactHeaders(
  headers: Readonly<Record<string, string>>,
): Readonly<Record<string, string>> {
  return Object.freeze(Object.fromEntries(Object.keys(headers).map((name) => [name, REDACTED])));
}

/** Scrubs the secrets of one server configuration out of text and errors. */
export interface Redactor {
  /** `text` with the configured URL shown redacted and every secret value replaced by `***`. */
  text(text: string): string;
  /**
   * The same error with message, detail strings and `cause` chain scrubbed (the cause becomes a
   * plain copy: name, message, `code` and `status` kept). Returns `error` itself when it holds no
   * secret, so ordinary errors keep their identity.
   */
  error<E extends Error>(error: E): E;
}

/**
 * A {@link Redactor} that learns secrets at run time (an access token, a refresh token, a code):
 * each learned value (raw, percent-encoded and JSON-escaped) is scrubbed from every later text.
 */
export interface LearningRedactor extends Redactor {
  /** Adds `secret` to the values scrubbed from now on (values under 4 characters are ignored). */
  learn(secret: string): void;
}

/** A redactor that changes nothing (for connections whose configuration holds no secrets). */
export const NO_REDACTION: Redactor = Object.freeze({
  text: (text: string) => text,
  error: <E extends Error>(error: E) => error,
});

/**
 * The redactor for an HTTP server's `url`, `headers` and configured `secrets` (a bearer token, an
 * OAuth client secret or private key): the URL as configured and as normalised is shown as
 * {@link redactUrl}; query values, user info, header values (also each word after an auth scheme,
 * such as the token of `Bearer <token>`) and the secrets (also each line and word of a multi-line
 * one, such as a PEM key), raw and percent-encoded, become `***`. It can {@link LearningRedactor.learn}
 * more secrets later.
 */
export function createRedactor(
  url: string,
  headers: Readonly<Record<string, string>> = {},
  secrets: readonly string[] = [],
): LearningRedactor {
  const urls = new Map<string, string>();
  const found = new Set<string>();
  const redactedUrl = redactUrl(url);
  urls.set(url, redactedUrl);
  try {
    const parsed = new URL(url);
    urls.set(parsed.href, redactedUrl);
    for (const value of parsed.searchParams.values()) found.add(value);
    if (parsed.username !== '') found.add(decodeURIComponent(parsed.username));
    if (parsed.password !== '') found.add(decodeURIComponent(parsed.password));
    if (parsed.hash.length > 1) found.add(parsed.hash.slice(1));
    for (const part of parsed.search.slice(1).split('&')) {
      const at = part.indexOf('=');
      if (at !== -1) found.add(part.slice(at + 1));
    }
  } catch {
    // An unparseable URL is replaced whole wherever it appears.
  }
  for (const value of Object.values(headers)) {
    found.add(value);
    for (const word of value.split(/\s+/).slice(1)) found.add(word);
  }
  for (const secret of secrets) {
    found.add(secret);
    // A PEM key or a JSON key printed in part still shows none of its lines.
    for (const word of secret.split(/\s+/)) if (word.length >= MIN_PART_LENGTH) found.add(word);
  }
  const needles = new Set<string>();
  const addNeedles = (secret: string): boolean => {
    if (secret.length < MIN_SCRUB_LENGTH) return false;
    const before = needles.size;
    for (const needle of [
      secret,
      encodeURIComponent(secret),
      JSON.stringify(secret).slice(1, -1),
    ]) {
      if (needle.length > 0) needles.add(needle);
    }
    return needles.size !== before;
  };
  for (const secret of found) addNeedles(secret);
  // Longest first, so a secret that contains another is replaced whole.
  const order = (): string[] => [...needles].sort((a, b) => b.length - a.length);
  let ordered = order();
  const urlEntries = [...urls].sort((a, b) => b[0].length - a[0].length);
  const text = (input: string): string => {
    let out = input;
    for (const [raw, safe] of urlEntries) if (raw !== safe) out = out.split(raw).join(safe);
    for (const needle of ordered) out = out.split(needle).join(REDACTED);
    return out;
  };
  const error = <E extends Error>(input: E): E => scrubError(input, text, 0) as E;
  const learn = (secret: string): void => {
    if (typeof secret === 'string' && addNeedles(secret)) ordered = order();
  };
  return Object.freeze({ text, error, learn });
}

function scrubError(error: Error, text: (s: string) => string, depth: number): Error {
  const message = text(error.message);
  const cause = scrubCause((error as { cause?: unknown }).cause, text, depth + 1);
  if (error instanceof StepbindError) {
    const detail = scrubValue(error.detail, text, 0) as StepbindError['detail'];
    if (message === error.message && cause === error.cause && detail === error.detail) return error;
    const Kind = error.constructor as new (
      code: StepbindError['code'],
      message: string,
      options: { detail: StepbindError['detail']; cause?: unknown },
    ) => StepbindError;
    return new Kind(error.code, message, { detail, ...(cause === undefined ? {} : { cause }) });
  }
  if (message === error.message && cause === (error as { cause?: unknown }).cause) return error;
  return plainCopy(error, message, cause);
}

function scrubCause(cause: unknown, text: (s: string) => string, depth: number): unknown {
  if (cause === undefined) return undefined;
  if (depth > MAX_CAUSE_DEPTH) return undefined;
  if (cause instanceof Error) return scrubError(cause, text, depth);
  if (typeof cause === 'string') return text(cause);
  return scrubValue(cause, text, 0);
}

/** A plain Error with the original's name, `code` and `status`, and its own `cause`. */
function plainCopy(error: Error, message: string, cause: unknown): Error {
  const copy = new Error(message, cause === undefined ? undefined : { cause });
  const source = error as { name: string; code?: unknown; status?: unknown };
  Object.defineProperty(copy, 'name', { value: source.name, configurable: true });
  const extra = copy as { code?: unknown; status?: unknown };
  if (typeof source.code === 'number' || typeof source.code === 'string') extra.code = source.code;
  if (typeof source.status === 'number') extra.status = source.status;
  return copy;
}

/** Strings inside plain data (bounded depth), scrubbed; unchanged values keep their identity. */
function scrubValue(value: unknown, text: (s: string) => string, depth: number): unknown {
  if (typeof value === 'string') return text(value);
  if (depth > 6 || typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) {
    const items = value.map((item: unknown) => scrubValue(item, text, depth + 1));
    return items.some((item, i) => item !== value[i]) ? Object.freeze(items) : value;
  }
  if (Object.getPrototypeOf(value) !== Object.prototype) return value;
  let changed = false;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    out[key] = scrubValue(item, text, depth + 1);
    if (out[key] !== item) changed = true;
  }
  return changed ? Object.freeze(out) : value;
}
