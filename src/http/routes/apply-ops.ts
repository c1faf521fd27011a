import { invalid, isServiceError } from '../../errors.js';
import { VcsError, inOp } from '../../vcs/errors.js';
import { normalizePath } from '../../vcs/paths.js';
import { isGiven } from '../../protocol/schemas/body-schema.js';
import { applyOpsBody, type ContentEncoding, type FileInput, type OpInput } from '../../protocol/schemas/changes.js';
import type { ChangeWriteInput, WriteOpInput } from '../../actors/commands/apply-ops.js';
import { compileBodyCheck, type BodyCheck } from '../body-validator.js';
import { callActor } from '../actor-call.js';
import { repoActor } from '../../actors/actor-names.js';
import { WRITE_BODY_LIMIT, readWriteBody } from '../write-body-reader.js';
import { isValidBase64 } from '../base64-decoder.js';
import type { ContentRef } from '../content-sink.js';
import { ContentEncoder } from '../content-encoder.js';
import type { Reply, RequestContext, RouteDef } from '../route.js';

/**
 * `POST /{org}/{repo}/apply-ops` (API §5.4) and the body handling it shares with the change
 * routes: read the body (streamed when large), check it against its schema (errors name the op
 * index), then send the repository's actor a small message — contents hashed and encoded by the
 * front end as the objects it stores (content-encoder.ts), or references to staged blobs, never a
 * large content.
 */
const checkApplyOps = compileBodyCheck(applyOpsBody);

type WriteContent = Pick<Extract<WriteOpInput, { op: 'write' }>, 'staged' | 'encoded'>;

/** The op an error is about: `ops[3]` or `files[3]` (API §5.4: errors name the op index). */
interface Where {
  list: 'ops' | 'files';
  index: number;
}

/**
 * A path checked at the door (the tree editor checks it again): a bad one is refused before any
 * content is staged or the actor is asked, whatever else the op names.
 */
function checkedPath(path: string, where: Where): string {
  try {
    return normalizePath(path);
  } catch (err) {
    throw err instanceof VcsError ? inOp(err, where.list, where.index) : err;
  }
}

/** A write's content as the actor takes it: a blob the body reader staged, or one for `encoder`. */
function content(text: string, ref: ContentRef | undefined, encoding: ContentEncoding, where: Where, encoder: ContentEncoder): WriteContent {
  if (ref?.kind === 'staged') return { staged: ref.blob };
  if (!ref && encoding === 'base64' && !isValidBase64(text)) throw invalid(`${where.list}[${where.index}]: content is not valid base64`, { op_index: where.index });
  return { encoded: encoder.add(ref ? ref.bytes : Buffer.from(text, encoding === 'base64' ? 'base64' : 'utf8')) };
}

function opInputs(ops: readonly OpInput[], contents: Map<number, ContentRef>, encoder: ContentEncoder): WriteOpInput[] {
  return ops.map((op, index): WriteOpInput => {
    const where: Where = { list: 'ops', index };
    switch (op.op) {
      case 'write': {
        const path = checkedPath(op.path, where);
        const mode = op.mode ?? null;
        if (isGiven(op, 'blob_oid')) return { op: 'write', path, mode, blob_oid: op.blob_oid };
        return { op: 'write', path, mode, ...content(op.content, contents.get(index), op.encoding ?? 'utf-8', where, encoder) };
      }
      case 'rename':
        return { op: 'rename', from: checkedPath(op.from, where), to: checkedPath(op.to, where) };
      default:
        return { ...op, path: checkedPath(op.path, where) };
    }
  });
}

/** `files` of §5.3 (`{path, content (base64), encoding?, action?, mode?}`) as ops. */
export function fileInputs(files: readonly FileInput[], contents: Map<number, ContentRef>, encoder: ContentEncoder): WriteOpInput[] {
  return files.map((file, index): WriteOpInput => {
    const where: Where = { list: 'files', index };
    const path = checkedPath(file.path, where);
    if (file.action === 'delete') return { op: 'delete', path };
    return { op: 'write', path, mode: file.mode ?? null, ...content(file.content, contents.get(index), 'base64', where, encoder) };
  });
}

/** The body fields every write shares, as the actor takes them. */
type WriteBody = Pick<ChangeWriteInput, 'message' | 'author' | 'committer' | 'authors' | 'attribution' | 'resolutions'>;

export function writeFields(ctx: RequestContext, body: WriteBody, ops: WriteOpInput[], listKey: 'ops' | 'files'): Omit<ChangeWriteInput, 'change_id' | 'base_change_id'> {
  return {
    repo_id: ctx.repo!.id,
    message: body.message ?? null,
    author: body.author,
    committer: body.committer,
    authors: body.authors,
    attribution: body.attribution ?? null,
    resolutions: body.resolutions ?? null,
    ops,
    list_key: listKey,
  };
}

export interface WriteRoute<Body> {
  listKey: 'ops' | 'files';
  check: BodyCheck<Body>;
  command: string;
  /** Contents not staged go to `encoder`, whose values the actor's message carries. */
  toInput(ctx: RequestContext, body: Body, contents: Map<number, ContentRef>, encoder: ContentEncoder): ChangeWriteInput;
}

/**
 * What every route served by `handleWrite` declares: the body is read as a stream (up to the
 * write limit) and the command runs in the repository's actor.
 */
export const WRITE_ROUTE = {
  permission: 'git:write',
  actor: 'repo',
  streamBody: true,
  bodyLimit: WRITE_BODY_LIMIT,
} as const satisfies Partial<RouteDef>;

/**
 * Reads, checks and sends a write. Staged blobs are dropped when the write fails — except when
 * the failure leaves it unknown whether the actor applied it (its worker died: UNAVAILABLE).
 */
export async function handleWrite<Body>(ctx: RequestContext, route: WriteRoute<Body>): Promise<Reply> {
  const parsed = await readWriteBody(ctx.bodyStream!, ctx.headers, {
    storage: ctx.services.storage,
    repoId: ctx.repo!.id,
    listKey: route.listKey,
    defaultEncoding: route.listKey === 'ops' ? 'utf-8' : 'base64',
    encodingFixed: route.listKey === 'files',
  });
  try {
    const body = route.check(parsed.body);
    const encoder = new ContentEncoder();
    const input = route.toInput(ctx, body, parsed.contents, encoder);
    // The input's oids are set here: it is serialized only after.
    const blobs = await encoder.encode();
    return await callActor(ctx, repoActor(ctx.repo!.id), route.command, input, blobs);
  } catch (err) {
    if (!isServiceError(err) || err.code !== 'UNAVAILABLE') await parsed.discard();
    throw err;
  }
}

export const applyOpsRoutes: RouteDef[] = [
  {
    method: 'POST',
    path: '/{org}/{repo}/apply-ops',
    ...WRITE_ROUTE,
    handler: (ctx) =>
      handleWrite(ctx, {
        listKey: 'ops',
        check: checkApplyOps,
        command: 'apply-ops',
        toInput(c, body, contents, encoder) {
          const fields = { ...writeFields(c, body, opInputs(body.ops ?? [], contents, encoder), 'ops'), bookmarks: body.bookmarks ?? null };
          if (isGiven(body, 'change_id')) return { ...fields, change_id: body.change_id, expected_commit_oid: body.expected_commit_oid ?? null };
          return { ...fields, base_change_id: body.base_change_id };
        },
      }),
  },
];
