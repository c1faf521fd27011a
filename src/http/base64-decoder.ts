import { invalid } from '../errors.js';

const BASE64_CHARS = /^[A-Za-z0-9+/]*$/;
const LINE_BREAKS = /[\r\n]/g;
/** base64url's two characters, which Node's base64 decoder would also accept. */
const URL_SAFE = /[-_]/;
const EMPTY = Buffer.alloc(0);

/** Strict base64 (standard alphabet, optional padding, line breaks ignored) of a whole string. */
export function isValidBase64(text: string): boolean {
  const s = text.replace(LINE_BREAKS, '');
  const body = s.endsWith('==') ? s.slice(0, -2) : s.endsWith('=') ? s.slice(0, -1) : s;
  if (!BASE64_CHARS.test(body)) return false;
  if (body.length !== s.length) return s.length % 4 === 0;
  return body.length % 4 !== 1;
}

/** Decodes base64 arriving in pieces; rejects anything that is not strict base64. */
export class Base64Decoder {
  private rest = '';
  private ended = false;

  /** `where` names the content in error messages (`ops[3]`). */
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

  /** The bytes of a last, unpadded partial quartet. */
  end(): Buffer {
    const s = this.rest;
    this.rest = '';
    if (s.length % 4 === 1) throw invalid(`${this.where}: invalid base64 length`);
    return s.length === 0 ? EMPTY : Buffer.from(s, 'base64');
  }
}
