/**
 * Packfiles built byte by byte (gitformat-pack) for tests that must send what git would never
 * write: wrong sizes, bases that are nowhere, damaged trailers.
 */
import { createHash } from 'node:crypto';
import { deflateSync } from 'node:zlib';

export const COMMIT = 1;
export const TREE = 2;
export const BLOB = 3;
export const TAG = 4;
export const OFS_DELTA = 6;
export const REF_DELTA = 7;

export function entryHeader(code: number, size: number): Buffer {
  const bytes: number[] = [];
  let byte = (code << 4) | (size % 16);
  let rest = Math.floor(size / 16);
  while (rest > 0) {
    bytes.push(byte | 0x80);
    byte = rest % 128;
    rest = Math.floor(rest / 128);
  }
  bytes.push(byte);
  return Buffer.from(bytes);
}

/** A pack of the given entries; `count` may claim another number of objects. */
export function pack(entries: Buffer[], count = entries.length): Buffer {
  const header = Buffer.alloc(12);
  header.write('PACK', 0, 'latin1');
  header.writeUInt32BE(2, 4);
  header.writeUInt32BE(count, 8);
  const body = Buffer.concat([header, ...entries]);
  return Buffer.concat([body, createHash('sha1').update(body).digest()]);
}

/** An entry holding an object whole; `declared` may claim another size. */
export const entry = (code: number, content: Buffer, declared = content.length): Buffer => Buffer.concat([entryHeader(code, declared), deflateSync(content)]);

export const whole = (content: Buffer, declared = content.length): Buffer => entry(BLOB, content, declared);

export function varint(n: number): Buffer {
  const bytes: number[] = [];
  do {
    let byte = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) byte |= 0x80;
    bytes.push(byte);
  } while (n > 0);
  return Buffer.from(bytes);
}

/** A delta: copy `base[0, copy)` then insert `tail`. */
export function delta(baseSize: number, copy: number, tail: string, targetSize = copy + Buffer.byteLength(tail)): Buffer {
  const op = Buffer.from([0x80 | 0x10 | 0x20, copy & 0xff, (copy >> 8) & 0xff]);
  return Buffer.concat([varint(baseSize), varint(targetSize), op, Buffer.from([Buffer.byteLength(tail)]), Buffer.from(tail)]);
}

export const refDelta = (baseOid: string, instructions: Buffer): Buffer => Buffer.concat([entryHeader(REF_DELTA, instructions.length), Buffer.from(baseOid, 'hex'), deflateSync(instructions)]);

export function ofsDelta(distance: number, instructions: Buffer): Buffer {
  const bytes = [distance & 0x7f];
  for (let d = distance >> 7; d > 0; d >>= 7) {
    d--;
    bytes.unshift(0x80 | (d & 0x7f));
  }
  return Buffer.concat([entryHeader(OFS_DELTA, instructions.length), Buffer.from(bytes), deflateSync(instructions)]);
}
