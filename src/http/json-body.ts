import { isUtf8 } from 'node:buffer';
import { invalid, type ServiceError } from '../errors.js';

/**
 * JSON request bodies are taken exactly as sent or refused (400): bytes that are not UTF-8 and
 * strings with a lone surrogate would otherwise be stored as U+FFFD, and a `__proto__` key would
 * be dropped or renamed by the objects and the storage encoding it passes through.
 */
export const FORBIDDEN_KEY = '__proto__';

const ESCAPED_SURROGATE = /\\u[dD][89a-fA-F]/;

export const notUtf8 = (): ServiceError => invalid('request body is not valid UTF-8');
export const loneSurrogate = (): ServiceError => invalid('request body has a string with a lone UTF-16 surrogate (\\uD800-\\uDFFF), which has no UTF-8 form');
export const forbiddenKey = (): ServiceError => invalid(`"${FORBIDDEN_KEY}" is not allowed as a key`);

/** Parses a whole JSON body, with the checks above. */
export function parseJsonBody(raw: Buffer): unknown {
  if (!isUtf8(raw)) throw notUtf8();
  const text = raw.toString('utf8');
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw invalid('malformed JSON body');
  }
  // Both checks need a walk over the value; the text says cheaply whether one can fail.
  const surrogates = ESCAPED_SURROGATE.test(text);
  if (surrogates || text.includes(`"${FORBIDDEN_KEY}"`)) checkValue(body, surrogates);
  return body;
}

/** Walks the value with a stack of its own: JSON.parse takes nesting far deeper than the call stack does. */
function checkValue(root: unknown, surrogates: boolean): void {
  const pending: unknown[] = [root];
  while (pending.length) {
    const value = pending.pop();
    if (typeof value === 'string') {
      if (surrogates && !value.isWellFormed()) throw loneSurrogate();
    } else if (Array.isArray(value)) {
      for (const item of value) pending.push(item);
    } else if (value !== null && typeof value === 'object') {
      for (const key of Object.keys(value)) {
        checkKey(key);
        if (surrogates && !key.isWellFormed()) throw loneSurrogate();
        pending.push((value as Record<string, unknown>)[key]);
      }
    }
  }
}

export function checkKey(key: string): void {
  if (key === FORBIDDEN_KEY) throw forbiddenKey();
}
