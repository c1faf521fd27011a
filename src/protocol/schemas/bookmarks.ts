import { Type, type Static } from '@sinclair/typebox';
import { ChangeId, Closed, Enum, Nullable } from './body-schema.js';
import { arr, obj, page, str, type JsonSchema } from './common.js';
import { people } from './people.js';

/** Bookmark shapes (API §6): responses and request bodies. */

const bookmarkFields = { name: str(), change_id: str(), is_default: { type: 'boolean' } };

export const bookmark: JsonSchema = obj(bookmarkFields);
export const bookmarkMoved: JsonSchema = obj({ ...bookmarkFields, from_change_id: str() });
export const bookmarkPage: JsonSchema = page('bookmarks', bookmark);
export const bookmarkList: JsonSchema = obj({ bookmarks: arr(bookmark) });
export const mergeResult: JsonSchema = obj({
  merge_type: str(),
  is_conflicted: { type: 'boolean' },
  /** The null oid when the target still points at the virtual root (a no-op merge of the root). */
  commit_oid: str(),
  change_id: str(),
  target: str(),
  source: str(),
  source_deleted: { type: 'boolean' },
});

export const responses = { bookmark, bookmarkMoved, bookmarkPage, bookmarkList, mergeResult };

// ---- request bodies ----

const bookmarkName = Type.String({ minLength: 1, maxLength: 1024 });

export const createBookmarkBody = Closed({ name: bookmarkName, change_id: ChangeId() });

const moveFields = {
  change_id: ChangeId(),
  allow_backwards: Type.Optional(Nullable(Type.Boolean())),
  expected_change_id: Type.Optional(Nullable(ChangeId())),
};

export const moveBookmarkBody = Closed(moveFields);

export const MAX_MOVES = 1000;
export const moveBookmarksBody = Closed({ moves: Type.Array(Closed({ name: bookmarkName, ...moveFields }), { minItems: 1, maxItems: MAX_MOVES }) });
export type MoveInput = Static<typeof moveBookmarkBody>;

const text = Type.String({ maxLength: 1024 * 1024 });
const encoding = Enum(['base64', 'utf-8', null]);
const take = Enum(['target', 'source']);

/** §6.5 resolutions; which of `take`/`content`/`hunks` is given is checked with the conflicts. */
export const resolutionsInput = Type.Array(
  Closed({
    path: Type.String({ minLength: 1, maxLength: 4096 }),
    take: Type.Optional(take),
    content: Type.Optional(text),
    encoding: Type.Optional(encoding),
    hunks: Type.Optional(
      Type.Array(Closed({ hunk_id: Type.String({ minLength: 1, maxLength: 128 }), take: Type.Optional(take), content: Type.Optional(text), encoding: Type.Optional(encoding) }), { maxItems: 10_000 }),
    ),
  }),
  { maxItems: 10_000 },
);

export const mergeBody = Closed({
  target: bookmarkName,
  source: bookmarkName,
  message: Type.Optional(Nullable(Type.String({ maxLength: 64 * 1024 }))),
  delete_source: Type.Optional(Nullable(Type.Boolean())),
  allow_conflicted: Type.Optional(Nullable(Type.Boolean())),
  resolutions: Type.Optional(Nullable(resolutionsInput)),
  author: people.author,
  authors: people.authors,
});
export type MergeBody = Static<typeof mergeBody>;
