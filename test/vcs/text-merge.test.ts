import t from 'tap';
import { splitLines } from '../../src/vcs/lines.js';
import { TEXT_MERGE_MAX_BYTES, isBinaryContent, mergeText } from '../../src/vcs/text-merge.js';

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

t.test('text merge - an insertion among equal lines goes below them, as git places it', async (t) => {
  // The target repeats k and n; where its second n goes (before or after the first) decides
  // whether it touches the source's y: placed below, the two merge cleanly.
  const lines = (words: string): string => words.replaceAll(' ', '\n') + '\n';
  t.equal(text(mergeText(b(lines('k m n o')), b(lines('k k m n n o')), b(lines('k m y n o')))), lines('k k m y n n o'));
  t.equal(text(mergeText(b(lines('k m n n o')), b(lines('k k m n o')), b(lines('k m y n n o')))), lines('k k m y n o'), 'a deletion among equal lines too');
});

t.test('text merge - long files of repeated lines merge line-exact, without a quadratic search', { timeout: 60_000 }, async (t) => {
  // node-diff3's search was cubic in repeated lines: 2,000 blank lines took 30 s, these would
  // take days. Each side's alignment with the base costs about (N+M)·D.
  const blank = '\n'.repeat(100_000);
  t.equal(text(mergeText(b(blank), b(`${blank}end\n`), b(`start\n${blank}`))), `start\n${blank}end\n`);
  const code = Array.from({ length: 50_000 }, (_, i) => (i % 7 === 0 ? '\n' : i % 5 === 0 ? '}\n' : `line ${i}\n`)).join('');
  const target = code.replace('line 101\n', 'TARGET\n');
  const source = code.replace('line 49999\n', 'SOURCE\n');
  t.equal(text(mergeText(b(code), b(target), b(source))), code.replace('line 101\n', 'TARGET\n').replace('line 49999\n', 'SOURCE\n'));
  const r = mergeText(b(code), b(code.replace('line 3\n', 'T\n')), b(code.replace('line 3\n', 'S\n')));
  t.equal(r.kind, 'conflict');
  if (r.kind === 'conflict') t.same(r.regions[1], { kind: 'conflict', base: ['line 3\n'], target: ['T\n'], source: ['S\n'], baseStart: 3, targetStart: 3, sourceStart: 3 });
});
