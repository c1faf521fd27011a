import t from 'tap';
import { encodeCall } from '../../src/actors/runtime.js';
import { decodeRequest } from '../../src/protocol/messages.js';

const principal = { orgId: 'org_1', orgSlug: 'o', keyId: 'key_1', keyName: 'k', permissions: [], authors: [], restricted: false, allowedRepoIds: [] };

/**
 * A call as the bytes a worker thread, or a forwarding node's owner, reads: the input as JSON and
 * the write's encoded contents (`blobs`) beside it, each byte-identical.
 */
t.test('a call keeps its input and its blobs, in order, through its encoding', async (t) => {
  const blobs = [Buffer.from([0x23, 1, 2, 3]), Buffer.alloc(0), Buffer.from('x'.repeat(5000))];
  const input = { ops: [{ op: 'write', path: 'a', encoded: { index: 2, oid: 'f'.repeat(40) } }] };
  const req = decodeRequest(
    encodeCall({ actor: 'repo:repo_1', command: 'apply-ops', input, principal, traceId: 't', blobs }),
  );
  t.same(JSON.parse(Buffer.from(req.payload).toString('utf8')), input);
  t.equal(req.blobs.length, 3);
  blobs.forEach((b, i) => t.ok(Buffer.from(req.blobs[i]!).equals(b), `blob ${i} is byte-identical`));
  const bare = decodeRequest(encodeCall({ actor: 'org:org_1', command: 'repo.create', input: {}, principal, traceId: 't' }));
  t.same(bare.blobs, [], 'a call without contents carries none');
  t.equal(bare.quotaGrant, null, 'nor a quota grant');
  const granted = decodeRequest(encodeCall({ actor: 'repo:repo_1', command: 'apply-ops', input, principal, traceId: 't', quotaGrant: { orgId: 'org_1', granted: 3 * 2 ** 40 + 5 } }));
  t.same({ orgId: granted.quotaGrant?.orgId, granted: granted.quotaGrant?.granted }, { orgId: 'org_1', granted: 3 * 2 ** 40 + 5 }, 'a refilled write carries its grant, totals past 2^32 exact');
});
