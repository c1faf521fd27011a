import fastJson from 'fast-json-stringify';
import { RESPONSE_SCHEMAS, type SchemaName } from './schemas/index.js';

/**
 * Every response shape by name (schemas/index.ts), compiled into a fast-json-stringify serializer
 * once per thread. Response schemas list their properties with `additionalProperties: false`, so
 * a field that is not in the contract (a sealed credential, an internal counter) can never leak
 * into a response.
 */
const compiled = new Map<SchemaName, (value: unknown) => string>();

function compile(name: SchemaName): (value: unknown) => string {
  const fn = fastJson(RESPONSE_SCHEMAS[name] as unknown as Parameters<typeof fastJson>[0]);
  compiled.set(name, fn);
  return fn;
}

/** Compiles the serializers a thread writes ahead of its first request (every one by default). */
export function compileResponses(names: readonly SchemaName[] = Object.keys(RESPONSE_SCHEMAS) as SchemaName[]): void {
  for (const name of names) if (!compiled.has(name)) compile(name);
}

export function serialize(name: SchemaName, value: unknown): string {
  return (compiled.get(name) ?? compile(name))(value);
}
