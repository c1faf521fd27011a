import type { Static, TSchema } from '@sinclair/typebox';
import { Ajv, type ErrorObject } from 'ajv';
import { invalid, type ServiceError } from '../errors.js';
import { RULE_MESSAGE } from '../protocol/schemas/body-schema.js';

/**
 * Request-body validation, compiled once per schema at start-up (schemas: src/protocol/schemas).
 * A check returns the body as its schema's type, or throws 400 naming the first problem. `verbose`
 * keeps the failing schema and value on each error, for the messages below; it costs nothing
 * while bodies are valid.
 */
const ajv = new Ajv({ allErrors: false, strict: false, coerceTypes: false, useDefaults: false, discriminator: true, verbose: true });

const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|[+-](\d{2}):(\d{2}))$/;

/** RFC 3339's `date-time`: the offset is required, and every field must exist on the calendar. */
function isDateTime(text: string): boolean {
  const m = DATE_TIME.exec(text);
  if (!m) return false;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  const offsetOk = m[7] === undefined || (Number(m[7]) <= 23 && Number(m[8]) <= 59);
  return month >= 1 && month <= 12 && day >= 1 && day <= daysInMonth && hour <= 23 && minute <= 59 && second <= 59 && offsetOk;
}

ajv.addFormat('date-time', { type: 'string', validate: isDateTime });

/**
 * Lists whose items are the ops of a write (API §5.4 `ops`, §5.3 `files`): an error inside item
 * `i` names it as `ops[i]: …` and carries `details.op_index`, as the tree editor's errors do.
 */
const OP_LISTS = new Set(['ops', 'files']);

export type BodyCheck<T> = (value: unknown) => T;

/** Where an error points: the op it is inside (if any) and the field, dotted, relative to that op. */
function locate(instancePath: string): { op: { list: string; index: number } | null; field: string } {
  const segments = instancePath.split('/').slice(1);
  if (segments.length >= 2 && OP_LISTS.has(segments[0]!) && /^\d+$/.test(segments[1]!)) {
    return { op: { list: segments[0]!, index: Number(segments[1]) }, field: segments.slice(2).join('.') };
  }
  return { op: null, field: segments.join('.') };
}

const join = (...parts: string[]): string => parts.filter(Boolean).join('.');

function describe(error: ErrorObject, field: string, inOp: boolean): string {
  const where = field ? `"${field}"` : inOp ? 'the op' : 'body';
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'additionalProperties': {
      const name = join(field, params.additionalProperty as string);
      const op = (error.data as { op?: unknown }).op;
      if (inOp && field === '' && typeof op === 'string') return `"${name}" is not allowed for ${op}`;
      return `unknown field "${name}"`;
    }
    case 'required': {
      const name = join(field, params.missingProperty as string);
      return inOp ? `"${name}" is required` : `missing required field "${name}"`;
    }
    case 'type':
      return `${where} must be ${params.type as string}`;
    case 'enum':
      return `${where} must be one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    case 'discriminator': {
      const tag = join(field, params.tag as string);
      const values = ((error.parentSchema as { oneOf: Array<{ properties: Record<string, { const: unknown }> }> }).oneOf).map((v) => JSON.stringify(v.properties[params.tag as string]!.const));
      return `"${tag}" must be one of ${values.join(', ')}`;
    }
    case 'format':
      return params.format === 'date-time' ? `${where} must be a date-time with an offset (RFC 3339, e.g. 2026-11-21T10:00:00.000Z)` : `${where} must be a ${params.format as string}`;
    default:
      return `${where} ${error.message ?? 'is invalid'}`;
  }
}

/**
 * The 400 for a body that failed: a rule's own message where a rule failed (its branches' errors
 * only say which field each branch missed), the first error otherwise.
 */
function refusal(errors: ErrorObject[]): ServiceError {
  const rule = errors.find((e) => typeof e.parentSchema?.[RULE_MESSAGE] === 'string');
  const error = rule ?? errors[0]!;
  const { op, field } = locate(error.instancePath);
  const message = rule ? ((rule.parentSchema as Record<string, string>)[RULE_MESSAGE] as string) : describe(error, field, op !== null);
  const listed = { errors: errors.slice(0, 5).map((e) => ({ path: e.instancePath, message: e.message })) };
  if (!op) return invalid(message, listed);
  return invalid(`${op.list}[${op.index}]: ${message}`, { op_index: op.index, ...listed });
}

export function compileBodyCheck<S extends TSchema>(schema: S): BodyCheck<Static<S>> {
  const validate = ajv.compile<Static<S>>(schema);
  return (value) => {
    if (!validate(value)) throw refusal(validate.errors ?? []);
    return value;
  };
}
