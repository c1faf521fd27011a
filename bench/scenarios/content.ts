/**
 * `content`: `GET /v1/{org}/{repo}/content?path=…` of 4 KiB files, as raw bytes
 * (`Accept: application/octet-stream`) and as JSON (base64 inside a JSON document).
 */
import type { StaticRequestSpec } from '../generator-protocol.js';
import { ROOT_CHANGE_ID } from '../generator-protocol.js';
import { agentFileContent } from '../agent-files.js';
import { baseParameters, finishResult, resultBase } from './result.js';
import { readPhases } from './read.js';
import type { Scenario } from './types.js';
import { requireTarget } from './types.js';

const ACCEPT: Record<string, string> = { raw: 'application/octet-stream', json: 'application/json' };

export const content: Scenario = {
  name: 'content',
  description: 'GET …/content of 4 KiB files',
  variants: ['raw', 'json'],
  needsServer: true,
  async run(ctx, variant) {
    const { target, api } = requireTarget(ctx);
    const s = ctx.settings;
    const v = variant ?? 'raw';
    const parameters = { ...baseParameters(s), connections: s.connections, files: s.contentFiles, fileBytes: s.contentFileBytes };
    const base = resultBase(this, v, parameters, `${this.description} as ${ACCEPT[v]}`);
    const repo = `${ctx.prefix}-content-${v}`;
    const created = await api.expect<{ default_bookmark: string }>(201, 'POST', `/v1/${target.org}/repos`, { name: repo });
    const paths = Array.from({ length: s.contentFiles }, (_, i) => `files/f-${String(i).padStart(3, '0')}.txt`);
    const expected = paths.map((_, i) => agentFileContent(0, i, 0, s.contentFileBytes));
    await api.expect(201, 'POST', api.repoPath(repo, '/apply-ops'), {
      base_change_id: ROOT_CHANGE_ID,
      message: 'bench content fixture',
      ops: paths.map((path, i) => ({ op: 'write', path, content: expected[i], encoding: 'utf-8' })),
      bookmarks: [{ name: created.default_bookmark }],
    });

    // Check each file once in the variant's representation before timing it.
    const problems: string[] = [];
    for (const [i, path] of paths.entries()) {
      const res = await api.call(`GET`, api.repoPath(repo, `/content?path=${encodeURIComponent(path)}`), undefined, ACCEPT[v]);
      const body = res.body as { content?: string } | string;
      const got = v === 'raw' ? res.text : Buffer.from(typeof body === 'object' ? (body.content ?? '') : '', 'base64').toString('utf8');
      if (res.status !== 200 || got !== expected[i]) problems.push(`${path}: status ${res.status}, content ${got === expected[i] ? 'ok' : 'differs'}`);
    }
    if (problems.length > 0) {
      return finishResult(base, [], null, {}, [`fixture read back wrong: ${problems.slice(0, 3).join('; ')}`]);
    }

    const token = await ctx.token();
    const requests: StaticRequestSpec[] = paths.map((path) => ({
      method: 'GET',
      path: api.repoPath(repo, `/content?path=${encodeURIComponent(path)}`),
      headers: { Authorization: `Bearer ${token}`, Accept: ACCEPT[v] as string },
      kind: v,
    }));
    const phases = await readPhases(ctx, `content ${v}`, { kind: 'static', slots: s.connections, requests, expectStatus: 200 });
    return finishResult(base, phases, null);
  },
};
