import { computeTransportDigest, type ServerIdentity } from '@stepbind/binding';
import { DEFAULT_MAX_MESSAGE_BYTES, type ServerConfig } from './config.js';
import type { AnyConnection } from './era/connect.js'; // era:

/**
 * The digest of the transport settings that make a connection reusable: transport, command, args,
 * env, cwd, url, headers, audience and `maxMessageBytes`. A change means a new connection (and a
 * new identity).
 */
export function identityKeyOf(config: ServerConfig): string {
  // A non-default message limit is part of the transport (a new limit needs a new connection);
  // the default is left out so that digests of configurations without it stay as they were.
  const limit =
    config.maxMessageBytes === DEFAULT_MAX_MESSAGE_BYTES
      ? {}
      : { maxMessageBytes: config.maxMessageBytes };
  return config.transport === 'stdio'
    ? computeTransportDigest({
        transport: 'stdio',
        command: config.command,
        args: config.args,
        env: config.env,
        // Values, not just names: a rotated token in this process's environment means a reconnect.
        envPassthrough: Object.fromEntries(
          config.envPassthrough.map((name) => [name, process.env[name] ?? null]),
        ),
        cwd: config.cwd ?? null,
        audience: config.audience,
        // Roots are declared at initialize: other roots need a new session.
        ...(config.roots.length === 0 ? {} : { roots: config.roots }),
        ...limit,
      })
    : computeTransportDigest({
        transport: 'http',
        url: config.url,
        headers: config.headers,
        audience: config.audience,
        ...(config.roots.length === 0 ? {} : { roots: config.roots }),
        ...limit,
      });
}

/** The identity of a live connection: configured name, transport digest, serverInfo, protocol. */
export function identityOf(
  name: string,
  config: ServerConfig,
  connection: AnyConnection, // era:
): ServerIdentity {
  const { serverInfo, protocolVersion } = connection.hello;
  return Object.freeze({
    name,
    transportDigest: identityKeyOf(config),
    ...(serverInfo === undefined ? {} : { serverInfo }),
    ...(protocolVersion === undefined ? {} : { protocolVersion }),
  });
}
