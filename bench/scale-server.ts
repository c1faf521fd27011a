/**
 * A repohost server that a scale scenario starts on a data directory of its own: the repository
 * count curve restarts it to time the start-up at each size, and the write-bytes curve reads its
 * process's I/O counters. The scenario context it hands out points at this server.
 */
import os from 'node:os';
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { ApiClient } from './api-client.js';
import type { ScenarioContext, Target } from './scenarios/types.js';
import { createOrgAndKey, startRepohost } from './server-process.js';
import type { RunningServer } from './server-process.js';
import { createSigner } from './tokens.js';

const ORG = 'bench';

export class OwnServer {
  private starts = 1;

  private constructor(
    private server: RunningServer,
    private client: ApiClient,
    readonly dataDir: string,
    private readonly workers: number,
    private readonly base: ScenarioContext,
    private readonly sign: () => Promise<string>,
  ) {}

  /** Creates the data directory (org and key with the CLI) and starts the server on it. */
  static async start(base: ScenarioContext, name: string): Promise<OwnServer> {
    const dataDir = await mkdtemp(join(base.workDir, `${name}-`));
    const key = await createOrgAndKey(dataDir, ORG);
    const sign = await createSigner(key);
    const workers = base.target?.workers ?? os.availableParallelism();
    const server = await startRepohost({ dataDir, workers, logFile: `${dataDir}-1.log` });
    return new OwnServer(server, new ApiClient(server.url, ORG, await sign()), dataDir, workers, { ...base, key }, sign);
  }

  get api(): ApiClient {
    return this.client;
  }

  get pid(): number {
    return this.server.pid;
  }

  get metricsUrl(): string | null {
    return this.server.metricsPort === null ? null : `http://${this.server.host}:${this.server.metricsPort}/metrics`;
  }

  /** A scenario context whose target, API client and tokens are this server's. */
  context(): ScenarioContext {
    const target: Target = { url: this.server.url, host: this.server.host, port: this.server.port, org: ORG, workers: this.workers };
    return { ...this.base, target, api: this.client, token: this.sign };
  }

  /** A fresh token for the set-up client (long builds outlive one token's hour). */
  async renewToken(): Promise<void> {
    this.client.setToken(await this.sign());
  }

  /** Stops the server and starts it again on the same data; returns seconds until it listened. */
  async restart(): Promise<number> {
    await this.client.close();
    await this.server.stop();
    const started = performance.now();
    this.server = await startRepohost({ dataDir: this.dataDir, workers: this.workers, logFile: `${this.dataDir}-${++this.starts}.log` });
    const seconds = (performance.now() - started) / 1000;
    this.client = new ApiClient(this.server.url, ORG, await this.sign());
    return seconds;
  }

  async stop(): Promise<void> {
    await this.client.close();
    await this.server.stop();
  }
}
