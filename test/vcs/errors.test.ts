import t from 'tap';
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { asServiceError } from '../../src/errors.js';
import { VcsError, inOp } from '../../src/vcs/errors.js';

// The tests run compiled, from dist/test/vcs: the sources are three levels up.
const SOURCES = fileURLToPath(new URL('../../../src/', import.meta.url));
const VCS_SOURCES = join(SOURCES, 'vcs');

t.test('vcs errors - the model imports neither the service\'s errors nor anything of HTTP', async (t) => {
  const files = readdirSync(VCS_SOURCES, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
  t.ok(files.length > 20, `${files.length} model files read`);
  for (const file of files) {
    const path = join(VCS_SOURCES, file);
    const imported = [...readFileSync(path, 'utf8').matchAll(/from '(\.[^']+)'/g)].map((m) => resolve(dirname(path), m[1]!.replace(/\.js$/, '.ts')));
    const service = imported.filter((i) => i === join(SOURCES, 'errors.ts') || i.startsWith(join(SOURCES, 'http')));
    t.same(service, [], file);
  }
});

t.test('vcs errors - each kind reaches a client as its code, with the message and details kept', async (t) => {
  const cases: Array<[VcsError['kind'], string]> = [
    ['invalid-path', 'INVALID_REQUEST'],
    ['invalid-edit', 'INVALID_REQUEST'],
    ['missing-path', 'FILE_NOT_FOUND'],
    ['invalid-resolution', 'INVALID_REQUEST'],
    ['conflict', 'MERGE_CONFLICT'],
    ['corrupt', 'INTERNAL_ERROR'],
  ];
  for (const [kind, code] of cases) {
    const mapped = asServiceError(inOp(new VcsError(kind, 'what went wrong', { path: 'a.txt' }), 'ops', 3));
    t.equal(mapped?.code, code, kind);
    t.equal(mapped?.message, 'ops[3]: what went wrong');
    t.same(mapped?.details, { path: 'a.txt', op_index: 3 });
  }
  t.equal(asServiceError(new Error('a bug')), undefined, 'anything else is an internal failure for the caller to log');
});
