import t from 'tap';
import { routes } from '../../src/http/routes/index.js';

// The front end places a request by the org its path names (src/cluster/forward/
// request-forwarder.ts): a route that reads shard data must name one. Only these read none.
const NO_SHARD_DATA = new Set(['GET /whoami']);

t.test('every route that can read shard data names its org', async (t) => {
  for (const route of routes) {
    const name = `${route.method} ${route.path}`;
    if (NO_SHARD_DATA.has(name)) {
      t.notMatch(route.path, /\{org\}|\{repo\}/, `${name} names no org or repository`);
      continue;
    }
    t.match(route.path, /^\/\{org\}(\/|$)/, `${name} starts with {org}`);
  }
});
