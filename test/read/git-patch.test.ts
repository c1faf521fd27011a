import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { inflateSync } from 'node:zlib';
import { randomBytes } from 'node:crypto';
import { MemoryObjectStore } from '../../src/vcs/memory-object-store.js';
import { EMPTY_TREE_OID, writeBlob, type FileMode } from '../../src/vcs/git-object.js';
import { applyTreeEdits, writeEmptyTree, type TreeEdit } from '../../src/vcs/tree-edit.js';
import { binaryLiteral, quoteName, treePatch } from '../../src/vcs/read/git-patch.js';
import { NO_NEWLINE_MARKER, diffContents } from '../../src/vcs/read/line-diff.js';
import { exportToGit } from '../vcs/vcs-helpers.js';

type Spec = string | Buffer | { content: string | Buffer; mode: FileMode };

function tree(store: MemoryObjectStore, files: Record<string, Spec>): string {
  writeEmptyTree(store);
  const edits: TreeEdit[] = Object.entries(files).map(([path, spec]) => {
    const { content, mode } = typeof spec === 'string' || Buffer.isBuffer(spec) ? { content: spec, mode: '100644' as const } : spec;
    return { op: 'write', path, blobOid: writeBlob(store, content), mode };
  });
  return applyTreeEdits(store, EMPTY_TREE_OID, edits);
}

/**
 * Checks out `base` into a work tree, applies the patch with `git apply` (after `--check`), and
 * returns the tree git writes from the result — equal to `head` exactly when every byte, mode,
 * symlink and path came out right.
 */
