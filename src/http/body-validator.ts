import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { invalid } from '../errors.js';
import type { JsonSchema } from '../protocol/schemas/common.js';

/**
 * Request-body validation, compiled once per route at start-up. Schemas close their objects
 * (`additionalProperties: false`), so an unknown field — a typo — is a 400, never ignored.
 */
const ajv = new Ajv({ allErrors: false, strict: false, coerceTypes: false, useDefaults: false });

export type BodyCheck = (value: unknown) => void;

function describe(error: ErrorObject | undefined): string {
  if (!error) return 'request body does not match the schema';
  const where = error.instancePath ? `"${error.instancePath.slice(1).replace(/\//g, '.')}"` : 'body';
  switch (error.keyword) {
    case 'additionalProperties':
      return `unknown field "${[error.instancePath.slice(1).replace(/\//g, '.'), (error.params as { additionalProperty: string }).additionalProperty].filter(Boolean).join('.')}"`;
    case 'required':
      return `missing required field "${[error.instancePath.slice(1).replace(/\//g, '.'), (error.params as { missingProperty: string }).missingProperty].filter(Boolean).join('.')}"`;
    case 'type':
      return `${where} must be ${(error.params as { type: string | string[] }).type}`;
    case 'enum':
      return `${where} must be one of ${((error.params as { allowedValues: unknown[] }).allowedValues).map((v) => JSON.stringify(v)).join(', ')}`;
    default:
      return `${where} ${error.message ?? 'is invalid'}`;
  }
}

export function compileBodyCheck(schema: JsonSchema): BodyCheck {
  const validate: ValidateFunction = ajv.compile(schema);
  return (value) => {
    if (!validate(value)) throw invalid(describe(validate.errors?.[0]), { errors: (validate.errors ?? []).slice(0, 5).map((e) => ({ path: e.instancePath, message: e.message })) });
  };
}
