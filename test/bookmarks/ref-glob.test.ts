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
  t.throws(() => compileRefGlob('x'.repeat(257)), { code: 'INVALID_REQUEST' });
  t.ok(compileRefGlob('x'.repeat(256)).test('x'.repeat(256)), 'a glob of the longest length matches');
});

/** The meaning of a glob spelled as a regular expression: the reference the matcher must agree with. */
function reference(glob: string): RegExp {
  let source = '';
  for (let i = 0; i < glob.length; i++) {
    const ch = glob[i]!;
    if (ch === '*') {
      if (glob[i + 1] === '*') {
        while (glob[i + 1] === '*') i++;
        source += '.*';
      } else source += '[^/]*';
    } else if (ch === '?') source += '[^/]';
    else source += ch.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${source}$`, 'su');
}

t.test('ref globs - agree with the regular-expression meaning on random globs and names', async (t) => {
  // A small deterministic generator: the alphabet is what makes globs interesting.
  let seed = 12345;
  const rand = (n: number): number => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed % n;
  };
  const globAlphabet = ['a', 'b', '/', '*', '**', '?', '.', 'é', '😀'];
  const nameAlphabet = ['a', 'b', '/', '.', 'é', '😀'];
  let checked = 0;
  for (let round = 0; round < 3000; round++) {
    let glob = '';
    for (let i = 0, n = 1 + rand(7); i < n; i++) glob += globAlphabet[rand(globAlphabet.length)];
    const g = compileRefGlob(glob);
    const re = reference(glob);
    for (let k = 0; k < 8; k++) {
      let name = '';
      for (let i = 0, n = rand(9); i < n; i++) name += nameAlphabet[rand(nameAlphabet.length)];
      if (g.test(name) !== re.test(name)) t.fail(`${JSON.stringify(glob)} on ${JSON.stringify(name)}: matcher ${g.test(name)}, meaning ${re.test(name)}`);
      checked++;
    }
  }
  t.equal(checked, 24000, 'every pair was compared');
});

t.test('ref globs - a glob built to backtrack is matched in one pass', async (t) => {
  // As a regular expression this glob takes exponential time on a long name that almost matches.
  const glob = `${'*?'.repeat(40)}zz`;
  const g = compileRefGlob(glob);
  const name = 'a'.repeat(200);
  const started = process.hrtime.bigint();
  for (let i = 0; i < 100; i++) t.equal(g.test(name), false);
  t.ok(g.test(`${name}zz`));
  // A generous bound against a freeze (the regular expression would not finish in hours), not a speed target.
  t.ok(Number(process.hrtime.bigint() - started) / 1e9 < 5, 'a hundred names in well under a freeze');
});
