import { Type, type Static } from '@sinclair/typebox';
import { Closed, Dictionary, Nullable, Tagged } from './body-schema.js';
import { arr, nullable, obj, page, str, stringMap, type JsonSchema } from './common.js';
import { sync } from './syncs.js';

/** Repository shapes (API §4). */
export const repository: JsonSchema = obj({
  id: str(),
  org: str(),
  name: str(),
  default_bookmark: str(),
  head_change_id: str(),
  upstream: nullable(obj({ url: str(), auth_kind: nullable(str()), latest_sync: nullable(sync) })),
  created_at: str(),
  tags: stringMap,
  clone_url: str(),
});

export const repositoryListItem: JsonSchema = obj({
  id: str(),
  name: str(),
  default_branch: str(),
  created_at: str(),
  metadata: stringMap,
  upstream: nullable(obj({ uri: str(), status: str() })),
});

export const repositoryPage = page('repos', repository);

export const repositoryNumberedPage: JsonSchema = obj({
  repos: arr(repositoryListItem),
  total: { type: 'integer' },
  page: { type: 'integer' },
  page_size: { type: 'integer' },
  total_pages: { type: 'integer' },
});

export const organization: JsonSchema = obj({ id: str(), slug: str(), name: str(), created_at: str(), num_repos: { type: 'integer' } });

export const whoami: JsonSchema = obj({
  org: obj({ id: str(), slug: str(), name: str() }),
  signing_key: obj({ id: str(), name: str() }),
  scopes: arr(str()),
  repo_ids: nullable(arr(str())),
});

/** Internal replies of the repository sagas' steps (actors/repo-saga.ts), never sent to a client. */
export const sagaStarted: JsonSchema = obj({ saga_id: str(), repo_id: str(), name: str() });
export const sagaStepRan: JsonSchema = obj({ ran: { type: 'boolean' }, view: repository }, ['ran']);

export const responses = { repository, repositoryPage, repositoryNumberedPage, organization, whoami, sagaStarted, sagaStepRan };

// ---- request bodies ----

const tagName = { type: 'string', minLength: 1, maxLength: 64 };

const upstreamAuth = Tagged('kind', [
  Closed({ kind: Type.Literal('token'), token: Type.String({ minLength: 1, maxLength: 4096 }), token_username: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })) }),
  Closed({ kind: Type.Literal('username_password'), username: Type.String({ minLength: 1, maxLength: 256 }), password: Type.String({ minLength: 1, maxLength: 4096 }) }),
]);

export const upstreamInput = Closed({ url: Type.String({ minLength: 1, maxLength: 2048 }), auth: Type.Optional(Nullable(upstreamAuth)) });
export type UpstreamInput = Static<typeof upstreamInput>;

export const createRepoBody = Closed({
  name: Type.Optional(Nullable(Type.String())),
  default_bookmark: Type.Optional(Nullable(Type.String())),
  tags: Type.Optional(Nullable(Dictionary(Type.String({ maxLength: 256 }), { propertyNames: tagName }))),
  upstream: Type.Optional(Nullable(upstreamInput)),
});

/** A tag set to `null` is removed (API §4.2). */
export const patchRepoBody = Closed({
  name: Type.Optional(Nullable(Type.String())),
  default_bookmark: Type.Optional(Nullable(Type.String())),
  tags: Type.Optional(Nullable(Dictionary(Nullable(Type.String({ maxLength: 256 })), { propertyNames: tagName }))),
  upstream: Type.Optional(Nullable(upstreamInput)),
});
