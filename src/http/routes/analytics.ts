import { PERIODS, windowed } from '../../actors/system/analytics/document.js';
import type { Period } from '../../actors/system/analytics/document.js';
import { readAnalytics } from '../../actors/system/analytics/status.js';
import '../../protocol/schemas/analytics.js';
import type { RouteDef } from '../route.js';

/**
 * `GET /{org}/{repo}/analytics` (API §10): the stored document from an LMDB snapshot, never
 * computed here. A period other than `all` is a view recomputed from `history`.
 */
export const analyticsRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/{org}/{repo}/analytics',
    permission: 'git:read',
    query: { keys: { period: { type: 'string', enum: PERIODS, default: 'all' } } },
    handler(ctx) {
      const stored = readAnalytics(ctx.services.storage.meta, ctx.repo!);
      const period = ctx.query.period as Period;
      const analytics = stored.analytics && windowed(stored.analytics, period, Date.now());
      return { status: 200, schema: 'analytics', value: { analytics, status: stored.status } };
    },
  },
];
