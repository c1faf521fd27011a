import t from 'tap';
import { errorEnvelope, success } from '../../src/protocol/schemas/common.js';
import { RESPONSE_SCHEMAS, responseRegistry } from '../../src/protocol/schemas/index.js';
import { compileResponses, serialize } from '../../src/protocol/serializers.js';

t.test('response schemas - a name two groups both define is refused when the table is built', async (t) => {
  t.throws(() => responseRegistry({ ok: success, failed: errorEnvelope }, { failed: success }), /the response schema "failed" is defined twice/);
  t.same(Object.keys(responseRegistry({ ok: success }, { failed: errorEnvelope })), ['ok', 'failed']);
});

t.test('response schemas - every registered shape compiles, and a reply carries only the fields of its shape', async (t) => {
  t.ok(Object.keys(RESPONSE_SCHEMAS).length >= 30, 'the registry holds every feature\'s shapes');
  compileResponses();
  t.equal(serialize('success', { success: true, internal: 'never shown' }), '{"success":true}');
  // @ts-expect-error a name that is not in the registry does not compile
  t.throws(() => serialize('testPlacement', {}));
});
