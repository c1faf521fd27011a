import { jsonParser, type Token } from 'stream-json/core/parser.js';
import { ServiceError, invalid } from '../errors.js';
import type { Storage } from '../storage/database.js';
import { BlobStager, type StagedBlob } from '../storage/blob-store.js';
import { CHUNK_SIZE, readChunk } from '../storage/git-object-store.js';
import { checkKey, loneSurrogate, notUtf8, parseJsonBody } from './json-body.js';
import { CONTENT_ENCODINGS, MAX_WRITE_ITEMS, type ContentEncoding } from '../protocol/schemas/changes.js';

/**
 * Reading the body of a file-writing request (`POST/PATCH …/changes`, `POST …/apply-ops`).
 *
 * Small bodies (declared length up to `SMALL_BODY_BYTES`) are read whole and parsed with
 * `JSON.parse`: the common agent write (a few KiB files) stays cheap, and its file contents go to
 * the actor inline, as the client sent them.
 *
 * Anything larger, or a body without a declared length, is parsed as a stream (stream-json's
 * tokenizer, strings delivered in pieces): every `content` string of the body's file list is
 * decoded (UTF-8 or base64) piece by piece as it arrives. A content up to 1 MiB stays in memory
 * (within a per-request budget); a larger one is staged into the `chunks` database while it
 * streams (`BlobStager`), so a 512 MiB file is never one string or one buffer. Everything else in
 * the body is small and is assembled into a plain object (content replaced by `""`) for the route
 * to validate against its JSON Schema. Limits are enforced while streaming: decoded content per
 * file and per request (413), the number of items (400), the size of the rest of the body (413).
 */
export const SMALL_BODY_BYTES = 256 * 1024;
export const MAX_CONTENT_BYTES = 512 * 1024 * 1024;
/** Raw body limit of the writing routes: 512 MiB of content in base64 plus JSON around it. */
export const WRITE_BODY_LIMIT = 700 * 1024 * 1024;
/** Everything but file contents (paths, messages, resolutions) must fit in this many characters. */
const MAX_OTHER_CHARS = 64 * 1024 * 1024;
/** Decoded contents kept in memory per request; beyond it contents are staged even when small. */
const INLINE_BUDGET = 8 * 1024 * 1024;
/** Characters of a content gathered before decoding them at once (the parser delivers ≤ 256). */
const DECODE_BATCH_CHARS = 64 * 1024;
/**
 * The tokenizer runs on the front end's thread at about a microsecond per token, so a body dense
 * with small values (2 MiB of `0,` took 4 s) would hold every other request back: text is
 * tokenized in slices, and once parsing has held the thread this long it lets the others run.
 */
const TOKENIZE_SLICE_CHARS = 16 * 1024;
const HOLD_THREAD_MS = 10;

const isEncoding = (value: unknown): value is ContentEncoding => (CONTENT_ENCODINGS as readonly unknown[]).includes(value);

/** A file content as the route hands it to the actor. */
export type ContentRef =
  /** Decoded while streaming, small enough to travel in the actor message. */
  | { kind: 'bytes'; bytes: Buffer }
  /** Staged in the chunks database; the actor commits it. */
  | { kind: 'staged'; blob: StagedBlob };

export interface ParsedWriteBody {
  body: Record<string, unknown>;
  /** Content of item `i` of the file list, by index (streamed bodies only). */
  contents: Map<number, ContentRef>;
  /** Deletes everything staged for this request (call when the request fails). */
  discard(): Promise<void>;
}

export interface WriteBodyOptions {
  storage: Storage;
  repoId: string;
  /** The body's file list whose items carry `content` (`ops` or `files`). */
  listKey: 'ops' | 'files';
  /** Encoding of a content whose item gives none. */
  defaultEncoding: ContentEncoding;
  /** The default is the only encoding (`files` of §5.3 are always base64). */
  encodingFixed: boolean;
}

const tooLarge = (what: string): ServiceError => new ServiceError('PAYLOAD_TOO_LARGE', `${what} exceeds the limit of ${MAX_CONTENT_BYTES} bytes (512 MiB)`, { limit_bytes: MAX_CONTENT_BYTES });

