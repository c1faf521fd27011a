import { Type } from '@sinclair/typebox';
import { Closed, Enum, Nullable } from './body-schema.js';
import { arr, nullable, obj, page, str, type JsonSchema } from './common.js';
import { MAX_GLOB_LENGTH } from '../ref-glob.js';

/** The sync record (API §9); `ref_globs` is left out of sync-run lists. */
const syncFields: Record<string, JsonSchema> = {
  id: str(),
  repo_id: str(),
  direction: str(),
  status: str(),
  attempt: { type: 'integer' },
  stats: nullable(obj({ refs: arr(obj({ name: str(), before: nullable(str()), after: nullable(str()), outcome: str() })) })),
  error: nullable(str()),
  created_at: str(),
  started_at: nullable(str()),
  finished_at: nullable(str()),
};

export const sync: JsonSchema = obj({ ...syncFields, ref_globs: obj({ branches: str(), tags: str() }) });
export const syncRun: JsonSchema = obj(syncFields);

export const syncPage: JsonSchema = page('syncs', sync);
export const syncRunPage: JsonSchema = page('sync_runs', syncRun);

export const responses = { sync, syncPage, syncRunPage };

// ---- request bodies ----

const glob = Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: MAX_GLOB_LENGTH })));

export const createSyncBody = Closed({
  direction: Enum(['pull', 'push']),
  ref_globs: Type.Optional(Nullable(Closed({ branches: glob, tags: glob }))),
});

/** `POST …/push` takes no body: empty or `{}`. */
export const pushBody = Closed({});
