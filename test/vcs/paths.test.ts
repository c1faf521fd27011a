import t from 'tap';
import { VcsError } from '../../src/vcs/errors.js';
import { isDotGitName, normalizePath } from '../../src/vcs/paths.js';

t.test('paths - normal paths are accepted unchanged', async (t) => {
  for (const path of ['a', 'a/b/c.txt', '.github/workflows/ci.yml', '.gitignore', 'x/.gitmodules', 'dir/..hidden', 'ü/名前', 'a b/c\\d']) {
    t.equal(normalizePath(path), path);
  }
  t.equal(normalizePath('a'.repeat(4096)), 'a'.repeat(4096));
});

t.test('paths - every rule violation is an invalid-path error naming the rule', async (t) => {
  const table: Array<[string, RegExp]> = [
    ['', /empty/],
    ['../x', /"\."|"\.\."/],
    ['a/./b', /"\."/],
    ['/abs', /relative/],
    ['a//b', /empty segments/],
    ['a/', /empty segments/],
    ['.git/config', /\.git/],
    ['a/.GIT/b', /\.git/],
    ['a/.git./b', /\.git/],
    ['GIT~1/x', /\.git/],
    ['a/.g\u200cit', /\.git/],
    ['a\0b', /NUL/],
    ['a'.repeat(4097), /4096 bytes/],
    ['é'.repeat(2049), /4096 bytes/],
    ['bad\ud800', /Unicode/],
  ];
  for (const [path, why] of table) {
    try {
      normalizePath(path);
      t.fail(`accepted ${JSON.stringify(path.slice(0, 20))}`);
    } catch (err) {
      t.ok(err instanceof VcsError && err.kind === 'invalid-path', JSON.stringify(path.slice(0, 20)));
      t.match((err as Error).message, why);
    }
  }
});

t.test('paths - dot-git spellings that file systems fold are recognised', async (t) => {
  t.ok(isDotGitName('.git'));
  t.ok(isDotGitName('.Git '));
  t.ok(isDotGitName('git~1'));
  t.notOk(isDotGitName('.github'));
  t.notOk(isDotGitName('git'));
});
