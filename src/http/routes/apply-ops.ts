import { ServiceError, invalid, isServiceError } from '../../errors.js';
import { normalizePath } from '../../vcs/paths.js';
import { applyOpsBody, MAX_WRITE_ITEMS } from '../../protocol/schemas/changes.js';
import type { BookmarkInput, ChangeWriteInput, WriteOpInput } from '../../actors/commands/apply-ops.js';
import type { AuthorsInput } from '../../actors/commands/repo-writes.js';
import type { ConflictResolution } from '../../vcs/conflict.js';
import type { Attribution } from '../../vcs/commit.js';
import type { FileMode } from '../../vcs/git-object.js';
import { compileBodyCheck, type BodyCheck } from '../body-validator.js';
import { callActor } from '../actor-call.js';
import { repoActor } from '../../actors/actor-names.js';
import { WRITE_BODY_LIMIT, isValidBase64, readWriteBody, type ContentEncoding, type ContentRef, type ParsedWriteBody } from '../apply-ops-parser.js';
import type { Reply, RequestContext, RouteDef } from '../route.js';

/**
 * `POST /{org}/{repo}/apply-ops` (API §5.4) and the body handling it shares with the change
 * routes: read the body (streamed when large), check its schema and every op's fields and paths
 * (errors name the op index), then send the repository's actor a small message — inline contents
 * or references to staged blobs, never a large content.
 */
const checkApplyOps = compileBodyCheck(applyOpsBody);

/** The checked path, or 400 naming the item. */
function path(value: unknown, where: string, field = 'path'): string {
  if (typeof value !== 'string') throw invalid(`${where}: "${field}" is required`, { op_index: indexOf(where) });
  try {
    return normalizePath(value);
  } catch (err) {
    if (isServiceError(err)) throw new ServiceError(err.code, `${where}: ${err.message}`, { ...err.details, op_index: indexOf(where) });
    throw err;
  }
}

function indexOf(where: string): number {
  return Number(/\[(\d+)\]/.exec(where)?.[1] ?? -1);
}

function only(item: Record<string, unknown>, allowed: readonly string[], where: string, what: string): void {
  for (const key of Object.keys(item)) {
    if (item[key] !== null && item[key] !== undefined && !allowed.includes(key)) throw invalid(`${where}: "${key}" is not allowed for ${what}`, { op_index: indexOf(where) });
  }
}

/** The write's content as the actor takes it: inline text, or a staged blob. */
function content(item: Record<string, unknown>, ref: ContentRef | undefined, encoding: ContentEncoding, where: string): Partial<Extract<WriteOpInput, { op: 'write' }>> {
  if (!ref) {
    const text = item.content as string;
    if (encoding === 'base64' && !isValidBase64(text)) throw invalid(`${where}: content is not valid base64`, { op_index: indexOf(where) });
    return { content: text, encoding };
  }
  if (ref.kind === 'staged') return { staged: ref.blob };
  return { content: ref.bytes.toString('base64'), encoding: 'base64' };
}

function applyOpsItems(items: Array<Record<string, unknown>>, contents: Map<number, ContentRef>): WriteOpInput[] {
  return items.map((item, i) => {
    const where = `ops[${i}]`;
    switch (item.op) {
      case 'write': {
        only(item, ['op', 'path', 'content', 'encoding', 'mode', 'blob_oid'], where, 'write');
        const hasContent = typeof item.content === 'string';
        const hasBlob = typeof item.blob_oid === 'string';
        if (hasContent === hasBlob) throw invalid(`${where}: a write needs exactly one of "content" or "blob_oid"`, { op_index: i });
        if (hasBlob && item.encoding != null) throw invalid(`${where}: "encoding" goes with "content", not "blob_oid"`, { op_index: i });
        const op: WriteOpInput = { op: 'write', path: path(item.path, where), mode: (item.mode as FileMode | null) ?? null };
        if (hasBlob) return { ...op, blob_oid: item.blob_oid as string };
        return { ...op, ...content(item, contents.get(i), (item.encoding as ContentEncoding | null) ?? 'utf-8', where) };
      }
      case 'delete':
        only(item, ['op', 'path'], where, 'delete');
        return { op: 'delete', path: path(item.path, where) };
      case 'rename':
        only(item, ['op', 'from', 'to'], where, 'rename');
        return { op: 'rename', from: path(item.from, where, 'from'), to: path(item.to, where, 'to') };
      default:
        only(item, ['op', 'path', 'metadata'], where, 'set_metadata');
        if (!item.metadata) throw invalid(`${where}: "metadata" is required for set_metadata`, { op_index: i });
        return { op: 'set_metadata', path: path(item.path, where), metadata: item.metadata as Record<string, string | null> };
    }
  });
}

