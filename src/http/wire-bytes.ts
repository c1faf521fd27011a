/**
 * The fixed strings the front end hands to uWS on every request (header names, status lines,
 * media types) as bytes made once. uWS takes bytes as they are; a string is measured and encoded
 * to UTF-8 at each call, about half a percent of the front end's time per string on a cached read
 * (docs/measurements/2026-11-29-read-path-native-calls.md).
 * Values that vary per request stay strings; the names of a reply forwarded from another node
 * come from its answer, so the set is bounded, and strings past the bound are encoded each time.
 */
const MAX_KEPT = 512;
const bytes = new Map<string, Buffer>();

export function wireBytes(text: string): Buffer {
  let encoded = bytes.get(text);
  if (encoded) return encoded;
  encoded = Buffer.from(text);
  if (bytes.size < MAX_KEPT) bytes.set(text, encoded);
  return encoded;
}
