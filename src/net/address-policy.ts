import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { invalid } from '../errors.js';

/**
 * Which addresses outbound connections (webhooks, upstreams) may reach (API §11.1). Link-local and
 * cloud-metadata addresses are always refused; private and loopback ranges only when the operator
 * allows them. Checked when a URL is saved and again against the resolved address at every
 * connection, so DNS rebinding cannot get around it.
 */
const ALWAYS = new BlockList();
ALWAYS.addSubnet('169.254.0.0', 16, 'ipv4'); // link-local, incl. 169.254.169.254 metadata
ALWAYS.addSubnet('0.0.0.0', 8, 'ipv4');
ALWAYS.addSubnet('100.100.100.200', 32, 'ipv4'); // Alibaba metadata
ALWAYS.addSubnet('fe80::', 10, 'ipv6');
ALWAYS.addAddress('fd00:ec2::254', 'ipv6'); // AWS metadata over IPv6
ALWAYS.addSubnet('224.0.0.0', 4, 'ipv4');
ALWAYS.addSubnet('ff00::', 8, 'ipv6');

const PRIVATE = new BlockList();
PRIVATE.addSubnet('127.0.0.0', 8, 'ipv4');
PRIVATE.addSubnet('10.0.0.0', 8, 'ipv4');
PRIVATE.addSubnet('172.16.0.0', 12, 'ipv4');
PRIVATE.addSubnet('192.168.0.0', 16, 'ipv4');
PRIVATE.addSubnet('100.64.0.0', 10, 'ipv4');
PRIVATE.addAddress('::1', 'ipv6');
PRIVATE.addSubnet('fc00::', 7, 'ipv6');

const METADATA_HOSTS = new Set(['metadata.google.internal', 'metadata', 'instance-data', 'instance-data.ec2.internal']);

export type AddressVerdict = 'ok' | 'forbidden' | 'private';

export function classifyAddress(address: string): AddressVerdict {
  const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
  let addr = address;
  // IPv4-mapped IPv6 (::ffff:127.0.0.1) is judged as the IPv4 address it carries.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) addr = mapped[1]!;
  const fam = mapped ? 'ipv4' : family;
  if (ALWAYS.check(addr, fam)) return 'forbidden';
  if (PRIVATE.check(addr, fam)) return 'private';
  return 'ok';
}

/** Parses and checks a URL's form: http(s), a host, no userinfo. Returns the parsed URL. */
export function checkUrlForm(raw: string, what: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalid(`${what} must be an absolute http(s) URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalid(`${what} must use http or https`);
  if (url.username || url.password) throw invalid(`${what} must not contain credentials (user:password@); use the auth field`);
  if (!url.hostname) throw invalid(`${what} must name a host`);
  return url;
}

/** Resolves the URL's host and refuses addresses outside the policy. */
export async function checkUrlAddress(url: URL, allowPrivate: boolean, what: string): Promise<void> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (METADATA_HOSTS.has(host.toLowerCase())) throw invalid(`${what} points at a cloud metadata service`);
  let addresses: string[];
  if (isIP(host)) addresses = [host];
  else {
    try {
      addresses = (await lookup(host, { all: true })).map((a) => a.address);
    } catch {
      throw invalid(`${what} host "${host}" does not resolve`);
    }
  }
  for (const address of addresses) {
    const verdict = classifyAddress(address);
    if (verdict === 'forbidden') throw invalid(`${what} resolves to a link-local or metadata address, which is never allowed`);
    if (verdict === 'private' && !allowPrivate) throw invalid(`${what} resolves to a private or loopback address, which this server does not allow`);
  }
}
