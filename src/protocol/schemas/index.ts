import * as analytics from './analytics.js';
import * as bookmarks from './bookmarks.js';
import * as changes from './changes.js';
import * as common from './common.js';
import * as content from './content.js';
import * as diff from './diff.js';
import * as git from './git.js';
import * as quota from './quota.js';
import * as repos from './repos.js';
import * as syncs from './syncs.js';
import * as webhooks from './webhooks.js';
import type { JsonSchema } from './common.js';

type Group = Readonly<Record<string, JsonSchema>>;

/**
 * Joins groups of response schemas into one table; a name given twice is an error, thrown when
 * the table is built (at start-up), never a silent overwrite.
 */
export function responseRegistry<const G extends readonly Group[]>(...groups: G): Readonly<Record<{ [I in keyof G]: keyof G[I] & string }[number], JsonSchema>> {
  const table = new Map<string, JsonSchema>();
  for (const group of groups) {
    for (const [name, schema] of Object.entries(group)) {
      if (table.has(name)) throw new Error(`the response schema "${name}" is defined twice`);
      table.set(name, schema);
    }
  }
  return Object.fromEntries(table) as Record<{ [I in keyof G]: keyof G[I] & string }[number], JsonSchema>;
}

/**
 * Every response shape the server writes, by name: each feature module lists its own
 * (`responses`), and this is the one place they come together. A reply names its shape with a
 * `SchemaName`, so a misspelt name does not compile.
 */
export const RESPONSE_SCHEMAS = responseRegistry(
  common.responses,
  repos.responses,
  syncs.responses,
  bookmarks.responses,
  changes.responses,
  content.responses,
  diff.responses,
  analytics.responses,
  webhooks.responses,
  git.responses,
  quota.responses,
);

export type SchemaName = keyof typeof RESPONSE_SCHEMAS;
