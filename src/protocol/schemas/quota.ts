import { arr, obj, type JsonSchema } from './common.js';

const int: JsonSchema = { type: 'integer' };

/** The org's answer to a shard asking for allowance (quota-ledger.ts `GrantAnswer`). */
export const quotaGrant: JsonSchema = obj(
  { granted: int, short: int, holders: arr(obj({ shard: int, granted: int, actor: { type: 'string' } })) },
  [],
);

/** A shard's totals after taking a grant or giving back what it did not use (quota.ts). */
export const quotaShard: JsonSchema = obj({ granted: int, returned: int });

export const responses = { quotaGrant, quotaShard };
