import { ServiceError, isErrorCode } from '../errors.js';
import { repohost } from './generated/actor.js';

/**
 * The messages of `actor.proto`, as code and types generated from it by the build
 * (scripts/protocol.mjs). A message to encode is a plain object with every field; a decoded one
 * is the generated class, whose absent fields read as proto3's defaults (absent messages: null).
 */
const { ActorRequest, ActorReply } = repohost.actor;

export type AuthorMsg = repohost.actor.Author;
export type PrincipalMsg = repohost.actor.Principal;
export type IdempotencyMsg = repohost.actor.Idempotency;
export type QuotaGrantMsg = repohost.actor.QuotaGrant;
export type ErrorDataMsg = repohost.actor.ErrorData;
export type ActorRequestMsg = repohost.actor.ActorRequest;
export type ActorReplyMsg = repohost.actor.ActorReply;

export function encodeRequest(msg: ActorRequestMsg): Uint8Array {
  return ActorRequest.encode(msg).finish();
}

export function decodeRequest(bytes: Uint8Array): ActorRequestMsg {
  return ActorRequest.decode(bytes);
}

export function encodeReply(msg: ActorReplyMsg): Uint8Array {
  return ActorReply.encode(msg).finish();
}

export function decodeReply(bytes: Uint8Array): ActorReplyMsg {
  return ActorReply.decode(bytes);
}

const EMPTY = new Uint8Array(0);

/** An actor's failure as its reply carries it: `ServiceError.toJSON`, the details as JSON text. */
export function errorData(error: ServiceError): ErrorDataMsg {
  const data = error.toJSON();
  return {
    code: data.code,
    message: data.message,
    details: data.details ? Buffer.from(JSON.stringify(data.details)) : EMPTY,
    retryAfter: data.retryAfter ?? 0,
    retryable: data.retryable ?? false,
  };
}

/** The failure a reply carries, rebuilt as every error that crosses a thread is: `ServiceError.fromJSON`. */
export function errorFromData(data: ErrorDataMsg): ServiceError {
  return ServiceError.fromJSON({
    code: isErrorCode(data.code) ? data.code : 'INTERNAL_ERROR',
    message: data.message,
    details: data.details.length ? (JSON.parse(Buffer.from(data.details).toString('utf8')) as Record<string, unknown>) : undefined,
    retryable: data.retryable,
    retryAfter: data.retryAfter || undefined,
  });
}
