import { registerResponseSchemas } from '../serializers.js';
import { bookmark, resolutionsInput } from './bookmarks.js';
import { CHANGE_ID_PATTERN, COMMIT_OID_PATTERN, arr, nullable, obj, page, str, type JsonSchema } from './common.js';

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

registerResponseSchemas({ change, changeDetail, changePage, applyOpsResult, blobUpload, evolutionPage });

// ---- request bodies ----

/** Items of `ops` (apply-ops) and `files` (changes). */
export const MAX_WRITE_ITEMS = 10_000;

const changeId = str({ pattern: CHANGE_ID_PATTERN });
const commitOid = str({ pattern: COMMIT_OID_PATTERN });
const orNull = (schema: JsonSchema): JsonSchema => ({ oneOf: [schema, { type: 'null' }] });
const email = { type: ['string', 'null'], maxLength: 256 };
const personInput = obj({ name: str({ maxLength: 256 }), email, date: { type: ['string', 'null'], maxLength: 64 } }, ['name']);
const authorsInput = arr(obj({ name: str({ maxLength: 256 }), email }, ['name']), { minItems: 1, maxItems: 100 });
const attribution = obj({ provider: { type: ['string', 'null'], maxLength: 256 }, model: { type: ['string', 'null'], maxLength: 256 } }, []);
const message = { type: ['string', 'null'], maxLength: 1024 * 1024 };
const mode = { enum: ['100644', '100755', '120000', null] };
// Path rules (API §5.4) are checked with the op index by the route; this only bounds the size.
const path = str({ maxLength: 16 * 1024 });

const people = { author: orNull(personInput), committer: orNull(personInput), authors: orNull(authorsInput) };

/** Which fields an op takes is checked by the route, so that errors name the op index. */
const opItem = obj(
  {
    op: { enum: ['write', 'delete', 'rename', 'set_metadata'] },
    path,
    content: str(),
    encoding: { enum: ['utf-8', 'base64', null] },
    mode,
    blob_oid: orNull(commitOid),
    from: path,
    to: path,
    metadata: { type: 'object', maxProperties: 1000, propertyNames: { minLength: 1, maxLength: 256 }, additionalProperties: { type: ['string', 'null'], maxLength: 64 * 1024 } },
  },
  ['op'],
);

const fileItem = obj(
  { path, content: str(), encoding: { enum: ['base64', null] }, action: { enum: ['upsert', 'delete', null] }, mode },
  ['path'],
);

export const applyOpsBody: JsonSchema = obj(
  {
    change_id: orNull(changeId),
    base_change_id: orNull(changeId),
    expected_commit_oid: orNull(commitOid),
    message,
    ...people,
    ops: arr(opItem, { maxItems: MAX_WRITE_ITEMS }),
    bookmarks: orNull(
      arr(
        obj({ name: str({ minLength: 1, maxLength: 1024 }), allow_backwards: { type: ['boolean', 'null'] }, create: { type: ['boolean', 'null'] }, expected_change_id: orNull(changeId) }, ['name']),
        { maxItems: 100 },
      ),
    ),
    attribution: orNull(attribution),
  },
  [],
);

export const createChangeBody: JsonSchema = obj(
  { base_change_id: changeId, message, ...people, files: orNull(arr(fileItem, { maxItems: MAX_WRITE_ITEMS })), attribution: orNull(attribution) },
  ['base_change_id'],
);

export const patchChangeBody: JsonSchema = obj(
  {
    message,
    ...people,
    files: orNull(arr(fileItem, { maxItems: MAX_WRITE_ITEMS })),
    base_commit_oid: orNull(commitOid),
    resolutions: orNull(resolutionsInput),
  },
  [],
);
