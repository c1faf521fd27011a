/**
 * git's upload-pack (API §14): the ref advertisement of `GET …/info/refs?service=git-upload-pack`
 * and the answer to `POST …/git-upload-pack`, in protocol v2 (`ls-refs`, `fetch`) or v0 (smart
 * HTTP's stateless RPC). It runs on a pack-pool thread. The refs are read from one LMDB snapshot,
 * so a repository that moves meanwhile is served as it was when the request came in; the walk and
 * the pack read objects, which never change, through short snapshots (ObjectReader).
 *
 * Bad requests (framing, unknown commands or arguments, a want the repository does not hold) are
 * answered with an `ERR` line, which git prints as `remote error: …`; once the pack has started,
 * a failure goes out on side-band 3 instead.
 */
import { gunzipSync } from 'node:zlib';
import { invalid, isServiceError, ServiceError } from '../errors.js';
import { log } from '../log.js';
import type { Storage } from '../storage/database.js';
import { listGitRefs, type RepoRefs } from '../storage/git-refs.js';
import { getRepoAt } from '../storage/repo-store.js';
import type { RepoRecord } from '../storage/records.js';
import { ObjectReader } from '../storage/read/object-reader.js';
import { parseV0Fetch, parseV2Command, type FetchRequest } from './fetch-request.js';
import { Readiness } from './negotiation.js';
import { parseObjectFilter } from './object-filter.js';
import { ObjectGraph } from './object-graph.js';
import { streamPack } from './pack-stream.js';
import { splitPktLines } from './pkt-request.js';
import { packObjects } from './reachable-sets.js';
import { annotatedTags, resolveRefName, writeLsRefs, writeV0Advertisement, writeV2Capabilities } from './ref-advertisement.js';
import { PackChannel, PktWriter, type ByteSink } from './response-writer.js';
import { planShallow, type ShallowPlan } from './shallow.js';

export interface UploadPackRequest {
  repoId: string;
  /** The advertisement (`GET info/refs`) or a command (`POST git-upload-pack`). */
  phase: 'advertise' | 'command';
  /** 2 when the client sent `Git-Protocol: version=2`, else 0. */
  version: 0 | 2;
  /** The request body as received (commands only). */
  body: Uint8Array | null;
  gzip: boolean;
}

/** Objects read by the walk and kept for the pack, per request (see ObjectReader). */
const KEEP_READ_BYTES = 16 * 1024 * 1024;

/** Largest request body once inflated: a clone of a repository with 100k refs wants fits in it. */
export const MAX_REQUEST_BYTES = 16 * 1024 * 1024;

export interface UploadPackSink extends ByteSink {
  readonly isCancelled: boolean;
}

/** The context of one request: its refs, its object reader and what it has learned. */
interface Session {
  repo: RepoRecord;
  objects: ObjectReader;
  graph: ObjectGraph;
  refs: RepoRefs;
  out: PktWriter;
  sink: UploadPackSink;
}

export async function uploadPack(storage: Storage, request: UploadPackRequest, sink: UploadPackSink): Promise<void> {
  // Decoded before anything is written, so that a body that is not one is an HTTP 4xx.
  const body = request.phase === 'command' ? decodeBody(request.body ?? new Uint8Array(0), request.gzip) : null;
  const { repo, refs } = readRefs(storage, request.repoId);
  const objects = new ObjectReader(storage, repo.id, { keepBytes: request.phase === 'command' ? KEEP_READ_BYTES : 0 });
  try {
    const session: Session = { repo, objects, graph: new ObjectGraph(objects), refs, out: new PktWriter(sink), sink };
    if (body === null) {
      if (request.version === 2) writeV2Capabilities(session.out);
      else {
        session.out.line('# service=git-upload-pack');
        session.out.flushPkt();
        writeV0Advertisement(session.out, session.refs);
      }
      return;
    }
    try {
      await (request.version === 2 ? commandV2(session, body) : fetchV0(session, body));
    } catch (err) {
      // A request git can be told about; the rest (a thread lost, a bug) is the server's failure.
      if (!isServiceError(err) || err.status >= 500) throw err;
      session.out.error(err.message);
    }
  } finally {
    objects.release();
  }
}

