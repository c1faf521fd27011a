import t from 'tap';
import { HeaderBlock } from '../../src/http/wire-bytes.js';

t.test('header block - the headers as uWS writes them in one call, in their order', async (t) => {
  const block = new HeaderBlock({ 'Content-Type': 'application/octet-stream', 'X-Svc-Blob-Hash': 'ab12', 'X-Svc-Blob-Size': '4' });
  // uWS writes name, ": ", value, CRLF: the block's one call makes every line.
  t.equal(`${block.name.toString()}: ${block.rest.toString()}\r\n`, 'Content-Type: application/octet-stream\r\nX-Svc-Blob-Hash: ab12\r\nX-Svc-Blob-Size: 4\r\n');
  t.ok(block.has('X-Svc-Blob-Hash'));
  t.notOk(block.has('X-Request-Id'), 'a name not in the block is left to the base headers');
});

t.test('header block - a value or name with a line break is refused', async (t) => {
  t.throws(() => new HeaderBlock({ 'X-A': 'one\r\nX-Injected: two' }), /line break/);
  t.throws(() => new HeaderBlock({ 'X-A\n': 'one' }), /line break/);
  t.throws(() => new HeaderBlock({}), /needs a header/);
});
