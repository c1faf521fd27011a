/**
 * A repohost server that a scale scenario starts on a data directory of its own: the repository
 * count curve restarts it to time the start-up and keeps a copy of the data directory per size,
 * and the write-bytes curve reads its process's I/O counters. The scenario context it hands out
 * points at this server.
 */
import os from 'node:os';
import { cp, mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { ApiClient } from './api-client.js';
import type { ScenarioContext, Target } from './scenarios/types.js';
import { createOrgAndKey, metricsUrlOf, startRepohost } from './server-process.js';
import type { RunningServer } from './server-process.js';
import { createSigner } from './tokens.js';

const ORG = 'bench';

export class OwnServer {
  private running: { server: RunningServer; client: ApiClient } | null = null;
  private starts = 0;

  private constructor(
    readonly dataDir: string,
    private readonly workers: number,
    private readonly base: ScenarioContext,
    private readonly sign: () => Promise<string>,
  ) {}

  /** A new data directory (org and admin key made with the CLI), server started on it. */
  static async create(base: ScenarioContext, name: string): Promise<OwnServer> {
    const dataDir = await mkdtemp(join(base.workDir, `${name}-`));
    const key = await createOrgAndKey(dataDir, ORG);
    const own = new OwnServer(dataDir, base.target?.workers ?? os.availableParallelism(), { ...base, key }, await createSigner(key));
    await own.start();
    return own;
  }

  /**
   * A copy of the data directory as it is now, for a server of its own (not started). This
   * server is stopped for the copy, so LMDB's file is consistent, and started again.
   */
  async snapshot(name: string): Promise<OwnServer> {
    const dataDir = await mkdtemp(join(this.base.workDir, `${name}-`));
    await this.stop();
    await cp(this.dataDir, dataDir, { recursive: true });
    await this.start();
    return new OwnServer(dataDir, this.workers, this.base, this.sign);
  }

  private get live(): { server: RunningServer; client: ApiClient } {
    if (!this.running) throw new Error(`the server on ${this.dataDir} is not running`);
    return this.running;
  }

  get api(): ApiClient {
    return this.live.client;
  }

  get pid(): number {
    return this.live.server.pid;
  }

  get metricsUrl(): string | null {
    return metricsUrlOf(this.live.server);
  }

  /** A scenario context whose target, API client and tokens are this server's. */
  context(): ScenarioContext {
    const { server, client } = this.live;
    const target: Target = { url: server.url, host: server.host, port: server.port, org: ORG, workers: this.workers, metricsUrl: metricsUrlOf(server) };
    return { ...this.base, target, api: client, token: this.sign };
  }

  /** A fresh token for the set-up client (long builds outlive one token's hour). */
  async renewToken(): Promise<void> {
    this.live.client.setToken(await this.sign());
  }

  /** Starts the server; returns the seconds from spawn until it listened. */
  async start(): Promise<number> {
    if (this.running) throw new Error(`the server on ${this.dataDir} is already running`);
    const started = performance.now();
    const server = await startRepohost({ dataDir: this.dataDir, workers: this.workers, logFile: `${this.dataDir}-${++this.starts}.log` });
    const seconds = (performance.now() - started) / 1000;
    this.running = { server, client: new ApiClient(server.url, ORG, await this.sign()) };
    return seconds;
  }

  async stop(): Promise<void> {
    if (!this.running) return;
    const { server, client } = this.running;
    this.running = null;
    await client.close();
    await server.stop();
  }
}
