import t from 'tap';
import { negotiate, negotiateOrRefuse } from '../../src/http/negotiation.js';
import { ServiceError } from '../../src/errors.js';

const CONTENT = ['application/json', 'application/octet-stream'] as const;
const DIFF = ['application/json', 'text/plain'] as const;

t.test('negotiation - a missing, empty or */* Accept means JSON', async (t) => {
  t.equal(negotiate(undefined, CONTENT), 'application/json');
  t.equal(negotiate('', CONTENT), 'application/json');
  t.equal(negotiate('*/*', CONTENT), 'application/json');
  t.equal(negotiate('*/*', DIFF), 'application/json');
});

t.test('negotiation - q-values decide, then the more specific range, then the server order', async (t) => {
  t.equal(negotiate('application/octet-stream', CONTENT), 'application/octet-stream');
  t.equal(negotiate('application/octet-stream, */*', CONTENT), 'application/octet-stream', 'a named type beats a wildcard at equal q');
  t.equal(negotiate('application/json;q=0.5, application/octet-stream', CONTENT), 'application/octet-stream');
  t.equal(negotiate('application/json;q=0.9, application/octet-stream;q=0.8', CONTENT), 'application/json');
  t.equal(negotiate('application/*', CONTENT), 'application/json');
  t.equal(negotiate('application/*, application/json;q=0', CONTENT), 'application/octet-stream', 'q=0 refuses a type');
  t.equal(negotiate('text/*;q=0.3, application/json;q=0.2', DIFF), 'text/plain');
  t.equal(negotiate('TEXT/PLAIN; charset=utf-8', DIFF), 'text/plain', 'types are case-insensitive and other parameters ignored');
  t.equal(negotiate('text/plain; q=1.000', DIFF), 'text/plain');
  t.equal(negotiate('*/*;q=0.1, text/html', DIFF), 'application/json');
});

t.test('negotiation - nothing acceptable is 406 NOT_ACCEPTABLE', async (t) => {
  t.equal(negotiate('text/html', CONTENT), null);
  t.equal(negotiate('application/json;q=0', CONTENT), null);
  t.equal(negotiate('application/json;q=2', CONTENT), null, 'an invalid q-value makes its range unusable');
  t.equal(negotiate('garbage', CONTENT), null);
  t.equal(negotiate('*/*;q=0', DIFF), null);
  try {
    negotiateOrRefuse('image/png', DIFF);
    t.fail('expected a 406');
  } catch (err) {
    t.ok(err instanceof ServiceError);
    t.equal((err as ServiceError).code, 'NOT_ACCEPTABLE');
    t.equal((err as ServiceError).status, 406);
  }
});
