/**
 * Change ids and commit oids. Change ids are jj's: 16 bytes written in "reverse hex" (nibble
 * 0→`z` … f→`k`), so a change id can never be mistaken for a (hex) commit id prefix.
 */
import { pooledRandomBytes } from '../random-pool.js';

export const CHANGE_ID_BYTES = 16;

/** jj's virtual root change: all-zero bytes. It has no git commit (its tree is the empty tree). */
export const ROOT_CHANGE_ID = 'z'.repeat(CHANGE_ID_BYTES * 2);

/**
 * git's all-zero object id: "no object" in patches and ref updates, and the commit oid shown for
 * the virtual root wherever one is shown (API §1), as jj shows it — never null.
 */
export const NULL_OID = '0'.repeat(40);

const REVERSE_HEX = 'zyxwvutsrqponmlk';
const CHANGE_ID_RE = /^[k-z]{32}$/;
const COMMIT_OID_RE = /^[0-9a-f]{40}$/;

export function isChangeId(value: string): boolean {
  return CHANGE_ID_RE.test(value);
}

export function isCommitOid(value: string): boolean {
  return COMMIT_OID_RE.test(value);
}

export function encodeReverseHex(bytes: Uint8Array): string {
  let out = '';
  for (const byte of bytes) out += REVERSE_HEX[byte >> 4]! + REVERSE_HEX[byte & 0xf]!;
  return out;
}

/** Decodes reverse hex (any even length); throws on other characters. */
export function decodeReverseHex(text: string): Uint8Array {
  if (text.length % 2 !== 0) throw new Error('reverse hex needs an even number of digits');
  const bytes = new Uint8Array(text.length / 2);
  for (let i = 0; i < bytes.length; i++) {
    const hi = REVERSE_HEX.indexOf(text[2 * i]!);
    const lo = REVERSE_HEX.indexOf(text[2 * i + 1]!);
    if (hi < 0 || lo < 0) throw new Error(`not a reverse hex digit in ${JSON.stringify(text)}`);
    bytes[i] = (hi << 4) | lo;
  }
  return bytes;
}

export function newChangeId(): string {
  for (;;) {
    const id = encodeReverseHex(pooledRandomBytes(CHANGE_ID_BYTES));
    if (id !== ROOT_CHANGE_ID) return id;
  }
}

function reverseBits(byte: number): number {
  let out = 0;
  for (let i = 0; i < 8; i++) out |= ((byte >> i) & 1) << (7 - i);
  return out;
}

/**
 * jj's change id for a commit without a `change-id` header (`synthetic_change_id_from_git_commit_id`):
 * the last 16 bytes of the commit id, in reverse order, each byte bit-reversed. Reversing keeps
 * the change id from sharing a prefix with the commit id.
 */
export function syntheticChangeId(commitOid: string): string {
  if (!isCommitOid(commitOid)) throw new Error(`not a commit oid: ${commitOid}`);
  const bytes = Buffer.from(commitOid, 'hex');
  const tail = bytes.subarray(bytes.length - CHANGE_ID_BYTES);
  const out = new Uint8Array(CHANGE_ID_BYTES);
  for (let i = 0; i < CHANGE_ID_BYTES; i++) out[i] = reverseBits(tail[CHANGE_ID_BYTES - 1 - i]!);
  return encodeReverseHex(out);
}
