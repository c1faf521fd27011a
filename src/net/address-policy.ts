import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { invalid } from '../errors.js';

/**
 * Which addresses outbound connections (webhooks, upstreams) may reach (API §11.1). Only global
 * unicast addresses are reachable by default. Loopback, the unspecified address (which Linux
 * dials as loopback) and private ranges are reachable only when the operator allows private
 * targets; every other special range (link-local, cloud metadata, multicast, broadcast, reserved,
 * benchmarking, documentation, and the IPv6 forms that embed or translate an IPv4 address:
 * mapped, compatible, NAT64, 6to4, Teredo) is never reached. The ranges come from ipaddr.js's
 * registry of special-purpose blocks, so a range it names that is not listed below is refused.
 * Checked when a URL is saved and again against the resolved address at every connection, so DNS
 * rebinding cannot get around it.
 */
const PRIVATE_RANGES = new Set(['loopback', 'unspecified', 'private', 'carrierGradeNat', 'uniqueLocal']);

/** Cloud metadata services that sit inside otherwise private ranges. */
const METADATA_ADDRESSES = new Set(['100.100.100.200', 'fd00:ec2::254']);

/** IPv6 global unicast (RFC 4291): everything else ipaddr.js calls plain `unicast` is unassigned or a compatibility form. */
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');

const METADATA_HOSTS = new Set(['metadata.google.internal', 'metadata', 'instance-data', 'instance-data.ec2.internal']);

export type AddressVerdict = 'ok' | 'forbidden' | 'private';

export function classifyAddress(address: string): AddressVerdict {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.parse(address);
  } catch {
    return 'forbidden';
  }
  if (METADATA_ADDRESSES.has(parsed.toNormalizedString()) || METADATA_ADDRESSES.has(parsed.toString())) return 'forbidden';
  const range = parsed.range();
  if (PRIVATE_RANGES.has(range)) return 'private';
  if (range !== 'unicast') return 'forbidden';
  if (parsed.kind() === 'ipv6' && !parsed.match(GLOBAL_UNICAST_V6)) return 'forbidden';
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
    if (verdict === 'forbidden') throw invalid(`${what} resolves to a link-local or metadata address or another special-purpose range, which is never allowed`);
    if (verdict === 'private' && !allowPrivate) throw invalid(`${what} resolves to a private or loopback address, which this server does not allow`);
  }
}