/** The repository and its refs, from one snapshot. */
function readRefs(storage: Storage, repoId: string): { repo: RepoRecord; refs: RepoRefs } {
  const txn = storage.root.useReadTransaction();
  try {
    const repo = getRepoAt(storage.meta, repoId, txn);
    if (!repo) throw new ServiceError('REPO_NOT_FOUND', 'repository not found');
    return { repo, refs: listGitRefs(storage, txn, repo, { kept: false }) };
  } finally {
    txn.done();
  }
}

function decodeBody(body: Uint8Array, gzip: boolean): Buffer {
  if (!gzip) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  try {
    return gunzipSync(body, { maxOutputLength: MAX_REQUEST_BYTES });
  } catch (err) {
    if (err instanceof RangeError) throw new ServiceError('PAYLOAD_TOO_LARGE', `the request inflates to more than ${MAX_REQUEST_BYTES} bytes`, { limit_bytes: MAX_REQUEST_BYTES });
    throw invalid('the request body is not valid gzip');
  }
}

async function commandV2(session: Session, body: Buffer): Promise<void> {
  const command = parseV2Command(splitPktLines(body));
  if (!command) throw invalid('protocol error: expected a command');
  if (command.command === 'ls-refs') {
    writeLsRefs(session.out, session.refs, command.args);
    return;
  }
  const request = command.args;
  // No wants: nothing to send (git's own server answers nothing at all).
  if (request.wants.length === 0) return;
  checkWants(session, request);
  const common = commonHaves(session, request);
  if (!request.done && request.haves.length > 0) {
    const { out } = session;
    out.line('acknowledgments');
    if (common.length === 0) out.line('NAK');
    for (const oid of common) out.line(`ACK ${oid}`);
    const readiness = new Readiness(session.graph, request.wants);
    for (const oid of common) readiness.addCommon(oid);
    if (!readiness.ready()) {
      out.flushPkt();
      return;
    }
    out.line('ready');
    out.delim();
  }
  await sendPackfile(session, request, common, 'v2');
}

/**
 * v0's stateless RPC: each request carries the wants and the haves of one negotiation round,
 * ending with `done` (send the pack) or a flush (acknowledge and stop), as git's own
 * `upload-pack --stateless-rpc` treats them, multi_ack_detailed and no-done included.
 */
async function fetchV0(session: Session, body: Buffer): Promise<void> {
  const parsed = parseV0Fetch(splitPktLines(body));
  if (!parsed) return;
  const { request } = parsed;
  checkWants(session, request);
  const { out, graph } = session;
  const shallowFirst = request.depth > 0 || request.deepenSince !== null || request.deepenNot.length > 0;
  const shallow = shallowFirst ? await runToEnd(planShallow(graph, request, (name) => resolveRefName(session.refs, name)), session) : null;
  if (shallow) {
    for (const oid of shallow.shallow) out.line(`shallow ${oid}`);
    for (const oid of shallow.unshallow) out.line(`unshallow ${oid}`);
    out.flushPkt();
  }
  if (!parsed.roundEnded) return;

  const multiAck = request.multiAckDetailed;
  const common: string[] = [];
  const seen = new Set<string>();
  let gotOther = false;
  let sentReady = false;
  const readiness = new Readiness(graph, request.wants);
  let readyFor = -1;
  let ready = false;
  const isReady = (): boolean => {
    // Re-checked only when the common set grew since the last answer.
    if (readyFor !== common.length) {
      readyFor = common.length;
      ready = readiness.ready();
    }
    return ready;
  };
  for (const oid of request.haves) {
    if (!session.objects.has(oid)) {
      gotOther = true;
      if (multiAck && isReady()) {
        sentReady = true;
        out.line(`ACK ${oid} ready`);
      }
      continue;
    }
    if (!seen.has(oid)) {
      seen.add(oid);
      common.push(oid);
      readiness.addCommon(oid);
    }
    if (multiAck) out.line(`ACK ${oid} common`);
    else if (common.length === 1) out.line(`ACK ${oid}`);
  }
  const last = common[common.length - 1];
  if (request.done) {
    out.line(last && multiAck ? `ACK ${last}` : 'NAK');
  } else {
    if (multiAck && last && !gotOther && isReady()) {
      sentReady = true;
      out.line(`ACK ${last} ready`);
    }
    if (common.length === 0 || multiAck) out.line('NAK');
    if (!(request.noDone && sentReady && last)) return;
    out.line(`ACK ${last}`);
  }
  await sendPackfile(session, request, common, 'v0', shallow);
}

