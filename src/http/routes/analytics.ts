import { PERIODS, windowed } from '../../actors/system/analytics/document.js';
import type { AnalyticsDocument, Period } from '../../actors/system/analytics/document.js';
import { readAnalytics } from '../../actors/system/analytics/status.js';
import type { RouteDef } from '../route.js';

/**
 * `GET /{org}/{repo}/analytics` (API §10): the stored document from an LMDB snapshot, never
 * computed here. `all` splices the stored JSON text into the reply as is (the status is one of
 * three fixed words); a shorter period is a view recomputed from `history`.
 */
export const analyticsRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/{org}/{repo}/analytics',
    permission: 'git:read',
    query: { keys: { period: { type: 'string', enum: PERIODS, default: 'all' } } },
    handler(ctx) {
      const { text, status } = readAnalytics(ctx.services.storage.meta, ctx.repo!);
      const period = ctx.query.period as Period;
      if (text === null || period === 'all') return { status: 200, json: `{"analytics":${text ?? 'null'},"status":"${status}"}` };
      const view = windowed(JSON.parse(text) as AnalyticsDocument, period, Date.now());
      return { status: 200, schema: 'analytics', value: { analytics: view, status } };
    },
  },
];
