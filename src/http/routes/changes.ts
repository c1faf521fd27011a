import { BinaryHeap } from '../../binary-heap.js';
import { readPool } from '../../actors/read-pool.js';
import { invalid, notFound } from '../../errors.js';
import { readChangeCommit } from '../../vcs/commit.js';
import { ROOT_CHANGE_ID, isChangeId } from '../../vcs/ids.js';
import { createChangeBody, patchChangeBody } from '../../protocol/schemas/changes.js';
import { changeView, type ChangeView, type EvolutionView } from '../../protocol/views/change.js';
import { evolutionOf, getChange, objectStore } from '../../storage/change-store.js';
import type { ChangeRecord } from '../../storage/records.js';
import { getBookmark } from '../../storage/repo-store.js';
import { compileBodyCheck } from '../body-validator.js';
import { decodeCursor, encodeCursor, hasString } from '../cursor.js';
import type { RequestContext, RouteDef } from '../route.js';
import { changeDetailWithin } from '../../storage/read/change-detail.js';
import { WRITE_ROUTE, fileInputs, handleWrite, writeFields } from './apply-ops.js';

/**
 * Change routes (API §5): reads from an LMDB snapshot on this thread (a large change's files on the
 * read pool: storage/read/change-detail.ts), writes through the repository's actor with the apply-ops
 * body handling (`files` may carry 512 MiB contents).
 */
const checkCreate = compileBodyCheck(createChangeBody);
/** Trees a change's walk may read on this thread (about 3,000 entries, a millisecond or two) before the read pool takes it. */
const INLINE_TREE_BYTES = 128 * 1024;
const checkPatch = compileBodyCheck(patchChangeBody);

function changeParam(ctx: RequestContext): ChangeRecord {
  const id = ctx.params.change_id!;
  if (!isChangeId(id)) throw invalid(`"${id}" is not a change id (32 characters k-z)`);
  const record = id === ROOT_CHANGE_ID ? undefined : getChange(ctx.services.records, ctx.repo!.id, id);
  if (!record) throw notFound('CHANGE_NOT_FOUND', `change ${id} not found`, { change_id: id });
  return record;
}

function view(ctx: RequestContext, record: ChangeRecord): ChangeView {
  return changeView(record, readChangeCommit(objectStore(ctx.services.storage, ctx.repo!.id), record.commit_oid));
}

// ---- topological listing (API §5.5) -----------------------------------------------------

interface Node {
  record: ChangeRecord;
}

/** Children before parents: higher generation first, then newer, then id. A strict total order. */
function before(a: Node, b: Node): boolean {
  const x = a.record;
  const y = b.record;
  if (x.generation !== y.generation) return x.generation > y.generation;
  if (x.created_at !== y.created_at) return x.created_at > y.created_at;
  return x.id < y.id;
}

/** The changes reached but not listed yet (the walk's frontier), in listing order. */
class Frontier {
  private readonly heap = new BinaryHeap(before);
  readonly ids = new Set<string>();

  get size(): number {
    return this.heap.size;
  }

  push(node: Node): void {
    if (this.ids.has(node.record.id)) return;
    this.ids.add(node.record.id);
    this.heap.push(node);
  }

  pop(): Node {
    const top = this.heap.pop()!;
    this.ids.delete(top.record.id);
    return top;
  }
}

interface ListCursor extends Record<string, unknown> {
  /** The pinned target of the first page. */
  t: string;
  /** Changes reached but not yet listed. */
  f: string[];
}

const isListCursor = (v: Record<string, unknown>): v is ListCursor =>
  typeof v.t === 'string' && isChangeId(v.t) && Array.isArray(v.f) && v.f.length <= 100_000 && v.f.every((id) => typeof id === 'string' && isChangeId(id));

/**
 * Because parents always sort after their children, popping the frontier in order lists the
 * history from the target in topological order, and the frontier alone is enough to resume: a
 * cursor carries it (and the pinned target), so pages survive writes and moves in between.
 */
