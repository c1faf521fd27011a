import t from 'tap';
import {
  ROOT_CHANGE_ID,
  decodeReverseHex,
  encodeReverseHex,
  isChangeId,
  isCommitOid,
  newChangeId,
  syntheticChangeId,
} from '../../src/vcs/ids.js';

t.test('ids - synthetic change id matches jj for a commit without a change-id header', async (t) => {
  t.equal(syntheticChangeId('efdcea5ca4b3658149f899ca7feee6876d077263'), 'ntvllzotlytssskluwqqykqxryptnmxu');
  t.ok(isChangeId(syntheticChangeId('0'.repeat(40))));
  t.throws(() => syntheticChangeId('xyz'));
});

t.test('ids - reverse hex maps nibble 0 to z and f to k and round-trips every byte', async (t) => {
  t.equal(encodeReverseHex(Uint8Array.from([0x00, 0x0f, 0xf0, 0xff])), 'zzzkkzkk');
  const all = Uint8Array.from({ length: 256 }, (_, i) => i);
  t.same(decodeReverseHex(encodeReverseHex(all)), all);
  t.throws(() => decodeReverseHex('za'));
  t.throws(() => decodeReverseHex('zzz'));
});

t.test('ids - new change ids are 32 reverse-hex characters, random, never the root', async (t) => {
  const ids = new Set(Array.from({ length: 200 }, () => newChangeId()));
  t.equal(ids.size, 200);
  for (const id of ids) {
    t.ok(isChangeId(id), id);
    t.not(id, ROOT_CHANGE_ID);
  }
  t.equal(ROOT_CHANGE_ID, 'z'.repeat(32));
  t.same(decodeReverseHex(ROOT_CHANGE_ID), new Uint8Array(16));
});

t.test('ids - validators accept only the canonical forms', async (t) => {
  t.ok(isChangeId('k'.repeat(32)));
  t.notOk(isChangeId('a'.repeat(32)));
  t.notOk(isChangeId('z'.repeat(31)));
  t.notOk(isChangeId('Z'.repeat(32)));
  t.ok(isCommitOid('0123456789abcdef0123456789abcdef01234567'));
  t.notOk(isCommitOid('0123456789ABCDEF0123456789abcdef01234567'));
  t.notOk(isCommitOid('0123'));
});
