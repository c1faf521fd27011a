/** The records stored in LMDB (see `keys.ts` for where each lives). Timestamps are ISO-8601 UTC. */

export interface OrgRecord {
  id: string;
  slug: string;
  name: string;
  created_at: string;
}

export type KeyStatus = 'active' | 'disabled' | 'revoked';

export interface PublicJwk {
  kty: 'OKP';
  crv: 'Ed25519';
  x: string;
}

export interface SigningKeyRecord {
  id: string;
  org_id: string;
  name: string;
  scopes: string[];
  repo_ids: string[] | null;
  tags: Record<string, string>;
  status: KeyStatus;
  created_at: string;
  revoked_at: string | null;
  public_jwk: PublicJwk;
}

export type UpstreamAuthKind = 'token' | 'username_password';

export interface UpstreamRecord {
  url: string;
  auth_kind: UpstreamAuthKind | null;
  /** The credential sealed with the data directory's secret key (`secret-box.ts`); never returned. */
  sealed_auth: string | null;
}

export interface RepoRecord {
  id: string;
  org_id: string;
  name: string;
  default_bookmark: string;
  created_at: string;
  updated_at: string;
  tags: Record<string, string>;
  upstream: UpstreamRecord | null;
  /** The latest operation of this repository (operations form a chain through `parent`). */
  last_op_id: string | null;
}

export interface BookmarkRecord {
  name: string;
  change_id: string;
  created_at: string;
  updated_at: string;
}

export interface OperationRecord {
  id: string;
  repo_id: string;
  parent: string | null;
  kind: string;
  key_id: string | null;
  at: string;
  /** A short machine-readable account of what changed (ids, names), never secrets. */
  summary: Record<string, unknown>;
}

export interface EventEnvelope {
  id: string;
  type: string;
  occurred_at: string;
  organization: { id: string; slug: string; name: string };
  repository: { id: string; name: string; url: string } | null;
  data: Record<string, unknown>;
}

export interface IdempotencyRecord {
  fingerprint: string;
  status: number;
  body: string;
  at: number;
}
