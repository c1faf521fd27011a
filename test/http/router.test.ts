/** The route table's matcher, including the matches it keeps for paths seen before. */
import t from 'tap';
import { Router } from '../../src/http/router.js';
import type { RouteDef } from '../../src/http/route.js';

const handler = (): never => {
  throw new Error('not called');
};
const route = (method: RouteDef['method'], path: string): RouteDef => ({ method, path, permission: 'repo:read', handler });
const routes = [route('GET', '/{org}/{repo}'), route('DELETE', '/{org}/{repo}'), route('GET', '/{org}/repos'), route('POST', '/{org}/repos'), route('GET', '/{org}/{repo}/bookmarks/{bookmark}')];

t.test('router - a path matched again gives the same answer, per method', (t) => {
  const router = new Router(routes);
  for (let round = 0; round < 2; round++) {
    t.same(router.match('GET', '/acme/demo', '/acme/demo').params, { org: 'acme', repo: 'demo' }, `round ${round}: GET binds org and repo`);
    t.equal(router.match('DELETE', '/acme/demo', '/acme/demo').route.method, 'DELETE', `round ${round}: DELETE finds its own route`);
    t.equal(router.match('GET', '/acme/repos', '/acme/repos').route.path, '/{org}/repos', `round ${round}: the literal route wins`);
    t.throws(() => router.match('PUT', '/acme/demo', '/acme/demo'), { code: 'METHOD_NOT_ALLOWED' }, `round ${round}: an unserved method is 405 every time`);
    t.same(router.match('GET', '/acme/demo/bookmarks/a%2Fb', '/acme/demo/bookmarks/a%2Fb').params.bookmark, 'a/b', `round ${round}: parameters are decoded`);
  }
  t.end();
});

t.test('router - a shared match cannot be changed by one request for the next', (t) => {
  const router = new Router(routes);
  const first = router.match('GET', '/acme/demo', '/acme/demo');
  t.throws(() => {
    first.params.repo = 'other';
  }, TypeError);
  t.equal(router.match('GET', '/acme/demo', '/acme/demo').params.repo, 'demo');
  t.end();
});

t.test('router - many distinct paths stay correct once the kept matches are dropped', (t) => {
  const router = new Router(routes);
  const long = 'r'.repeat(100);
  for (let i = 0; i < 20_000; i++) router.match('GET', `/acme/${long}${i}`, `/acme/${long}${i}`);
  t.equal(router.match('GET', `/acme/${long}7`, `/acme/${long}7`).params.repo, `${long}7`);
  t.equal(router.match('GET', `/acme/${long}19999`, `/acme/${long}19999`).params.repo, `${long}19999`);
  t.end();
});
