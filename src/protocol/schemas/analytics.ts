import { arr, nullable, obj, str, type JsonSchema } from './common.js';

/** Analytics shapes (API §10). Counts are integers; provider and model maps count AI lines. */
const count: JsonSchema = { type: 'integer' };
const countMap: JsonSchema = { type: 'object', additionalProperties: count };

const lineCounts = { totalLines: count, aiLines: count, humanLines: count, providers: countMap, models: countMap };

export const analyticsDocument: JsonSchema = obj({
  version: count,
  summary: obj({ ...lineCounts, updated: str() }),
  contributors: { type: 'object', additionalProperties: obj({ ...lineCounts, commitCount: count }) },
  history: arr(
    obj({
      date: str(),
      sha: str(),
      author: str(),
      message: str(),
      added: count,
      removed: count,
      aiLines: count,
      providers: countMap,
      models: countMap,
    }),
  ),
  _meta: obj({ lastAttempt: str(), lastSuccess: str(), lastError: str() }),
});

export const analyticsResponse: JsonSchema = obj({
  analytics: nullable(analyticsDocument),
  status: str({ enum: ['none', 'current', 'stale'] }),
});

export const responses = { analytics: analyticsResponse, analyticsDocument };
