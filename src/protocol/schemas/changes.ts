import { Type, type Static } from '@sinclair/typebox';
import { bookmark, resolutionsInput } from './bookmarks.js';
import { ChangeId, Closed, CommitOid, Dictionary, Enum, Nullable, Tagged, absent, exactlyOne, withRule } from './body-schema.js';
import { arr, nullable, obj, page, str, type JsonSchema } from './common.js';
import { people } from './people.js';

/** Change shapes (API §5): responses and request bodies of changes, apply-ops and blobs. */

const person = obj({ name: str(), email: str(), date: str() });

const changeFields: Record<string, JsonSchema> = {
  id: str(),
  current_commit_oid: str(),
  is_conflicted: { type: 'boolean' },
  message: str(),
  author: person,
  committer: person,
  authors: arr(obj({ name: str(), email: nullable(str()) })),
  authored_at: str(),
  parents: arr(str()),
  created_at: str(),
  updated_at: str(),
};

export const change: JsonSchema = obj(changeFields);
export const changeDetail: JsonSchema = obj({ ...changeFields, files: arr(str()), conflicts: arr(str()) });
export const changePage: JsonSchema = page('changes', change);
export const applyOpsResult: JsonSchema = obj({ change, bookmarks: arr(bookmark), operation_id: str() });
export const blobUpload: JsonSchema = obj({ oid: str(), size: { type: 'integer' } });
export const evolutionPage: JsonSchema = page(
  'evolution',
  obj({ commit_oid: str(), predecessor_oid: nullable(str()), operation_id: str(), created_at: str() }),
);

/** What one turn of the blob collector removed from a repository (actors/commands/blob-collect.ts). */
export const blobCollect: JsonSchema = obj({ objects: { type: 'integer' }, bytes: { type: 'integer' }, uploads: { type: 'integer' }, more: { type: 'boolean' } });

export const responses = { change, changeDetail, changePage, applyOpsResult, blobUpload, evolutionPage, blobCollect };

// ---- request bodies ----

/** Items of `ops` (apply-ops) and `files` (changes); the streamed body reader counts them too. */
export const MAX_WRITE_ITEMS = 10_000;
/** How an inline `content` is encoded; the streamed body reader decodes by the same names. */
export const CONTENT_ENCODINGS = ['utf-8', 'base64'] as const;
export type ContentEncoding = (typeof CONTENT_ENCODINGS)[number];

const attribution = Closed({ provider: Type.Optional(Nullable(Type.String({ maxLength: 256 }))), model: Type.Optional(Nullable(Type.String({ maxLength: 256 }))) });
const message = Type.Optional(Nullable(Type.String({ maxLength: 1024 * 1024 })));
const mode = Enum(['100644', '100755', '120000', null]);
// Path rules (API §5.4) are the tree editor's (src/vcs/paths.ts); this only bounds the size.
const path = Type.String({ maxLength: 16 * 1024 });

const writeOp = exactlyOne(
  Closed({
    op: Type.Literal('write'),
    path,
    content: Type.Optional(Type.String()),
    encoding: Type.Optional(Enum([...CONTENT_ENCODINGS, null])),
    mode: Type.Optional(mode),
    blob_oid: Type.Optional(Nullable(CommitOid())),
  }),
  ['content', 'blob_oid'],
  'a write takes exactly one of "content" or "blob_oid" ("encoding" goes with "content")',
  { blob_oid: ['encoding'] },
);
const opItem = Tagged('op', [
  writeOp,
  Closed({ op: Type.Literal('delete'), path }),
  Closed({ op: Type.Literal('rename'), from: path, to: path }),
  Closed({
    op: Type.Literal('set_metadata'),
    path,
    metadata: Dictionary(Nullable(Type.String({ maxLength: 64 * 1024 })), { maxProperties: 1000, propertyNames: { minLength: 1, maxLength: 256 } }),
  }),
]);
export type OpInput = Static<typeof opItem>;

const fileFields = Closed({
  path,
  content: Type.Optional(Type.String()),
  encoding: Type.Optional(Enum(['base64', null])),
  action: Type.Optional(Enum(['upsert', 'delete', null])),
  mode: Type.Optional(mode),
});
/** A `files` item (API §5.3): a delete, or a write of `content` (`action` defaults to `upsert`). */
export type FileInput = Static<typeof fileFields> & ({ action: 'delete' } | { action?: 'upsert' | null; content: string });
const fileItem = withRule<FileInput>(
  fileFields,
  { required: ['action'], properties: { action: { const: 'delete' } } },
  { properties: { content: absent, encoding: absent, mode: absent } },
  { required: ['content'] },
  'a delete takes only "path"; any other file needs "content"',
);
const files = Type.Optional(Nullable(Type.Array(fileItem, { maxItems: MAX_WRITE_ITEMS })));

const bookmarkMove = Closed({
  name: Type.String({ minLength: 1, maxLength: 1024 }),
  allow_backwards: Type.Optional(Nullable(Type.Boolean())),
  create: Type.Optional(Nullable(Type.Boolean())),
  expected_change_id: Type.Optional(Nullable(ChangeId())),
});

/** `POST …/apply-ops` (API §5.4): evolve `change_id` or create on `base_change_id`. */
export const applyOpsBody = exactlyOne(
  Closed({
    change_id: Type.Optional(Nullable(ChangeId())),
    base_change_id: Type.Optional(Nullable(ChangeId())),
    expected_commit_oid: Type.Optional(Nullable(CommitOid())),
    message,
    ...people,
    ops: Type.Optional(Type.Array(opItem, { maxItems: MAX_WRITE_ITEMS })),
    bookmarks: Type.Optional(Nullable(Type.Array(bookmarkMove, { maxItems: 100 }))),
    attribution: Type.Optional(Nullable(attribution)),
  }),
  ['change_id', 'base_change_id'],
  'give exactly one of "change_id" (evolve a change) or "base_change_id" (create one on top); "expected_commit_oid" guards "change_id" only',
  { base_change_id: ['expected_commit_oid'] },
);
export type ApplyOpsBody = Static<typeof applyOpsBody>;
export type BookmarkMoveInput = Static<typeof bookmarkMove>;

/** `POST …/changes` (API §5.3). */
export const createChangeBody = Closed({ base_change_id: ChangeId(), message, ...people, files, attribution: Type.Optional(Nullable(attribution)) });

const patchFields = Closed({
  message,
  ...people,
  files,
  base_commit_oid: Type.Optional(Nullable(CommitOid())),
  resolutions: Type.Optional(Nullable(resolutionsInput)),
});

/** `PATCH …/changes/{id}` (API §5.3): `files` and `resolutions` exclude each other. */
export const patchChangeBody = withRule<Static<typeof patchFields>>(
  patchFields,
  { required: ['files'], properties: { files: { not: absent } } },
  { properties: { resolutions: absent } },
  {},
  '"files" and "resolutions" cannot be combined: resolve the conflicts first',
);
