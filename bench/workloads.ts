/**
 * Generator-side request factories. A workload owns per-slot state (a slot is one connection and,
 * for agents, one agent) and decides whether a response counts as a success. It runs inside the
 * generator process, so it must stay cheap: requests are prebuilt wherever they do not change.
 */
import { agentFileContent, agentFilePath } from './agent-files.js';
import type {
  AgentState,
  AgentWorkloadSpec,
  FreshTokenWorkloadSpec,
  StaticWorkloadSpec,
  WorkloadSpec,
} from './generator-protocol.js';
import { ROOT_CHANGE_ID } from './generator-protocol.js';
import { buildRequest } from './http-connection.js';
import type { HttpResponse } from './http-connection.js';
import { createSigner } from './tokens.js';

export interface PreparedRequest {
  kind: string;
  data: Buffer | Buffer[];
  keepBody: boolean;
}

export interface Workload {
  readonly slots: number;
  next(slot: number): PreparedRequest | Promise<PreparedRequest>;
  /** Returns whether the response is a success; may update the slot's state. */
  complete(slot: number, request: PreparedRequest, response: HttpResponse): boolean;
  agents(): AgentState[] | null;
}

export async function createWorkload(spec: WorkloadSpec, host: string): Promise<Workload> {
  switch (spec.kind) {
    case 'static':
      return staticWorkload(spec, host);
    case 'fresh-token':
      return freshTokenWorkload(spec, host);
    case 'agents':
      return agentWorkload(spec, host);
  }
}

function staticWorkload(spec: StaticWorkloadSpec, host: string): Workload {
  const prepared: PreparedRequest[] = spec.requests.map((r) => ({
    kind: r.kind,
    data: buildRequest(r.method, r.path, host, r.headers),
    keepBody: false,
  }));
  if (prepared.length === 0) throw new Error('static workload without requests');
  const cursor = Array.from({ length: spec.slots }, (_, i) => i);
  return {
    slots: spec.slots,
    next(slot) {
      const i = (cursor[slot] = ((cursor[slot] ?? 0) + 1) % prepared.length);
      return prepared[i] as PreparedRequest;
    },
    complete: (_slot, _req, res) => res.status === spec.expectStatus,
    agents: () => null,
  };
}

async function freshTokenWorkload(spec: FreshTokenWorkloadSpec, host: string): Promise<Workload> {
  const sign = await createSigner(spec.key);
  return {
    slots: spec.slots,
    async next() {
      const token = await sign();
      return {
        kind: 'read',
        data: buildRequest('GET', spec.path, host, { Authorization: `Bearer ${token}` }),
        keepBody: false,
      };
    },
    complete: (_slot, _req, res) => res.status === spec.expectStatus,
    agents: () => null,
  };
}

interface AgentSlot {
  state: AgentState;
  applyPath: string;
  reads: Buffer[];
  readCursor: number;
}

function agentWorkload(spec: AgentWorkloadSpec, host: string): Workload {
  const auth = { Authorization: `Bearer ${spec.token}` };
  const slots: AgentSlot[] = spec.agents.map((agent) => {
    const repoPath = encodeURIComponent(agent.repo);
    return {
      state: { ...agent, chain: [...agent.chain] },
      applyPath: `/v1/${spec.org}/${repoPath}/apply-ops`,
      reads: spec.readPaths.map((p) =>
        buildRequest('GET', p.replaceAll('{repo}', repoPath), host, auth) as Buffer,
      ),
      readCursor: agent.index,
    };
  });
  const jsonHeaders = { ...auth, 'Content-Type': 'application/json' };

  function writeRequest(slot: AgentSlot): PreparedRequest {
    const agent = slot.state;
    const seq = agent.writes + 1;
    const ops = [];
    for (let f = 0; f < spec.files; f++) {
      ops.push({
        op: 'write',
        path: agentFilePath(agent.index, f),
        content: agentFileContent(agent.index, seq, f, spec.fileBytes),
        encoding: 'utf-8',
      });
    }
    // `create` only on the first write: the bookmark does not exist before it.
    const first = agent.lastChangeId === ROOT_CHANGE_ID;
    const body = JSON.stringify({
      base_change_id: agent.lastChangeId,
      message: `bench agent ${agent.index} write ${seq}`,
      ops,
      bookmarks: [first ? { name: agent.bookmark, create: true } : { name: agent.bookmark }],
    });
    return {
      kind: 'write',
      data: buildRequest('POST', slot.applyPath, host, jsonHeaders, Buffer.from(body)),
      keepBody: true,
    };
  }

  return {
    slots: slots.length,
    next(i) {
      const slot = slots[i] as AgentSlot;
      if (slot.reads.length > 0 && Math.random() < spec.readRatio) {
        slot.readCursor = (slot.readCursor + 1) % slot.reads.length;
        return { kind: 'read', data: slot.reads[slot.readCursor] as Buffer, keepBody: false };
      }
      return writeRequest(slot);
    },
    complete(i, req, res) {
      if (req.kind === 'read') return res.status === 200;
      if (res.status !== 201 || !res.body) return false;
      const id = parseChangeId(res.body);
      if (!id) return false;
      const slot = slots[i] as AgentSlot;
      slot.state.lastChangeId = id;
      slot.state.writes++;
      slot.state.chain.push(id);
      return true;
    },
    agents: () => slots.map((s) => s.state),
  };
}

function parseChangeId(body: Buffer): string | null {
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { change?: { id?: unknown } };
    return typeof parsed.change?.id === 'string' ? parsed.change.id : null;
  } catch {
    return null;
  }
}