const BASE64_CHARS = /^[A-Za-z0-9+/]*$/;
const LINE_BREAKS = /[\r\n]/g;
/** base64url's two characters, which Node's base64 decoder would also accept. */
const URL_SAFE = /[-_]/;

/** Strict base64 (standard alphabet, optional padding, line breaks ignored) of a whole string. */
export function isValidBase64(text: string): boolean {
  const s = text.replace(LINE_BREAKS, '');
  const body = s.endsWith('==') ? s.slice(0, -2) : s.endsWith('=') ? s.slice(0, -1) : s;
  if (!BASE64_CHARS.test(body)) return false;
  if (body.length !== s.length) return s.length % 4 === 0;
  return body.length % 4 !== 1;
}

/** Decodes base64 arriving in pieces; rejects anything that is not strict base64. */
class Base64Decoder {
  private rest = '';
  private ended = false;

  constructor(private readonly where: string) {}

  /** Decoded bytes of the complete quartets so far. */
  write(piece: string): Buffer {
    const s = this.rest + piece;
    // Fast path, no padding yet: Node's decoder skips characters outside the alphabet, so a
    // decoded length of exactly 3 bytes per quartet proves every character was valid.
    if (!this.ended && s.indexOf('=') < 0) {
      const whole = s.length - (s.length % 4);
      const bytes = whole === 0 ? EMPTY : Buffer.from(s.slice(0, whole), 'base64');
      if (bytes.length === (whole / 4) * 3 && !URL_SAFE.test(s)) {
        this.rest = s.slice(whole);
        return bytes;
      }
    }
    return this.strict(s);
  }

  /** The careful path: line breaks dropped, every character checked, padding only at the end. */
  private strict(text: string): Buffer {
    let s = text.replace(LINE_BREAKS, '');
    if (this.ended && s.length > 0 && !/^=*$/.test(s)) throw invalid(`${this.where}: invalid base64 (data after padding)`);
    const pad = s.indexOf('=');
    if (pad >= 0) {
      if (!/^=*$/.test(s.slice(pad)) || s.length - pad > 2) throw invalid(`${this.where}: invalid base64 padding`);
      this.ended = true;
    }
    if (!BASE64_CHARS.test(pad >= 0 ? s.slice(0, pad) : s)) throw invalid(`${this.where}: content is not valid base64`);
    const whole = pad >= 0 ? s.length : s.length - (s.length % 4);
    this.rest = s.slice(whole);
    s = s.slice(0, whole);
    return s.length === 0 ? EMPTY : Buffer.from(s, 'base64');
  }

  end(): Buffer {
    const s = this.rest;
    this.rest = '';
    if (s.length % 4 === 1) throw invalid(`${this.where}: invalid base64 length`);
    return s.length === 0 ? EMPTY : Buffer.from(s, 'base64');
  }
}

const EMPTY = Buffer.alloc(0);

/** Running totals of one request, shared by its contents. */
interface Budget {
  decoded: number;
  inMemory: number;
  other: number;
}

/**
 * Where one content's decoded bytes go: memory up to one chunk (within the request's budget),
 * then a stager. With an encoding not known yet (the item's `encoding` key comes after
 * `content`), the raw characters are kept as UTF-8 and decoded when the item ends.
 */
class ContentSink {
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
    private readonly opts: WriteBodyOptions,
    private readonly budget: Budget,
    private readonly mode: ContentEncoding | 'pending',
    private readonly where: string,
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
    this.stager = new BlobStager(this.opts.storage, this.opts.repoId);
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
    const sink = new ContentSink(this.opts, this.budget, 'base64', this.where, this.stagers);
    if (this.stager === null) {
      for (const piece of this.memory) await sink.write(piece.toString('latin1'));
      return sink.finish('base64');
    }
    const chunks = await this.stager.flush();
    for (let i = 0; i < chunks; i++) await sink.write(readChunk(this.opts.storage, this.opts.repoId, this.stager.uploadId, i).toString('latin1'));
    const result = await sink.finish('base64');
    await this.stager.discard();
    return result;
  }
}

