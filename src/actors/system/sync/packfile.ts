/**
 * Writing git packfiles (gitformat-pack) for receive-pack: version 2, whole (undeltified)
 * objects, zlib-deflated, with the SHA-1 trailer. Reading packs is pack-reader.ts.
 */
import { createHash } from 'node:crypto';
import { deflateSync } from 'node:zlib';
import type { GitObject, ObjectType } from '../../../vcs/object-store.js';

const CODE_BY_TYPE: Record<ObjectType, number> = { commit: 1, tree: 2, blob: 3, tag: 4 };

function entryHeader(code: number, size: number): Buffer {
  const bytes: number[] = [];
  let byte = (code << 4) | (size & 0x0f);
  let rest = Math.floor(size / 16);
  while (rest > 0) {
    bytes.push(byte | 0x80);
    byte = rest & 0x7f;
    rest = Math.floor(rest / 128);
  }
  bytes.push(byte);
  return Buffer.from(bytes);
}

/** A version-2 packfile of whole (undeltified) objects. */
export function writePack(objects: readonly GitObject[]): Buffer {
  const header = Buffer.alloc(12);
  header.write('PACK', 0, 'latin1');
  header.writeUInt32BE(2, 4);
  header.writeUInt32BE(objects.length, 8);
  const parts: Buffer[] = [header];
  for (const object of objects) {
    parts.push(entryHeader(CODE_BY_TYPE[object.type], object.content.length), deflateSync(object.content));
  }
  const body = Buffer.concat(parts);
  return Buffer.concat([body, createHash('sha1').update(body).digest()]);
}
