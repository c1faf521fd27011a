import { invalid } from '../errors.js';
import type { QueryParam, QuerySpec } from './route.js';

/** A query component: `+` is a space, then percent-decoding (skipped when there is nothing to decode). */
function decodeComponent(raw: string): string {
  if (!raw.includes('%') && !raw.includes('+')) return raw;
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '));
  } catch {
    throw invalid('malformed percent-encoding in the query string');
  }
}

export interface ParsedQuery {
  values: Record<string, string | number | undefined>;
  pairs: Array<[string, string]>;
}

interface IndexedSpec {
  /**
   * The declared keys by name, each with the spec's own string for it: a key parsed from the query
   * is a new string, which an object lookup or store by it would first have to internalize.
   */
  keys: Map<string, { name: string; param: QueryParam }>;
  /** The defaults, listed once: most requests leave them out. */
  defaults: Array<[string, string | number]>;
}

const indexes = new WeakMap<QuerySpec, IndexedSpec>();
const NO_SPEC: IndexedSpec = { keys: new Map(), defaults: [] };

function indexed(spec: QuerySpec | undefined): IndexedSpec {
  if (!spec) return NO_SPEC;
  let index = indexes.get(spec);
  if (!index) {
    const entries = Object.entries(spec.keys);
    index = {
      keys: new Map(entries.map(([name, param]) => [name, { name, param }])),
      defaults: entries.flatMap(([k, p]): Array<[string, string | number]> => (p.default === undefined ? [] : [[k, p.default]])),
    };
    indexes.set(spec, index);
  }
  return index;
}

/**
 * Parses and checks a query string against a route's declared keys (API §1: unknown keys are
 * 400, except on routes whose spec is `open`). Returns typed values plus every pair in order.
 */
export function parseQuery(raw: string, spec: QuerySpec | undefined): ParsedQuery {
  const pairs: Array<[string, string]> = [];
  // Only declared keys (own entries of the spec) are stored, so a plain object is safe here; one
  // without a prototype would be a dictionary-mode object, many times slower to fill and read.
  const values: Record<string, string | number | undefined> = {};
  const index = indexed(spec);
  let from = 0;
  while (from < raw.length) {
    let end = raw.indexOf('&', from);
    if (end < 0) end = raw.length;
    if (end > from) {
      const eq = raw.indexOf('=', from);
      const split = eq >= 0 && eq < end;
      const k = decodeComponent(raw.slice(from, split ? eq : end));
      const v = split ? decodeComponent(raw.slice(eq + 1, end)) : '';
      pairs.push([k, v]);
      const known = index.keys.get(k);
      if (known) values[known.name] = checked(k, v, known.param, values[known.name]);
      else if (!spec?.open) throw invalid(`unknown query parameter "${k}"`);
    }
    from = end + 1;
  }
  for (const [k, value] of index.defaults) if (values[k] === undefined) values[k] = value;
  return { values, pairs };
}

function checked(k: string, v: string, param: QueryParam, previous: string | number | undefined): string | number {
  if (previous !== undefined) throw invalid(`query parameter "${k}" is given more than once`);
  if (param.type === 'int') {
    if (!/^-?\d{1,15}$/.test(v)) throw invalid(`query parameter "${k}" must be an integer`);
    const n = Number(v);
    if (n < param.min || n > param.max) throw invalid(`query parameter "${k}" must be between ${param.min} and ${param.max}`);
    return n;
  }
  if (param.enum && !param.enum.includes(v)) throw invalid(`query parameter "${k}" must be one of ${param.enum.join(', ')}`);
  if (param.minLength !== undefined && v.length < param.minLength) throw invalid(`query parameter "${k}" must not be empty`);
  if (param.maxLength !== undefined && v.length > param.maxLength) throw invalid(`query parameter "${k}" is too long`);
  return v;
}
