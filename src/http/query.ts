import { invalid } from '../errors.js';
import type { QuerySpec } from './route.js';

/** A query component: `+` is a space, then percent-decoding (skipped when there is nothing to decode). */
function decodeComponent(raw: string): string {
  if (!raw.includes('%') && !raw.includes('+')) return raw;
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '));
  } catch {
    throw invalid('malformed percent-encoding in the query string');
  }
}

/**
 * Parses and checks a query string against a route's declared keys (API §1: unknown keys are
 * 400, except on routes whose spec is `open`). Returns typed values plus every pair in order.
 */
export function parseQuery(raw: string, spec: QuerySpec | undefined): { values: Record<string, string | number | undefined>; pairs: Array<[string, string]> } {
  const pairs: Array<[string, string]> = [];
  if (raw) {
    for (const part of raw.split('&')) {
      if (!part) continue;
      const eq = part.indexOf('=');
      const k = eq < 0 ? part : part.slice(0, eq);
      const v = eq < 0 ? '' : part.slice(eq + 1);
      pairs.push([decodeComponent(k), decodeComponent(v)]);
    }
  }
  // Keys are the client's: looked up as own entries only, into an object without a prototype.
  const values: Record<string, string | number | undefined> = Object.create(null);
  const keys = spec?.keys ?? {};
  for (const [k, v] of pairs) {
    const param = Object.hasOwn(keys, k) ? keys[k] : undefined;
    if (!param) {
      if (spec?.open) continue;
      throw invalid(`unknown query parameter "${k}"`);
    }
    if (values[k] !== undefined) throw invalid(`query parameter "${k}" is given more than once`);
    if (param.type === 'int') {
      if (!/^-?\d{1,15}$/.test(v)) throw invalid(`query parameter "${k}" must be an integer`);
      const n = Number(v);
      if (n < param.min || n > param.max) throw invalid(`query parameter "${k}" must be between ${param.min} and ${param.max}`);
      values[k] = n;
    } else {
      if (param.enum && !param.enum.includes(v)) throw invalid(`query parameter "${k}" must be one of ${param.enum.join(', ')}`);
      if (param.minLength !== undefined && v.length < param.minLength) throw invalid(`query parameter "${k}" must not be empty`);
      if (param.maxLength !== undefined && v.length > param.maxLength) throw invalid(`query parameter "${k}" is too long`);
      values[k] = v;
    }
  }
  for (const [k, param] of Object.entries(keys)) {
    if (values[k] === undefined && param.default !== undefined) values[k] = param.default;
  }
  return { values, pairs };
}