/** `files` of §5.3 (`{path, content (base64), encoding?, action?, mode?}`) as ops. */
export function fileItems(items: Array<Record<string, unknown>>, contents: Map<number, ContentRef>): WriteOpInput[] {
  return items.map((item, i) => {
    const where = `files[${i}]`;
    if (item.action === 'delete') {
      only(item, ['path', 'action'], where, 'a delete');
      return { op: 'delete', path: path(item.path, where) };
    }
    if (typeof item.content !== 'string') throw invalid(`${where}: "content" is required`, { op_index: i });
    return { op: 'write', path: path(item.path, where), mode: (item.mode as FileMode | null) ?? null, ...content(item, contents.get(i), 'base64', where) };
  });
}

/** The fields every write body shares, as the actor takes them. */
export function writeInput(ctx: RequestContext, body: Record<string, unknown>, ops: WriteOpInput[], listKey: 'ops' | 'files'): ChangeWriteInput {
  return {
    repo_id: ctx.repo!.id,
    message: (body.message as string | null | undefined) ?? null,
    author: body.author as AuthorsInput['author'],
    committer: body.committer as AuthorsInput['committer'],
    authors: body.authors as AuthorsInput['authors'],
    attribution: (body.attribution as Attribution | null | undefined) ?? null,
    resolutions: (body.resolutions as ConflictResolution[] | null | undefined) ?? null,
    ops,
    list_key: listKey,
  };
}

export interface WriteRoute {
  listKey: 'ops' | 'files';
  check: BodyCheck;
  command: string;
  toInput(ctx: RequestContext, parsed: ParsedWriteBody): ChangeWriteInput;
}

/**
 * Reads, checks and sends a write. Staged blobs are dropped when the write fails — except when
 * the failure leaves it unknown whether the actor applied it (its worker died: UNAVAILABLE).
 */
export async function handleWrite(ctx: RequestContext, route: WriteRoute): Promise<Reply> {
  const parsed = await readWriteBody(ctx.bodyStream!, ctx.headers, {
    storage: ctx.services.storage,
    repoId: ctx.repo!.id,
    listKey: route.listKey,
    defaultEncoding: route.listKey === 'ops' ? 'utf-8' : 'base64',
    encodingFixed: route.listKey === 'files',
    maxItems: MAX_WRITE_ITEMS,
  });
  try {
    route.check(parsed.body);
    return await callActor(ctx, repoActor(ctx.repo!.id), route.command, route.toInput(ctx, parsed));
  } catch (err) {
    if (!isServiceError(err) || err.code !== 'UNAVAILABLE') await parsed.discard();
    throw err;
  }
}

export const applyOpsRoutes: RouteDef[] = [
  {
    method: 'POST',
    path: '/{org}/{repo}/apply-ops',
    permission: 'git:write',
    streamBody: true,
    bodyLimit: WRITE_BODY_LIMIT,
    handler: (ctx) =>
      handleWrite(ctx, {
        listKey: 'ops',
        check: checkApplyOps,
        command: 'apply-ops',
        toInput(c, { body, contents }) {
          const evolve = body.change_id != null;
          if (evolve === (body.base_change_id != null)) throw invalid('give exactly one of "change_id" (evolve a change) or "base_change_id" (create one on top)');
          if (!evolve && body.expected_commit_oid != null) throw invalid('"expected_commit_oid" guards "change_id"; it cannot be used with "base_change_id"');
          const input = writeInput(c, body, applyOpsItems((body.ops as Array<Record<string, unknown>> | undefined) ?? [], contents), 'ops');
          input.change_id = body.change_id as string | null;
          input.base_change_id = body.base_change_id as string | null;
          input.expected_commit_oid = body.expected_commit_oid as string | null;
          input.bookmarks = (body.bookmarks as BookmarkInput[] | null | undefined) ?? null;
          return input;
        },
      }),
  },
];
