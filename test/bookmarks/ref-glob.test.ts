import t from 'tap';
import { compileRefGlob } from '../../src/protocol/ref-glob.js';

t.test('ref globs - wildcards and literals', async (t) => {
  const cases: Array<[string, string[], string[]]> = [
    ['feat/*', ['feat/a', 'feat/'], ['feat/a/b', 'feat', 'xfeat/a']],
    ['feat/**', ['feat/a', 'feat/a/b/c'], ['feat', 'fea/a']],
    ['***', ['a', 'a/b', ''], []],
    ['v?.?', ['v1.2', 'vé.3'], ['v1/2', 'v12.3', 'v1x2']],
    ['release+1.(x)', ['release+1.(x)'], ['releasee1.(x)', 'release+1x(x)']],
    ['a$^b', ['a$^b'], ['ab']],
  ];
  for (const [glob, yes, no] of cases) {
    const g = compileRefGlob(glob);
    for (const name of yes) t.ok(g.test(name), `${glob} matches ${name}`);
    for (const name of no) t.notOk(g.test(name), `${glob} does not match ${name}`);
  }
  t.equal(compileRefGlob('feat/*/x').prefix, 'feat/');
  t.equal(compileRefGlob('?x').prefix, '');
  t.equal(compileRefGlob('main').prefix, 'main');
  t.throws(() => compileRefGlob(''), { code: 'INVALID_REQUEST' });
  t.throws(() => compileRefGlob('x'.repeat(1025)), { code: 'INVALID_REQUEST' });
});
