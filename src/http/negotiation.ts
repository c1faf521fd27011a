import { ServiceError } from '../errors.js';

/**
 * `Accept` negotiation (RFC 9110 §12.5.1). Each offered type gets the quality of the most
 * specific media range that matches it (`type/sub` over `type/*` over `*\/*`, parameters other
 * than `q` ignored); the best quality wins, then the more specific match (a type the client
 * named beats one it only reached through a wildcard), then the server's order. A missing or
 * empty header accepts anything, so the first offer — JSON — is chosen.
 */
interface MediaRange {
  type: string;
  subtype: string;
  q: number;
}

function parseAccept(header: string): MediaRange[] {
  const ranges: MediaRange[] = [];
  for (const part of header.split(',')) {
    const [range, ...params] = part.split(';');
    const slash = range!.indexOf('/');
    if (slash < 0) continue;
    const type = range!.slice(0, slash).trim().toLowerCase();
    const subtype = range!.slice(slash + 1).trim().toLowerCase();
    if (!type || !subtype) continue;
    let q = 1;
    for (const param of params) {
      const eq = param.indexOf('=');
      if (eq < 0 || param.slice(0, eq).trim().toLowerCase() !== 'q') continue;
      const value = param.slice(eq + 1).trim();
      // RFC 9110 qvalue: 0, 1, or up to three decimals; anything else makes the range unusable.
      q = /^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/.test(value) ? Number(value) : -1;
    }
    if (q >= 0) ranges.push({ type, subtype, q });
  }
  return ranges;
}

function specificity(range: MediaRange, type: string, subtype: string): number {
  if (range.type === type && range.subtype === subtype) return 2;
  if (range.type === type && range.subtype === '*') return 1;
  if (range.type === '*' && range.subtype === '*') return 0;
  return -1;
}

/** The offered type the client prefers, or null when it accepts none of them. */
export function negotiate<T extends string>(accept: string | undefined, offers: readonly T[]): T | null {
  if (!accept || !accept.trim()) return offers[0] ?? null;
  // The common header names one offer and nothing else: it is chosen, with nothing to parse.
  const named = offers.find((offer) => offer === accept);
  if (named) return named;
  const ranges = parseAccept(accept);
  let best: { offer: T; q: number; spec: number } | null = null;
  for (const offer of offers) {
    const [type, subtype] = offer.split('/') as [string, string];
    let q = -1;
    let spec = -1;
    for (const range of ranges) {
      const s = specificity(range, type, subtype);
      if (s > spec) {
        spec = s;
        q = range.q;
      }
    }
    if (spec < 0 || q <= 0) continue;
    if (!best || q > best.q || (q === best.q && spec > best.spec)) best = { offer, q, spec };
  }
  return best?.offer ?? null;
}

/** Like `negotiate`, but refuses with 406 NOT_ACCEPTABLE naming what the route can send. */
export function negotiateOrRefuse<T extends string>(accept: string | undefined, offers: readonly T[]): T {
  const chosen = negotiate(accept, offers);
  if (chosen === null) {
    throw new ServiceError('NOT_ACCEPTABLE', `this resource can be sent as ${offers.join(' or ')}`, { accepted: [...offers] });
  }
  return chosen;
}
