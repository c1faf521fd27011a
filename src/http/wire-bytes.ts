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

/**
 * Headers the server makes once and writes in one call. uWS writes a header as its name, ": ",
 * its value and CRLF without looking inside them, so a value that goes on with "CRLF name: value"
 * lines writes them all: one call into uWS instead of one per header, no lookups of the names'
 * bytes. Only for values the server makes, which cannot hold CR or LF (checked here).
 */
export class HeaderBlock {
  /** The first header's name, then all the rest. */
  readonly name: Buffer;
  readonly rest: Buffer;
  private readonly names: ReadonlySet<string>;

  constructor(headers: Readonly<Record<string, string>>) {
    const entries = Object.entries(headers);
    if (entries.length === 0) throw new Error('a header block needs a header');
    for (const [name, value] of entries) if (/[\r\n]/.test(name + value)) throw new Error(`header ${name} holds a line break`);
    this.name = Buffer.from(entries[0]![0]);
    this.rest = Buffer.from([entries[0]![1], ...entries.slice(1).map(([name, value]) => `${name}: ${value}`)].join('\r\n'));
    this.names = new Set(entries.map(([name]) => name));
  }

  has(name: string): boolean {
    return this.names.has(name);
  }
}
