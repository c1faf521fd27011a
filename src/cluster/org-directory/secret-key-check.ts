import type { Etcd3 } from 'etcd3';

/**
 * Makes sure every node seals with the same key (REPOHOST_SECRET_KEY): the first node to start
 * records the key's fingerprint (never the key) in etcd, and a node whose key has another
 * fingerprint refuses to start instead of sealing what the others cannot open.
 */
export async function agreeOnSecretKey(client: Etcd3, cluster: string, fingerprint: string): Promise<void> {
  const key = `/rh/${cluster}/secret-key-fingerprint`;
  const res = await client
    .if(key, 'Create', '==', 0)
    .then(client.put(key).value(fingerprint))
    .else(client.get(key))
    .commit();
  if (res.succeeded) return;
  const recorded = res.responses[0]?.response_range?.kvs[0]?.value.toString('utf8');
  if (recorded !== fingerprint) throw new Error('REPOHOST_SECRET_KEY differs from the key the other nodes of this cluster use');
}
