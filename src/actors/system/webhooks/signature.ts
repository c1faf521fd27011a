import { createHmac, createSecretKey, type KeyObject } from 'node:crypto';

/**
 * The delivery signature (API §11.3): `t=<unix seconds>,sha256=<hex>`, the hex being
 * HMAC-SHA256 keyed with the whole `whsec_…` string over `<t>.<raw body>`. The key may be given
 * as a `KeyObject` made once per secret (`signingKey`), which spares setting it up per signature.
 */
export function signatureHeader(secret: string | KeyObject, body: string | Buffer, unixSeconds: number): string {
  const mac = createHmac('sha256', secret).update(`${unixSeconds}.`).update(body).digest('hex');
  return `t=${unixSeconds},sha256=${mac}`;
}

/** A secret as the HMAC key `signatureHeader` takes, made once per secret. */
export function signingKey(secret: string): KeyObject {
  return createSecretKey(Buffer.from(secret, 'utf8'));
}

/**
 * The headers of delivery attempts, named after the brand word (`REPOHOST_BRAND`): the names and
 * fixed values made once, each attempt's headers a flat [name, value, …] list (undici's cheapest
 * form: no object, no key list to walk).
 */
export class DeliveryHeaders {
  private readonly userAgent: string;
  private readonly event: string;
  private readonly delivery: string;
  private readonly signature: string;

  constructor(brand: string) {
    this.userAgent = `${brand}-Webhook/1.0`;
    this.event = `X-${brand}-Event`;
    this.delivery = `X-${brand}-Delivery`;
    this.signature = `X-${brand}-Signature`;
  }

  of(eventType: string, deliveryId: string, signature: string): string[] {
    return ['content-type', 'application/json', 'user-agent', this.userAgent, this.event, eventType, this.delivery, deliveryId, this.signature, signature];
  }
}
