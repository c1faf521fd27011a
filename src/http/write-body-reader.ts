import { jsonParser, type Token } from 'stream-json/core/parser.js';
import { getManyValues, none, type Many } from 'stream-chain/defs.js';
import { ServiceError, invalid } from '../errors.js';
import type { Storage } from '../storage/database.js';
import type { BlobStager } from '../storage/blob-store.js';
import { checkKey, loneSurrogate, notUtf8, parseJsonBody } from './json-body.js';
import { CONTENT_ENCODINGS, MAX_WRITE_ITEMS, type ContentEncoding } from '../protocol/schemas/changes.js';
import { ContentSink, type Budget, type ContentRef } from './content-sink.js';
import { FRONT_END_SLICE_MS, TimeSlice } from '../time-slice.js';

/** Bodies declared up to this length are read whole and parsed with `JSON.parse`. */
export const SMALL_BODY_BYTES = 256 * 1024;
/** Raw body limit of the writing routes: 512 MiB of content in base64 plus JSON around it. */
export const WRITE_BODY_LIMIT = 700 * 1024 * 1024;
/** Everything but file contents (paths, messages, resolutions) must fit in this many characters. */
const MAX_OTHER_CHARS = 64 * 1024 * 1024;
/**
 * Values (objects, arrays, strings, numbers, literals) outside file contents: each is held as a
 * JavaScript value until the body ends, at tens of bytes even when its text is one character, so
 * the character budget alone would let `[[[[…` or `[null,null,…` fill the heap. 10,000 items
 * with a hundred fields each fit.
 */
const MAX_VALUES = 1024 * 1024;
/** Nesting of the body's containers; the writing routes' bodies nest five deep at most. */
const MAX_DEPTH = 32;
/**
 * The tokenizer runs on the front end's thread at about a microsecond per token, so a body dense
 * with small values (2 MiB of `0,` took 4 s) would hold every other request back: text is
 * tokenized in pieces of this many characters, and once parsing has held the thread for
 * `FRONT_END_SLICE_MS` it lets the others run.
 */
const TOKENIZE_SLICE_CHARS = 16 * 1024;

const isEncoding = (value: unknown): value is ContentEncoding => (CONTENT_ENCODINGS as readonly unknown[]).includes(value);

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

type Container = Record<string, unknown> | unknown[];
interface Frame {
  value: Container;
  /** The key awaiting its value (objects). */
  key: string | null;
  /** The key this container sits under in its parent object (null in arrays and at the top). */
  name: string | null;
}

/** stream-json's tokenizer; stream-chain ends a stage by calling it with `none`, which its type leaves out. */
type Tokenizer = (input: string | typeof none) => Many<Token> | typeof none;

/** Parses a streamed body; see `readWriteBody`. */
async function parseStreamed(stream: AsyncIterable<Uint8Array>, opts: WriteBodyOptions, stagers: BlobStager[]): Promise<Omit<ParsedWriteBody, 'discard'>> {
  // Keys and numbers arrive in pieces too, so that no piece of text is held whole before it is counted.
  const parse = jsonParser({ packKeys: false, streamKeys: true, packStrings: false, streamStrings: true, packNumbers: false, streamNumbers: true }) as Tokenizer;
  const text = new TextDecoder('utf-8', { fatal: true });
  const budget: Budget = { decoded: 0, inMemory: 0 };
  let otherChars = 0;
  let values = 0;
  const contents = new Map<number, ContentRef>();
  const frames: Frame[] = [];
  let root: unknown = undefined;
  let sink: ContentSink | null = null;
  let pieces: string[] = [];
  const sinks = new Map<Container, { index: number; sink: ContentSink }>();

  const addValue = (value: unknown): void => {
    if (++values > MAX_VALUES) throw new ServiceError('PAYLOAD_TOO_LARGE', `the request body holds more than ${MAX_VALUES} values outside file contents`);
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
    otherChars += n;
    if (otherChars > MAX_OTHER_CHARS) throw new ServiceError('PAYLOAD_TOO_LARGE', `the request body outside file contents exceeds ${MAX_OTHER_CHARS} characters`);
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
        if (frames.length === MAX_DEPTH) throw invalid(`the request body nests deeper than ${MAX_DEPTH} levels`);
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
      case 'startKey':
      case 'startNumber':
        pieces = [];
        return;
      case 'endKey': {
        const key = pieces.join('');
        checkKey(key);
        if (!key.isWellFormed()) throw loneSurrogate();
        frames[frames.length - 1]!.key = key;
        return;
      }
      case 'numberChunk':
        countOther(token.value.length);
        pieces.push(token.value);
        return;
      case 'endNumber':
        addValue(Number(pieces.join('')));
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
      case 'trueValue':
      case 'falseValue':
      case 'nullValue':
        addValue(token.value);
        return;
      default:
        return;
    }
  };

  const feed = async (result: Many<Token> | typeof none): Promise<void> => {
    if (result === none) return;
    for (const token of getManyValues(result)) {
      const wait = onToken(token);
      if (wait) await wait;
    }
  };

  /** Tokens of the next piece of text: anything the tokenizer or the decoder refuses is the client's malformed body. */
  const tokens = (input: string | typeof none): Many<Token> | typeof none => {
    try {
      return parse(input);
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
  const slice = new TimeSlice(FRONT_END_SLICE_MS);
  for await (const chunk of stream) {
    const text = decode(chunk);
    for (let at = 0; at < text.length; at += TOKENIZE_SLICE_CHARS) {
      await feed(tokens(text.length <= TOKENIZE_SLICE_CHARS ? text : text.slice(at, at + TOKENIZE_SLICE_CHARS)));
      if (slice.over) await slice.yield();
    }
  }
  const tail = decode();
  if (tail) await feed(tokens(tail));
  await feed(tokens(none));
  if (root === undefined) return { body: {}, contents };
  if (typeof root !== 'object' || root === null || Array.isArray(root)) throw invalid('request body must be a JSON object');
  return { body: root as Record<string, unknown>, contents };
}

/** The whole of a body (a bounded one: its reader enforces the route's limit). */
export async function readWhole(stream: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Buffer[] = [];
  let total = 0;
  for await (const chunk of stream) {
    parts.push(chunk as Buffer);
    total += chunk.byteLength;
  }
  return parts.length === 1 ? parts[0]! : Buffer.concat(parts, total);
}

/**
 * Reads the body of a file-writing request (`POST/PATCH …/changes`, `POST …/apply-ops`).
 *
 * Small bodies (declared length up to `SMALL_BODY_BYTES`) are read whole and parsed with
 * `JSON.parse`: the common agent write (a few KiB files) stays cheap, and its file contents are
 * decoded from the parsed strings.
 *
 * Anything larger, or a body without a declared length, is parsed as a stream (stream-json's
 * tokenizer, strings delivered in pieces): every `content` string of the body's file list goes
 * piece by piece into its own `ContentSink`, which decodes it (UTF-8 or base64) and keeps it in
 * memory or stages it into the `chunks` database, so a 512 MiB file is never one string or one
 * buffer. Everything else in the body is small and is assembled into a plain object (content
 * replaced by `""`) for the route to validate against its JSON Schema. Limits are enforced while
 * streaming: the number of items (400), the size of the rest of the body (413), and the sinks'
 * own limits on decoded content.
 *
 * The caller validates `body` and must call `discard()` when the request fails before an actor
 * took the staged blobs.
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
