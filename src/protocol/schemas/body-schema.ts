import { Kind, Type, type Static, type TObject, type TProperties, type TSchema, type TUnsafe } from '@sinclair/typebox';
import { CHANGE_ID_PATTERN, COMMIT_OID_PATTERN } from './common.js';

/**
 * Building blocks of request-body schemas. A body is defined once, with TypeBox: the value is the
 * JSON Schema ajv checks at the front door (src/http/body-validator.ts), `Static<>` of it is the
 * type the handler receives. Objects are closed, so an unknown field — a typo — is a 400.
 */

/** A schema as plain JSON Schema, without TypeBox's kind marker (for the schemas built from it here). */
function plain<T extends TSchema>(schema: T): Omit<T, typeof Kind> {
  const { [Kind]: _kind, ...rest } = schema;
  return rest;
}

/** A closed object: only the listed fields (optional ones wrapped in `Type.Optional`). */
export const Closed = <P extends TProperties>(properties: P): TObject<P> => Type.Object(properties, { additionalProperties: false });

/**
 * `schema` or `null`; `null` for an optional field means "omitted" (API §1). A typed schema takes
 * `null` into its `type` list (ajv then says `must be string,null`); one made of alternatives
 * becomes a `oneOf` with `null`.
 */
export function Nullable<T extends TSchema>(schema: T): TUnsafe<Static<T> | null> {
  const json = plain(schema);
  const combined = 'oneOf' in json || 'allOf' in json || 'anyOf' in json;
  if (typeof json.type === 'string' && !combined) return Type.Unsafe<Static<T> | null>({ ...json, type: [json.type, 'null'] });
  return Type.Unsafe<Static<T> | null>({ oneOf: [schema, Type.Null()] });
}

/**
 * One of `variants`, chosen by the value of their `tag` field (a `Type.Literal` in each): ajv's
 * discriminator checks the chosen variant only, so an error is that variant's own.
 */
export function Tagged<T extends TSchema[]>(tag: string, variants: [...T]): TUnsafe<{ [I in keyof T]: Static<T[I]> }[number]> {
  return Type.Unsafe({ type: 'object', required: [tag], discriminator: { propertyName: tag }, oneOf: variants });
}

/** One of a few values, `null` included when listed; ajv names them all when another is sent. */
export const Enum = <const V extends readonly (string | null)[]>(values: V): TUnsafe<V[number]> => Type.Unsafe<V[number]>({ enum: [...values] });

/** An object used as a map from names to values of one schema. */
export const Dictionary = <V extends TSchema>(value: V, options: { propertyNames?: object; maxProperties?: number } = {}): TUnsafe<Record<string, Static<V>>> =>
  Type.Unsafe<Record<string, Static<V>>>({ type: 'object', ...options, additionalProperties: value });

/** A date and time with its offset (RFC 3339, as `Date.toISOString` writes it); the format is defined in body-validator.ts. */
export const DateTime = (): TUnsafe<string> => Type.Unsafe<string>({ type: 'string', format: 'date-time', maxLength: 64 });

export const ChangeId = (): TUnsafe<string> => Type.Unsafe<string>({ type: 'string', pattern: CHANGE_ID_PATTERN });
export const CommitOid = (): TUnsafe<string> => Type.Unsafe<string>({ type: 'string', pattern: COMMIT_OID_PATTERN });

/**
 * Key of the message a rule (an `allOf` entry holding a `oneOf`) reports when it fails, in
 * place of its branches' own errors, which only say which field a branch missed. A rule's branches
 * look only at which fields are given; the fields' values are checked by the object's properties.
 */
export const RULE_MESSAGE = 'x-rule-message';

/** A field that is absent or `null`: not given (API §1). */
export const absent = { type: 'null' };
/** Given: present and not `null`. */
const given = { not: absent };

/** The object type in which exactly one of the keys `K` is given, the others absent or null. */
export type ExactlyOne<T, K extends keyof T> = { [P in K]-?: Omit<T, K> & { [Q in P]-?: NonNullable<T[Q]> } & { [Q in Exclude<K, P>]?: null } }[K];

/** Whether `key` is the one given in an `exactlyOne` body; narrows the body to that case (or, when not, to the others). */
export function isGiven<T extends object, K extends keyof T>(body: T, key: K): body is Extract<T, { [P in K]: NonNullable<T[P]> }> {
  return body[key] != null;
}

/**
 * `object`, in which exactly one of `keys` must be given; `excludes` names further fields a key
 * cannot go with (given alongside it they are refused with `message` too).
 */
export function exactlyOne<P extends TProperties, K extends keyof Static<TObject<P>> & string>(
  object: TObject<P>,
  keys: readonly K[],
  message: string,
  excludes: Partial<Record<K, readonly (keyof P & string)[]>> = {},
): TUnsafe<ExactlyOne<Static<TObject<P>>, K>> {
  const branches = keys.map((key) => {
    const others = [...keys.filter((k) => k !== key), ...(excludes[key] ?? [])];
    return { required: [key], properties: { [key]: given, ...Object.fromEntries(others.map((k) => [k, absent])) } };
  });
  return Type.Unsafe<ExactlyOne<Static<TObject<P>>, K>>({ ...plain(object), allOf: [{ oneOf: branches, [RULE_MESSAGE]: message }] });
}

/**
 * `object` with a rule on which fields go together: where `when` holds, `then` must, elsewhere
 * `otherwise`; `message` is the error. `R` is the type the rule leaves: the object's type narrowed
 * to the cases the rule allows. (A `oneOf` rather than `if`/`then`: ajv reports a failed `oneOf`
 * itself, and only a failed `then`'s inner error.)
 */
export function withRule<R>(object: TObject, when: object, then: object, otherwise: object, message: string): TUnsafe<R> {
  const oneOf = [{ allOf: [when, then] }, { allOf: [{ not: when }, otherwise] }];
  return Type.Unsafe<R>({ ...plain(object), allOf: [{ oneOf, [RULE_MESSAGE]: message }] });
}
