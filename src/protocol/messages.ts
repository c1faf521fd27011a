import protobuf from 'protobufjs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

/** Typed views of `actor.proto`, encoded and decoded with protobufjs (loaded once per thread). */
export interface AuthorMsg {
  name: string;
  email: string;
  hasEmail: boolean;
}

export interface PrincipalMsg {
  orgId: string;
  orgSlug: string;
  keyId: string;
  keyName: string;
  permissions: string[];
  authors: AuthorMsg[];
  restricted: boolean;
  allowedRepoIds: string[];
}

export interface IdempotencyMsg {
  keyId: string;
  key: string;
  fingerprint: string;
}

export interface ActorRequestMsg {
  actor: string;
  command: string;
  payload: Uint8Array;
  principal?: PrincipalMsg;
  traceId: string;
  idempotency?: IdempotencyMsg;
}

export interface ErrorDataMsg {
  code: string;
  message: string;
  details: Uint8Array;
  retryAfter: number;
}

export interface ActorReplyMsg {
  status: number;
  body: Uint8Array;
  error?: ErrorDataMsg;
  batchSize: number;
  commitMs: number;
  flushMs: number;
  queueMs: number;
}

// The .proto file sits beside the sources; compiled code runs from dist/, two levels down.
const here = dirname(fileURLToPath(import.meta.url));
const protoPath = here.includes(`${join('dist', 'src')}`)
  ? join(here, '..', '..', '..', 'src', 'protocol', 'actor.proto')
  : join(here, 'actor.proto');

const root = protobuf.loadSync(protoPath);
const Request = root.lookupType('repohost.actor.ActorRequest');
const Reply = root.lookupType('repohost.actor.ActorReply');

const DEFAULTS = { defaults: true, longs: Number, bytes: Uint8Array } as const;

export function encodeRequest(msg: ActorRequestMsg): Uint8Array {
  return Request.encode(Request.fromObject(msg)).finish();
}

export function decodeRequest(bytes: Uint8Array): ActorRequestMsg {
  return Request.toObject(Request.decode(bytes), DEFAULTS) as unknown as ActorRequestMsg;
}

export function encodeReply(msg: ActorReplyMsg): Uint8Array {
  return Reply.encode(Reply.fromObject(msg)).finish();
}

export function decodeReply(bytes: Uint8Array): ActorReplyMsg {
  const reply = Reply.toObject(Reply.decode(bytes), DEFAULTS) as unknown as ActorReplyMsg;
  if (!reply.error?.code) delete reply.error;
  return reply;
}