type Container = Record<string, unknown> | unknown[];
interface Frame {
  value: Container;
  /** The key awaiting its value (objects). */
  key: string | null;
  /** The key this container sits under in its parent object (null in arrays and at the top). */
  name: string | null;
}

const NONE = Symbol.for('object-stream.none');
const MANY = Symbol.for('object-stream.many');

/** Parses a streamed body; see the module comment. */
async function parseStreamed(stream: AsyncIterable<Uint8Array>, opts: WriteBodyOptions, stagers: BlobStager[]): Promise<Omit<ParsedWriteBody, 'discard'>> {
  const parse = jsonParser({ packKeys: true, streamKeys: false, packStrings: false, streamStrings: true, packNumbers: true, streamNumbers: false });
  const text = new TextDecoder('utf-8', { fatal: true });
  const budget: Budget = { decoded: 0, inMemory: 0, other: 0 };
  const contents = new Map<number, ContentRef>();
  const frames: Frame[] = [];
  let root: unknown = undefined;
  let sink: ContentSink | null = null;
  let pieces: string[] = [];
  const sinks = new Map<Container, { index: number; sink: ContentSink }>();

  const addValue = (value: unknown): void => {
    const top = frames[frames.length - 1];
    if (!top) {
      root = value;
      return;
    }
    if (Array.isArray(top.value)) top.value.push(value);
    else {
      top.value[top.key!] = value;
      top.key = null;
    }
  };
  const countOther = (n: number): void => {
    budget.other += n;
    if (budget.other > MAX_OTHER_CHARS) throw new ServiceError('PAYLOAD_TOO_LARGE', `the request body outside file contents exceeds ${MAX_OTHER_CHARS} characters`);
  };
  /** The item of the file list that the innermost object is, with its index, or null. */
  const contentItem = (): { item: Record<string, unknown>; index: number } | null => {
    if (frames.length !== 3) return null;
    const [top, list, item] = frames as [Frame, Frame, Frame];
    if (Array.isArray(top.value) || list.name !== opts.listKey || !Array.isArray(list.value) || Array.isArray(item.value)) return null;
    return { item: item.value, index: list.value.length - 1 };
  };

  const finishItem = async (item: Container, pending: { index: number; sink: ContentSink }): Promise<void> => {
    sinks.delete(item);
    const fields = item as Record<string, unknown>;
    const encoding = !opts.encodingFixed && isEncoding(fields.encoding) ? fields.encoding : opts.defaultEncoding;
    contents.set(pending.index, await pending.sink.finish(encoding));
  };

  /** Handles one token; returns a promise only when it has to wait (staging, finishing a content). */
  const onToken = (token: Token): Promise<void> | undefined => {
    switch (token.name) {
      case 'startObject':
      case 'startArray': {
        const value: Container = token.name === 'startObject' ? {} : [];
        const name = frames[frames.length - 1]?.key ?? null;
        addValue(value);
        frames.push({ value, key: null, name });
        const list = frames[1];
        if (frames.length === 3 && list!.name === opts.listKey && Array.isArray(list!.value) && list!.value.length > MAX_WRITE_ITEMS) {
          // The schema's own bound, checked as the items arrive rather than once they are all held.
          throw invalid(`"${opts.listKey}" has more than ${MAX_WRITE_ITEMS} items`);
        }
        return;
      }
      case 'endObject':
      case 'endArray': {
        const done = frames.pop()!;
        const pending = sinks.get(done.value);
        return pending ? finishItem(done.value, pending) : undefined;
      }
      case 'keyValue':
        countOther(token.value.length);
        checkKey(token.value);
        if (!token.value.isWellFormed()) throw loneSurrogate();
        frames[frames.length - 1]!.key = token.value;
        return;
      case 'startString': {
        const target = frames[frames.length - 1]?.key === 'content' ? contentItem() : null;
        if (target) {
          if (sinks.has(target.item)) throw invalid(`${opts.listKey}[${target.index}]: "content" is given twice`);
          const known = target.item.encoding;
          let mode: ContentEncoding | 'pending' = opts.defaultEncoding;
          if (!opts.encodingFixed) mode = isEncoding(known) ? known : known === undefined || known === null ? 'pending' : mode;
          sink = new ContentSink(opts, budget, mode, `${opts.listKey}[${target.index}]`, stagers);
          sinks.set(target.item, { index: target.index, sink });
        } else pieces = [];
        return;
      }
      case 'stringChunk':
        if (sink) return sink.write(token.value);
        else {
          countOther(token.value.length);
          pieces.push(token.value);
        }
        return;
      case 'endString':
        if (sink) {
          sink = null;
          addValue('');
        } else {
          const value = pieces.length === 1 ? pieces[0]! : pieces.join('');
          if (!value.isWellFormed()) throw loneSurrogate();
          addValue(value);
        }
        return;
      case 'numberValue':
        countOther(token.value.length);
        addValue(Number(token.value));
        return;
      case 'trueValue':
      case 'falseValue':
      case 'nullValue':
        addValue(token.value);
        return;
      default:
        return;
    }
  };

  const feed = async (result: unknown): Promise<void> => {
    if (result === NONE || result === undefined) return;
    const tokens = (result as Record<symbol, unknown>)[MANY] === 1 ? (result as { values: Token[] }).values : [result as Token];
    for (const token of tokens) {
      const wait = onToken(token);
      if (wait) await wait;
    }
  };

  /** Tokens of the next piece of text: anything the tokenizer or the decoder refuses is the client's malformed body. */
  const tokens = (input: string | typeof NONE): unknown => {
    try {
      return parse(input as never);
    } catch {
      throw invalid('malformed JSON body');
    }
  };
  const decode = (chunk?: Uint8Array): string => {
    try {
      return chunk ? text.decode(chunk, { stream: true }) : text.decode();
    } catch {
      throw notUtf8();
    }
  };
  let held = performance.now();
  for await (const chunk of stream) {
    const text = decode(chunk);
    for (let at = 0; at < text.length; at += TOKENIZE_SLICE_CHARS) {
      await feed(tokens(text.length <= TOKENIZE_SLICE_CHARS ? text : text.slice(at, at + TOKENIZE_SLICE_CHARS)));
      if (performance.now() - held > HOLD_THREAD_MS) {
        await new Promise<void>((resolve) => setImmediate(resolve));
        held = performance.now();
      }
    }
  }
  const tail = decode();
  if (tail) await feed(tokens(tail));
  await feed(tokens(NONE));
  if (root === undefined) return { body: {}, contents };
  if (typeof root !== 'object' || root === null || Array.isArray(root)) throw invalid('request body must be a JSON object');
  return { body: root as Record<string, unknown>, contents };
}

