import { registerResponseSchemas } from '../serializers.js';
import { CHANGE_ID_PATTERN, arr, obj, page, str, type JsonSchema } from './common.js';

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

registerResponseSchemas({ bookmark, bookmarkMoved, bookmarkPage, bookmarkList, mergeResult });

// ---- request bodies ----

const changeId = str({ pattern: CHANGE_ID_PATTERN });
const bookmarkName = str({ minLength: 1, maxLength: 1024 });

export const createBookmarkBody: JsonSchema = obj({ name: bookmarkName, change_id: changeId });

const moveFields = {
  change_id: changeId,
  allow_backwards: { type: ['boolean', 'null'] },
  expected_change_id: { type: ['string', 'null'], pattern: CHANGE_ID_PATTERN },
};

export const moveBookmarkBody: JsonSchema = obj(moveFields, ['change_id']);

export const MAX_MOVES = 1000;
export const moveBookmarksBody: JsonSchema = obj({
  moves: arr(obj({ name: bookmarkName, ...moveFields }, ['name', 'change_id']), { minItems: 1, maxItems: MAX_MOVES }),
});

const text = str({ maxLength: 1024 * 1024 });
const encoding = { enum: ['base64', 'utf-8', null] };
const take = { enum: ['target', 'source'] };

/** §6.5 resolutions; which of `take`/`content`/`hunks` is given is checked with the conflicts. */
export const resolutionsInput: JsonSchema = arr(
  obj(
    {
      path: str({ minLength: 1, maxLength: 4096 }),
      take,
      content: text,
      encoding,
      hunks: arr(obj({ hunk_id: str({ minLength: 1, maxLength: 128 }), take, content: text, encoding }, ['hunk_id']), { maxItems: 10_000 }),
    },
    ['path'],
  ),
  { maxItems: 10_000 },
);

const personName = str({ maxLength: 256 });
const email = { type: ['string', 'null'], maxLength: 256 };

export const mergeBody: JsonSchema = obj(
  {
    target: bookmarkName,
    source: bookmarkName,
    message: { type: ['string', 'null'], maxLength: 64 * 1024 },
    delete_source: { type: ['boolean', 'null'] },
    allow_conflicted: { type: ['boolean', 'null'] },
    resolutions: { oneOf: [resolutionsInput, { type: 'null' }] },
    author: { oneOf: [obj({ name: personName, email, date: str({ maxLength: 64 }) }, ['name']), { type: 'null' }] },
    authors: { oneOf: [arr(obj({ name: personName, email }, ['name']), { minItems: 1, maxItems: 100 }), { type: 'null' }] },
  },
  ['target', 'source'],
);
