import { invalid, isServiceError } from '../../errors.js';
import { BlobStager } from '../../storage/blob-store.js';
import type { BlobStoreInput } from '../../actors/commands/apply-ops.js';
import { callActor } from '../actor-call.js';
import { repoActor } from '../../actors/actor-names.js';
import { ensureRoom } from '../../actors/quota-refill.js';
import { MAX_CONTENT_BYTES } from '../content-sink.js';
import type { RouteDef } from '../route.js';

/**
 * `POST /{org}/{repo}/blobs` (API §5.4): the raw bytes of one file, streamed into chunks as they
 * arrive (hashed on the way when the length is declared), then committed as a blob by the
 * repository's actor. Later writes reference it by `blob_oid`. A declared length that cannot fit
 * in the org's quota is refused before a byte is staged (its shard is granted the room first);
 * the actor decides for the others.
 */
export const blobRoutes: RouteDef[] = [
  {
    method: 'POST',
    path: '/{org}/{repo}/blobs',
    permission: 'git:write',
    actor: 'repo',
    streamBody: true,
    bodyLimit: MAX_CONTENT_BYTES,
    async handler(ctx) {
      if (!/^application\/octet-stream\s*(;|$)/i.test(ctx.headers['content-type'] ?? '')) {
        throw invalid('a blob upload must be sent with Content-Type: application/octet-stream');
      }
      const declared = ctx.headers['content-length'] ? Number(ctx.headers['content-length']) : null;
      const { runtime, storage, config } = ctx.services;
      if (declared !== null && Number.isFinite(declared)) await ensureRoom(runtime, storage, ctx.org.id, ctx.repo!.id, config.orgQuotaBytes, declared, ctx.traceId);
      const stager = new BlobStager(storage, ctx.repo!.id, declared !== null && Number.isFinite(declared) ? declared : null);
      try {
        for await (const chunk of ctx.bodyStream!) await stager.append(chunk);
        const input: BlobStoreInput = { repo_id: ctx.repo!.id, blob: await stager.finish() };
        return await callActor(ctx, repoActor(ctx.repo!.id), 'blob.store', input);
      } catch (err) {
        if (!isServiceError(err) || err.code !== 'UNAVAILABLE') await stager.discard();
        throw err;
      }
    },
  },
];
