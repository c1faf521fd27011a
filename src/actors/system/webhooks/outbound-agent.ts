import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { Agent, buildConnector } from 'undici';
import { classifyAddress } from '../../../net/address-policy.js';

/**
 * The HTTP agent webhook deliveries go out on: keep-alive pools per origin, and the address policy
 * (API §11.1) applied at every new connection against the address actually dialled, so a host
 * that resolved to a public address when the target was saved cannot later be pointed (DNS
 * rebinding) at loopback, a private network or a metadata service.
 */
export class AddressRefusedError extends Error {
  readonly code = 'ADDRESS_REFUSED';
}

function refusal(address: string, allowPrivate: boolean): AddressRefusedError | null {
  const verdict = classifyAddress(address);
  if (verdict === 'forbidden') return new AddressRefusedError(`${address} is a link-local or metadata address, which is never allowed`);
  if (verdict === 'private' && !allowPrivate) return new AddressRefusedError(`${address} is a private or loopback address, which this server does not allow`);
  return null;
}

function guardedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, options, (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => {
      if (err) return callback(err, address, family);
      const all = Array.isArray(address) ? address : [{ address, family: family ?? 4 }];
      for (const a of all) {
        const refused = refusal(a.address, allowPrivate);
        if (refused) return callback(refused, '', 4);
      }
      callback(null, address, family);
    });
  };
}

export function createWebhookAgent(allowPrivate: boolean, connectTimeoutMs: number): Agent {
  const connector = buildConnector({ lookup: guardedLookup(allowPrivate), timeout: connectTimeoutMs });
  return new Agent({
    keepAliveTimeout: 30_000,
    connect(options, callback) {
      // An IP literal is dialled without a lookup, so it is judged here.
      const host = options.hostname.replace(/^\[|\]$/g, '');
      const refused = isIP(host) ? refusal(host, allowPrivate) : null;
      if (refused) return callback(refused, null);
      connector(options, callback);
    },
  });
}
