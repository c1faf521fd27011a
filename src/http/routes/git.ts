import { invalid, ServiceError } from '../../errors.js';
import { readPool } from '../../actors/read-pool.js';
import { MAX_REQUEST_BYTES, type UploadPackRequest } from '../../git/upload-pack.js';
import type { Reply, RequestContext, RouteDef } from '../route.js';

/**
 * git's smart HTTP (API §14), for clone and fetch: the ref advertisement and upload-pack, at
 * `/{org}/{repo}.git/…` and the same without `.git`, outside `/v1`. Everything past the route —
 * refs, negotiation, the object walk and the pack — runs on the read pool from one snapshot and
 * streams back, so the front end only moves bytes.
 */
const UPLOAD_PACK = 'git-upload-pack';

/** `Git-Protocol: version=2` (colon-separated parameters) asks for protocol v2. */
function protocolVersion(ctx: RequestContext): 0 | 2 {
  return (ctx.headers['git-protocol'] ?? '').split(':').includes('version=2') ? 2 : 0;
}

async function serve(ctx: RequestContext, request: Omit<UploadPackRequest, 'repoId' | 'version'>, contentType: string): Promise<Reply> {
  const stream = await readPool(ctx.services.config.dataDir).stream({
    kind: 'upload-pack',
    request: { ...request, repoId: ctx.repo!.id, version: protocolVersion(ctx) },
  });
  return { status: 200, stream, length: null, headers: { 'Content-Type': contentType, 'Cache-Control': 'no-cache' } };
}

function advertise(ctx: RequestContext): Promise<Reply> {
  // Only fetching is served; the dumb protocol (no service) and push are not.
  if (ctx.query.service !== UPLOAD_PACK) throw new ServiceError('NOT_FOUND', `the git service ${JSON.stringify(ctx.query.service ?? null)} is not served here`);
  return serve(ctx, { phase: 'advertise', body: null, gzip: false }, `application/x-${UPLOAD_PACK}-advertisement`);
}

function uploadPack(ctx: RequestContext): Promise<Reply> {
  if (ctx.headers['content-type'] !== `application/x-${UPLOAD_PACK}-request`) throw invalid(`the request must be sent with Content-Type: application/x-${UPLOAD_PACK}-request`);
  const encoding = (ctx.headers['content-encoding'] ?? '').toLowerCase();
  if (encoding !== '' && encoding !== 'gzip' && encoding !== 'x-gzip') throw invalid(`Content-Encoding ${encoding} is not supported (gzip is)`);
  return serve(ctx, { phase: 'command', body: ctx.body as Buffer, gzip: encoding !== '' }, `application/x-${UPLOAD_PACK}-result`);
}

const routesAt = (base: string): RouteDef[] => [
  {
    method: 'GET',
    path: `${base}/info/refs`,
    permission: 'git:read',
    git: true,
    query: { keys: { service: { type: 'string', maxLength: 64 } } },
    handler: advertise,
  },
  {
    method: 'POST',
    path: `${base}/${UPLOAD_PACK}`,
    permission: 'git:read',
    git: true,
    rawBody: true,
    bodyLimit: MAX_REQUEST_BYTES,
    handler: uploadPack,
  },
];

export const gitRoutes: RouteDef[] = [...routesAt('/{org}/{repo}.git'), ...routesAt('/{org}/{repo}')];
