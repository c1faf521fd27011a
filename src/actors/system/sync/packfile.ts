/**
 * git packfiles (gitformat-pack): reading what upload-pack sends (whole objects and OFS/REF
 * deltas, resolved against the pack or against objects we already hold) and writing what
 * receive-pack accepts (whole objects, zlib-deflated). Reading is two passes over the buffer:
 * the first finds every entry's extent and hands out whole objects at once; the second resolves
 * deltas in pack order, keeping a resolved base only while later deltas still need it.
 */
import { createHash } from 'node:crypto';
import { deflateSync, inflateSync } from 'node:zlib';
import { hashObject } from '../../../vcs/git-object.js';
import type { GitObject, ObjectType } from '../../../vcs/object-store.js';
import { GitProtocolError } from './sync-errors.js';

export interface PackObject {
  oid: string;
  type: ObjectType;
  content: Buffer;
}

const TYPE_BY_CODE: Record<number, ObjectType> = { 1: 'commit', 2: 'tree', 3: 'blob', 4: 'tag' };
const CODE_BY_TYPE: Record<ObjectType, number> = { commit: 1, tree: 2, blob: 3, tag: 4 };
const OFS_DELTA = 6;
const REF_DELTA = 7;

interface Entry {
  offset: number;
  code: number;
  dataStart: number;
  dataEnd: number;
  /** Inflated size (of the delta itself for deltas). */
  size: number;
  baseOffset?: number;
  baseOid?: string;
  /** A delta's instructions, kept from the first pass (small) until the delta is resolved. */
  delta?: Buffer;
}

/**
 * Inflates the zlib stream at `start`, whose inflated size the entry header gave. Sizing the
 * output buffer to it spares zlib's default 16 KiB chunks (most objects are far smaller), which
 * otherwise dominate the cost of reading a pack of many small objects.
 */
function inflateAt(pack: Buffer, start: number, size: number): { data: Buffer; consumed: number } {
  try {
    const { buffer, engine } = inflateSync(pack.subarray(start), { info: true, chunkSize: Math.max(64, size) }) as unknown as { buffer: Buffer; engine: { bytesWritten: number } };
    return { data: buffer, consumed: engine.bytesWritten };
  } catch {
    throw new GitProtocolError('the upstream sent a corrupt packfile (bad compressed data)');
  }
}

function readVarint(delta: Buffer, pos: number): [number, number] {
  let value = 0;
  let shift = 0;
  let byte: number;
  do {
    byte = delta[pos++]!;
    value += (byte & 0x7f) * 2 ** shift;
    shift += 7;
  } while (byte & 0x80);
  return [value, pos];
}

/** Applies a git delta (copy/insert instructions) to its base. */
export function applyDelta(base: Buffer, delta: Buffer): Buffer {
  let [sourceSize, pos] = readVarint(delta, 0);
  if (sourceSize !== base.length) throw new GitProtocolError('the upstream sent a corrupt packfile (delta base size mismatch)');
  let targetSize: number;
  [targetSize, pos] = readVarint(delta, pos);
  const out = Buffer.allocUnsafe(targetSize);
  let written = 0;
  while (pos < delta.length) {
    const op = delta[pos++]!;
    if (op & 0x80) {
      let offset = 0;
      let size = 0;
      for (let i = 0; i < 4; i++) if (op & (1 << i)) offset += delta[pos++]! * 2 ** (8 * i);
      for (let i = 0; i < 3; i++) if (op & (0x10 << i)) size += delta[pos++]! * 2 ** (8 * i);
      if (size === 0) size = 0x10000;
      if (offset + size > base.length || written + size > targetSize) throw new GitProtocolError('the upstream sent a corrupt packfile (delta copy out of range)');
      base.copy(out, written, offset, offset + size);
      written += size;
    } else if (op !== 0) {
      if (written + op > targetSize || pos + op > delta.length) throw new GitProtocolError('the upstream sent a corrupt packfile (delta insert out of range)');
      delta.copy(out, written, pos, pos + op);
      written += op;
      pos += op;
    } else throw new GitProtocolError('the upstream sent a corrupt packfile (reserved delta opcode)');
  }
  if (written !== targetSize) throw new GitProtocolError('the upstream sent a corrupt packfile (delta result size mismatch)');
  return out;
}

/**
 * Every object of a packfile, each with its oid. `external` supplies bases of REF deltas that are
 * not in the pack (thin packs); a delta whose base is nowhere is a protocol error.
 */
