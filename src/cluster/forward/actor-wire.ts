import { ServiceError, asServiceError } from '../../errors.js';
import { decodeReply, encodeReply, encodeRequest, errorData, errorFromData, type ActorRequestMsg } from '../../protocol/messages.js';
import type { ActorCall, ActorResponse } from '../../actors/runtime.js';

/** The internal listener's one path: a protobuf ActorRequest in, a protobuf ActorReply out. */
export const ACTOR_PATH = '/actor';
export const PROTOBUF = 'application/x-protobuf';
/**
 * The listener's status for a stale route (421 Misdirected Request); its body is the ActorReply
 * with the 503 the client gets. A distinct status lets the sender count stale routes apart from
 * an owner's own 503s.
 */
export const STALE_STATUS = 421;

const EMPTY = new Uint8Array(0);

/** A call as the bytes that travel between nodes: the same ActorRequest the worker threads read. */
export function encodeCall(call: ActorCall): Uint8Array {
  return encodeRequest({
    actor: call.actor,
    command: call.command,
    payload: Buffer.from(JSON.stringify(call.input ?? {})),
    principal: call.principal,
    traceId: call.traceId,
    idempotency: call.idempotency,
  });
}

/** The call a received ActorRequest stands for. */
export function callOf(msg: ActorRequestMsg): ActorCall {
  return {
    actor: msg.actor,
    command: msg.command,
    input: msg.payload.length ? JSON.parse(Buffer.from(msg.payload).toString('utf8')) : {},
    principal: msg.principal ?? { orgId: '', orgSlug: '', keyId: '', keyName: '', permissions: [], authors: [], restricted: false, allowedRepoIds: [] },
    traceId: msg.traceId,
    idempotency: msg.idempotency ?? undefined,
  };
}

/** The owner's answer: the actor's reply. */
export function encodeAnswer({ status, body }: ActorResponse): Uint8Array {
  return encodeReply({ status, body, error: null, batchSize: 0, commitMs: 0, flushMs: 0, queueMs: 0 });
}

/** The owner's failure, as a ServiceError travels (an unknown one as INTERNAL_ERROR). */
export function encodeFailure(failure: unknown): Uint8Array {
  const err = asServiceError(failure) ?? new ServiceError('INTERNAL_ERROR', 'internal error');
  return encodeReply({ status: err.status, body: EMPTY, error: errorData(err), batchSize: 0, commitMs: 0, flushMs: 0, queueMs: 0 });
}

/** What the caller gets back: the reply, or the owner's failure thrown as the same ServiceError. */
export function decodeOutcome(bytes: Uint8Array): ActorResponse {
  const reply = decodeReply(bytes);
  if (reply.error) throw errorFromData(reply.error);
  return { status: reply.status, body: reply.body };
}
