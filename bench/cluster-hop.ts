/**
 * The cost of one forwarding hop: sequential GETs of one repository through the node owning its
 * shard and through another node, which forwards them. Every reply names the owner in
 * `X-Repohost-Node`, so the probe finds it without reading the placement.
 */
import { request } from 'undici';
import { createHistogram, summarize } from './histogram.js';
import type { HopLatency } from './report-types.js';

const OWNER_HEADER = 'x-repohost-node';

interface ProbeNode {
  id: string;
  url: string;
}

async function get(url: string, token: string): Promise<{ status: number; owner: string | null }> {
  const res = await request(url, { headers: { authorization: `Bearer ${token}` } });
  await res.body.dump();
  const owner = res.headers[OWNER_HEADER];
  return { status: res.statusCode, owner: typeof owner === 'string' ? owner : null };
}

/** `path` names an existing repository; the two series alternate in rounds so load drift hits both alike. */
export async function measureHop(nodes: ProbeNode[], path: string, token: string, requests: number): Promise<HopLatency> {
  const first = await get(nodes[0]!.url + path, token);
  if (first.status !== 200 || !first.owner) throw new Error(`hop probe: GET ${path} → ${first.status}, owner ${first.owner ?? 'not named'}`);
  const owner = nodes.find((n) => n.id === first.owner);
  const via = nodes.find((n) => n.id !== first.owner);
  if (!owner || !via) throw new Error(`hop probe: owner ${first.owner} is not one of ${nodes.map((n) => n.id).join(', ')}`);
  const direct = createHistogram();
  const forwarded = createHistogram();
  const rounds = 10;
  const per = Math.max(1, Math.ceil(requests / rounds));
  const series = [
    { h: direct, url: owner.url + path },
    { h: forwarded, url: via.url + path },
  ];
  for (let r = 0; r < rounds; r++) {
    for (const s of series) {
      for (let i = 0; i < per; i++) {
        const start = process.hrtime.bigint();
        const reply = await get(s.url, token);
        // A reply names the node that served it: the owner on both paths, or this is no hop.
        if (reply.status !== 200 || reply.owner !== owner.id) throw new Error(`hop probe: GET ${s.url} → ${reply.status} from ${reply.owner ?? 'an unnamed node'}, not the owner ${owner.id}`);
        s.h.recordValue(Math.max(1, Number((process.hrtime.bigint() - start) / 1000n)));
      }
    }
  }
  return { requests: per * rounds, owner: owner.id, via: via.id, direct: summarize(direct), forwarded: summarize(forwarded) };
}