export function* readPack(pack: Buffer, external: (oid: string) => GitObject | undefined): Generator<PackObject> {
  if (pack.length < 32 || pack.toString('latin1', 0, 4) !== 'PACK') throw new GitProtocolError('the upstream sent something that is not a packfile');
  const version = pack.readUInt32BE(4);
  if (version !== 2 && version !== 3) throw new GitProtocolError(`the upstream sent packfile version ${version}, which is not supported`);
  const count = pack.readUInt32BE(8);
  const bodyEnd = pack.length - 20;
  const checksum = createHash('sha1').update(pack.subarray(0, bodyEnd)).digest();
  if (!checksum.equals(pack.subarray(bodyEnd))) throw new GitProtocolError('the upstream sent a corrupt packfile (checksum mismatch)');

  const entries = new Map<number, Entry>();
  const deltas: Entry[] = [];
  const oidOffset = new Map<string, number>();
  const dependents = new Map<number, number>();
  let pos = 12;
  for (let i = 0; i < count; i++) {
    if (pos >= bodyEnd) throw new GitProtocolError('the upstream sent a truncated packfile');
    const offset = pos;
    let byte = pack[pos++]!;
    const code = (byte >> 4) & 7;
    let size = byte & 0x0f;
    for (let shift = 4; byte & 0x80; shift += 7) {
      byte = pack[pos++]!;
      size += (byte & 0x7f) * 2 ** shift;
    }
    const entry: Entry = { offset, code, dataStart: 0, dataEnd: 0, size };
    if (code === OFS_DELTA) {
      byte = pack[pos++]!;
      let rel = byte & 0x7f;
      while (byte & 0x80) {
        byte = pack[pos++]!;
        rel = (rel + 1) * 128 + (byte & 0x7f);
      }
      entry.baseOffset = offset - rel;
      if (!entries.has(entry.baseOffset)) throw new GitProtocolError('the upstream sent a corrupt packfile (bad delta base offset)');
      dependents.set(entry.baseOffset, (dependents.get(entry.baseOffset) ?? 0) + 1);
    } else if (code === REF_DELTA) {
      entry.baseOid = pack.toString('hex', pos, pos + 20);
      pos += 20;
    } else if (!TYPE_BY_CODE[code]) throw new GitProtocolError(`the upstream sent a corrupt packfile (object type ${code})`);
    entry.dataStart = pos;
    const { data, consumed } = inflateAt(pack, pos, size);
    pos += consumed;
    entry.dataEnd = pos;
    entries.set(offset, entry);
    if (code === OFS_DELTA || code === REF_DELTA) {
      entry.delta = data;
      deltas.push(entry);
    } else {
      const type = TYPE_BY_CODE[code]!;
      const oid = hashObject(type, data);
      oidOffset.set(oid, offset);
      yield { oid, type, content: data };
    }
  }

  // Resolved objects kept while deltas later in the pack still name them as their base.
  const cache = new Map<number, { type: ObjectType; content: Buffer }>();
  const inflateEntry = (e: Entry): Buffer => inflateAt(pack.subarray(0, e.dataEnd), e.dataStart, e.size).data;
  const keep = (e: Entry, value: { type: ObjectType; content: Buffer }): void => {
    if ((dependents.get(e.offset) ?? 0) > 0) cache.set(e.offset, value);
  };
  const resolve = (start: Entry): { type: ObjectType; content: Buffer } | undefined => {
    const chain: Entry[] = [];
    let e: Entry = start;
    let base: { type: ObjectType; content: Buffer } | undefined;
    for (;;) {
      base = cache.get(e.offset);
      if (base) break;
      if (e.code !== OFS_DELTA && e.code !== REF_DELTA) {
        base = { type: TYPE_BY_CODE[e.code]!, content: inflateEntry(e) };
        keep(e, base);
        break;
      }
      chain.push(e);
      if (e.baseOffset !== undefined) e = entries.get(e.baseOffset)!;
      else {
        const at = oidOffset.get(e.baseOid!);
        if (at !== undefined) e = entries.get(at)!;
        else {
          const outside = external(e.baseOid!);
          if (!outside) return undefined;
          base = { type: outside.type, content: Buffer.from(outside.content) };
          break;
        }
      }
    }
    for (let i = chain.length - 1; i >= 0; i--) {
      const link = chain[i]!;
      base = { type: base.type, content: applyDelta(base.content, link.delta ?? inflateEntry(link)) };
      keep(link, base);
    }
    return base;
  };

  // REF deltas may name a base that is itself a delta later in the pack: retry until stuck.
  let pending = deltas;
  while (pending.length > 0) {
    const unresolved: Entry[] = [];
    for (const d of pending) {
      const value = resolve(d);
      if (!value) {
        unresolved.push(d);
        continue;
      }
      const oid = hashObject(value.type, value.content);
      oidOffset.set(oid, d.offset);
      d.delta = undefined;
      if (d.baseOffset !== undefined) {
        const left = (dependents.get(d.baseOffset) ?? 1) - 1;
        dependents.set(d.baseOffset, left);
        if (left <= 0) cache.delete(d.baseOffset);
      }
      yield { oid, type: value.type, content: value.content };
    }
    if (unresolved.length === pending.length) throw new GitProtocolError(`the upstream sent a packfile with ${unresolved.length} unresolvable deltas`);
    pending = unresolved;
  }
}

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
