import { invalid } from '../../errors.js';
import { readPool } from '../../actors/read-pool.js';
import type { DiffFormat } from '../../actors/read-tasks.js';
import { resolveChange } from '../../storage/read/change-view.js';
import type { ConflictsMode } from '../../vcs/read/structured-diff.js';
import { negotiateOrRefuse } from '../negotiation.js';
import type { RouteDef } from '../route.js';

/**
 * `GET /{org}/{repo}/diff` (API §8). The front end resolves both changes (404s come from here);
 * the diff itself — tree walk, line diffs, conflict hunks, the patch — runs on the read pool.
 */
const OFFERS = ['application/json', 'text/plain'] as const;

export const diffRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/{org}/{repo}/diff',
    permission: 'git:read',
    query: {
      keys: {
        base_change_id: { type: 'string', maxLength: 64 },
        head_change_id: { type: 'string', maxLength: 64 },
        conflicts: { type: 'string', enum: ['include', 'only', 'exclude'], default: 'include' },
      },
    },
    async handler(ctx) {
      const type = negotiateOrRefuse(ctx.headers.accept, OFFERS);
      const baseId = ctx.query.base_change_id as string | undefined;
      const headId = ctx.query.head_change_id as string | undefined;
      if (!baseId) throw invalid('query parameter "base_change_id" is required');
      if (!headId) throw invalid('query parameter "head_change_id" is required');
      const repoId = ctx.repo!.id;
      const base = resolveChange(ctx.services.records, repoId, baseId, 'base_change_id');
      const head = resolveChange(ctx.services.records, repoId, headId, 'head_change_id');
      const format: DiffFormat = type === 'text/plain' ? 'text' : 'json';
      const body = (await readPool(ctx.services.config.dataDir).run({
        kind: 'diff',
        repoId,
        base,
        head,
        conflicts: ctx.query.conflicts as ConflictsMode,
        format,
      })) as Uint8Array;
      if (format === 'json') return { status: 200, json: body };
      return { status: 200, text: body, headers: { 'Content-Type': 'text/plain; charset=utf-8' } };
    },
  },
];
