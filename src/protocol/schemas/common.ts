/**
 * JSON Schema fragments shared by request validation (ajv, at the front door) and response
 * serialization (fast-json-stringify). One source of truth per shape.
 */
export type JsonSchema = Record<string, unknown>;

export const CHANGE_ID_PATTERN = '^[zyxwvutsrqponmlk]{32}$';
export const COMMIT_OID_PATTERN = '^[0-9a-f]{40}$';

export const str = (extra: JsonSchema = {}): JsonSchema => ({ type: 'string', ...extra });
export const nullable = (schema: JsonSchema): JsonSchema => ({ ...schema, type: [schema.type as string, 'null'] });
export const obj = (properties: Record<string, JsonSchema>, required: string[] = Object.keys(properties), extra: JsonSchema = {}): JsonSchema => ({
  type: 'object',
  properties,
  required,
  additionalProperties: false,
  ...extra,
});
export const arr = (items: JsonSchema, extra: JsonSchema = {}): JsonSchema => ({ type: 'array', items, ...extra });
export const stringMap: JsonSchema = { type: 'object', additionalProperties: { type: 'string' } };

/** `{ <items>: [...], next_cursor, has_more }` (API §1 pagination). */
export function page(itemsName: string, item: JsonSchema): JsonSchema {
  return obj({ [itemsName]: arr(item), next_cursor: nullable(str()), has_more: { type: 'boolean' } });
}

export const success: JsonSchema = obj({ success: { type: 'boolean' } });

export const errorEnvelope: JsonSchema = obj(
  {
    error: obj(
      { code: str(), message: str(), details: { type: 'object', additionalProperties: true }, trace_id: str() },
      ['code', 'message'],
    ),
  },
);

export const responses = { error: errorEnvelope, success };