function listChanges(ctx: RequestContext): { changes: ChangeView[]; next_cursor: string | null; has_more: boolean } {
  const meta = ctx.services.storage.meta;
  const repo = ctx.repo!;
  const cursor = decodeCursor(ctx.query.cursor, isListCursor);
  const frontier = new Frontier();
  const add = (id: string): void => {
    if (id === ROOT_CHANGE_ID || frontier.ids.has(id)) return;
    const record = getChange(meta, repo.id, id);
    if (record) frontier.push({ record });
  };
  let target: string;
  if (cursor) {
    target = cursor.t;
    cursor.f.forEach(add);
  } else {
    const name = (ctx.query.bookmark as string | undefined) || repo.default_bookmark;
    const bookmark = getBookmark(meta, repo.id, name);
    if (!bookmark) throw notFound('BRANCH_NOT_FOUND', `bookmark "${name}" not found`, { bookmark: name });
    target = bookmark.change_id;
    add(target);
  }
  const limit = ctx.query.limit as number;
  const changes: ChangeView[] = [];
  while (frontier.size > 0 && changes.length < limit) {
    const { record } = frontier.pop();
    changes.push(view(ctx, record));
    record.parents.forEach(add);
  }
  const hasMore = frontier.size > 0;
  return { changes, next_cursor: hasMore ? encodeCursor({ t: target, f: [...frontier.ids] }) : null, has_more: hasMore };
}

export const changeRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/{org}/{repo}/changes',
    // API §3: the brief lists this read under the write scope.
    permission: 'git:write',
    query: { keys: { cursor: { type: 'string', maxLength: 64 * 1024 }, limit: { type: 'int', min: 1, max: 200, default: 50 }, bookmark: { type: 'string', maxLength: 1024 } } },
    handler: (ctx) => ({ status: 200, schema: 'changePage', value: listChanges(ctx) }),
  },
  {
    method: 'POST',
    path: '/{org}/{repo}/changes',
    ...WRITE_ROUTE,
    handler: (ctx) =>
      handleWrite(ctx, {
        listKey: 'files',
        check: checkCreate,
        command: 'change.create',
        toInput: (c, body, contents, encoder) => ({ ...writeFields(c, body, fileInputs(body.files ?? [], contents, encoder), 'files'), base_change_id: body.base_change_id }),
      }),
  },
  {
    method: 'GET',
    path: '/{org}/{repo}/changes/{change_id}',
    permission: 'git:read',
    handler(ctx) {
      const record = changeParam(ctx);
      const here = changeDetailWithin(ctx.services.storage, ctx.repo!.id, record, INLINE_TREE_BYTES);
      if (here) return { status: 200, schema: 'changeDetail', value: here };
      const task = readPool(ctx.services.config.dataDir).run({ kind: 'change-detail', repoId: ctx.repo!.id, changeId: record.id });
      return task.then((body) => ({ status: 200, json: body as Uint8Array }));
    },
  },
  {
    method: 'PATCH',
    path: '/{org}/{repo}/changes/{change_id}',
    ...WRITE_ROUTE,
    handler: (ctx) => {
      const id = ctx.params.change_id!;
      if (!isChangeId(id)) throw invalid(`"${id}" is not a change id (32 characters k-z)`);
      return handleWrite(ctx, {
        listKey: 'files',
        check: checkPatch,
        command: 'change.update',
        toInput: (c, body, contents, encoder) => ({
          ...writeFields(c, body, fileInputs(body.files ?? [], contents, encoder), 'files'),
          change_id: id,
          expected_commit_oid: body.base_commit_oid ?? null,
        }),
      });
    },
  },
  {
    method: 'GET',
    path: '/{org}/{repo}/changes/{change_id}/evolution',
    permission: 'git:read',
    query: { keys: { cursor: { type: 'string', maxLength: 1024 }, limit: { type: 'int', min: 1, max: 200, default: 50 } } },
    handler(ctx) {
      const record = changeParam(ctx);
      const cursor = decodeCursor(ctx.query.cursor, hasString('before'));
      const limit = ctx.query.limit as number;
      const evolution: EvolutionView[] = [];
      let hasMore = false;
      let last: string | null = null;
      for (const { id, record: entry } of evolutionOf(ctx.services.storage.meta, ctx.repo!.id, record.id, cursor?.before)) {
        if (evolution.length === limit) {
          hasMore = true;
          break;
        }
        evolution.push(entry);
        last = id;
      }
      return {
        status: 200,
        schema: 'evolutionPage',
        value: { evolution, next_cursor: hasMore && last ? encodeCursor({ before: last }) : null, has_more: hasMore },
      };
    },
  },
];
