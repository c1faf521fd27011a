import { ServiceError, asServiceError } from '../../errors.js';
import { decodeReply, encodeReply, errorData } from '../../protocol/messages.js';
import { responseOf, type ActorResponse } from '../../actors/runtime.js';

/** The internal listener's one path: a protobuf ActorRequest in, a protobuf ActorReply out. */
export const ACTOR_PATH = '/actor';
export const PROTOBUF = 'application/x-protobuf';
/**
 * The actor and the command of a forwarded ActorRequest, set by the sender from the call it
 * encoded: the listener dispatches the bytes as they came, to the worker that decodes them, without
 * decoding them first to learn where they go.
 */
export const ACTOR_HEADER = 'x-repohost-actor';
export const COMMAND_HEADER = 'x-repohost-command';
/**
 * The listener's status for a stale route (421 Misdirected Request); its body is the ActorReply
 * with the 503 the client gets. A distinct status lets the sender count stale routes apart from
 * an owner's own 503s.
 */
export const STALE_STATUS = 421;

const EMPTY = new Uint8Array(0);

/** The owner's failure, as a ServiceError travels (an unknown one as INTERNAL_ERROR). */
export function encodeFailure(failure: unknown): Uint8Array {
  const err = asServiceError(failure) ?? new ServiceError('INTERNAL_ERROR', 'internal error');
  return encodeReply({ status: err.status, body: EMPTY, error: errorData(err), batchSize: 0, commitMs: 0, flushMs: 0, queueMs: 0, replayed: false, directoryRevision: 0 });
}

/** What the caller gets back: the reply, or the owner's failure thrown as the same ServiceError. */
export function decodeOutcome(bytes: Uint8Array): ActorResponse {
  return responseOf(decodeReply(bytes));
}
