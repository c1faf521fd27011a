import type { HttpRequest } from '@trufflesuite/uws-js-unofficial';
import { ServiceError } from '../errors.js';
import { tooLarge } from './body-reader.js';

/**
 * Content-Length as uWS's parser (this build) reads it: one to nine decimal digits. For any other
 * value it still calls the request handler, then closes the connection; with several fields it
 * frames the body by the first. Both need an answer written before the handler returns (see
 * `sendErrorAndClose`).
 */
const READABLE_LENGTH = /^\d{1,9}$/;
const DIGITS = /^\d+$/;

const malformed = (): ServiceError => new ServiceError('INVALID_REQUEST', 'Content-Length must be one decimal number of bytes');

/**
 * The refusal of a Content-Length uWS cannot read (`value` as `getHeader` gives it), or null.
 * `limit` is the body limit of the request's route.
 */
export function unreadableLength(value: string, limit: () => number): ServiceError | null {
  if (value === '' || READABLE_LENGTH.test(value)) return null;
  // Ten digits are a gigabyte or more: over every route's limit (700 MiB at most).
  return DIGITS.test(value) ? tooLarge(limit()) : malformed();
}

/**
 * The refusal of a request with more than one Content-Length field, or one with an empty value
 * (uWS reads no body by it and would take the body for the next request), or null. It walks
 * every header, so it is for requests that declare a length or may carry a body.
 */
export function ambiguousLength(req: HttpRequest): ServiceError | null {
  let fields = 0;
  let empty = false;
  req.forEach((key, value) => {
    if (key !== 'content-length') return;
    fields++;
    empty ||= value === '';
  });
  return fields > 1 || empty ? malformed() : null;
}
