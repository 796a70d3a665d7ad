/**
 * The part of oidc-provider 9.x (which ships no types) the testkit's authorization server uses.
 * Internal: nothing here appears in the testkit's public declarations.
 */
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http';

  export interface AdapterPayload {
    readonly [key: string]: unknown;
    readonly grantId?: string;
    readonly userCode?: string;
    readonly uid?: string;
    consumed?: number;
  }

  export interface Adapter {
    upsert(id: string, payload: AdapterPayload, expiresIn: number): Promise<void>;
    find(id: string): Promise<AdapterPayload | undefined>;
    findByUserCode(userCode: string): Promise<AdapterPayload | undefined>;
    findByUid(uid: string): Promise<AdapterPayload | undefined>;
    consume(id: string): Promise<void>;
    destroy(id: string): Promise<void>;
    revokeByGrantId(grantId: string): Promise<void>;
  }

  export interface ProviderClient {
    readonly clientId: string;
    grantTypeAllowed(type: string): boolean;
  }

  export interface ProviderContext {
    readonly oidc: {
      readonly params?: Readonly<Record<string, unknown>>;
      readonly client?: ProviderClient;
    };
  }

  export interface InteractionDetails {
    readonly uid: string;
    readonly prompt: { readonly name: string; readonly details: Readonly<Record<string, unknown>> };
    readonly params: Readonly<Record<string, unknown>>;
    readonly session?: { readonly accountId?: string };
    readonly grantId?: string;
  }

  export interface GrantInstance {
    addOIDCScope(scope: string): void;
    addResourceScope(resource: string, scope: string): void;
    save(): Promise<string>;
  }

  export interface GrantConstructor {
    new (properties: { accountId: string; clientId: string }): GrantInstance;
    find(id: string): Promise<GrantInstance | undefined>;
  }

  export class Provider {
    constructor(issuer: string, configuration: Readonly<Record<string, unknown>>);
    readonly Grant: GrantConstructor;
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
    interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<InteractionDetails>;
    interactionFinished(
      req: IncomingMessage,
      res: ServerResponse,
      result: Readonly<Record<string, unknown>>,
      options?: { readonly mergeWithLastSubmission?: boolean },
    ): Promise<void>;
    on(event: string, listener: (ctx: ProviderContext, ...rest: unknown[]) => void): this;
  }

  export const errors: {
    readonly InvalidTarget: new (description?: string) => Error;
  };

  export default Provider;
}
