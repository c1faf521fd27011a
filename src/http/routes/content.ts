import { ServiceError } from '../../errors.js';
import { TREE_MODE, readBlob } from '../../vcs/git-object.js';
import { readPool } from '../../actors/read-pool.js';
import { headChangeId } from '../../storage/repo-store.js';
import { adoptView, openChangeView, resolveChange, type ChangeRef, type ChangeView, type MaterializedView, type ShippedView } from '../../storage/read/change-view.js';
import { contentPath, dirJson, fileJson, locate, type ContentRequest } from '../../storage/read/content.js';
import { openBlobStream } from '../../storage/read/repo-objects.js';
import { LruCache } from '../../storage/read/lru-cache.js';
import { treeEntryCount } from '../../storage/read/tree-index.js';
import { negotiateOrRefuse } from '../negotiation.js';
import type { Reply, RequestContext, RouteDef } from '../route.js';
import { HeaderBlock } from '../wire-bytes.js';

/**
 * `GET /{org}/{repo}/content` (API §7). Cheap reads — a small file, a one-level listing of a
 * modest directory, raw bytes — are answered here on the front end straight from LMDB; a
 * conflicted commit's first view, large file JSON and deep or wide listings go to the read pool.
 */

/** Files up to this size are base64-encoded on the front end; larger ones on the read pool. */
const FRONT_END_FILE_BYTES = 256 * 1024;
/** Raw files up to this size are kept for the next read of the same name (`rawFiles`). */
const RAW_FILE_CACHE_BYTES = 64 * 1024;
/** One-level listings of directories up to this many entries are built on the front end. */
const FRONT_END_LISTING_ENTRIES = 2000;

const JSON_TYPE = 'application/json';
const RAW_TYPE = 'application/octet-stream';
const RESERVED = new Set(['change_id', 'path', 'depth']);
const METADATA_KEY = /^metadata\[(.+)\]$/;

/** Metadata filters: `metadata[k]=v` pairs and, for older clients, any unreserved key. */
function metadataFilters(pairs: ReadonlyArray<[string, string]>): Array<[string, string]> {
  const filters: Array<[string, string]> = [];
  for (const [key, value] of pairs) {
    if (RESERVED.has(key)) continue;
    const bracketed = METADATA_KEY.exec(key);
    filters.push([bracketed ? bracketed[1]! : key, value]);
  }
  return filters;
}

/** Materializations running on the read pool, by commit: concurrent readers share one. */
const materializing = new Map<string, Promise<MaterializedView>>();

/** The view of a conflicted commit not yet materialized on this thread, built off it. */
async function materializedView(ctx: RequestContext, ref: ChangeRef): Promise<ChangeView> {
  const repoId = ctx.repo!.id;
  const key = `${repoId}\0${ref.commitOid}`;
  let pending = materializing.get(key);
  if (!pending) {
    const task = readPool(ctx.services.config.dataDir).run({ kind: 'materialize', repoId, commitOid: ref.commitOid! });
    pending = task.then((shipped) => adoptView(shipped as ShippedView)).finally(() => materializing.delete(key));
    materializing.set(key, pending);
  }
  return openChangeView(ctx.services.storage, repoId, ref, { materialize: false, materialized: await pending })!;
}

/** `X-<brand>-Blob-Hash` and `-Size`, named once per brand. */
let blobHeaderNames: { brand: string; hash: string; size: string } | null = null;

function rawHeaders(ctx: RequestContext, oid: string, size: number): Record<string, string> {
  const brand = ctx.services.config.brand;
  if (blobHeaderNames?.brand !== brand) blobHeaderNames = { brand, hash: `X-${brand}-Blob-Hash`, size: `X-${brand}-Blob-Size` };
  return { 'Content-Type': RAW_TYPE, [blobHeaderNames.hash]: oid, [blobHeaderNames.size]: String(size) };
}

interface RawFile {
  content: Uint8Array;
  /** The reply's headers, made once and shared by every answer of the entry. */
  headers: HeaderBlock;
  /** What the names meant when the entry was made: the repository's last operation and default bookmark. */
  opId: string;
  bookmark: string;
}

/**
 * Raw files answered lately, by repository and by what the request named (`change_id` and `path`
 * as sent; without `change_id`, the default bookmark), each entry valid for the repository's last
 * operation when it was made: a repeated read skips resolving the change, walking the tree and
 * reading the blob. Every write that can change what a ref or path shows records an operation
 * (`last_op_id`), so an entry is never served stale; it ages out. The entry holds the operation
 * rather than the key: compared with the record's own string, it costs no hashing per read.
 */
const rawFiles = new LruCache<RawFile>(20_000, 32 * 1024 * 1024, (file) => file.content.length + 200);

/** Unambiguous whatever the strings hold: a NUL then the path, or the change id's length first. */
function rawFileKey(changeId: string | undefined, path: string | undefined): string {
  return changeId ? `${changeId.length}:${changeId}${path ?? ''}` : `\0${path ?? ''}`;
}