function applyWithGit(store: MemoryObjectStore, base: string, patch: Buffer, reverse = false): { tree: string; check: string } {
  const repo = exportToGit(store, {});
  const work = mkdtempSync(join(tmpdir(), 'repohost-apply-'));
  const env = { ...process.env, GIT_DIR: repo.dir, GIT_WORK_TREE: work, GIT_INDEX_FILE: join(work, '..', `${work.split('/').pop()}.index`), GIT_CONFIG_NOSYSTEM: '1', HOME: work };
  const git = (...args: string[]): { status: number; stdout: string; stderr: string } => {
    const r = spawnSync('git', args, { cwd: work, env, encoding: 'utf8', maxBuffer: 1 << 28 });
    return { status: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
  };
  try {
    git('read-tree', base);
    git('checkout-index', '-a');
    const file = join(work, '..', `${work.split('/').pop()}.patch`);
    writeFileSync(file, patch);
    const args = reverse ? ['-R'] : [];
    const check = git('apply', '--check', ...args, file);
    if (check.status !== 0) return { tree: '', check: check.stderr };
    const applied = git('apply', ...args, file);
    if (applied.status !== 0) return { tree: '', check: applied.stderr };
    git('add', '-A', '.');
    return { tree: git('write-tree').stdout.trim(), check: '' };
  } finally {
    rmSync(work, { recursive: true, force: true });
    repo.cleanup();
  }
}

t.test('line diff - each rewritten line is one deletion and one addition, hunks group changes with 3 lines of context', async (t) => {
  const a = Buffer.from(Array.from({ length: 30_000 }, (_, i) => `line ${i}\n`).join(''));
  const b = Buffer.from(Array.from({ length: 30_000 }, (_, i) => (i % 3 === 0 ? `rewritten ${i}\n` : `line ${i}\n`)).join(''));
  const diff = diffContents(a, b)!;
  t.equal(diff.additions, 10_000);
  t.equal(diff.deletions, 10_000);
  t.equal(diff.hunks.length, 1, 'changes 2 lines apart share one hunk');
  const small = diffContents(Buffer.from('1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n'), Buffer.from('1\nTWO\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\nFOURTEEN\n15\n'))!;
  t.same(
    small.hunks.map((h) => [h.oldStart, h.oldLines, h.newStart, h.newLines, h.lines]),
    [
      [1, 5, 1, 5, [' 1', '-2', '+TWO', ' 3', ' 4', ' 5']],
      [11, 5, 11, 5, [' 11', ' 12', ' 13', '-14', '+FOURTEEN', ' 15']],
    ],
    'changes more than 6 lines apart are separate hunks',
  );
  const created = diffContents(new Uint8Array(0), Buffer.from('a\nb'))!;
  t.same(created.hunks, [{ oldStart: 1, oldLines: 0, newStart: 1, newLines: 2, lines: ['+a', '+b', NO_NEWLINE_MARKER] }]);
  t.same(diffContents(Buffer.from('same'), Buffer.from('same')), { hunks: [], additions: 0, deletions: 0 });
});

t.test('git patch - every kind of change applies with git apply and rebuilds the head tree exactly', async (t) => {
  const store = new MemoryObjectStore();
  const bin = randomBytes(20_000);
  const lines = Array.from({ length: 200 }, (_, i) => `line ${i}\n`);
  const base = tree(store, {
    'a.txt': 'one\ntwo\nthree\n',
    'long.txt': lines.join(''),
    'gone.txt': 'bye\n',
    'dir/old name.txt': 'moving\ncontent\n',
    'mode.sh': '#!/bin/sh\necho\n',
    'mode-and-content.sh': 'echo 1\n',
    'bin.dat': bin,
    'bin-gone.dat': bin.subarray(0, 5000),
    'no-newline.txt': 'x\ny',
    'tést/ü.txt': 'unicode\n',
    'quote"and\\back.txt': 'odd name\n',
    link: { content: 'a.txt', mode: '120000' },
    'type-change': 'a file\n',
    'empty-gone': '',
    'crlf.txt': 'a\r\nb\r\nc\r\n',
  });
  const head = tree(store, {
    'a.txt': 'one\n2\nthree\nfour\n',
    'long.txt': lines.map((l, i) => (i % 50 === 7 ? `changed ${i}\n` : l)).join(''),
    'moved/new name.txt': 'moving\ncontent\n',
    'mode.sh': { content: '#!/bin/sh\necho\n', mode: '100755' },
    'mode-and-content.sh': { content: 'echo 2\n', mode: '100755' },
    'bin.dat': Buffer.concat([bin.subarray(0, 10_000), randomBytes(300)]),
    'bin-new.dat': Buffer.concat([Buffer.alloc(1), randomBytes(69)]),
    'no-newline.txt': 'x\nz',
    'tést/ü.txt': 'unicode!\n',
    'quote"and\\back.txt': 'odd name!\n',
    link: { content: 'gone-target', mode: '120000' },
    'type-change': { content: 'a.txt', mode: '120000' },
    'empty-new': '',
    'crlf.txt': 'a\r\nB\r\nc\r\n',
    'new/deep/file.txt': 'fresh\n',
  });
  const patch = Buffer.concat(treePatch(store, base, head));
  const text = patch.toString('latin1');
  t.match(text, 'diff --git a/dir/old name.txt b/moved/new name.txt\nsimilarity index 100%\nrename from dir/old name.txt\nrename to moved/new name.txt\n');
  t.match(text, 'diff --git a/mode.sh b/mode.sh\nold mode 100644\nnew mode 100755\ndiff --git');
  t.match(text, /diff --git a\/mode-and-content\.sh b\/mode-and-content\.sh\nold mode 100644\nnew mode 100755\nindex [0-9a-f]{40}\.\.[0-9a-f]{40}\n---/);
  t.match(text, /diff --git a\/gone\.txt b\/gone\.txt\ndeleted file mode 100644\nindex [0-9a-f]{40}\.\.0{40}\n--- a\/gone\.txt\n\+\+\+ \/dev\/null\n@@ -1 \+0,0 @@\n-bye\n/);
  t.match(text, /diff --git a\/bin-new\.dat b\/bin-new\.dat\nnew file mode 100644\nindex 0{40}\.\.[0-9a-f]{40}\nGIT binary patch\nliteral 70\n/);
  t.match(text, /diff --git a\/bin\.dat b\/bin\.dat\nindex [0-9a-f]{40}\.\.[0-9a-f]{40} 100644\nGIT binary patch\nliteral 10300\n/);
  t.match(text, 'diff --git "a/t\\303\\251st/\\303\\274.txt" "b/t\\303\\251st/\\303\\274.txt"\n');
  t.match(text, 'diff --git "a/quote\\"and\\\\back.txt" "b/quote\\"and\\\\back.txt"\n');
  t.match(text, /diff --git a\/type-change b\/type-change\ndeleted file mode 100644\n[^]*diff --git a\/type-change b\/type-change\nnew file mode 120000\n/);
  t.match(text, /diff --git a\/empty-new b\/empty-new\nnew file mode 100644\nindex 0{40}\.\.e69de29bb2d1d6434b8b29ae775ad8c2e48c5391\ndiff --git/);
  t.match(text, '-y\n\\ No newline at end of file\n+z\n\\ No newline at end of file\n');
  t.notMatch(text, /rename from empty-gone/, 'empty files are never paired as renames');

  const forward = applyWithGit(store, base, patch);
  t.equal(forward.check, '', 'git apply --check accepts the patch');
  t.equal(forward.tree, head, 'applying it yields the head tree, byte for byte');
  const backward = applyWithGit(store, head, patch, true);
  t.equal(backward.tree, base, 'git apply -R (reverse binary literals included) yields the base tree');
});

t.test('git patch - a text diff too costly to compute is sent as a binary literal that still applies', async (t) => {
  const store = new MemoryObjectStore();
  // Few distinct lines in a different order: every line is common, and the edit distance huge.
  const lines = Array.from({ length: 20_000 }, (_, i) => `${i % 50}\n`);
  const before = lines.join('');
  const after = lines.reverse().join('');
  const base = tree(store, { 'big.txt': before });
  const head = tree(store, { 'big.txt': after });
  const patch = Buffer.concat(treePatch(store, base, head));
  t.match(patch.toString('latin1'), 'GIT binary patch\nliteral ');
  t.equal(applyWithGit(store, base, patch).tree, head);
});

t.test('git patch - binary literals are zlib data in git base85 lines of at most 52 bytes', async (t) => {
  const content = randomBytes(1000);
  const literal = binaryLiteral(content).toString('latin1').split('\n');
  t.equal(literal[0], 'literal 1000');
  t.equal(literal.at(-1), '');
  t.equal(literal.at(-2), '', 'a literal ends with an empty line');
  const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~';
  const bytes: number[] = [];
  for (const line of literal.slice(1, -2)) {
    const n = line.charCodeAt(0) <= 90 ? line.charCodeAt(0) - 64 : line.charCodeAt(0) - 96 + 26;
    t.ok(n >= 1 && n <= 52);
    t.equal(line.length, 1 + Math.ceil(n / 4) * 5);
    const group: number[] = [];
    for (let i = 1; i < line.length; i += 5) {
      let acc = 0;
      for (let k = 0; k < 5; k++) acc = acc * 85 + alphabet.indexOf(line[i + k]!);
      group.push((acc >>> 24) & 255, (acc >>> 16) & 255, (acc >>> 8) & 255, acc & 255);
    }
    bytes.push(...group.slice(0, n));
  }
  t.same(inflateSync(Buffer.from(bytes)), content, 'decoding the lines and inflating gives the content back');
  t.equal(binaryLiteral(new Uint8Array(0)).toString('latin1').split('\n')[0], 'literal 0');
});

t.test('git patch - names are quoted as git quotes them', async (t) => {
  t.equal(quoteName('a/plain name.txt'), 'a/plain name.txt');
  t.equal(quoteName('a/tab\there'), '"a/tab\\there"');
  t.equal(quoteName('a/é'), '"a/\\303\\251"');
  t.equal(quoteName('a/"q"\\'), '"a/\\"q\\"\\\\"');
  t.equal(quoteName('a/\x01'), '"a/\\001"');
});
