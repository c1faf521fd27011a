/**
 * git's order of the entries of one tree: their names' bytes, a directory's name compared as if
 * it ended in "/". Entries are read in place, in the bytes of the tree that holds them.
 */
export interface EntryName {
  /** The tree's bytes. */
  buf: Buffer;
  /** The name's first byte and the byte after its last, in `buf`. */
  start: number;
  end: number;
  dir: boolean;
}

/** Byte `i` of an entry's name as git sorts it; -1 past the end. */
function sortByte(e: EntryName, i: number): number {
  if (e.start + i < e.end) return e.buf[e.start + i]!;
  return e.dir && e.start + i === e.end ? 0x2f : -1;
}

/** Negative when `a` comes first in git's tree order, positive when `b` does, 0 for the same name and kind. */
export function compareTreeOrder(a: EntryName, b: EntryName): number {
  // Names are short: a loop here costs less than a call into Buffer.compare (see treeEntryAt).
  const common = Math.min(a.end - a.start, b.end - b.start);
  for (let i = 0; i < common; i++) {
    const d = a.buf[a.start + i]! - b.buf[b.start + i]!;
    if (d !== 0) return d;
  }
  for (let i = common; ; i++) {
    const x = sortByte(a, i);
    const y = sortByte(b, i);
    if (x !== y || x === -1) return x - y;
  }
}
