import { invalid } from '../errors.js';

/**
 * The structured tag filter of `GET /{org}/repos?tags=` and `repos/list?metadata=` (API §4.3),
 * compiled once per request into a predicate. Keys, operators and values match
 * case-insensitively. Limits: depth 8, 100 clauses.
 */
export type TagPredicate = (tags: Record<string, string>) => boolean;

const MAX_DEPTH = 8;
const MAX_CLAUSES = 100;
const VALUE_OPS = new Set(['$eq', '$in', '$contains', '$starts_with', '$ends_with', '$exists']);

export function parseTagFilter(raw: string | undefined, param: string): TagPredicate | null {
  if (raw === undefined || raw === '') return null;
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    throw invalid(`query parameter "${param}" must be URL-encoded JSON, e.g. {"team":"infra"} or {"$or":[{"env":"prod"},{"env":"staging"}]}`);
  }
  const counter = { clauses: 0 };
  return compileFilter(value, 1, counter, param);
}

function lookup(tags: Record<string, string>, key: string): string | undefined {
  const lower = key.toLowerCase();
  for (const k in tags) if (k.toLowerCase() === lower) return tags[k];
  return undefined;
}

function compileFilter(value: unknown, depth: number, counter: { clauses: number }, param: string): TagPredicate {
  if (depth > MAX_DEPTH) throw invalid(`"${param}" filter is nested deeper than ${MAX_DEPTH} levels`);
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw invalid(`"${param}" filter must be a JSON object`);
  const parts: TagPredicate[] = [];
  for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
    if (++counter.clauses > MAX_CLAUSES) throw invalid(`"${param}" filter has more than ${MAX_CLAUSES} clauses`);
    const op = key.toLowerCase();
    if (op === '$and' || op === '$or') {
      if (!Array.isArray(v) || v.length === 0) throw invalid(`"${key}" takes a non-empty array of filters`);
      const subs = v.map((f) => compileFilter(f, depth + 1, counter, param));
      parts.push(op === '$and' ? (t) => subs.every((s) => s(t)) : (t) => subs.some((s) => s(t)));
    } else if (op === '$not') {
      const sub = compileFilter(v, depth + 1, counter, param);
      parts.push((t) => !sub(t));
    } else if (key.startsWith('$')) {
      throw invalid(`unknown filter operator "${key}"`);
    } else {
      parts.push(compileCondition(key, v));
    }
  }
  return (t) => parts.every((p) => p(t));
}

function strings(v: unknown, what: string): string[] {
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw invalid(`${what} takes an array of strings`);
  return v.map((x) => x.toLowerCase());
}

function compileCondition(key: string, v: unknown): TagPredicate {
  const get = (t: Record<string, string>): string | undefined => lookup(t, key)?.toLowerCase();
  if (typeof v === 'string') {
    const want = v.toLowerCase();
    return (t) => get(t) === want;
  }
  if (Array.isArray(v)) {
    const set = strings(v, `tag "${key}"`);
    return (t) => set.includes(get(t) ?? '\0');
  }
  if (!v || typeof v !== 'object') throw invalid(`tag "${key}" must be a string, an array of strings or an operator object`);
  const entries = Object.entries(v as Record<string, unknown>);
  if (entries.length !== 1) throw invalid(`tag "${key}" takes exactly one operator`);
  const [rawOp, arg] = entries[0]!;
  const op = rawOp.toLowerCase();
  if (!VALUE_OPS.has(op)) throw invalid(`unknown filter operator "${rawOp}"`);
  if (op === '$exists') {
    if (typeof arg !== 'boolean') throw invalid('"$exists" takes a boolean');
    return (t) => (get(t) !== undefined) === arg;
  }
  if (op === '$in') {
    const set = strings(arg, '"$in"');
    return (t) => set.includes(get(t) ?? '\0');
  }
  if (typeof arg !== 'string') throw invalid(`"${rawOp}" takes a string`);
  const s = arg.toLowerCase();
  switch (op) {
    case '$eq':
      return (t) => get(t) === s;
    case '$contains':
      return (t) => get(t)?.includes(s) ?? false;
    case '$starts_with':
      return (t) => get(t)?.startsWith(s) ?? false;
    default:
      return (t) => get(t)?.endsWith(s) ?? false;
  }
}
