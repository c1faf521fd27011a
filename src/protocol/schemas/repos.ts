import { arr, nullable, obj, page, str, stringMap, type JsonSchema, CHANGE_ID_PATTERN } from './common.js';
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

// ---- request bodies ----

const tagValues: JsonSchema = {
  type: 'object',
  propertyNames: { type: 'string', minLength: 1, maxLength: 64 },
  additionalProperties: { type: 'string', maxLength: 256 },
};

const upstreamAuth: JsonSchema = {
  oneOf: [
    obj({ kind: { const: 'token' }, token: str({ minLength: 1, maxLength: 4096 }), token_username: str({ minLength: 1, maxLength: 256 }) }, ['kind', 'token']),
    obj({ kind: { const: 'username_password' }, username: str({ minLength: 1, maxLength: 256 }), password: str({ minLength: 1, maxLength: 4096 }) }, ['kind', 'username', 'password']),
  ],
};

export const upstreamInput: JsonSchema = obj({ url: str({ minLength: 1, maxLength: 2048 }), auth: { oneOf: [upstreamAuth, { type: 'null' }] } }, ['url']);

export const createRepoBody: JsonSchema = obj(
  {
    name: { type: ['string', 'null'] },
    default_bookmark: { type: ['string', 'null'] },
    tags: { oneOf: [tagValues, { type: 'null' }] },
    upstream: { oneOf: [upstreamInput, { type: 'null' }] },
  },
  [],
);

export const patchRepoBody: JsonSchema = obj(
  {
    name: { type: ['string', 'null'] },
    default_bookmark: { type: ['string', 'null'] },
    tags: {
      oneOf: [
        {
          type: 'object',
          propertyNames: { type: 'string', minLength: 1, maxLength: 64 },
          additionalProperties: { type: ['string', 'null'], maxLength: 256 },
        },
        { type: 'null' },
      ],
    },
    upstream: { oneOf: [upstreamInput, { type: 'null' }] },
  },
  [],
);

export const headChangeId = str({ pattern: CHANGE_ID_PATTERN });
