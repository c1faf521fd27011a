/**
 * git's receive-pack (API §14), the half that runs on the receive pool: the ref advertisement of
 * `GET …/info/refs?service=git-receive-pack`, and reading a push — its update commands, then its
 * pack, streamed through the pack reader of upstream sync (bounded memory, every object hashed
 * here and checked as `git fsck --strict` would, deltas resolved against the pack or the
 * repository) into a `PackStoreSink`, and the connectivity check: everything the pack's objects
 * and the new tips name is in the pack or the repository.
 *
 * Nothing of the push is visible until the repository's actor applies it (commands/push.ts):
 * the pack's last batch travels to the actor with the updates and commits in the same
 * transaction as the refs; a pack too large for one batch stores its earlier batches as pending
 * objects of the push, which the actor's transaction then references. A pack that fails takes
 * back what it stored.
 */
import { createGunzip } from 'node:zlib';
import { Readable } from 'node:stream';
import { invalid, isServiceError, ServiceError } from '../errors.js';
import type { Storage } from '../storage/database.js';
import { listGitRefs } from '../storage/git-refs.js';
import type { StagedBlob } from '../storage/blob-store.js';
import { getRepo } from '../storage/repo-store.js';
import type { ObjectType } from '../vcs/object-store.js';
import type { Refill } from '../actors/allowance-port.js';
import { PackStoreSink, type PackStoreTarget } from '../actors/system/sync/pack-store-sink.js';
import { PackError, readPack, type PackLimits } from '../actors/system/sync/pack-reader.js';
import { PktReader } from '../actors/system/sync/pkt-line.js';
import { PULL_PACK_LIMITS } from '../actors/system/sync/upstream-limits.js';
import { AGENT } from './ref-advertisement.js';
import { PushProtocolError, readPushRequestHead, ZERO_OID, type PushCapabilities, type RefUpdate } from './receive-request.js';
import { CollectingSink } from './receive-report.js';
import { PktWriter } from './response-writer.js';

export const RECEIVE_CAPABILITIES = ['report-status', 'delete-refs', 'side-band-64k', 'quiet', 'atomic', 'ofs-delta', 'push-options', 'object-format=sha1', `agent=${AGENT}`];

export interface ReceivePackRequest {
  repoId: string;
  /** Owner of the pending marks of the push's early batches. */
  pushId: string;
  gzip: boolean;
  /** REPOHOST_MAX_PUSH_BYTES: the largest pack accepted. */
  maxPushBytes: number;
  /** The org quota batches are charged against (0: unlimited). */
  quotaBytes: number;
  disk: PackStoreTarget['disk'];
}

/** An object of the pack's last batch as the actor's command carries it: its stored value, base64. */
export interface WireObject {
  oid: string;
  type: ObjectType;
  value: string;
}

/** The `git.push` command (commands/push.ts). */
export interface PushCommandInput {
  repo_id: string;
  push_id: string;
  atomic: boolean;
  updates: RefUpdate[];
  objects: WireObject[];
  staged: StagedBlob[];
  /** Stored objects still pending (an upload, say) that the pack names: the push references them. */
  pending_refs: string[];
  /** Whether the pack's earlier batches were stored, pending under the push. */
  earlier_batches: boolean;
}

export type ReceiveOutcome =
  /** The body held no update (git sends none when there is nothing to push). */
  | { kind: 'nothing' }
  | { kind: 'protocol-error'; message: string }
  | { kind: 'unpack-failed'; capabilities: PushCapabilities; updates: RefUpdate[]; reason: string }
  | { kind: 'received'; capabilities: PushCapabilities; command: PushCommandInput };

/** The v0 advertisement (receive-pack speaks no v2): every ref, the capabilities on the first line. */
export function advertiseReceivePack(storage: Storage, repoId: string): Buffer {
  const txn = storage.root.useReadTransaction();
  try {
    const repo = getRepo(storage.meta, repoId);
    if (!repo) throw new ServiceError('REPO_NOT_FOUND', 'repository not found');
    const { refs } = listGitRefs(storage, txn, repo, { kept: false });
    const sink = new CollectingSink();
    const out = new PktWriter(sink);
    out.line('# service=git-receive-pack');
    out.flushPkt();
    const lines = refs.map((ref) => `${ref.oid} ${ref.name}`);
    if (lines.length === 0) lines.push(`${ZERO_OID} capabilities^{}`);
    lines[0] = `${lines[0]}\0${RECEIVE_CAPABILITIES.join(' ')}`;
    for (const line of lines) out.line(line);
    out.flushPkt();
    return sink.bytes();
  } finally {
    txn.done();
  }
}

/** The request body inflated as it arrives; bytes that are not gzip are the client's error. */
async function* gunzipped(body: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  const input = Readable.from(body, { objectMode: false });
  const gunzip = createGunzip();
  input.on('error', (err) => gunzip.destroy(err));
  input.pipe(gunzip);
  try {
    for await (const chunk of gunzip as AsyncIterable<Buffer>) yield chunk;
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && code.startsWith('Z_')) throw invalid('the request body is not valid gzip');
    throw err;
  } finally {
    input.destroy();
  }
}

/** Why a pack was refused, in words git shows; null for a failure that is the server's. */
function unpackReason(err: unknown): string | null {
  if (err instanceof PackError) return err.message;
  if (isServiceError(err) && err.status < 500) return err.message;
  return null;
}

export async function receivePack(storage: Storage, request: ReceivePackRequest, body: AsyncIterable<Uint8Array>, refill: Refill | null): Promise<ReceiveOutcome> {
  const limits: PackLimits = { ...PULL_PACK_LIMITS, maxPackBytes: request.maxPushBytes };
  const reader = new PktReader(request.gzip ? gunzipped(body) : body);
  try {
    let head;
    try {
      head = await readPushRequestHead(reader);
    } catch (err) {
      if (err instanceof PushProtocolError) return { kind: 'protocol-error', message: err.message };
      throw err;
    }
    if (!head) return { kind: 'nothing' };
    const { updates, capabilities } = head;
    const command: PushCommandInput = { repo_id: request.repoId, push_id: request.pushId, atomic: capabilities.atomic, updates, objects: [], staged: [], pending_refs: [], earlier_batches: false };
    const tips = updates.filter((u) => u.new !== ZERO_OID).map((u) => u.new);
    // Deletions alone come without a pack.
    if (tips.length === 0) return { kind: 'received', capabilities, command };
    let sink: PackStoreSink | null = null;
    try {
      sink = new PackStoreSink(storage, { repoId: request.repoId, owner: request.pushId, quotaBytes: request.quotaBytes, refill, disk: request.disk }, { maxExpected: limits.maxObjects, strict: true });
      await readPack(reader.remaining(), sink, limits);
      sink.reference(tips);
      const rest = sink.take();
      command.objects = rest.objects.map((o) => ({ oid: o.oid, type: o.type, value: o.value.toString('base64') }));
      command.staged = rest.staged;
      command.pending_refs = rest.pendingRefs;
      command.earlier_batches = rest.storedEarlier;
      return { kind: 'received', capabilities, command };
    } catch (err) {
      await sink?.discard();
      const reason = unpackReason(err);
      if (reason === null) throw err;
      return { kind: 'unpack-failed', capabilities, updates, reason };
    }
  } finally {
    // Stops the body where reading stopped: the front end reads no more of it.
    await body[Symbol.asyncIterator]().return?.();
  }
}
