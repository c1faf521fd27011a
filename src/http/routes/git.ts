import { invalid, isServiceError, ServiceError } from '../../errors.js';
import { packPool } from '../../actors/read-pool.js';
import { receivePool } from '../../actors/receive-pool.js';
import { serveAllowance } from '../../actors/allowance-port.js';
import type { RefUpdate } from '../../git/receive-request.js';
import { errorLine, reportStatus, type RefStatus } from '../../git/receive-report.js';
import { advertiseReceivePack } from '../../git/receive-pack.js';
import { refCountAtMost } from '../../storage/git-refs.js';
import { MAX_REQUEST_BYTES, type UploadPackRequest } from '../../git/upload-pack.js';
import { newId } from '../../storage/ids.js';
import { callActor } from '../actor-call.js';
import type { Reply, RequestContext, RouteDef } from '../route.js';

/**
 * git's smart HTTP (API §14) at `/{org}/{repo}.git/…` and the same without `.git`, outside `/v1`.
 * Clone and fetch: the ref advertisement and upload-pack run on the pack pool from one snapshot
 * and stream back. Push: the receive pool reads the commands and the pack as the body arrives
 * (receive-pack.ts), the repository's actor applies the push (commands/push.ts), and the report
 * git prints is written here. The front end only moves bytes, and lists the refs of a push to a
 * repository with few of them.
 */
const UPLOAD_PACK = 'git-upload-pack';
const RECEIVE_PACK = 'git-receive-pack';

/** `Git-Protocol: version=2` (colon-separated parameters) asks for protocol v2. */
function protocolVersion(ctx: RequestContext): 0 | 2 {
  return (ctx.headers['git-protocol'] ?? '').split(':').includes('version=2') ? 2 : 0;
}

async function serve(ctx: RequestContext, request: Omit<UploadPackRequest, 'repoId' | 'version'>, contentType: string): Promise<Reply> {
  const stream = await packPool(ctx.services.config.dataDir).stream({
    kind: 'upload-pack',
    request: { ...request, repoId: ctx.repo!.id, version: protocolVersion(ctx) },
  });
  return { status: 200, stream, length: null, headers: { 'Content-Type': contentType, 'Cache-Control': 'no-cache' } };
}

/**
 * Up to this many branches and tags, the front end lists them for a push itself (a read like a
 * page of bookmarks): each push starts with this request, and a hop to another thread costs more
 * than the listing under load. Larger repositories are listed on the receive pool.
 */
const FRONT_END_REFS = 1000;

const gitReply = (body: Uint8Array, contentType: string): Reply => ({ status: 200, text: body, headers: { 'Content-Type': contentType, 'Cache-Control': 'no-cache' } });

async function advertise(ctx: RequestContext): Promise<Reply> {
  if (ctx.query.service === RECEIVE_PACK) {
    // One route serves both services: pushing needs more than the route's own permission.
    if (!ctx.principal.permissions.has('git:write')) throw new ServiceError('FORBIDDEN', 'this token lacks the permission git:write');
    const { services } = ctx;
    const repoId = ctx.repo!.id;
    const refs = refCountAtMost(services.storage, repoId, FRONT_END_REFS) ? advertiseReceivePack(services.storage, repoId) : await receivePool(services.config.dataDir).advertise(repoId);
    return gitReply(refs, `application/x-${RECEIVE_PACK}-advertisement`);
  }
  // The dumb protocol (no service) is not served.
  if (ctx.query.service !== UPLOAD_PACK) throw new ServiceError('NOT_FOUND', `the git service ${JSON.stringify(ctx.query.service ?? null)} is not served here`);
  return serve(ctx, { phase: 'advertise', body: null, gzip: false }, `application/x-${UPLOAD_PACK}-advertisement`);
}

/** Whether a git request body is gzip (the only encoding git uses); checks its type first. */
function gzipBody(ctx: RequestContext, service: string): boolean {
  if (ctx.headers['content-type'] !== `application/x-${service}-request`) throw invalid(`the request must be sent with Content-Type: application/x-${service}-request`);
  const encoding = (ctx.headers['content-encoding'] ?? '').toLowerCase();
  if (encoding !== '' && encoding !== 'gzip' && encoding !== 'x-gzip') throw invalid(`Content-Encoding ${encoding} is not supported (gzip is)`);
  return encoding !== '';
}

function uploadPack(ctx: RequestContext): Promise<Reply> {
  return serve(ctx, { phase: 'command', body: ctx.body as Buffer, gzip: gzipBody(ctx, UPLOAD_PACK) }, `application/x-${UPLOAD_PACK}-result`);
}

/** Every update refused for the same reason (a pack that failed, or a push the repository refused whole). */
const refusedAll = (updates: readonly RefUpdate[]): RefStatus[] => updates.map((u) => ({ ref: u.ref, error: 'unpacker error' }));

async function receivePack(ctx: RequestContext): Promise<Reply> {
  const gzip = gzipBody(ctx, RECEIVE_PACK);
  const { config } = ctx.services;
  const repoId = ctx.repo!.id;
  const allowance = config.orgQuotaBytes > 0 ? serveAllowance(ctx.services.runtime, ctx.org.id, repoId, ctx.traceId) : null;
  let outcome;
  try {
    outcome = await receivePool(config.dataDir).receive(
      { repoId, pushId: newId('push'), gzip, maxPushBytes: config.maxPushBytes, quotaBytes: config.orgQuotaBytes, disk: { dataDir: config.dataDir, minFreeBytes: config.minFreeBytes } },
      ctx.bodyStream!,
      allowance?.port ?? null,
    );
  } finally {
    allowance?.close();
  }
  const reply = (body: Uint8Array): Reply => gitReply(body, `application/x-${RECEIVE_PACK}-result`);
  if (outcome.kind === 'nothing') return reply(new Uint8Array(0));
  if (outcome.kind === 'protocol-error') return reply(errorLine(outcome.message));
  if (outcome.kind === 'unpack-failed') return reply(reportStatus(outcome.capabilities, outcome.reason, refusedAll(outcome.updates)));
  const { capabilities, command } = outcome;
  try {
    const result = await callActor(ctx, `repo:${repoId}`, 'git.push', command);
    const body = 'json' in result ? result.json : '{}';
    const { refs } = JSON.parse(Buffer.from(body).toString('utf8')) as { refs: RefStatus[] };
    return reply(reportStatus(capabilities, null, refs));
  } catch (err) {
    // Refused whole by the repository (the org quota, the repository deleted meanwhile): git shows why.
    if (!isServiceError(err) || err.status >= 500) throw err;
    return reply(reportStatus(capabilities, err.message, refusedAll(command.updates)));
  }
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
  {
    method: 'POST',
    path: `${base}/${RECEIVE_PACK}`,
    permission: 'git:write',
    git: true,
    streamBody: true,
    // The pack is capped by REPOHOST_MAX_PUSH_BYTES as it is read (receive-pack.ts).
    bodyLimit: Number.MAX_SAFE_INTEGER,
    handler: receivePack,
  },
];

export const gitRoutes: RouteDef[] = [...routesAt('/{org}/{repo}.git'), ...routesAt('/{org}/{repo}')];
