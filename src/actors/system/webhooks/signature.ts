import { createHmac } from 'node:crypto';

/**
 * The delivery signature (API §11.3): `t=<unix seconds>,sha256=<hex>`, the hex being
 * HMAC-SHA256 keyed with the whole `whsec_…` string over `<t>.<raw body>`.
 */
export function signatureHeader(secret: string, body: string | Buffer, unixSeconds: number): string {
  const mac = createHmac('sha256', secret).update(`${unixSeconds}.`).update(body).digest('hex');
  return `t=${unixSeconds},sha256=${mac}`;
}

/** The headers of one delivery attempt, named after the brand word (`REPOHOST_BRAND`). */
export function deliveryHeaders(brand: string, eventType: string, deliveryId: string, signature: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'user-agent': `${brand}-Webhook/1.0`,
    [`X-${brand}-Event`]: eventType,
    [`X-${brand}-Delivery`]: deliveryId,
    [`X-${brand}-Signature`]: signature,
  };
}
