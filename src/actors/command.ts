import type { Storage } from '../storage/database.js';
import type { OrgDirectory } from '../storage/org-directory.js';
import type { SecretBox } from '../storage/secret-box.js';
import type { IdempotencyMsg, PrincipalMsg } from '../protocol/messages.js';
import type { SchemaName } from '../protocol/schemas/index.js';
import type { ActorSettings } from './settings.js';
import type { Mutation } from './mutation.js';
import type { Batch } from './batch.js';

/**
 * A command is what an actor does with one message. Handlers are synchronous on purpose: they
 * run inside the batch's LMDB write transaction (each in its own child transaction, so a failing
 * command rolls back alone) and must never await the network or the disk.
 */
export interface CommandContext {
  storage: Storage;
  /** Orgs, keys and webhook targets: global data, never written through `storage`. */
  directory: OrgDirectory;
  secrets: SecretBox;
  settings: ActorSettings;
  principal: PrincipalMsg;
  /**
   * The request's Idempotency-Key, if it carried one. The mailbox records the outcome under it;
   * a command reads it only to keep it with state that outlives the request (a saga's record).
   */
  idempotency: IdempotencyMsg | null;
  traceId: string;
  /** Arrival order of the message in this worker; later arrivals have larger numbers. */
  seq: number;
  now: Date;
  /** State shared with the other commands of this mailbox batch. */
  batch: Batch;
  /** Records the operation log entry and outbox events of this command's transaction. */
  mutation: Mutation;
}

export interface CommandResult {
  status: number;
  body: unknown;
  /** The response schema (src/protocol/schemas/index.ts) whose compiled serializer writes `body`. */
  schema: SchemaName;
  /**
   * A saga's intermediate step (actors/repo-saga.ts): its success is not the request's response,
   * so an Idempotency-Key does not record it (its client errors are recorded as usual).
   */
  partial?: boolean;
}

export interface Command<I = unknown, P = unknown> {
  name: string;
  /** `prepared` is what `prepare` returned for this input (undefined without a `prepare`). */
  handle(input: I, ctx: CommandContext, prepared: P): CommandResult;
  /**
   * Work that needs no database, done on the decoded input before its batch takes LMDB's write
   * lock (decoding a push's objects, finding a write's blobs among `blobs`, the values the front
   * end encoded: ActorRequest.blobs): every writer of the environment waits while a batch holds
   * that lock, so what can run outside it should. Its result is handed to `handle`.
   */
  prepare?(input: I, blobs: readonly Uint8Array[]): P;
}

export function defineCommand<I>(name: string, handle: (input: I, ctx: CommandContext) => CommandResult): Command<I, void>;
export function defineCommand<I, P>(name: string, handle: (input: I, ctx: CommandContext, prepared: P) => CommandResult, prepare: (input: I, blobs: readonly Uint8Array[]) => P): Command<I, P>;
export function defineCommand<I, P>(name: string, handle: (input: I, ctx: CommandContext, prepared: P) => CommandResult, prepare?: (input: I, blobs: readonly Uint8Array[]) => P): Command<I, P> {
  return prepare ? { name, handle, prepare } : { name, handle };
}
