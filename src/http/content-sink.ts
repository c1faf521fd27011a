import { ServiceError, invalid } from '../errors.js';
import type { Storage } from '../storage/database.js';
import { BlobStager, type StagedBlob } from '../storage/blob-store.js';
import { CHUNK_SIZE, readChunk } from '../storage/git-object-store.js';
import type { ContentEncoding } from '../protocol/schemas/changes.js';
import { Base64Decoder } from './base64-decoder.js';
import { loneSurrogate } from './json-body.js';

export const MAX_CONTENT_BYTES = 512 * 1024 * 1024;
/** Decoded contents kept in memory per request; beyond it contents are staged even when small. */
const INLINE_BUDGET = 8 * 1024 * 1024;
/** Characters of a content gathered before decoding them at once (the parser delivers ≤ 256). */
const DECODE_BATCH_CHARS = 64 * 1024;

const tooLarge = (what: string): ServiceError => new ServiceError('PAYLOAD_TOO_LARGE', `${what} exceeds the limit of ${MAX_CONTENT_BYTES} bytes (512 MiB)`, { limit_bytes: MAX_CONTENT_BYTES });

/** A file content as the route hands it to the actor. */
export type ContentRef =
  /** Decoded while streaming, small enough to travel in the actor message. */
  | { kind: 'bytes'; bytes: Buffer }
  /** Staged in the chunks database; the actor commits it. */
  | { kind: 'staged'; blob: StagedBlob };

/** Running totals of one request, shared by its contents. */
export interface Budget {
  decoded: number;
  inMemory: number;
}

/** The repository whose chunks a large content is staged into. */
export interface StagingTarget {
  storage: Storage;
  repoId: string;
}

/**
 * Where one content's decoded bytes go: memory up to one chunk (within the request's budget),
 * then a stager. With an encoding not known yet (the item's `encoding` key comes after
 * `content`), the raw characters are kept as UTF-8 and decoded when the item ends. Limits are
 * enforced as the bytes arrive: decoded content per file and per request (413).
 */
export class ContentSink {
  private memory: Buffer[] = [];
  private memoryBytes = 0;
  private stager: BlobStager | null = null;
  private readonly decoder: Base64Decoder | null;
  private bytes = 0;
  /** Pending mode: whether every character so far could be base64 (decides the size bound). */
  private base64Compatible = true;
  private counted = 0;
  private pieces: string[] = [];
  private pieceChars = 0;

  constructor(
    private readonly target: StagingTarget,
    private readonly budget: Budget,
    private readonly mode: ContentEncoding | 'pending',
    private readonly where: string,
    /** Every stager of the request, so that a failed request can discard them all. */
    private readonly stagers: BlobStager[],
  ) {
    this.decoder = mode === 'base64' ? new Base64Decoder(where) : null;
  }

  write(piece: string): Promise<void> | undefined {
    this.pieces.push(piece);
    this.pieceChars += piece.length;
    return this.pieceChars >= DECODE_BATCH_CHARS ? this.decode() : undefined;
  }

  /**
   * Decodes the characters gathered so far (in batches: per-piece decoding dominated the cost).
   * Text is checked to be well-formed UTF-16 before it becomes UTF-8; a high surrogate that ends a
   * batch waits for its other half in the next one.
   */
  private decode(final = false): Promise<void> | undefined {
    if (this.pieceChars === 0) return undefined;
    let text = this.pieces.length === 1 ? this.pieces[0]! : this.pieces.join('');
    this.pieces = [];
    this.pieceChars = 0;
    if (!this.decoder) {
      const last = text.charCodeAt(text.length - 1);
      if (!final && last >= 0xd800 && last <= 0xdbff) {
        this.pieces.push(text.slice(-1));
        this.pieceChars = 1;
        text = text.slice(0, -1);
      }
      if (!text.isWellFormed()) throw loneSurrogate();
    }
    if (this.mode === 'pending' && this.base64Compatible && !/^[A-Za-z0-9+/=\r\n]*$/.test(text)) this.base64Compatible = false;
    return this.push(this.decoder ? this.decoder.write(text) : Buffer.from(text, 'utf8'));
  }

  /** The smallest decoded size the content can have so far (what the 413 decision may use). */
  private lowerBound(): number {
    if (this.mode !== 'pending' || !this.base64Compatible) return this.bytes;
    return Math.floor((this.bytes * 3) / 4);
  }

  private push(bytes: Buffer): Promise<void> | undefined {
    if (bytes.length === 0) return undefined;
    this.bytes += bytes.length;
    const bound = this.lowerBound();
    this.budget.decoded += bound - this.counted;
    this.counted = bound;
    if (bound > MAX_CONTENT_BYTES) throw tooLarge(`${this.where}: the file`);
    if (this.budget.decoded > MAX_CONTENT_BYTES) throw tooLarge('the decoded content of the request');
    if (this.stager) return this.stager.append(bytes);
    this.memory.push(bytes);
    this.memoryBytes += bytes.length;
    this.budget.inMemory += bytes.length;
    if (this.memoryBytes > CHUNK_SIZE || this.budget.inMemory > INLINE_BUDGET) return this.spill();
    return undefined;
  }

  private async spill(): Promise<void> {
    this.stager = new BlobStager(this.target.storage, this.target.repoId);
    this.stagers.push(this.stager);
    const held = this.memory;
    this.budget.inMemory -= this.memoryBytes;
    this.memory = [];
    this.memoryBytes = 0;
    for (const piece of held) await this.stager.append(piece);
  }

  /** Finishes the content once its item (and so its `encoding`) is complete. */
  async finish(encoding: ContentEncoding): Promise<ContentRef> {
    await this.decode(true);
    if (this.decoder) await this.push(this.decoder.end());
    if (this.mode === 'pending' && encoding === 'base64') return this.transcode();
    // Final accounting with the real size (a pending UTF-8 content counted a lower bound).
    this.budget.decoded += this.bytes - this.counted;
    this.counted = this.bytes;
    if (this.bytes > MAX_CONTENT_BYTES) throw tooLarge(`${this.where}: the file`);
    if (this.budget.decoded > MAX_CONTENT_BYTES) throw tooLarge('the decoded content of the request');
    if (this.stager) return { kind: 'staged', blob: await this.stager.finish() };
    return { kind: 'bytes', bytes: this.memory.length === 1 ? this.memory[0]! : Buffer.concat(this.memory, this.memoryBytes) };
  }

  /** The raw characters turned out to be base64: decode them into a new sink. */
  private async transcode(): Promise<ContentRef> {
    if (!this.base64Compatible) throw invalid(`${this.where}: content is not valid base64`);
    this.budget.decoded -= this.counted;
    if (this.stager === null) this.budget.inMemory -= this.memoryBytes;
    const sink = new ContentSink(this.target, this.budget, 'base64', this.where, this.stagers);
    if (this.stager === null) {
      for (const piece of this.memory) await sink.write(piece.toString('latin1'));
      return sink.finish('base64');
    }
    const chunks = await this.stager.flush();
    for (let i = 0; i < chunks; i++) await sink.write(readChunk(this.target.storage, this.target.repoId, this.stager.uploadId, i).toString('latin1'));
    const result = await sink.finish('base64');
    await this.stager.discard();
    return result;
  }
}
