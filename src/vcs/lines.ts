/**
 * File contents as lines with their terminators, one string character per byte (latin1), so
 * splitting and joining is lossless and comparison is bytewise: any encoding, CRLF endings and a
 * missing final newline survive a diff or a merge unchanged.
 */
export function splitLines(content: Uint8Array): string[] {
  const text = Buffer.from(content.buffer, content.byteOffset, content.byteLength).toString('latin1');
  const lines: string[] = [];
  let start = 0;
  for (;;) {
    const nl = text.indexOf('\n', start);
    if (nl < 0) break;
    lines.push(text.slice(start, nl + 1));
    start = nl + 1;
  }
  if (start < text.length) lines.push(text.slice(start));
  return lines;
}

export function joinLines(lines: readonly string[]): Buffer {
  return Buffer.from(lines.join(''), 'latin1');
}
