import t from 'tap';
import { TEXT_MERGE_MAX_BYTES, isBinaryContent, mergeText, splitLines } from '../../src/vcs/text-merge.js';

const b = (s: string): Buffer => Buffer.from(s, 'utf8');
const text = (r: ReturnType<typeof mergeText>): string => (r.kind === 'clean' ? Buffer.from(r.content).toString('utf8') : `<${r.kind}>`);

t.test('text merge - changes to different lines merge cleanly', async (t) => {
  const base = 'one\ntwo\nthree\nfour\nfive\n';
  t.equal(text(mergeText(b(base), b('ONE\ntwo\nthree\nfour\nfive\n'), b('one\ntwo\nthree\nfour\nFIVE\n'))), 'ONE\ntwo\nthree\nfour\nFIVE\n');
  t.equal(text(mergeText(b(base), b(base), b('x\n'))), 'x\n', 'one side unchanged takes the other');
  t.equal(text(mergeText(b(base), b('same\n'), b('same\n'))), 'same\n', 'the same change on both sides is clean');
  t.equal(text(mergeText(b('a\r\nb\r\nc'), b('A\r\nb\r\nc'), b('a\r\nb\r\nC'))), 'A\r\nb\r\nC', 'CRLF and a missing final newline survive');
});

t.test('text merge - overlapping changes give conflict regions with positions', async (t) => {
  const r = mergeText(b('a\nb\nc\nd\n'), b('a\nB1\nc\nd\n'), b('a\nB2\nc\nD\n'));
  t.equal(r.kind, 'conflict');
  if (r.kind !== 'conflict') return;
  t.same(r.regions, [
    { kind: 'clean', lines: ['a\n'] },
    { kind: 'conflict', base: ['b\n'], target: ['B1\n'], source: ['B2\n'], baseStart: 1, targetStart: 1, sourceStart: 1 },
    { kind: 'clean', lines: ['c\n', 'D\n'] },
  ]);
});

t.test('text merge - binary or oversized files merge only when two sides are equal', async (t) => {
  const bin = Buffer.from([1, 0, 2]);
  t.ok(isBinaryContent(bin));
  t.notOk(isBinaryContent(b('text')));
  t.same(mergeText(bin, Buffer.from([1, 0, 3]), Buffer.from([1, 0, 4])), { kind: 'unmergeable', reason: 'binary' });
  t.same(mergeText(bin, bin, Buffer.from([9, 0])), { kind: 'clean', content: Buffer.from([9, 0]) });
  const big = Buffer.alloc(TEXT_MERGE_MAX_BYTES + 1, 0x61);
  t.same(mergeText(b('x\n'), big, b('y\n')), { kind: 'unmergeable', reason: 'too_large' });
  t.same(splitLines(b('a\nb')), ['a\n', 'b']);
});
