import fastJson from 'fast-json-stringify';
import { errorEnvelope, success, type JsonSchema } from './schemas/common.js';
import * as repos from './schemas/repos.js';
import * as syncs from './schemas/syncs.js';

/**
 * Every response shape by name, compiled once per thread into a fast-json-stringify serializer.
 * Response schemas list their properties with `additionalProperties: false`, so a field that is
 * not in the contract (a sealed credential, an internal counter) can never leak into a response.
 */
const RESPONSE_SCHEMAS = {
  error: errorEnvelope,
  success,
  repository: repos.repository,
  repositoryPage: repos.repositoryPage,
  repositoryNumberedPage: repos.repositoryNumberedPage,
  organization: repos.organization,
  whoami: repos.whoami,
  sync: syncs.sync,
} satisfies Record<string, JsonSchema>;

export type SchemaName = keyof typeof RESPONSE_SCHEMAS;

const extraSchemas = new Map<string, JsonSchema>();
const compiled = new Map<string, (value: unknown) => string>();

/** Lets a feature module add its response shapes; call at module load, before `compileAll`. */
export function registerResponseSchemas(schemas: Record<string, JsonSchema>): void {
  for (const [name, schema] of Object.entries(schemas)) extraSchemas.set(name, schema);
}

export function compileAll(): void {
  for (const [name, schema] of [...Object.entries(RESPONSE_SCHEMAS), ...extraSchemas]) {
    if (!compiled.has(name)) compiled.set(name, fastJson(schema as unknown as Parameters<typeof fastJson>[0]) as (value: unknown) => string);
  }
}

export function serialize(name: string, value: unknown): string {
  let fn = compiled.get(name);
  if (!fn) {
    compileAll();
    fn = compiled.get(name);
    if (!fn) throw new Error(`no response schema named ${name}`);
  }
  return fn(value);
}