async function readWhole(stream: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Buffer[] = [];
  let total = 0;
  for await (const chunk of stream) {
    parts.push(chunk as Buffer);
    total += chunk.byteLength;
  }
  return parts.length === 1 ? parts[0]! : Buffer.concat(parts, total);
}

/**
 * Reads a file-writing request body (see the module comment). The caller validates `body` and
 * must call `discard()` when the request fails before an actor took the staged blobs.
 */
export async function readWriteBody(stream: AsyncIterable<Uint8Array>, headers: Record<string, string>, opts: WriteBodyOptions): Promise<ParsedWriteBody> {
  const declared = headers['content-length'] ? Number(headers['content-length']) : NaN;
  const type = headers['content-type'] ?? '';
  const stagers: BlobStager[] = [];
  const discard = async (): Promise<void> => {
    await Promise.allSettled(stagers.map((s) => s.discard()));
  };
  if (declared === 0) return { body: {}, contents: new Map(), discard };
  if (!/^application\/json\s*(;|$)/i.test(type)) throw invalid('request body must be JSON with Content-Type: application/json');
  if (Number.isFinite(declared) && declared <= SMALL_BODY_BYTES) {
    const raw = await readWhole(stream);
    if (raw.length === 0) return { body: {}, contents: new Map(), discard };
    const body = parseJsonBody(raw);
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalid('request body must be a JSON object');
    return { body: body as Record<string, unknown>, contents: new Map(), discard };
  }
  try {
    const parsed = await parseStreamed(stream, opts, stagers);
    return { ...parsed, discard };
  } catch (err) {
    await discard();
    throw err;
  }
}