function keptRawFile(repo: NonNullable<RequestContext['repo']>, changeId: string | undefined, path: string | undefined): RawFile | undefined {
  const file = rawFiles.get(rawFileKey(changeId, path), repo.id);
  return file && file.opId === (repo.last_op_id ?? '') && file.bookmark === repo.default_bookmark ? file : undefined;
}

function rawReply(ctx: RequestContext, view: ChangeView, oid: string): Reply {
  const blob = openBlobStream(ctx.services.storage, ctx.repo!.id, oid);
  // A conflicted file's materialized content lives in the view, not in LMDB.
  const content = blob ? blob.content : readBlob(view.store, oid);
  if (!content) return { status: 200, stream: blob!.chunks!, length: blob!.size, headers: rawHeaders(ctx, oid, blob!.size) };
  const repo = ctx.repo!;
  const headers = rawHeaders(ctx, oid, content.length);
  if (content.length <= RAW_FILE_CACHE_BYTES) {
    const file = { content, headers: new HeaderBlock(headers), opId: repo.last_op_id ?? '', bookmark: repo.default_bookmark };
    rawFiles.set(rawFileKey(ctx.query.change_id as string | undefined, ctx.query.path as string | undefined), file, repo.id);
  }
  return { status: 200, text: content, headers };
}

function answer(ctx: RequestContext, ref: ChangeRef, request: ContentRequest, format: string, view: ChangeView): Reply | Promise<Reply> {
  const storage = ctx.services.storage;
  const repo = ctx.repo!;
  const { path } = request;
  const value = locate(view, path);
  if (value.mode === TREE_MODE) {
    if (format === RAW_TYPE) throw new ServiceError('NOT_ACCEPTABLE', `${JSON.stringify(path)} is a directory: it has no raw bytes; ask for ${JSON_TYPE}`, { path });
    if (request.depth <= 1 && treeEntryCount(view.store, repo.id, value.oid) <= FRONT_END_LISTING_ENTRIES) {
      return { status: 200, schema: 'contentDir', value: dirJson(storage, repo.id, view, path, value, request) };
    }
    return pooled(ctx, ref, request);
  }
  if (value.mode === '160000') {
    if (format === RAW_TYPE) throw new ServiceError('NOT_ACCEPTABLE', `${JSON.stringify(path)} is a submodule: it has no raw bytes here`, { path });
    return { status: 200, schema: 'contentFile', value: fileJson(storage, repo.id, view, path, value) };
  }
  if (format === RAW_TYPE) return rawReply(ctx, view, value.oid);
  const size = view.store.size(value.oid) ?? 0;
  const limit = ctx.services.config.jsonContentLimit;
  if (size > limit) {
    throw new ServiceError('NOT_ACCEPTABLE', `${JSON.stringify(path)} has ${size} bytes, more than the JSON limit of ${limit}: ask for ${RAW_TYPE}`, {
      path,
      size,
      limit,
      accept: RAW_TYPE,
    });
  }
  if (size <= FRONT_END_FILE_BYTES) return { status: 200, schema: 'contentFile', value: fileJson(storage, repo.id, view, path, value, ctx.services.records) };
  return pooled(ctx, ref, request);
}

async function pooled(ctx: RequestContext, ref: ChangeRef, request: ContentRequest): Promise<Reply> {
  const body = (await readPool(ctx.services.config.dataDir).run({ kind: 'content', repoId: ctx.repo!.id, ref, request })) as Uint8Array;
  return { status: 200, json: body };
}

export const contentRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/{org}/{repo}/content',
    permission: 'git:read',
    query: {
      open: true,
      keys: {
        change_id: { type: 'string', maxLength: 64 },
        path: { type: 'string', maxLength: 16 * 1024 },
        depth: { type: 'int', min: 0, max: 10, default: 1 },
      },
    },
    handler(ctx) {
      const format = negotiateOrRefuse(ctx.headers.accept, [JSON_TYPE, RAW_TYPE]);
      const repo = ctx.repo!;
      if (format === RAW_TYPE) {
        const file = keptRawFile(repo, ctx.query.change_id as string | undefined, ctx.query.path as string | undefined);
        if (file) return { status: 200, text: file.content, headers: file.headers };
      }
      const records = ctx.services.records;
      const changeId = (ctx.query.change_id as string | undefined) || headChangeId(records, repo);
      const ref = resolveChange(records, repo.id, changeId, 'change_id');
      const path = contentPath(ctx.query.path as string | undefined);
      const request: ContentRequest = { path, depth: ctx.query.depth as number, filters: metadataFilters(ctx.queryPairs) };
      // Answered without a promise unless a conflicted commit must first be materialized.
      const ready = openChangeView(ctx.services.storage, repo.id, ref, { materialize: false });
      if (ready) return answer(ctx, ref, request, format, ready);
      return materializedView(ctx, ref).then((view) => answer(ctx, ref, request, format, view));
    },
  },
];
