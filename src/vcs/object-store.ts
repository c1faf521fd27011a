/**
 * The storage interface the change model works against (like jj's `Backend`): content-addressed
 * git objects. It is synchronous because repository actors apply mutations inside one LMDB
 * write transaction, where every read and write is synchronous.
 */
export type ObjectType = 'blob' | 'tree' | 'commit' | 'tag';

export interface GitObject {
  type: ObjectType;
  content: Uint8Array;
}

export interface ObjectStore {
  /** The object, or undefined when it is not in this repository. */
  read(oid: string): GitObject | undefined;
  /** Size in bytes of the object's content without loading it (large blobs are chunked). */
  size(oid: string): number | undefined;
  has(oid: string): boolean;
  /** Stores the object (idempotent) and returns its 40-hex SHA-1 oid. */
  write(type: ObjectType, content: Uint8Array): string;
}
