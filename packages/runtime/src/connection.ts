/**
 * A live connection of either protocol era, behind one port: an {@link SdkConnection} (an
 * `initialize` session through SDK 1.32.2, the 2025 era) or a {@link ModernConnection} (the
 * stateless 2026-07-28 era). The runtime, listing and calls only use what both offer; `era` tells
 * them apart.
 */
import type { ModernConnection } from './era/modern.js';
import type { SdkConnection } from './sdk.js';

/** A connection of either era. */
export type Connection = SdkConnection | ModernConnection;

/**
 * The protocol era of a connection: `modern` (2026-07-28: `server/discover`, the `_meta` envelope
 * on every request) or `legacy` (an `initialize` session, 2025-11-25 or older).
 */
export type ProtocolEra = Connection['era'];

/**
 * The era each server spoke, per connection identity key (see `identityKeyOf`), for one runtime's
 * lifetime: a restarted legacy server skips the `server/discover` probe.
 */
export type EraMemory = Map<string, ProtocolEra>;
