import fc from 'fast-check';
import type { JsonSchema } from '../../src/protocol/schemas/common.js';

/**
 * Request values drawn from a route's JSON Schema, and the JSON text they are sent as.
 *
 * Two kinds of leaves stand in for what plain JSON values cannot say: a `FixtureRef` names a value
 * of the running fixture (an existing change id, the webhook receiver's URL), filled in when the
 * request is sent, so that generated requests reach past "not found" into the handlers; a
 * `RawJson` is written into the text as it is (a number no double holds, a nesting no
 * `JSON.stringify` would make).
 */
export class FixtureRef {
  constructor(readonly name: string) {}
  toString(): string {
    return `<${this.name}>`;
  }
}

export class RawJson {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text.length > 60 ? `raw(${this.text.slice(0, 30)}…${this.text.length} chars)` : `raw(${this.text})`;
  }
}

/** Values also drawn for a property name: fixture references, or plain values worth trying there. */
export type Hints = Record<string, readonly unknown[]>;

/** Sets `obj[key]` as an own property, also for `__proto__`, which assignment would not create. */
export function setOwn(obj: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

/** A deep copy that keeps own `__proto__` keys and the two leaf classes. */
export function cloneValue(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(cloneValue);
  if (value && typeof value === 'object' && !(value instanceof FixtureRef) && !(value instanceof RawJson)) {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value)) setOwn(out, key, cloneValue((value as Record<string, unknown>)[key]));
    return out;
  }
  return value;
}

/** The JSON text of `value`, with fixture references resolved and raw pieces spliced in. */
export function toJsonText(value: unknown, resolve: (ref: FixtureRef) => unknown): string {
  const raws: string[] = [];
  const marker = (i: number): string => `\u0000raw${i}\u0000`;
  const prepare = (v: unknown): unknown => {
    if (v instanceof FixtureRef) return prepare(resolve(v));
    if (v instanceof RawJson) {
      raws.push(v.text);
      return marker(raws.length - 1);
    }
    if (Array.isArray(v)) return v.map(prepare);
    if (v && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      for (const key of Object.keys(v)) setOwn(out, key, prepare((v as Record<string, unknown>)[key]));
      return out;
    }
    return v;
  };
  let text = JSON.stringify(prepare(value)) ?? 'null';
  raws.forEach((raw, i) => {
    text = text.replace(JSON.stringify(marker(i)), () => raw);
  });
  return text;
}

/** Printable ASCII mostly, some other graphemes: strings a client would plausibly send. */
const plainText = (minLength: number, maxLength: number): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: 4, arbitrary: fc.string({ minLength, maxLength }) },
    { weight: 1, arbitrary: fc.string({ unit: 'grapheme', minLength, maxLength }) },
  );

/** At most this many characters for a generated string; lengths at the schema's bound are added separately. */
const SHORT = 24;

function stringValue(schema: JsonSchema): fc.Arbitrary<string> {
  if (typeof schema.pattern === 'string') return fc.stringMatching(new RegExp(schema.pattern));
  const min = (schema.minLength as number | undefined) ?? 0;
  const max = (schema.maxLength as number | undefined) ?? Number.POSITIVE_INFINITY;
  const arbs: Array<fc.WeightedArbitrary<string>> = [{ weight: 8, arbitrary: plainText(min, Math.min(max, Math.max(min, SHORT))) }];
  if (Number.isFinite(max)) arbs.push({ weight: 1, arbitrary: fc.constantFrom('x'.repeat(max), 'é'.repeat(max)) });
  return fc.oneof(...arbs);
}

function objectValue(schema: JsonSchema, hints: Hints): fc.Arbitrary<Record<string, unknown>> {
  const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
  const required = (schema.required as string[] | undefined) ?? [];
  const model: Record<string, fc.Arbitrary<unknown>> = {};
  for (const [key, sub] of Object.entries(properties)) model[key] = schemaValue(sub, hints, key);
  const declared = fc.record(model, { requiredKeys: required });
  const extra = schema.additionalProperties;
  if (!extra || typeof extra !== 'object') return declared;
  const names = (schema.propertyNames ?? {}) as JsonSchema;
  const maxKeys = Math.min((schema.maxProperties as number | undefined) ?? 4, 4);
  const map = fc.dictionary(stringValue({ ...names, maxLength: Math.min((names.maxLength as number | undefined) ?? SHORT, SHORT) }), schemaValue(extra as JsonSchema, hints), { maxKeys });
  return fc.tuple(declared, map).map(([own, more]) => {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(more)) setOwn(out, k, v);
    for (const [k, v] of Object.entries(own)) setOwn(out, k, v);
    return out;
  });
}

function typedValue(type: string, schema: JsonSchema, hints: Hints): fc.Arbitrary<unknown> {
  switch (type) {
    case 'string':
      return stringValue(schema);
    case 'integer':
      return fc.integer({ min: (schema.minimum as number | undefined) ?? -(2 ** 31), max: (schema.maximum as number | undefined) ?? 2 ** 31 });
    case 'number':
      return fc.double({ noNaN: true, noDefaultInfinity: true });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array': {
      const minLength = (schema.minItems as number | undefined) ?? 0;
      const maxLength = Math.min((schema.maxItems as number | undefined) ?? 4, Math.max(minLength, 4));
      return fc.array(schemaValue((schema.items ?? {}) as JsonSchema, hints), { minLength, maxLength });
    }
    case 'object':
      return objectValue(schema, hints);
    default:
      throw new Error(`the fuzzer does not know the JSON Schema type "${type}"`);
  }
}

/**
 * Values valid against `schema` (the keywords the API's request schemas use: type, enum, const,
 * oneOf, properties/required/additionalProperties, propertyNames, maxProperties, items,
 * min/maxItems, min/maxLength, pattern). Strings stay short except at the schema's own bound.
 * Where `key` has hints, they are drawn three times as often as the schema's values.
 */
export function schemaValue(schema: JsonSchema, hints: Hints, key?: string): fc.Arbitrary<unknown> {
  const fromSchema = ((): fc.Arbitrary<unknown> => {
    if ('const' in schema) return fc.constant(schema.const);
    if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]));
    if (Array.isArray(schema.oneOf)) return fc.oneof(...(schema.oneOf as JsonSchema[]).map((branch) => schemaValue(branch, hints, key)));
    const type = schema.type ?? (schema.properties ? 'object' : undefined);
    if (type === undefined) return fc.jsonValue({ maxDepth: 2 });
    const types = [type].flat() as string[];
    return fc.oneof(...types.map((t) => typedValue(t, schema, hints)));
  })();
  const hinted = key !== undefined && Object.hasOwn(hints, key) ? hints[key]! : [];
  if (hinted.length === 0) return fromSchema;
  return fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...hinted) }, { weight: 1, arbitrary: fromSchema });
}
