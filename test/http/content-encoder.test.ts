import t from 'tap';
import { ContentEncoder } from '../../src/http/content-encoder.js';
import { CHUNK_SIZE, ZLIB_BLOB, decodeObjectValue } from '../../src/storage/git-object-store.js';
import { hashObject } from '../../src/vcs/git-object.js';
import { turnsDuring } from '../helpers/event-loop-turns.js';

/** Text of words picked pseudo-randomly: level 1 compresses it to about 0.3 of its size. */
const text = (n: number, seed: number): Buffer => {
  const words = ['const', 'answer', 'compute', 'input', 'return', 'value', 'if', 'else', 'for', 'of', 'the', 'quick', 'brown', 'fox', '=', '(', ')', '{', '}', ';\n'];
  let state = seed + 1;
  let out = '';
  while (out.length < n) {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    out += `${words[state % words.length]}${state % 7 === 0 ? state : ''} `;
  }
  return Buffer.from(out.slice(0, n));
};

t.test('contents are stored under their git oid, in the order of their references, and read back as they were', async (t) => {
  const encoder = new ContentEncoder();
  const contents = [text(2048, 1), Buffer.alloc(0), text(100, 2), text(40 * 1024, 3)];
  const refs = contents.map((bytes) => encoder.add(bytes));
  const blobs = await encoder.encode();
  t.same(
    refs.map((r) => r.index),
    [0, 1, 2, 3],
  );
  for (const [i, bytes] of contents.entries()) {
    const oid = hashObject('blob', bytes);
    t.equal(refs[i]!.oid, oid, `content ${i} has its git oid`);
    const info = decodeObjectValue(oid, Buffer.from(blobs[i]!));
    t.equal(info.type, 'blob');
    t.ok(Buffer.from(info.content!).equals(bytes), `content ${i} reads back as it was`);
  }
  t.equal(blobs[0]![0], ZLIB_BLOB, 'a 2 KiB text is stored compressed');
});

t.test('a request full of contents lets other work run while they are compressed', async (t) => {
  // 8 MiB of text, the most a request keeps in memory: tens of milliseconds of zlib at once.
  const encoder = new ContentEncoder();
  for (let i = 0; i < 128; i++) encoder.add(text(64 * 1024, i));
  const { result: blobs, turns } = await turnsDuring(() => encoder.encode());
  t.equal(blobs.length, 128);
  // Without slices the encoding finishes before any turn; how many turns depends on the machine.
  t.ok(turns > 0, `the event loop turned ${turns} times during the encoding`);
});

t.test('a content over one chunk is refused: it should have been staged', async (t) => {
  t.throws(() => new ContentEncoder().add(Buffer.alloc(CHUNK_SIZE + 1)), /was not staged/);
  t.doesNotThrow(() => new ContentEncoder().add(Buffer.alloc(CHUNK_SIZE)));
});