function checkWants(session: Session, request: FetchRequest): void {
  for (const oid of request.wants) if (!session.objects.has(oid)) throw invalid(`upload-pack: not our ref ${oid}`);
  if (request.filter !== null) parseObjectFilter(request.filter);
}

function commonHaves(session: Session, request: FetchRequest): string[] {
  return [...new Set(request.haves)].filter((oid) => session.objects.has(oid));
}

/**
 * The shallow information (v2's `shallow-info` section; v0 sent it before the acknowledgements),
 * the object walk and the pack. Progress goes out on band 2 as the walk and the pack advance.
 */
async function sendPackfile(session: Session, request: FetchRequest, common: string[], protocol: 'v0' | 'v2', v0Shallow: ShallowPlan | null = null): Promise<void> {
  const { out, graph, sink } = session;
  const shallow = v0Shallow ?? (await runToEnd(planShallow(graph, request, (name) => resolveRefName(session.refs, name)), session));
  if (protocol === 'v2') {
    if (shallow.announce) {
      out.line('shallow-info');
      for (const oid of shallow.shallow) out.line(`shallow ${oid}`);
      for (const oid of shallow.unshallow) out.line(`unshallow ${oid}`);
      out.delim();
    }
    out.line('packfile');
  }
  const channel = new PackChannel(sink, request.sideBand, request.noProgress);
  try {
    let lastReport = Date.now();
    const walk = packObjects(graph, session.repo.id, {
      wants: [...request.wants, ...shallow.extraWants],
      common,
      grafts: shallow.grafts,
      filter: request.filter === null ? null : parseObjectFilter(request.filter),
      includeTags: request.includeTag ? annotatedTags(session.refs) : [],
    });
    let step = walk.next();
    while (!step.done) {
      if (Date.now() - lastReport >= 1000) {
        lastReport = Date.now();
        channel.progress(`Enumerating objects: ${step.value}\r`);
      }
      await breathe(session);
      step = walk.next();
    }
    const pack = step.value;
    const count = pack.count;
    channel.progress(`Enumerating objects: ${count}, done${pack.known > 0 ? `, ${pack.known} known from an earlier clone` : ''}.\n`);
    const stats = await streamPack(session.objects, pack, channel, sink, (written) => {
      if (Date.now() - lastReport < 1000) return;
      lastReport = Date.now();
      channel.progress(`Writing objects: ${Math.floor((100 * written) / count)}% (${written}/${count})\r`);
    });
    channel.progress(`Total ${stats.objects} (delta 0), reused ${stats.reused} (delta 0), pack-reused 0\n`);
    channel.end();
  } catch (err) {
    // Without side-band there is no way to say it inside the pack: the response is cut short.
    if (session.sink.isCancelled || request.sideBand === 'none') throw err;
    // The pack has started: git is told on the error band, and the failure is logged here (a
    // retryable one, such as objects gone with their repository, is not the server's fault).
    const told = isServiceError(err) && (err.status < 500 || err.retryable);
    if (told) log.warn('upload-pack stopped while sending the pack', { err, repo_id: session.repo.id });
    else log.error('upload-pack failed while sending the pack', { err, repo_id: session.repo.id });
    channel.error(told ? err.message : 'internal error while sending the pack');
  }
}

/** Runs a walk step by step, letting other work on this thread run between steps. */
async function runToEnd<T>(walk: Generator<number, T>, session: Session): Promise<T> {
  let step = walk.next();
  while (!step.done) {
    await breathe(session);
    step = walk.next();
  }
  return step.value;
}

/**
 * Yields to the thread's event loop (cancellation, other reads) and stops if the client left. The
 * walk's snapshot ends first: another task of this thread may block meanwhile while it steps aside
 * for the writers (pack-stream.ts), and would keep the snapshot open through its wait.
 */
async function breathe(session: Session): Promise<void> {
  session.objects.release();
  await new Promise((resolve) => setImmediate(resolve));
  if (session.sink.isCancelled) await session.sink.ready();
}
