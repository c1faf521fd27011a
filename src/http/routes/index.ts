import type { RouteDef } from '../route.js';
import { analyticsRoutes } from './analytics.js';
import { contentRoutes } from './content.js';
import { diffRoutes } from './diff.js';
import { orgRoutes } from './orgs.js';
import { repoRoutes } from './repos.js';
import { syncRoutes } from './syncs.js';
import { webhookRoutes } from './webhooks.js';
import { bookmarkRoutes } from './bookmarks.js';
import { changeRoutes } from './changes.js';
import { applyOpsRoutes } from './apply-ops.js';
import { blobRoutes } from './blobs.js';
import { gitRoutes } from './git.js';

/** The route table: every API route, each defined beside the feature it serves, and git's smart HTTP. */
export const routes: RouteDef[] = [...orgRoutes, ...repoRoutes, ...bookmarkRoutes, ...changeRoutes, ...applyOpsRoutes, ...blobRoutes, ...analyticsRoutes, ...syncRoutes, ...contentRoutes, ...diffRoutes, ...webhookRoutes, ...gitRoutes];
